//! A few descriptors held back for decisions about the branches' health, so that a check or a
//! marker write never fails for want of a descriptor when the daemon has used up its limit
//! (a client holding thousands of files open, say).
//!
//! A marker write makes a temporary file and renames it over the marker, then syncs the
//! directory: each step opens a descriptor. [`Reserve::run`] runs such a step and, while it
//! fails with `EMFILE` or `ENFILE`, closes one held descriptor and tries again; the slot is
//! taken back afterwards where the limit allows. Another thread may take a freed slot first:
//! that is why a few are held, not one.

use std::io;
use std::os::fd::OwnedFd;

use fsprof_fuse::sys;
use parking_lot::Mutex;

/// Descriptors held back.
const HELD: usize = 4;

/// The held descriptors (of `/dev/null`).
pub struct Reserve(Mutex<Vec<OwnedFd>>);

fn out_of_fds(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Opens held descriptors up to [`HELD`], as far as the limit allows.
fn refill(held: &mut Vec<OwnedFd>) {
    while held.len() < HELD {
        match sys::open_path("/dev/null".as_ref(), libc::O_RDONLY | libc::O_CLOEXEC) {
            Ok(fd) => held.push(fd),
            Err(_) => return,
        }
    }
}

impl Reserve {
    /// A reserve of [`HELD`] descriptors (fewer where the limit is reached already).
    pub fn new() -> Reserve {
        let mut held = Vec::with_capacity(HELD);
        refill(&mut held);
        Reserve(Mutex::new(held))
    }

    /// Runs `f` (which opens descriptors); while it fails for want of one, gives a held
    /// descriptor back and runs it again. One run at a time.
    pub fn run<T>(&self, mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
        let mut held = self.0.lock();
        loop {
            match f() {
                Err(e) if out_of_fds(&e) && !held.is_empty() => drop(held.pop()),
                r => {
                    refill(&mut held);
                    return r;
                }
            }
        }
    }

    /// Descriptors held now.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.0.lock().len()
    }
}

impl Default for Reserve {
    fn default() -> Self {
        Reserve::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_that_runs_out_of_descriptors_gets_the_held_ones() {
        let r = Reserve::new();
        assert_eq!(r.held(), HELD);
        // Fails for want of a descriptor twice, then succeeds: two held ones were given back
        // (and taken again afterwards, the limit allowing).
        let mut tries = 0;
        let got = r.run(|| {
            tries += 1;
            if tries <= 2 {
                Err(io::Error::from_raw_os_error(libc::EMFILE))
            } else {
                Ok(tries)
            }
        });
        assert_eq!(got.unwrap(), 3);
        assert_eq!(r.held(), HELD);
        // A step that always fails gives every held descriptor back, then its error.
        let mut tries = 0;
        let e = r
            .run(|| -> io::Result<()> {
                tries += 1;
                Err(io::Error::from_raw_os_error(libc::ENFILE))
            })
            .unwrap_err();
        assert_eq!((e.raw_os_error(), tries), (Some(libc::ENFILE), HELD + 1));
        // Other errors are not retried.
        let mut tries = 0;
        let e = r
            .run(|| -> io::Result<()> {
                tries += 1;
                Err(io::Error::from_raw_os_error(libc::EIO))
            })
            .unwrap_err();
        assert_eq!((e.raw_os_error(), tries), (Some(libc::EIO), 1));
    }
}
