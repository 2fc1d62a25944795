//! Namespace operations reach every branch alike, and a refusal part-way is undone.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;
use test_support::{Transport, transports};

use raif::inode::name_hash;

use crate::fixture::{Fixture, Immutable, errno, xattr_get, xattr_set, xattr_set_result};

/// Every entry under `dir` (recursively, RAIF's own files left out): path → (type and mode,
/// owner, symlink target).
fn tree(dir: &Path) -> BTreeMap<String, (u32, u32, u32, Option<String>)> {
    fn go(base: &Path, dir: &Path, out: &mut BTreeMap<String, (u32, u32, u32, Option<String>)>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(".raif") {
                continue;
            }
            let p = e.path();
            let md = fs::symlink_metadata(&p).unwrap();
            let target = md
                .file_type()
                .is_symlink()
                .then(|| fs::read_link(&p).unwrap().display().to_string());
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            out.insert(rel, (md.mode(), md.uid(), md.gid(), target));
            if md.is_dir() {
                go(base, &p, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    go(dir, dir, &mut out);
    out
}

/// A name that `lookup` and `rename` ask branch `not` nothing about (they ask one branch,
/// chosen by name hash; this one's goes elsewhere).
fn name_not_looked_up_on(prefix: &str, not: usize, n: usize) -> String {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .find(|s| ((name_hash(s.as_bytes()) >> 16) % n as u64) as usize != not)
        .unwrap()
}

transports!(namespace_operations_reach_every_branch);

fn namespace_operations_reach_every_branch(t: Transport) {
    let Some(f) = Fixture::mounted(t, "namespace", 3, &["--level", "5", "--stripe", "4K"]) else {
        return;
    };
    fs::create_dir_all(f.m("d/e")).unwrap();
    fs::write(f.m("d/f"), vec![7u8; 10_000]).unwrap();
    fs::write(f.m("d/old"), b"replaced").unwrap();
    symlink("d/f", f.m("s")).unwrap();
    fs::hard_link(f.m("d/f"), f.m("d/g")).unwrap();
    fs::set_permissions(f.m("d/f"), fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(f.m("d/f"), Some(1234), Some(5678)).unwrap();
    fs::rename(f.m("d/f"), f.m("d/h")).unwrap();
    fs::write(f.m("d/tmp"), b"x").unwrap();
    fs::rename(f.m("d/tmp"), f.m("d/old")).unwrap(); // over an existing file
    fs::create_dir(f.m("gone")).unwrap();
    fs::remove_dir(f.m("gone")).unwrap();
    fs::write(f.m("d/unlinked"), b"x").unwrap();
    fs::remove_file(f.m("d/unlinked")).unwrap();
    xattr_set(&f.m("d/h"), "user.color", b"blue");
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    fs::File::options()
        .write(true)
        .open(f.m("d/h"))
        .unwrap()
        .set_modified(t)
        .unwrap();

    // Through the mount.
    let h = fs::metadata(f.m("d/h")).unwrap();
    let g = fs::metadata(f.m("d/g")).unwrap();
    assert_eq!(h.ino(), g.ino(), "hard links are one inode");
    assert_eq!(h.nlink(), 2);
    assert_eq!(h.mode() & 0o7777, 0o640);
    assert_eq!((h.uid(), h.gid()), (1234, 5678));
    assert_eq!(h.mtime(), 1_000_000_000);
    assert_eq!(fs::read(f.m("d/old")).unwrap(), b"x");
    assert_eq!(fs::read_link(f.m("s")).unwrap(), Path::new("d/f"));
    assert_eq!(xattr_get(&f.m("d/h"), "user.color"), Some(b"blue".to_vec()));
    let listed: Vec<String> = fs::read_dir(&f.mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!listed.iter().any(|n| n.starts_with('.')), "{listed:?}");
    assert_eq!(errno(fs::remove_file(f.m(".raif"))), libc::EPERM);
    assert_eq!(errno(fs::write(f.m(".raif-branch"), b"x")), libc::EPERM);

    // On the branches: the same tree everywhere, as the mount shows it.
    let want = tree(&f.mnt);
    for i in 0..3 {
        assert_eq!(tree(&f.branches[i]), want, "branch {i}");
        assert_eq!(
            xattr_get(&f.b(i, "d/h"), "user.color"),
            Some(b"blue".to_vec())
        );
        assert_eq!(fs::metadata(f.b(i, "d/h")).unwrap().mtime(), 1_000_000_000);
    }
    // The record is neither listed nor changeable through the mount.
    assert_eq!(xattr_get(&f.m("d/h"), "user.raif"), None);
    assert!(xattr_set_result(&f.m("d/h"), "user.raif", b"x").is_err());
}

transports!(a_refusal_part_way_is_undone);

fn a_refusal_part_way_is_undone(t: Transport) {
    let Some(f) = Fixture::mounted(t, "undo", 3, &["--level", "1"]) else {
        return;
    };
    // mkdir: branch 2 already has a file of that name (made behind the mount's back).
    let clash = name_not_looked_up_on("clash", 2, 3);
    fs::write(f.b(2, &clash), b"in the way").unwrap();
    assert_eq!(errno(fs::create_dir(f.m(&clash))), libc::EEXIST);
    for i in 0..2 {
        assert!(!f.b(i, &clash).exists(), "branch {i} kept the directory");
    }
    // rename: branch 2 has a non-empty directory where the file would go.
    let victim = name_not_looked_up_on("victim", 2, 3);
    fs::write(f.m(&victim), b"v").unwrap();
    let target = name_not_looked_up_on("target", 2, 3);
    fs::create_dir(f.b(2, &target)).unwrap();
    fs::write(f.b(2, &format!("{target}/x")), b"x").unwrap();
    assert!(fs::rename(f.m(&victim), f.m(&target)).is_err());
    for i in 0..3 {
        assert!(f.b(i, &victim).exists(), "branch {i} lost the renamed file");
    }
    for i in 0..2 {
        assert!(!f.b(i, &target).exists(), "branch {i} kept the new name");
    }
    assert_eq!(fs::read(f.m(&victim)).unwrap(), b"v");
    // Every branch still online: nothing diverged.
    for i in 0..3 {
        assert_eq!(f.state(i), "online");
    }
}

transports!(symlink_link_and_attribute_changes_refused_part_way_are_undone);

/// Every kind of change refused by the last branch (its object or directory made immutable
/// with `chattr +i`) is undone on the branches already changed, and nothing is failed.
fn symlink_link_and_attribute_changes_refused_part_way_are_undone(t: Transport) {
    let Some(f) = Fixture::mounted(t, "undo-attrs", 3, &["--level", "5", "--stripe", "4K"]) else {
        return;
    };
    fs::create_dir(f.m("d")).unwrap();
    fs::write(f.m("file"), vec![3u8; 9000]).unwrap();
    fs::write(f.m("locked"), vec![4u8; 9000]).unwrap();
    xattr_set(&f.m("locked"), "user.color", b"red");
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_500_000_000);
    fs::File::options()
        .write(true)
        .open(f.m("locked"))
        .unwrap()
        .set_modified(t)
        .unwrap();
    let before: Vec<_> = (0..3).map(|i| tree(&f.branches[i])).collect();
    let mtime = |i: usize| fs::metadata(f.b(i, "locked")).unwrap().mtime();
    {
        let _locked = Immutable::new(&[f.b(2, "d"), f.b(2, "locked")]);
        // symlink and link into a directory branch 2 will not change.
        assert_eq!(errno(symlink("../file", f.m("d/s"))), libc::EPERM);
        assert_eq!(errno(fs::hard_link(f.m("file"), f.m("d/h"))), libc::EPERM);
        // chmod, chown, utimens, setxattr and removexattr of a file branch 2 will not change.
        let perm = fs::Permissions::from_mode(0o600);
        assert_eq!(errno(fs::set_permissions(f.m("locked"), perm)), libc::EPERM);
        let chown = std::os::unix::fs::chown(f.m("locked"), Some(42), Some(43));
        assert_eq!(errno(chown), libc::EPERM);
        let touch = fs::File::options()
            .write(true)
            .open(f.m("locked"))
            .and_then(|h| h.set_modified(std::time::SystemTime::now()));
        assert!(touch.is_err(), "utimens on an immutable part");
        let r = xattr_set_result(&f.m("locked"), "user.color", b"blue");
        assert_eq!(errno(r), libc::EPERM);
        let r = xattr_set_result(&f.m("locked"), "user.new", b"x");
        assert_eq!(errno(r), libc::EPERM);
    }
    for (i, was) in before.iter().enumerate() {
        assert_eq!(&tree(&f.branches[i]), was, "branch {i} kept a change");
        assert_eq!(
            xattr_get(&f.b(i, "locked"), "user.color"),
            Some(b"red".to_vec())
        );
        assert_eq!(xattr_get(&f.b(i, "locked"), "user.new"), None, "branch {i}");
        assert_eq!(mtime(i), 1_500_000_000, "branch {i}");
        assert_eq!(f.state(i), "online");
    }
    let md = fs::metadata(f.m("locked")).unwrap();
    assert_eq!(
        (md.mode() & 0o7777, md.uid(), md.mtime()),
        (0o644, 0, 1_500_000_000)
    );
    assert_eq!(fs::read(f.m("locked")).unwrap(), vec![4u8; 9000]);
}

transports!(inode_numbers_survive_remounts_and_failures);

fn inode_numbers_survive_remounts_and_failures(t: Transport) {
    // No kernel caching of names and attributes: every stat asks the daemon.
    let args = [
        "--level",
        "5",
        "--entry-timeout",
        "0s",
        "--attr-timeout",
        "0s",
    ];
    let Some(mut f) = Fixture::mounted(t, "inodes", 3, &args) else {
        return;
    };
    fs::create_dir(f.m("dir")).unwrap();
    fs::write(f.m("dir/file"), b"data").unwrap();
    symlink("file", f.m("dir/link")).unwrap();
    let ino = |f: &Fixture, p: &str| fs::symlink_metadata(f.m(p)).unwrap().ino();
    let ids = |f: &Fixture| (ino(f, "dir"), ino(f, "dir/file"), ino(f, "dir/link"));
    let before = ids(&f);
    // Branch 0 fails: other branches answer, with the same numbers.
    fs::write(f.m(".raif"), b"fail 0\n").unwrap();
    assert_eq!(ids(&f), before);
    // After a remount (branch 0 back but stale) the directory and the file keep their numbers
    // (symlinks get counter ids, stable while mounted).
    f.unmount();
    f.mount(&args);
    assert_eq!(f.state(0), "stale");
    assert_eq!((ino(&f, "dir"), ino(&f, "dir/file")), (before.0, before.1));
}
