//! The inode table and its descriptor cache, without a mount.

use super::*;

fn table() -> InodeTable {
    InodeTable::new(vec![None, None], 16)
}

#[test]
fn record_ids_are_node_ids_and_hard_links_share_them() {
    let t = table();
    let root = t.root().clone();
    let a = t.lookup(&root, OsStr::new("a"), libc::S_IFREG, Some(77), || None);
    assert_eq!(a.nodeid, 77);
    let b = t.lookup(&root, OsStr::new("b"), libc::S_IFREG, Some(77), || None);
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(b.loc().name, "b");
    t.forget(77, 1, drop_fd);
    assert!(t.get(77).is_ok());
    t.forget(77, 1, drop_fd);
    assert!(t.get(77).is_err());
    // Looked up again later: the same number.
    assert_eq!(
        t.lookup(&root, OsStr::new("a"), libc::S_IFREG, Some(77), || None)
            .nodeid,
        77
    );
}

#[test]
fn counter_ids_follow_names() {
    let t = table();
    let root = t.root().clone();
    let s = t.lookup(&root, OsStr::new("s"), libc::S_IFLNK, None, || None);
    assert!(s.nodeid >= COUNTER_BASE);
    let again = t.lookup(&root, OsStr::new("s"), libc::S_IFLNK, None, || None);
    assert!(Arc::ptr_eq(&s, &again));
    t.moved(&s, &root, OsStr::new("s"), &root, OsStr::new("t"));
    let other = t.lookup(&root, OsStr::new("s"), libc::S_IFLNK, None, || None);
    assert_ne!(other.nodeid, s.nodeid);
    let moved = t.lookup(&root, OsStr::new("t"), libc::S_IFLNK, None, || None);
    assert!(Arc::ptr_eq(&moved, &s));
    let d = t.lookup(&root, OsStr::new("d"), libc::S_IFDIR, Some(5), || None);
    let f = t.lookup(&d, OsStr::new("f"), libc::S_IFREG, Some(6), || None);
    assert_eq!(f.path(), b"d/f");
}

/// What the table lets go, closed outside any request.
fn drop_fd(_: usize, fd: fsprof_fuse::toolkit::fdcache::Fd) {
    drop(fd);
}

fn path_fd() -> OwnedFd {
    fsprof_fuse::sys::open_path("/".as_ref(), libc::O_PATH).unwrap()
}

/// Regression: the descriptor cache kept a ring entry (and the inode's memory) for every
/// directory ever cached, so a loop of mkdir/rmdir grew the daemon without bound.
#[test]
fn directories_made_and_removed_leave_the_cache_bounded() {
    let t = InodeTable::new(vec![None, None], 64);
    let root = t.root().clone();
    let d = t.lookup(&root, OsStr::new("d"), libc::S_IFDIR, Some(5), || None);
    t.cache_fd(&d, 0, path_fd(), drop_fd);
    let mut most = 0;
    for i in 0..25_000u64 {
        // mkdir d/x: its entry, and its descriptors on both branches (as `dir_fd`).
        let x = t.lookup(&d, OsStr::new("x"), libc::S_IFDIR, Some(100 + i), || None);
        t.cache_fd(&x, 0, path_fd(), drop_fd);
        t.cache_fd(&x, 1, path_fd(), drop_fd);
        // rmdir d/x, then the kernel forgets it.
        t.removed(&d, OsStr::new("x"), Some(&x), drop_fd);
        t.forget(x.nodeid, 1, drop_fd);
        most = most.max(t.cache_entries());
    }
    assert!(most <= 2 * 64 + 1, "{most} entries in the cache's rings");
    assert_eq!((t.cached_fds(), t.len()), (1, 2));
}

#[test]
fn open_directories_and_kept_files_hold_their_descriptors_until_the_last_release() {
    let t = InodeTable::new(vec![None, None], 16);
    let root = t.root().clone();
    let f = t.lookup(&root, OsStr::new("f"), libc::S_IFREG, Some(9), || None);
    let d = t.lookup(&root, OsStr::new("d"), libc::S_IFDIR, Some(10), || None);
    t.open_file(&f);
    t.open_file(&f);
    // The file lost a name while open: its parts are kept.
    t.keep_parts(&f);
    t.cache_part(&f, 1, Arc::new(path_fd()), drop_fd);
    t.pin(&d);
    t.cache_fd(&d, 0, path_fd(), drop_fd);
    churn(&t, 200);
    assert!(t.cached_fds() <= 16 + 2 + 2, "{}", t.cached_fds());
    assert!(f.cached_fd(1).is_some() && d.cached_fd(0).is_some());
    // Removed while open: kept.
    t.removed(&root, OsStr::new("d"), Some(&d), drop_fd);
    assert!(d.cached_fd(0).is_some());
    t.unpin(&d);
    // The file's parts go at its last release only.
    assert!(t.close_file(&f).is_none());
    assert!(f.cached_fd(1).is_some());
    let parts = t.close_file(&f).expect("the last release takes the parts");
    assert!(parts[1].is_some() && parts[0].is_none());
    assert!(f.cached_fd(1).is_none());
    assert_eq!(f.opens(), 0);
    assert!(!t.kept(&f));
}

/// Caches two descriptors each of `n` other directories: far beyond a small capacity.
fn churn(t: &InodeTable, n: u64) {
    let root = t.root().clone();
    for i in 0..n {
        let name = format!("o{i}");
        let o = t.lookup(
            &root,
            OsStr::new(&name),
            libc::S_IFDIR,
            Some(1000 + i),
            || None,
        );
        t.cache_fd(&o, 0, path_fd(), drop_fd);
        t.cache_fd(&o, 1, path_fd(), drop_fd);
    }
}

/// Regression (issue 32): open files pinned their parts, so a client holding more files
/// open than a third of the daemon's descriptor limit ran it out of descriptors. The
/// parts of open files that keep their name are evicted like any descriptor (and opened
/// again by the next request on them); the last release still takes what is cached.
#[test]
fn open_files_parts_count_against_the_capacity() {
    let t = InodeTable::new(vec![None, None], 16);
    let root = t.root().clone();
    let files: Vec<_> = (0..200u64)
        .map(|i| {
            let name = format!("f{i}");
            let f = t.lookup(
                &root,
                OsStr::new(&name),
                libc::S_IFREG,
                Some(100 + i),
                || None,
            );
            t.open_file(&f);
            t.cache_part(&f, 0, Arc::new(path_fd()), drop_fd);
            t.cache_part(&f, 1, Arc::new(path_fd()), drop_fd);
            f
        })
        .collect();
    assert!(
        t.cached_fds() <= 16 + 2,
        "{} descriptors cached",
        t.cached_fds()
    );
    assert!(files.iter().all(|f| f.opens() == 1));
    let cached = files.iter().filter(|f| f.cached_fd(0).is_some()).count();
    assert!(
        cached > 0 && cached < 200,
        "{cached} files hold their parts"
    );
    // The last release of each takes what it still has, and nothing else.
    let before = t.cached_fds();
    let mut taken = 0;
    for f in &files {
        let parts = t.close_file(f).expect("the last release");
        taken += parts.iter().flatten().count();
        assert_eq!(f.opens(), 0);
    }
    assert_eq!((taken, t.cached_fds()), (before, 0));
}

#[test]
fn ids_are_distinct_and_in_range() {
    let mut seen = std::collections::HashSet::new();
    for _ in 0..10000 {
        let id = new_id();
        assert!(id > ROOT_ID && id < COUNTER_BASE);
        assert!(seen.insert(id));
    }
}
