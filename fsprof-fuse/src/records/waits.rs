//! Waits that end early: how an injected delay sleeps, so that the kernel's `FUSE_INTERRUPT` of
//! its request ends it at once, and the end of the connection ends every one (nobody would read
//! the answer; the daemon could not exit until the last delay ran out). The calling thread's
//! end, or a signal pending for it that it does not block, ends its request's wait too
//! (checked every [`CALLER_CHECK`], through a pidfd and `/proc/TID/status`): the kernel sends
//! no interrupt for the requests it sends in the background, such as the read-ahead of a
//! reader killed meanwhile or an `O_DIRECT` read (`FUSE_ASYNC_DIO`), so such a request held a
//! worker, and its caller, for the whole delay.
//!
//! Only delays take the lock, and only interrupts and the connection's end wake them: a request
//! that is not delayed never comes here.

use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// Interrupts kept for requests that are not waiting (yet): the kernel may deliver a request's
/// interrupt to another thread before the request reaches its delay. The oldest are forgotten.
const EARLY: usize = 32;

/// How often a wait checks that its caller still lives.
pub const CALLER_CHECK: Duration = Duration::from_millis(20);

/// Why a wait ended early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The kernel interrupted the request (its caller got a signal).
    Interrupted,
    /// The connection has ended.
    Disconnected,
}

/// The waits of one mount's requests (see the module documentation).
#[derive(Debug, Default)]
pub struct Waits {
    state: Mutex<State>,
    woken: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// The waits under way: (token, request, interrupted).
    waiting: Vec<(u64, u64, bool)>,
    /// The next wait's token.
    token: u64,
    /// Interrupts of requests that were not waiting, newest at `next - 1` (0: none).
    early: [u64; EARLY],
    next: usize,
    /// The connection has ended.
    ended: bool,
}

impl Waits {
    /// No waits.
    pub fn new() -> Waits {
        Waits::default()
    }

    /// Waits `d` for request `unique`, unless it is interrupted (or was, just before) or the
    /// connection ends.
    pub fn sleep(&self, unique: u64, d: Duration) -> Result<(), Cut> {
        self.sleep_for(unique, d, 0)
    }

    /// [`Waits::sleep`] for a request of thread `caller` (0: the kernel's own), which also
    /// ends, as interrupted, when that thread has ended.
    pub fn sleep_for(&self, unique: u64, d: Duration, caller: u32) -> Result<(), Cut> {
        let caller_tid = caller;
        // A caller gone before its request came here (a read-ahead of a reader killed while
        // the request was queued): nobody waits for the answer.
        let Ok(caller) = crate::sys::thread_fd(caller) else {
            return Err(Cut::Interrupted);
        };
        // `None` (beyond what `Instant` holds) waits until cut short.
        let deadline = Instant::now().checked_add(d);
        let mut s = self.state.lock();
        if s.ended {
            return Err(Cut::Disconnected);
        }
        if let Some(i) = s.early.iter().position(|&u| u == unique && u != 0) {
            s.early[i] = 0;
            return Err(Cut::Interrupted);
        }
        let token = s.token;
        s.token += 1;
        s.waiting.push((token, unique, false));
        loop {
            let check = caller.as_ref().map(|_| Instant::now() + CALLER_CHECK);
            let timed_out = match (deadline, check) {
                (Some(at), Some(c)) if c < at => {
                    self.woken.wait_until(&mut s, c);
                    false
                }
                (Some(at), _) => self.woken.wait_until(&mut s, at).timed_out(),
                (None, Some(c)) => {
                    self.woken.wait_until(&mut s, c);
                    false
                }
                (None, None) => {
                    self.woken.wait(&mut s);
                    false
                }
            };
            if let Some(fd) = &caller {
                use std::os::fd::AsFd as _;
                if crate::sys::thread_ended(fd.as_fd()) || crate::sys::signal_pending(caller_tid) {
                    if let Some(i) = s.waiting.iter().position(|w| w.0 == token) {
                        s.waiting[i].2 = true;
                    }
                }
            }
            let i = s
                .waiting
                .iter()
                .position(|w| w.0 == token)
                .expect("a wait stays listed until it ends");
            let cut = if s.waiting[i].2 {
                Some(Cut::Interrupted)
            } else if s.ended {
                Some(Cut::Disconnected)
            } else {
                None
            };
            if cut.is_some() || timed_out {
                s.waiting.swap_remove(i);
                return cut.map_or(Ok(()), Err);
            }
        }
    }

    /// The kernel interrupted request `unique`: its waits end now, or its next one at once.
    pub fn interrupt(&self, unique: u64) {
        let mut s = self.state.lock();
        let mut found = false;
        for w in s.waiting.iter_mut().filter(|w| w.1 == unique) {
            w.2 = true;
            found = true;
        }
        if found {
            self.woken.notify_all();
        } else if unique != 0 {
            let at = s.next;
            s.early[at] = unique;
            s.next = (at + 1) % EARLY;
        }
    }

    /// The connection has ended: every wait ends now, and later ones at once.
    pub fn disconnect(&self) {
        self.state.lock().ended = true;
        self.woken.notify_all();
    }

    /// Waits under way (for tests and diagnostics).
    pub fn waiting(&self) -> usize {
        self.state.lock().waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Starts a wait of `d` for request `unique` on another thread, and returns once it is
    /// listed.
    fn waiting(
        w: &Arc<Waits>,
        unique: u64,
        d: Duration,
    ) -> std::thread::JoinHandle<Result<(), Cut>> {
        let before = w.waiting();
        let w2 = w.clone();
        let t = std::thread::spawn(move || w2.sleep(unique, d));
        while w.waiting() == before {
            std::thread::yield_now();
        }
        t
    }

    #[test]
    fn an_interrupt_ends_its_requests_wait_and_no_other() {
        let w = Arc::new(Waits::new());
        let long = Duration::from_secs(600);
        let a = waiting(&w, 7, long);
        let b = waiting(&w, 8, long);
        w.interrupt(7);
        assert_eq!(a.join().unwrap(), Err(Cut::Interrupted));
        assert_eq!(w.waiting(), 1, "request 8 still waits");
        w.disconnect();
        assert_eq!(b.join().unwrap(), Err(Cut::Disconnected));
        assert_eq!(w.waiting(), 0);
        // After the end, a wait ends at once.
        assert_eq!(w.sleep(9, long), Err(Cut::Disconnected));
    }

    #[test]
    fn an_interrupt_that_comes_first_ends_the_wait_at_once() {
        let w = Waits::new();
        w.interrupt(5);
        assert_eq!(w.sleep(5, Duration::from_secs(600)), Err(Cut::Interrupted));
        // Used once: the request's next wait runs its course.
        assert_eq!(w.sleep(5, Duration::ZERO), Ok(()));
        // Only the most recent early interrupts are kept.
        for u in 100..100 + EARLY as u64 + 1 {
            w.interrupt(u);
        }
        assert_eq!(w.sleep(100, Duration::ZERO), Ok(()));
        assert_eq!(
            w.sleep(101, Duration::from_secs(600)),
            Err(Cut::Interrupted)
        );
    }

    #[test]
    fn an_uncut_wait_runs_its_course() {
        let w = Waits::new();
        let start = Instant::now();
        assert_eq!(w.sleep(1, Duration::from_millis(20)), Ok(()));
        assert!(start.elapsed() >= Duration::from_millis(20));
        // Beyond what an Instant holds: waits until cut (here, the connection ended first).
        w.disconnect();
        assert_eq!(w.sleep(2, Duration::MAX), Err(Cut::Disconnected));
    }

    #[test]
    fn a_wait_ends_when_its_caller_dies() {
        let w = Arc::new(Waits::new());
        let mut child = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .unwrap();
        let pid = child.id();
        let w2 = w.clone();
        let t = std::thread::spawn(move || w2.sleep_for(7, Duration::from_secs(600), pid));
        while w.waiting() == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // Counted, not timed: the wait ends (a hang would fail the test run's time limit).
        assert_eq!(t.join().unwrap(), Err(Cut::Interrupted));
        // A caller that lives on changes nothing.
        assert_eq!(
            w.sleep_for(8, Duration::from_millis(50), std::process::id()),
            Ok(())
        );
    }
}
