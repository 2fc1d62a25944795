//! The inode store: FUSE node ids for lower objects, kept by file handle (or by parent and name
//! where handles are not available), with a bounded cache of `O_PATH` descriptors.
//!
//! # Identity
//!
//! A lower object is known by its device, inode number and birth time (the birth time tells a
//! reused inode number from the object that had it before). Its FUSE node id is its lower inode
//! number when that is unambiguous (same device as LOWER, not 1, not taken), otherwise a number
//! allocated from `2^63` upwards; so `stat` through the mount shows the lower inode numbers, as
//! `readdir` does, and they stay stable for the life of the mount.
//!
//! # Locating an object
//!
//! * **Handle** (the default for root on file systems that support them): the inode keeps the
//!   object's `name_to_handle_at` handle and opens it with `open_by_handle_at` when needed. No
//!   descriptor is held per inode, so trees far larger than the open-file limit are served, and
//!   renames made behind the mount's back do not matter.
//! * **Path** (fallback: not root, or a file system without handles): the inode keeps its parent
//!   and name and is opened with `openat(parent, name)` (always relative, never a full path),
//!   checked against its device and inode number. Renames and unlinks through the mount update
//!   it; a rename done behind the mount's back makes the object unreachable by its old name
//!   (`ESTALE`) until the kernel looks it up again under its new name.
//!
//! # Descriptor cache
//!
//! Operations need an `O_PATH` descriptor of the inode. Those are cached in a
//! [`FdCache`](crate::toolkit::fdcache::FdCache) (CLOCK replacement, in a few shards with a lock each) up
//! to a capacity derived from the open-file limit; an evicted descriptor is closed when the
//! last operation using it ends, never under a cache lock. When `open` fails with `EMFILE` the
//! cache evicts harder and retries once; if the limit is still exhausted the operation fails
//! with `EMFILE`.
//!
//! # Open inodes are pinned
//!
//! While the kernel holds an open handle of an inode (a file or a directory), its cached
//! descriptor is never evicted ([`InodeStore::open_pinned`] / [`InodeStore::pin_created`] until
//! [`InodeStore::unpin`]). An open object may lose its name (unlinked, or replaced by a rename)
//! and then cannot be found again by name (path mode) or, on some file systems, by handle; the
//! pinned descriptor keeps `fstat`, `fchmod`, `futimens`, the xattr calls and re-opens of it
//! working, as on LOWER. So the cache holds at most its capacity plus one descriptor per open
//! inode (which the open handles' own descriptors already bound).
//!
//! # Lower calls
//!
//! Every system call the store makes on LOWER while serving a request is one of that request's
//! lower calls ([`Via`]: the `O_PATH` `openat`, its `statx` check, `name_to_handle_at`,
//! `open_by_handle_at`, the `openat` of a `/proc/self/fd` re-open, and the `close` of a
//! descriptor it lets go as its last holder), so the breakdown and the `lower` layer see them.
//! A descriptor evicted while another request still uses it is closed by that request when it
//! lets it go, and counted there only where it goes through the store again (a rare race: the
//! cache holds thousands).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

mod export;
mod forgotten;

pub use forgotten::FORGOTTEN;

use crate::protocol::ops::Sys;
use crate::sys::{self, FileHandle, Stat};
use crate::toolkit::fdcache::{Cached, Fd, FdCache, FdSlots};
use crate::toolkit::lower::Via;
use crate::toolkit::sharded::{Sharded, shard_of, sharded};

/// The FUSE node id of the root directory.
pub const ROOT_ID: u64 = 1;

/// First node id handed out when a lower inode number cannot serve as one.
const ALLOCATED_BASE: u64 = 1 << 63;

/// Where an inode's object is found.
#[derive(Debug, Clone)]
pub enum Locator {
    /// LOWER itself.
    Root,
    /// A file handle on the file system with this mount id.
    Handle {
        /// The handle.
        handle: FileHandle,
        /// Mount id of the file system (see [`InodeStore`]'s mount table).
        mount_id: i32,
    },
    /// A name in a parent directory.
    Path {
        /// The parent directory.
        parent: Arc<Inode>,
        /// The entry name.
        name: OsString,
    },
}

/// What can change about an inode when its lower inode number is reused or it is renamed.
#[derive(Debug)]
struct Ident {
    btime_ns: i128,
    kind: u32,
    generation: u64,
    locator: Locator,
}

/// One lower object known to the kernel.
#[derive(Debug)]
pub struct Inode {
    /// FUSE node id (and `st_ino` through the mount).
    pub nodeid: u64,
    /// Lower device.
    pub dev: u64,
    /// Lower inode number.
    pub ino: u64,
    ident: RwLock<Ident>,
    /// Kernel lookup count (one for a new inode); reaches zero through `forget`.
    lookups: AtomicU64,
    /// Cached `O_PATH` descriptor, pinned while the inode has open handles (files and
    /// directories).
    fd: FdSlots<[Option<Fd>; 1]>,
    /// Kernel passthrough: the backing file registered for this inode while it is open (every
    /// open handle of an inode must use the same one).
    pub backing: Mutex<std::sync::Weak<crate::sys::fuse::BackingId>>,
}

impl Inode {
    /// A new inode of the object `st` (no kernel lookup counted yet, no descriptor).
    fn new(nodeid: u64, st: &Stat, ident: Ident) -> Inode {
        Inode {
            nodeid,
            dev: st.dev,
            ino: st.ino,
            ident: RwLock::new(ident),
            lookups: AtomicU64::new(1),
            fd: FdSlots::new([None]),
            backing: Mutex::new(std::sync::Weak::new()),
        }
    }

    /// File type bits (`S_IFMT` part of the mode).
    pub fn kind(&self) -> u32 {
        self.ident.read().kind
    }

    /// Generation to give the kernel with the node id.
    pub fn generation(&self) -> u64 {
        self.ident.read().generation
    }

    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.kind() == libc::S_IFDIR
    }

    /// The locator (cloned).
    pub fn locator(&self) -> Locator {
        self.ident.read().locator.clone()
    }

    /// Path locator: records that the object is found as `name` in `parent`. Checks under the
    /// read lock first, so the common case (unchanged) neither allocates nor writes.
    fn seen_at(&self, parent: &Arc<Inode>, name: &OsStr) {
        let moved = |l: &Locator| matches!(l, Locator::Path { parent: p, name: n } if !(Arc::ptr_eq(p, parent) && n == name));
        if !moved(&self.ident.read().locator) {
            return;
        }
        let mut id = self.ident.write();
        if moved(&id.locator) {
            id.locator = Locator::Path {
                parent: parent.clone(),
                name: name.to_os_string(),
            };
        }
    }

    /// Current kernel lookup count.
    pub fn lookups(&self) -> u64 {
        self.lookups.load(Ordering::Relaxed)
    }

    /// Open handles the store was told about (see [`InodeStore::open_pinned`]).
    pub fn opens(&self) -> u32 {
        self.fd.pins()
    }

    /// Whether a descriptor of the inode is cached.
    pub fn has_fd(&self) -> bool {
        self.fd.has(0)
    }
}

impl Cached for Inode {
    type Fds = [Option<Fd>; 1];

    fn fd_slots(&self) -> &FdSlots<Self::Fds> {
        &self.fd
    }

    fn cache_key(&self) -> u64 {
        self.nodeid
    }
}

/// How inodes are located.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InodeMode {
    /// File handles where the lower file system gives them, paths elsewhere.
    Auto,
    /// File handles required: an object without one is an error (`EOPNOTSUPP`).
    Handles,
    /// Parent and name only.
    Paths,
}

/// Node id → inode, and lower identity → inode, sharded; plus the descriptor cache.
pub struct InodeStore {
    root: Arc<Inode>,
    by_id: Sharded<u64, Arc<Inode>>,
    by_key: Sharded<(u64, u64), Arc<Inode>>,
    next_alloc: AtomicU64,
    generation: AtomicU64,
    handles: bool,
    require_handles: bool,
    mounts: RwLock<HashMap<i32, Arc<OwnedFd>>>,
    cache: FdCache<Inode>,
    /// Lower handles of objects the kernel forgot (see [`export`]).
    forgotten: forgotten::Forgotten,
}

fn key_shard(dev: u64, ino: u64) -> usize {
    shard_of(ino ^ dev.rotate_left(32))
}

fn no_entry() -> io::Error {
    io::Error::from_raw_os_error(libc::ESTALE)
}

impl InodeStore {
    /// A store rooted at the directory `root_fd` (an `O_PATH` descriptor of LOWER).
    ///
    /// `mode` chooses how inodes are located ([`InodeMode::Auto`] uses handles when the process
    /// may open them, i.e. has `CAP_DAC_READ_SEARCH`, approximated by being root, and LOWER
    /// gives them). `fd_capacity` bounds the cached descriptors.
    pub fn new(root_fd: OwnedFd, mode: InodeMode, fd_capacity: usize) -> io::Result<InodeStore> {
        let st = sys::fstat(root_fd.as_fd())?;
        if st.mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        let handle = sys::name_to_handle_at(root_fd.as_fd(), OsStr::new(""));
        // Handles need CAP_DAC_READ_SEARCH to be opened; being root is not proof of it (e.g. in
        // a container), so try one.
        let mount_fd = sys::reopen(root_fd.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY)?;
        let usable = match &handle {
            Ok((h, _)) => sys::open_by_handle_at(mount_fd.as_fd(), h, libc::O_PATH).map(drop),
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!(
                    "LOWER gives no file handles: {}",
                    crate::protocol::errno::plain(e)
                ),
            )),
        };
        let handles = match mode {
            InodeMode::Paths => false,
            InodeMode::Auto => usable.is_ok(),
            InodeMode::Handles => {
                usable.map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!(
                            "file handles unusable ({}; they need CAP_DAC_READ_SEARCH)",
                            crate::protocol::errno::plain(&e)
                        ),
                    )
                })?;
                true
            }
        };
        let mut mounts = HashMap::new();
        if let (true, Ok((_, mount_id))) = (handles, &handle) {
            // open_by_handle_at wants a real descriptor on the file system, not an O_PATH one.
            mounts.insert(*mount_id, Arc::new(mount_fd));
        }
        let root_fd = Arc::new(root_fd);
        let root = Arc::new(Inode {
            nodeid: ROOT_ID,
            dev: st.dev,
            ino: st.ino,
            ident: RwLock::new(Ident {
                btime_ns: st.btime_ns,
                kind: libc::S_IFDIR,
                generation: 0,
                locator: Locator::Root,
            }),
            lookups: AtomicU64::new(1),
            fd: FdSlots::fixed([Some(root_fd)]),
            backing: Mutex::new(std::sync::Weak::new()),
        });
        let store = InodeStore {
            root: root.clone(),
            by_id: sharded(),
            by_key: sharded(),
            next_alloc: AtomicU64::new(ALLOCATED_BASE),
            generation: AtomicU64::new(1),
            handles,
            require_handles: mode == InodeMode::Handles,
            mounts: RwLock::new(mounts),
            cache: FdCache::new(fd_capacity),
            forgotten: forgotten::Forgotten::default(),
        };
        store.by_id[shard_of(ROOT_ID)]
            .write()
            .insert(ROOT_ID, root.clone());
        store.by_key[key_shard(st.dev, st.ino)]
            .write()
            .insert((st.dev, st.ino), root);
        Ok(store)
    }

    /// Whether inodes are located by file handle.
    pub fn uses_handles(&self) -> bool {
        self.handles
    }

    /// The root inode.
    pub fn root(&self) -> &Arc<Inode> {
        &self.root
    }

    /// The inode with node id `nodeid`; `ESTALE` if the kernel forgot it.
    #[inline]
    pub fn get(&self, nodeid: u64) -> io::Result<Arc<Inode>> {
        self.by_id[shard_of(nodeid)]
            .read()
            .get(&nodeid)
            .cloned()
            .ok_or_else(no_entry)
    }

    /// An `O_PATH` descriptor of the inode's object, from the cache or freshly opened (its
    /// calls made `via` a request).
    #[inline]
    pub fn fd(&self, via: Via, inode: &Arc<Inode>) -> io::Result<Arc<OwnedFd>> {
        match inode.fd.get(0) {
            Some(fd) => Ok(fd),
            None => self.open_fd(via, inode),
        }
    }

    #[cold]
    fn open_fd(&self, via: Via, inode: &Arc<Inode>) -> io::Result<Arc<OwnedFd>> {
        // Walk up to an ancestor with a descriptor (path locators only), then open downwards.
        let mut chain = vec![inode.clone()];
        loop {
            let top = chain.last().expect("non-empty");
            if top.has_fd() {
                break;
            }
            match top.locator() {
                // A cycle (directories moved into each other behind the mount's back) or an
                // absurd depth: give up rather than walk forever.
                Locator::Path { .. } if chain.len() > 4096 => return Err(no_entry()),
                Locator::Path { parent, .. } => chain.push(parent),
                _ => break,
            }
        }
        let mut fd = None;
        while let Some(node) = chain.pop() {
            if let Some(cached) = node.fd.get(0) {
                fd = Some(cached);
                continue;
            }
            let opened = self.retry_emfile(|| self.open_one(via, &node, fd.as_deref()))?;
            fd = Some(self.cache_fd(via, &node, opened, false));
        }
        fd.ok_or_else(no_entry)
    }

    /// Caches `fd` as `node`'s descriptor (pinned with `pin`); returns the one cached. A
    /// descriptor not kept (another request cached one first) and those evicted to make room
    /// are closed as calls of the request.
    fn cache_fd(&self, via: Via, node: &Arc<Inode>, fd: OwnedFd, pin: bool) -> Arc<OwnedFd> {
        let fd = Arc::new(fd);
        let cached = self.cache.insert_with(node, 0, fd.clone(), pin, |evicted| {
            for fds in evicted {
                for fd in fds.into_iter().flatten() {
                    via.release(fd);
                }
            }
        });
        if !Arc::ptr_eq(&cached, &fd) {
            via.release(fd);
        }
        cached
    }

    fn open_one(&self, via: Via, node: &Inode, parent_fd: Option<&OwnedFd>) -> io::Result<OwnedFd> {
        match node.locator() {
            Locator::Root => Err(no_entry()),
            Locator::Handle { handle, mount_id } => via.call(Sys::OpenByHandleAt, || {
                self.by_handle(&handle, mount_id, libc::O_PATH)
            }),
            Locator::Path { name, .. } => {
                let parent = parent_fd.ok_or_else(no_entry)?;
                let fd = via.call(Sys::Openat, || {
                    sys::openat(parent.as_fd(), &name, libc::O_PATH | libc::O_NOFOLLOW, 0)
                })?;
                let st = via.call(Sys::Statx, || sys::fstat(fd.as_fd()));
                match st {
                    // Renamed or replaced behind the mount's back.
                    Ok(st) if (st.dev, st.ino) != (node.dev, node.ino) => {
                        via.close(fd);
                        Err(no_entry())
                    }
                    Ok(_) => Ok(fd),
                    Err(e) => {
                        via.close(fd);
                        Err(e)
                    }
                }
            }
        }
    }

    /// Opens the object of `handle` on the file system of `mount_id` with `flags`.
    fn by_handle(&self, handle: &FileHandle, mount_id: i32, flags: i32) -> io::Result<OwnedFd> {
        let mount = self
            .mounts
            .read()
            .get(&mount_id)
            .cloned()
            .ok_or_else(no_entry)?;
        sys::open_by_handle_at(mount.as_fd(), handle, flags)
    }

    /// Opens the inode's object with `flags` (a real descriptor, not `O_PATH`): by handle where
    /// it has one, else (or when the handle no longer opens, e.g. an unlinked file on some file
    /// systems) by re-opening its `O_PATH` descriptor.
    pub fn open(&self, via: Via, inode: &Arc<Inode>, flags: i32) -> io::Result<OwnedFd> {
        // Copy the handle and the mount descriptor out: no lock is held across the system call.
        let by_handle = match &inode.ident.read().locator {
            Locator::Handle { handle, mount_id } => Some((handle.clone(), *mount_id)),
            _ => None,
        };
        if let Some((handle, mount_id)) = by_handle {
            let mount = self.mounts.read().get(&mount_id).cloned();
            if let Some(mount) = mount {
                let opened = self.retry_emfile(|| {
                    via.call(Sys::OpenByHandleAt, || {
                        sys::open_by_handle_at(mount.as_fd(), &handle, flags)
                    })
                });
                match opened {
                    Err(e) if e.raw_os_error() == Some(libc::ESTALE) && inode.has_fd() => {}
                    r => return r,
                }
            }
        }
        let fd = self.fd(via, inode)?;
        self.retry_emfile(|| via.call(Sys::Openat, || sys::reopen(fd.as_fd(), flags)))
    }

    /// [`InodeStore::open`] for a new open handle: pins the inode's cached descriptor first
    /// (opening one if needed), so the handle's object stays reachable whatever happens to its
    /// name. Each success must be paired with one [`InodeStore::unpin`] when the handle is
    /// released.
    pub fn open_pinned(&self, via: Via, inode: &Arc<Inode>, flags: i32) -> io::Result<OwnedFd> {
        self.pin(via, inode)?;
        self.open(via, inode, flags)
            .inspect_err(|_| self.unpin(inode))
    }

    /// Pins the inode's cached descriptor (one more open handle); opens one if none is cached.
    fn pin(&self, via: Via, inode: &Arc<Inode>) -> io::Result<()> {
        // An eviction either took the descriptor before (and it is opened again below) or sees
        // the pin.
        if self.cache.pin(inode) {
            return Ok(());
        }
        match self.open_fd(via, inode) {
            Ok(_) => Ok(()),
            Err(e) => {
                self.unpin(inode);
                Err(e)
            }
        }
    }

    /// A handle of `inode` was released: one pin less. (No lock: an eviction racing with this
    /// at worst still sees the pin and keeps the descriptor one round longer.)
    pub fn unpin(&self, inode: &Inode) {
        self.cache.unpin(inode);
    }

    /// Runs an `open`; on `EMFILE`/`ENFILE` evicts cached descriptors and tries once more.
    pub fn retry_emfile<T>(&self, f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
        self.cache.retry_emfile(f)
    }

    /// Finds or creates the inode of `name` (already `stat`ed as `st`) in `parent`, and counts
    /// one kernel lookup. `fresh` says the object was just created (so an entry with the same
    /// inode number belongs to a dead object even where birth times are unknown).
    pub fn lookup(
        &self,
        via: Via,
        parent: &Arc<Inode>,
        parent_fd: BorrowedFd,
        name: &OsStr,
        st: &Stat,
        fresh: bool,
    ) -> io::Result<Arc<Inode>> {
        self.find_or_add(via, parent, name, st, fresh, false, || {
            self.locator_for(via, parent, parent_fd, name, st)
        })
    }

    /// [`InodeStore::lookup`] for an object just created as `name` in `parent` (open there as
    /// `parent_fd`) and opened as `fd` (`st` is its `fstat`), which stays open as a new handle:
    /// the inode comes back pinned (see [`InodeStore::open_pinned`]). A new inode's cached
    /// `O_PATH` descriptor is opened by name and checked against `st` (2 µs here, against
    /// 4 µs for re-opening `fd` through `/proc/self/fd`, which is the fallback when the name
    /// no longer leads to the object), and its locator is taken from that descriptor.
    #[allow(clippy::too_many_arguments)]
    pub fn pin_created(
        &self,
        via: Via,
        parent: &Arc<Inode>,
        parent_fd: BorrowedFd,
        name: &OsStr,
        st: &Stat,
        fresh: bool,
        fd: BorrowedFd,
    ) -> io::Result<Arc<Inode>> {
        self.find_or_add(via, parent, name, st, fresh, true, || {
            let by_name = self
                .retry_emfile(|| {
                    via.call(Sys::Openat, || {
                        sys::openat(parent_fd, name, libc::O_PATH | libc::O_NOFOLLOW, 0)
                    })
                })
                .ok()
                .and_then(|p| {
                    let same = via
                        .call(Sys::Statx, || sys::fstat(p.as_fd()))
                        .is_ok_and(|s| (s.dev, s.ino) == (st.dev, st.ino));
                    if same {
                        Some(p)
                    } else {
                        via.close(p);
                        None
                    }
                });
            let path_fd = match by_name {
                Some(p) => p,
                None => {
                    self.retry_emfile(|| via.call(Sys::Openat, || sys::reopen(fd, libc::O_PATH)))?
                }
            };
            self.locator_of_open(via, parent, name, path_fd)
        })
    }

    /// [`InodeStore::lookup`] of an object already opened as `path_fd` (an `O_PATH` descriptor
    /// of `name` in `parent`, `fstat`ed as `st`), e.g. one just made by mkdir: the descriptor is
    /// cached and gives the locator, so the name is not looked up again.
    pub fn lookup_opened(
        &self,
        via: Via,
        parent: &Arc<Inode>,
        name: &OsStr,
        st: &Stat,
        fresh: bool,
        path_fd: OwnedFd,
    ) -> io::Result<Arc<Inode>> {
        self.find_or_add(via, parent, name, st, fresh, false, || {
            self.locator_of_open(via, parent, name, path_fd)
        })
    }

    /// The inode of the object `st` in the maps, or a new one located by `locate` (called
    /// outside the map locks, only for an object not known yet); counts one kernel lookup and,
    /// with `pin`, pins it for a new open handle.
    #[allow(clippy::too_many_arguments)]
    fn find_or_add(
        &self,
        via: Via,
        parent: &Arc<Inode>,
        name: &OsStr,
        st: &Stat,
        fresh: bool,
        pin: bool,
        locate: impl FnOnce() -> io::Result<(Locator, Option<OwnedFd>)>,
    ) -> io::Result<Arc<Inode>> {
        let kind = st.mode & libc::S_IFMT;
        let shard = &self.by_key[key_shard(st.dev, st.ino)];
        let known = {
            let map = shard.read();
            match map.get(&(st.dev, st.ino)) {
                Some(inode) => {
                    let same = {
                        let id = inode.ident.read();
                        !fresh
                            && id.kind == kind
                            && (id.btime_ns == st.btime_ns || st.btime_ns == 0)
                    };
                    if same && !self.handles {
                        // Path mode: remember the name just used, it is the freshest.
                        inode.seen_at(parent, name);
                    }
                    if same {
                        // Counted under the map lock, so a concurrent forget cannot drop it.
                        inode.lookups.fetch_add(1, Ordering::Relaxed);
                        Some(inode.clone())
                    } else {
                        None
                    }
                }
                None => None,
            }
        };
        if let Some(inode) = known {
            return self.pinned_if(via, pin, inode);
        }
        // New object (or a reused inode number): find its locator outside the locks.
        let (locator, opened) = locate()?;
        let mut map = shard.write();
        if let Some(inode) = map.get(&(st.dev, st.ino)).cloned() {
            let refreshed = {
                let mut id = inode.ident.write();
                let same =
                    !fresh && id.kind == kind && (id.btime_ns == st.btime_ns || st.btime_ns == 0);
                if !same {
                    // The old object is gone: same node id (the kernel marks its old inode bad
                    // on the generation change), new identity, no stale descriptor.
                    id.btime_ns = st.btime_ns;
                    id.kind = kind;
                    id.generation = self.generation_for(&locator, st, Some(id.generation));
                    id.locator = locator;
                }
                !same
            };
            let stale = if refreshed {
                self.cache.take(&inode)
            } else {
                None
            };
            inode.lookups.fetch_add(1, Ordering::Relaxed);
            drop(map);
            for fd in stale.into_iter().flatten().flatten() {
                via.release(fd);
            }
            return match (refreshed, opened) {
                (true, Some(fd)) => {
                    self.cache_fd(via, &inode, fd, pin);
                    Ok(inode)
                }
                (_, opened) => {
                    if let Some(fd) = opened {
                        via.close(fd);
                    }
                    self.pinned_if(via, pin, inode)
                }
            };
        }
        let nodeid = self.assign_nodeid(st);
        let generation = self.generation_for(&locator, st, None);
        let inode = Arc::new(Inode::new(
            nodeid,
            st,
            Ident {
                btime_ns: st.btime_ns,
                kind,
                generation,
                locator,
            },
        ));
        self.by_id[shard_of(nodeid)]
            .write()
            .insert(nodeid, inode.clone());
        map.insert((st.dev, st.ino), inode.clone());
        drop(map);
        match opened {
            Some(fd) => {
                self.cache_fd(via, &inode, fd, pin);
                Ok(inode)
            }
            None => self.pinned_if(via, pin, inode),
        }
    }

    /// `inode` (whose lookup was just counted), pinned if `pin`; if pinning fails the lookup is
    /// given back, as the kernel will not count it.
    fn pinned_if(&self, via: Via, pin: bool, inode: Arc<Inode>) -> io::Result<Arc<Inode>> {
        if pin {
            if let Err(e) = self.pin(via, &inode) {
                self.forget(via, inode.nodeid, 1);
                return Err(e);
            }
        }
        Ok(inode)
    }

    fn assign_nodeid(&self, st: &Stat) -> u64 {
        // Lower numbers from 2^63 up could meet allocated ones: those objects get allocated ids
        // (which stay below the control files' ids).
        let preferred = st.dev == self.root.dev && st.ino > ROOT_ID && st.ino < ALLOCATED_BASE;
        if preferred && !self.by_id[shard_of(st.ino)].read().contains_key(&st.ino) {
            return st.ino;
        }
        loop {
            let id = self.next_alloc.fetch_add(1, Ordering::Relaxed);
            if id < crate::filesystem::request::RESERVED_BASE
                && !self.by_id[shard_of(id)].read().contains_key(&id)
            {
                return id;
            }
        }
    }

    /// The locator of a new object `name` in `parent` that was `stat`ed as `st`, and (handle mode)
    /// an `O_PATH` descriptor of it for the cache. The object is opened once and checked against
    /// `st`, so its handle cannot belong to another object put there in between (`ESTALE`: the
    /// kernel looks it up again).
    fn locator_for(
        &self,
        via: Via,
        parent: &Arc<Inode>,
        parent_fd: BorrowedFd,
        name: &OsStr,
        st: &Stat,
    ) -> io::Result<(Locator, Option<OwnedFd>)> {
        let by_path = || Locator::Path {
            parent: parent.clone(),
            name: name.to_os_string(),
        };
        if !self.handles {
            return Ok((by_path(), None));
        }
        let fd = self.retry_emfile(|| {
            via.call(Sys::Openat, || {
                sys::openat(parent_fd, name, libc::O_PATH | libc::O_NOFOLLOW, 0)
            })
        })?;
        let fst = match via.call(Sys::Statx, || sys::fstat(fd.as_fd())) {
            Ok(fst) if (fst.dev, fst.ino, fst.btime_ns) == (st.dev, st.ino, st.btime_ns) => fst,
            r => {
                via.close(fd);
                return Err(r.err().unwrap_or_else(no_entry));
            }
        };
        let handle = via.call(Sys::NameToHandleAt, || {
            sys::name_to_handle_at(fd.as_fd(), OsStr::new(""))
        });
        match handle {
            Ok((handle, mount_id)) => {
                if !self.mounts.read().contains_key(&mount_id) {
                    // A file system mounted inside LOWER: keep a descriptor on its root to open
                    // handles with (open_by_handle_at refuses O_PATH ones). Only directories
                    // are opened; other objects there are kept by path.
                    if fst.mode & libc::S_IFMT != libc::S_IFDIR {
                        return Ok((by_path(), Some(fd)));
                    }
                    let dir = self.retry_emfile(|| {
                        via.call(Sys::Openat, || {
                            sys::reopen(fd.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY)
                        })
                    });
                    let dir = match dir {
                        Ok(d) => d,
                        Err(e) => {
                            via.close(fd);
                            return Err(e);
                        }
                    };
                    let mut mounts = self.mounts.write();
                    match mounts.entry(mount_id) {
                        std::collections::hash_map::Entry::Occupied(_) => {
                            // Another request kept one first.
                            drop(mounts);
                            via.close(dir);
                        }
                        std::collections::hash_map::Entry::Vacant(v) => {
                            v.insert(Arc::new(dir));
                        }
                    }
                }
                Ok((Locator::Handle { handle, mount_id }, Some(fd)))
            }
            Err(e)
                if !self.require_handles
                    && matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EOVERFLOW)) =>
            {
                Ok((by_path(), Some(fd)))
            }
            Err(e) => {
                via.close(fd);
                Err(e)
            }
        }
    }

    /// The locator of a new object `name` in `parent`, of which `path_fd` is an `O_PATH`
    /// descriptor (kept for the cache): its handle where it has one, else the name.
    fn locator_of_open(
        &self,
        via: Via,
        parent: &Arc<Inode>,
        name: &OsStr,
        path_fd: OwnedFd,
    ) -> io::Result<(Locator, Option<OwnedFd>)> {
        let by_path = || Locator::Path {
            parent: parent.clone(),
            name: name.to_os_string(),
        };
        if !self.handles {
            return Ok((by_path(), Some(path_fd)));
        }
        let handle = via.call(Sys::NameToHandleAt, || {
            sys::name_to_handle_at(path_fd.as_fd(), OsStr::new(""))
        });
        let locator = match handle {
            // Only file systems already known: a new mount inside LOWER is learnt from a
            // directory looked up there (see `locator_for`); until then objects are kept by path.
            Ok((handle, mount_id)) if self.mounts.read().contains_key(&mount_id) => {
                Locator::Handle { handle, mount_id }
            }
            Ok(_) => by_path(),
            Err(e)
                if !self.require_handles
                    && matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EOVERFLOW)) =>
            {
                by_path()
            }
            Err(e) => {
                via.close(path_fd);
                return Err(e);
            }
        };
        Ok((locator, Some(path_fd)))
    }

    /// The kernel forgets `n` lookups of `nodeid`; at zero the inode is dropped (and its
    /// descriptor closed, `via` the request, where it was the last holder).
    pub fn forget(&self, via: Via, nodeid: u64, n: u64) {
        if nodeid == ROOT_ID {
            return;
        }
        let Ok(inode) = self.get(nodeid) else {
            return;
        };
        let mut keys = self.by_key[key_shard(inode.dev, inode.ino)].write();
        let before = inode.lookups.load(Ordering::Relaxed);
        let after = before.saturating_sub(n);
        inode.lookups.store(after, Ordering::Relaxed);
        if after == 0 {
            if keys
                .get(&(inode.dev, inode.ino))
                .is_some_and(|i| Arc::ptr_eq(i, &inode))
            {
                keys.remove(&(inode.dev, inode.ino));
            }
            self.by_id[shard_of(nodeid)].write().remove(&nodeid);
            let fd = self.cache.take(&inode);
            drop(keys);
            self.remember(&inode);
            // Closed outside the map lock.
            for fd in fd.into_iter().flatten().flatten() {
                via.release(fd);
            }
        }
    }

    /// After a rename through the mount (path mode): the object now named `new_name` in
    /// `new_parent` is found there.
    pub fn renamed(
        &self,
        via: Via,
        new_parent: &Arc<Inode>,
        new_parent_fd: BorrowedFd,
        new_name: &OsStr,
    ) {
        if self.handles {
            return;
        }
        if let Ok(st) = via.call(Sys::Statx, || sys::statat(new_parent_fd, new_name)) {
            if let Some(inode) = self.by_key[key_shard(st.dev, st.ino)]
                .read()
                .get(&(st.dev, st.ino))
            {
                inode.seen_at(new_parent, new_name);
            }
        }
    }

    /// Number of inodes known (root included).
    pub fn len(&self) -> usize {
        self.by_id.iter().map(|s| s.read().len()).sum()
    }

    /// Whether only the root is known.
    pub fn is_empty(&self) -> bool {
        self.len() <= 1
    }

    /// Descriptors currently cached.
    pub fn cached_fds(&self) -> usize {
        self.cache.cached()
    }
}

#[cfg(test)]
mod tests;
