//! File handles taken on the mount (`name_to_handle_at`) open the same object later
//! (`open_by_handle_at`), as on LOWER: after the kernel forgot the object (`drop_caches`), after
//! its name was removed while another link stays, after renames of it and of its directory,
//! whatever became of the daemon's descriptor cache; a handle of a deleted file gives `ESTALE`
//! (issue 42). The kernel asks the daemon `LOOKUP(nodeid, ".")` and `".."` for them.

use std::fs::{self, File};
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use fsprof_fuse::sys::{self, FileHandle};
use test_support::drop_caches;

use crate::fixture::{Fixture, Transport};

/// The handle of `path` (on the mount).
fn handle(path: &Path) -> FileHandle {
    let dir = File::open(path.parent().unwrap()).unwrap();
    sys::name_to_handle_at(dir.as_fd(), path.file_name().unwrap())
        .unwrap_or_else(|e| panic!("name_to_handle_at {}: {e}", path.display()))
        .0
}

/// Opens `h` on the file system mounted at `mnt`.
fn open(mnt: &Path, h: &FileHandle) -> std::io::Result<OwnedFd> {
    let m = File::open(mnt)?;
    sys::open_by_handle_at(m.as_fd(), h, libc::O_RDONLY)
}

fn content(fd: OwnedFd) -> String {
    let mut s = String::new();
    File::from(fd).read_to_string(&mut s).unwrap();
    s
}

/// How many times the kernel sent `op` (from the mount's profile).
fn count(f: &Fixture, op: &str) -> u64 {
    f.profile().layers[0].count(op)
}

/// Opens `h` once the kernel has forgotten its object: drops the kernel's caches until opening
/// it makes the daemon look it up (`LOOKUP(nodeid, ".")`) rather than the kernel answer from
/// what it holds. (Counting forgets instead would race with every other process that drops
/// the caches on this machine.)
fn open_forgotten(f: &Fixture, h: &FileHandle) -> std::io::Result<OwnedFd> {
    for _ in 0..50 {
        drop_caches();
        let before = count(f, "OP_LOOKUP");
        let r = open(&f.mnt, h);
        if r.is_err() || count(f, "OP_LOOKUP") > before {
            return r;
        }
    }
    panic!("the kernel kept the object through 50 drops of its caches");
}

fn handles_outlive_the_kernels_inodes_links_and_renames(t: Transport) {
    let Some(f) = Fixture::mounted("handles", t, &[]) else {
        return;
    };
    fs::write(f.m("a"), b"hello").unwrap();
    fs::hard_link(f.m("a"), f.m("b")).unwrap();
    fs::create_dir_all(f.m("d1/d2")).unwrap();
    fs::write(f.m("d1/m"), b"moved").unwrap();
    fs::write(f.m("gone"), b"x").unwrap();
    let (ha, hm, hd, hg) = (
        handle(&f.m("a")),
        handle(&f.m("d1/m")),
        handle(&f.m("d1/d2")),
        handle(&f.m("gone")),
    );
    fs::remove_file(f.m("a")).unwrap();
    fs::rename(f.m("d1/m"), f.m("d1/d2/m2")).unwrap();
    fs::rename(f.m("d1"), f.m("e1")).unwrap();
    fs::remove_file(f.m("gone")).unwrap();
    // The first name is gone, the file lives on under its second.
    let fd = open_forgotten(&f, &ha).expect("a handle of a file that has another link");
    let at = |fd: &OwnedFd| format!("/proc/self/fd/{}", fd.as_raw_fd());
    let b_ino = fs::metadata(f.m("b")).unwrap().ino();
    assert_eq!(fs::metadata(at(&fd)).unwrap().ino(), b_ino);
    assert_eq!(content(fd), "hello");
    let fd = open_forgotten(&f, &hm).expect("renamed file");
    assert_eq!(content(fd), "moved");
    // A directory is reconnected to the tree through "..": its path is its new one.
    let d = open_forgotten(&f, &hd).expect("directory in a renamed directory");
    assert_eq!(fs::read_link(at(&d)).unwrap(), f.m("e1/d2"));
    drop(d);
    let e = open_forgotten(&f, &hg).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ESTALE), "deleted: {e}");
    // Again, once more forgotten: the same answers.
    assert_eq!(content(open_forgotten(&f, &ha).unwrap()), "hello");
    // A new file where the deleted one was (perhaps its inode number): its own handle works,
    // the old one does not.
    fs::write(f.m("gone"), b"new").unwrap();
    let hn = handle(&f.m("gone"));
    assert_eq!(content(open_forgotten(&f, &hn).unwrap()), "new");
    let e = open_forgotten(&f, &hg).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ESTALE), "deleted: {e}");
}
transports!(handles_outlive_the_kernels_inodes_links_and_renames);

fn handles_work_whatever_became_of_the_descriptor_cache(t: Transport) {
    let Some(mut f) = Fixture::new("handles-fds", t) else {
        return;
    };
    // A daemon that may hold 256 descriptors caches 128: ten times that many files.
    f.mount_with(&["prlimit", "--nofile=256:256"], &[]);
    let n = 1280;
    let handles: Vec<FileHandle> = (0..n)
        .map(|i| {
            let p = f.m(&format!("f{i}"));
            fs::write(&p, format!("file {i}")).unwrap();
            handle(&p)
        })
        .collect();
    drop_caches();
    let before = count(&f, "OP_LOOKUP");
    for (i, h) in handles.iter().enumerate() {
        let fd = open(&f.mnt, h).unwrap_or_else(|e| panic!("f{i}: {e}"));
        assert_eq!(content(fd), format!("file {i}"));
    }
    // Nothing used them since the caches were dropped: the daemon found (nearly) every one.
    let asked = count(&f, "OP_LOOKUP") - before;
    assert!(asked >= n / 2, "{asked} of {n} handles reached the daemon");
}
transports!(handles_work_whatever_became_of_the_descriptor_cache);

fn in_path_mode_a_forgotten_objects_handle_is_stale(t: Transport) {
    // Documented: without lower handles the daemon cannot find a forgotten object from its node
    // id; a handle works while the kernel holds the object.
    let Some(f) = Fixture::mounted("handles-paths", t, &["--inode-mode", "paths"]) else {
        return;
    };
    fs::write(f.m("a"), b"hello").unwrap();
    let h = handle(&f.m("a"));
    let held = File::open(f.m("a")).unwrap();
    assert_eq!(content(open(&f.mnt, &h).unwrap()), "hello");
    drop(held);
    // The kernel's FORGET can reach the daemon after its LOOKUP(nodeid, "."), on another
    // queue: while the daemon still knows the node it answers it. Once it has forgotten it,
    // the handle is stale; a daemon that found it again every time fails here.
    let e = (0..20)
        .find_map(|_| open_forgotten(&f, &h).err())
        .expect("the forgotten object's handle opened 20 times in path mode");
    assert_eq!(e.raw_os_error(), Some(libc::ESTALE), "{e}");
}
transports!(in_path_mode_a_forgotten_objects_handle_is_stale);
