//! The operations a FUSE file system serves, as indices into the profile's operation table.

/// The table of operations: calls `$callback!` with every FUSE operation the file systems
/// serve, once, in [`Op`] order (the profile's order). Everything that lists the operations
/// comes from here: [`Op`] and [`Op::ALL`], the [`FileSystem`](crate::filesystem::FileSystem)
/// trait's methods (with these doc comments) and their `ENOSYS` defaults, the forwarding of
/// [`Hooked`](crate::layers::Hooked), the operations [`Control`](crate::layers::control::Control)
/// and the unit tests' fake pass through untouched (`filesystem::impl_rest!`), and the io_uring
/// transport's opcode map.
///
/// Each entry reads
///
/// ```text
/// /// doc comment (the trait method's)
/// Variant method(arg: Type, ...) -> Return, span[...], opcodes[OPCODE ...];
/// ```
///
/// * `Variant` is the [`Op`]; `method` the trait method, which takes `&self`, `req: &Request`
///   and then the arguments listed (`Self::File`, `Self::Dir`: the file system's handles).
/// * `Return` is `io::Result<T>`, or `()` for an operation the kernel expects no reply to
///   (`forget`). An operation not served answers `ENOSYS` (or nothing, for `()`).
/// * `span[...]` says where the request acts, for layers that report or target it
///   (`layers::Span`): `[]` nowhere in particular, `[name(expr)]` a name in the request's
///   directory, `[range(offset, len)]` bytes of the file, `[truncate(expr)]` a new size if any.
/// * `opcodes[...]` are the kernel's opcodes (`fuse_opcode`, without `FUSE_`) that ask for it.
///
/// The callback gets `($)` (a dollar sign, for callbacks that define macros of their own),
/// `{ ... }` (whatever followed its name here) and the entries. For example, the methods'
/// names:
///
/// ```
/// macro_rules! names {
///     (($d:tt) {} $($(#[$m:meta])* $op:ident $name:ident ($($arg:ident: $ty:ty),*) -> $ret:ty,
///       span[$($span:tt)*], opcodes[$($code:ident)*];)*) => {
///         const NAMES: &[&str] = &[$(stringify!($name)),*];
///     };
/// }
/// fsprof_fuse::for_each_op!(names);
/// assert_eq!(NAMES[0], "lookup");
/// assert_eq!(NAMES.len(), fsprof_fuse::protocol::ops::Op::ALL.len());
/// ```
///
/// Adding an operation: one entry here (and its name in profile-store's `STANDARD` list, or in
/// `EXTRA` below, at the same place); its decoding in each transport (`transport::classic`'s
/// fuser method, `transport::uring::abi`'s `Args` and the dispatch's reply); its implementation
/// in the file systems that serve it (passthrough, RAIF). Layers forward it without a change,
/// but for an operation on an open file, which [`Control`](crate::layers::control::Control)
/// must answer itself for its control files (the compiler says so: its handle is not the
/// layer's below).
#[macro_export]
macro_rules! for_each_op {
    ($callback:ident $($extra:tt)*) => {
        $callback! { ($) { $($extra)* }
            /// The object `name` in directory `parent`; counts one lookup of it.
            Lookup lookup(parent: Ino, name: &OsStr) -> io::Result<Entry>,
                span[name(name)], opcodes[LOOKUP];
            /// The kernel dropped `nlookup` lookups of `ino` (no reply).
            Forget forget(ino: Ino, nlookup: u64) -> (), span[], opcodes[FORGET BATCH_FORGET];
            /// Attributes of `ino` (through the open handle `fh` where the kernel passes one).
            Getattr getattr(ino: Ino, fh: Option<&Self::File>) -> io::Result<AttrOut>,
                span[], opcodes[GETATTR];
            /// Changes the attributes of `ino` as `set` says; returns the new ones.
            Setattr setattr(ino: Ino, set: &SetAttr, fh: Option<&Self::File>)
                -> io::Result<AttrOut>, span[truncate(set.size)], opcodes[SETATTR];
            /// The target of symlink `ino`, into `buf` (`PATH_MAX` bytes); returns its length.
            Readlink readlink(ino: Ino, buf: &mut [u8]) -> io::Result<usize>,
                span[], opcodes[READLINK];
            /// Creates the special file `name` (mode with type bits, device `rdev`) with the
            /// caller's umask ([`Request::umask`]).
            Mknod mknod(parent: Ino, name: &OsStr, mode: u32, rdev: u32) -> io::Result<Entry>,
                span[name(name)], opcodes[MKNOD];
            /// Creates directory `name` with the caller's umask.
            Mkdir mkdir(parent: Ino, name: &OsStr, mode: u32) -> io::Result<Entry>,
                span[name(name)], opcodes[MKDIR];
            /// Removes the non-directory `name`.
            Unlink unlink(parent: Ino, name: &OsStr) -> io::Result<()>,
                span[name(name)], opcodes[UNLINK];
            /// Removes the empty directory `name`.
            Rmdir rmdir(parent: Ino, name: &OsStr) -> io::Result<()>,
                span[name(name)], opcodes[RMDIR];
            /// Creates symlink `name` pointing to `target`.
            Symlink symlink(parent: Ino, name: &OsStr, target: &Path) -> io::Result<Entry>,
                span[name(name)], opcodes[SYMLINK];
            /// Renames `parent/name` to `newparent/newname` (`RENAME_*` flags).
            Rename rename(parent: Ino, name: &OsStr, newparent: Ino, newname: &OsStr, flags: u32)
                -> io::Result<()>, span[name(name)], opcodes[RENAME RENAME2];
            /// Makes `newparent/newname` a hard link to `ino`.
            Link link(ino: Ino, newparent: Ino, newname: &OsStr) -> io::Result<Entry>,
                span[name(newname)], opcodes[LINK];
            /// Opens `ino` with `open(2)` flags.
            Open open(ino: Ino, flags: i32) -> io::Result<Opened<Self::File>>,
                span[], opcodes[OPEN];
            /// Reads from `offset` into `buf` (the size asked for); returns the bytes read.
            Read read(ino: Ino, fh: &Self::File, offset: u64, buf: &mut [u8])
                -> io::Result<usize>, span[range(offset, buf.len())], opcodes[READ];
            /// Writes `data` at `offset`; returns the bytes written.
            Write write(ino: Ino, fh: &Self::File, offset: u64, data: &[u8], flags: WriteFlags)
                -> io::Result<u32>, span[range(offset, data.len())], opcodes[WRITE];
            /// A `close(2)` of one descriptor of the open file.
            Flush flush(ino: Ino, fh: &Self::File) -> io::Result<()>, span[], opcodes[FLUSH];
            /// The last descriptor of the open file is gone: the handle comes back.
            Release release(ino: Ino, fh: Self::File) -> io::Result<()>,
                span[], opcodes[RELEASE];
            /// Flushes the file's data (and metadata unless `datasync`) to stable storage.
            Fsync fsync(ino: Ino, fh: &Self::File, datasync: bool) -> io::Result<()>,
                span[], opcodes[FSYNC];
            /// Opens directory `ino`.
            Opendir opendir(ino: Ino, flags: i32) -> io::Result<Opened<Self::Dir>>,
                span[], opcodes[OPENDIR];
            /// Lists the directory from `offset` into `out` until it is full or the listing
            /// ends.
            Readdir readdir(ino: Ino, dh: &Self::Dir, offset: u64, out: &mut dyn DirSink)
                -> io::Result<()>, span[], opcodes[READDIR];
            /// Lists the directory with each entry's attributes (each added entry counts a
            /// lookup).
            Readdirplus readdirplus(ino: Ino, dh: &Self::Dir, offset: u64,
                out: &mut dyn DirPlusSink) -> io::Result<()>, span[], opcodes[READDIRPLUS];
            /// The directory is closed: the handle comes back.
            Releasedir releasedir(ino: Ino, dh: Self::Dir) -> io::Result<()>,
                span[], opcodes[RELEASEDIR];
            /// Flushes the directory to stable storage.
            Fsyncdir fsyncdir(ino: Ino, dh: &Self::Dir, datasync: bool) -> io::Result<()>,
                span[], opcodes[FSYNCDIR];
            /// Statistics of the file system holding `ino`.
            Statfs statfs(ino: Ino) -> io::Result<Statfs>, span[], opcodes[STATFS];
            /// Sets extended attribute `name` (`XATTR_CREATE`/`XATTR_REPLACE` flags).
            Setxattr setxattr(ino: Ino, name: &OsStr, value: &[u8], flags: i32, position: u32)
                -> io::Result<()>, span[], opcodes[SETXATTR];
            /// The value of extended attribute `name`, into `buf`: with an empty `buf` the
            /// value's length only; `ERANGE` if it does not fit. Returns the length.
            Getxattr getxattr(ino: Ino, name: &OsStr, buf: &mut [u8]) -> io::Result<usize>,
                span[], opcodes[GETXATTR];
            /// The NUL-separated names of the extended attributes the caller may see, into
            /// `buf` (as `getxattr`).
            Listxattr listxattr(ino: Ino, buf: &mut [u8]) -> io::Result<usize>,
                span[], opcodes[LISTXATTR];
            /// Removes extended attribute `name`.
            Removexattr removexattr(ino: Ino, name: &OsStr) -> io::Result<()>,
                span[], opcodes[REMOVEXATTR];
            /// Checks access (never sent with `default_permissions`, which fsprof always uses).
            Access access(ino: Ino, mask: i32) -> io::Result<()>, span[], opcodes[ACCESS];
            /// Creates and opens the regular file `name` (`open(2)` flags) with the caller's
            /// umask.
            Create create(parent: Ino, name: &OsStr, mode: u32, flags: i32)
                -> io::Result<(Entry, Opened<Self::File>)>, span[name(name)], opcodes[CREATE];
            /// Tests for a lock (only sent when locks are forwarded, which fsprof does not ask
            /// for).
            Getlk getlk(ino: Ino, fh: &Self::File, owner: u64, lock: &Lock) -> io::Result<Lock>,
                span[], opcodes[GETLK];
            /// Takes or releases a lock (likewise never sent to fsprof's file systems).
            Setlk setlk(ino: Ino, fh: &Self::File, owner: u64, lock: &Lock, sleep: bool)
                -> io::Result<()>, span[], opcodes[SETLK SETLKW];
            /// `fallocate(2)` on the open file.
            Fallocate fallocate(ino: Ino, fh: &Self::File, offset: u64, length: u64, mode: i32)
                -> io::Result<()>, span[range(offset, length)], opcodes[FALLOCATE];
            /// `lseek(2)` for `SEEK_DATA`/`SEEK_HOLE` (the kernel keeps file positions itself).
            Lseek lseek(ino: Ino, fh: &Self::File, offset: i64, whence: i32) -> io::Result<i64>,
                span[], opcodes[LSEEK];
            /// Copies `len` bytes between two open files; returns the bytes copied.
            #[allow(clippy::too_many_arguments)]
            CopyFileRange copy_file_range(ino_in: Ino, fh_in: &Self::File, offset_in: u64,
                ino_out: Ino, fh_out: &Self::File, offset_out: u64, len: u64, flags: u32)
                -> io::Result<u32>, span[range(offset_in, len)], opcodes[COPY_FILE_RANGE];
            /// Maps block `idx` of the file to a device block (block-device-backed file
            /// systems).
            Bmap bmap(ino: Ino, blocksize: u32, idx: u64) -> io::Result<u64>,
                span[], opcodes[BMAP];
            /// An `ioctl(2)` on the open file.
            #[allow(clippy::too_many_arguments)]
            Ioctl ioctl(ino: Ino, fh: &Self::File, flags: u32, cmd: u32, in_data: &[u8],
                out_size: u32) -> io::Result<IoctlOut>, span[], opcodes[IOCTL];
            /// Readiness of the open file for `events` (`POLL*` bits); returns the ready ones.
            Poll poll(ino: Ino, fh: &Self::File, events: u32, flags: u32) -> io::Result<u32>,
                span[], opcodes[POLL];
        }
    };
}

/// Defines [`Op`] from the table.
macro_rules! define_op {
    (($d:tt) {} $($(#[$m:meta])* $op:ident $name:ident ($($arg:ident: $ty:ty),*) -> $ret:ty,
      span[$($span:tt)*], opcodes[$($code:ident)*];)*) => {
        /// A FUSE operation, named as in `docs/format.md#fuse-operations`; `op as usize` is its
        /// index in [`NAMES`]. Declared by [`for_each_op!`](crate::for_each_op).
        #[allow(missing_docs)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(usize)]
        pub enum Op {
            $($op,)*
        }

        impl Op {
            /// Every operation, in order.
            pub const ALL: [Op; [$(Op::$op),*].len()] = [$(Op::$op),*];

            /// The trait method that serves it (`lookup`, `copy_file_range`).
            pub fn method(self) -> &'static str {
                match self {
                    $(Op::$op => stringify!($name),)*
                }
            }
        }
    };
}

for_each_op!(define_op);

/// Operations served beyond the standard list ([`profile_store::ops::STANDARD`]), in [`Op`]
/// order after the standard ones.
const EXTRA: [&str; 3] = ["OP_BMAP", "OP_IOCTL", "OP_POLL"];

const fn concat<const N: usize>(a: &[&'static str], b: &[&'static str]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < a.len() {
        out[i] = a[i];
        i += 1;
    }
    let mut j = 0;
    while j < b.len() {
        out[i + j] = b[j];
        j += 1;
    }
    out
}

/// Profile names of the operations, in [`Op`] order: the standard list (from profile-store),
/// then the rest.
pub const NAMES: [&str; profile_store::ops::STANDARD.len() + EXTRA.len()] =
    concat(profile_store::ops::STANDARD, &EXTRA);

impl Op {
    /// The profile name (`OP_...`).
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }

    /// Index in the recorder's operation table.
    pub fn id(self) -> usize {
        self as usize
    }
}

/// A system call a file system makes on a lower directory or branch, named as inner calls are
/// named (`docs/format.md#inner-calls`): the system call in lower case (`pread`, `statx`,
/// `getdents64`). Calls through `/proc/self/fd` paths (`chmod`, `getxattr`...) are named after the
/// call made.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Sys {
    Statx,
    Openat,
    OpenByHandleAt,
    NameToHandleAt,
    Close,
    Dup,
    Pread,
    Pwrite,
    Fsync,
    Fdatasync,
    Fallocate,
    Lseek,
    CopyFileRange,
    Getdents64,
    Fstatvfs,
    Readlinkat,
    Fchmod,
    Chmod,
    Fchownat,
    Ftruncate,
    Truncate,
    Utimensat,
    Mkdirat,
    Mknodat,
    Symlinkat,
    Unlinkat,
    Renameat2,
    Linkat,
    Fgetxattr,
    Fsetxattr,
    Flistxattr,
    Fremovexattr,
    Getxattr,
    Setxattr,
    Listxattr,
    Removexattr,
    Ioctl,
    Lgetxattr,
    Lsetxattr,
}

impl Sys {
    /// Every call, in declaration order.
    pub const ALL: [Sys; 39] = [
        Sys::Statx,
        Sys::Openat,
        Sys::OpenByHandleAt,
        Sys::NameToHandleAt,
        Sys::Close,
        Sys::Dup,
        Sys::Pread,
        Sys::Pwrite,
        Sys::Fsync,
        Sys::Fdatasync,
        Sys::Fallocate,
        Sys::Lseek,
        Sys::CopyFileRange,
        Sys::Getdents64,
        Sys::Fstatvfs,
        Sys::Readlinkat,
        Sys::Fchmod,
        Sys::Chmod,
        Sys::Fchownat,
        Sys::Ftruncate,
        Sys::Truncate,
        Sys::Utimensat,
        Sys::Mkdirat,
        Sys::Mknodat,
        Sys::Symlinkat,
        Sys::Unlinkat,
        Sys::Renameat2,
        Sys::Linkat,
        Sys::Fgetxattr,
        Sys::Fsetxattr,
        Sys::Flistxattr,
        Sys::Fremovexattr,
        Sys::Getxattr,
        Sys::Setxattr,
        Sys::Listxattr,
        Sys::Removexattr,
        Sys::Ioctl,
        Sys::Lgetxattr,
        Sys::Lsetxattr,
    ];

    /// The name (`docs/format.md#inner-calls`): the system call in lower case.
    pub fn name(self) -> &'static str {
        match self {
            Sys::Statx => "statx",
            Sys::Openat => "openat",
            Sys::OpenByHandleAt => "open_by_handle_at",
            Sys::NameToHandleAt => "name_to_handle_at",
            Sys::Close => "close",
            Sys::Dup => "dup",
            Sys::Pread => "pread",
            Sys::Pwrite => "pwrite",
            Sys::Fsync => "fsync",
            Sys::Fdatasync => "fdatasync",
            Sys::Fallocate => "fallocate",
            Sys::Lseek => "lseek",
            Sys::CopyFileRange => "copy_file_range",
            Sys::Getdents64 => "getdents64",
            Sys::Fstatvfs => "fstatvfs",
            Sys::Readlinkat => "readlinkat",
            Sys::Fchmod => "fchmod",
            Sys::Chmod => "chmod",
            Sys::Fchownat => "fchownat",
            Sys::Ftruncate => "ftruncate",
            Sys::Truncate => "truncate",
            Sys::Utimensat => "utimensat",
            Sys::Mkdirat => "mkdirat",
            Sys::Mknodat => "mknodat",
            Sys::Symlinkat => "symlinkat",
            Sys::Unlinkat => "unlinkat",
            Sys::Renameat2 => "renameat2",
            Sys::Linkat => "linkat",
            Sys::Fgetxattr => "fgetxattr",
            Sys::Fsetxattr => "fsetxattr",
            Sys::Flistxattr => "flistxattr",
            Sys::Fremovexattr => "fremovexattr",
            Sys::Getxattr => "getxattr",
            Sys::Setxattr => "setxattr",
            Sys::Listxattr => "listxattr",
            Sys::Removexattr => "removexattr",
            Sys::Ioctl => "ioctl",
            Sys::Lgetxattr => "lgetxattr",
            Sys::Lsetxattr => "lsetxattr",
        }
    }

    /// The call of a name, as [`Sys::name`] gives it.
    pub fn from_name(name: &str) -> Option<Sys> {
        Sys::ALL.into_iter().find(|s| s.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_spec_order() {
        assert_eq!(
            &NAMES[..profile_store::ops::STANDARD.len()],
            profile_store::ops::STANDARD
        );
        assert_eq!(Op::CopyFileRange.name(), "OP_COPY_FILE_RANGE");
        assert_eq!(Op::Poll.id(), NAMES.len() - 1);
    }

    #[test]
    fn the_table_gives_every_operation_its_profile_name() {
        assert_eq!(Op::ALL.len(), NAMES.len());
        for (i, op) in Op::ALL.into_iter().enumerate() {
            assert_eq!(op.id(), i);
            assert_eq!(op.name(), format!("OP_{}", op.method().to_uppercase()));
        }
    }

    #[test]
    fn inner_call_names_are_distinct_and_round_trip() {
        for (i, s) in Sys::ALL.iter().enumerate() {
            assert_eq!(*s as usize, i);
            assert_eq!(Sys::from_name(s.name()), Some(*s));
            assert!(
                s.name()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            );
        }
        assert_eq!(Sys::from_name("nope"), None);
    }
}
