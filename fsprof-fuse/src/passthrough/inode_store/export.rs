//! Export support: node ids that lead to their object again after the kernel forgot them, so
//! that file handles taken on the mount (`name_to_handle_at`, an NFS server's) open the same
//! object later, as they would on LOWER.
//!
//! The kernel's handle of a FUSE object is its node id and generation. While the kernel holds
//! the inode it answers `open_by_handle_at` itself; once it has forgotten it (memory pressure,
//! `drop_caches`), it asks `LOOKUP(nodeid, ".")` (`FUSE_EXPORT_SUPPORT`), and for a directory
//! being reconnected to the tree `LOOKUP(nodeid, "..")`, and compares the generation answered
//! with the handle's.
//!
//! * **Generations are derived** from the lower object (its lower file handle, which carries
//!   the lower file system's own generation, and its birth time), not counted: the same object
//!   gets the same generation each time it is looked up, and an object that took the inode
//!   number of a deleted one gets another, so the kernel refuses a handle of the deleted one
//!   (`ESTALE`).
//! * **Forgotten handles are kept**: when the kernel forgets an inode located by handle, its
//!   lower handle stays in a bounded table (at most [`super::FORGOTTEN`] entries, at least the last
//!   half of that; the oldest go first), by node id. `LOOKUP(nodeid, ".")` of a node no longer known opens it from there, checks that
//!   it is the same object (device, inode number, birth time, type), and gives it its node id
//!   and generation back. A deleted object gives `ESTALE`, as on LOWER.
//! * **Parents** are found with `..` on LOWER, and must lie inside it: one that does not (a
//!   directory moved out of LOWER behind the mount's back) is not found (`ESTALE`).
//!
//! In path mode (no lower handles) a forgotten object cannot be found from its node id alone:
//! its handles give `ESTALE` once the kernel forgot it. So do handles of objects forgotten
//! longer ago than the table remembers, and of objects that had node ids allocated from
//! `2^63` (another device, an inode number taken) and were looked up again by name since,
//! under a new one.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::forgotten::Gone;
use super::{Inode, InodeStore, Locator, ROOT_ID, key_shard, no_entry};
use crate::protocol::ops::Sys;
use crate::sys::{self, FileHandle, Stat};
use crate::toolkit::lower::Via;

/// Deepest a parent may lie below LOWER's root for `..` to find it.
const MAX_DEPTH: usize = 4096;

/// A generation for an object located by `locator` and `stat`ed as `st`: derived from its
/// lower handle and birth time (32 bits, never 0), or `None` when neither is known (path
/// mode on a file system without birth times).
pub(super) fn derived_generation(locator: &Locator, st: &Stat) -> Option<u64> {
    // FNV-1a.
    let mut h: u32 = 0x811c_9dc5;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ b as u32).wrapping_mul(0x0100_0193);
        }
    };
    match locator {
        Locator::Handle { handle, .. } => {
            eat(&handle.handle_type().to_ne_bytes());
            eat(handle.bytes());
        }
        _ if st.btime_ns == 0 => return None,
        _ => eat(&st.ino.to_ne_bytes()),
    }
    eat(&st.btime_ns.to_ne_bytes());
    Some(h.max(1) as u64)
}

impl InodeStore {
    /// A generation for a new object, or for a known node id whose object was replaced (`old`:
    /// the generation it had, which the new one never equals).
    pub(super) fn generation_for(&self, locator: &Locator, st: &Stat, old: Option<u64>) -> u64 {
        let counted = || self.generation.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff;
        let g = derived_generation(locator, st).unwrap_or_else(counted);
        match old {
            Some(o) if o == g => ((o + 1) & 0xffff_ffff).max(1),
            _ => g,
        }
    }

    /// Keeps the lower handle of `inode`, which the kernel just forgot (handle locators only:
    /// an object found by path cannot be found again from its node id).
    pub(super) fn remember(&self, inode: &Inode) {
        let id = inode.ident.read();
        let Locator::Handle { handle, mount_id } = &id.locator else {
            return;
        };
        let gone = Gone {
            handle_type: handle.handle_type(),
            handle: handle.bytes().into(),
            mount_id: *mount_id,
            dev: inode.dev,
            ino: inode.ino,
            btime_ns: id.btime_ns as i64,
            kind: id.kind,
            generation: id.generation,
        };
        drop(id);
        self.forgotten.remember(inode.nodeid, gone);
    }

    /// `LOOKUP(nodeid, ".")`: the object of `nodeid` and its attributes, with one kernel lookup
    /// counted; a forgotten one is found again from its lower handle. `ESTALE` when it cannot be
    /// (gone, never handled, forgotten too long ago).
    pub fn lookup_self(&self, via: Via, nodeid: u64) -> io::Result<(Arc<Inode>, Stat)> {
        if let Ok(inode) = self.get(nodeid) {
            let fd = self.fd(via, &inode)?;
            let st = via.call(Sys::Statx, || sys::fstat(fd.as_fd()))?;
            if self.count_lookup(&inode) {
                return Ok((inode, st));
            }
            // Forgotten in between: found again below, like any forgotten object.
        }
        self.revive(via, nodeid)
    }

    /// Counts one kernel lookup of the known `inode`, under its map lock so that a concurrent
    /// forget cannot drop it in between; false if it was dropped already.
    fn count_lookup(&self, inode: &Arc<Inode>) -> bool {
        let map = self.by_key[key_shard(inode.dev, inode.ino)].read();
        let live = map
            .get(&(inode.dev, inode.ino))
            .is_some_and(|i| Arc::ptr_eq(i, inode));
        if live {
            inode.lookups.fetch_add(1, Ordering::Relaxed);
        }
        live || inode.nodeid == ROOT_ID
    }

    /// A forgotten object of `nodeid`, opened from its kept lower handle and known again under
    /// the same node id and generation.
    fn revive(&self, via: Via, nodeid: u64) -> io::Result<(Arc<Inode>, Stat)> {
        let kept = self.forgotten.with(nodeid, |e| {
            let handle = FileHandle::from_parts(e.handle_type, &e.handle)?;
            let what = (e.dev, e.ino, e.btime_ns, e.kind, e.generation);
            Some((handle, e.mount_id, what))
        });
        let (handle, mount_id, (dev, ino, btime_ns, kind, generation)) =
            kept.flatten().ok_or_else(no_entry)?;
        let fd = self
            .retry_emfile(|| {
                via.call(Sys::OpenByHandleAt, || {
                    self.by_handle(&handle, mount_id, libc::O_PATH)
                })
            })
            .map_err(stale)?;
        let st = via.call(Sys::Statx, || sys::fstat(fd.as_fd()))?;
        let same = (st.dev, st.ino) == (dev, ino)
            && st.mode & libc::S_IFMT == kind
            && (btime_ns == 0 || st.btime_ns as i64 == btime_ns);
        if !same || (kind == libc::S_IFDIR && !self.within_lower(via, fd.as_fd(), &st)?) {
            via.close(fd);
            return Err(no_entry());
        }
        let locator = Locator::Handle { handle, mount_id };
        let inode = self.readmit(via, nodeid, generation, locator, &st, fd)?;
        Ok((inode, st))
    }

    /// `LOOKUP(dir, "..")`: the parent directory of `dir` within LOWER (LOWER's root for
    /// itself), with one kernel lookup counted. `ENOTDIR` for anything but a directory,
    /// `ESTALE` for a parent outside LOWER or one that cannot be located (path mode).
    pub fn lookup_parent(&self, via: Via, dir: &Arc<Inode>) -> io::Result<(Arc<Inode>, Stat)> {
        let root = self.root.clone();
        if dir.nodeid == ROOT_ID {
            let fd = self.fd(via, &root)?;
            let st = via.call(Sys::Statx, || sys::fstat(fd.as_fd()))?;
            return Ok((root, st));
        }
        if !dir.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        let fd = self.fd(via, dir)?;
        let up = self.retry_emfile(|| {
            via.call(Sys::Openat, || {
                sys::openat(
                    fd.as_fd(),
                    OsStr::new(".."),
                    libc::O_PATH | libc::O_DIRECTORY,
                    0,
                )
            })
        })?;
        let st = match via.call(Sys::Statx, || sys::fstat(up.as_fd())) {
            Ok(st) => st,
            Err(e) => {
                via.close(up);
                return Err(e);
            }
        };
        let known = self.by_key[key_shard(st.dev, st.ino)]
            .read()
            .get(&(st.dev, st.ino))
            .cloned();
        // A parent the kernel knows was looked up through the mount, inside LOWER.
        if let Some(inode) = known.filter(|i| self.count_lookup(i)) {
            via.close(up);
            return Ok((inode, st));
        }
        let located = self.handles && self.within_lower(via, up.as_fd(), &st)?;
        let handle = located
            .then(|| {
                via.call(Sys::NameToHandleAt, || {
                    sys::name_to_handle_at(up.as_fd(), OsStr::new(""))
                })
            })
            .transpose()?
            .filter(|(_, mount_id)| self.mounts.read().contains_key(mount_id));
        let Some((handle, mount_id)) = handle else {
            via.close(up);
            return Err(no_entry());
        };
        let inode = self.find_or_add(via, &root, OsStr::new(".."), &st, false, false, || {
            Ok((Locator::Handle { handle, mount_id }, Some(up)))
        })?;
        Ok((inode, st))
    }

    /// Whether the directory `fd` (`stat`ed as `st`) lies inside LOWER: its `..` chain reaches
    /// LOWER's root before the root of its file system.
    fn within_lower(&self, via: Via, fd: BorrowedFd, st: &Stat) -> io::Result<bool> {
        let root = (self.root.dev, self.root.ino);
        let mut at = (st.dev, st.ino);
        let mut cur: Option<OwnedFd> = None;
        for _ in 0..MAX_DEPTH {
            if at == root {
                return Ok(true);
            }
            let here = cur.as_ref().map_or(fd, |f| f.as_fd());
            let up = self.retry_emfile(|| {
                via.call(Sys::Openat, || {
                    sys::openat(here, OsStr::new(".."), libc::O_PATH | libc::O_DIRECTORY, 0)
                })
            })?;
            let ust = via.call(Sys::Statx, || sys::fstat(up.as_fd()));
            if let Some(prev) = cur.take() {
                via.close(prev);
            }
            let ust = match ust {
                Ok(ust) => ust,
                Err(e) => {
                    via.close(up);
                    return Err(e);
                }
            };
            if (ust.dev, ust.ino) == at {
                // The root of its file system (or of the process): LOWER was not on the way.
                via.close(up);
                return Ok(false);
            }
            at = (ust.dev, ust.ino);
            cur = Some(up);
        }
        Ok(false)
    }

    /// Makes the object `st` (opened as `fd`, found by `locator`) known again as `nodeid` with
    /// `generation`, counting one kernel lookup. `ESTALE` if the node id went to another object
    /// meanwhile, or the object is known under another node id.
    fn readmit(
        &self,
        via: Via,
        nodeid: u64,
        generation: u64,
        locator: Locator,
        st: &Stat,
        fd: OwnedFd,
    ) -> io::Result<Arc<Inode>> {
        let shard = &self.by_key[key_shard(st.dev, st.ino)];
        let mut map = shard.write();
        if let Some(inode) = map.get(&(st.dev, st.ino)) {
            // Looked up by name meanwhile.
            let known =
                (inode.nodeid == nodeid && inode.generation() == generation).then(|| inode.clone());
            if let Some(i) = &known {
                // Counted under the map lock, so that a concurrent forget cannot drop it.
                i.lookups.fetch_add(1, Ordering::Relaxed);
            }
            drop(map);
            via.close(fd);
            return known.ok_or_else(no_entry);
        }
        let mut ids = self.by_id[super::shard_of(nodeid)].write();
        if ids.contains_key(&nodeid) {
            drop((ids, map));
            via.close(fd);
            return Err(no_entry());
        }
        let inode = Arc::new(Inode::new(
            nodeid,
            st,
            super::Ident {
                btime_ns: st.btime_ns,
                kind: st.mode & libc::S_IFMT,
                generation,
                locator,
            },
        ));
        ids.insert(nodeid, inode.clone());
        map.insert((st.dev, st.ino), inode.clone());
        drop(ids);
        drop(map);
        self.cache_fd(via, &inode, fd, false);
        Ok(inode)
    }

    /// Lower handles of forgotten objects kept (see the module documentation).
    pub fn forgotten(&self) -> usize {
        self.forgotten.len()
    }
}

/// `open_by_handle_at`'s refusals of an object that is gone, as the kernel wants them.
fn stale(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ESTALE | libc::EINVAL) => no_entry(),
        _ => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::passthrough::inode_store::Ident;

    fn stat(ino: u64, btime_ns: i128) -> Stat {
        Stat {
            dev: 1,
            ino,
            btime_ns,
            mode: libc::S_IFREG | 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            size: 0,
            blocks: 0,
            blksize: 4096,
            atime: (0, 0),
            mtime: (0, 0),
            ctime: (0, 0),
        }
    }

    fn by_handle(bytes: &[u8]) -> Locator {
        Locator::Handle {
            handle: FileHandle::from_parts(1, bytes).unwrap(),
            mount_id: 7,
        }
    }

    /// An inode located by a handle of its own, as the kernel forgets it.
    fn handled(nodeid: u64) -> Inode {
        Inode::new(
            nodeid,
            &stat(nodeid, 5),
            Ident {
                btime_ns: 5,
                kind: libc::S_IFREG,
                generation: 9,
                locator: by_handle(&nodeid.to_ne_bytes()),
            },
        )
    }

    #[test]
    fn objects_located_by_handle_are_remembered_and_by_path_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = sys::open_path(dir.path(), libc::O_PATH | libc::O_DIRECTORY).unwrap();
        let store = InodeStore::new(root, super::super::InodeMode::Paths, 16).unwrap();
        store.remember(&handled(3));
        assert_eq!(store.forgotten(), 1);
        let mut by_path = handled(4);
        by_path.ident.get_mut().locator = Locator::Root;
        store.remember(&by_path);
        assert_eq!(store.forgotten(), 1);
    }

    #[test]
    fn generations_follow_the_object_not_the_lookup() {
        let (a, b) = (by_handle(b"object-a"), by_handle(b"object-b"));
        let g = derived_generation(&a, &stat(10, 5)).unwrap();
        // The same object: the same generation, each time, within 32 bits and never 0.
        assert_eq!(derived_generation(&a, &stat(10, 5)), Some(g));
        assert!(g > 0 && g <= u32::MAX as u64);
        // Another object with that inode number (another handle, or birth time): another.
        assert_ne!(derived_generation(&b, &stat(10, 5)), Some(g));
        assert_ne!(derived_generation(&a, &stat(10, 6)), Some(g));
        // By path: the birth time, where known.
        let p = Locator::Root;
        assert!(derived_generation(&p, &stat(10, 5)).is_some());
        assert_eq!(derived_generation(&p, &stat(10, 0)), None);
    }
}
