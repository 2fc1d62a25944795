//! RAIF's inodes: the mount's own node ids, where each object is found on the branches, the
//! in-memory state of regular files, and their descriptors in fsprof-fuse's bounded cache
//! ([`fsprof_fuse::toolkit::fdcache`]).
//!
//! # Node ids
//!
//! Regular files and directories carry a random 63-bit identity in their record
//! ([`crate::layout::XATTR`]), the same on every branch; it is their node id (and `st_ino`), so
//! it does not depend on any branch, survives `forget` and remounts, and makes hard links one
//! inode. Symlinks and special files cannot carry `user.*` attributes: theirs is in
//! [`crate::layout::XATTR_OTHER`] (a `trusted.*` attribute, which needs root), with the same
//! effect. Where that cannot be written (the daemon is not root), they get ids from a counter
//! (with the top bit set), remembered by parent and name while the kernel knows them.
//!
//! # Locating objects
//!
//! An inode knows its parent and name, and the other names (hard links) the kernel looked it
//! up by; an operation on branch `b` opens the parent directory on `b` and works by name
//! relative to it. When a name goes (unlinked, renamed away), another known one takes its
//! place, so a file reached through one link keeps working after another link is removed. Directories cache their `O_PATH` descriptor per
//! branch; the cache is bounded (CLOCK replacement) since the process may not hold more than a
//! fixed number of descriptors.
//!
//! # Open objects
//!
//! While a regular file is open, its parts' descriptors are in its slots, where every request
//! on it takes them (an open handle keeps none of its own): `read`, `write`, `fstat`,
//! `fchmod`, `ftruncate`, the xattr calls and further opens of it. They count against the
//! cache's capacity like any other, so the least recently used are closed when the daemon
//! holds too many, and a request on a file whose parts went opens them again by name: a
//! client may hold open many times more files than the daemon may hold descriptors. They
//! leave the cache at the last release (regular files hold no part descriptor unless open).
//!
//! A name may stop leading to an open object (unlinked, or replaced by a rename). Before that
//! happens through the mount, the file's parts are opened and *kept*
//! ([`InodeTable::keep_parts`]): pinned, never evicted, until the last release; operations on
//! it then reach the open object, never its name. An open directory's descriptors are pinned
//! the same way.
//!
//! A regular file's slots also hold, after its parts', the descriptors of its sum or overflow
//! files ([`crate::sums`], one per part). Those stay cached after the last release, unpinned,
//! until evicted or the file is forgotten or removed: a file opened again (Postmark opens one
//! per transaction) does not open and close them each time. Sum files are only ever
//! changed in place through the mount, so a cached one stays right; the few places that remove
//! or replace one (the last unlink, a branch replaced under the mount, a rebuilt file joining)
//! take the cached ones ([`InodeTable::drop_sums`]).
//!
//! Slot `i` of any object holds a descriptor on branch `i % branches` (a sum file's slot is
//! that of the branch it lives on, [`crate::sums::home`]): a descriptor the table lets go is
//! given with its branch to the request's `gone(branch, fd)`, which closes it as a call of the
//! request on that branch ([`crate::branch::BranchSet::release`]).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use fsprof_fuse::passthrough::inode_store::ROOT_ID;
use fsprof_fuse::toolkit::fdcache::{Cached, Fd, FdCache, FdSlots};
use fsprof_fuse::toolkit::sharded::{Sharded, shard_of as shard, sharded};
use parking_lot::{Mutex, RwLock};

use crate::branch::BranchSet;
use crate::layout::{FileMeta, Layout};

/// First node id handed out from the counter (objects without a record).
const COUNTER_BASE: u64 = 1 << 63;

/// FNV-1a of a name (to spread names over branches and hash tables).
#[inline]
pub fn name_hash(name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Where an object is: its parent and its name there (the root has no parent).
#[derive(Debug, Clone)]
pub struct Loc {
    /// Parent directory.
    pub parent: Option<Arc<Inode>>,
    /// Name in the parent.
    pub name: OsString,
}

impl Loc {
    fn is(&self, parent: &Arc<Inode>, name: &OsStr) -> bool {
        self.parent.as_ref().is_some_and(|p| Arc::ptr_eq(p, parent)) && self.name == name
    }
}

/// Most other names an inode remembers (hard links looked up); beyond, the oldest is dropped.
const MAX_ALIASES: usize = 16;

/// The in-memory state of a regular file.
#[derive(Debug)]
pub struct FileState {
    /// Identity.
    pub id: u64,
    /// Placement.
    pub layout: Layout,
    /// Logical size (authoritative while the inode lives).
    pub size: AtomicU64,
    /// Generation.
    pub generation: AtomicU64,
    /// Branches whose part was lost (RAIF0, not rebuilt) or given up after a write refused
    /// for lack of room could not be taken back: never read or written; RAIF0 ranges there
    /// fail with `EIO`, the other levels reconstruct them.
    pub lost: AtomicU64,
    /// RAIF4/5: the parity is out of date (see [`FileMeta::parity_stale`]).
    pub parity_stale: AtomicBool,
    /// Branches whose part is out of date (a stale branch that missed this file's changes, or
    /// a part found missing): not read, not written, until rebuilt.
    pub stale: AtomicU64,
    /// Writers exclusive where copies or parity must stay consistent; readers shared.
    pub lock: RwLock<()>,
    /// Size or generation changed since the record was last written.
    pub dirty: AtomicBool,
    /// Data was written: at close every part (and copy) gets the same modification time (the
    /// parts written and those not written, or copies written one after the other, would
    /// differ otherwise; `raif scrub` takes a part that stands out for one changed behind
    /// RAIF's back).
    pub touched: AtomicBool,
    /// After an unclean stop: the parts are still to be checked against the recorded size.
    /// Done once, under `lock`, by the lookup that published the inode (see
    /// `Raif::recover_size`).
    pub recover: AtomicBool,
    /// Its regions logged in the write-intent log's current epoch ([`crate::intent`]).
    pub intent: Mutex<crate::intent::Live>,
    /// Branches being rebuilt while mounted that this file's part is current on (rebuilt, or
    /// made there with the file): written from then on ([`crate::online`]).
    pub joined: AtomicU64,
    /// When a rebuild while mounted put a part of this open file in its slots: the value of
    /// [`crate::branch::BranchSet::swaps`] then (0: never). Handles opened before take that
    /// part from the slots ([`crate::fs::OpenFile`]).
    pub swapped: AtomicU64,
    /// Parts (by branch) known to keep their checksums after the record of their home part
    /// ([`crate::sums`]); the others have none, or are not known yet.
    pub xsums: AtomicU64,
    /// Of those, the parts that may have an overflow file (one was made or opened, or the
    /// part's mode was learnt from the branches, which do not say).
    pub xover: AtomicU64,
    /// Branches whose part's record attribute is known to hold no checksum entries after the
    /// record (set when the mount makes the file; a bit goes when entries are written there,
    /// and all go when a branch is replaced or rebuilt): a record written there needs no read
    /// first ([`crate::sums::with_record`]). Cleared with [`Self::xcache`] held.
    pub bare: AtomicU64,
    /// Parts (by branch) found to keep no checksums, by an open that did not give them any:
    /// not asked again while the inode lives (only the mount, or a rebuild while mounted,
    /// which clears this, gives a file checksums).
    pub sums_none: AtomicU64,
    /// Held while a part's checksum attribute is read, changed and written back.
    pub sums_lock: Mutex<()>,
    /// The checksum attributes this mount read or changed, by part, while the file is open:
    /// changes are written back when the file is synced or its last handle released, and by
    /// the intent log's clearing cycle before it forgets the regions they cover (see
    /// [`crate::fs::DirtySums`]).
    pub xcache: Mutex<Vec<crate::sums::CachedAttr>>,
    /// In the mount's list of files with changes to write back.
    pub xlisted: AtomicBool,
    /// The file's last link went and its sum files with it: no overflow file is made again
    /// (it would be left behind).
    pub sums_gone: AtomicBool,
}

impl FileState {
    /// State of a file with record `meta`, logical size `size`, out of date on `stale`.
    pub fn new(meta: &FileMeta, size: u64, stale: u64) -> FileState {
        FileState {
            id: meta.id,
            layout: meta.layout,
            size: AtomicU64::new(size),
            generation: AtomicU64::new(meta.generation),
            lost: AtomicU64::new(meta.lost),
            parity_stale: AtomicBool::new(meta.parity_stale),
            stale: AtomicU64::new(stale),
            lock: RwLock::new(()),
            dirty: AtomicBool::new(false),
            touched: AtomicBool::new(false),
            recover: AtomicBool::new(false),
            intent: Mutex::new(Default::default()),
            joined: AtomicU64::new(0),
            swapped: AtomicU64::new(0),
            xsums: AtomicU64::new(0),
            xover: AtomicU64::new(0),
            bare: AtomicU64::new(0),
            sums_none: AtomicU64::new(0),
            sums_lock: Mutex::new(()),
            xcache: Mutex::new(Vec::new()),
            xlisted: AtomicBool::new(false),
            sums_gone: AtomicBool::new(false),
        }
    }

    /// The record as it should be on disk now.
    pub fn meta(&self) -> FileMeta {
        FileMeta {
            id: self.id,
            layout: self.layout,
            size: if self.layout.level.striped() {
                self.size.load(Ordering::Acquire)
            } else {
                0
            },
            generation: self.generation.load(Ordering::Acquire),
            lost: self.lost.load(Ordering::Acquire),
            parity_stale: self.parity_stale.load(Ordering::Acquire),
        }
    }

    /// Branches not to use for this file, given the volume's unusable ones.
    #[inline]
    pub fn unusable(&self, volume_down: u64) -> u64 {
        volume_down | self.stale.load(Ordering::Acquire) | self.lost.load(Ordering::Acquire)
    }

    /// Branches not to use for this file in the volume `bs`: the failed ones, its own
    /// out-of-date and lost parts, and a branch being rebuilt that it has not joined yet.
    #[inline]
    pub fn down(&self, bs: &BranchSet) -> u64 {
        let r = bs.rebuilding_mask();
        self.unusable(bs.failed_mask()) | (r & !self.joined.load(Ordering::Acquire))
    }
}

/// Descriptors of an object, one per branch.
pub type BranchFds = Box<[Option<Fd>]>;

/// Gives each descriptor of `fds` (an object's slots) to `gone` with its branch.
fn let_go(fds: Option<BranchFds>, branches: usize, gone: &mut impl FnMut(usize, Fd)) {
    for (i, fd) in fds.into_iter().flat_map(Vec::from).enumerate() {
        if let Some(fd) = fd {
            gone(i % branches, fd);
        }
    }
}

/// One object known to the kernel.
#[derive(Debug)]
pub struct Inode {
    /// Node id (`st_ino` through the mount).
    pub nodeid: u64,
    /// `S_IFMT` bits.
    pub kind: u32,
    loc: RwLock<Loc>,
    /// Other names the object is known by (hard links), besides `loc`.
    aliases: Mutex<Vec<Loc>>,
    lookups: AtomicU64,
    /// Regular files: their state.
    pub file: Option<FileState>,
    /// Directories: their `O_PATH` descriptors; regular files: their parts' descriptors (while
    /// open), then their sum files' (by part; kept while cached); none for other objects.
    fds: FdSlots<BranchFds>,
    /// Regular files: the slot of the first sum file (the number of branches); 0 otherwise.
    sums_at: u32,
    /// Regular files: open handles.
    handles: AtomicU32,
    /// Regular files: the parts are kept (pinned) until the last release, the file having
    /// lost a name while open ([`InodeTable::keep_parts`]).
    kept: AtomicBool,
    /// The id came from the counter (found by parent and name).
    counted: bool,
}

impl Inode {
    /// Parent and name.
    pub fn loc(&self) -> Loc {
        self.loc.read().clone()
    }

    /// Runs `f` with the parent and name without cloning them.
    #[inline]
    pub fn with_loc<R>(&self, f: impl FnOnce(Option<&Arc<Inode>>, &OsStr) -> R) -> R {
        let l = self.loc.read();
        f(l.parent.as_ref(), &l.name)
    }

    /// Whether `name` in `parent` is one of the names this object is known by.
    fn has_name(&self, parent: &Arc<Inode>, name: &OsStr) -> bool {
        self.with_loc(|p, n| p.is_some_and(|p| Arc::ptr_eq(p, parent)) && n == name)
            || self.aliases.lock().iter().any(|l| l.is(parent, name))
    }

    /// Every name the object is known by (parent's node id and name).
    fn names(&self) -> Vec<(u64, OsString)> {
        let mut v = vec![self.with_loc(|p, n| (p.map_or(0, |p| p.nodeid), n.to_os_string()))];
        for l in self.aliases.lock().iter() {
            v.push((l.parent.as_ref().map_or(0, |p| p.nodeid), l.name.clone()));
        }
        v
    }

    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == libc::S_IFDIR
    }

    /// The cached descriptor of this object on branch `b` (a directory's, or an open file's
    /// part).
    #[inline]
    pub fn cached_fd(&self, b: usize) -> Option<Arc<OwnedFd>> {
        self.fds.get(b)
    }

    /// The cached descriptor of the sum file of a regular file's part on branch `b`.
    #[inline]
    pub fn cached_sum(&self, b: usize) -> Option<Arc<OwnedFd>> {
        self.fds.get(self.sum_slot(b)?)
    }

    /// The slot of the sum file of a regular file's part on branch `b`: that of the branch the
    /// sum file lives on, after the parts' slots.
    #[inline]
    fn sum_slot(&self, b: usize) -> Option<usize> {
        if self.sums_at == 0 {
            return None;
        }
        let width = self.file.as_ref()?.layout.width as usize;
        Some(self.sums_at as usize + crate::sums::home(b, width)?)
    }

    /// The descriptor of an open file's part on branch `b`, if cached (`None` unless it is
    /// open: then no lock is taken, a file holds part descriptors only while open).
    #[inline]
    pub fn open_part(&self, b: usize) -> Option<Arc<OwnedFd>> {
        if self.handles.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.fds.get(b)
    }

    /// Open handles: of a regular file, or pinning a directory's descriptors.
    pub fn opens(&self) -> u32 {
        if self.kind == libc::S_IFREG {
            self.handles.load(Ordering::Acquire)
        } else {
            self.fds.pins()
        }
    }

    /// The path from the mount root, `/`-separated, without a leading `/`.
    pub fn path(&self) -> Vec<u8> {
        let mut parts: Vec<OsString> = Vec::new();
        let mut l = self.loc();
        while let Some(p) = l.parent {
            parts.push(l.name);
            l = p.loc();
        }
        let mut out = Vec::new();
        for (i, p) in parts.iter().rev().enumerate() {
            if i > 0 {
                out.push(b'/');
            }
            out.extend_from_slice(p.as_encoded_bytes());
        }
        out
    }
}

impl Cached for Inode {
    type Fds = BranchFds;

    fn fd_slots(&self) -> &FdSlots<BranchFds> {
        &self.fds
    }

    fn cache_key(&self) -> u64 {
        self.nodeid
    }

    fn kept_after_release(&self, i: usize) -> bool {
        self.sums_at != 0 && i >= self.sums_at as usize
    }
}

/// Node id → inode, the node ids of the names the kernel knows (by parent and name: how
/// counter ids are found), and the descriptor cache.
pub struct InodeTable {
    root: Arc<Inode>,
    by_id: Sharded<u64, Arc<Inode>>,
    by_name: Sharded<(u64, u64), u64>,
    next: AtomicU64,
    branches: usize,
    cache: FdCache<Inode>,
}

fn no_entry() -> io::Error {
    io::Error::from_raw_os_error(libc::ESTALE)
}

impl InodeTable {
    /// A table whose root directory is `roots` (one descriptor per branch; `None` for a branch
    /// that is failed), caching at most about `capacity` descriptors (beyond those of open
    /// objects).
    pub fn new(roots: Vec<Option<Arc<OwnedFd>>>, capacity: usize) -> InodeTable {
        let branches = roots.len();
        let root = Arc::new(Inode {
            nodeid: ROOT_ID,
            kind: libc::S_IFDIR,
            loc: RwLock::new(Loc {
                parent: None,
                name: OsString::new(),
            }),
            aliases: Mutex::new(Vec::new()),
            lookups: AtomicU64::new(1),
            file: None,
            fds: FdSlots::fixed(roots.into_boxed_slice()),
            sums_at: 0,
            handles: AtomicU32::new(0),
            kept: AtomicBool::new(false),
            counted: false,
        });
        let t = InodeTable {
            root: root.clone(),
            by_id: sharded(),
            by_name: sharded(),
            next: AtomicU64::new(COUNTER_BASE),
            branches,
            cache: FdCache::new(capacity),
        };
        t.by_id[shard(ROOT_ID)].write().insert(ROOT_ID, root);
        t
    }

    /// The root directory.
    pub fn root(&self) -> &Arc<Inode> {
        &self.root
    }

    /// The inode of `nodeid`; `ESTALE` if the kernel forgot it.
    #[inline]
    pub fn get(&self, nodeid: u64) -> io::Result<Arc<Inode>> {
        self.by_id[shard(nodeid)]
            .read()
            .get(&nodeid)
            .cloned()
            .ok_or_else(no_entry)
    }

    /// Whether the table knows an inode for `name` in `parent` (by its name; a hash clash
    /// can say yes for another name, which only skips a check).
    pub fn child_known(&self, parent: &Arc<Inode>, name: &OsStr) -> bool {
        let key = (parent.nodeid, name_hash(name.as_encoded_bytes()));
        let nid = self.by_name[shard(key.1)].read().get(&key).copied();
        nid.is_some_and(|n| self.by_id[shard(n)].read().contains_key(&n))
    }

    /// Finds or makes the inode of `name` in `parent` (kind `kind`, record id `id` if it has a
    /// record) and counts one kernel lookup. `file` gives a new regular file's state.
    pub fn lookup(
        &self,
        parent: &Arc<Inode>,
        name: &OsStr,
        kind: u32,
        id: Option<u64>,
        file: impl FnOnce() -> Option<FileState>,
    ) -> Arc<Inode> {
        let id = id.filter(|&i| i > ROOT_ID && i < COUNTER_BASE);
        let key = (parent.nodeid, name_hash(name.as_encoded_bytes()));
        if let Some(id) = id {
            let found = match self.known(id, kind, None) {
                Some(i) => Some(i),
                None => {
                    let mut map = self.by_id[shard(id)].write();
                    match map.get(&id) {
                        Some(i) if i.kind == kind => {
                            i.lookups.fetch_add(1, Ordering::Relaxed);
                            Some(i.clone())
                        }
                        // An id clash with another kind: fall back to a counter id.
                        Some(_) => None,
                        None => {
                            let i = self.make(id, parent, name, kind, file(), false);
                            map.insert(id, i.clone());
                            drop(map);
                            self.by_name[shard(key.1)].write().insert(key, id);
                            return i;
                        }
                    }
                }
            };
            if let Some(i) = found {
                self.relocate(&i, parent, name);
                let names = &self.by_name[shard(key.1)];
                if names.read().get(&key) != Some(&id) {
                    names.write().insert(key, id);
                }
                return i;
            }
        }
        if let Some(&nid) = self.by_name[shard(key.1)].read().get(&key) {
            if let Some(i) = self.known(nid, kind, Some((parent, name))) {
                return i;
            }
        }
        let mut names = self.by_name[shard(key.1)].write();
        if let Some(&nid) = names.get(&key) {
            if let Some(i) = self.known(nid, kind, Some((parent, name))) {
                return i;
            }
        }
        let nodeid = self.next.fetch_add(1, Ordering::Relaxed);
        let i = self.make(nodeid, parent, name, kind, file(), true);
        self.by_id[shard(nodeid)].write().insert(nodeid, i.clone());
        names.insert(key, nodeid);
        i
    }

    /// The inode `nodeid` if it is of `kind` (and known as `at`, for counter ids, which are
    /// found by name), with one more lookup counted.
    fn known(
        &self,
        nodeid: u64,
        kind: u32,
        at: Option<(&Arc<Inode>, &OsStr)>,
    ) -> Option<Arc<Inode>> {
        let map = self.by_id[shard(nodeid)].read();
        let i = map.get(&nodeid)?;
        if i.kind != kind {
            return None;
        }
        if let Some((p, n)) = at {
            if !i.counted || !i.has_name(p, n) {
                return None;
            }
        }
        i.lookups.fetch_add(1, Ordering::Relaxed);
        Some(i.clone())
    }

    fn make(
        &self,
        nodeid: u64,
        parent: &Arc<Inode>,
        name: &OsStr,
        kind: u32,
        file: Option<FileState>,
        counted: bool,
    ) -> Arc<Inode> {
        Arc::new(Inode {
            nodeid,
            kind,
            loc: RwLock::new(Loc {
                parent: Some(parent.clone()),
                name: name.to_os_string(),
            }),
            aliases: Mutex::new(Vec::new()),
            lookups: AtomicU64::new(1),
            file,
            fds: FdSlots::new(match kind {
                libc::S_IFDIR => vec![None; self.branches].into_boxed_slice(),
                libc::S_IFREG => vec![None; 2 * self.branches].into_boxed_slice(),
                _ => Box::new([]),
            }),
            sums_at: if kind == libc::S_IFREG {
                self.branches as u32
            } else {
                0
            },
            handles: AtomicU32::new(0),
            kept: AtomicBool::new(false),
            counted,
        })
    }

    /// Records that `inode` is (also) reachable as `name` in `parent` (a hard link, or a
    /// rename the mount did not see): that name becomes the one it is reached by, the one it
    /// had is kept as another (it may still exist: a hard link).
    fn relocate(&self, inode: &Arc<Inode>, parent: &Arc<Inode>, name: &OsStr) {
        let same = inode.with_loc(|p, n| p.is_some_and(|p| Arc::ptr_eq(p, parent)) && n == name);
        if same {
            return;
        }
        let mut aliases = inode.aliases.lock();
        aliases.retain(|l| !l.is(parent, name));
        let mut l = inode.loc.write();
        let old = std::mem::replace(
            &mut *l,
            Loc {
                parent: Some(parent.clone()),
                name: name.to_os_string(),
            },
        );
        if inode.kind != libc::S_IFDIR && old.parent.is_some() {
            if aliases.len() == MAX_ALIASES {
                aliases.remove(0);
            }
            aliases.push(old);
        }
    }

    /// Forgets that `inode` is reachable as `name` in `parent`: if that is the name it is
    /// reached by, another known name (a hard link) takes its place.
    fn drop_name(&self, inode: &Inode, parent: &Arc<Inode>, name: &OsStr) {
        let mut aliases = inode.aliases.lock();
        let is_primary =
            inode.with_loc(|p, n| p.is_some_and(|p| Arc::ptr_eq(p, parent)) && n == name);
        if is_primary {
            if let Some(next) = aliases.pop() {
                *inode.loc.write() = next;
            }
        } else {
            aliases.retain(|l| !l.is(parent, name));
        }
    }

    /// The inode the kernel knows for `name` in `parent` (record id `id` if it has a record),
    /// without counting a lookup.
    pub fn find(&self, parent: &Arc<Inode>, name: &OsStr, id: Option<u64>) -> Option<Arc<Inode>> {
        if let Some(id) = id.filter(|&i| i > ROOT_ID && i < COUNTER_BASE) {
            if let Some(i) = self.by_id[shard(id)].read().get(&id) {
                return Some(i.clone());
            }
        }
        let key = (parent.nodeid, name_hash(name.as_encoded_bytes()));
        let nid = *self.by_name[shard(key.1)].read().get(&key)?;
        let i = self.by_id[shard(nid)].read().get(&nid)?.clone();
        i.has_name(parent, name).then_some(i)
    }

    /// After a rename through the mount: `inode`, which was `from_name` in `from`, is now
    /// `name` in `parent`.
    pub fn moved(
        &self,
        inode: &Arc<Inode>,
        from: &Arc<Inode>,
        from_name: &OsStr,
        parent: &Arc<Inode>,
        name: &OsStr,
    ) {
        let old = (from.nodeid, name_hash(from_name.as_encoded_bytes()));
        {
            let mut names = self.by_name[shard(old.1)].write();
            if names.get(&old) == Some(&inode.nodeid) {
                names.remove(&old);
            }
        }
        let key = (parent.nodeid, name_hash(name.as_encoded_bytes()));
        self.by_name[shard(key.1)].write().insert(key, inode.nodeid);
        self.relocate(inode, parent, name);
        // The old name is gone (it may be what `relocate` kept as another name).
        inode.aliases.lock().retain(|l| !l.is(from, from_name));
    }

    /// After `name` was removed from `parent` (`inode`: what it named, if known): forgets the
    /// name, and lets a removed directory's descriptors go (to `gone`) unless it is open.
    pub fn removed(
        &self,
        parent: &Arc<Inode>,
        name: &OsStr,
        inode: Option<&Arc<Inode>>,
        mut gone: impl FnMut(usize, Fd),
    ) {
        let key = (parent.nodeid, name_hash(name.as_encoded_bytes()));
        let nid = self.by_name[shard(key.1)].write().remove(&key);
        let found = match inode {
            Some(i) => Some(i.clone()),
            None => nid.and_then(|n| self.by_id[shard(n)].read().get(&n).cloned()),
        };
        if let Some(i) = found.filter(|i| i.has_name(parent, name)) {
            self.drop_name(&i, parent, name);
            if i.is_dir() {
                let_go(self.cache.take_unpinned(&i), self.branches, &mut gone);
            }
        }
    }

    /// The kernel forgets `n` lookups of `nodeid`; at zero the inode is dropped.
    /// Returns the inode when the table dropped it, its descriptors given to `gone`.
    pub fn forget(
        &self,
        nodeid: u64,
        n: u64,
        mut gone: impl FnMut(usize, Fd),
    ) -> Option<Arc<Inode>> {
        if nodeid == ROOT_ID {
            return None;
        }
        let mut map = self.by_id[shard(nodeid)].write();
        let i = map.get(&nodeid).cloned()?;
        let left = i.lookups.load(Ordering::Relaxed).saturating_sub(n);
        i.lookups.store(left, Ordering::Relaxed);
        if left > 0 {
            return None;
        }
        map.remove(&nodeid);
        drop(map);
        for (parent, name) in i.names() {
            let key = (parent, name_hash(name.as_encoded_bytes()));
            let mut names = self.by_name[shard(key.1)].write();
            if names.get(&key) == Some(&nodeid) {
                names.remove(&key);
            }
        }
        let_go(self.cache.take(&i), self.branches, &mut gone);
        Some(i)
    }

    /// Caches `fd` as `inode`'s descriptor on branch `b` (unless one is there already) and
    /// returns the cached one. Ours when not kept, and those evicted to make room, go to
    /// `gone`.
    pub fn cache_fd(
        &self,
        inode: &Arc<Inode>,
        b: usize,
        fd: OwnedFd,
        gone: impl FnMut(usize, Fd),
    ) -> Arc<OwnedFd> {
        self.cache_slot(inode, b, b, Arc::new(fd), gone)
    }

    /// Caches `fd`, a descriptor of an open file's part on branch `b`, unless one is there;
    /// returns the one cached (as [`Self::cache_fd`]).
    pub fn cache_part(
        &self,
        inode: &Arc<Inode>,
        b: usize,
        fd: Fd,
        gone: impl FnMut(usize, Fd),
    ) -> Fd {
        self.cache_slot(inode, b, b, fd, gone)
    }

    /// Caches `fd`, a descriptor of the sum file of a regular file's part on branch `b`
    /// (living on branch `hb`), unless one is there; returns the one cached (as
    /// [`Self::cache_fd`]).
    pub fn cache_sum(
        &self,
        inode: &Arc<Inode>,
        b: usize,
        hb: usize,
        fd: Fd,
        gone: impl FnMut(usize, Fd),
    ) -> Fd {
        match inode.sum_slot(b) {
            Some(slot) => self.cache_slot(inode, slot, hb, fd, gone),
            None => fd,
        }
    }

    /// Caches `fd` (on branch `b`) in `inode`'s slot `slot`.
    fn cache_slot(
        &self,
        inode: &Arc<Inode>,
        slot: usize,
        b: usize,
        fd: Fd,
        mut gone: impl FnMut(usize, Fd),
    ) -> Fd {
        let n = self.branches;
        let cached = self
            .cache
            .insert_with(inode, slot, fd.clone(), false, |evicted| {
                for fds in evicted {
                    let_go(Some(fds), n, &mut gone);
                }
            });
        if !Arc::ptr_eq(&cached, &fd) {
            gone(b, fd);
        }
        cached
    }

    /// Takes a regular file's cached sum-file descriptors out of the cache, to `gone` (its sum
    /// files were removed or are to be replaced; open handles keep their own until closed).
    pub fn drop_sums(&self, inode: &Inode, mut gone: impl FnMut(usize, Fd)) {
        if inode.sums_at != 0 {
            let at = inode.sums_at as usize;
            let_go(
                self.cache.take_slots(inode, |i| i >= at),
                self.branches,
                &mut gone,
            );
        }
    }

    /// Runs an `open`; when the process is out of descriptors, gives back cached ones and tries
    /// once more.
    pub fn retry_emfile<T>(&self, f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
        self.cache.retry_emfile(f)
    }

    /// Pins a directory's descriptors for a new open handle (see [`fsprof_fuse::toolkit::fdcache`]).
    pub fn pin(&self, inode: &Inode) {
        self.cache.pin(inode);
    }

    /// An open directory's handle was released: one pin less.
    pub fn unpin(&self, inode: &Inode) {
        self.cache.unpin(inode);
    }

    /// A new open handle of the regular file `inode` (its parts' descriptors are cached in its
    /// slots as requests need them, and may be evicted while it is open).
    pub fn open_file(&self, inode: &Inode) {
        inode.handles.fetch_add(1, Ordering::AcqRel);
    }

    /// An open file's handle was released: at the last (`Some`), its parts' descriptors leave
    /// the cache (returned, to be closed by the caller; its sum files' stay) and kept parts
    /// are let go.
    pub fn close_file(&self, inode: &Inode) -> Option<BranchFds> {
        let before = inode
            .handles
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if before != Ok(1) {
            return None;
        }
        let at = inode.sums_at as usize;
        let taken = self.cache.take_slots(inode, |i| i < at);
        if inode.kept.swap(false, Ordering::AcqRel) {
            self.cache.unpin(inode);
        }
        Some(taken.unwrap_or_else(|| (0..at).map(|_| None).collect()))
    }

    /// The open file `inode` is about to lose a name (an unlink, a rename over it): its
    /// descriptors are pinned from now until the last release, when its name may lead
    /// elsewhere. The caller then fills the slots that are empty (a pinned slot filled is kept).
    pub fn keep_parts(&self, inode: &Inode) {
        if !inode.kept.swap(true, Ordering::AcqRel) {
            self.cache.pin(inode);
        }
    }

    /// Whether `inode`'s descriptors are kept until its last release ([`Self::keep_parts`]).
    pub fn kept(&self, inode: &Inode) -> bool {
        inode.kept.load(Ordering::Acquire)
    }

    /// Number of inodes known (root included).
    pub fn len(&self) -> usize {
        self.by_id.iter().map(|s| s.read().len()).sum()
    }

    /// Whether only the root is known.
    pub fn is_empty(&self) -> bool {
        self.len() <= 1
    }

    /// Every inode known (a snapshot).
    pub fn all(&self) -> Vec<Arc<Inode>> {
        self.by_id
            .iter()
            .flat_map(|s| s.read().values().cloned().collect::<Vec<_>>())
            .collect()
    }

    /// Branch `b` was replaced under the mount: forgets every directory's descriptor there and
    /// every cached sum file's, and gives the root `root` (closing the old ones outside the
    /// locks).
    pub fn replace_branch(&self, b: usize, root: Option<Arc<OwnedFd>>) {
        let mut old = Vec::new();
        for i in self.all() {
            if Arc::ptr_eq(&i, &self.root) {
                old.extend(self.cache.replace(&i, b, root.clone()));
            } else if i.is_dir() {
                old.extend(self.cache.replace(&i, b, None));
            } else {
                // Sum files on the replaced branch are gone with it (simplest: drop them all;
                // they are reopened at the next open), and so are the checksum attributes
                // kept there: what the mount holds of them is not written back.
                self.drop_sums(&i, |_, fd| drop(fd));
                if let Some(f) = &i.file {
                    let mut cache = f.xcache.lock();
                    cache.retain(|c| c.h != b);
                    f.bare.store(0, Ordering::Release);
                }
            }
        }
        drop(old);
    }

    /// Puts `fd` in `inode`'s slot for branch `b` in place of what is there (an open file's
    /// part, rebuilt on a branch replaced under the mount).
    pub fn replace_part(&self, inode: &Arc<Inode>, b: usize, fd: Fd) {
        drop(self.cache.replace(inode, b, Some(fd)));
    }

    /// Descriptors cached.
    pub fn cached_fds(&self) -> usize {
        self.cache.cached()
    }

    /// Entries in the cache's rings (bounded by the objects holding descriptors).
    pub fn cache_entries(&self) -> usize {
        self.cache.entries()
    }
}

/// A new random identity for a file or directory (63 bits, never the root's or a counter id).
pub fn new_id() -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let seed = *SEED.get_or_init(|| crate::marker::random_u128() as u64);
    loop {
        // splitmix64 over a counter from a random seed: distinct values, random-looking.
        let mut z = seed.wrapping_add(
            COUNT
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let id = (z ^ (z >> 31)) & (COUNTER_BASE - 1);
        if id > ROOT_ID {
            return id;
        }
    }
}

#[cfg(test)]
mod tests;
