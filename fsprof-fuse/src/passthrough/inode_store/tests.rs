//! The inode store's tests: lookups and forgets, generations, pinned descriptors.

use super::*;
use crate::toolkit::lower::Via;
use std::path::{Path, PathBuf};

/// A scratch directory, removed when dropped.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = tempfile::Builder::new()
            .prefix(&format!("fsprof-inode-test-{name}-"))
            .tempdir()
            .unwrap();
        Scratch(d)
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn file(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.path().join(name);
        std::fs::write(&p, data).unwrap();
        p
    }
}

fn store(dir: &Path, mode: InodeMode, capacity: usize) -> InodeStore {
    let root = sys::open_path(dir, libc::O_PATH | libc::O_DIRECTORY).unwrap();
    InodeStore::new(root, mode, capacity).unwrap()
}

/// Looks `name` up at the root, as the passthrough does for a LOOKUP.
fn look(store: &InodeStore, name: &str, fresh: bool) -> (Arc<Inode>, Stat) {
    let root = store.root().clone();
    let pfd = store.fd(Via::NONE, &root).unwrap();
    let st = sys::statat(pfd.as_fd(), OsStr::new(name)).unwrap();
    let inode = store
        .lookup(Via::NONE, &root, pfd.as_fd(), OsStr::new(name), &st, fresh)
        .unwrap();
    (inode, st)
}

fn errno<T>(r: io::Result<T>) -> Option<i32> {
    r.err().and_then(|e| e.raw_os_error())
}

#[test]
fn lookups_are_counted_and_forget_releases_the_inode() {
    let dir = Scratch::new("forget");
    dir.file("a", b"x");
    let s = store(dir.path(), InodeMode::Paths, 64);
    assert!(s.is_empty());
    let (a, st) = look(&s, "a", false);
    // The lower inode number serves as the node id.
    assert_eq!((a.nodeid, a.lookups()), (st.ino, 1));
    let (again, _) = look(&s, "a", false);
    assert!(Arc::ptr_eq(&a, &again));
    assert_eq!((a.lookups(), s.len()), (2, 2));
    s.fd(Via::NONE, &a).unwrap();
    assert_eq!(s.cached_fds(), 1);
    s.forget(Via::NONE, a.nodeid, 1);
    assert!(s.get(a.nodeid).is_ok());
    s.forget(Via::NONE, a.nodeid, 1);
    assert_eq!(errno(s.get(a.nodeid)), Some(libc::ESTALE));
    assert_eq!((s.len(), s.cached_fds()), (1, 0));
    // Known again under the same node id, with a new lookup count.
    let (b, _) = look(&s, "a", false);
    assert_eq!((b.nodeid, b.lookups()), (a.nodeid, 1));
    // The root is never forgotten.
    s.forget(Via::NONE, ROOT_ID, 100);
    assert!(s.get(ROOT_ID).is_ok());
}

#[test]
fn a_reused_inode_number_gets_a_new_generation() {
    let dir = Scratch::new("generation");
    dir.file("a", b"x");
    let s = store(dir.path(), InodeMode::Paths, 64);
    let (a, st) = look(&s, "a", false);
    let g0 = a.generation();
    // The same object again: same generation.
    look(&s, "a", false);
    assert_eq!(a.generation(), g0);
    // A fresh object with that inode number (just created): same node id, new generation.
    let (b, _) = look(&s, "a", true);
    assert!(Arc::ptr_eq(&a, &b));
    assert_ne!(b.generation(), g0);
    // Another birth time or another type: also a new object.
    let root = s.root().clone();
    let pfd = s.fd(Via::NONE, &root).unwrap();
    let g1 = b.generation();
    let reborn = Stat {
        btime_ns: st.btime_ns + 1,
        ..st
    };
    s.lookup(
        Via::NONE,
        &root,
        pfd.as_fd(),
        OsStr::new("a"),
        &reborn,
        false,
    )
    .unwrap();
    let g2 = a.generation();
    assert_ne!(g2, g1);
    let dir_now = Stat {
        mode: libc::S_IFDIR | 0o755,
        ..reborn
    };
    s.lookup(
        Via::NONE,
        &root,
        pfd.as_fd(),
        OsStr::new("a"),
        &dir_now,
        false,
    )
    .unwrap();
    assert!(a.generation() != g2 && a.is_dir());
    assert_eq!(a.lookups(), 5);
}

#[test]
fn eviction_never_drops_pinned_descriptors() {
    let dir = Scratch::new("pinned");
    for i in 0..200 {
        dir.file(&format!("f{i}"), format!("file {i}").as_bytes());
    }
    let s = store(dir.path(), InodeMode::Paths, 16);
    let (pinned, _) = look(&s, "f0", false);
    let open = s.open_pinned(Via::NONE, &pinned, libc::O_RDONLY).unwrap();
    assert_eq!(pinned.opens(), 1);
    std::fs::remove_file(dir.path().join("f0")).unwrap();
    // Churn the cache: every other inode gets a descriptor, many times its capacity.
    let mut most = 0;
    for i in 1..200 {
        let (n, _) = look(&s, &format!("f{i}"), false);
        s.fd(Via::NONE, &n).unwrap();
        most = most.max(s.cached_fds());
    }
    assert!(most <= 16 + 1, "{most} descriptors cached");
    // The open, unlinked file is still reachable through its pinned descriptor.
    assert!(pinned.has_fd());
    let fd = s.fd(Via::NONE, &pinned).unwrap();
    assert_eq!(sys::fstat(fd.as_fd()).unwrap().nlink, 0);
    let again = s.open(Via::NONE, &pinned, libc::O_RDONLY).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(sys::pread(again.as_fd(), &mut buf, 0).unwrap(), 6);
    assert_eq!(&buf[..6], b"file 0");
    drop((fd, again, open));
    // Unpinned, it is evicted like any other, and then (path mode) lost with its name.
    s.unpin(&pinned);
    assert_eq!(pinned.opens(), 0);
    for i in 1..200 {
        let (n, _) = look(&s, &format!("f{i}"), false);
        s.fd(Via::NONE, &n).unwrap();
    }
    assert!(!pinned.has_fd());
    assert_eq!(errno(s.fd(Via::NONE, &pinned)), Some(libc::ENOENT));
    // Unpinning more often than pinning does not wrap.
    s.unpin(&pinned);
    assert_eq!(pinned.opens(), 0);
}

#[test]
fn created_objects_come_back_pinned() {
    let dir = Scratch::new("created");
    let s = store(dir.path(), InodeMode::Auto, 16);
    let root = s.root().clone();
    let pfd = s.fd(Via::NONE, &root).unwrap();
    let fd = sys::openat(
        pfd.as_fd(),
        OsStr::new("new"),
        libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
        0o600,
    )
    .unwrap();
    let st = sys::fstat(fd.as_fd()).unwrap();
    let inode = s
        .pin_created(
            Via::NONE,
            &root,
            pfd.as_fd(),
            OsStr::new("new"),
            &st,
            true,
            fd.as_fd(),
        )
        .unwrap();
    assert_eq!((inode.opens(), inode.lookups()), (1, 1));
    assert!(inode.has_fd());
    let cached = s.fd(Via::NONE, &inode).unwrap();
    let cst = sys::fstat(cached.as_fd()).unwrap();
    assert_eq!((cst.dev, cst.ino), (st.dev, st.ino));
    // A second open of the same object pins it once more.
    let (same, _) = look(&s, "new", false);
    assert!(Arc::ptr_eq(&same, &inode));
    let second = s.open_pinned(Via::NONE, &inode, libc::O_RDONLY).unwrap();
    assert_eq!(inode.opens(), 2);
    drop(second);
    s.unpin(&inode);
    s.unpin(&inode);
    assert_eq!(inode.opens(), 0);
}
