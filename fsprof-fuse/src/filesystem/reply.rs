//! The typed results of the operations, as a transport turns them into kernel replies.

use std::ffi::OsStr;
use std::io;
use std::time::Duration;

/// A time as the kernel passes it: seconds since the epoch (negative before it) and
/// nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub struct Timespec {
    /// Seconds since the epoch.
    pub sec: i64,
    /// Nanoseconds (below 10^9).
    pub nsec: u32,
}

/// The type of a file system object.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    RegularFile,
    Directory,
    Symlink,
    NamedPipe,
    Socket,
    CharDevice,
    BlockDevice,
}

impl FileType {
    /// The type of a mode's `S_IFMT` bits (a regular file for anything else).
    pub fn from_mode(mode: u32) -> FileType {
        match mode & libc::S_IFMT {
            libc::S_IFDIR => FileType::Directory,
            libc::S_IFLNK => FileType::Symlink,
            libc::S_IFIFO => FileType::NamedPipe,
            libc::S_IFSOCK => FileType::Socket,
            libc::S_IFCHR => FileType::CharDevice,
            libc::S_IFBLK => FileType::BlockDevice,
            _ => FileType::RegularFile,
        }
    }

    /// The type of a `getdents64` `d_type`; `None` for `DT_UNKNOWN`.
    pub fn from_dirent(d_type: u8) -> Option<FileType> {
        Some(match d_type {
            libc::DT_DIR => FileType::Directory,
            libc::DT_LNK => FileType::Symlink,
            libc::DT_FIFO => FileType::NamedPipe,
            libc::DT_SOCK => FileType::Socket,
            libc::DT_CHR => FileType::CharDevice,
            libc::DT_BLK => FileType::BlockDevice,
            libc::DT_REG => FileType::RegularFile,
            _ => return None,
        })
    }

    /// The `S_IFMT` bits.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileType::Directory => libc::S_IFDIR,
            FileType::Symlink => libc::S_IFLNK,
            FileType::NamedPipe => libc::S_IFIFO,
            FileType::Socket => libc::S_IFSOCK,
            FileType::CharDevice => libc::S_IFCHR,
            FileType::BlockDevice => libc::S_IFBLK,
            FileType::RegularFile => libc::S_IFREG,
        }
    }

    /// The `d_type` of a directory entry (`DT_REG`...).
    pub fn dirent_type(self) -> u8 {
        match self {
            FileType::Directory => libc::DT_DIR,
            FileType::Symlink => libc::DT_LNK,
            FileType::NamedPipe => libc::DT_FIFO,
            FileType::Socket => libc::DT_SOCK,
            FileType::CharDevice => libc::DT_CHR,
            FileType::BlockDevice => libc::DT_BLK,
            FileType::RegularFile => libc::DT_REG,
        }
    }
}

/// The attributes of an object as served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Attr {
    /// Node id.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    /// Last access.
    pub atime: Timespec,
    /// Last modification.
    pub mtime: Timespec,
    /// Last status change.
    pub ctime: Timespec,
    /// Type and permission bits (`st_mode`).
    pub mode: u32,
    /// Link count.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Device number of a device file (the kernel's new encoding).
    pub rdev: u32,
    /// Preferred I/O size.
    pub blksize: u32,
}

impl Attr {
    /// The object's type.
    pub fn kind(&self) -> FileType {
        FileType::from_mode(self.mode)
    }
}

/// Attributes and how long the kernel may cache them (`getattr`, `setattr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttrOut {
    /// The attributes.
    pub attr: Attr,
    /// How long the kernel may cache them.
    pub ttl: Duration,
}

/// A name's object: what `lookup`, `mknod`, `mkdir`, `symlink`, `link` and `create` answer.
/// Each one the kernel receives counts one lookup of the node, undone by `forget`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The object's attributes (node id 0: a negative or attribute-less entry).
    pub attr: Attr,
    /// Generation of the node id (a reused id gets a new one).
    pub generation: u64,
    /// How long the kernel may cache the name.
    pub entry_ttl: Duration,
    /// How long the kernel may cache the attributes.
    pub attr_ttl: Duration,
}

impl Entry {
    /// `r`, or where it failed with `ENOENT` and `ttl` is not zero, a negative entry (node id
    /// 0) that the kernel may keep for `ttl` instead of asking again.
    #[inline]
    pub fn or_negative(r: io::Result<Entry>, ttl: Duration) -> io::Result<Entry> {
        match r {
            Err(e) if !ttl.is_zero() && e.raw_os_error() == Some(libc::ENOENT) => Ok(Entry {
                attr: Attr::default(),
                generation: 0,
                entry_ttl: ttl,
                attr_ttl: Duration::ZERO,
            }),
            r => r,
        }
    }
}

/// `FOPEN_*` flags of an open reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FopenFlags(pub u32);

impl FopenFlags {
    /// Bypass the page cache.
    pub const DIRECT_IO: FopenFlags = FopenFlags(1 << 0);
    /// Keep the page cache from an earlier open.
    pub const KEEP_CACHE: FopenFlags = FopenFlags(1 << 1);
    /// The file is not seekable.
    pub const NONSEEKABLE: FopenFlags = FopenFlags(1 << 2);
    /// Cache the directory's listing.
    pub const CACHE_DIR: FopenFlags = FopenFlags(1 << 3);
    /// A stream (no file position).
    pub const STREAM: FopenFlags = FopenFlags(1 << 4);
    /// Do not send FLUSH at close.
    pub const NOFLUSH: FopenFlags = FopenFlags(1 << 5);
    /// Allow parallel direct writes.
    pub const PARALLEL_DIRECT_WRITES: FopenFlags = FopenFlags(1 << 6);
    /// Reads and writes go to the backing file (kernel passthrough).
    pub const PASSTHROUGH: FopenFlags = FopenFlags(1 << 7);

    /// No flag.
    pub const fn empty() -> FopenFlags {
        FopenFlags(0)
    }

    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: FopenFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for FopenFlags {
    type Output = FopenFlags;
    fn bitor(self, o: FopenFlags) -> FopenFlags {
        FopenFlags(self.0 | o.0)
    }
}

impl std::ops::BitOrAssign for FopenFlags {
    fn bitor_assign(&mut self, o: FopenFlags) {
        self.0 |= o.0;
    }
}

/// An opened file or directory: its handle, how the kernel should treat it, and the kernel
/// passthrough backing file registered for it, if any.
#[derive(Debug)]
pub struct Opened<H> {
    /// The handle.
    pub fh: H,
    /// `FOPEN_*` flags.
    pub flags: FopenFlags,
    /// Kernel passthrough: the backing id the kernel reads and writes through
    /// ([`crate::sys::fuse::BackingId`]); `FOPEN_PASSTHROUGH` is implied.
    pub backing: Option<u32>,
}

impl<H> Opened<H> {
    /// `fh` opened with `flags`, served by the daemon.
    pub fn new(fh: H, flags: FopenFlags) -> Opened<H> {
        Opened {
            fh,
            flags,
            backing: None,
        }
    }
}

/// File-system statistics (`statfs`).
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Statfs {
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub bsize: u32,
    pub namelen: u32,
    pub frsize: u32,
}

/// A time to set (`setattr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetTime {
    /// The current time.
    Now,
    /// This time.
    At(Timespec),
}

/// What a `setattr` changes (each `None` field stays as it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetAttr {
    /// Permission bits.
    pub mode: Option<u32>,
    /// Owner.
    pub uid: Option<u32>,
    /// Group.
    pub gid: Option<u32>,
    /// Size (truncate or extend).
    pub size: Option<u64>,
    /// Access time.
    pub atime: Option<SetTime>,
    /// Modification time.
    pub mtime: Option<SetTime>,
    /// Clear the setuid/setgid bits as the kernel would on a local file system
    /// (`FATTR_KILL_SUIDGID`: a truncation by a caller without `CAP_FSETID`, or any change of
    /// owner or group).
    pub kill_suidgid: bool,
}

impl SetAttr {
    /// Whether nothing is to change. The kernel sends such a `SETATTR` of a regular file when a
    /// caller without `CAP_FSETID` is about to modify it (a write, `fallocate`,
    /// `copy_file_range`) and the kernel holds it to have setuid or setgid bits, or for
    /// `chown(path, -1, -1)`: with `FUSE_HANDLE_KILLPRIV_V2` the clearing is the file system's
    /// (the kernel's own request to clear them lost its mode bits on the way).
    pub fn is_empty(&self) -> bool {
        self.mode.is_none()
            && self.uid.is_none()
            && self.gid.is_none()
            && self.size.is_none()
            && self.atime.is_none()
            && self.mtime.is_none()
    }
}

/// Where `readdir` puts the entries of a listing (the transport's reply buffer).
pub trait DirSink {
    /// Adds the entry `name` (node `ino`, of type `kind`), after which the listing continues
    /// at `offset`. Returns `true` if the reply is full and the entry was not added.
    fn add(&mut self, ino: u64, offset: u64, kind: FileType, name: &OsStr) -> bool;
}

/// Where `readdirplus` puts the entries of a listing with their attributes.
pub trait DirPlusSink {
    /// Adds the entry `name` with its object `entry`, after which the listing continues at
    /// `offset`. Returns `true` if the reply is full and the entry was not added (then the
    /// kernel counts no lookup for it). An entry with node id 0 carries no attributes and
    /// counts no lookup.
    fn add(&mut self, entry: &Entry, offset: u64, name: &OsStr) -> bool;
}

/// A `write`'s flags that matter to a file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteFlags {
    /// Clear setuid/setgid bits (`FUSE_WRITE_KILL_SUIDGID`: the writer lacks `CAP_FSETID`).
    pub kill_suidgid: bool,
    /// The file was opened with `O_DIRECT` (the request's open flags): the lower file system
    /// may want the data aligned.
    pub direct: bool,
    /// The kernel writes back its page cache (`FUSE_WRITE_CACHE`: pages dirtied through a
    /// shared mapping, or by the writeback cache), through any open handle of the file that
    /// can write: not a caller's write, so none of `O_DIRECT`'s rules apply to it.
    pub cache: bool,
}

/// The answer to an `ioctl`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoctlOut {
    /// The ioctl's return value.
    pub result: i32,
    /// Data returned (at most the size asked for).
    pub data: Vec<u8>,
}
