//! The system calls timed, by number (x86_64), with the `SYS_` name each is counted under and
//! how it names its file: the table the BPF program reads (`sys_tab`, one `u32` a syscall
//! number; the bits are defined in `bpf/syscalls.bpf.c`).
//!
//! Names follow the user layer's (`docs/format.md#user-level-calls`): `SYS_` and the call in
//! upper case, without a `64` suffix, so `SYS_PREAD` for `pread64`. Where the kernel has a newer
//! form of a call that the C library now makes in its place, the newer form counts under the
//! older name: `newfstatat` is `SYS_FSTATAT`, `faccessat2` is `SYS_FACCESSAT`, `fchmodat2` is
//! `SYS_FCHMODAT`. The C library's own wrappers still differ from the calls they make
//! (glibc's `stat`, `lstat` and `fstat` make `newfstatat`; `open` makes `openat`): see
//! [`c_library_call`] for how `fsprof compare` lines the two layers up.

/// How a call names the file it is about (`enum kind` in the BPF program).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Kind {
    /// A descriptor in the first argument.
    Fd = 1,
    /// Descriptors in the first and third arguments (`copy_file_range`, `splice`).
    FdFd2 = 2,
    /// Descriptors in the first and second arguments (`sendfile`).
    FdFd1 = 3,
    /// A path in the first argument.
    Path = 4,
    /// Paths in the first and second arguments (`rename`, `link`).
    PathPath1 = 5,
    /// A path in the second argument (`symlink`'s new name).
    Path1 = 6,
    /// A directory descriptor and a path, first and second arguments (`openat`...).
    At = 7,
    /// Two of them, arguments 1–2 and 3–4 (`renameat`, `linkat`).
    AtAt23 = 8,
    /// A directory descriptor and a path in the second and third arguments (`symlinkat`).
    At12 = 9,
}

/// Returns a new descriptor.
pub const RET_FD: u32 = 1 << 16;
/// Fills a `struct stat` (argument in bits 12–14).
pub const STAT: u32 = 1 << 17;
/// Fills a `struct statx` (argument in bits 12–14).
pub const STATX: u32 = 1 << 18;
/// The third argument is a byte count.
pub const SIZE2: u32 = 1 << 19;
/// The fourth argument is a file offset.
pub const OFF3: u32 = 1 << 20;
/// The descriptor is closed by the time the call returns.
pub const CLOSE: u32 = 1 << 21;

const fn buf(arg: u32) -> u32 {
    arg << 12
}

/// One timed system call.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    /// The kernel's name.
    pub syscall: &'static str,
    /// The x86_64 number.
    pub nr: u32,
    /// The operation it counts under.
    pub op: &'static str,
    /// How it names its file.
    pub kind: Kind,
    /// What else the program reads of it (the bits above).
    pub flags: u32,
}

const fn c(syscall: &'static str, nr: u32, op: &'static str, kind: Kind, flags: u32) -> Call {
    Call {
        syscall,
        nr,
        op,
        kind,
        flags,
    }
}

use Kind::*;

/// Every timed call, by number.
pub const CALLS: &[Call] = &[
    c("read", 0, "SYS_READ", Fd, SIZE2),
    c("write", 1, "SYS_WRITE", Fd, SIZE2),
    c("open", 2, "SYS_OPEN", Path, RET_FD),
    c("close", 3, "SYS_CLOSE", Fd, CLOSE),
    c("stat", 4, "SYS_STAT", Path, STAT | buf(1)),
    c("fstat", 5, "SYS_FSTAT", Fd, STAT | buf(1)),
    c("lstat", 6, "SYS_LSTAT", Path, STAT | buf(1)),
    c("lseek", 8, "SYS_LSEEK", Fd, 0),
    c("ioctl", 16, "SYS_IOCTL", Fd, 0),
    c("pread64", 17, "SYS_PREAD", Fd, SIZE2 | OFF3),
    c("pwrite64", 18, "SYS_PWRITE", Fd, SIZE2 | OFF3),
    c("readv", 19, "SYS_READV", Fd, 0),
    c("writev", 20, "SYS_WRITEV", Fd, 0),
    c("access", 21, "SYS_ACCESS", Path, 0),
    c("dup", 32, "SYS_DUP", Fd, RET_FD),
    c("dup2", 33, "SYS_DUP2", Fd, RET_FD),
    c("sendfile", 40, "SYS_SENDFILE", FdFd1, 0),
    c("fcntl", 72, "SYS_FCNTL", Fd, 0),
    c("flock", 73, "SYS_FLOCK", Fd, 0),
    c("fsync", 74, "SYS_FSYNC", Fd, 0),
    c("fdatasync", 75, "SYS_FDATASYNC", Fd, 0),
    c("truncate", 76, "SYS_TRUNCATE", Path, 0),
    c("ftruncate", 77, "SYS_FTRUNCATE", Fd, 0),
    c("getdents", 78, "SYS_GETDENTS", Fd, 0),
    c("chdir", 80, "SYS_CHDIR", Path, 0),
    c("fchdir", 81, "SYS_FCHDIR", Fd, 0),
    c("rename", 82, "SYS_RENAME", PathPath1, 0),
    c("mkdir", 83, "SYS_MKDIR", Path, 0),
    c("rmdir", 84, "SYS_RMDIR", Path, 0),
    c("creat", 85, "SYS_CREAT", Path, RET_FD),
    c("link", 86, "SYS_LINK", PathPath1, 0),
    c("unlink", 87, "SYS_UNLINK", Path, 0),
    c("symlink", 88, "SYS_SYMLINK", Path1, 0),
    c("readlink", 89, "SYS_READLINK", Path, 0),
    c("chmod", 90, "SYS_CHMOD", Path, 0),
    c("fchmod", 91, "SYS_FCHMOD", Fd, 0),
    c("chown", 92, "SYS_CHOWN", Path, 0),
    c("fchown", 93, "SYS_FCHOWN", Fd, 0),
    c("lchown", 94, "SYS_LCHOWN", Path, 0),
    c("utime", 132, "SYS_UTIME", Path, 0),
    c("mknod", 133, "SYS_MKNOD", Path, 0),
    c("statfs", 137, "SYS_STATFS", Path, 0),
    c("fstatfs", 138, "SYS_FSTATFS", Fd, 0),
    c("readahead", 187, "SYS_READAHEAD", Fd, 0),
    c("setxattr", 188, "SYS_SETXATTR", Path, 0),
    c("lsetxattr", 189, "SYS_LSETXATTR", Path, 0),
    c("fsetxattr", 190, "SYS_FSETXATTR", Fd, 0),
    c("getxattr", 191, "SYS_GETXATTR", Path, 0),
    c("lgetxattr", 192, "SYS_LGETXATTR", Path, 0),
    c("fgetxattr", 193, "SYS_FGETXATTR", Fd, 0),
    c("listxattr", 194, "SYS_LISTXATTR", Path, 0),
    c("llistxattr", 195, "SYS_LLISTXATTR", Path, 0),
    c("flistxattr", 196, "SYS_FLISTXATTR", Fd, 0),
    c("removexattr", 197, "SYS_REMOVEXATTR", Path, 0),
    c("lremovexattr", 198, "SYS_LREMOVEXATTR", Path, 0),
    c("fremovexattr", 199, "SYS_FREMOVEXATTR", Fd, 0),
    c("getdents64", 217, "SYS_GETDENTS64", Fd, 0),
    c("fadvise64", 221, "SYS_FADVISE", Fd, 0),
    c("utimes", 235, "SYS_UTIMES", Path, 0),
    c("openat", 257, "SYS_OPENAT", At, RET_FD),
    c("mkdirat", 258, "SYS_MKDIRAT", At, 0),
    c("mknodat", 259, "SYS_MKNODAT", At, 0),
    c("fchownat", 260, "SYS_FCHOWNAT", At, 0),
    c("futimesat", 261, "SYS_FUTIMESAT", At, 0),
    c("newfstatat", 262, "SYS_FSTATAT", At, STAT | buf(2)),
    c("unlinkat", 263, "SYS_UNLINKAT", At, 0),
    c("renameat", 264, "SYS_RENAMEAT", AtAt23, 0),
    c("linkat", 265, "SYS_LINKAT", AtAt23, 0),
    c("symlinkat", 266, "SYS_SYMLINKAT", At12, 0),
    c("readlinkat", 267, "SYS_READLINKAT", At, 0),
    c("fchmodat", 268, "SYS_FCHMODAT", At, 0),
    c("faccessat", 269, "SYS_FACCESSAT", At, 0),
    c("splice", 275, "SYS_SPLICE", FdFd2, 0),
    c("sync_file_range", 277, "SYS_SYNC_FILE_RANGE", Fd, 0),
    c("utimensat", 280, "SYS_UTIMENSAT", At, 0),
    c("fallocate", 285, "SYS_FALLOCATE", Fd, 0),
    c("dup3", 292, "SYS_DUP3", Fd, RET_FD),
    c("preadv", 295, "SYS_PREADV", Fd, OFF3),
    c("pwritev", 296, "SYS_PWRITEV", Fd, OFF3),
    c("name_to_handle_at", 303, "SYS_NAME_TO_HANDLE_AT", At, 0),
    c(
        "open_by_handle_at",
        304,
        "SYS_OPEN_BY_HANDLE_AT",
        Fd,
        RET_FD,
    ),
    c("syncfs", 306, "SYS_SYNCFS", Fd, 0),
    c("renameat2", 316, "SYS_RENAMEAT2", AtAt23, 0),
    c("copy_file_range", 326, "SYS_COPY_FILE_RANGE", FdFd2, 0),
    c("preadv2", 327, "SYS_PREADV2", Fd, OFF3),
    c("pwritev2", 328, "SYS_PWRITEV2", Fd, OFF3),
    c("statx", 332, "SYS_STATX", At, STATX | buf(4)),
    c("openat2", 437, "SYS_OPENAT2", At, RET_FD),
    c("faccessat2", 439, "SYS_FACCESSAT", At, 0),
    c("fchmodat2", 452, "SYS_FCHMODAT", At, 0),
    c("setxattrat", 463, "SYS_SETXATTRAT", At, 0),
    c("getxattrat", 464, "SYS_GETXATTRAT", At, 0),
    c("listxattrat", 465, "SYS_LISTXATTRAT", At, 0),
    c("removexattrat", 466, "SYS_REMOVEXATTRAT", At, 0),
];

/// Syscall numbers the program's table covers (`MAX_SYSCALLS`).
pub const MAX_SYSCALLS: usize = 512;

/// The operations, each once, in the order of first appearance in [`CALLS`]: index `i` is
/// operation `i` of the program's histograms.
pub fn ops() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for c in CALLS {
        if !out.contains(&c.op) {
            out.push(c.op);
        }
    }
    out
}

/// The program's `sys_tab`: for each syscall number, its operation + 1 (0: not timed), kind
/// and flags.
pub fn sys_tab() -> [u32; MAX_SYSCALLS] {
    let ops = ops();
    let mut tab = [0u32; MAX_SYSCALLS];
    for c in CALLS {
        let op = ops.iter().position(|o| *o == c.op).expect("listed") as u32 + 1;
        tab[c.nr as usize] = op | ((c.kind as u32) << 8) | c.flags;
    }
    tab
}

/// The system call a C-library function of the user layer makes on x86_64 glibc (2.33 and
/// later), as a `SYS_` name of this layer, where the two differ: `SYS_STAT`, `SYS_LSTAT` and
/// `SYS_FSTAT` are `newfstatat` (`SYS_FSTATAT`), `SYS_OPEN` is `openat`, `SYS_FUTIMENS` is
/// `utimensat`, `SYS_POSIX_FALLOCATE` is `fallocate`; `None` for a function that makes the
/// call of its own name, or no one call (stdio, `opendir`, `remove`).
pub fn c_library_call(user: &str) -> Option<&'static str> {
    Some(match user {
        "SYS_STAT" | "SYS_LSTAT" | "SYS_FSTAT" => "SYS_FSTATAT",
        "SYS_OPEN" => "SYS_OPENAT",
        "SYS_FUTIMENS" => "SYS_UTIMENSAT",
        "SYS_POSIX_FALLOCATE" => "SYS_FALLOCATE",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_unique_and_in_range() {
        let mut seen = std::collections::HashSet::new();
        for c in CALLS {
            assert!((c.nr as usize) < MAX_SYSCALLS, "{}", c.syscall);
            assert!(seen.insert(c.nr), "{} twice", c.nr);
            assert!(c.op.starts_with("SYS_"));
        }
        assert!(ops().len() < 255);
    }

    #[test]
    fn the_table_encodes_op_and_kind() {
        let tab = sys_tab();
        let ops = ops();
        let pread = tab[17];
        assert_eq!(ops[(pread & 0xff) as usize - 1], "SYS_PREAD");
        assert_eq!((pread >> 8) & 0xf, Kind::Fd as u32);
        assert_ne!(pread & OFF3, 0);
        let fstatat = tab[262];
        assert_eq!(ops[(fstatat & 0xff) as usize - 1], "SYS_FSTATAT");
        assert_eq!((fstatat >> 12) & 7, 2);
        assert_eq!(
            tab[439] & 0xff,
            tab[269] & 0xff,
            "faccessat2 counts as faccessat"
        );
        assert_eq!(tab[9], 0, "mmap is not timed");
    }

    /// Every name the user layer shares with this one is the same call: the names of this
    /// layer that are also user-level names are the ones the preload library times.
    #[test]
    fn shared_names_are_user_level_names() {
        for o in [
            "SYS_PREAD",
            "SYS_FSTATAT",
            "SYS_OPENAT",
            "SYS_STATX",
            "SYS_GETDENTS64",
        ] {
            assert!(ops().contains(&o));
        }
        assert_eq!(c_library_call("SYS_STAT"), Some("SYS_FSTATAT"));
        assert_eq!(c_library_call("SYS_PREAD"), None);
    }
}
