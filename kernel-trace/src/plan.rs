//! What can be checked before a mount: tracefs (mounted where missing), the tracepoints and
//! their formats, the right to open them, and the block devices under the served
//! directories. A [`Plan`] that passed these starts the [`crate::Tracer`] once the mount's
//! connection is known.

use std::path::Path;

use crate::devices::{self, BlockDevice, Devices};
use crate::error::Refusal;
use crate::events::{BlockFormats, FuseFormats};
use crate::sys;
use crate::tracefs::{self, Format, Tracefs};

/// A checked plan for kernel tracing of one mount.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The tracefs used.
    pub tracefs: Tracefs,
    /// The FUSE tracepoints (the `kernel` layer); `None` for the block devices alone
    /// ([`preflight_block`]).
    pub fuse: Option<FuseFormats>,
    /// The block tracepoints and devices, or why there is no block layer.
    pub block: Result<(BlockFormats, Vec<BlockDevice>), String>,
    /// Data pages of each CPU's ring (a power of two; [`crate::RING_PAGES`] by default).
    pub ring_pages: usize,
    /// Record the block tracepoints through a private ftrace instance with this many KiB of
    /// buffer a CPU ([`crate::ftrace::BUFFER_KB`] by default), falling back to perf where
    /// the instance cannot be made; `None`: through perf.
    pub ftrace_kb: Option<usize>,
}

/// Checks everything `--kernel` needs for a file system over `dirs` (LOWER, or each RAIF
/// branch): a refusal is one line naming what is missing and why.
pub fn preflight(dirs: &[&Path]) -> Result<Plan, Refusal> {
    let tracefs = tracefs::find_or_mount()?;
    let fuse = FuseFormats::read(&tracefs.root)?;
    probe(&fuse.send)?;
    let mut plan = preflight_block(dirs)?;
    plan.fuse = Some(fuse);
    Ok(plan)
}

/// Checks what recording the block devices under `dirs` alone needs (no FUSE mount: `fsprof
/// profile --no-mount --kernel`): the plan's `block` says why there is none, if so.
pub fn preflight_block(dirs: &[&Path]) -> Result<Plan, Refusal> {
    let tracefs = tracefs::find_or_mount()?;
    let block = match block_devices(dirs) {
        Ok(devs) => {
            let f = BlockFormats::read(&tracefs.root)?;
            probe(&f.issue)?;
            Ok((f, devs))
        }
        Err(why) => Err(why),
    };
    Ok(Plan {
        tracefs,
        fuse: None,
        block,
        ring_pages: crate::RING_PAGES,
        ftrace_kb: Some(crate::ftrace::BUFFER_KB),
    })
}

/// The devices under every directory of `dirs` (each once), or why there are none. A
/// directory without a device leaves the others' layers in place and its reason logged.
fn block_devices(dirs: &[&Path]) -> Result<Vec<BlockDevice>, String> {
    let mut found = Vec::new();
    let mut reasons = Vec::new();
    for d in dirs {
        match devices::under(d) {
            Devices::Found(v) => found.extend(v),
            Devices::None(why) => reasons.push(why),
        }
    }
    found.sort();
    found.dedup();
    if found.is_empty() {
        return Err(reasons.join("; "));
    }
    for r in reasons {
        log::warn!("kernel trace: no block layer for {r}");
    }
    Ok(found)
}

/// Opens tracepoint `f` on the first online CPU and closes it again: a denied access is
/// refused now, before anything is mounted.
fn probe(f: &Format) -> Result<(), Refusal> {
    let cpu = online_cpus()?.first().copied().unwrap_or(0);
    sys::open_tracepoint(&sys::EventSpec {
        id: f.id,
        cpu,
        wakeup_bytes: 4096,
    })
    .map(drop)
    .map_err(|e| open_refusal(&f.name, &e))
}

/// The one-line refusal for a tracepoint `name` that could not be opened with `e`.
pub fn open_refusal(name: &str, e: &std::io::Error) -> Refusal {
    let why = match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into());
            format!(
                "permission denied: it needs root or CAP_PERFMON (kernel.perf_event_paranoid is {paranoid})"
            )
        }
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::EINVAL) => {
            "this kernel cannot record it through perf_event_open".to_string()
        }
        Some(libc::ENOSYS) => "this kernel has no perf_event_open".to_string(),
        Some(libc::EMFILE) | Some(libc::ENFILE) => "out of file descriptors".to_string(),
        _ => e.to_string(),
    };
    Refusal::new(format!("tracepoint {name}: {why}"))
}

/// The online CPUs (`/sys/devices/system/cpu/online`, e.g. `0-3,6`).
pub fn online_cpus() -> Result<Vec<u32>, Refusal> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map_err(|e| Refusal::new(format!("/sys/devices/system/cpu/online: {e}")))?;
    parse_cpu_list(&s).ok_or_else(|| {
        Refusal::new(format!(
            "/sys/devices/system/cpu/online: cannot read {:?}",
            s.trim()
        ))
    })
}

fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 65536 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("0,2-3,7"), Some(vec![0, 2, 3, 7]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }
}
