//! The passthrough over real temporary lower directories, without a mount: lookup counting,
//! what a lower file system does behind its back, errors in the middle of an operation
//! (`EACCES`, `ENOSPC` on a small tmpfs, a name too long, an injected lower error), listing
//! replies that refuse entries, and handles only closed by `release`.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use super::*;
use crate::filesystem::fake::{Listing, list};
use crate::passthrough::inode_store::InodeMode;
use crate::protocol::ops::Op;
use crate::records::inject::{Injector, Rule};

/// Both ways of locating inodes (`Auto` uses file handles where the lower file system and the
/// process allow them, as on ext4 as root).
const MODES: [InodeMode; 2] = [InodeMode::Paths, InodeMode::Auto];

fn lower_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("fsprof-passthrough-test-")
        .tempdir()
        .unwrap()
}

fn with_lower(dir: &Path, mode: InodeMode, lower: Lower) -> Passthrough {
    let cfg = PassthroughConfig {
        inode_mode: mode,
        fd_cache: 64,
        ..PassthroughConfig::default()
    };
    Passthrough::new(dir, cfg, lower, Device::new()).unwrap()
}

fn passthrough(dir: &Path, mode: InodeMode) -> Passthrough {
    with_lower(dir, mode, Lower::new(None))
}

/// A request of `op` by root.
fn req(op: Op) -> Request<'static> {
    Request::new(op, 1, Ino::ROOT, 0, 0, 0)
}

fn errno<T: std::fmt::Debug>(r: io::Result<T>) -> i32 {
    r.expect_err("an error").raw_os_error().unwrap_or(0)
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// The node of `name` in `parent` (one lookup counted).
fn lookup(fs: &Passthrough, parent: u64, name: &str) -> io::Result<u64> {
    Ok(fs.lookup(&req(Op::Lookup), Ino(parent), os(name))?.attr.ino)
}

/// Lookups the store counts for `ino` (0 once forgotten).
fn lookups(fs: &Passthrough, ino: u64) -> u64 {
    fs.store().get(ino).map_or(0, |i| i.lookups())
}

/// Open handles of `ino`.
fn opens(fs: &Passthrough, ino: u64) -> u32 {
    fs.store().get(ino).map_or(0, |i| i.opens())
}

fn read_at(fs: &Passthrough, ino: u64, fh: &FdHandle, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    let n = fs
        .read(&req(Op::Read), Ino(ino), fh, offset, &mut buf)
        .unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn lookups_are_counted_per_node_and_forgets_release_them() {
    for mode in MODES {
        let dir = lower_dir();
        std::fs::write(dir.path().join("a"), b"a").unwrap();
        let fs = passthrough(dir.path(), mode);
        let r = &req(Op::Mkdir);
        let a = lookup(&fs, 1, "a").unwrap();
        assert_eq!(lookup(&fs, 1, "a").unwrap(), a);
        assert_eq!(lookups(&fs, a), 2);
        let d = fs.mkdir(r, Ino::ROOT, os("d"), 0o755).unwrap().attr.ino;
        let (f, o) = fs.create(r, Ino(d), os("f"), 0o644, libc::O_RDWR).unwrap();
        let f = f.attr.ino;
        assert_eq!((lookups(&fs, d), lookups(&fs, f), opens(&fs, f)), (1, 1, 1));
        fs.release(&req(Op::Release), Ino(f), o.fh).unwrap();
        assert_eq!(opens(&fs, f), 0);
        // A hard link is one more lookup of the same node; new objects one each.
        let hard = fs.link(r, Ino(a), Ino(d), os("hard")).unwrap().attr.ino;
        assert_eq!((hard, lookups(&fs, a)), (a, 3));
        let l = fs.symlink(r, Ino(d), os("l"), Path::new("f")).unwrap();
        let p = fs
            .mknod(r, Ino(d), os("p"), libc::S_IFIFO | 0o600, 0)
            .unwrap();
        assert_eq!((lookups(&fs, l.attr.ino), lookups(&fs, p.attr.ino)), (1, 1));
        assert_eq!(fs.store().len(), 6, "{mode:?}: root, a, d, f, l, p");
        // Forgetting part keeps the node; forgetting all drops it.
        let forget = &req(Op::Forget);
        fs.forget(forget, Ino(a), 2);
        assert!(fs.getattr(&req(Op::Getattr), Ino(a), None).is_ok());
        fs.forget(forget, Ino(a), 1);
        let gone = fs.getattr(&req(Op::Getattr), Ino(a), None);
        assert_eq!(errno(gone), libc::ESTALE, "{mode:?}");
        for ino in [d, f, l.attr.ino, p.attr.ino] {
            fs.forget(forget, Ino(ino), 1);
        }
        assert_eq!(fs.store().len(), 1, "{mode:?}: only the root is left");
        // The root is never forgotten.
        fs.forget(forget, Ino::ROOT, 10);
        assert!(fs.getattr(&req(Op::Getattr), Ino::ROOT, None).is_ok());
    }
}

#[test]
fn a_listing_counts_a_lookup_per_entry_sent_and_none_for_one_refused() {
    for mode in MODES {
        let dir = lower_dir();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        for i in 0..5 {
            std::fs::write(dir.path().join(format!("sub/f{i}")), b"x").unwrap();
        }
        let fs = passthrough(dir.path(), mode);
        let sub = lookup(&fs, 1, "sub").unwrap();
        let dh = fs.opendir(&req(Op::Opendir), Ino(sub), 0).unwrap().fh;
        // Two entries a reply: every third one is looked up, refused, and given back.
        let got = list(&fs, &req(Op::Readdirplus), Ino(sub), &dh, 2, true);
        let mut names = got.names();
        names.sort();
        assert_eq!(names, [".", "..", "f0", "f1", "f2", "f3", "f4"]);
        // Each file once ("." and ".." count nothing: the kernel makes no entry for them).
        for (ino, _, name) in got.entries.iter().filter(|e| e.2 != "." && e.2 != "..") {
            assert_eq!(lookups(&fs, *ino), 1, "{mode:?}: {name:?}");
        }
        assert_eq!((lookups(&fs, 1), lookups(&fs, sub)), (1, 1));
        assert_eq!(fs.store().len(), 7, "{mode:?}: root, sub and the 5 files");
        // A plain listing counts nothing.
        let plain = list(&fs, &req(Op::Readdir), Ino(sub), &dh, 3, false);
        assert_eq!(plain.entries.len(), 7);
        assert_eq!(fs.store().len(), 7);
        fs.releasedir(&req(Op::Releasedir), Ino(sub), dh).unwrap();
        assert_eq!(opens(&fs, sub), 0);
    }
}

/// A listing reply that removes every lower file of `dir` but the first one it is given,
/// the moment it is given one (after the lower directory was read).
struct Removing<'a> {
    dir: &'a Path,
    inner: Listing,
}

impl DirPlusSink for Removing<'_> {
    fn add(&mut self, entry: &Entry, offset: u64, name: &OsStr) -> bool {
        let first = !name.as_encoded_bytes().starts_with(b".")
            && !self.inner.names().iter().any(|n| n.starts_with('f'));
        if first {
            for e in std::fs::read_dir(self.dir).unwrap() {
                let e = e.unwrap();
                if e.file_name() != name {
                    std::fs::remove_file(e.path()).unwrap();
                }
            }
        }
        DirPlusSink::add(&mut self.inner, entry, offset, name)
    }
}

#[test]
fn entries_removed_during_a_listing_are_left_out_and_not_counted() {
    for mode in MODES {
        let dir = lower_dir();
        for i in 0..10 {
            std::fs::write(dir.path().join(format!("f{i}")), b"x").unwrap();
        }
        let fs = passthrough(dir.path(), mode);
        let dh = fs.opendir(&req(Op::Opendir), Ino::ROOT, 0).unwrap().fh;
        let mut out = Removing {
            dir: dir.path(),
            inner: Listing::new(100),
        };
        let r = &req(Op::Readdirplus);
        fs.readdirplus(r, Ino::ROOT, &dh, 0, &mut out).unwrap();
        let files: Vec<_> = out
            .inner
            .names()
            .into_iter()
            .filter(|n| n.starts_with('f'))
            .collect();
        assert_eq!(files.len(), 1, "{mode:?}: {files:?}");
        assert_eq!(
            fs.store().len(),
            2,
            "{mode:?}: root and the one file listed"
        );
    }
}

#[test]
fn a_lower_file_removed_or_replaced_behind_the_mounts_back() {
    for mode in MODES {
        let dir = lower_dir();
        let path = |n: &str| dir.path().join(n);
        std::fs::write(path("a"), b"data a").unwrap();
        std::fs::write(path("b"), b"data b").unwrap();
        let fs = passthrough(dir.path(), mode);
        let handles = fs.store().uses_handles();
        let (a, b) = (lookup(&fs, 1, "a").unwrap(), lookup(&fs, 1, "b").unwrap());
        std::fs::remove_file(path("a")).unwrap();
        std::fs::write(path("c"), b"other").unwrap();
        std::fs::rename(path("c"), path("b")).unwrap();
        for (ino, data) in [(a, &b"data a"[..]), (b, b"data b")] {
            let open = fs.open(&req(Op::Open), Ino(ino), libc::O_RDONLY);
            if handles {
                // Found by its handle (or its cached descriptor): still the object looked up.
                let fh = open.unwrap().fh;
                assert_eq!(read_at(&fs, ino, &fh, 0, 64), data);
                fs.release(&req(Op::Release), Ino(ino), fh).unwrap();
            } else {
                // By name: gone, or another object now (never the wrong file's data).
                let want = if ino == a { libc::ENOENT } else { libc::ESTALE };
                assert_eq!(errno(open), want, "{mode:?}");
            }
            assert_eq!(opens(&fs, ino), 0, "{mode:?}: no pin left behind");
        }
        // The name now leads to the new object, a node of its own.
        let now = lookup(&fs, 1, "b").unwrap();
        assert_ne!(now, b);
        let fh = fs
            .open(&req(Op::Open), Ino(now), libc::O_RDONLY)
            .unwrap()
            .fh;
        assert_eq!(read_at(&fs, now, &fh, 0, 64), b"other");
        assert_eq!(errno(lookup(&fs, 1, "a")), libc::ENOENT);
    }
}

#[test]
fn a_rename_through_the_mount_keeps_nodes_found_by_name() {
    let dir = lower_dir();
    std::fs::write(dir.path().join("a"), b"data a").unwrap();
    std::fs::write(dir.path().join("b"), b"data b").unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    let fs = passthrough(dir.path(), InodeMode::Paths);
    let (a, b, d) = (
        lookup(&fs, 1, "a").unwrap(),
        lookup(&fs, 1, "b").unwrap(),
        lookup(&fs, 1, "d").unwrap(),
    );
    let r = &req(Op::Rename);
    fs.rename(r, Ino::ROOT, os("a"), Ino(d), os("moved"), 0)
        .unwrap();
    fs.rename(
        r,
        Ino(d),
        os("moved"),
        Ino::ROOT,
        os("b"),
        libc::RENAME_EXCHANGE,
    )
    .unwrap();
    // a is /b now, b is /d/moved: each node still opens its own object.
    for (ino, data) in [(a, &b"data a"[..]), (b, b"data b")] {
        let fh = fs
            .open(&req(Op::Open), Ino(ino), libc::O_RDONLY)
            .unwrap()
            .fh;
        assert_eq!(read_at(&fs, ino, &fh, 0, 64), data);
        fs.release(&req(Op::Release), Ino(ino), fh).unwrap();
    }
    assert_eq!(lookup(&fs, d, "moved").unwrap(), b);
}

#[test]
fn names_too_long_are_refused_and_make_nothing() {
    let dir = lower_dir();
    std::fs::write(dir.path().join("a"), b"a").unwrap();
    let fs = passthrough(dir.path(), InodeMode::Auto);
    let a = lookup(&fs, 1, "a").unwrap();
    let long = "x".repeat(sys::NAME_MAX + 1);
    let n = os(&long);
    let r = &req(Op::Create);
    let root = Ino::ROOT;
    assert_eq!(errno(fs.lookup(r, root, n)), libc::ENAMETOOLONG);
    assert_eq!(errno(fs.create(r, root, n, 0o644, 0)), libc::ENAMETOOLONG);
    assert_eq!(errno(fs.mkdir(r, root, n, 0o755)), libc::ENAMETOOLONG);
    assert_eq!(
        errno(fs.mknod(r, root, n, libc::S_IFIFO, 0)),
        libc::ENAMETOOLONG
    );
    assert_eq!(
        errno(fs.symlink(r, root, n, Path::new("a"))),
        libc::ENAMETOOLONG
    );
    assert_eq!(errno(fs.link(r, Ino(a), root, n)), libc::ENAMETOOLONG);
    assert_eq!(
        errno(fs.rename(r, root, os("a"), root, n, 0)),
        libc::ENAMETOOLONG
    );
    assert_eq!(errno(fs.unlink(r, root, n)), libc::ENAMETOOLONG);
    assert_eq!(fs.store().len(), 2, "root and a");
    assert_eq!(lookups(&fs, a), 1);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn a_caller_without_the_right_gets_eacces_and_nothing_is_made() {
    let dir = lower_dir();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let fs = passthrough(dir.path(), InodeMode::Auto);
    let ro_ino = Ino(lookup(&fs, 1, "ro").unwrap());
    // Root makes objects as the caller (not as itself); anyone else is not root anyway.
    let user = Request::new(Op::Create, 1, ro_ino, 0, 1000, 1000);
    assert_eq!(
        errno(fs.create(&user, ro_ino, os("f"), 0o644, 0)),
        libc::EACCES
    );
    assert_eq!(errno(fs.mkdir(&user, ro_ino, os("d"), 0o755)), libc::EACCES);
    assert_eq!(
        errno(fs.mknod(&user, ro_ino, os("p"), libc::S_IFIFO, 0)),
        libc::EACCES
    );
    let t = Path::new("t");
    assert_eq!(errno(fs.symlink(&user, ro_ino, os("l"), t)), libc::EACCES);
    assert_eq!(fs.store().len(), 2);
    assert_eq!(std::fs::read_dir(&ro).unwrap().count(), 0);
    if sys::geteuid() != 0 {
        return;
    }
    // In a directory of the caller's the object is theirs; the thread is root again after.
    let mine = dir.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::os::unix::fs::chown(&mine, Some(1000), Some(1000)).unwrap();
    let mine_ino = Ino(lookup(&fs, 1, "mine").unwrap());
    let user = Request::new(Op::Mkdir, 1, mine_ino, 0, 1000, 1000);
    fs.mkdir(&user, mine_ino, os("theirs"), 0o755).unwrap();
    fs.mkdir(&req(Op::Mkdir), mine_ino, os("roots"), 0o755)
        .unwrap();
    let owner = |n: &str| std::fs::metadata(mine.join(n)).unwrap().uid();
    assert_eq!((owner("theirs"), owner("roots")), (1000, 0));
}

#[test]
fn an_injected_lower_error_stands_in_for_the_call() {
    let dir = lower_dir();
    let rule = Rule::parse("lower=pwrite,every=2,errno=ENOSPC").unwrap();
    let inject = Arc::new(Injector::new(vec![rule], None));
    let lower = Lower::new(None).injecting(Some(inject.clone()));
    let fs = with_lower(dir.path(), InodeMode::Auto, lower);
    let (e, o) = fs
        .create(&req(Op::Create), Ino::ROOT, os("f"), 0o644, libc::O_RDWR)
        .unwrap();
    let w = |offset| {
        let r = fs.write(
            &req(Op::Write),
            Ino(e.attr.ino),
            &o.fh,
            offset,
            b"abcd",
            WriteFlags::default(),
        );
        r.err().and_then(|e| e.raw_os_error())
    };
    let got: Vec<_> = [0, 4, 8, 12].into_iter().map(w).collect();
    assert_eq!(got, [None, Some(libc::ENOSPC), None, Some(libc::ENOSPC)]);
    assert_eq!(inject.injected(), 2);
    let data = std::fs::read(dir.path().join("f")).unwrap();
    assert_eq!(data, b"abcd\0\0\0\0abcd", "the failed writes wrote nothing");
    fs.release(&req(Op::Release), Ino(e.attr.ino), o.fh)
        .unwrap();
}

#[test]
fn an_open_handle_is_closed_by_release_only() {
    let dir = lower_dir();
    std::fs::write(dir.path().join("a"), b"hello").unwrap();
    let fs = passthrough(dir.path(), InodeMode::Auto);
    let a = lookup(&fs, 1, "a").unwrap();
    let fh = fs.open(&req(Op::Open), Ino(a), libc::O_RDWR).unwrap().fh;
    assert_eq!(read_at(&fs, a, &fh, 0, 3), b"hel");
    // A flush (each close(2) of the caller) closes a duplicate, not the handle's descriptor.
    fs.flush(&req(Op::Flush), Ino(a), &fh).unwrap();
    fs.fsync(&req(Op::Fsync), Ino(a), &fh, true).unwrap();
    // A reply buffer larger than what is left gets what is left.
    assert_eq!(read_at(&fs, a, &fh, 3, 4096), b"lo");
    // The file removed from under the open handle stays readable through it.
    std::fs::remove_file(dir.path().join("a")).unwrap();
    assert_eq!(read_at(&fs, a, &fh, 0, 64), b"hello");
    let st = fs.getattr(&req(Op::Getattr), Ino(a), Some(&fh)).unwrap();
    assert_eq!((st.attr.size, st.attr.nlink), (5, 0));
    assert_eq!(opens(&fs, a), 1);
    fs.release(&req(Op::Release), Ino(a), fh).unwrap();
    assert_eq!(opens(&fs, a), 0);
}

/// A tmpfs mounted on a temporary directory (unmounted when dropped, lazily if still busy);
/// `None` (with a note) when not root, outside CI.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(options: &str) -> Option<Tmpfs> {
        if sys::geteuid() != 0 {
            assert!(
                std::env::var_os("CI").is_none(),
                "mounting a tmpfs needs root, which CI has"
            );
            eprintln!("skipped: mounting a tmpfs needs root");
            return None;
        }
        let dir = lower_dir();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "fsprof-test"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mount -t tmpfs -o {options}");
        Some(Tmpfs(dir))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let umount = |lazy: bool| {
            let mut c = Command::new("umount");
            if lazy {
                c.arg("-l");
            }
            c.arg(self.0.path()).status().is_ok_and(|s| s.success())
        };
        if !umount(false) {
            umount(true);
        }
    }
}

#[test]
fn a_full_lower_file_system_gives_enospc_and_keeps_what_was_written() {
    let Some(tmp) = Tmpfs::mount("size=64k,nr_inodes=16") else {
        return;
    };
    let fs = passthrough(tmp.path(), InodeMode::Auto);
    let (e, o) = fs
        .create(&req(Op::Create), Ino::ROOT, os("big"), 0o644, libc::O_RDWR)
        .unwrap();
    let big = e.attr.ino;
    let chunk = 16 * 1024;
    let mut written = 0u64;
    let mut failed = None;
    for i in 0..64u8 {
        let data = vec![i + 1; chunk];
        let r = fs.write(
            &req(Op::Write),
            Ino(big),
            &o.fh,
            written,
            &data,
            WriteFlags::default(),
        );
        match r {
            Ok(n) => written += u64::from(n),
            Err(e) => {
                failed = e.raw_os_error();
                break;
            }
        }
    }
    assert_eq!(failed, Some(libc::ENOSPC));
    assert!(written > 0 && written <= 64 * 1024, "{written}");
    let st = fs
        .getattr(&req(Op::Getattr), Ino(big), Some(&o.fh))
        .unwrap();
    assert_eq!(st.attr.size, written);
    let back = read_at(&fs, big, &o.fh, 0, written as usize);
    let want: Vec<u8> = (0..written as usize)
        .map(|i| (i / chunk) as u8 + 1)
        .collect();
    assert!(back == want, "the data written reads back whole");
    fs.release(&req(Op::Release), Ino(big), o.fh).unwrap();
    // Out of inodes: creates fail with ENOSPC and leave no node behind.
    let mut made = 0;
    let err = loop {
        let name = format!("f{made}");
        let r = &req(Op::Create);
        match fs.create(r, Ino::ROOT, os(&name), 0o644, libc::O_RDWR) {
            Ok((e, o)) => {
                fs.release(&req(Op::Release), Ino(e.attr.ino), o.fh)
                    .unwrap();
                made += 1;
                assert!(made < 100, "tmpfs never ran out of inodes");
            }
            Err(e) => break e,
        }
    };
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    let more = fs.mkdir(&req(Op::Mkdir), Ino::ROOT, os("d"), 0o755);
    assert_eq!(errno(more), libc::ENOSPC);
    assert_eq!(fs.store().len(), 2 + made, "root, big and the files made");
    drop(fs);
}

/// The lookups the kernel makes for a file handle of an object it forgot (`"."`, and `".."` to
/// reconnect a directory): answered from the lower handle kept at the forget, with the node id
/// and generation the object had; `ESTALE` once it is deleted, or in path mode.
#[test]
fn dot_and_dotdot_find_forgotten_objects_by_node_id() {
    for mode in MODES {
        let dir = lower_dir();
        std::fs::create_dir_all(dir.path().join("d/e")).unwrap();
        std::fs::write(dir.path().join("d/f"), b"x").unwrap();
        let fs = passthrough(dir.path(), mode);
        let r = req(Op::Lookup);
        let d = lookup(&fs, 1, "d").unwrap();
        let e = lookup(&fs, d, "e").unwrap();
        let f = fs.lookup(&r, Ino(d), os("f")).unwrap();
        // Known: itself, one more lookup.
        let again = fs.lookup(&r, Ino(f.attr.ino), os(".")).unwrap();
        assert_eq!(
            (again.attr.ino, again.generation),
            (f.attr.ino, f.generation)
        );
        assert_eq!(lookups(&fs, f.attr.ino), 2);
        // A directory's parent; LOWER's root is its own.
        assert_eq!(fs.lookup(&r, Ino(e), os("..")).unwrap().attr.ino, d);
        assert_eq!(fs.lookup(&r, Ino(d), os("..")).unwrap().attr.ino, 1);
        assert_eq!(fs.lookup(&r, Ino(1), os("..")).unwrap().attr.ino, 1);
        assert_eq!(
            errno(fs.lookup(&r, Ino(f.attr.ino), os(".."))),
            libc::ENOTDIR
        );
        // Forgotten: found again from its handle, or not at all by path.
        fs.forget(&r, Ino(f.attr.ino), 2);
        assert_eq!(lookups(&fs, f.attr.ino), 0);
        let found = fs.lookup(&r, Ino(f.attr.ino), os("."));
        if fs.store().uses_handles() {
            let found = found.unwrap();
            assert_eq!(
                (found.attr.ino, found.generation),
                (f.attr.ino, f.generation)
            );
            assert_eq!(lookups(&fs, f.attr.ino), 1);
            // Its parent, forgotten too, is found through "..".
            fs.forget(&r, Ino(e), 1);
            fs.forget(&r, Ino(d), 2);
            let e2 = fs.lookup(&r, Ino(e), os(".")).unwrap();
            assert_eq!(
                fs.lookup(&r, Ino(e2.attr.ino), os("..")).unwrap().attr.ino,
                d
            );
            fs.forget(&r, Ino(f.attr.ino), 1);
            std::fs::remove_file(dir.path().join("d/f")).unwrap();
            assert_eq!(errno(fs.lookup(&r, Ino(f.attr.ino), os("."))), libc::ESTALE);
        } else {
            assert_eq!(errno(found), libc::ESTALE);
        }
        // A node id never handed out.
        assert_eq!(errno(fs.lookup(&r, Ino(1 << 40), os("."))), libc::ESTALE);
    }
}
