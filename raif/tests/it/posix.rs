//! Hard links and renames of every file type behave as on a plain directory (and as through
//! fsprof-fuse): every name of an object shows one inode, with one link count, mode and owner;
//! a rename keeps the inode number; removing one name leaves the others reachable; and the
//! numbers of symlinks, FIFOs, devices and sockets stay the same across remounts.
//!
//! The mounts here cache no attributes (`--attr-timeout 0s`), so every `stat` asks the daemon
//! and sees what it answers, not what the kernel kept from an earlier answer.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;
use test_support::{Transport, transports};

use crate::fixture::{Fixture, errno};

const ARGS: &[&str] = &["--level", "5", "--stripe", "4K", "--attr-timeout", "0s"];

/// Makes one object of each kind in `dir`: a regular file, a FIFO, a character device, a
/// socket and a symlink; returns their names.
fn make_all(dir: &Path) -> Vec<&'static str> {
    fs::write(dir.join("reg"), b"data").unwrap();
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: valid NUL-terminated paths.
    unsafe {
        assert_eq!(libc::mkfifo(c(&dir.join("fifo")).as_ptr(), 0o644), 0);
        assert_eq!(
            libc::mknod(
                c(&dir.join("chr")).as_ptr(),
                libc::S_IFCHR | 0o644,
                libc::makedev(1, 3)
            ),
            0
        );
    }
    let sock = std::os::unix::net::UnixListener::bind(dir.join("sock")).unwrap();
    drop(sock);
    symlink("reg", dir.join("sym")).unwrap();
    vec!["reg", "fifo", "chr", "sock", "sym"]
}

/// (inode, links, mode, uid, gid) of `p` (not following a final symlink).
fn id(p: &Path) -> (u64, u64, u32, u32, u32) {
    let m = fs::symlink_metadata(p).unwrap_or_else(|e| panic!("lstat {}: {e}", p.display()));
    (m.ino(), m.nlink(), m.mode(), m.uid(), m.gid())
}

fn lchown(p: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(p, Some(uid), Some(gid)).unwrap();
}

transports!(links_of_every_file_type_share_inode_links_mode_and_owner);

fn links_of_every_file_type_share_inode_links_mode_and_owner(t: Transport) {
    let Some(f) = Fixture::mounted(t, "posix-links", 3, ARGS) else {
        return;
    };
    for name in make_all(&f.mnt) {
        let (a, b) = (f.m(name), f.m(&format!("{name}.link")));
        let before = id(&a);
        fs::hard_link(&a, &b).unwrap();
        let (ia, ib) = (id(&a), id(&b));
        assert_eq!(ia, ib, "{name}: both names");
        assert_eq!(ia.0, before.0, "{name}: the inode number stays");
        assert_eq!(ia.1, 2, "{name}: two links");
        // A change through one name shows through the other.
        lchown(&b, 65534, 65533);
        if name != "sym" {
            fs::set_permissions(&b, fs::Permissions::from_mode(0o600)).unwrap();
        }
        assert_eq!(id(&a), id(&b), "{name}: after chown and chmod");
        assert_eq!((id(&a).3, id(&a).4), (65534, 65533), "{name}");
        // Removing either name leaves the other reachable, with one link.
        fs::remove_file(&b).unwrap();
        let after = id(&a);
        assert_eq!(
            (after.0, after.1),
            (before.0, 1),
            "{name}: after unlinking the link"
        );
        fs::hard_link(&a, &b).unwrap();
        fs::remove_file(&a).unwrap();
        let after = id(&b);
        assert_eq!(
            (after.0, after.1),
            (before.0, 1),
            "{name}: after unlinking the first"
        );
        assert_eq!(errno(fs::symlink_metadata(&a)), libc::ENOENT, "{name}");
    }
}

transports!(lstat_of_a_name_after_removing_the_link_made_from_it);

/// Regression: a file reached by one name kept working by the last name it was looked up
/// by, so after `link a b; unlink b`, `lstat a` answered ENOENT (once the kernel asked).
fn lstat_of_a_name_after_removing_the_link_made_from_it(t: Transport) {
    let Some(f) = Fixture::mounted(t, "posix-lstat", 3, ARGS) else {
        return;
    };
    for name in make_all(&f.mnt) {
        let a = f.m(name);
        let ino = id(&a).0;
        for round in 0..3 {
            let b = f.m(&format!("{name}.{round}"));
            fs::hard_link(&a, &b).unwrap();
            assert_eq!(id(&b).0, ino);
            fs::remove_file(&b).unwrap();
            assert_eq!(
                id(&a),
                (ino, 1, id(&a).2, id(&a).3, id(&a).4),
                "{name} {round}"
            );
        }
    }
}

transports!(renames_keep_inode_numbers_and_they_survive_remounts);

fn renames_keep_inode_numbers_and_they_survive_remounts(t: Transport) {
    let Some(mut f) = Fixture::mounted(t, "posix-rename", 3, ARGS) else {
        return;
    };
    fs::create_dir(f.m("d")).unwrap();
    let names = make_all(&f.mnt);
    let mut inos = Vec::new();
    for name in &names {
        let before = id(&f.m(name));
        let to = f.m(&format!("d/{name}.moved"));
        fs::rename(f.m(name), &to).unwrap();
        let after = id(&to);
        assert_eq!(before, after, "{name}: renamed");
        assert_eq!(errno(fs::symlink_metadata(f.m(name))), libc::ENOENT);
        // Onto an existing object of another kind: replaced, the number is the mover's.
        fs::write(f.m("victim"), b"x").unwrap();
        fs::rename(&to, f.m("victim")).unwrap();
        assert_eq!(
            id(&f.m("victim")).0,
            before.0,
            "{name}: renamed over a file"
        );
        fs::rename(f.m("victim"), &to).unwrap();
        inos.push((to, before.0));
    }
    // The directory they are in moves too.
    fs::rename(f.m("d"), f.m("e")).unwrap();
    let moved: Vec<(std::path::PathBuf, u64)> = inos
        .iter()
        .map(|(p, ino)| (f.m("e").join(p.file_name().unwrap()), *ino))
        .collect();
    for (p, ino) in &moved {
        assert_eq!(id(p).0, *ino, "{}", p.display());
    }
    assert_eq!(f.unmount(), Some(0));
    f.mount(ARGS);
    // (In another order than they were made: numbers handed out in order of lookup would
    // come out the same otherwise.)
    for (p, ino) in moved.iter().rev() {
        assert_eq!(id(p).0, *ino, "{} after a remount", p.display());
    }
}

transports!(special_files_without_an_identity_get_one);

/// Objects made before special files had identities (no attribute on the branches) get one
/// when first looked up, the same on every branch, kept across remounts; hard links made then
/// (one inode on each branch) share it.
fn special_files_without_an_identity_get_one(t: Transport) {
    let Some(mut f) = Fixture::mounted(t, "posix-old", 3, ARGS) else {
        return;
    };
    assert_eq!(f.unmount(), Some(0));
    // As an older RAIF made them: the same objects on every branch, no identity.
    for b in 0..3 {
        let dir = f.branches[b].clone();
        make_all(&dir);
        fs::hard_link(dir.join("fifo"), dir.join("fifo.2")).unwrap();
        fs::remove_file(dir.join("reg")).unwrap(); // regular files need a record
    }
    f.mount(ARGS);
    let first: Vec<u64> = ["fifo", "fifo.2", "chr", "sock", "sym"]
        .iter()
        .map(|n| id(&f.m(n)).0)
        .collect();
    assert_eq!(first[0], first[1], "links share the identity given");
    assert_eq!(f.unmount(), Some(0));
    f.mount(ARGS);
    let again: Vec<u64> = ["fifo", "fifo.2", "chr", "sock", "sym"]
        .iter()
        .map(|n| id(&f.m(n)).0)
        .collect();
    assert_eq!(first, again);
    assert_eq!(f.unmount(), Some(0));
    let scrub = f.scrub(false);
    assert_eq!(scrub.code, 0, "{}", scrub.stdout);
}

transports!(rebuild_keeps_links_and_identities_of_special_files);

/// A rebuilt branch keeps hard links of special files and symlinks, and their identities.
fn rebuild_keeps_links_and_identities_of_special_files(t: Transport) {
    let Some(mut f) = Fixture::mounted(t, "posix-rebuild", 3, ARGS) else {
        return;
    };
    let names = make_all(&f.mnt);
    for name in &names {
        fs::hard_link(f.m(name), f.m(&format!("{name}.2"))).unwrap();
    }
    let before: Vec<u64> = names.iter().map(|n| id(&f.m(n)).0).collect();
    assert_eq!(f.unmount(), Some(0));
    let gone = f.root.join("b0.gone");
    fs::rename(&f.branches[0], &gone).unwrap();
    fs::create_dir(&f.branches[0]).unwrap();
    let out = f.rebuild(0, &f.branches[0].clone());
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    for name in &names {
        let a = fs::symlink_metadata(f.b(0, name)).unwrap();
        let b = fs::symlink_metadata(f.b(0, &format!("{name}.2"))).unwrap();
        assert_eq!(
            (a.ino(), a.nlink()),
            (b.ino(), 2),
            "{name} on the rebuilt branch"
        );
    }
    // Only the rebuilt branch answers now: the same numbers.
    fs::rename(&f.branches[1], f.root.join("b1.away")).unwrap();
    fs::rename(&f.branches[2], f.root.join("b2.away")).unwrap();
    fs::create_dir(&f.branches[1]).unwrap();
    fs::create_dir(&f.branches[2]).unwrap();
    f.mount(ARGS);
    let after: Vec<u64> = names.iter().map(|n| id(&f.m(n)).0).collect();
    assert_eq!(before, after);
}

transports!(unaligned_direct_io_is_refused_as_the_branches_refuse_it);

/// `O_DIRECT` reads and writes whose offset or length the branches' file system would refuse
/// (ext4: not a multiple of 512) were accepted, since the parts are not opened with
/// `O_DIRECT`. They are refused with EINVAL, as on the branches; aligned ones work.
fn unaligned_direct_io_is_refused_as_the_branches_refuse_it(t: Transport) {
    let Some(f) = Fixture::mounted(t, "odirect", 3, &["--level", "5", "--stripe", "4K"]) else {
        return;
    };
    let dd = |args: String| {
        let o = std::process::Command::new("dd")
            .args(args.split(' '))
            .arg("status=none")
            .output()
            .expect("dd");
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (m, b0) = (f.mnt.display(), f.branches[0].display());
    // On a branch itself, for comparison.
    let on_branch = dd(format!(
        "if=/dev/urandom of={b0}/probe bs=1000 count=1 oflag=direct"
    ));
    if on_branch.0 {
        eprintln!("SKIPPED: the branches take unaligned direct writes");
        return;
    }
    fs::remove_file(f.b(0, "probe")).unwrap();
    let aligned = dd(format!(
        "if=/dev/urandom of={m}/a bs=4096 count=4 oflag=direct"
    ));
    assert!(aligned.0, "{}", aligned.1);
    let odd = dd(format!(
        "if=/dev/urandom of={m}/a bs=1000 count=1 oflag=direct conv=notrunc"
    ));
    assert!(!odd.0 && odd.1.contains("Invalid argument"), "{odd:?}");
    let read = dd(format!("if={m}/a of=/dev/null bs=4096 iflag=direct"));
    assert!(read.0, "{}", read.1);
    let odd = dd(format!(
        "if={m}/a of=/dev/null bs=1000 count=1 iflag=direct"
    ));
    assert!(!odd.0 && odd.1.contains("Invalid argument"), "{odd:?}");
    assert_eq!(fs::metadata(f.m("a")).unwrap().len(), 16384);
}
