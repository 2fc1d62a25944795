//! What the mount holds of the parts' checksum attributes ([`crate::sums`]) and how it writes
//! them back: each branch's sum directory ([`SumDirs`]), the files whose attributes changed in
//! memory ([`DirtySums`]), and the reading and writing of a home part's attribute, its record
//! and the entries after it.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use fsprof_fuse::filesystem::Request;
use fsprof_fuse::protocol::ops::Sys;
use fsprof_fuse::sys;

use crate::branch::BranchSet;
use crate::inode::{FileState, Inode};
use crate::part_io::no_room;
use crate::sums;

/// Each branch's sum directory ([`crate::reserved::SUM_DIR`]), where it could be opened; replaced when
/// the branch is ([`crate::online`]).
pub struct SumDirs(pub(crate) Box<[parking_lot::RwLock<Option<Arc<OwnedFd>>>]>);

impl SumDirs {
    /// Branch `b`'s.
    #[inline]
    pub fn get(&self, b: usize) -> Option<Arc<OwnedFd>> {
        self.0[b].read().clone()
    }

    /// Makes `dir` branch `b`'s.
    pub fn replace(&self, b: usize, dir: Option<OwnedFd>) {
        let old = std::mem::replace(&mut *self.0[b].write(), dir.map(Arc::new));
        drop(old);
    }
}

/// The files whose checksum attributes were changed in memory and not yet written back
/// ([`FileState::xcache`]). A write changes a part's attribute in memory only; it is written
/// when the file is synced or its last handle released, or by the intent log's clearing
/// cycle, after the
/// writes of the epoch it ends and before the entries of their regions go
/// ([`crate::intent::Journal::cycle_then`]): a region's checksums reach the branch before the
/// log forgets it, so a crash finds every block whose checksum was not written in a logged
/// region, whose replay recomputes it. Postmark writes a file in a few requests and closes it:
/// one attribute write per part instead of one per request (each an ext4 journal update).
pub struct DirtySums {
    list: parking_lot::Mutex<Vec<Arc<Inode>>>,
    /// One write-back at a time.
    one: parking_lot::Mutex<()>,
    /// Files listed.
    listed: AtomicUsize,
    /// Most files listed at once: each holds its home parts' descriptors until written back,
    /// outside the descriptor cache, so their number is bounded (a change beyond is written
    /// at once).
    most: usize,
}

impl DirtySums {
    /// A list of at most `most` files (at least one).
    pub fn new(most: usize) -> DirtySums {
        DirtySums {
            list: parking_lot::Mutex::new(Vec::new()),
            one: parking_lot::Mutex::new(()),
            listed: AtomicUsize::new(0),
            most: most.max(1),
        }
    }

    /// Whether another file may be listed.
    #[inline]
    pub(crate) fn has_room(&self) -> bool {
        self.listed.load(Ordering::Relaxed) < self.most
    }

    /// Lists `inode` (whose attributes changed), unless it is listed.
    pub(crate) fn add(&self, inode: &Arc<Inode>, file: &FileState) {
        if !file.xlisted.swap(true, Ordering::AcqRel) {
            self.list.lock().push(inode.clone());
            self.listed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Writes back the changed attributes of every listed file.
    /// When it returns, every change listed before the call is written (a second caller
    /// waits for a first one's run).
    pub fn flush_all(&self, bs: &BranchSet) {
        let _one = self.one.lock();
        let list = std::mem::take(&mut *self.list.lock());
        self.listed.fetch_sub(list.len(), Ordering::Relaxed);
        for inode in list {
            if let Some(f) = &inode.file {
                // Unlisted first: a change after this is listed again, or written here.
                f.xlisted.store(false, Ordering::Release);
                // A file changed with no handle open (a truncation by name): what it cached
                // goes now (but a change made since, listed again).
                if inode.opens() == 0 {
                    release_sums(bs, f, None);
                } else {
                    flush_sums(bs, f, None);
                }
            }
        }
    }
}

/// Writes back `file`'s changed checksum attributes ([`FileState::xcache`]), counted for
/// `req` where there is one. One that cannot be written is dropped, and the branch's error
/// reported (the blocks it covers read as the attribute on the branch says).
pub(crate) fn flush_sums(bs: &BranchSet, file: &FileState, req: Option<&Request>) {
    let mut cache = file.xcache.lock();
    let failed = bs.failed_mask();
    for c in cache.iter_mut().filter(|c| c.dirty) {
        let Some(fd) = c.fd.take().filter(|_| failed & (1 << c.h) == 0) else {
            // Gone with its branch.
            c.dirty = false;
            continue;
        };
        let call = |op: Sys, f: &mut dyn FnMut() -> io::Result<usize>| match req {
            Some(req) => bs.get(c.h).call(req, op, f),
            None => f(),
        };
        let put = |entries: &[u8]| put_attr(fd.as_fd(), entries, call);
        let Err(e) = put(&c.value) else {
            if !c.value.is_empty() {
                file.bare.fetch_and(!(1 << c.h), Ordering::AcqRel);
            }
            c.dirty = false;
            continue;
        };
        log::debug!(
            "branch {}: checksums of branch {}'s part not written: {e}",
            c.h,
            c.b
        );
        // A home part with no record (removed on the branch by hand): nowhere to keep them.
        let gone = e.raw_os_error() == Some(libc::ENODATA);
        if gone || (!no_room(&e) && bs.error(c.h, &e, "checksums")) {
            c.dirty = false;
            continue;
        }
        // Not written (no room, say): the part's entries become unknown, which fits where
        // the old value was; else tried again later.
        if put(&[]).is_err() {
            c.fd = Some(fd);
        } else {
            log::warn!(
                "branch {}: no room for the checksums of branch {}'s part of file {:016x} \
                 ({e}): its blocks go unverified until written again",
                c.h,
                c.b,
                file.id
            );
            c.value.clear();
            c.dirty = false;
        }
    }
}

/// Makes `entries` what the record attribute of `fd`, a home part, holds after the record,
/// through `call` (which counts each system call).
pub(crate) fn put_attr(
    fd: BorrowedFd,
    entries: &[u8],
    call: impl Fn(Sys, &mut dyn FnMut() -> io::Result<usize>) -> io::Result<usize>,
) -> io::Result<()> {
    let name = OsStr::new(crate::layout::XATTR);
    sums::with_entries(
        |buf| {
            call(Sys::Fgetxattr, &mut || {
                sums::absent_is_empty(sys::fgetxattr(fd, name, buf))
            })
        },
        |v| {
            call(Sys::Fsetxattr, &mut || {
                sys::fsetxattr(fd, name, v, 0).map(|()| 0)
            })
            .map(drop)
        },
        entries,
    )
}

/// Reads the entries the record attribute of `fd`, a home part of file `id`, holds after the
/// record into `buf` (at least [`crate::layout::WINDOW`] bytes), through `call`: their length.
pub(crate) fn get_attr(
    fd: BorrowedFd,
    id: u64,
    buf: &mut [u8],
    call: impl FnOnce(Sys, &mut dyn FnMut() -> io::Result<usize>) -> io::Result<usize>,
) -> io::Result<usize> {
    let mut v = [0u8; crate::layout::ATTR_MAX];
    let n = call(Sys::Fgetxattr, &mut || {
        sums::absent_is_empty(sys::fgetxattr(fd, OsStr::new(crate::layout::XATTR), &mut v))
    })?;
    let e = sums::entries_in(&v[..n], id);
    buf[..e.len()].copy_from_slice(e);
    Ok(e.len())
}

/// Writes `rec`, the record of `file`, to its part on branch `b` (its attribute read with
/// `get`, written with `set`), keeping the checksum entries that follow the record there:
/// those the mount holds (written with it, so no longer to write back), else those on the
/// branch (read first, unless it is known to hold none).
pub(crate) fn put_record(
    file: &FileState,
    b: usize,
    rec: &[u8],
    get: impl FnOnce(&mut [u8]) -> io::Result<usize>,
    set: impl Fn(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    let bit = 1u64 << b;
    let mut cache = file.xcache.lock();
    let held = cache.iter_mut().find(|c| c.h == b);
    let bare = file.bare.load(Ordering::Acquire) & bit != 0;
    let after = match &held {
        Some(c) => sums::After::Entries(&c.value),
        None if bare => sums::After::Nothing,
        None => sums::After::Kept,
    };
    let alone = after == sums::After::Nothing;
    match sums::with_record(get, &set, rec, after) {
        Ok(()) => {
            if let Some(c) = held {
                if !c.value.is_empty() {
                    file.bare.fetch_and(!bit, Ordering::AcqRel);
                }
                c.dirty = false;
            }
            Ok(())
        }
        // No room for the record with entries: the record alone (it fitted before), the
        // entries unknown.
        Err(e) if no_room(&e) && !alone => {
            set(rec)?;
            log::warn!(
                "branch {b}: no room for checksums after the record of file {:016x} ({e}): \
                 the blocks they covered go unverified until written again",
                file.id
            );
            if let Some(c) = held {
                c.value.clear();
                c.dirty = false;
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// [`flush_sums`], then lets go of what `file` cached of its checksum attributes, with the
/// descriptors it holds (a change that could not be written stays): no handle is left to use
/// them.
pub(crate) fn release_sums(bs: &BranchSet, file: &FileState, req: Option<&Request>) {
    flush_sums(bs, file, req);
    file.xcache.lock().retain(|c| c.dirty);
}
