//! The kernel's FUSE ABI as the io_uring transport sees it: typed views (`zerocopy`) over the
//! structs of `include/uapi/linux/fuse.h` (protocol 7.42+), the decoding of one request that
//! arrived on a ring entry, and the encoding of its reply. Nothing else in the transport reads
//! or writes the kernel's bytes. The structs are filled from the operation trait's types one
//! level up, in the transport (`transport/uring/encode.rs`): the protocol knows nothing above it.
//!
//! Every struct is plain data with the kernel's layout (`#[repr(C)]`, naturally aligned, no
//! implicit padding; sizes asserted below), so a request is read and a reply written without
//! `unsafe` and without copies beyond the structs themselves.
//!
//! # A request on a ring entry
//!
//! An entry is two buffers: the header buffer ([`UringReqHeader`]: `in_out`, `op_in`,
//! `ring_ent_in_out`) and the payload buffer. The kernel (`fuse_uring_args_to_ring`) writes the
//! `fuse_in_header` into `in_out`, the opcode's first argument (its `fuse_*_in` struct) into
//! `op_in` when that argument is not empty, and every further argument back to back into the
//! payload (`payload_sz` bytes): names with their NUL, write data, xattr values. Since Linux
//! 6.14 the first argument of `LOOKUP`, `UNLINK`, `RMDIR`, `SYMLINK` and `REMOVEXATTR` is an
//! empty placeholder, so their names are in the payload too. **When the first argument is
//! empty, `op_in` keeps the bytes of an earlier request**: [`decode`] never reads it then.
//!
//! # The reply
//!
//! The reply goes into the same buffers (`fuse_uring_commit`): a `fuse_out_header` (`error`,
//! `unique`) into `in_out`, every out-argument back to back into the payload (`CREATE`: the
//! `fuse_entry_out`, then the `fuse_open_out`), and their total length into
//! `ring_ent_in_out.payload_sz`. The kernel checks `unique` against the request's and the
//! length against what the opcode allows.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

/// `enum fuse_opcode`.
#[allow(missing_docs)]
pub mod opcode {
    pub const LOOKUP: u32 = 1;
    pub const FORGET: u32 = 2;
    pub const GETATTR: u32 = 3;
    pub const SETATTR: u32 = 4;
    pub const READLINK: u32 = 5;
    pub const SYMLINK: u32 = 6;
    pub const MKNOD: u32 = 8;
    pub const MKDIR: u32 = 9;
    pub const UNLINK: u32 = 10;
    pub const RMDIR: u32 = 11;
    pub const RENAME: u32 = 12;
    pub const LINK: u32 = 13;
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const WRITE: u32 = 16;
    pub const STATFS: u32 = 17;
    pub const RELEASE: u32 = 18;
    pub const FSYNC: u32 = 20;
    pub const SETXATTR: u32 = 21;
    pub const GETXATTR: u32 = 22;
    pub const LISTXATTR: u32 = 23;
    pub const REMOVEXATTR: u32 = 24;
    pub const FLUSH: u32 = 25;
    pub const INIT: u32 = 26;
    pub const OPENDIR: u32 = 27;
    pub const READDIR: u32 = 28;
    pub const RELEASEDIR: u32 = 29;
    pub const FSYNCDIR: u32 = 30;
    pub const GETLK: u32 = 31;
    pub const SETLK: u32 = 32;
    pub const SETLKW: u32 = 33;
    pub const ACCESS: u32 = 34;
    pub const CREATE: u32 = 35;
    pub const INTERRUPT: u32 = 36;
    pub const BMAP: u32 = 37;
    pub const DESTROY: u32 = 38;
    pub const IOCTL: u32 = 39;
    pub const POLL: u32 = 40;
    pub const NOTIFY_REPLY: u32 = 41;
    pub const BATCH_FORGET: u32 = 42;
    pub const FALLOCATE: u32 = 43;
    pub const READDIRPLUS: u32 = 44;
    pub const RENAME2: u32 = 45;
    pub const LSEEK: u32 = 46;
    pub const COPY_FILE_RANGE: u32 = 47;
    pub const SETUPMAPPING: u32 = 48;
    pub const REMOVEMAPPING: u32 = 49;
    pub const SYNCFS: u32 = 50;
    pub const TMPFILE: u32 = 51;
    pub const STATX: u32 = 52;
    pub const CUSE_INIT: u32 = 4096;
}

/// `FATTR_*`: which fields of a `fuse_setattr_in` are set.
#[allow(missing_docs)]
pub mod fattr {
    pub const MODE: u32 = 1 << 0;
    pub const UID: u32 = 1 << 1;
    pub const GID: u32 = 1 << 2;
    pub const SIZE: u32 = 1 << 3;
    pub const ATIME: u32 = 1 << 4;
    pub const MTIME: u32 = 1 << 5;
    pub const FH: u32 = 1 << 6;
    pub const ATIME_NOW: u32 = 1 << 7;
    pub const MTIME_NOW: u32 = 1 << 8;
    pub const KILL_SUIDGID: u32 = 1 << 11;
}

/// `FUSE_OPEN_KILL_SUIDGID` (`fuse_open_in.open_flags`, `fuse_create_in.open_flags`): an
/// `O_TRUNC` open by a caller without `CAP_FSETID`.
pub const OPEN_KILL_SUIDGID: u32 = 1 << 0;

/// `FUSE_GETATTR_FH`: `fuse_getattr_in.fh` is valid.
pub const GETATTR_FH: u32 = 1 << 0;
/// `FUSE_WRITE_CACHE`: a write-back of the page cache (through a guessed handle).
pub const WRITE_CACHE: u32 = 1 << 0;
/// `FUSE_WRITE_KILL_SUIDGID`: the writer lacks `CAP_FSETID`.
pub const WRITE_KILL_SUIDGID: u32 = 1 << 2;
/// `FUSE_FSYNC_FDATASYNC`.
pub const FSYNC_FDATASYNC: u32 = 1 << 0;
/// `FUSE_IOCTL_UNRESTRICTED`: an ioctl whose buffers the server must fetch itself (CUSE).
pub const IOCTL_UNRESTRICTED: u32 = 1 << 1;
/// `FOPEN_PASSTHROUGH`.
pub const FOPEN_PASSTHROUGH: u32 = 1 << 7;

// ---------------------------------------------------------------------------------------------
// The ring's own structs
// ---------------------------------------------------------------------------------------------

/// `FUSE_URING_IN_OUT_HEADER_SZ`.
pub const URING_IN_OUT_HEADER_SZ: usize = 128;
/// `FUSE_URING_OP_IN_OUT_SZ`.
pub const URING_OP_IN_OUT_SZ: usize = 128;

/// `enum fuse_uring_cmd`: the `cmd_op` of an `IORING_OP_URING_CMD` on `/dev/fuse`.
pub mod uring_cmd {
    /// Hands the kernel an entry's two buffers; completes when a request is in them.
    pub const REGISTER: u32 = 1;
    /// Commits the reply in an entry's buffers and waits for the next request in them.
    pub const COMMIT_AND_FETCH: u32 = 2;
}

/// `struct fuse_uring_cmd_req`: the start of the 80-byte command area of a 128-byte SQE.
#[repr(C)]
#[derive(
    Debug, Default, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct UringCmdReq {
    /// Unused (0).
    pub flags: u64,
    /// `COMMIT_AND_FETCH`: the entry's `commit_id` (ignored by `REGISTER`).
    pub commit_id: u64,
    /// The queue: the CPU whose requests it receives.
    pub qid: u16,
    /// Zero.
    pub padding: [u8; 6],
}

/// `struct fuse_uring_ent_in_out`: the last 32 bytes of an entry's header buffer.
#[repr(C)]
#[derive(
    Debug, Default, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct UringEntInOut {
    /// Unused (0).
    pub flags: u64,
    /// Kernel → daemon: the id to commit the reply with (the request's `unique`).
    pub commit_id: u64,
    /// Kernel → daemon: request bytes in the payload. Daemon → kernel: reply bytes there.
    pub payload_sz: u32,
    /// Zero.
    pub padding: u32,
    /// Zero.
    pub reserved: u64,
}

/// `struct fuse_uring_req_header`: an entry's header buffer (the first of its two iovecs).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct UringReqHeader {
    /// Request: the `fuse_in_header`. Reply: the `fuse_out_header`.
    pub in_out: [u8; URING_IN_OUT_HEADER_SZ],
    /// Request: the opcode's first argument, when it has a non-empty one (stale otherwise).
    pub op_in: [u8; URING_OP_IN_OUT_SZ],
    /// Commit id and payload length.
    pub ring_ent_in_out: UringEntInOut,
}

// ---------------------------------------------------------------------------------------------
// Headers
// ---------------------------------------------------------------------------------------------

/// `struct fuse_in_header`.
#[repr(C)]
#[derive(
    Debug, Default, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[allow(missing_docs)]
pub struct InHeader {
    /// The whole request (this header, the op struct, the payload).
    pub len: u32,
    pub opcode: u32,
    pub unique: u64,
    pub nodeid: u64,
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
    /// Extensions after the arguments, in units of 8 bytes.
    pub total_extlen: u16,
    pub padding: u16,
}

/// `struct fuse_out_header`.
#[repr(C)]
#[derive(
    Debug, Default, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct OutHeader {
    /// The reply's length with this header (not read on a ring, where `payload_sz` counts).
    pub len: u32,
    /// 0 or a negated errno.
    pub error: i32,
    /// The request's `unique`.
    pub unique: u64,
}

// ---------------------------------------------------------------------------------------------
// Arguments (`fuse_*_in`)
// ---------------------------------------------------------------------------------------------

/// Declares kernel structs with the derives every one of them needs.
macro_rules! kernel_structs {
    ($($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $f:ident: $t:ty,)* })*) => {$(
        $(#[$m])*
        #[repr(C)]
        #[derive(
            Debug, Default, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable,
            KnownLayout,
        )]
        #[allow(missing_docs)]
        pub struct $name { $($(#[$fm])* pub $f: $t,)* }
    )*};
}

kernel_structs! {
    /// `struct fuse_getattr_in`.
    pub struct GetattrIn { pub getattr_flags: u32, pub dummy: u32, pub fh: u64, }
    /// `struct fuse_setattr_in`. Times are signed, as in `struct stat`.
    pub struct SetattrIn {
        pub valid: u32, pub padding: u32, pub fh: u64, pub size: u64, pub lock_owner: u64,
        pub atime: i64, pub mtime: i64, pub ctime: i64,
        pub atimensec: u32, pub mtimensec: u32, pub ctimensec: u32,
        pub mode: u32, pub unused4: u32, pub uid: u32, pub gid: u32, pub unused5: u32,
    }
    /// `struct fuse_mknod_in`.
    pub struct MknodIn { pub mode: u32, pub rdev: u32, pub umask: u32, pub padding: u32, }
    /// `struct fuse_mkdir_in`.
    pub struct MkdirIn { pub mode: u32, pub umask: u32, }
    /// `struct fuse_rename_in`.
    pub struct RenameIn { pub newdir: u64, }
    /// `struct fuse_rename2_in`.
    pub struct Rename2In { pub newdir: u64, pub flags: u32, pub padding: u32, }
    /// `struct fuse_link_in`.
    pub struct LinkIn { pub oldnodeid: u64, }
    /// `struct fuse_open_in` (`OPEN`, `OPENDIR`).
    pub struct OpenIn { pub flags: u32, pub open_flags: u32, }
    /// `struct fuse_read_in` (`READ`, `READDIR`, `READDIRPLUS`).
    pub struct ReadIn {
        pub fh: u64, pub offset: u64, pub size: u32, pub read_flags: u32, pub lock_owner: u64,
        pub flags: u32, pub padding: u32,
    }
    /// `struct fuse_write_in`.
    pub struct WriteIn {
        pub fh: u64, pub offset: u64, pub size: u32, pub write_flags: u32, pub lock_owner: u64,
        pub flags: u32, pub padding: u32,
    }
    /// `struct fuse_release_in` (`RELEASE`, `RELEASEDIR`).
    pub struct ReleaseIn { pub fh: u64, pub flags: u32, pub release_flags: u32, pub lock_owner: u64, }
    /// `struct fuse_flush_in`.
    pub struct FlushIn { pub fh: u64, pub unused: u32, pub padding: u32, pub lock_owner: u64, }
    /// `struct fuse_fsync_in` (`FSYNC`, `FSYNCDIR`).
    pub struct FsyncIn { pub fh: u64, pub fsync_flags: u32, pub padding: u32, }
    /// `struct fuse_setxattr_in` without `FUSE_SETXATTR_EXT` (never asked for).
    pub struct SetxattrIn { pub size: u32, pub flags: u32, }
    /// `struct fuse_getxattr_in` (`GETXATTR`, `LISTXATTR`).
    pub struct GetxattrIn { pub size: u32, pub padding: u32, }
    /// `struct fuse_access_in`.
    pub struct AccessIn { pub mask: u32, pub padding: u32, }
    /// `struct fuse_create_in`.
    pub struct CreateIn { pub flags: u32, pub mode: u32, pub umask: u32, pub open_flags: u32, }
    /// `struct fuse_file_lock`.
    pub struct FileLock { pub start: u64, pub end: u64, pub typ: u32, pub pid: u32, }
    /// `struct fuse_lk_in` (`GETLK`, `SETLK`, `SETLKW`).
    pub struct LkIn { pub fh: u64, pub owner: u64, pub lk: FileLock, pub lk_flags: u32, pub padding: u32, }
    /// `struct fuse_bmap_in`.
    pub struct BmapIn { pub block: u64, pub blocksize: u32, pub padding: u32, }
    /// `struct fuse_ioctl_in`; the input data follows in the payload.
    pub struct IoctlIn {
        pub fh: u64, pub flags: u32, pub cmd: u32, pub arg: u64, pub in_size: u32,
        pub out_size: u32,
    }
    /// `struct fuse_poll_in`.
    pub struct PollIn { pub fh: u64, pub kh: u64, pub flags: u32, pub events: u32, }
    /// `struct fuse_fallocate_in`.
    pub struct FallocateIn { pub fh: u64, pub offset: u64, pub length: u64, pub mode: u32, pub padding: u32, }
    /// `struct fuse_lseek_in`.
    pub struct LseekIn { pub fh: u64, pub offset: u64, pub whence: u32, pub padding: u32, }
    /// `struct fuse_copy_file_range_in`.
    pub struct CopyFileRangeIn {
        pub fh_in: u64, pub off_in: u64, pub nodeid_out: u64, pub fh_out: u64, pub off_out: u64,
        pub len: u64, pub flags: u64,
    }

    /// `struct fuse_attr`. Times are signed, as in `struct stat`.
    pub struct Attr {
        pub ino: u64, pub size: u64, pub blocks: u64, pub atime: i64, pub mtime: i64,
        pub ctime: i64, pub atimensec: u32, pub mtimensec: u32, pub ctimensec: u32,
        pub mode: u32, pub nlink: u32, pub uid: u32, pub gid: u32, pub rdev: u32,
        pub blksize: u32, pub flags: u32,
    }
    /// `struct fuse_entry_out`.
    pub struct EntryOut {
        pub nodeid: u64, pub generation: u64, pub entry_valid: u64, pub attr_valid: u64,
        pub entry_valid_nsec: u32, pub attr_valid_nsec: u32, pub attr: Attr,
    }
    /// `struct fuse_attr_out`.
    pub struct AttrOut { pub attr_valid: u64, pub attr_valid_nsec: u32, pub dummy: u32, pub attr: Attr, }
    /// `struct fuse_open_out`.
    pub struct OpenOut { pub fh: u64, pub open_flags: u32, pub backing_id: u32, }
    /// `struct fuse_write_out` (`WRITE`, `COPY_FILE_RANGE`).
    pub struct WriteOut { pub size: u32, pub padding: u32, }
    /// `struct fuse_kstatfs` (the whole of `struct fuse_statfs_out`).
    pub struct StatfsOut {
        pub blocks: u64, pub bfree: u64, pub bavail: u64, pub files: u64, pub ffree: u64,
        pub bsize: u32, pub namelen: u32, pub frsize: u32, pub padding: u32, pub spare: [u32; 6],
    }
    /// `struct fuse_getxattr_out`: the size of a value or list, for a size query.
    pub struct GetxattrOut { pub size: u32, pub padding: u32, }
    /// `struct fuse_lk_out`.
    pub struct LkOut { pub lk: FileLock, }
    /// `struct fuse_bmap_out`.
    pub struct BmapOut { pub block: u64, }
    /// `struct fuse_ioctl_out`; the output data follows.
    pub struct IoctlOut { pub result: i32, pub flags: u32, pub in_iovs: u32, pub out_iovs: u32, }
    /// `struct fuse_poll_out`.
    pub struct PollOut { pub revents: u32, pub padding: u32, }
    /// `struct fuse_lseek_out`.
    pub struct LseekOut { pub offset: i64, }
    /// `struct fuse_dirent` without its name: `namelen` bytes of name follow, padded to 8.
    pub struct Dirent { pub ino: u64, pub off: u64, pub namelen: u32, pub typ: u32, }
    /// `struct fuse_direntplus` without its name.
    pub struct DirentPlus { pub entry_out: EntryOut, pub dirent: Dirent, }
}

// Layout checks against the kernel's header.
const _: () = {
    assert!(size_of::<UringCmdReq>() == 24);
    assert!(size_of::<UringEntInOut>() == 32);
    assert!(size_of::<UringReqHeader>() == 288);
    assert!(std::mem::offset_of!(UringReqHeader, op_in) == 128);
    assert!(std::mem::offset_of!(UringReqHeader, ring_ent_in_out) == 256);
    assert!(size_of::<InHeader>() == 40);
    assert!(size_of::<OutHeader>() == 16);
    assert!(size_of::<GetattrIn>() == 16);
    assert!(size_of::<SetattrIn>() == 88);
    assert!(size_of::<MknodIn>() == 16);
    assert!(size_of::<MkdirIn>() == 8);
    assert!(size_of::<RenameIn>() == 8);
    assert!(size_of::<Rename2In>() == 16);
    assert!(size_of::<LinkIn>() == 8);
    assert!(size_of::<OpenIn>() == 8);
    assert!(size_of::<ReadIn>() == 40);
    assert!(size_of::<WriteIn>() == 40);
    assert!(size_of::<ReleaseIn>() == 24);
    assert!(size_of::<FlushIn>() == 24);
    assert!(size_of::<FsyncIn>() == 16);
    assert!(size_of::<SetxattrIn>() == 8);
    assert!(size_of::<GetxattrIn>() == 8);
    assert!(size_of::<AccessIn>() == 8);
    assert!(size_of::<CreateIn>() == 16);
    assert!(size_of::<FileLock>() == 24);
    assert!(size_of::<LkIn>() == 48);
    assert!(size_of::<BmapIn>() == 16);
    assert!(size_of::<IoctlIn>() == 32);
    assert!(size_of::<PollIn>() == 24);
    assert!(size_of::<FallocateIn>() == 32);
    assert!(size_of::<LseekIn>() == 24);
    assert!(size_of::<CopyFileRangeIn>() == 56);
    assert!(size_of::<Attr>() == 88);
    assert!(size_of::<EntryOut>() == 128);
    assert!(size_of::<AttrOut>() == 104);
    assert!(size_of::<OpenOut>() == 16);
    assert!(size_of::<WriteOut>() == 8);
    assert!(size_of::<StatfsOut>() == 80);
    assert!(size_of::<GetxattrOut>() == 8);
    assert!(size_of::<LkOut>() == 24);
    assert!(size_of::<BmapOut>() == 8);
    assert!(size_of::<IoctlOut>() == 16);
    assert!(size_of::<PollOut>() == 8);
    assert!(size_of::<LseekOut>() == 8);
    assert!(size_of::<Dirent>() == 24);
    assert!(size_of::<DirentPlus>() == 152);
};

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// Why a ring request could not be decoded. The transport answers it as fuser answers a
/// request it cannot parse (`ENOSYS`) and never panics on what the kernel wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// An opcode the transport does not know.
    Unknown {
        /// The opcode.
        opcode: u32,
    },
    /// The arguments are shorter than the opcode needs.
    Short {
        /// The opcode.
        opcode: u32,
    },
    /// A name has no terminating NUL inside the payload.
    Unterminated {
        /// The opcode.
        opcode: u32,
    },
    /// `payload_sz` is larger than the payload buffer.
    PayloadSize {
        /// What the kernel said.
        payload_sz: u32,
        /// The buffer's length.
        buffer: usize,
    },
}

/// The arguments of one ring request, borrowing the entry's payload for names and data.
#[derive(Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Args<'a> {
    Lookup {
        name: &'a OsStr,
    },
    Getattr(GetattrIn),
    Setattr(SetattrIn),
    Readlink,
    Symlink {
        name: &'a OsStr,
        target: &'a Path,
    },
    Mknod {
        arg: MknodIn,
        name: &'a OsStr,
    },
    Mkdir {
        arg: MkdirIn,
        name: &'a OsStr,
    },
    Unlink {
        name: &'a OsStr,
    },
    Rmdir {
        name: &'a OsStr,
    },
    /// `RENAME` (flags 0) and `RENAME2`.
    Rename {
        newdir: u64,
        flags: u32,
        name: &'a OsStr,
        newname: &'a OsStr,
    },
    Link {
        arg: LinkIn,
        name: &'a OsStr,
    },
    Open(OpenIn),
    Read(ReadIn),
    Write {
        arg: WriteIn,
        data: &'a [u8],
    },
    Statfs,
    Release(ReleaseIn),
    Fsync(FsyncIn),
    Setxattr {
        arg: SetxattrIn,
        name: &'a OsStr,
        value: &'a [u8],
    },
    Getxattr {
        arg: GetxattrIn,
        name: &'a OsStr,
    },
    Listxattr(GetxattrIn),
    Removexattr {
        name: &'a OsStr,
    },
    Flush(FlushIn),
    Opendir(OpenIn),
    Readdir(ReadIn),
    Releasedir(ReleaseIn),
    Fsyncdir(FsyncIn),
    Getlk(LkIn),
    /// `SETLK` and `SETLKW` (`sleep`).
    Setlk {
        arg: LkIn,
        sleep: bool,
    },
    Access(AccessIn),
    Create {
        arg: CreateIn,
        name: &'a OsStr,
    },
    Bmap(BmapIn),
    Ioctl {
        arg: IoctlIn,
        data: &'a [u8],
    },
    Poll(PollIn),
    Fallocate(FallocateIn),
    Readdirplus(ReadIn),
    Lseek(LseekIn),
    CopyFileRange(CopyFileRangeIn),
    /// An opcode the transport knows but the file systems are not asked (`INIT`, `DESTROY`,
    /// `INTERRUPT`, `NOTIFY_REPLY`, the forgets, `CUSE_INIT`); see the dispatcher for answers.
    NotServed(u32),
}

/// A request decoded from a ring entry.
#[derive(Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// Its header.
    pub header: InHeader,
    /// Its arguments.
    pub args: Args<'a>,
}

/// The request header of an entry (for answering a request that cannot be decoded).
pub fn in_header(hdr: &UringReqHeader) -> InHeader {
    InHeader::read_from_prefix(&hdr.in_out).map_or_else(|_| InHeader::default(), |(h, _)| h)
}

/// Reads the op struct `T` from `op_in`.
fn op<T: FromBytes>(hdr: &UringReqHeader, opcode: u32) -> Result<T, DecodeError> {
    T::read_from_prefix(&hdr.op_in)
        .map(|(v, _)| v)
        .map_err(|_| DecodeError::Short { opcode })
}

/// The payload, argument by argument.
struct Payload<'a> {
    rest: &'a [u8],
    opcode: u32,
}

impl<'a> Payload<'a> {
    /// The next NUL-terminated name (without its NUL).
    fn name(&mut self) -> Result<&'a OsStr, DecodeError> {
        let end = self
            .rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(DecodeError::Unterminated {
                opcode: self.opcode,
            })?;
        let name = &self.rest[..end];
        self.rest = &self.rest[end + 1..];
        Ok(OsStr::from_bytes(name))
    }

    /// The next `n` bytes.
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.rest.len() {
            return Err(DecodeError::Short {
                opcode: self.opcode,
            });
        }
        let (b, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(b)
    }
}

/// Decodes the request in an entry's header buffer `hdr` and payload buffer `payload` (see the
/// module documentation for where the kernel puts each argument).
pub fn decode<'a>(hdr: &UringReqHeader, payload: &'a [u8]) -> Result<Decoded<'a>, DecodeError> {
    let header = in_header(hdr);
    let len = hdr.ring_ent_in_out.payload_sz;
    let payload = payload
        .get(..len as usize)
        .ok_or(DecodeError::PayloadSize {
            payload_sz: len,
            buffer: payload.len(),
        })?;
    let opcode = header.opcode;
    let mut p = Payload {
        rest: payload,
        opcode,
    };
    use self::opcode as o;
    let args = match opcode {
        o::LOOKUP => Args::Lookup { name: p.name()? },
        o::GETATTR => Args::Getattr(op(hdr, opcode)?),
        o::SETATTR => Args::Setattr(op(hdr, opcode)?),
        o::READLINK => Args::Readlink,
        o::SYMLINK => Args::Symlink {
            name: p.name()?,
            target: Path::new(p.name()?),
        },
        o::MKNOD => Args::Mknod {
            arg: op(hdr, opcode)?,
            name: p.name()?,
        },
        o::MKDIR => Args::Mkdir {
            arg: op(hdr, opcode)?,
            name: p.name()?,
        },
        o::UNLINK => Args::Unlink { name: p.name()? },
        o::RMDIR => Args::Rmdir { name: p.name()? },
        o::RENAME => {
            let arg: RenameIn = op(hdr, opcode)?;
            Args::Rename {
                newdir: arg.newdir,
                flags: 0,
                name: p.name()?,
                newname: p.name()?,
            }
        }
        o::RENAME2 => {
            let arg: Rename2In = op(hdr, opcode)?;
            Args::Rename {
                newdir: arg.newdir,
                flags: arg.flags,
                name: p.name()?,
                newname: p.name()?,
            }
        }
        o::LINK => Args::Link {
            arg: op(hdr, opcode)?,
            name: p.name()?,
        },
        o::OPEN => Args::Open(op(hdr, opcode)?),
        o::READ => Args::Read(op(hdr, opcode)?),
        o::WRITE => {
            let arg: WriteIn = op(hdr, opcode)?;
            Args::Write {
                arg,
                data: p.bytes(arg.size as usize)?,
            }
        }
        o::STATFS => Args::Statfs,
        o::RELEASE => Args::Release(op(hdr, opcode)?),
        o::FSYNC => Args::Fsync(op(hdr, opcode)?),
        o::SETXATTR => {
            let arg: SetxattrIn = op(hdr, opcode)?;
            Args::Setxattr {
                arg,
                name: p.name()?,
                value: p.bytes(arg.size as usize)?,
            }
        }
        o::GETXATTR => Args::Getxattr {
            arg: op(hdr, opcode)?,
            name: p.name()?,
        },
        o::LISTXATTR => Args::Listxattr(op(hdr, opcode)?),
        o::REMOVEXATTR => Args::Removexattr { name: p.name()? },
        o::FLUSH => Args::Flush(op(hdr, opcode)?),
        o::OPENDIR => Args::Opendir(op(hdr, opcode)?),
        o::READDIR => Args::Readdir(op(hdr, opcode)?),
        o::RELEASEDIR => Args::Releasedir(op(hdr, opcode)?),
        o::FSYNCDIR => Args::Fsyncdir(op(hdr, opcode)?),
        o::GETLK => Args::Getlk(op(hdr, opcode)?),
        o::SETLK | o::SETLKW => Args::Setlk {
            arg: op(hdr, opcode)?,
            sleep: opcode == o::SETLKW,
        },
        o::ACCESS => Args::Access(op(hdr, opcode)?),
        o::CREATE => Args::Create {
            arg: op(hdr, opcode)?,
            name: p.name()?,
        },
        o::BMAP => Args::Bmap(op(hdr, opcode)?),
        o::IOCTL => {
            let arg: IoctlIn = op(hdr, opcode)?;
            Args::Ioctl {
                arg,
                data: p.bytes(arg.in_size as usize)?,
            }
        }
        o::POLL => Args::Poll(op(hdr, opcode)?),
        o::FALLOCATE => Args::Fallocate(op(hdr, opcode)?),
        o::READDIRPLUS => Args::Readdirplus(op(hdr, opcode)?),
        o::LSEEK => Args::Lseek(op(hdr, opcode)?),
        o::COPY_FILE_RANGE => Args::CopyFileRange(op(hdr, opcode)?),
        o::INIT
        | o::DESTROY
        | o::INTERRUPT
        | o::NOTIFY_REPLY
        | o::FORGET
        | o::BATCH_FORGET
        | o::CUSE_INIT => Args::NotServed(opcode),
        _ => return Err(DecodeError::Unknown { opcode }),
    };
    Ok(Decoded { header, args })
}

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// Writes `v` at the start of `out`; returns its size. `out` is the payload buffer, which is
/// always larger than any reply struct (at least 8 KiB).
#[inline]
pub fn put<T: IntoBytes + Immutable>(out: &mut [u8], v: &T) -> usize {
    let b = v.as_bytes();
    out[..b.len()].copy_from_slice(b);
    b.len()
}

/// Writes the reply header into an entry: `fuse_out_header { error: -errno or 0, unique }` into
/// `in_out` and the payload length into `ring_ent_in_out.payload_sz`. `reply` is the payload's
/// length, or the errno (positive) of a failed request.
pub fn reply(hdr: &mut UringReqHeader, unique: u64, reply: Result<usize, i32>) {
    let (error, payload_sz) = match reply {
        Ok(n) => (0, n as u32),
        Err(errno) => (-errno, 0),
    };
    let out = OutHeader {
        len: (size_of::<OutHeader>() as u32).saturating_add(payload_sz),
        error,
        unique,
    };
    hdr.in_out[..size_of::<OutHeader>()].copy_from_slice(out.as_bytes());
    hdr.ring_ent_in_out.payload_sz = payload_sz;
}

/// A new, zeroed header buffer.
pub fn new_header() -> Box<UringReqHeader> {
    UringReqHeader::new_box_zeroed().expect("288 bytes can be allocated")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Little-endian bytes, field by field, as the kernel lays them out.
    #[derive(Default)]
    pub(crate) struct Le(pub(crate) Vec<u8>);

    impl Le {
        pub(crate) fn u16(mut self, v: u16) -> Le {
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        pub(crate) fn u32(mut self, v: u32) -> Le {
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        pub(crate) fn u64(mut self, v: u64) -> Le {
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        pub(crate) fn raw(mut self, b: &[u8]) -> Le {
            self.0.extend_from_slice(b);
            self
        }
    }

    /// An entry as the kernel fills it for request `opcode` (unique 77, node 5, uid 1000,
    /// gid 1001, pid 4242): the in header by hand, `op_in`, and `payload` with its length.
    /// `op_in` starts full of 0xee, the stale bytes of an earlier request.
    fn entry(opcode: u32, op_in: &[u8], payload: &[u8]) -> (Box<UringReqHeader>, Vec<u8>) {
        let mut h = new_header();
        h.op_in.fill(0xee);
        let ih = Le::default()
            .u32(40 + op_in.len() as u32 + payload.len() as u32)
            .u32(opcode)
            .u64(77)
            .u64(5)
            .u32(1000)
            .u32(1001)
            .u32(4242)
            .u16(0)
            .u16(0);
        h.in_out[..40].copy_from_slice(&ih.0);
        h.op_in[..op_in.len()].copy_from_slice(op_in);
        h.ring_ent_in_out.commit_id = 77;
        h.ring_ent_in_out.payload_sz = payload.len() as u32;
        // The payload buffer is larger than the request, with garbage after it.
        let mut buf = payload.to_vec();
        buf.extend_from_slice(&[0xaa; 64]);
        (h, buf)
    }

    fn args(opcode: u32, op_in: &[u8], payload: &[u8]) -> Args<'static> {
        let (h, buf) = entry(opcode, op_in, payload);
        let buf: &'static [u8] = Box::leak(buf.into_boxed_slice());
        let d = decode(&h, buf).unwrap();
        assert_eq!(
            d.header,
            InHeader {
                len: 40 + op_in.len() as u32 + payload.len() as u32,
                opcode,
                unique: 77,
                nodeid: 5,
                uid: 1000,
                gid: 1001,
                pid: 4242,
                total_extlen: 0,
                padding: 0,
            }
        );
        d.args
    }

    fn err(opcode: u32, op_in: &[u8], payload: &[u8]) -> DecodeError {
        let (h, buf) = entry(opcode, op_in, payload);
        decode(&h, &buf).unwrap_err()
    }

    pub(crate) fn name(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    #[test]
    fn lookup_takes_its_name_from_the_payload_not_the_stale_op_in() {
        assert_eq!(
            args(opcode::LOOKUP, &[], b"hello\0"),
            Args::Lookup {
                name: name("hello")
            }
        );
        assert_eq!(
            err(opcode::LOOKUP, &[], b"hello"),
            DecodeError::Unterminated {
                opcode: opcode::LOOKUP
            }
        );
    }

    #[test]
    fn getattr() {
        let op = Le::default().u32(GETATTR_FH).u32(0).u64(0x1122);
        assert_eq!(
            args(opcode::GETATTR, &op.0, &[]),
            Args::Getattr(GetattrIn {
                getattr_flags: 1,
                dummy: 0,
                fh: 0x1122
            })
        );
    }

    #[test]
    fn setattr() {
        let op = Le::default()
            .u32(fattr::MODE | fattr::SIZE | fattr::FH | fattr::MTIME_NOW)
            .u32(0)
            .u64(9) // fh
            .u64(4096) // size
            .u64(0) // lock_owner
            .u64(-5i64 as u64) // atime
            .u64(2_000_000) // mtime
            .u64(0) // ctime
            .u32(7) // atimensec
            .u32(8)
            .u32(0)
            .u32(0o100600) // mode
            .u32(0)
            .u32(1000) // uid
            .u32(1001) // gid
            .u32(0);
        let Args::Setattr(s) = args(opcode::SETATTR, &op.0, &[]) else {
            panic!()
        };
        assert_eq!(s.valid, 1 | 8 | 64 | 256);
        assert_eq!((s.fh, s.size, s.atime, s.atimensec), (9, 4096, -5, 7));
        assert_eq!((s.mtime, s.mtimensec, s.mode), (2_000_000, 8, 0o100600));
        assert_eq!((s.uid, s.gid), (1000, 1001));
    }

    #[test]
    fn readlink_and_statfs_have_no_arguments() {
        assert_eq!(args(opcode::READLINK, &[], &[]), Args::Readlink);
        assert_eq!(args(opcode::STATFS, &[], &[]), Args::Statfs);
    }

    #[test]
    fn symlink_has_name_then_target() {
        assert_eq!(
            args(opcode::SYMLINK, &[], b"link\0../a/target\0"),
            Args::Symlink {
                name: name("link"),
                target: Path::new("../a/target")
            }
        );
        assert!(matches!(
            err(opcode::SYMLINK, &[], b"link\0no-nul"),
            DecodeError::Unterminated { .. }
        ));
    }

    #[test]
    fn mknod() {
        let op = Le::default().u32(0o010644).u32(0x0801).u32(0o022).u32(0);
        assert_eq!(
            args(opcode::MKNOD, &op.0, b"fifo\0"),
            Args::Mknod {
                arg: MknodIn {
                    mode: 0o010644,
                    rdev: 0x0801,
                    umask: 0o022,
                    padding: 0
                },
                name: name("fifo")
            }
        );
    }

    #[test]
    fn mkdir() {
        let op = Le::default().u32(0o40755).u32(0o027);
        assert_eq!(
            args(opcode::MKDIR, &op.0, b"d\0"),
            Args::Mkdir {
                arg: MkdirIn {
                    mode: 0o40755,
                    umask: 0o027
                },
                name: name("d")
            }
        );
    }

    #[test]
    fn unlink_and_rmdir() {
        assert_eq!(
            args(opcode::UNLINK, &[], b"old\0"),
            Args::Unlink { name: name("old") }
        );
        assert_eq!(
            args(opcode::RMDIR, &[], b"dir\0"),
            Args::Rmdir { name: name("dir") }
        );
    }

    #[test]
    fn rename_and_rename2() {
        assert_eq!(
            args(opcode::RENAME, &Le::default().u64(12).0, b"a\0b\0"),
            Args::Rename {
                newdir: 12,
                flags: 0,
                name: name("a"),
                newname: name("b")
            }
        );
        let op = Le::default().u64(13).u32(libc::RENAME_NOREPLACE).u32(0);
        assert_eq!(
            args(opcode::RENAME2, &op.0, b"x\0yy\0"),
            Args::Rename {
                newdir: 13,
                flags: libc::RENAME_NOREPLACE,
                name: name("x"),
                newname: name("yy")
            }
        );
        assert!(matches!(
            err(opcode::RENAME2, &op.0, b"x\0"),
            DecodeError::Unterminated { .. }
        ));
    }

    #[test]
    fn link() {
        assert_eq!(
            args(opcode::LINK, &Le::default().u64(42).0, b"hard\0"),
            Args::Link {
                arg: LinkIn { oldnodeid: 42 },
                name: name("hard")
            }
        );
    }

    #[test]
    fn open_and_opendir() {
        let op = Le::default()
            .u32((libc::O_RDWR | libc::O_DIRECT) as u32)
            .u32(0);
        let want = OpenIn {
            flags: (libc::O_RDWR | libc::O_DIRECT) as u32,
            open_flags: 0,
        };
        assert_eq!(args(opcode::OPEN, &op.0, &[]), Args::Open(want));
        assert_eq!(args(opcode::OPENDIR, &op.0, &[]), Args::Opendir(want));
    }

    fn read_in() -> (Le, ReadIn) {
        let op = Le::default()
            .u64(3)
            .u64(4096)
            .u32(8192)
            .u32(0)
            .u64(0)
            .u32(libc::O_RDONLY as u32)
            .u32(0);
        let want = ReadIn {
            fh: 3,
            offset: 4096,
            size: 8192,
            read_flags: 0,
            lock_owner: 0,
            flags: 0,
            padding: 0,
        };
        (op, want)
    }

    #[test]
    fn read_readdir_and_readdirplus() {
        let (op, want) = read_in();
        assert_eq!(args(opcode::READ, &op.0, &[]), Args::Read(want));
        assert_eq!(args(opcode::READDIR, &op.0, &[]), Args::Readdir(want));
        assert_eq!(
            args(opcode::READDIRPLUS, &op.0, &[]),
            Args::Readdirplus(want)
        );
    }

    #[test]
    fn write_data_comes_from_the_payload() {
        let op = Le::default()
            .u64(7)
            .u64(100)
            .u32(5)
            .u32(WRITE_KILL_SUIDGID)
            .u64(0)
            .u32(libc::O_WRONLY as u32)
            .u32(0);
        let Args::Write { arg, data } = args(opcode::WRITE, &op.0, b"abcde") else {
            panic!()
        };
        assert_eq!((arg.fh, arg.offset, arg.write_flags), (7, 100, 4));
        assert_eq!(data, b"abcde");
        // A size beyond what the kernel put in the payload is refused.
        assert_eq!(
            err(opcode::WRITE, &op.0, b"abc"),
            DecodeError::Short {
                opcode: opcode::WRITE
            }
        );
    }

    #[test]
    fn release_and_releasedir() {
        let op = Le::default().u64(9).u32(2).u32(1).u64(0);
        let want = ReleaseIn {
            fh: 9,
            flags: 2,
            release_flags: 1,
            lock_owner: 0,
        };
        assert_eq!(args(opcode::RELEASE, &op.0, &[]), Args::Release(want));
        assert_eq!(args(opcode::RELEASEDIR, &op.0, &[]), Args::Releasedir(want));
    }

    #[test]
    fn fsync_and_fsyncdir() {
        let op = Le::default().u64(4).u32(FSYNC_FDATASYNC).u32(0);
        let want = FsyncIn {
            fh: 4,
            fsync_flags: 1,
            padding: 0,
        };
        assert_eq!(args(opcode::FSYNC, &op.0, &[]), Args::Fsync(want));
        assert_eq!(args(opcode::FSYNCDIR, &op.0, &[]), Args::Fsyncdir(want));
    }

    #[test]
    fn setxattr_has_name_then_value() {
        let op = Le::default().u32(3).u32(libc::XATTR_CREATE as u32);
        assert_eq!(
            args(opcode::SETXATTR, &op.0, b"user.k\0v\0w"),
            Args::Setxattr {
                arg: SetxattrIn { size: 3, flags: 1 },
                name: name("user.k"),
                value: b"v\0w"
            }
        );
        assert!(matches!(
            err(opcode::SETXATTR, &op.0, b"user.k\0v"),
            DecodeError::Short { .. }
        ));
    }

    #[test]
    fn getxattr_listxattr_removexattr() {
        let op = Le::default().u32(0).u32(0);
        assert_eq!(
            args(opcode::GETXATTR, &op.0, b"user.k\0"),
            Args::Getxattr {
                arg: GetxattrIn {
                    size: 0,
                    padding: 0
                },
                name: name("user.k")
            }
        );
        let op = Le::default().u32(256).u32(0);
        assert_eq!(
            args(opcode::LISTXATTR, &op.0, &[]),
            Args::Listxattr(GetxattrIn {
                size: 256,
                padding: 0
            })
        );
        assert_eq!(
            args(opcode::REMOVEXATTR, &[], b"user.k\0"),
            Args::Removexattr {
                name: name("user.k")
            }
        );
    }

    #[test]
    fn flush() {
        let op = Le::default().u64(6).u32(0).u32(0).u64(0xabc);
        assert_eq!(
            args(opcode::FLUSH, &op.0, &[]),
            Args::Flush(FlushIn {
                fh: 6,
                unused: 0,
                padding: 0,
                lock_owner: 0xabc
            })
        );
    }

    fn lk_in() -> (Le, LkIn) {
        let op = Le::default()
            .u64(8)
            .u64(0x55)
            .u64(10)
            .u64(u64::MAX)
            .u32(libc::F_WRLCK as u32)
            .u32(321)
            .u32(0)
            .u32(0);
        let want = LkIn {
            fh: 8,
            owner: 0x55,
            lk: FileLock {
                start: 10,
                end: u64::MAX,
                typ: libc::F_WRLCK as u32,
                pid: 321,
            },
            lk_flags: 0,
            padding: 0,
        };
        (op, want)
    }

    #[test]
    fn getlk_setlk_setlkw() {
        let (op, want) = lk_in();
        assert_eq!(args(opcode::GETLK, &op.0, &[]), Args::Getlk(want));
        assert_eq!(
            args(opcode::SETLK, &op.0, &[]),
            Args::Setlk {
                arg: want,
                sleep: false
            }
        );
        assert_eq!(
            args(opcode::SETLKW, &op.0, &[]),
            Args::Setlk {
                arg: want,
                sleep: true
            }
        );
    }

    #[test]
    fn access() {
        let op = Le::default().u32(libc::R_OK as u32).u32(0);
        assert_eq!(
            args(opcode::ACCESS, &op.0, &[]),
            Args::Access(AccessIn {
                mask: 4,
                padding: 0
            })
        );
    }

    #[test]
    fn create_has_its_struct_in_op_in_and_its_name_in_the_payload() {
        let op = Le::default()
            .u32((libc::O_CREAT | libc::O_RDWR) as u32)
            .u32(0o100644)
            .u32(0o022)
            .u32(0);
        assert_eq!(
            args(opcode::CREATE, &op.0, b"new\0"),
            Args::Create {
                arg: CreateIn {
                    flags: 0o102,
                    mode: 0o100644,
                    umask: 0o022,
                    open_flags: 0
                },
                name: name("new")
            }
        );
    }

    #[test]
    fn bmap() {
        let op = Le::default().u64(99).u32(4096).u32(0);
        assert_eq!(
            args(opcode::BMAP, &op.0, &[]),
            Args::Bmap(BmapIn {
                block: 99,
                blocksize: 4096,
                padding: 0
            })
        );
    }

    #[test]
    fn ioctl_input_data_comes_from_the_payload() {
        let op = Le::default()
            .u64(2)
            .u32(0)
            .u32(0x8008_6601)
            .u64(0)
            .u32(3)
            .u32(8);
        let Args::Ioctl { arg, data } = args(opcode::IOCTL, &op.0, b"xyz") else {
            panic!()
        };
        assert_eq!(
            (arg.fh, arg.cmd, arg.in_size, arg.out_size),
            (2, 0x8008_6601, 3, 8)
        );
        assert_eq!(data, b"xyz");
        assert!(matches!(
            err(opcode::IOCTL, &op.0, b"xy"),
            DecodeError::Short { .. }
        ));
    }

    #[test]
    fn poll() {
        let op = Le::default().u64(1).u64(2).u32(1).u32(libc::POLLIN as u32);
        assert_eq!(
            args(opcode::POLL, &op.0, &[]),
            Args::Poll(PollIn {
                fh: 1,
                kh: 2,
                flags: 1,
                events: 1
            })
        );
    }

    #[test]
    fn fallocate() {
        let op = Le::default()
            .u64(5)
            .u64(4096)
            .u64(8192)
            .u32(libc::FALLOC_FL_KEEP_SIZE as u32)
            .u32(0);
        assert_eq!(
            args(opcode::FALLOCATE, &op.0, &[]),
            Args::Fallocate(FallocateIn {
                fh: 5,
                offset: 4096,
                length: 8192,
                mode: 1,
                padding: 0
            })
        );
    }

    #[test]
    fn lseek() {
        let op = Le::default()
            .u64(5)
            .u64(100)
            .u32(libc::SEEK_DATA as u32)
            .u32(0);
        assert_eq!(
            args(opcode::LSEEK, &op.0, &[]),
            Args::Lseek(LseekIn {
                fh: 5,
                offset: 100,
                whence: 3,
                padding: 0
            })
        );
    }

    #[test]
    fn copy_file_range() {
        let op = Le::default()
            .u64(1)
            .u64(10)
            .u64(6)
            .u64(2)
            .u64(20)
            .u64(4096)
            .u64(0);
        assert_eq!(
            args(opcode::COPY_FILE_RANGE, &op.0, &[]),
            Args::CopyFileRange(CopyFileRangeIn {
                fh_in: 1,
                off_in: 10,
                nodeid_out: 6,
                fh_out: 2,
                off_out: 20,
                len: 4096,
                flags: 0
            })
        );
    }

    #[test]
    fn opcodes_not_served_and_unknown_ones() {
        for op in [
            opcode::INIT,
            opcode::DESTROY,
            opcode::INTERRUPT,
            opcode::NOTIFY_REPLY,
            opcode::FORGET,
            opcode::BATCH_FORGET,
            opcode::CUSE_INIT,
        ] {
            assert_eq!(args(op, &[], &[]), Args::NotServed(op));
        }
        for op in [
            7,
            19,
            opcode::SETUPMAPPING,
            opcode::REMOVEMAPPING,
            opcode::SYNCFS,
            opcode::TMPFILE,
            opcode::STATX,
            53,
            9999,
        ] {
            assert_eq!(err(op, &[], &[]), DecodeError::Unknown { opcode: op });
        }
    }

    #[test]
    fn a_payload_size_beyond_the_buffer_is_refused() {
        let (mut h, buf) = entry(opcode::LOOKUP, &[], b"x\0");
        h.ring_ent_in_out.payload_sz = 100_000;
        assert!(matches!(
            decode(&h, &buf).unwrap_err(),
            DecodeError::PayloadSize { .. }
        ));
    }

    #[test]
    fn reply_header_bytes() {
        let mut h = new_header();
        reply(&mut h, 0xabcd, Ok(144));
        assert_eq!(
            &h.in_out[..16],
            &Le::default().u32(160).u32(0).u64(0xabcd).0[..]
        );
        assert_eq!(h.as_bytes()[256 + 16..256 + 20], 144u32.to_le_bytes());
        reply(&mut h, 0xabce, Err(libc::ENOENT));
        assert_eq!(
            &h.in_out[..16],
            &Le::default()
                .u32(16)
                .u32(-libc::ENOENT as u32)
                .u64(0xabce)
                .0[..]
        );
        assert_eq!(h.ring_ent_in_out.payload_sz, 0);
    }
}
