//! Loading the BPF program (`bpf/syscalls.bpf.o`, embedded) with aya, attaching it, and
//! reading and writing its maps.
//!
//! The object is built from `bpf/syscalls.bpf.c` by `bpf/build.sh` and committed, so that
//! `cargo build` needs no C compiler (`.ci/run` checks that the committed object is what the
//! source builds). aya resolves its CO-RE relocations against the running kernel's BTF
//! (`/sys/kernel/btf/vmlinux`), sets its read-only globals (the scope, the syscall table, the
//! bucket bounds, the clock conversion) before the verifier sees it, and sizes its maps.
//!
//! Every link is owned by a file descriptor of this process and nothing is pinned: when the
//! [`Program`] is dropped, or the process ends however it ends (a SIGKILL included), the
//! kernel detaches and frees it.

use std::os::fd::{AsFd, AsRawFd};

use aya::maps::{Array, HashMap, MapData, PerCpuArray, PerCpuValues, RingBuf};
use aya::programs::RawTracePoint;
use aya::{Ebpf, EbpfLoader, VerifierLogLevel};

use crate::abi::{self, Hist, HotKey, HotVal, KeyedKey, KeyedVal};
use crate::refusal::{Refusal, refusal};
use crate::table;

/// The compiled program (`bpf/build.sh` makes it from `bpf/syscalls.bpf.c`).
pub static OBJECT: &[u8] = include_bytes!("../bpf/syscalls.bpf.o");

/// The programs and the raw tracepoints they attach to; every name starts with `fsprof_`, so
/// that `bpftool prog list` shows which are fsprof's (the kernel keeps 15 characters).
pub const PROGRAMS: &[(&str, &str)] = &[
    ("fsprof_sys_enter", "sys_enter"),
    ("fsprof_sys_exit", "sys_exit"),
    ("fsprof_fork", "sched_process_fork"),
    ("fsprof_exec", "sched_process_exec"),
    ("fsprof_exit", "sched_process_exit"),
];

/// What the program is loaded with: its read-only globals and map sizes.
#[derive(Debug, Clone)]
pub struct Globals {
    /// [`abi::MODE_MOUNT`] or [`abi::MODE_PROCS`].
    pub mode: u32,
    /// The process never counted (mount scope: the daemon).
    pub self_tgid: u32,
    /// The mount's path, without a trailing `/` (mount scope).
    pub mnt_path: Vec<u8>,
    /// Inode numbers at or above this on the mount are control files (0: none).
    pub ctl_ino_min: u64,
    /// The control files' names.
    pub ctl_names: Vec<String>,
    /// log2 of the resolution.
    pub res_shift: u32,
    /// The lowest latency of every bucket at that resolution.
    pub bounds: Vec<u64>,
    /// The profile's clock rate.
    pub cycles_per_sec: u64,
    /// The per-caller key kind (0: none).
    pub by_kind: u8,
    /// Per-caller entries the table holds (operations × callers).
    pub keyed_entries: u32,
    /// Whether hot files are kept, and how many files the table holds.
    pub hot_entries: Option<u32>,
    /// Events for the N slowest calls (0: none).
    pub slowest_n: u32,
}

/// The loaded, attached program and its maps.
pub struct Program {
    bpf: Ebpf,
    ops: usize,
}

fn fixed<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    let n = bytes.len().min(N - 1);
    out[..n].copy_from_slice(&bytes[..n]);
    out
}

impl Program {
    /// Loads the program with `g`, attaches it, and returns it; a refusal is one line.
    pub fn load(g: &Globals) -> Result<Program, Refusal> {
        crate::refusal::preflight()?;
        let ops = table::ops().len();
        let tab = table::sys_tab();
        let mnt: [u8; abi::MNT_MAX] = fixed(&g.mnt_path);
        let mnt_len = g.mnt_path.len().min(abi::MNT_MAX - 1) as u32;
        let mut names = [[0u8; abi::CTL_NAME_MAX]; abi::CTL_NAMES];
        let mut nlen = [0u32; abi::CTL_NAMES];
        for (i, n) in g.ctl_names.iter().take(abi::CTL_NAMES).enumerate() {
            if n.len() < abi::CTL_NAME_MAX {
                names[i] = fixed(n.as_bytes());
                nlen[i] = n.len() as u32;
            }
        }
        let mut bounds = [0u64; abi::MAX_BUCKETS];
        for (d, s) in bounds.iter_mut().zip(&g.bounds) {
            *d = *s;
        }
        let (q, r) = cycles_per_ns(g.cycles_per_sec);
        let hot_on = g.hot_entries.is_some() as u32;
        let by_kind = g.by_kind as u32;
        let mut loader = EbpfLoader::new();
        loader
            .allow_unsupported_maps()
            .verifier_log_level(VerifierLogLevel::STATS)
            .override_global("mode", &g.mode, true)
            .override_global("self_tgid", &g.self_tgid, true)
            .override_global("mnt_len", &mnt_len, true)
            .override_global("mnt_path", &mnt, true)
            .override_global("ctl_ino_min", &g.ctl_ino_min, true)
            .override_global("ctl_nlen", &nlen, true)
            .override_global("ctl_names", &names, true)
            .override_global("res_shift", &g.res_shift, true)
            .override_global("bounds", &bounds, true)
            .override_global("cyc_q", &q, true)
            .override_global("cyc_r", &r, true)
            .override_global("sys_tab", &tab, true)
            .override_global("by_kind", &by_kind, true)
            .override_global("hot_on", &hot_on, true)
            .override_global("slowest_n", &g.slowest_n, true)
            .map_max_entries("hist", ops as u32)
            .map_max_entries("keyed", g.keyed_entries.max(1))
            .map_max_entries("hot", g.hot_entries.unwrap_or(1).max(1))
            .map_max_entries("slowest_heap", heap_entries(g.slowest_n)?);
        let mut bpf = loader
            .load(OBJECT)
            .map_err(|e| refusal("loading the BPF program", &e))?;
        for (name, tp) in PROGRAMS {
            let prog: &mut RawTracePoint = bpf
                .program_mut(name)
                .ok_or_else(|| Refusal::new(format!("the BPF object has no program {name}")))?
                .try_into()
                .map_err(|e| refusal(name, &e))?;
            prog.load()
                .map_err(|e| refusal(&format!("loading program {name}"), &e))?;
            prog.attach(tp)
                .map_err(|e| refusal(&format!("raw tracepoint {tp}"), &e))?;
        }
        let mut p = Program { bpf, ops };
        if g.by_kind != 0 {
            p.make_other_entries()?;
        }
        Ok(p)
    }

    /// The `other` per-caller entry of every operation, which a full table counts into.
    fn make_other_entries(&mut self) -> Result<(), Refusal> {
        let zero = KeyedVal::default();
        let mut m: HashMap<&mut MapData, KeyedKey, KeyedVal> =
            HashMap::try_from(self.bpf.map_mut("keyed").expect("the object has map keyed"))
                .map_err(|e| refusal("map keyed", &e))?;
        for op in 0..self.ops {
            let k = KeyedKey {
                op: op as u16,
                kind: abi::BY_OTHER,
                ..KeyedKey::default()
            };
            m.insert(k, zero, 0).map_err(|e| refusal("map keyed", &e))?;
        }
        Ok(())
    }

    /// Sets `ctl` slot `slot`.
    pub fn set_ctl(&mut self, slot: u32, v: u64) -> Result<(), Refusal> {
        let mut m: Array<&mut MapData, u64> =
            Array::try_from(self.bpf.map_mut("ctl").expect("the object has map ctl"))
                .map_err(|e| refusal("map ctl", &e))?;
        m.set(slot, v, 0).map_err(|e| refusal("map ctl", &e))
    }

    /// Raises the generation in `ctl` slot `slot` (the program compares it as 32 bits).
    pub fn raise(&mut self, slot: u32) -> Result<(), Refusal> {
        let generation = self.ctl(slot);
        self.set_ctl(slot, generation.wrapping_add(1) & 0xffff_ffff)
    }

    /// Reads `ctl` slot `slot`.
    pub fn ctl(&self, slot: u32) -> u64 {
        let Some(map) = self.bpf.map("ctl") else {
            return 0;
        };
        Array::<&MapData, u64>::try_from(map)
            .ok()
            .and_then(|m| m.get(&slot, 0).ok())
            .unwrap_or(0)
    }

    /// Every operation's counts, summed over the CPUs.
    pub fn hists(&self) -> Vec<Hist> {
        let mut out = vec![Hist::default(); self.ops];
        let Some(map) = self.bpf.map("hist") else {
            return out;
        };
        let Ok(m) = PerCpuArray::<&MapData, Hist>::try_from(map) else {
            return out;
        };
        for (op, sum) in out.iter_mut().enumerate() {
            if let Ok(per_cpu) = m.get(&(op as u32), 0) {
                for h in per_cpu.iter() {
                    sum.add(h);
                }
            }
        }
        out
    }

    /// The `stats` slots, summed over the CPUs.
    pub fn stats(&self) -> [u64; abi::ST_SLOTS as usize] {
        let mut out = [0u64; abi::ST_SLOTS as usize];
        let Some(map) = self.bpf.map("stats") else {
            return out;
        };
        let Ok(m) = PerCpuArray::<&MapData, u64>::try_from(map) else {
            return out;
        };
        for (i, slot) in out.iter_mut().enumerate() {
            if let Ok(v) = m.get(&(i as u32), 0) {
                *slot = v.iter().sum();
            }
        }
        out
    }

    /// Every per-caller entry.
    pub fn keyed(&self) -> Vec<(KeyedKey, KeyedVal)> {
        let Some(map) = self.bpf.map("keyed") else {
            return Vec::new();
        };
        let Ok(m) = HashMap::<&MapData, KeyedKey, KeyedVal>::try_from(map) else {
            return Vec::new();
        };
        m.iter().filter_map(Result::ok).collect()
    }

    /// Every hot-file entry.
    pub fn hot(&self) -> Vec<(HotKey, HotVal)> {
        let Some(map) = self.bpf.map("hot") else {
            return Vec::new();
        };
        let Ok(m) = HashMap::<&MapData, HotKey, HotVal>::try_from(map) else {
            return Vec::new();
        };
        m.iter().filter_map(Result::ok).collect()
    }

    /// Removes every per-caller and hot-file entry (a reset), makes the `other` entries again,
    /// lets the hot-file table take new files again, and lowers every CPU's floor of the
    /// slowest calls to 0.
    pub fn clear_tables(&mut self) -> Result<(), Refusal> {
        let keys: Vec<KeyedKey> = self.keyed().into_iter().map(|(k, _)| k).collect();
        if let Some(map) = self.bpf.map_mut("keyed") {
            if let Ok(mut m) = HashMap::<&mut MapData, KeyedKey, KeyedVal>::try_from(map) {
                for k in keys.iter().filter(|k| k.kind != abi::BY_OTHER) {
                    let _ = m.remove(k);
                }
                let zero = KeyedVal::default();
                for k in keys.iter().filter(|k| k.kind == abi::BY_OTHER) {
                    let _ = m.insert(*k, zero, 0);
                }
            }
        }
        if let Some(map) = self.bpf.map_mut("slowest") {
            if let Ok(mut m) = PerCpuArray::<&mut MapData, abi::SlowestState>::try_from(map) {
                if let Ok(n) = aya::util::nr_cpus() {
                    if let Ok(zero) = PerCpuValues::try_from(vec![abi::SlowestState::default(); n])
                    {
                        let _ = m.set(0, zero, 0);
                    }
                }
            }
        }
        let hot: Vec<HotKey> = self.hot().into_iter().map(|(k, _)| k).collect();
        if let Some(map) = self.bpf.map_mut("hot") {
            if let Ok(mut m) = HashMap::<&mut MapData, HotKey, HotVal>::try_from(map) {
                for k in &hot {
                    let _ = m.remove(k);
                }
            }
        }
        self.set_ctl(abi::CTL_HOT_FULL, 0)
    }

    /// Whether process `tgid` is followed (process scope).
    pub fn follows(&self, tgid: u32) -> bool {
        let Some(map) = self.bpf.map("procs") else {
            return false;
        };
        HashMap::<&MapData, u32, u32>::try_from(map)
            .ok()
            .and_then(|m| m.get(&tgid, 0).ok())
            .is_some()
    }

    /// Follows process `tgid` (process scope), already running.
    pub fn follow(&mut self, tgid: u32) -> Result<(), Refusal> {
        let mut m: HashMap<&mut MapData, u32, u32> =
            HashMap::try_from(self.bpf.map_mut("procs").expect("the object has map procs"))
                .map_err(|e| refusal("map procs", &e))?;
        m.insert(tgid, 2, 0).map_err(|e| refusal("map procs", &e))?;
        // Tasks remember whether they are followed until this generation changes.
        self.raise(abi::CTL_FOLLOW_GEN)
    }

    /// The ring of slow events.
    pub fn events(&mut self) -> Option<RingBuf<&mut MapData>> {
        RingBuf::try_from(self.bpf.map_mut("events")?).ok()
    }

    /// The ring's descriptor, to poll.
    pub fn events_fd(&mut self) -> Option<std::os::fd::OwnedFd> {
        let ring = self.events()?;
        ring.as_fd().try_clone_to_owned().ok()
    }

    /// Each program's name, run count and total run time in ns, as the kernel counts them while
    /// `kernel.bpf_stats_enabled` is 1 (zeros otherwise).
    pub fn run_stats(&self) -> Vec<(&'static str, u64, u64)> {
        PROGRAMS
            .iter()
            .filter_map(|(name, _)| {
                let i = self.bpf.program(name)?.info().ok()?;
                Some((*name, i.run_count(), i.run_time().as_nanos() as u64))
            })
            .collect()
    }

    /// The kernel's ids of the programs (`bpftool prog show id N`).
    pub fn ids(&self) -> Vec<u32> {
        PROGRAMS
            .iter()
            .filter_map(|(name, _)| self.bpf.program(name)?.info().ok())
            .map(|i| i.id())
            .collect()
    }

    /// Calls the kernel skipped because one of the programs was already running on the CPU
    /// (`recursion_misses`): each is a call neither counted nor seen.
    pub fn recursion_misses(&self) -> u64 {
        let mut n = 0;
        for (name, _) in PROGRAMS {
            let Some(p) = self.bpf.program(name) else {
                continue;
            };
            let Ok(fd) = p.fd() else { continue };
            n += crate::sys::recursion_misses(fd.as_fd().as_raw_fd()).unwrap_or(0);
        }
        n
    }
}

/// Entries of the slowest calls' heaps: `n` for each possible CPU.
fn heap_entries(n: u32) -> Result<u32, Refusal> {
    let cpus =
        aya::util::nr_cpus().map_err(|(_, e)| Refusal::new(format!("the possible CPUs: {e}")))?;
    Ok((cpus as u32).saturating_mul(n).max(1))
}

/// Cycles per nanosecond as `q + r / 2^32` (`to_cycles` in the program).
pub fn cycles_per_ns(cycles_per_sec: u64) -> (u64, u64) {
    let q = cycles_per_sec / 1_000_000_000;
    let rem = cycles_per_sec % 1_000_000_000;
    let r = ((rem as u128) << 32) / 1_000_000_000;
    (q, r as u64)
}

/// The program's conversion of `ns` to cycles, for tests and user space.
pub fn to_cycles(ns: u64, q: u64, r: u64) -> u64 {
    let (hi, lo) = (ns >> 32, ns & 0xffff_ffff);
    ns.wrapping_mul(q)
        .wrapping_add(hi.wrapping_mul(r))
        .wrapping_add(lo.wrapping_mul(r) >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanoseconds_become_cycles_as_the_kernel_layers_convert_them() {
        for cps in [1_000_000_000u64, 2_596_122_148, 3_000_000_001, 999_999_999] {
            let (q, r) = cycles_per_ns(cps);
            for ns in [0u64, 1, 999, 1_000_000, 123_456_789_012, 1 << 40] {
                let exact = (ns as u128 * cps as u128 / 1_000_000_000) as u64;
                let got = to_cycles(ns, q, r);
                assert!(
                    got <= exact && exact - got <= 2 + ns / (1 << 31),
                    "{cps} {ns}: {got} vs {exact}"
                );
            }
        }
    }
}
