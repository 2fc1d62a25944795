//! When a pid's command name may have changed, for the caches of `/proc/PID/comm` (`--by comm`,
//! and the process of a slow record): a process's name changes when it execs (`make` runs
//! `cc` in a child that was `make` until then), so a name cached for a second put the
//! requests of a program started in the mount under the name of the one that started it
//! (`fsprof profile DIR -- cat f` counted cat's requests as `fsprof`'s: the child chdirs into
//! the mount before it execs).
//!
//! As root, one thread listens to the kernel's process events ([`crate::sys::cnproc`]) and
//! bumps a generation per pid (in a fixed table of 4096 atomics, by pid modulo its size) at
//! each fork, exec and name change; a cached name is used only while its pid's generation is
//! the one it was read under: one atomic load per request, no `/proc` read. Without the events
//! (not root), a name is trusted for [`FALLBACK_TTL`] only.
//!
//! An exec is seen when the listening thread has read its event, which may be a little after
//! the new program's first request on a busy machine: such a request keeps the old name.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::sys::cnproc::{self, Event, ProcEvents};

/// Slots of the generation table.
const SLOTS: usize = 4096;

/// How long a cached name is trusted with the process events.
pub const TTL: Duration = Duration::from_secs(1);
/// How long a cached name is trusted without them.
pub const FALLBACK_TTL: Duration = Duration::from_millis(50);

/// The generations, and whether a thread keeps them.
pub struct Execs {
    gens: Box<[AtomicU32]>,
    watched: bool,
}

static EXECS: OnceLock<Execs> = OnceLock::new();

impl Execs {
    /// The process-wide table, its listening thread started on first use (as root).
    pub fn get() -> &'static Execs {
        EXECS.get_or_init(|| {
            let events = ProcEvents::open();
            if let Err(e) = &events {
                log::debug!(
                    "process events unavailable ({e}): command names cached for {FALLBACK_TTL:?}"
                );
            }
            let watched = events.is_ok();
            if let Ok(ev) = events {
                // It takes no signal: a program that waits for them (`fsprof profile`) may
                // block them only after its mount, and this, are set up.
                let spawned = crate::sys::with_termination_blocked(|| {
                    std::thread::Builder::new()
                        .name("fsprof-execs".into())
                        .spawn(move || listen(ev))
                });
                if let Err(e) = spawned {
                    log::warn!("process events: {e}");
                }
            }
            Execs {
                gens: (0..SLOTS).map(|_| AtomicU32::new(0)).collect(),
                watched,
            }
        })
    }

    /// The generation of `pid`: it changes when the pid forks into being, execs or is renamed.
    #[inline]
    pub fn generation(&self, pid: u32) -> u32 {
        self.gens[pid as usize % SLOTS].load(Ordering::Acquire)
    }

    /// How long a name read under the current generation is trusted.
    pub fn ttl(&self) -> Duration {
        if self.watched { TTL } else { FALLBACK_TTL }
    }

    fn bump(&self, pid: u32) {
        self.gens[pid as usize % SLOTS].fetch_add(1, Ordering::AcqRel);
    }
}

/// The listening thread: reads events until the socket fails.
fn listen(ev: ProcEvents) {
    let mut buf = vec![0u8; 8192];
    loop {
        let n = match ev.recv(&mut buf) {
            Ok(n) => n,
            // Events lost under load (ENOBUFS): every name may be stale; start afresh.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                if let Some(x) = EXECS.get() {
                    for g in x.gens.iter() {
                        g.fetch_add(1, Ordering::AcqRel);
                    }
                }
                continue;
            }
            Err(e) => {
                log::warn!("process events: {e}; command names may lag an exec by a second");
                return;
            }
        };
        let Some(x) = EXECS.get() else { continue };
        for e in cnproc::parse(&buf[..n]) {
            match e {
                Event::Fork(pid) | Event::Exec(pid) | Event::Comm(pid) => x.bump(pid),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exec_changes_the_generation_of_its_pid() {
        let x = Execs::get();
        if !x.watched {
            assert_eq!(x.ttl(), FALLBACK_TTL);
            return;
        }
        // The shell execs only once told to, after the generation is read.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read x; exec true"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let before = x.generation(pid);
        use std::io::Write as _;
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        child.wait().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while x.generation(pid) == before {
            assert!(std::time::Instant::now() < deadline, "no event for {pid}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
