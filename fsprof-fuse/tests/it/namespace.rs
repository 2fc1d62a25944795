//! Every operation Linux sends for a local file system, checked against LOWER.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt, symlink};
use std::time::Duration;

use fsprof_fuse::sys::{self, SetTime};

use crate::fixture::{Fixture, Transport, drop_caches, errno, sh};

fn dir_fd(p: &std::path::Path) -> File {
    File::open(p).unwrap()
}

/// One pass over the namespace and data operations; run in both inode modes.
fn every_operation(f: &Fixture) {
    f.reset();
    files_and_directories(f);
    attributes_and_times(f);
    links_renames_and_special_files(f);
    statfs_xattrs_and_syncs(f);
    ranges_removals_and_reads(f);
    // The kernel takes ENOSYS from fsync and fsyncdir as success and falls back from
    // copy_file_range to reads and writes: the results above alone would not show that these
    // operations were served. The profile does.
    let served = [
        "OP_FSYNC",
        "OP_FSYNCDIR",
        "OP_COPY_FILE_RANGE",
        "OP_LSEEK",
        "OP_FALLOCATE",
        "OP_READDIRPLUS",
        "OP_SETXATTR",
        "OP_GETXATTR",
        "OP_LISTXATTR",
        "OP_REMOVEXATTR",
        "OP_MKNOD",
        "OP_SYMLINK",
        "OP_READLINK",
        "OP_LINK",
        "OP_RENAME",
        "OP_STATFS",
    ];
    let p = f.profile_when(|p| served.iter().all(|op| p.layers[0].count(op) >= 1));
    for op in served {
        assert!(p.layers[0].count(op) >= 1, "{op} was not served");
    }
    // Forgetting: the kernel drops its inodes (and tells the daemon) when caches are dropped.
    drop_caches();
    let p = f.profile_when(|p| p.layers[0].count("OP_FORGET") > 0);
    assert!(
        p.layers[0].count("OP_FORGET") > 0,
        "no FORGET after drop_caches"
    );
}

/// create, write, read, mkdir, readdir, stat (for [`every_operation`]).
fn files_and_directories(f: &Fixture) {
    // create, write, read
    fs::write(f.m("file"), b"hello world").unwrap();
    assert_eq!(fs::read(f.l("file")).unwrap(), b"hello world");
    assert_eq!(fs::read_to_string(f.m("file")).unwrap(), "hello world");
    // mkdir, nested create, readdir
    fs::create_dir(f.m("d")).unwrap();
    fs::write(f.m("d/inner"), b"x").unwrap();
    assert!(f.l("d/inner").is_file());
    let mut names: Vec<String> = fs::read_dir(f.m("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["inner"]);
    // stat matches LOWER (inode numbers included)
    let (ml, mm) = (
        fs::metadata(f.l("file")).unwrap(),
        fs::metadata(f.m("file")).unwrap(),
    );
    assert_eq!(
        (mm.ino(), mm.size(), mm.mode(), mm.uid(), mm.nlink()),
        (ml.ino(), ml.size(), ml.mode(), ml.uid(), ml.nlink())
    );
}

/// chmod, chown, truncate, utimens (for [`every_operation`]).
fn attributes_and_times(f: &Fixture) {
    // chmod, chown
    fs::set_permissions(f.m("file"), fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(fs::metadata(f.l("file")).unwrap().mode() & 0o7777, 0o640);
    std::os::unix::fs::chown(f.m("file"), Some(1234), Some(5678)).unwrap();
    let m = fs::metadata(f.l("file")).unwrap();
    assert_eq!((m.uid(), m.gid()), (1234, 5678));
    // truncate by path and through an open handle
    OpenOptions::new()
        .write(true)
        .open(f.m("file"))
        .unwrap()
        .set_len(5)
        .unwrap();
    assert_eq!(fs::read(f.l("file")).unwrap(), b"hello");
    let (c, _, e) = sh(&format!("truncate -s 2 '{}'", f.m("file").display()));
    assert_eq!(c, 0, "{e}");
    assert_eq!(fs::read(f.l("file")).unwrap(), b"he");
    // utimens: set both, then mtime only with atime omitted (UTIME_OMIT), then now
    let fd = File::open(f.m("file")).unwrap();
    let pfd = sys::open_path(&f.m("file"), libc::O_PATH).unwrap();
    sys::utimens_fd(
        pfd.as_fd(),
        SetTime::At(1_000_000, 5),
        SetTime::At(2_000_000, 7),
    )
    .unwrap();
    let m = fs::metadata(f.l("file")).unwrap();
    assert_eq!(
        (m.atime(), m.atime_nsec(), m.mtime(), m.mtime_nsec()),
        (1_000_000, 5, 2_000_000, 7)
    );
    sys::utimens_fd(pfd.as_fd(), SetTime::Omit, SetTime::At(3_000_000, 0)).unwrap();
    let m = fs::metadata(f.l("file")).unwrap();
    assert_eq!(
        (m.atime(), m.mtime()),
        (1_000_000, 3_000_000),
        "UTIME_OMIT changed atime"
    );
    sys::utimens_fd(pfd.as_fd(), SetTime::Now, SetTime::Omit).unwrap();
    let m = fs::metadata(f.l("file")).unwrap();
    assert!(m.atime() > 1_000_000_000 && m.mtime() == 3_000_000);
    // Before the epoch, half a second and a year and a bit: stored as given (the classic
    // transport stored -0.5 s as -1.5 s), and read back so through the mount.
    sys::utimens_fd(
        pfd.as_fd(),
        SetTime::At(-1, 500_000_000),
        SetTime::At(-31_536_001, 250),
    )
    .unwrap();
    for (p, what) in [(f.l("file"), "lower"), (f.m("file"), "mount")] {
        let m = fs::metadata(p).unwrap();
        assert_eq!(
            (m.atime(), m.atime_nsec(), m.mtime(), m.mtime_nsec()),
            (-1, 500_000_000, -31_536_001, 250),
            "{what}"
        );
    }
    drop((fd, pfd));
}

/// symlink, link, rename, mknod (for [`every_operation`]).
fn links_renames_and_special_files(f: &Fixture) {
    // symlink, readlink
    symlink("file", f.m("sym")).unwrap();
    assert_eq!(fs::read_link(f.l("sym")).unwrap().as_os_str(), "file");
    assert_eq!(fs::read_link(f.m("sym")).unwrap().as_os_str(), "file");
    assert!(
        fs::symlink_metadata(f.m("sym"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // hard link
    fs::hard_link(f.m("file"), f.m("d/hard")).unwrap();
    assert_eq!(
        fs::metadata(f.m("d/hard")).unwrap().ino(),
        fs::metadata(f.m("file")).unwrap().ino()
    );
    // rename, RENAME_NOREPLACE, RENAME_EXCHANGE
    fs::rename(f.m("d/inner"), f.m("moved")).unwrap();
    assert!(f.l("moved").exists() && !f.l("d/inner").exists());
    fs::write(f.m("other"), b"other").unwrap();
    let root = dir_fd(&f.mnt);
    let e = sys::renameat2(
        root.as_fd(),
        OsStr::new("moved"),
        root.as_fd(),
        OsStr::new("other"),
        libc::RENAME_NOREPLACE,
    );
    assert_eq!(errno(e), libc::EEXIST);
    sys::renameat2(
        root.as_fd(),
        OsStr::new("moved"),
        root.as_fd(),
        OsStr::new("other"),
        libc::RENAME_EXCHANGE,
    )
    .unwrap();
    assert_eq!(fs::read(f.l("moved")).unwrap(), b"other");
    assert_eq!(fs::read(f.l("other")).unwrap(), b"x");
    // mknod: fifo, socket, character device
    sys::mknodat(root.as_fd(), OsStr::new("fifo"), libc::S_IFIFO | 0o600, 0).unwrap();
    sys::mknodat(root.as_fd(), OsStr::new("sock"), libc::S_IFSOCK | 0o600, 0).unwrap();
    sys::mknodat(
        root.as_fd(),
        OsStr::new("null2"),
        libc::S_IFCHR | 0o600,
        libc::makedev(1, 3),
    )
    .unwrap();
    assert!(
        fs::symlink_metadata(f.l("fifo"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert!(
        fs::symlink_metadata(f.l("sock"))
            .unwrap()
            .file_type()
            .is_socket()
    );
    let dev = fs::symlink_metadata(f.m("null2")).unwrap();
    assert!(dev.file_type().is_char_device());
    assert_eq!(dev.rdev(), libc::makedev(1, 3));
}

/// statfs, the xattr calls, fsync, fsyncdir (for [`every_operation`]).
fn statfs_xattrs_and_syncs(f: &Fixture) {
    let root = dir_fd(&f.mnt);
    // statfs
    let st = sys::fstatvfs(root.as_fd()).unwrap();
    let sl = sys::fstatvfs(dir_fd(&f.lower).as_fd()).unwrap();
    assert_eq!((st.f_blocks, st.f_bsize), (sl.f_blocks, sl.f_bsize));
    // xattrs
    let file = File::open(f.m("file")).unwrap();
    sys::setxattr_fd(file.as_fd(), OsStr::new("user.k"), b"v1", 0).unwrap();
    let mut buf = [0u8; 64];
    let n = sys::getxattr_fd(file.as_fd(), OsStr::new("user.k"), &mut buf).unwrap();
    assert_eq!(&buf[..n], b"v1");
    let n = sys::listxattr_fd(file.as_fd(), &mut buf).unwrap();
    assert!(buf[..n].split(|&b| b == 0).any(|s| s == b"user.k"));
    let lower_file = File::open(f.l("file")).unwrap();
    let n = sys::getxattr_fd(lower_file.as_fd(), OsStr::new("user.k"), &mut buf).unwrap();
    assert_eq!(&buf[..n], b"v1");
    sys::removexattr_fd(file.as_fd(), OsStr::new("user.k")).unwrap();
    assert_eq!(
        errno(sys::getxattr_fd(
            file.as_fd(),
            OsStr::new("user.k"),
            &mut buf
        )),
        libc::ENODATA
    );
    // fsync, fsyncdir
    file.sync_all().unwrap();
    File::open(f.m("d")).unwrap().sync_all().unwrap();
}

/// fallocate, lseek, copy_file_range, unlink, rmdir, read (for [`every_operation`]).
fn ranges_removals_and_reads(f: &Fixture) {
    // fallocate, lseek SEEK_DATA / SEEK_HOLE, copy_file_range
    let big = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(f.m("sparse"))
        .unwrap();
    sys::fallocate(big.as_fd(), 0, 0, 8192).unwrap();
    assert_eq!(fs::metadata(f.l("sparse")).unwrap().len(), 8192);
    sys::pwrite(big.as_fd(), b"head", 0).unwrap();
    sys::pwrite(big.as_fd(), b"tail", 1 << 20).unwrap();
    big.sync_all().unwrap();
    // SEEK_HOLE / SEEK_DATA answer as on LOWER (ext4 counts preallocated extents as holes).
    let low = File::open(f.l("sparse")).unwrap();
    let hole = sys::lseek(big.as_fd(), 0, libc::SEEK_HOLE).unwrap();
    assert_eq!(hole, sys::lseek(low.as_fd(), 0, libc::SEEK_HOLE).unwrap());
    assert!(hole > 0 && hole < 1 << 20, "hole at {hole}");
    let data = sys::lseek(big.as_fd(), hole, libc::SEEK_DATA).unwrap();
    assert_eq!(
        data,
        sys::lseek(low.as_fd(), hole, libc::SEEK_DATA).unwrap()
    );
    assert!(data > hole && data <= 1 << 20, "data at {data}");
    let dst = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(f.m("copy"))
        .unwrap();
    let n = sys::copy_file_range(big.as_fd(), 1 << 20, dst.as_fd(), 0, 4, 0).unwrap();
    assert_eq!(n, 4);
    assert_eq!(fs::read(f.l("copy")).unwrap(), b"tail");
    // unlink, rmdir
    fs::remove_file(f.m("d/hard")).unwrap();
    fs::remove_file(f.m("sym")).unwrap();
    assert!(!f.l("sym").exists());
    fs::create_dir(f.m("empty")).unwrap();
    fs::remove_dir(f.m("empty")).unwrap();
    assert!(!f.l("empty").exists());
    // read/seek through std
    let mut r = File::open(f.m("other")).unwrap();
    r.seek(SeekFrom::Start(0)).unwrap();
    let mut s = Vec::new();
    r.read_to_end(&mut s).unwrap();
    assert_eq!(s, b"x");
}

fn every_operation_by_handle(t: Transport) {
    let Some(f) = Fixture::mounted("every-handle", t, &["--inode-mode", "handles"]) else {
        return;
    };
    every_operation(&f);
}
transports!(every_operation_by_handle);

fn every_operation_by_path(t: Transport) {
    let Some(f) = Fixture::mounted("every-path", t, &["--inode-mode", "paths"]) else {
        return;
    };
    every_operation(&f);
}
transports!(every_operation_by_path);

fn rename_of_open_files(f: &Fixture) {
    fs::create_dir(f.m("a")).unwrap();
    let mut w = OpenOptions::new()
        .create(true)
        .write(true)
        .read(true)
        .truncate(true)
        .open(f.m("a/f"))
        .unwrap();
    w.write_all(b"one ").unwrap();
    // Rename the file, then its directory, while open.
    fs::rename(f.m("a/f"), f.m("a/g")).unwrap();
    fs::rename(f.m("a"), f.m("b")).unwrap();
    w.write_all(b"two").unwrap();
    w.sync_all().unwrap();
    assert_eq!(fs::read(f.l("b/g")).unwrap(), b"one two");
    assert_eq!(fs::read(f.m("b/g")).unwrap(), b"one two");
    // Attributes through the open handle after the renames.
    assert_eq!(w.metadata().unwrap().len(), 7);
    // An unlinked open file stays readable and writable.
    fs::remove_file(f.m("b/g")).unwrap();
    w.write_all(b"!").unwrap();
    let mut s = String::new();
    w.seek(SeekFrom::Start(0)).unwrap();
    w.read_to_string(&mut s).unwrap();
    assert_eq!(s, "one two!");
    assert_eq!(w.metadata().unwrap().nlink(), 0);
}

fn rename_of_open_files_by_handle(t: Transport) {
    let Some(f) = Fixture::mounted("rename-open-h", t, &[]) else {
        return;
    };
    rename_of_open_files(&f);
}
transports!(rename_of_open_files_by_handle);

fn rename_of_open_files_by_path(t: Transport) {
    let Some(f) = Fixture::mounted("rename-open-p", t, &["--inode-mode", "paths"]) else {
        return;
    };
    rename_of_open_files(&f);
}
transports!(rename_of_open_files_by_path);

fn hard_links_share_an_inode_and_attributes_stay_current(t: Transport) {
    let Some(f) = Fixture::mounted("hardlinks", t, &[]) else {
        return;
    };
    fs::write(f.m("a"), b"1").unwrap();
    fs::create_dir(f.m("sub")).unwrap();
    fs::hard_link(f.m("a"), f.m("sub/b")).unwrap();
    let (a, b) = (
        fs::metadata(f.m("a")).unwrap(),
        fs::metadata(f.m("sub/b")).unwrap(),
    );
    assert_eq!(a.ino(), b.ino());
    assert_eq!((a.nlink(), b.nlink()), (2, 2));
    // Writes through one name show through the other.
    fs::write(f.m("sub/b"), b"22").unwrap();
    assert_eq!(fs::read(f.m("a")).unwrap(), b"22");
    // Unlink one name: the other sees nlink 1 and a newer ctime right away.
    let before = fs::metadata(f.m("a")).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    fs::remove_file(f.m("sub/b")).unwrap();
    let after = fs::metadata(f.m("a")).unwrap();
    assert_eq!(after.nlink(), 1);
    assert!((after.ctime(), after.ctime_nsec()) > (before.ctime(), before.ctime_nsec()));
    // Links made on LOWER behind the mount's back show up once the attribute cache expires.
    fs::hard_link(f.l("a"), f.l("c")).unwrap();
    assert_eq!(fs::metadata(f.m("c")).unwrap().ino(), a.ino());
}
transports!(hard_links_share_an_inode_and_attributes_stay_current);

fn ten_thousand_entries_are_listed_completely(t: Transport) {
    let Some(f) = Fixture::mounted("bigdir", t, &[]) else {
        return;
    };
    fs::create_dir(f.l("big")).unwrap();
    for i in 0..10_000 {
        File::create(f.l(&format!("big/entry-{i:05}"))).unwrap();
    }
    // Through both readdir and readdirplus (ls -l forces attributes).
    let mut names: Vec<String> = fs::read_dir(f.m("big"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 10_000);
    assert!(
        names
            .iter()
            .enumerate()
            .all(|(i, n)| *n == format!("entry-{i:05}"))
    );
    let (c, out, e) = sh(&format!(
        "ls -la '{}' | grep -c entry-",
        f.m("big").display()
    ));
    assert_eq!(c, 0, "{e}");
    assert_eq!(out.trim(), "10000");
    // A listing made through the mount too.
    fs::create_dir(f.m("made")).unwrap();
    for i in 0..2000 {
        File::create(f.m(&format!("made/{i}"))).unwrap();
    }
    assert_eq!(fs::read_dir(f.m("made")).unwrap().count(), 2000);
}
transports!(ten_thousand_entries_are_listed_completely);

fn paths_close_to_path_max_work_as_on_lower(t: Transport) {
    let Some(mut f) = Fixture::new("deep", t) else {
        return;
    };
    // LOWER's path is much longer than MNT's, so LOWER + the relative path exceeds PATH_MAX
    // while MNT + the relative path does not: an implementation that prefixed LOWER to full
    // paths would fail here.
    f.lower = f.root.join(format!("lower-{}", "l".repeat(150)));
    fs::create_dir(&f.lower).unwrap();
    assert!(f.lower.as_os_str().len() >= f.mnt.as_os_str().len() + 100);
    f.mount(&[]);
    let comp = "d".repeat(200);
    let mut rel = String::new();
    let mut depth = 0;
    // Build through the mount until the absolute path is near PATH_MAX (4096).
    loop {
        let next = if rel.is_empty() {
            comp.clone()
        } else {
            format!("{rel}/{comp}")
        };
        if f.m(&next).as_os_str().len() + 210 > 4095 {
            break;
        }
        fs::create_dir(f.m(&next)).unwrap();
        rel = next;
        depth += 1;
    }
    let leaf = format!("{rel}/{}", "f".repeat(150));
    assert!(
        f.m(&leaf).as_os_str().len() > 3900,
        "{}",
        f.m(&leaf).as_os_str().len()
    );
    assert!(
        f.l(&leaf).as_os_str().len() > 4096,
        "{}",
        f.l(&leaf).as_os_str().len()
    );
    fs::write(f.m(&leaf), b"deep").unwrap();
    assert_eq!(fs::read(f.m(&leaf)).unwrap(), b"deep");
    // Checked on LOWER relative to it (its full path is too long to open).
    let (c, out, e) = sh(&format!("cd '{}' && cat '{leaf}'", f.lower.display()));
    assert_eq!((c, out.as_str()), (0, "deep"), "{e}");
    assert!(depth >= 15);
    // One component past NAME_MAX fails as on LOWER.
    let long = "x".repeat(256);
    assert_eq!(errno(fs::write(f.m(&long), b"")), libc::ENAMETOOLONG);
    assert_eq!(errno(fs::write(f.l(&long), b"")), libc::ENAMETOOLONG);
}
transports!(paths_close_to_path_max_work_as_on_lower);

fn nothing_resolves_outside_lower(t: Transport) {
    let Some(f) = Fixture::mounted("escape", t, &[]) else {
        return;
    };
    fs::write(f.root.join("secret"), b"outside").unwrap();
    // MNT/.. is the mount point's parent (resolved by the kernel), never LOWER's parent.
    assert_eq!(
        fs::metadata(f.m("..")).unwrap().ino(),
        fs::metadata(&f.root).unwrap().ino()
    );
    // A symlink on LOWER pointing outside is returned as text, resolved by the caller's kernel
    // relative to the mount (f.m("..") is f.root, so "../secret" from MNT is the same file as on
    // LOWER), not by the daemon.
    symlink("../../escape-target", f.l("out")).unwrap();
    assert_eq!(
        fs::read_link(f.m("out")).unwrap().as_os_str(),
        "../../escape-target"
    );
    assert!(fs::metadata(f.m("out")).is_err());
}
transports!(nothing_resolves_outside_lower);
