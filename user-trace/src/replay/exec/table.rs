//! A replayed process's descriptors (traced number → the replay's handle), and what a replayed
//! call works with: its record, its paths, the table, the replay directory.

use std::collections::HashMap;
use std::ffi::{CString, c_int};
use std::os::fd::{IntoRawFd, OwnedFd};
use std::sync::{Mutex, MutexGuard};

use crate::replay::root::{Denied, Refusal, Root};
use crate::sys::calls::{self, StatInfo};
use crate::sys::streams::{Dir, Stream};
use crate::trace::Record;

/// Largest transfer a replayed call makes (a bigger traced one is cut, and then mismatches).
pub(super) const MAX_TRANSFER: usize = 64 << 20;

/// A descriptor the replay owns; closed on drop.
#[derive(Debug)]
pub(super) struct Owned(pub(super) c_int);

impl Owned {
    pub(super) fn into_raw(self) -> c_int {
        let f = self.0;
        std::mem::forget(self);
        f
    }
}

impl From<OwnedFd> for Owned {
    fn from(fd: OwnedFd) -> Owned {
        Owned(fd.into_raw_fd())
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        calls::close(self.0);
    }
}

/// A replayed descriptor.
#[derive(Debug)]
pub(super) enum Handle {
    Fd(Owned),
    Stream(Stream, CString),
    Dir(Dir),
}

impl Handle {
    pub(super) fn fd(&self) -> c_int {
        match self {
            Handle::Fd(f) => f.0,
            Handle::Stream(s, _) => s.fd(),
            Handle::Dir(d) => d.fd(),
        }
    }

    /// The child's copy at a fork: a duplicate sharing the open file description.
    pub(super) fn dup(&mut self) -> Option<Handle> {
        let fd = calls::dup_min(self.fd(), 3);
        if fd < 0 {
            return None;
        }
        let fd = Owned(fd as c_int);
        match self {
            Handle::Fd(_) => Some(Handle::Fd(fd)),
            Handle::Stream(s, mode) => {
                s.flush();
                let raw = fd.into_raw();
                match Stream::fdopen(raw, mode) {
                    Ok(c) => Some(Handle::Stream(c, mode.clone())),
                    Err(_) => {
                        drop(Owned(raw));
                        None
                    }
                }
            }
            Handle::Dir(_) => {
                let raw = fd.into_raw();
                match Dir::fdopen(raw) {
                    Ok(d) => Some(Handle::Dir(d)),
                    Err(_) => {
                        drop(Owned(raw));
                        None
                    }
                }
            }
        }
    }

    /// Closes the handle: the result of close, fclose or closedir.
    pub(super) fn close(self) -> i64 {
        match self {
            Handle::Fd(f) => calls::close(f.into_raw()),
            Handle::Stream(s, _) => s.close(),
            Handle::Dir(d) => d.close(),
        }
    }
}

/// One traced process's descriptors.
#[derive(Debug, Default)]
pub(super) struct Table {
    pub(super) fds: HashMap<i64, Handle>,
}

/// Why a call was not replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Skip {
    /// A descriptor the trace did not open (standard streams, pipes, sockets), or one whose
    /// replayed open failed.
    Fd,
    /// A call or command the replay does not issue.
    Unsupported,
    /// A path the replay will not use (see [`crate::replay::root`]).
    Refused(Refusal),
}

/// What replaying a call gave: its result (or `-errno`) and, for stat calls, what it found.
pub(super) type Outcome = Result<(i64, Option<StatInfo>), Skip>;

/// A result without stat information.
pub(super) fn plain(v: i64) -> Outcome {
    Ok((v, None))
}

/// The outcome of a path that gave no descriptor: the walk's errno as the call's result, or
/// the refusal.
pub(super) fn denied(d: Denied) -> Outcome {
    match d {
        Denied::Errno(e) => plain(e),
        Denied::Refused(r) => Err(Skip::Refused(r)),
    }
}

/// The first `n` bytes (capped) of `buf`, grown as needed.
pub(super) fn sized(buf: &mut Vec<u8>, n: u64) -> &mut [u8] {
    let n = (n as usize).min(MAX_TRANSFER);
    if buf.len() < n {
        buf.resize(n, b'x');
    }
    &mut buf[..n]
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A traced call being replayed, with what it works with.
pub(super) struct Call<'a> {
    /// The traced call.
    pub(super) rec: &'a Record,
    /// Its paths relative to the replay directory (see the plan's `StepKind::Call`).
    pub(super) paths: &'a [Option<CString>],
    /// The process's descriptors.
    pub(super) table: &'a Mutex<Table>,
    /// The replay directory.
    pub(super) root: &'a Root,
    /// A buffer reused between calls.
    pub(super) buf: &'a mut Vec<u8>,
}

impl Call<'_> {
    /// The `k`-th path item (relative to the replay directory).
    pub(super) fn path(&self, k: usize) -> Result<&std::ffi::CStr, Skip> {
        self.paths.get(k).and_then(Option::as_deref).ok_or(Skip::Fd)
    }

    /// The replay's descriptor for the traced descriptor item `k`.
    pub(super) fn fd(&self, k: usize) -> Result<c_int, Skip> {
        let fd = self.rec.fd(k).ok_or(Skip::Fd)?;
        lock(self.table)
            .fds
            .get(&fd)
            .map(Handle::fd)
            .ok_or(Skip::Fd)
    }

    /// The traced size item (0 when none).
    pub(super) fn size(&self) -> u64 {
        self.rec.size().unwrap_or(0)
    }

    /// The `k`-th offset item (0 when none).
    pub(super) fn off(&self, k: usize) -> i64 {
        self.rec.off(k).unwrap_or(0)
    }

    /// The `k`-th integer item (0 when none).
    pub(super) fn int(&self, k: usize) -> c_int {
        self.rec.int(k).unwrap_or(0) as c_int
    }

    /// The flags item.
    pub(super) fn flags(&self) -> c_int {
        self.rec.flags() as c_int
    }

    /// The mode item.
    pub(super) fn mode(&self) -> u32 {
        self.rec.mode() as u32
    }

    /// The `k`-th string item of the record as a C string.
    pub(super) fn string(&self, k: usize) -> Option<CString> {
        self.rec.path(k).and_then(|s| CString::new(s).ok())
    }

    /// A buffer of `n` bytes (capped), reused between calls.
    pub(super) fn buffer(&mut self, n: u64) -> &mut [u8] {
        sized(self.buf, n)
    }

    /// Puts the replay's new descriptor `got` (or `-errno`) in the table under the traced
    /// result (when the traced call made one).
    pub(super) fn new_fd(&self, got: i64) -> Outcome {
        if got >= 0 {
            if self.rec.result >= 0 {
                let old = lock(self.table)
                    .fds
                    .insert(self.rec.result, Handle::Fd(Owned(got as c_int)));
                drop(old);
            } else {
                calls::close(got as c_int);
            }
        }
        plain(got)
    }

    /// Removes the traced descriptor item 0 from the table, and closes it.
    pub(super) fn close(&self) -> Outcome {
        let h = lock(self.table)
            .fds
            .remove(&self.rec.fd(0).ok_or(Skip::Fd)?)
            .ok_or(Skip::Fd)?;
        plain(h.close())
    }
}
