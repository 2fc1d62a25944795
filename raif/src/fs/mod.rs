//! The RAIF file system: one namespace over the branches, served through FUSE.
//!
//! Each FUSE operation is a method returning `io::Result` (in `lookup`, `attrs`, `names`,
//! `data`, `alloc`, `dir`, `xattr`); the [`FileSystem`] implementation here routes to them (a transport builds the
//! replies and converts errors). Every system call on a branch goes through
//! [`Branch::call`](crate::branch::Branch::call), which records it in that branch's profile
//! layer under the operation of the request that made it. Requests reach it through the
//! mount's gate ([`crate::gate`]), which a rebuild while mounted closes for its steps.
//!
//! # Namespace operations
//!
//! Directories, symlinks, special files and every regular file's parts exist on every branch
//! at the same relative path. An operation that changes the namespace or attributes runs on
//! the branches in index order (`Raif::fan_out`): an error on the first is the answer; an
//! error on a later one undoes the branches already changed (rename back, remove what was
//! created, restore modes and attribute values), or, where that is impossible (an unlink, a
//! rename over an existing file), marks the branch that diverged failed so it is rebuilt
//! rather than served. A branch in trouble (`EIO`, gone) is failed and skipped.
//!
//! # Reads
//!
//! `lookup`, `getattr`, `readdir` and the like ask one branch, chosen by a hash of the name or
//! node id so the load spreads; a file's data comes from the branches its layout says.

mod alloc;
mod attrs;
mod data;
mod dir;
mod fanout;
mod held;
mod lookup;
mod mount_io;
mod names;
mod open;
mod privs;
mod shared;
#[cfg(test)]
mod tests;
pub mod writeback;
pub(crate) mod xattr;

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use fsprof_fuse::filesystem::{
    Attr, AttrOut, Caps, DirSink, Entry, FileSystem, Init, Ino, IoctlOut, Key, Opened, Request,
    SetAttr, Statfs, WriteFlags,
};
use fsprof_fuse::passthrough::inode_store::ROOT_ID;
use fsprof_fuse::protocol::errno::err;
use fsprof_fuse::protocol::ops::Sys;
use fsprof_fuse::sys::fuse::Device;
use fsprof_fuse::sys::{self, Stat};
use fsprof_fuse::toolkit::attr::to_attr;
use fsprof_fuse::toolkit::handle_table::HandleTable;

use crate::branch::BranchSet;
use crate::inode::{Inode, InodeTable, name_hash};
use crate::intent::Journal;
use crate::layout::{Layout, Level};
use crate::policy::{Policy, Settings};
use crate::sums;

pub use dir::DirOpen;
pub(crate) use fanout::{Undo, trouble};
pub(crate) use held::Held;
pub(crate) use mount_io::{MountParts, SumFiles};
pub use open::OpenFile;
pub use shared::Shared;
pub use writeback::{DirtySums, SumDirs};
pub(crate) use writeback::{flush_sums, put_record, release_sums};

/// Settings of the file system.
#[derive(Debug, Clone)]
pub struct FsConfig {
    /// How long the kernel may cache names. Default 1 s.
    pub entry_ttl: Duration,
    /// How long the kernel may cache attributes. Default 1 s.
    pub attr_ttl: Duration,
    /// Level, stripe unit and copies where the policy says nothing (the command line).
    /// Default: RAIF1, 64 KiB, all branches.
    pub defaults: Settings,
    /// RAIF4's parity branch. Default: the last.
    pub parity_branch: Option<usize>,
    /// Per-file policy. Default: none.
    pub policy: Policy,
    /// Names at the root that are not served (control files, branch markers).
    pub hidden_root_names: Vec<OsString>,
    /// Keep the kernel's page cache across opens (every change goes through the mount).
    /// Default on.
    pub keep_cache: bool,
    /// How often branches are checked for being replaced or moved. Default 2 s; 0 = never.
    pub check_interval: Duration,
    /// Capacity of the descriptor cache: directories', open files' parts and sum files'
    /// descriptors, the least recently used closed beyond it (only the parts of files that
    /// lost a name while open are held beyond it). Default 8192 (`raif` makes it at most half
    /// of the open-file limit).
    pub dir_cache: usize,
    /// Largest read or write request (bytes). Default 1 MiB.
    pub max_io: u32,
    /// Give new (and emptied) files block checksums ([`crate::sums`]); files that have them
    /// keep them up to date and verified either way. Default on.
    pub checksums: bool,
}

impl FsConfig {
    /// What a new file gets where no policy rule matches: the policy's `[default]`, then the
    /// command line.
    pub fn new_file_defaults(&self) -> Settings {
        self.policy.default.or(self.defaults)
    }
}

impl Default for FsConfig {
    fn default() -> Self {
        FsConfig {
            entry_ttl: Duration::from_secs(1),
            attr_ttl: Duration::from_secs(1),
            defaults: Settings {
                level: Some(Level::Raif1),
                stripe: Some(64 << 10),
                copies: None,
            },
            parity_branch: None,
            policy: Policy::default(),
            hidden_root_names: Vec::new(),
            keep_cache: true,
            check_interval: Duration::from_secs(2),
            dir_cache: 8192,
            max_io: 1 << 20,
            checksums: true,
        }
    }
}

/// The RAIF file system over a set of branches.
pub struct Raif {
    /// Each branch's sum directory ([`crate::reserved::SUM_DIR`]), where it could be opened.
    pub(crate) sum_dirs: Arc<SumDirs>,
    /// Files with checksum attributes to write back ([`DirtySums`]).
    pub(crate) dirty_sums: Arc<DirtySums>,
    pub(crate) cfg: FsConfig,
    pub(crate) bs: Arc<BranchSet>,
    pub(crate) inodes: Arc<InodeTable>,
    pub(crate) files: HandleTable<OpenFile>,
    pub(crate) dirs: HandleTable<DirOpen>,
    next_start: AtomicU64,
    turn: AtomicU64,
    pub(crate) privileged: bool,
    /// Set when the mount ends (threads started by it stop).
    pub(crate) stop: Arc<AtomicBool>,
    /// Serializes giving identities to special files found without one.
    pub(crate) id_lock: parking_lot::Mutex<()>,
    /// The write-intent log (none: writes are not logged).
    pub(crate) journal: Option<Arc<Journal>>,
    /// The session's `/dev/fuse`, where the kernel is told that attributes it holds changed.
    pub(crate) device: Device,
}

impl Raif {
    /// The file system over `bs` (already opened and checked).
    pub fn new(cfg: FsConfig, bs: Arc<BranchSet>) -> io::Result<Raif> {
        let roots = bs
            .iter()
            .map(|b| match b.root() {
                Ok(fd) => fd.try_clone().map(|f| Some(Arc::new(f))),
                Err(_) => Ok(None),
            })
            .collect::<io::Result<Vec<_>>>()?;
        let inodes = Arc::new(InodeTable::new(roots, cfg.dir_cache));
        let sum_dirs: Box<[_]> = bs
            .iter()
            .map(|b| {
                let root = b.root().ok()?;
                match sums::open_dir(root.as_fd(), true) {
                    Ok(d) => Some(d),
                    Err(e) => {
                        log::warn!(
                            "branch {}: cannot open {}: {e}; no checksums kept there",
                            b.index,
                            crate::reserved::SUM_DIR
                        );
                        None
                    }
                }
            })
            .collect();
        // A quarter of the cache's capacity for descriptors held by changes to write back.
        let dirty_sums = Arc::new(DirtySums::new(cfg.dir_cache / 4 / bs.len()));
        Ok(Raif {
            cfg,
            bs,
            inodes,
            files: HandleTable::default(),
            dirs: HandleTable::default(),
            next_start: AtomicU64::new(crate::marker::random_u128() as u64 % 64),
            turn: AtomicU64::new(0),
            privileged: sys::geteuid() == 0,
            stop: Arc::new(AtomicBool::new(false)),
            id_lock: parking_lot::Mutex::new(()),
            journal: None,
            device: Device::new(),
            dirty_sums,
            sum_dirs: Arc::new(SumDirs(
                sum_dirs
                    .into_vec()
                    .into_iter()
                    .map(|d: Option<OwnedFd>| parking_lot::RwLock::new(d.map(Arc::new)))
                    .collect(),
            )),
        })
    }

    /// Names nodes by their path in the mount, as the inode table last knew it (for the
    /// request records: slow log, hot files, `path=` injection rules).
    pub fn paths(&self) -> Arc<dyn fsprof_fuse::records::Paths> {
        Arc::new(TablePaths(self.inodes.clone(), self.bs.clone()))
    }

    /// Logs the intent of every write in `journal` (see [`crate::intent`]), cleared by a
    /// thread started at `init`.
    pub fn with_journal(mut self, journal: Arc<Journal>) -> Raif {
        self.journal = Some(journal);
        self
    }

    /// Tells the kernel through the session's `device` when attributes it holds change behind a
    /// reply that carries none (setuid bits cleared by a write or an open).
    pub fn with_device(mut self, device: Device) -> Raif {
        self.device = device;
        self
    }

    /// The write-intent log, if writes are logged.
    pub fn journal(&self) -> Option<&Arc<Journal>> {
        self.journal.as_ref()
    }

    /// The branches.
    pub fn branches(&self) -> &Arc<BranchSet> {
        &self.bs
    }

    /// The inode table (for tests and diagnostics).
    pub fn inodes(&self) -> &InodeTable {
        &self.inodes
    }

    /// Whether `name` in `parent` is hidden (control files, markers).
    pub(crate) fn hidden(&self, parent: u64, name: &[u8]) -> bool {
        parent == ROOT_ID
            && (crate::reserved::is_own_name(name)
                || self
                    .cfg
                    .hidden_root_names
                    .iter()
                    .any(|h| h.as_encoded_bytes() == name))
    }

    /// The `O_PATH` descriptor of directory `dir` on branch `b` (cached).
    pub(crate) fn dir_fd(
        &self,
        dir: &Arc<Inode>,
        b: usize,
        req: &Request,
    ) -> io::Result<Arc<OwnedFd>> {
        if let Some(fd) = dir.cached_fd(b) {
            return Ok(fd);
        }
        let Some(parent) = dir.with_loc(|p, _| p.cloned()) else {
            return Err(err(libc::EIO)); // a branch root that is missing
        };
        let pfd = self.dir_fd(&parent, b, req)?;
        let fd = dir.with_loc(|_, name| {
            self.inodes.retry_emfile(|| {
                self.bs.get(b).call(req, Sys::Openat, || {
                    sys::openat(
                        pfd.as_fd(),
                        name,
                        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                        0,
                    )
                })
            })
        })?;
        Ok(self
            .inodes
            .cache_fd(dir, b, fd, |c, f| self.bs.release(req, c, f)))
    }

    /// A descriptor of `inode`'s object on branch `b`: an open file's pinned part, else an
    /// `O_PATH` one (closed as a call of `req` when the request drops it).
    pub(crate) fn obj_fd<'a>(
        &'a self,
        inode: &Arc<Inode>,
        b: usize,
        req: &'a Request<'a>,
    ) -> io::Result<Held<'a>> {
        let held = |fd| Held::new(&self.bs, req, b, fd);
        if inode.is_dir() {
            return self.dir_fd(inode, b, req).map(held);
        }
        if let Some(fd) = inode.open_part(b) {
            return Ok(held(fd));
        }
        let parent = inode
            .with_loc(|p, _| p.cloned())
            .ok_or_else(|| err(libc::EIO))?;
        let pfd = self.dir_fd(&parent, b, req)?;
        inode
            .with_loc(|_, name| {
                self.bs.get(b).call(req, Sys::Openat, || {
                    sys::openat(pfd.as_fd(), name, libc::O_PATH | libc::O_NOFOLLOW, 0)
                })
            })
            .map(|fd| held(Arc::new(fd)))
    }

    /// `stat` of `inode`'s object on branch `b` (an open file's through its pinned part).
    pub(crate) fn stat_on(&self, inode: &Arc<Inode>, b: usize, req: &Request) -> io::Result<Stat> {
        let cached = if inode.is_dir() {
            Some(self.dir_fd(inode, b, req)?)
        } else {
            inode.open_part(b)
        };
        if let Some(fd) = cached {
            return self
                .bs
                .get(b)
                .call(req, Sys::Statx, || sys::fstat(fd.as_fd()));
        }
        let parent = inode
            .with_loc(|p, _| p.cloned())
            .ok_or_else(|| err(libc::EIO))?;
        let pfd = self.dir_fd(&parent, b, req)?;
        inode.with_loc(|_, name| {
            self.bs
                .get(b)
                .call(req, Sys::Statx, || sys::statat(pfd.as_fd(), name))
        })
    }

    /// The branch to ask about `inode` first: a file's home (its parts spread by start
    /// branch); for other objects the branches take turns (a few directories, the root above
    /// all, get most of the questions).
    pub(crate) fn first_for(&self, inode: &Inode) -> u64 {
        match &inode.file {
            Some(f) => f.layout.home() as u64,
            None => self.turn.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Branches that may answer about `inode`: online ones, and stale ones where the file is
    /// up to date; for files only the branches holding a part.
    pub(crate) fn answering(&self, inode: &Inode) -> u64 {
        match &inode.file {
            Some(f) => {
                let holders = (0..self.bs.len())
                    .filter(|&b| f.layout.holds(b))
                    .fold(0u64, |m, b| m | 1 << b);
                holders & !f.down(&self.bs)
            }
            None => self.readable(),
        }
    }

    /// Attributes of `inode` from branch `b`'s `stat` (`st`): the node id, and a file's
    /// logical size and blocks ([`Raif::file_blocks`], `stat` giving the other parts').
    pub(crate) fn attr(
        &self,
        inode: &Inode,
        b: usize,
        st: &Stat,
        stat: impl FnMut(usize) -> io::Result<Stat>,
    ) -> Attr {
        let mut a = to_attr(inode.nodeid, st);
        if let Some(f) = &inode.file {
            a.size = f.size.load(Ordering::Acquire);
            a.blocks = self.file_blocks(&f.layout, f.down(&self.bs), b, st, stat);
        }
        a
    }

    /// A file's `st_blocks`: what its parts hold, as `df` counts the volume's space (see
    /// `do_statfs`): one copy of a RAIF1 file (the one `st`, of branch `b`, is); the sum of
    /// a striped file's parts (`stat(c)` for each other one), less the parity's share for
    /// RAIF4/5 (times N−1 of N). Holes hold nothing. A part that cannot be asked (its branch
    /// failed) counts as the one asked.
    fn file_blocks(
        &self,
        l: &Layout,
        down: u64,
        b: usize,
        st: &Stat,
        mut stat: impl FnMut(usize) -> io::Result<Stat>,
    ) -> u64 {
        if !l.level.striped() {
            if l.holds(b) {
                return st.blocks;
            }
            // Asked a branch that holds no copy (its part is empty): a copy's.
            return (0..l.width as usize)
                .filter(|&c| l.holds(c) && down & (1 << c) == 0)
                .find_map(|c| stat(c).ok())
                .map_or(0, |s| s.blocks);
        }
        let w = l.width as u64;
        let mut total = st.blocks;
        for c in (0..l.width as usize).filter(|&c| c != b) {
            let theirs = (down & (1 << c) == 0)
                .then(|| stat(c).ok())
                .flatten()
                .map_or(st.blocks, |s| s.blocks);
            total += theirs;
        }
        match l.level {
            Level::Raif4 | Level::Raif5 => total * (w - 1) / w,
            _ => total,
        }
    }

    /// Current attributes of `inode`, from one branch.
    pub(crate) fn getattr_of(&self, inode: &Arc<Inode>, req: &Request) -> io::Result<Attr> {
        let (b, st) = self.on_one(self.first_for(inode), self.answering(inode), "stat", |b| {
            self.stat_on(inode, b, req).map(|st| (b, st))
        })?;
        Ok(self.attr(inode, b, &st, |c| self.stat_on(inode, c, req)))
    }

    /// Runs `create` (one branch's part of a new object) with the caller's rights and umask
    /// (see [`fsprof_fuse::toolkit::create_as::create_as`]; with `FUSE_DONT_MASK` the kernel leaves the
    /// umask to the branch, which ignores it where a default ACL applies).
    pub(crate) fn as_caller<T>(
        &self,
        req: &Request,
        create: impl FnMut() -> io::Result<T>,
    ) -> io::Result<T> {
        fsprof_fuse::toolkit::create_as::create_as(self.privileged, req, create)
    }

    /// A new file's layout from the policy, the command line and a rotating start branch.
    pub(crate) fn new_layout(&self, parent: &Inode, name: &OsStr) -> Layout {
        let path;
        let path_arg = if self.cfg.policy.needs_path {
            let mut p = parent.path();
            if !p.is_empty() {
                p.push(b'/');
            }
            p.extend_from_slice(name.as_encoded_bytes());
            path = p;
            Some(path.as_slice())
        } else {
            None
        };
        let s = self
            .cfg
            .policy
            .settings_for(name.as_encoded_bytes(), path_arg)
            .or(self.cfg.defaults);
        let n = self.bs.len();
        let level = s.level.unwrap_or(Level::Raif1);
        // Config checked that every level the policy can give fits the branch count.
        let data = if level == Level::Raif4 { n - 1 } else { n };
        let start = (self.next_start.fetch_add(1, Ordering::Relaxed) % data as u64) as u8;
        Layout {
            level,
            stripe: s.stripe.unwrap_or(64 << 10),
            width: n as u8,
            copies: s.copies.unwrap_or(n).min(n) as u8,
            start,
            parity: self.cfg.parity_branch.unwrap_or(n - 1) as u8,
        }
    }

    /// Checks every branch now (from `.raif` and the health thread).
    pub fn check(&self) {
        self.bs.check_all();
    }
}

/// [`fsprof_fuse::records::Paths`] over the inode table; whether a user may search a
/// directory is asked of the first online branch (directories are made on every branch, with
/// the mode asked for).
struct TablePaths(Arc<InodeTable>, Arc<BranchSet>);

impl fsprof_fuse::records::Paths for TablePaths {
    fn path(&self, ino: Ino) -> Option<Vec<u8>> {
        let inode = self.0.get(ino.0).ok()?;
        let path = inode.path();
        let mut p = Vec::with_capacity(path.len() + 1);
        p.push(b'/');
        p.extend_from_slice(&path);
        Some(p)
    }

    fn may_search(&self, who: &fsprof_fuse::layers::access::Caller, dir: &[u8]) -> bool {
        let online = self.1.online_mask();
        let Some(b) = (0..self.1.len()).find(|&i| online & (1 << i) != 0) else {
            return false;
        };
        let Ok(root) = self.1.get(b).root() else {
            return false;
        };
        who.may_search(root.as_fd(), dir, sys::geteuid() == 0)
    }
}

impl FileSystem for Raif {
    type File = Key;
    type Dir = Key;

    fn init(&self, init: &mut Init) -> io::Result<()> {
        // The same negotiation as the passthrough's; RAIF serves no READDIRPLUS and has no
        // writeback or kernel passthrough mode. It refuses file handles (FUSE_NO_EXPORT_SUPPORT:
        // name_to_handle_at fails with EOPNOTSUPP, and the mount cannot be exported over NFS):
        // its objects are found by parent and name, so one the kernel forgot could not be found
        // from its node id again, and a handle would fail later with ESTALE instead.
        fsprof_fuse::toolkit::init_flags::negotiate(
            init,
            &fsprof_fuse::toolkit::init_flags::Wants {
                keep_cache: self.cfg.keep_cache,
                readdirplus: false,
                writeback: false,
                extra: Caps::NO_EXPORT_SUPPORT,
                off: Caps::empty(),
                max_io: self.cfg.max_io,
                max_background: None,
            },
        );
        self.spawn_health_thread();
        self.spawn_intent_thread();
        Ok(())
    }

    fn destroy(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.dirty_sums.flush_all(&self.bs);
        if let Some(j) = &self.journal {
            j.close(self.bs.failed_mask());
        }
        self.bs.end_mount();
    }

    fn lookup(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<Entry> {
        self.do_lookup(req, parent, name).map(|a| self.entry_out(a))
    }

    fn forget(&self, req: &Request, ino: Ino, nlookup: u64) {
        // An inode the table drops takes with it what it cached of its checksum attributes:
        // written back first (a new lookup of the file would read them from the branches).
        if let Some(i) = self
            .inodes
            .forget(ino.0, nlookup, |b, fd| self.bs.release(req, b, fd))
            && let Some(f) = &i.file
        {
            // Under the gate (see `crate::gate`), as every request: not under a rebuild step,
            // which may be rewriting the records they follow.
            release_sums(&self.bs, f, Some(req));
        }
    }

    fn getattr(&self, req: &Request, ino: Ino, fh: Option<&Key>) -> io::Result<AttrOut> {
        self.do_getattr(req, ino, fh).map(|a| self.attr_out(a))
    }

    fn setattr(
        &self,
        req: &Request,
        ino: Ino,
        set: &SetAttr,
        fh: Option<&Key>,
    ) -> io::Result<AttrOut> {
        self.do_setattr(req, ino, set, fh).map(|a| self.attr_out(a))
    }

    fn readlink(&self, req: &Request, ino: Ino, buf: &mut [u8]) -> io::Result<usize> {
        self.do_readlink(req, ino, buf)
    }

    fn mknod(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        rdev: u32,
    ) -> io::Result<Entry> {
        self.do_mknod(req, parent, name, mode, rdev)
            .map(|a| self.entry_out(a))
    }

    fn mkdir(&self, req: &Request, parent: Ino, name: &OsStr, mode: u32) -> io::Result<Entry> {
        self.do_mkdir(req, parent, name, mode)
            .map(|a| self.entry_out(a))
    }

    fn unlink(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<()> {
        self.do_unlink(req, parent, name)
    }

    fn rmdir(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<()> {
        self.do_rmdir(req, parent, name)
    }

    fn symlink(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        target: &Path,
    ) -> io::Result<Entry> {
        self.do_symlink(req, parent, name, target)
            .map(|a| self.entry_out(a))
    }

    fn rename(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        newparent: Ino,
        newname: &OsStr,
        flags: u32,
    ) -> io::Result<()> {
        self.do_rename(req, parent, name, newparent, newname, flags)
    }

    fn link(&self, req: &Request, ino: Ino, newparent: Ino, newname: &OsStr) -> io::Result<Entry> {
        self.do_link(req, ino, newparent, newname)
            .map(|a| self.entry_out(a))
    }

    fn open(&self, req: &Request, ino: Ino, flags: i32) -> io::Result<Opened<Key>> {
        self.do_open(req, ino, flags)
    }

    fn read(
        &self,
        req: &Request,
        _ino: Ino,
        fh: &Key,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        self.do_read(req, fh, offset, buf)
    }

    fn write(
        &self,
        req: &Request,
        _ino: Ino,
        fh: &Key,
        offset: u64,
        data: &[u8],
        flags: WriteFlags,
    ) -> io::Result<u32> {
        self.do_write(req, fh, offset, data, flags)
    }

    fn flush(&self, req: &Request, _ino: Ino, fh: &Key) -> io::Result<()> {
        self.do_flush(req, fh)
    }

    fn release(&self, req: &Request, _ino: Ino, fh: Key) -> io::Result<()> {
        self.do_release(req, fh);
        Ok(())
    }

    fn fsync(&self, req: &Request, _ino: Ino, fh: &Key, datasync: bool) -> io::Result<()> {
        self.do_fsync(req, fh, datasync)
    }

    fn opendir(&self, req: &Request, ino: Ino, _flags: i32) -> io::Result<Opened<Key>> {
        self.do_opendir(req, ino)
    }

    fn readdir(
        &self,
        req: &Request,
        ino: Ino,
        dh: &Key,
        offset: u64,
        out: &mut dyn DirSink,
    ) -> io::Result<()> {
        self.do_readdir(req, ino, dh, offset, out)
    }

    fn releasedir(&self, req: &Request, _ino: Ino, dh: Key) -> io::Result<()> {
        self.do_releasedir(req, dh);
        Ok(())
    }

    fn fsyncdir(&self, req: &Request, ino: Ino, _dh: &Key, datasync: bool) -> io::Result<()> {
        self.do_fsyncdir(req, ino, datasync)
    }

    fn statfs(&self, req: &Request, _ino: Ino) -> io::Result<Statfs> {
        self.do_statfs(req)
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: Ino,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
    ) -> io::Result<()> {
        self.do_setxattr(req, ino, name, value, flags, position)
    }

    fn getxattr(&self, req: &Request, ino: Ino, name: &OsStr, buf: &mut [u8]) -> io::Result<usize> {
        self.do_getxattr(req, ino, name, buf)
    }

    fn listxattr(&self, req: &Request, ino: Ino, buf: &mut [u8]) -> io::Result<usize> {
        self.do_listxattr(req, ino, buf)
    }

    fn removexattr(&self, req: &Request, ino: Ino, name: &OsStr) -> io::Result<()> {
        self.do_removexattr(req, ino, name)
    }

    fn create(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        flags: i32,
    ) -> io::Result<(Entry, Opened<Key>)> {
        let (attr, opened) = self.do_create(req, parent, name, mode, flags)?;
        Ok((self.entry_out(attr), opened))
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: Ino,
        _fh: &Key,
        _flags: u32,
        cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
    ) -> io::Result<IoctlOut> {
        Err(fsprof_fuse::toolkit::ioctl::answer(cmd))
    }

    fn fallocate(
        &self,
        req: &Request,
        _ino: Ino,
        fh: &Key,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> io::Result<()> {
        self.do_fallocate(req, fh, offset, length, mode)
    }
}

impl Raif {
    /// The entry reply for attributes `a`.
    fn entry_out(&self, a: Attr) -> Entry {
        Entry {
            attr: a,
            generation: 0,
            entry_ttl: self.cfg.entry_ttl,
            attr_ttl: self.cfg.attr_ttl,
        }
    }

    /// Attributes with the configured time to live.
    fn attr_out(&self, a: Attr) -> AttrOut {
        AttrOut {
            attr: a,
            ttl: self.cfg.attr_ttl,
        }
    }
}

impl Raif {
    fn spawn_health_thread(&self) {
        let interval = self.cfg.check_interval;
        if interval.is_zero() {
            return;
        }
        let bs = self.bs.clone();
        let stop = self.stop.clone();
        let r = std::thread::Builder::new()
            .name("raif-health".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(interval);
                    if !stop.load(Ordering::Relaxed) {
                        bs.check_all();
                    }
                }
            });
        if let Err(e) = r {
            log::error!("cannot start the branch health thread: {e}");
        }
    }

    /// Clears the write-intent log's entries of complete writes every [`INTENT_CYCLE`].
    fn spawn_intent_thread(&self) {
        let Some(j) = self.journal.clone() else {
            return;
        };
        let stop = self.stop.clone();
        let bs = self.bs.clone();
        let dirty = self.dirty_sums.clone();
        let r = std::thread::Builder::new()
            .name("raif-intent".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(INTENT_CYCLE);
                    if !stop.load(Ordering::Relaxed) {
                        j.cycle_then(bs.failed_mask(), || dirty.flush_all(&bs));
                    }
                }
            });
        if let Err(e) = r {
            log::error!("cannot start the intent log's clearing thread: {e}");
        }
    }

    /// The space a new file of the default level can use: the smallest free space among the
    /// online branches it would be stored on, times the branches' worth of data it holds
    /// (every branch holds one unit of each row of a striped file; a RAIF1 file a whole copy
    /// on each of its copies' branches, which for fewer copies than branches are those the
    /// next new file gets). Inodes: the fewest free on any of them.
    fn do_statfs(&self, req: &Request) -> io::Result<Statfs> {
        const BSIZE: u64 = 4096;
        let n = self.bs.len();
        // New files get the policy's default before the command line's (as in `new_layout`).
        let defaults = self.cfg.new_file_defaults();
        let level = defaults.level.unwrap_or(Level::Raif1);
        let copies = defaults.copies.unwrap_or(n).min(n);
        let mut holders = crate::layout::all_mask(n);
        if level == Level::Raif1 && copies < n {
            let start = self.next_start.load(Ordering::Relaxed) % n as u64;
            holders = (0..copies).fold(0, |m, k| m | 1 << ((start as usize + k) % n));
        }
        let online = self.bs.online_mask();
        if holders & online == 0 {
            holders = online; // all of those branches failed: new files go elsewhere
        }
        let mut min: Option<(u64, u64, u64, u64, u64, u32)> = None;
        for b in (0..n).filter(|&b| holders & online & (1 << b) != 0) {
            let br = self.bs.get(b);
            let s = match br
                .root()
                .and_then(|r| br.call(req, Sys::Fstatvfs, || sys::fstatvfs(r.as_fd())))
            {
                Ok(s) => s,
                Err(e) => {
                    self.bs.error(b, &e, "statfs");
                    continue;
                }
            };
            let fr = s.f_frsize.max(1);
            let v = (
                s.f_blocks * fr,
                s.f_bfree * fr,
                s.f_bavail * fr,
                s.f_files,
                s.f_ffree,
                s.f_namemax as u32,
            );
            min = Some(match min {
                None => v,
                Some(m) => (
                    m.0.min(v.0),
                    m.1.min(v.1),
                    m.2.min(v.2),
                    m.3.min(v.3),
                    m.4.min(v.4),
                    m.5.min(v.5),
                ),
            });
        }
        let (blocks, bfree, bavail, files, ffree, namelen) = min.ok_or_else(|| err(libc::EIO))?;
        let data = level.data_branches(n) as u64;
        Ok(Statfs {
            blocks: blocks / BSIZE * data,
            bfree: bfree / BSIZE * data,
            bavail: bavail / BSIZE * data,
            files,
            ffree,
            bsize: BSIZE as u32,
            namelen,
            frsize: BSIZE as u32,
        })
    }
}

/// How often the write-intent log clears the entries of complete writes.
pub const INTENT_CYCLE: Duration = Duration::from_secs(2);

/// FNV hash of a name, for choosing the branch that answers about it.
#[inline]
pub(crate) fn spread(name: &OsStr) -> u64 {
    name_hash(name.as_encoded_bytes()) >> 16
}
