//! How a user-level call or system call (`SYS_...`, timed in the program by `fsprof run` or in
//! the kernel by `--syscalls`) relates to the FUSE operation (`OP_...`) it leads to, so that
//! `fsprof compare --layers user,fuse` (or `syscall,fuse`) can set the two levels of one
//! workload side by side (thesis §3: comparing user-level and file-system
//! profiles isolates what the kernel does in between).
//!
//! The pairing is by kind, not call by call: every read-like call (`read`, `pread`, `readv`,
//! `fread`, `fgets`...) is grouped under `OP_READ`, every stat-like call under `OP_GETATTR`,
//! and so on. It is a comparison of distributions: a cached read has a user call and no FUSE
//! request, an open leads to a LOOKUP as well as an OPEN, a close to a RELEASE in the
//! background. Calls with no FUSE counterpart (`lseek` within a file, `fcntl`, `dup`, `fflush`,
//! `ftell`...) keep their own names and compare against nothing.

use profile_store::{Layer, OpProfile, Profile};

/// The FUSE operation a user-level call mostly leads to, if any.
pub fn fuse_counterpart(call: &str) -> Option<&'static str> {
    let c = call.strip_prefix("SYS_")?;
    Some(match c {
        "READ" | "PREAD" | "READV" | "PREADV" | "PREADV2" | "FREAD" | "FGETS" => "OP_READ",
        "WRITE" | "PWRITE" | "WRITEV" | "PWRITEV" | "PWRITEV2" | "FWRITE" | "FPUTS" => "OP_WRITE",
        "OPEN" | "OPENAT" | "OPENAT2" | "CREAT" | "FOPEN" | "FREOPEN" => "OP_OPEN",
        "CLOSE" | "FCLOSE" => "OP_FLUSH",
        "STAT" | "LSTAT" | "FSTAT" | "FSTATAT" | "STATX" => "OP_GETATTR",
        "ACCESS" | "FACCESSAT" => "OP_ACCESS",
        "STATFS" | "FSTATFS" => "OP_STATFS",
        "MKDIR" | "MKDIRAT" => "OP_MKDIR",
        "RMDIR" => "OP_RMDIR",
        "UNLINK" | "UNLINKAT" | "REMOVE" => "OP_UNLINK",
        "RENAME" | "RENAMEAT" | "RENAMEAT2" => "OP_RENAME",
        "LINK" | "LINKAT" => "OP_LINK",
        "SYMLINK" | "SYMLINKAT" => "OP_SYMLINK",
        "READLINK" | "READLINKAT" => "OP_READLINK",
        "TRUNCATE" | "FTRUNCATE" | "CHMOD" | "FCHMOD" | "FCHMODAT" | "CHOWN" | "FCHOWN"
        | "LCHOWN" | "FCHOWNAT" | "UTIMENSAT" | "FUTIMENS" | "UTIME" | "UTIMES" | "FUTIMESAT" => {
            "OP_SETATTR"
        }
        "FSYNC" | "FDATASYNC" | "SYNC_FILE_RANGE" => "OP_FSYNC",
        "MKNOD" | "MKNODAT" => "OP_MKNOD",
        "FALLOCATE" | "POSIX_FALLOCATE" => "OP_FALLOCATE",
        "COPY_FILE_RANGE" => "OP_COPY_FILE_RANGE",
        "OPENDIR" | "FDOPENDIR" => "OP_OPENDIR",
        "READDIR" | "GETDENTS" | "GETDENTS64" => "OP_READDIR",
        "CLOSEDIR" => "OP_RELEASEDIR",
        "SETXATTR" | "LSETXATTR" | "FSETXATTR" | "SETXATTRAT" => "OP_SETXATTR",
        "GETXATTR" | "LGETXATTR" | "FGETXATTR" | "GETXATTRAT" => "OP_GETXATTR",
        "LISTXATTR" | "LLISTXATTR" | "FLISTXATTR" | "LISTXATTRAT" => "OP_LISTXATTR",
        "REMOVEXATTR" | "LREMOVEXATTR" | "FREMOVEXATTR" | "REMOVEXATTRAT" => "OP_REMOVEXATTR",
        _ => return None,
    })
}

/// The groups made by [`grouped_by_fuse_op`]: each FUSE operation with the user-level calls
/// summed into it.
pub type Groups = Vec<(String, Vec<String>)>;

/// Whether `layer` holds user-level calls (`SYS_...`).
pub fn is_user_level(layer: &Layer) -> bool {
    layer
        .ops
        .iter()
        .any(|o| profile_store::ops::is_user_call(&o.name))
}

/// `layer` with its user-level calls summed under the FUSE operation each leads to (counts,
/// totals and every bucket of every epoch); calls without a counterpart stay as they are.
/// Also returns each group made: the FUSE operation and the calls summed into it.
pub fn grouped_by_fuse_op(layer: &Layer) -> (Layer, Groups) {
    grouped_by(layer, fuse_counterpart)
}

/// The user layer `layer` with each C-library function summed under the system call it makes
/// where the two names differ (glibc's `stat` is `newfstatat`: [`c_library_call`]), to set
/// against the `syscall` layer call for call.
///
/// [`c_library_call`]: syscall_trace::table::c_library_call
pub fn grouped_by_syscall(layer: &Layer) -> (Layer, Groups) {
    grouped_by(layer, syscall_trace::table::c_library_call)
}

/// Whether `layer` is the syscall level (`--syscalls`, `--no-mount`).
pub fn is_syscall_level(layer: &Layer) -> bool {
    layer.name == syscall_trace::LAYER
        || layer
            .extra
            .iter()
            .any(|(k, v)| k == "level" && v == "syscall")
}

/// `layer` with the calls `target` names summed under their target.
fn grouped_by(layer: &Layer, target: fn(&str) -> Option<&'static str>) -> (Layer, Groups) {
    let mut out = Layer {
        ops: Vec::new(),
        ..layer.clone()
    };
    let mut groups: Groups = Vec::new();
    for op in &layer.ops {
        let Some(target) = target(&op.name) else {
            out.ops.push(op.clone());
            continue;
        };
        match groups.iter_mut().find(|(t, _)| t == target) {
            Some((_, calls)) => calls.push(op.name.clone()),
            None => groups.push((target.to_string(), vec![op.name.clone()])),
        }
        let sum = match out.ops.iter().position(|o| o.name == target) {
            Some(i) => &mut out.ops[i],
            None => {
                out.ops.push(OpProfile {
                    name: target.to_string(),
                    count: 0,
                    total: 0,
                    epochs: Vec::new(),
                });
                out.ops.last_mut().expect("just pushed")
            }
        };
        sum.count = sum.count.saturating_add(op.count);
        sum.total = sum.total.saturating_add(op.total);
        if sum.epochs.len() < op.epochs.len() {
            sum.epochs.resize(op.epochs.len(), Vec::new());
        }
        for (s, e) in sum.epochs.iter_mut().zip(&op.epochs) {
            if s.len() < e.len() {
                s.resize(e.len(), 0);
            }
            for (a, b) in s.iter_mut().zip(e) {
                *a = a.saturating_add(*b);
            }
        }
    }
    out.ops
        .sort_by(|a, b| profile_store::ops::listing_order(&a.name, &b.name));
    groups.sort_by(|a, b| profile_store::ops::listing_order(&a.0, &b.0));
    (out, groups)
}

/// The layer findings are about: the breakdown's, else `fuse`, else `syscall` (a profile
/// made without a mount), else the first.
pub fn analysed(p: &Profile) -> Option<&Layer> {
    let named = p
        .section(profile_store::inner::SECTION)
        .and_then(|s| s.attr("layer"))
        .and_then(|n| p.layer(n));
    named
        .or_else(|| p.layer("fuse"))
        .or_else(|| p.layer(syscall_trace::LAYER))
        .or_else(|| p.primary())
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::Resolution;

    fn op(name: &str, buckets: &[(usize, u64)]) -> OpProfile {
        let mut o = OpProfile::new(name, 64, 1);
        for &(b, n) in buckets {
            o.epochs[0][b] += n;
            o.count += n;
            o.total += n << b;
        }
        o
    }

    #[test]
    fn reads_of_every_kind_sum_under_op_read_and_the_rest_stay() {
        let mut l = Layer::new("user", Resolution::ONE);
        l.ops = vec![
            op("SYS_READ", &[(10, 5), (20, 1)]),
            op("SYS_PREAD", &[(10, 2)]),
            op("SYS_FREAD", &[(11, 3)]),
            op("SYS_LSEEK", &[(8, 4)]),
            op("SYS_OPENAT", &[(14, 2)]),
        ];
        let (g, groups) = grouped_by_fuse_op(&l);
        let read = g.op("OP_READ").unwrap();
        assert_eq!(read.count, 11);
        assert_eq!(read.epochs[0][10], 7);
        assert_eq!(read.epochs[0][11], 3);
        assert_eq!(read.epochs[0][20], 1);
        assert_eq!(read.total, (7 << 10) + (3 << 11) + (1 << 20));
        assert_eq!(g.op("OP_OPEN").unwrap().count, 2);
        assert_eq!(g.op("SYS_LSEEK").unwrap().count, 4);
        assert!(g.op("SYS_READ").is_none());
        assert_eq!(
            groups,
            vec![
                ("OP_OPEN".to_string(), vec!["SYS_OPENAT".to_string()]),
                (
                    "OP_READ".to_string(),
                    vec![
                        "SYS_READ".to_string(),
                        "SYS_PREAD".to_string(),
                        "SYS_FREAD".to_string()
                    ]
                ),
            ]
        );
        assert!(is_user_level(&l));
        // SYS_LSEEK has no counterpart and stays.
        assert!(is_user_level(&g));
    }

    #[test]
    fn every_counterpart_is_a_standard_fuse_operation() {
        for name in [
            "SYS_READ",
            "SYS_WRITE",
            "SYS_OPEN",
            "SYS_CLOSE",
            "SYS_STATX",
            "SYS_ACCESS",
            "SYS_STATFS",
            "SYS_MKDIR",
            "SYS_RMDIR",
            "SYS_REMOVE",
            "SYS_RENAMEAT2",
            "SYS_LINK",
            "SYS_SYMLINK",
            "SYS_READLINK",
            "SYS_UTIMENSAT",
            "SYS_FSYNC",
            "SYS_FALLOCATE",
            "SYS_COPY_FILE_RANGE",
            "SYS_OPENDIR",
            "SYS_GETDENTS64",
            "SYS_CLOSEDIR",
            "SYS_SETXATTR",
            "SYS_GETXATTR",
            "SYS_LISTXATTR",
            "SYS_REMOVEXATTR",
        ] {
            let op = fuse_counterpart(name).unwrap();
            assert!(profile_store::ops::STANDARD.contains(&op), "{name} -> {op}");
        }
        assert_eq!(fuse_counterpart("SYS_FCNTL"), None);
        assert_eq!(fuse_counterpart("OP_READ"), None);
    }
}
