//! The paths of descriptors, learned from a trace as it is listed, so that `fsprof trace
//! show` names the file of each descriptor as `strace -y` does: `read(3</srv/f>, 4096)`.
//!
//! A process's descriptor is named by the call that returned it (`open`, `openat`, `creat`,
//! `fopen`, `opendir`: their path, joined to the directory's name for an `openat` relative to
//! a named directory), carried over by `dup`, `dup2`, `dup3` and `fcntl(F_DUPFD)`, and
//! forgotten by `close`, `fclose` and `closedir`. A fork child's descriptors it did not open
//! itself are looked up in its parent's (as they were when listed). What the trace did not see
//! open (the descriptors the program started with, pipes and sockets) has no name; a call on
//! a descriptor that is not a file still shows its kind (`<pipe>`). At most [`MAX_NAMES`] names
//! are kept: past that, new ones are not learned.

use std::collections::HashMap;

use crate::abi::id;
use crate::trace::Record;

/// Names kept at most.
pub const MAX_NAMES: usize = 1 << 16;

/// Descriptor names by process.
#[derive(Debug, Default)]
pub struct FdNames {
    names: HashMap<(u32, i64), Vec<u8>>,
    parents: HashMap<u32, u32>,
}

impl FdNames {
    /// Notes that `pid`'s parent is `ppid` (for descriptors a fork child inherited).
    pub fn parent(&mut self, pid: u32, ppid: u32) {
        if pid != ppid && self.parents.len() < MAX_NAMES {
            self.parents.entry(pid).or_insert(ppid);
        }
    }

    /// The name of `pid`'s descriptor `fd`, if known (its own, or its parent's).
    pub fn get(&self, pid: u32, fd: i64) -> Option<Vec<u8>> {
        self.names
            .get(&(pid, fd))
            .or_else(|| {
                let ppid = self.parents.get(&pid)?;
                self.names.get(&(*ppid, fd))
            })
            .cloned()
    }

    /// Learns from a call `pid` made.
    pub fn learn(&mut self, pid: u32, rec: &Record) {
        let ok = rec.result >= 0;
        let fd0 = rec.fd(0);
        match rec.call {
            id::OPEN | id::CREAT | id::FOPEN | id::OPENDIR if ok => {
                if let Some(p) = rec.path(0) {
                    self.set(pid, rec.result, p.to_vec());
                }
            }
            id::OPENAT if ok => {
                if let Some(p) = rec.path(0) {
                    let name = match fd0.and_then(|d| self.get(pid, d)) {
                        Some(mut dir) if !p.starts_with(b"/") => {
                            dir.push(b'/');
                            dir.extend_from_slice(p);
                            dir
                        }
                        _ => p.to_vec(),
                    };
                    self.set(pid, rec.result, name);
                }
            }
            id::DUP | id::DUP2 | id::DUP3 | id::FDOPEN | id::FDOPENDIR if ok => {
                match fd0.and_then(|d| self.get(pid, d)) {
                    Some(n) => self.set(pid, rec.result, n),
                    None => {
                        self.names.remove(&(pid, rec.result));
                    }
                }
            }
            id::FCNTL if ok => {
                let cmd = rec.int(0).unwrap_or(-1) as i32;
                if cmd == libc::F_DUPFD || cmd == libc::F_DUPFD_CLOEXEC {
                    match fd0.and_then(|d| self.get(pid, d)) {
                        Some(n) => self.set(pid, rec.result, n),
                        None => {
                            self.names.remove(&(pid, rec.result));
                        }
                    }
                }
            }
            id::CLOSE | id::FCLOSE | id::CLOSEDIR => {
                if let Some(d) = fd0 {
                    self.names.remove(&(pid, d));
                }
            }
            _ => {}
        }
    }

    fn set(&mut self, pid: u32, fd: i64, name: Vec<u8>) {
        if self.names.len() < MAX_NAMES || self.names.contains_key(&(pid, fd)) {
            self.names.insert((pid, fd), name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Arg;

    fn rec(call: u8, result: i64, args: Vec<Arg>) -> Record {
        Record {
            call,
            result,
            args,
            ..Record::default()
        }
    }

    #[test]
    fn descriptors_are_named_by_their_open_and_forgotten_by_their_close() {
        let mut n = FdNames::default();
        n.learn(
            7,
            &rec(
                id::OPENAT,
                3,
                vec![Arg::Fd(-100), Arg::Path(Some(b"/srv".to_vec()))],
            ),
        );
        n.learn(
            7,
            &rec(
                id::OPENAT,
                4,
                vec![Arg::Fd(3), Arg::Path(Some(b"f".to_vec()))],
            ),
        );
        assert_eq!(n.get(7, 4).as_deref(), Some(&b"/srv/f"[..]));
        n.learn(7, &rec(id::DUP2, 9, vec![Arg::Fd(4), Arg::Fd(9)]));
        assert_eq!(n.get(7, 9).as_deref(), Some(&b"/srv/f"[..]));
        // A fork child sees its parent's; another process does not.
        n.parent(8, 7);
        assert_eq!(n.get(8, 4).as_deref(), Some(&b"/srv/f"[..]));
        assert_eq!(n.get(6, 4), None);
        n.learn(7, &rec(id::CLOSE, 0, vec![Arg::Fd(4)]));
        assert_eq!(n.get(7, 4), None);
        // A failed open names nothing.
        n.learn(7, &rec(id::OPEN, -2, vec![Arg::Path(Some(b"x".to_vec()))]));
        assert_eq!(n.get(7, -2), None);
    }
}
