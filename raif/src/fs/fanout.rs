//! How an operation reaches the branches: one branch answers a question (failing over to the
//! next where a branch is in trouble), and a change runs on every branch in turn, undone on
//! those already changed where a later one refuses, or the branch that diverged failed (see
//! [`super`]).

use std::io;

use fsprof_fuse::protocol::errno::err;

use super::Raif;
use crate::branch::State;
use crate::part_io::own_limits;

/// Errors that say a branch may be in trouble rather than answer the request: those that fail
/// it at once ([`crate::branch::gone`]) and `EBADF`, after which a health check decides.
#[inline]
pub(crate) fn trouble(e: &io::Error) -> bool {
    crate::branch::gone(e) || e.raw_os_error() == Some(libc::EBADF)
}

/// Reverts one branch of a [`Raif::fan_out`].
pub(crate) type Undo<'a, T> = &'a mut dyn FnMut(usize, &T) -> io::Result<()>;

impl Raif {
    /// The first branch at or after `first` (cyclically) in `mask`; `EIO` if none.
    #[inline]
    pub(crate) fn pick(&self, first: u64, mask: u64) -> io::Result<usize> {
        let n = self.bs.len();
        let first = (first % n as u64) as usize;
        (0..n)
            .map(|i| (first + i) % n)
            .find(|&b| mask & (1 << b) != 0)
            .ok_or_else(|| err(libc::EIO))
    }

    /// Branches a lookup or read may ask: online ones.
    #[inline]
    pub(crate) fn readable(&self) -> u64 {
        self.bs.online_mask()
    }

    /// Runs `f` on one branch of `mask`, starting at `first`; a branch in trouble is failed and
    /// the next one tried.
    pub(crate) fn on_one<R>(
        &self,
        first: u64,
        mask: u64,
        what: &str,
        mut f: impl FnMut(usize) -> io::Result<R>,
    ) -> io::Result<R> {
        let mut tried = 0u64;
        loop {
            let b = self.pick(first, mask & !tried & !self.bs.failed_mask())?;
            match f(b) {
                Err(e) if trouble(&e) && self.bs.error(b, &e, what) => tried |= 1 << b,
                r => return r,
            }
        }
    }

    /// Runs `f(b, fd)` on every branch not failed, in index order, where `fd` comes from
    /// `resolve(b)` (the parent directory, or the object itself). See the module docs for what
    /// happens on errors; `undo` reverts a branch done when a later one refuses (`None`: the
    /// change cannot be reverted, a diverging branch is failed instead). Stale branches take
    /// part where they can; their errors are ignored. Returns the branches changed.
    ///
    /// Every branch is resolved before any is changed, so that the daemon's own limits
    /// ([`own_limits`]: no descriptor left to open a directory) refuse the change before it
    /// starts, and never leave a branch behind the others; a change a branch refuses for
    /// those limits is tried once more after the descriptor cache gave some back, then counts
    /// as any refusal (undone; where it cannot be, that branch diverged).
    pub(crate) fn fan_out<T>(
        &self,
        what: &str,
        mut resolve: impl FnMut(usize) -> io::Result<T>,
        mut f: impl FnMut(usize, &T) -> io::Result<()>,
        mut undo: Option<Undo<'_, T>>,
    ) -> io::Result<u64> {
        let n = self.bs.len();
        let mut resolved: Vec<Option<io::Result<T>>> = Vec::with_capacity(n);
        for b in 0..n {
            if self.bs.state(b) == State::Failed {
                resolved.push(None);
                continue;
            }
            match resolve(b) {
                Err(e) if own_limits(&e) => return Err(e),
                r => resolved.push(Some(r)),
            }
        }
        let mut done = 0u64;
        let mut fds: Vec<(usize, T)> = Vec::with_capacity(n);
        for (b, r) in resolved.into_iter().enumerate() {
            let state = self.bs.state(b);
            let Some(r) = r.filter(|_| state != State::Failed) else {
                continue;
            };
            let r = r.and_then(|fd| {
                self.inodes.retry_emfile(|| f(b, &fd))?;
                fds.push((b, fd));
                Ok(())
            });
            let Err(e) = r else {
                done |= 1 << b;
                continue;
            };
            if matches!(state, State::Stale | State::Rebuilding) {
                continue;
            }
            if trouble(&e) && self.bs.error(b, &e, what) {
                continue;
            }
            if done == 0 {
                return Err(e);
            }
            match undo.as_mut() {
                Some(u) => {
                    for (d, fd) in &fds {
                        if let Err(ue) = u(*d, fd) {
                            self.bs.fail(
                                *d,
                                &format!("{what}: could not undo after branch {b} refused: {ue}"),
                            );
                        }
                    }
                    return Err(e);
                }
                None if e.raw_os_error() == Some(libc::ENOENT) => {} // already as wanted
                None => self.bs.fail(b, &format!("{what} diverged: {e}")),
            }
        }
        if done == 0 {
            return Err(err(libc::EIO));
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::super::tests::Volume;
    use super::*;

    fn errno(e: i32) -> io::Error {
        io::Error::from_raw_os_error(e)
    }

    /// What a fan-out over three branches did: the branches changed (or its error), the
    /// branches `f` ran on, those undone, and the failed branches afterwards.
    struct Run {
        r: io::Result<u64>,
        ran: Vec<usize>,
        undone: Vec<usize>,
        failed: u64,
    }

    /// A fan-out over a new volume of three branches where `f` answers `answer(b)`, with an
    /// undo (answering `undo(b)`) or none.
    fn run(
        answer: impl Fn(usize) -> Option<i32>,
        undo: Option<&dyn Fn(usize) -> Option<i32>>,
    ) -> Run {
        let v = Volume::new(3);
        let ran = RefCell::new(Vec::new());
        let undone = RefCell::new(Vec::new());
        let mut undo_fn = |b: usize, _: &()| {
            undone.borrow_mut().push(b);
            match undo.and_then(|u| u(b)) {
                Some(e) => Err(errno(e)),
                None => Ok(()),
            }
        };
        let r = v.raif.fan_out(
            "test",
            |_| Ok(()),
            |b, _| {
                ran.borrow_mut().push(b);
                answer(b).map_or(Ok(()), |e| Err(errno(e)))
            },
            undo.is_some().then_some(&mut undo_fn as Undo<'_, ()>),
        );
        Run {
            r,
            ran: ran.into_inner(),
            undone: undone.into_inner(),
            failed: v.raif.branches().failed_mask(),
        }
    }

    #[test]
    fn every_branch_changed() {
        let x = run(|_| None, Some(&|_| None));
        assert_eq!(
            (x.r.unwrap(), x.ran, x.undone, x.failed),
            (0b111, vec![0, 1, 2], vec![], 0)
        );
    }

    #[test]
    fn a_refusal_on_the_first_branch_is_the_answer_and_changes_nothing() {
        let x = run(|b| (b == 0).then_some(libc::EACCES), Some(&|_| None));
        assert_eq!(x.r.unwrap_err().raw_os_error(), Some(libc::EACCES));
        assert_eq!((x.ran, x.undone, x.failed), (vec![0], vec![], 0));
    }

    #[test]
    fn a_refusal_in_the_middle_undoes_the_branches_already_changed() {
        let x = run(|b| (b == 1).then_some(libc::EEXIST), Some(&|_| None));
        assert_eq!(x.r.unwrap_err().raw_os_error(), Some(libc::EEXIST));
        assert_eq!((x.ran, x.undone, x.failed), (vec![0, 1], vec![0], 0));
    }

    #[test]
    fn a_branch_that_cannot_be_undone_is_failed() {
        let x = run(
            |b| (b == 2).then_some(libc::EEXIST),
            Some(&|b| (b == 1).then_some(libc::EPERM)),
        );
        assert_eq!(x.r.unwrap_err().raw_os_error(), Some(libc::EEXIST));
        assert_eq!(
            (x.ran, x.undone, x.failed),
            (vec![0, 1, 2], vec![0, 1], 1 << 1)
        );
    }

    #[test]
    fn without_undo_the_branch_that_diverged_is_failed_and_the_others_go_on() {
        let x = run(|b| (b == 1).then_some(libc::EISDIR), None);
        assert_eq!(
            (x.r.unwrap(), x.ran, x.failed),
            (0b101, vec![0, 1, 2], 1 << 1)
        );
    }

    #[test]
    fn without_undo_a_branch_where_the_object_is_gone_is_as_wanted() {
        let x = run(|b| (b == 1).then_some(libc::ENOENT), None);
        assert_eq!((x.r.unwrap(), x.ran, x.failed), (0b101, vec![0, 1, 2], 0));
    }

    #[test]
    fn a_branch_in_trouble_is_failed_and_skipped_without_undoing_the_others() {
        let x = run(|b| (b == 1).then_some(libc::EIO), Some(&|_| None));
        assert_eq!(x.r.unwrap(), 0b101);
        assert_eq!((x.ran, x.undone, x.failed), (vec![0, 1, 2], vec![], 1 << 1));
    }

    #[test]
    fn when_every_branch_is_in_trouble_the_answer_is_eio() {
        let x = run(|_| Some(libc::EIO), Some(&|_| None));
        assert_eq!(x.r.unwrap_err().raw_os_error(), Some(libc::EIO));
        assert_eq!((x.ran, x.failed), (vec![0, 1, 2], 0b111));
    }

    #[test]
    fn a_failed_branch_is_not_asked() {
        let v = Volume::new(3);
        v.raif.branches().fail(0, "test");
        let ran = RefCell::new(Vec::new());
        let r = v.raif.fan_out(
            "test",
            |_| Ok(()),
            |b, _| {
                ran.borrow_mut().push(b);
                Ok(())
            },
            None,
        );
        assert_eq!((r.unwrap(), ran.into_inner()), (0b110, vec![1, 2]));
    }

    #[test]
    fn one_branch_answers_and_one_in_trouble_gives_way_to_the_next() {
        let v = Volume::new(3);
        let mut asked = Vec::new();
        let r = v.raif.on_one(1, 0b111, "test", |b| {
            asked.push(b);
            if b == 1 { Err(errno(libc::EIO)) } else { Ok(b) }
        });
        assert_eq!((r.unwrap(), asked), (2, vec![1, 2]));
        assert_eq!(v.raif.branches().failed_mask(), 1 << 1);
        // An answer that is not trouble (the name is not there) is the answer.
        let mut asked = Vec::new();
        let r: io::Result<()> = v.raif.on_one(0, 0b111, "test", |b| {
            asked.push(b);
            Err(errno(libc::ENOENT))
        });
        assert_eq!(
            (r.unwrap_err().raw_os_error(), asked),
            (Some(libc::ENOENT), vec![0])
        );
        assert_eq!(v.raif.branches().failed_mask(), 1 << 1);
    }
}
