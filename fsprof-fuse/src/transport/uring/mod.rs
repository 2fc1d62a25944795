//! The io_uring transport: FUSE over io_uring (Linux 6.14+), beside `/dev/fuse`.
//!
//! # What goes where
//!
//! * **fuser** mounts, answers `INIT` (where [`Caps::OVER_IO_URING`] is asked for, with the
//!   same capabilities as on the classic transport) and keeps serving `/dev/fuse` with one
//!   thread for the life of the mount, through the same [`Classic`](super::classic::Classic)
//!   adapter as the classic transport. The kernel sends there what never goes to a ring:
//!   `FORGET` and `BATCH_FORGET` (so the file system's inode table shrinks as on the classic
//!   transport, and `OP_FORGET` counts the same), `INTERRUPT` (which reaches the file system
//!   as on the classic transport, and so cuts short the request waiting in its ring), and any
//!   request queued before the rings were ready.
//! * **The rings**: right after the mount, one queue per *possible* CPU (the kernel makes the
//!   ring usable only once every one has an entry), each served by threads pinned to its CPU
//!   ([`queue`]), each thread with an io_uring of its own and one entry whose page-aligned
//!   payload buffer holds the largest request (`max_write`, 1 MiB). A queue starts with one
//!   thread and grows by one while all of its threads are busy, up to `--max-threads`, so a
//!   request that waits holds up no other. Every other request arrives on the queue of the
//!   CPU its caller runs on; [`dispatch`] decodes it ([`abi`]), calls the same
//!   [`FileSystem`] as the classic transport, and writes the reply into the entry, reads
//!   straight into the payload the kernel copies from. One system call per request serves a
//!   reply and waits for the next (`COMMIT_AND_FETCH`).
//!
//! Profiles of the same workload agree between transports: both serve the same operations
//! through the same layers, and the ring answers what fuser answers without the file system
//! (`STATX`, `TMPFILE`, `SYNCFS` and unknown opcodes get `ENOSYS`, uncounted).
//!
//! # Refusal, never a silent fallback
//!
//! A user who benchmarks must know which transport ran, so the mount is refused with one line
//! (see [`refusal`]) when the kernel is older than 6.14, when the `fuse` module's `enable_uring`
//! parameter is off (`echo 1 > /sys/module/fuse/parameters/enable_uring`) or missing, when
//! io_uring is disabled (`kernel.io_uring_disabled=2`), when `INIT` does not offer the flag,
//! or when any queue fails to register: the kernel answers a failed registration by moving the
//! connection back to `/dev/fuse` for good, so the transport unmounts instead.
//!
//! # Shutting down
//!
//! Unmounting (`umount`, `fusermount3 -u`, or `SIGINT`/`SIGTERM`/`SIGHUP`, which unmount as on
//! the classic transport) ends the connection: fuser's `/dev/fuse` read fails with `ENODEV`,
//! and every pending ring command completes with `-ENOTCONN`, so each queue thread sees its
//! entry end and returns (one still serving a request sees it once that request is answered;
//! an injected delay ends at once); [`Rings::join`] waits for them, and only then are the entries'
//! buffers freed and the file system's `destroy` called. A queue that fails while the mount
//! lives aborts the connection (`umount -f`) rather than leave its CPU's callers waiting.

pub mod dispatch;
pub mod encode;
pub mod queue;

use std::io;
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use crate::filesystem::{Caps, FileSystem, Init};
use dispatch::Dispatch;
use queue::{Pool, Threads};

/// The fuse module's switch.
pub const ENABLE_URING: &str = "/sys/module/fuse/parameters/enable_uring";
/// The system-wide io_uring switch (0: on, 1: root and a group only, 2: off).
const IO_URING_DISABLED: &str = "/proc/sys/kernel/io_uring_disabled";
/// The first Linux release with FUSE over io_uring.
const FIRST: (u32, u32) = (6, 14);

/// Why this machine cannot run the io_uring transport, as one line naming what to change, or
/// `None` if it can: from the kernel release (`uname -r`), the content of [`ENABLE_URING`]
/// (`None` if there is no such file) and of `/proc/sys/kernel/io_uring_disabled`.
pub fn refusal(
    release: &str,
    enable_uring: Option<&str>,
    io_uring_disabled: Option<&str>,
) -> Option<String> {
    let version = || -> Option<(u32, u32)> {
        let mut it = release.split(|c: char| !c.is_ascii_digit());
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    };
    match version() {
        Some(v) if v < FIRST => {
            return Some(format!(
                "FUSE over io_uring needs Linux {}.{} or later; this kernel is {release}",
                FIRST.0, FIRST.1
            ));
        }
        _ => {}
    }
    match enable_uring.map(str::trim) {
        None => {
            return Some(format!(
                "this kernel's fuse module has no FUSE over io_uring (no {ENABLE_URING}; it \
                 needs Linux {}.{}+ built with CONFIG_FUSE_IO_URING); this kernel is {release}",
                FIRST.0, FIRST.1
            ));
        }
        Some("Y" | "1") => {}
        Some(_) => {
            return Some(format!(
                "FUSE over io_uring is switched off: as root, `echo 1 > {ENABLE_URING}`"
            ));
        }
    }
    if io_uring_disabled.map(str::trim) == Some("2") {
        return Some(
            "io_uring is disabled on this system: as root, `sysctl kernel.io_uring_disabled=0`"
                .into(),
        );
    }
    None
}

/// Checks that this machine can run the io_uring transport ([`refusal`] of what it reads).
pub fn check() -> io::Result<()> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let release = read("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut enable = read(ENABLE_URING);
    if enable.is_none() {
        // A fuse module not loaded yet has no parameters: opening the device loads it.
        drop(std::fs::File::open("/dev/fuse"));
        enable = read(ENABLE_URING);
    }
    match refusal(
        release.trim(),
        enable.as_deref(),
        read(IO_URING_DISABLED).as_deref(),
    ) {
        None => Ok(()),
        Some(why) => Err(io::Error::new(io::ErrorKind::Unsupported, why)),
    }
}

/// The refusal when `INIT` did not offer [`Caps::OVER_IO_URING`] (the parameter was switched
/// off after [`check`], or the kernel lacks it).
pub fn not_offered(init: &Init) -> Option<io::Error> {
    (!init.granted().contains(Caps::OVER_IO_URING)).then(|| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "the kernel did not offer FUSE over io_uring at INIT: as root, `echo 1 > \
                 {ENABLE_URING}` (Linux {}.{}+)",
                FIRST.0, FIRST.1
            ),
        )
    })
}

/// Bytes each entry's payload buffer must hold: what the kernel computes when it creates the
/// ring, `max(FUSE_MIN_READ_BUFFER (8 KiB), max_write, max_pages × page)`, from what fuser sent
/// at `INIT` (`max_pages = ⌈max(max_write, max_readahead) / page⌉`; the kernel may lower it to
/// its `max_pages_limit`, never raise it). A smaller buffer makes the registration fail.
pub fn payload_size(init: &Init, page: usize) -> usize {
    let largest = init.max_write.max(init.max_readahead).max(1) as usize;
    let max_pages = (largest - 1) / page + 1;
    8192.max(init.max_write as usize).max(max_pages * page)
}

/// The CPUs the kernel may ever bring online (`/sys/devices/system/cpu/possible`): the kernel
/// makes one FUSE ring queue per possible CPU.
pub fn possible_cpus() -> io::Result<Vec<u16>> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    parse_cpu_list(s.trim()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/sys/devices/system/cpu/possible: not a CPU list: {s:?}"),
        )
    })
}

/// A CPU list such as `0-3,8-11`.
fn parse_cpu_list(s: &str) -> Option<Vec<u16>> {
    let mut cpus = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<u16>().ok()?..=b.parse::<u16>().ok()?),
            None => cpus.push(part.parse().ok()?),
        }
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// How long a queue may take to register before the mount is given up.
const START_WAIT: Duration = Duration::from_secs(30);

/// The serving threads of one mount's rings.
pub struct Rings {
    threads: Threads,
}

impl Rings {
    /// Starts one thread per possible CPU's queue on the session's FUSE device `dev` (after
    /// `INIT`), serving with `dispatch` into payload buffers of `payload_size` bytes, for the
    /// mount at `mnt`, each queue growing to at most `max_threads` threads; waits until each
    /// has registered its entry or failed. On failure the caller unmounts (which ends the
    /// threads that did register) and then joins the returned rings.
    pub fn start<F: FileSystem + 'static>(
        dev: BorrowedFd<'_>,
        dispatch: Arc<Dispatch<F>>,
        payload_size: usize,
        max_threads: usize,
        mnt: &Path,
    ) -> (Rings, io::Result<()>) {
        let mut rings = Rings {
            threads: Threads::default(),
        };
        let started = (|| {
            let cpus = possible_cpus()?;
            let dev = Arc::new(dev.try_clone_to_owned()?);
            let pool = Pool::new(
                dev,
                dispatch,
                Arc::from(mnt),
                payload_size,
                &cpus,
                max_threads,
            );
            rings.threads = pool.threads();
            let (tx, rx) = mpsc::channel();
            for q in 0..pool.queues() {
                pool.start(q, tx.clone())?;
            }
            drop(tx);
            let mut first = Ok(());
            for _ in 0..cpus.len() {
                let r = rx.recv_timeout(START_WAIT).unwrap_or_else(|_| {
                    Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "a queue did not register in time",
                    ))
                });
                if let (Err(e), Ok(())) = (r, &first) {
                    first = Err(e);
                }
            }
            first
        })();
        let started = started.map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::EPERM) {
                " (is io_uring restricted by kernel.io_uring_disabled?)"
            } else {
                ""
            };
            io::Error::new(
                e.kind(),
                format!(
                    "FUSE over io_uring: the ring queues could not be registered: {}{hint}",
                    crate::protocol::errno::plain(&e)
                ),
            )
        });
        (rings, started)
    }

    /// Waits for every serving thread to end (they end with the connection: unmount or abort),
    /// those started while serving too. An error says why a ring failed while the mount was
    /// live.
    pub fn join(self) -> io::Result<()> {
        let mut result = Ok(());
        let (mut served, mut threads) = (0, 0);
        loop {
            // A thread that starts another adds it before it can end itself.
            let Some(t) = self.threads.lock().pop() else {
                break;
            };
            threads += 1;
            match t.join() {
                Ok(end) => {
                    served += end.requests;
                    if let (Some(f), Ok(())) = (end.failure, &result) {
                        result = Err(io::Error::other(f));
                    }
                }
                Err(_) => {
                    if result.is_ok() {
                        result = Err(io::Error::other("a ring queue thread panicked"));
                    }
                }
            }
        }
        log::debug!("{threads} ring threads ended after {served} requests");
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_kernel_or_the_setting_to_change() {
        assert_eq!(refusal("6.18.44-fc-v669", Some("Y\n"), Some("0\n")), None);
        assert_eq!(refusal("6.14.0", Some("1"), None), None);
        let old = refusal("6.8.0-45-generic", Some("Y"), Some("0")).unwrap();
        assert_eq!(
            old,
            "FUSE over io_uring needs Linux 6.14 or later; this kernel is 6.8.0-45-generic"
        );
        assert!(refusal("5.15.0", None, None).unwrap().contains("5.15.0"));
        let off = refusal("6.18.0", Some("N\n"), Some("0")).unwrap();
        assert_eq!(
            off,
            "FUSE over io_uring is switched off: as root, `echo 1 > \
             /sys/module/fuse/parameters/enable_uring`"
        );
        assert!(
            refusal("6.18.0", Some("0"), None)
                .unwrap()
                .contains("echo 1 >")
        );
        let missing = refusal("6.16.1", None, Some("0")).unwrap();
        assert!(missing.contains("CONFIG_FUSE_IO_URING"), "{missing}");
        assert!(missing.contains("6.16.1"), "{missing}");
        let disabled = refusal("6.18.0", Some("Y"), Some("2\n")).unwrap();
        assert!(
            disabled.contains("kernel.io_uring_disabled=0"),
            "{disabled}"
        );
        for r in [old, off, missing, disabled] {
            assert!(!r.contains('\n'), "one line: {r}");
        }
        // An unreadable release does not refuse by itself: the module parameter decides.
        assert_eq!(refusal("", Some("Y"), None), None);
    }

    #[test]
    fn init_without_the_flag_is_refused() {
        let mut init = Init::offered(Caps::ASYNC_READ, 1 << 20);
        init.want = Caps::OVER_IO_URING | Caps::ASYNC_READ;
        let e = not_offered(&init).unwrap();
        assert!(e.to_string().contains("enable_uring"), "{e}");
        init.offered |= Caps::OVER_IO_URING;
        assert!(not_offered(&init).is_none());
    }

    #[test]
    fn payload_sizes_follow_the_kernel_rule() {
        let mut init = Init::offered(Caps::empty(), 128 << 10);
        init.max_write = 1 << 20;
        assert_eq!(payload_size(&init, 4096), 1 << 20);
        init.max_write = 4096;
        init.max_readahead = 4096;
        assert_eq!(payload_size(&init, 4096), 8192);
        init.max_write = 100_000;
        assert_eq!(payload_size(&init, 4096), 25 * 4096);
        init.max_readahead = 1 << 21;
        assert_eq!(payload_size(&init, 4096), 1 << 21);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("0-1"), Some(vec![0, 1]));
        assert_eq!(
            parse_cpu_list("0-2,8,10-11"),
            Some(vec![0, 1, 2, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(parse_cpu_list(""), None);
        assert!(!possible_cpus().unwrap().is_empty());
    }
}
