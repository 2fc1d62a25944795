//! The tracer of one mount or one command: the loaded program, read at every snapshot (a
//! profile [`Extension`]), its slow events drained by a thread (and before every snapshot),
//! reset with the profile, and detached by [`Tracer::close`].
//!
//! # Reset
//!
//! A reset raises the program's generation first (a call that started before it records
//! nothing when it ends), then takes the per-operation counts as a baseline that later
//! snapshots subtract (the program's per-CPU counters are never written from here, so no
//! count of a call made meanwhile is lost), and empties the per-caller and hot-file tables.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use profile_store::{ClockInfo, Extension, Layer, Section};

use crate::abi::{self, Event, Hist};
use crate::layers::{self, Readout};
use crate::names::Namer;
use crate::program::{Globals, Program};
use crate::records::{SlowRecord, SlowSink, Slowest};
use crate::refusal::Refusal;
use crate::{By, Config, Scope, table};

/// How often the thread drains the slow events when none wakes it.
const DRAIN_INTERVAL: Duration = Duration::from_millis(100);

struct State {
    /// The program, until [`Tracer::close`].
    program: Option<Program>,
    /// What the maps held when the program was closed.
    frozen: Option<Readout>,
    /// The counts at the last reset.
    base: Vec<Hist>,
    base_stats: [u64; abi::ST_SLOTS as usize],
    base_misses: u64,
    slowest: Option<Slowest>,
    namer: Namer,
}

/// The syscall level of one mount or one command (see the crate's documentation).
pub struct Tracer {
    state: Mutex<State>,
    ops: Vec<&'static str>,
    config: Config,
    sink: Option<Arc<dyn SlowSink>>,
    poll_fd: Option<OwnedFd>,
    stop: AtomicBool,
    cycles_per_sec: u64,
}

impl Tracer {
    /// Loads and attaches the program for `config` and starts the draining thread; calls over
    /// `config.slow_cycles` go to `sink`. A refusal is one line.
    pub fn start(config: Config, sink: Option<Arc<dyn SlowSink>>) -> Result<Arc<Tracer>, Refusal> {
        let clock = ClockInfo::get();
        let (mode, mnt_path, ctl_names, ctl_ino_min, namer) = match &config.scope {
            Scope::Mount {
                mnt,
                control_names,
                control_ino_min,
            } => {
                use std::os::unix::ffi::OsStrExt;
                let bytes = mnt.as_os_str().as_bytes();
                if bytes.len() >= abi::MNT_MAX - 1 {
                    return Err(Refusal::new(format!(
                        "the mount point {} is longer than {} bytes",
                        mnt.display(),
                        abi::MNT_MAX - 2
                    )));
                }
                (
                    abi::MODE_MOUNT,
                    bytes.to_vec(),
                    control_names.clone(),
                    *control_ino_min,
                    Namer::mount(mnt),
                )
            }
            Scope::Processes => (abi::MODE_PROCS, Vec::new(), Vec::new(), 0, Namer::system()),
        };
        let res = config.resolution;
        let globals = Globals {
            mode,
            self_tgid: std::process::id(),
            mnt_path,
            ctl_ino_min,
            ctl_names,
            res_shift: res.get().trailing_zeros(),
            bounds: res.bounds().to_vec(),
            cycles_per_sec: clock.cycles_per_sec,
            by_kind: match config.by {
                None => 0,
                Some(By::Pid) => abi::BY_PID,
                Some(By::Uid) => abi::BY_UID,
                Some(By::Comm) => abi::BY_COMM,
            },
            keyed_entries: crate::KEYED_TABLE + table::ops().len() as u32,
            hot_entries: config.hot_files.map(|_| crate::HOT_TABLE),
            slowest_n: config.slowest.unwrap_or(0) as u32,
        };
        let mut program = Program::load(&globals)?;
        if let Some(c) = config.slow_cycles.filter(|_| sink.is_some()) {
            program.set_ctl(abi::CTL_SLOW, c.max(1))?;
        }
        let poll_fd = program.events_fd();
        let ops = table::ops();
        let tracer = Arc::new(Tracer {
            state: Mutex::new(State {
                program: Some(program),
                frozen: None,
                base: vec![Hist::default(); ops.len()],
                base_stats: [0; abi::ST_SLOTS as usize],
                base_misses: 0,
                slowest: config.slowest.map(Slowest::new),
                namer,
            }),
            ops,
            sink,
            poll_fd,
            stop: AtomicBool::new(false),
            cycles_per_sec: clock.cycles_per_sec,
            config,
        });
        if tracer.needs_events() {
            let weak = Arc::downgrade(&tracer);
            std::thread::Builder::new()
                .name("syscall-trace".into())
                .spawn(move || drain_loop(weak))
                .map_err(|e| Refusal::new(format!("cannot start the draining thread: {e}")))?;
        }
        Ok(tracer)
    }

    fn needs_events(&self) -> bool {
        self.config.slowest.is_some() || (self.config.slow_cycles.is_some() && self.sink.is_some())
    }

    /// Mount scope: the mount's device exists now (its `st_dev`); calls on it are counted
    /// from here on.
    pub fn set_mount(&self, dev: kernel_trace::devices::Dev) -> Result<(), Refusal> {
        match self.state.lock().program.as_mut() {
            Some(p) => p.set_ctl(abi::CTL_MNT_DEV, dev.kernel() as u64),
            None => Ok(()),
        }
    }

    /// Process scope: the next process this process starts is followed from its exec, and its
    /// descendants from their fork (call [`Tracer::stop_following_children`] once it is
    /// started, so that no later child is).
    pub fn follow_next_child(&self) {
        if let Some(p) = self.state.lock().program.as_mut() {
            let _ = p.set_ctl(abi::CTL_LAUNCHER, std::process::id() as u64);
        }
    }

    /// Process scope: follows process `tgid`, already running (its children from their fork).
    pub fn follow_process(&self, tgid: u32) -> Result<(), Refusal> {
        match self.state.lock().program.as_mut() {
            Some(p) => p.follow(tgid),
            None => Ok(()),
        }
    }

    /// Undoes [`Tracer::follow_next_child`] if no child was started since.
    pub fn stop_following_children(&self) {
        if let Some(p) = self.state.lock().program.as_mut() {
            let _ = p.set_ctl(abi::CTL_LAUNCHER, 0);
        }
    }

    /// Whether process `pid` is followed.
    pub fn follows(&self, pid: u32) -> bool {
        self.state
            .lock()
            .program
            .as_ref()
            .is_some_and(|p| p.follows(pid))
    }

    /// Detaches the program (after a last read of its maps, which later snapshots show): the
    /// mount is gone, or the command has ended. Nothing of it stays in the kernel.
    pub fn close(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let mut st = self.state.lock();
        if st.program.is_none() {
            return;
        }
        self.drain_events(&mut st);
        let r = self.read(&st);
        st.frozen = Some(r);
        st.program = None;
    }

    /// Each program's name, runs and run time in ns while loaded (with
    /// `kernel.bpf_stats_enabled` at 1; see [`Program::run_stats`]).
    pub fn run_stats(&self) -> Vec<(&'static str, u64, u64)> {
        self.state
            .lock()
            .program
            .as_ref()
            .map(Program::run_stats)
            .unwrap_or_default()
    }

    /// The kernel's ids of the programs while they are loaded (empty once closed).
    pub fn program_ids(&self) -> Vec<u32> {
        self.state
            .lock()
            .program
            .as_ref()
            .map(Program::ids)
            .unwrap_or_default()
    }

    /// Whether the program is still attached.
    pub fn is_attached(&self) -> bool {
        self.state.lock().program.is_some()
    }

    /// Slow events sent by the kernel so far (for measuring what they cost).
    pub fn events(&self) -> u64 {
        let st = self.state.lock();
        self.read(&st).stats[abi::ST_EVENTS as usize]
    }

    /// The maps now, less the last reset's baseline.
    fn read(&self, st: &State) -> Readout {
        let raw = match (&st.program, &st.frozen) {
            (Some(p), _) => Readout {
                hists: p.hists(),
                keyed: if self.config.by.is_some() {
                    p.keyed()
                } else {
                    Vec::new()
                },
                hot: if self.config.hot_files.is_some() {
                    p.hot()
                } else {
                    Vec::new()
                },
                stats: p.stats(),
                misses: p.recursion_misses(),
            },
            (None, Some(f)) => return f.clone(),
            (None, None) => Readout::default(),
        };
        let mut r = raw;
        for (h, b) in r.hists.iter_mut().zip(&st.base) {
            *h = h.since(b);
        }
        for (s, b) in r.stats.iter_mut().zip(&st.base_stats) {
            *s = s.saturating_sub(*b);
        }
        r.misses = r.misses.saturating_sub(st.base_misses);
        r
    }

    /// Reads every waiting slow event: to the sink, to the slowest.
    fn drain_events(&self, st: &mut State) {
        let State {
            program,
            slowest,
            namer,
            ..
        } = st;
        let Some(p) = program.as_mut() else { return };
        let Some(mut ring) = p.events() else { return };
        let wall = wall_minus_mono();
        while let Some(item) = ring.next() {
            let Some(ev) = Event::read(&item) else {
                continue;
            };
            let rec = self.describe(&ev, wall, namer);
            if ev.why & 1 != 0 {
                if let Some(s) = &self.sink {
                    s.push(&rec);
                }
            }
            if ev.why & 2 != 0 {
                if let Some(s) = slowest.as_mut() {
                    s.offer(ev.cycles, rec);
                }
            }
        }
    }

    fn describe(&self, ev: &Event, wall_minus_mono: i128, namer: &Namer) -> SlowRecord {
        let end = (ev.end_ns as i128 + wall_minus_mono).max(0) as u64;
        let latency_ns =
            (ev.cycles as u128 * 1_000_000_000 / self.cycles_per_sec.max(1) as u128) as u64;
        let comm_end = ev
            .comm
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(ev.comm.len());
        SlowRecord {
            time_unix_ns: end,
            op: self
                .ops
                .get(ev.op as usize)
                .copied()
                .unwrap_or("SYS_UNKNOWN"),
            latency_ns,
            errno: if (-4095..0).contains(&ev.ret) {
                -ev.ret as i32
            } else {
                0
            },
            ino: ev.ino,
            path: namer.path(ev.name_kind as u32, &ev.name, ev.name_len, ev.dev),
            pid: ev.tid,
            tgid: ev.tgid,
            comm: String::from_utf8_lossy(&ev.comm[..comm_end]).into_owned(),
            uid: ev.uid,
            offset: (ev.flags & 1 != 0).then_some(ev.off),
            size: (ev.flags & 2 != 0).then_some(ev.size),
        }
    }

    fn drain(&self) {
        let mut st = self.state.lock();
        self.drain_events(&mut st);
    }
}

/// Wall-clock time less `CLOCK_MONOTONIC`, in ns: a monotonic time plus this is Unix time.
fn wall_minus_mono() -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let mono = match nix_clock(&mut ts) {
        true => ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128,
        false => 0,
    };
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    wall - mono
}

fn nix_clock(ts: &mut libc::timespec) -> bool {
    crate::sys::clock_monotonic(ts)
}

fn drain_loop(weak: Weak<Tracer>) {
    loop {
        let Some(t) = weak.upgrade() else { return };
        if t.stop.load(Ordering::Relaxed) {
            return;
        }
        if let Some(fd) = &t.poll_fd {
            crate::sys::poll_in(fd.as_raw_fd(), DRAIN_INTERVAL);
        } else {
            std::thread::sleep(DRAIN_INTERVAL);
        }
        t.drain();
    }
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("scope", &self.config.scope)
            .field("attached", &self.is_attached())
            .finish()
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Extension for Tracer {
    fn layers(&self) -> Vec<Layer> {
        let mut st = self.state.lock();
        self.drain_events(&mut st);
        let r = self.read(&st);
        drop(st);
        let res = self.config.resolution;
        let mut main = layers::layer(crate::LAYER, &self.ops, &r.hists, res);
        let s = |i: u32| r.stats[i as usize].to_string();
        main.extra = vec![
            ("level".into(), "syscall".into()),
            ("source".into(), "sys_enter-sys_exit".into()),
            ("scope".into(), self.scope_name().into()),
            ("kclock".into(), "monotonic".into()),
            ("unended".into(), s(abi::ST_UNENDED)),
            ("untimed".into(), s(abi::ST_STORAGE)),
            ("missed".into(), r.misses.to_string()),
        ];
        let mut out = vec![main];
        if self.config.by.is_some() {
            out.extend(layers::keyed_layers(
                &self.ops,
                &r.keyed,
                self.config.by_max,
                res,
            ));
        }
        out
    }

    fn sections(&self) -> Vec<Section> {
        let st = self.state.lock();
        let mut out = Vec::new();
        if let Some(n) = self.config.hot_files {
            let r = self.read(&st);
            out.push(layers::hot_section(&r.hot, n, &st.namer));
        }
        if let Some(s) = &st.slowest {
            let mut sec = Section::new("slowest");
            sec.attrs = vec![
                ("n".into(), s.n().to_string()),
                ("layer".into(), crate::LAYER.into()),
            ];
            sec.lines = s.lines();
            out.push(sec);
        }
        out
    }

    fn extra(&self) -> Vec<(String, String)> {
        let st = self.state.lock();
        let r = self.read(&st);
        let s = |i: u32| r.stats[i as usize];
        let lost = s(abi::ST_STORAGE) + s(abi::ST_UNENDED) + r.misses;
        let mut v = vec![
            ("syscall_trace".to_string(), "bpf".to_string()),
            ("syscall_scope".to_string(), self.scope_name().to_string()),
            ("syscall_lost".to_string(), lost.to_string()),
            (
                "syscall_events_lost".to_string(),
                s(abi::ST_EVENTS_LOST).to_string(),
            ),
        ];
        match self.config.scope {
            Scope::Mount { .. } => v.push((
                "syscall_unread_paths".into(),
                s(abi::ST_PATH_UNREAD).to_string(),
            )),
            Scope::Processes => v.push((
                "syscall_unfollowed".into(),
                s(abi::ST_PROCS_FULL).to_string(),
            )),
        }
        if self.config.by.is_some() {
            v.push(("syscall_by_full".into(), s(abi::ST_KEYED_FULL).to_string()));
        }
        if self.config.hot_files.is_some() {
            v.push(("syscall_hot_full".into(), s(abi::ST_HOT_FULL).to_string()));
        }
        v
    }

    fn reset(&self) {
        let mut st = self.state.lock();
        self.drain_events(&mut st);
        let Some(p) = st.program.as_mut() else {
            return;
        };
        let _ = p.raise(abi::CTL_GEN);
        let _ = p.clear_tables();
        let hists = p.hists();
        let stats = p.stats();
        let misses = p.recursion_misses();
        st.base = hists;
        st.base_stats = stats;
        st.base_misses = misses;
        if let Some(s) = st.slowest.as_mut() {
            s.clear();
        }
    }
}

impl Tracer {
    fn scope_name(&self) -> &'static str {
        match self.config.scope {
            Scope::Mount { .. } => "mount",
            Scope::Processes => "processes",
        }
    }
}
