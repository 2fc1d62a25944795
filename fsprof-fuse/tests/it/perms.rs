//! Ownership of objects created through the mount by a normal user.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use crate::fixture::{Fixture, Transport, sh};

fn as_nobody(extra: &str, cmd: &str) -> (i32, String) {
    let (c, _, e) = sh(&format!(
        "setpriv --reuid=65534 --regid=65534 {extra} -- sh -c '{cmd}'"
    ));
    (c, e)
}

fn created_objects_belong_to_the_caller(t: Transport) {
    let Some(f) = Fixture::mounted("owner", t, &["--allow-other"]) else {
        return;
    };
    fs::create_dir(f.m("pub")).unwrap();
    fs::set_permissions(f.m("pub"), fs::Permissions::from_mode(0o1777)).unwrap();
    let d = f.m("pub").display().to_string();
    let (c, e) = as_nobody(
        "--clear-groups",
        &format!(
            "touch {d}/file && mkdir {d}/dir && ln -s file {d}/sym && mkfifo {d}/fifo && echo data > {d}/dir/inner"
        ),
    );
    assert_eq!(c, 0, "{e}");
    for name in ["file", "dir", "sym", "fifo", "dir/inner"] {
        let m = fs::symlink_metadata(f.l(&format!("pub/{name}"))).unwrap();
        assert_eq!((m.uid(), m.gid()), (65534, 65534), "{name}");
    }
    assert_eq!(fs::read(f.l("pub/dir/inner")).unwrap(), b"data\n");
    // The mode asked for, with the caller's umask applied by the kernel.
    let (c, e) = as_nobody(
        "--clear-groups",
        &format!("umask 027; mkdir {d}/masked; touch {d}/masked/f"),
    );
    assert_eq!(c, 0, "{e}");
    assert_eq!(
        fs::metadata(f.l("pub/masked")).unwrap().mode() & 0o7777,
        0o750
    );
    assert_eq!(
        fs::metadata(f.l("pub/masked/f")).unwrap().mode() & 0o7777,
        0o640
    );
}
transports!(created_objects_belong_to_the_caller);

fn setgid_directories_and_supplementary_groups_behave_as_on_lower(t: Transport) {
    let Some(f) = Fixture::mounted("groups", t, &["--allow-other"]) else {
        return;
    };
    // A setgid directory: new entries take its group.
    fs::create_dir(f.m("sgid")).unwrap();
    std::os::unix::fs::chown(f.m("sgid"), Some(0), Some(4242)).unwrap();
    fs::set_permissions(f.m("sgid"), fs::Permissions::from_mode(0o2777)).unwrap();
    // A directory writable only through a supplementary group.
    fs::create_dir(f.m("team")).unwrap();
    std::os::unix::fs::chown(f.m("team"), Some(0), Some(4343)).unwrap();
    fs::set_permissions(f.m("team"), fs::Permissions::from_mode(0o775)).unwrap();
    let (c, e) = as_nobody(
        "--groups=4343",
        &format!(
            "touch {0}/sgid/f && mkdir {0}/sgid/d && touch {0}/team/g",
            f.mnt.display()
        ),
    );
    assert_eq!(c, 0, "{e}");
    let m = fs::metadata(f.l("sgid/f")).unwrap();
    assert_eq!((m.uid(), m.gid()), (65534, 4242));
    let m = fs::metadata(f.l("sgid/d")).unwrap();
    assert_eq!((m.uid(), m.gid()), (65534, 4242));
    assert!(
        m.mode() & libc::S_ISGID != 0,
        "setgid bit inherited by subdirectory"
    );
    let m = fs::metadata(f.l("team/g")).unwrap();
    assert_eq!((m.uid(), m.gid()), (65534, 65534));
    // Without the group: refused, as on LOWER.
    let (c, e) = as_nobody(
        "--clear-groups",
        &format!("touch {}/team/h", f.mnt.display()),
    );
    assert_ne!(c, 0);
    assert!(e.contains("Permission denied"), "{e}");
}
transports!(setgid_directories_and_supplementary_groups_behave_as_on_lower);

fn writes_and_truncates_by_others_clear_setuid_bits(t: Transport) {
    let Some(f) = Fixture::mounted("killsuid", t, &["--allow-other"]) else {
        return;
    };
    for name in ["w", "t", "keep"] {
        fs::write(f.m(name), b"#!/bin/sh\n").unwrap();
        fs::set_permissions(f.m(name), fs::Permissions::from_mode(0o6777)).unwrap();
    }
    let (c, e) = as_nobody(
        "--clear-groups",
        &format!(
            "echo more >> {}/w && truncate -s 1 {}/t",
            f.mnt.display(),
            f.mnt.display()
        ),
    );
    assert_eq!(c, 0, "{e}");
    assert_eq!(
        fs::metadata(f.l("w")).unwrap().mode() & 0o7777,
        0o777,
        "write kept setuid/setgid"
    );
    assert_eq!(
        fs::metadata(f.l("t")).unwrap().mode() & 0o7777,
        0o777,
        "truncate kept setuid/setgid"
    );
    // Root's own writes keep them, as on a local file system.
    fs::write(f.m("keep"), b"root wrote").unwrap();
    assert_eq!(fs::metadata(f.l("keep")).unwrap().mode() & 0o7777, 0o6777);
}
transports!(writes_and_truncates_by_others_clear_setuid_bits);

fn a_normal_user_mounts_through_fusermount3(t: Transport) {
    let Some(mut f) = Fixture::new("user-mount", t) else {
        return;
    };
    if std::process::Command::new("fusermount3")
        .arg("-V")
        .output()
        .is_err()
    {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "fusermount3 missing under CI"
        );
        eprintln!("SKIPPED: fusermount3 not installed (Debian package fuse3)");
        return;
    }
    for d in [&f.lower, &f.mnt] {
        std::os::unix::fs::chown(d, Some(65534), Some(65534)).unwrap();
    }
    // Distributions make /dev/fuse 0666; this project's VMs have 0600, where no normal user can
    // mount (fusermount3 opens the device with the user's rights). Be a distribution for now.
    let _dev = DevFuseMode::open_to_users();
    fs::write(f.l("existing"), b"lower data").unwrap();
    f.mount_with(
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ],
        &[],
    );
    // The daemon runs as nobody (no file handles without CAP_DAC_READ_SEARCH: inodes by path).
    let status = fs::read_to_string(format!("/proc/{}/status", f.pid())).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.contains("65534")),
        "{status}"
    );
    let d = f.mnt.display().to_string();
    let (c, e) = as_nobody(
        "--clear-groups",
        &format!(
            "cat {d}/existing > /dev/null && echo new > {d}/made && mkdir {d}/dir && mv {d}/made {d}/dir/moved && cat {d}/dir/moved && cat {d}/.fsprof > /dev/null"
        ),
    );
    assert_eq!(c, 0, "{e}\n{}", f.log_text());
    assert_eq!(fs::read(f.l("dir/moved")).unwrap(), b"new\n");
    let m = fs::metadata(f.l("dir/moved")).unwrap();
    assert_eq!((m.uid(), m.gid()), (65534, 65534));
    // The control files belong to the mounting user (root for a root daemon; here the mode
    // 0644 must let the mounting user write them to reset).
    let nobody = |cmd: &str| {
        sh(&format!(
            "setpriv --reuid=65534 --regid=65534 --clear-groups sh -c '{cmd}'"
        ))
    };
    let (c, out, e) = nobody(&format!("stat -c %u:%g:%a {d}/.fsprof"));
    assert_eq!((c, out.trim()), (0, "65534:65534:644"), "{e}");
    // ... who may reset them.
    let (c, _, e) = nobody(&format!("mkdir {d}/counted && : > {d}/.fsprof"));
    assert_eq!(c, 0, "{e}");
    let (c, text, e) = nobody(&format!("cat {d}/.fsprof"));
    assert_eq!(c, 0, "{e}");
    let p = profile_store::text::parse(&text).unwrap();
    assert_eq!(p.layers[0].count("OP_MKDIR"), 0, "not reset:\n{text}");
    // Unmounted by the user with fusermount3 -u; the daemon exits.
    let (c, e) = as_nobody("--clear-groups", &format!("fusermount3 -u {d}"));
    assert_eq!(c, 0, "{e}");
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}
transports!(a_normal_user_mounts_through_fusermount3);

/// Makes /dev/fuse mode 0666 for the life of the guard (restores the old mode). Guards in
/// tests running at once (the test on each transport) share the change: the last one restores.
struct DevFuseMode;

/// (guards alive, the mode before the first).
static DEV_FUSE_MODE: std::sync::Mutex<(usize, u32)> = std::sync::Mutex::new((0, 0));

impl DevFuseMode {
    fn open_to_users() -> DevFuseMode {
        let mut g = DEV_FUSE_MODE.lock().unwrap_or_else(|e| e.into_inner());
        if g.0 == 0 {
            g.1 = fs::metadata("/dev/fuse").unwrap().mode() & 0o7777;
            fs::set_permissions("/dev/fuse", fs::Permissions::from_mode(0o666)).unwrap();
        }
        g.0 += 1;
        DevFuseMode
    }
}

impl Drop for DevFuseMode {
    fn drop(&mut self) {
        let mut g = DEV_FUSE_MODE.lock().unwrap_or_else(|e| e.into_inner());
        g.0 -= 1;
        if g.0 == 0 {
            let _ = fs::set_permissions("/dev/fuse", fs::Permissions::from_mode(g.1));
        }
    }
}

fn acls_and_default_acls_behave_as_on_lower(t: Transport) {
    let Some(f) = Fixture::mounted("acl", t, &["--allow-other"]) else {
        return;
    };
    if sh("command -v setfacl").0 != 0 {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "setfacl missing under CI (package acl)"
        );
        eprintln!("SKIPPED: setfacl not installed (package acl)");
        return;
    }
    // A file everyone may read by its mode, with an ACL entry denying nobody.
    fs::write(f.m("secret"), b"no").unwrap();
    fs::set_permissions(f.m("secret"), fs::Permissions::from_mode(0o644)).unwrap();
    let (c, _, e) = sh(&format!(
        "setfacl -m u:nobody:--- '{}'",
        f.m("secret").display()
    ));
    assert_eq!(c, 0, "{e}");
    for base in [&f.lower, &f.mnt] {
        let (c, e) = as_nobody("--clear-groups", &format!("cat {}/secret", base.display()));
        assert_ne!(c, 0, "nobody read {} despite the ACL", base.display());
        assert!(e.contains("Permission denied"), "{e}");
    }
    // A directory with a default ACL: new entries take their mode from it, not from the umask.
    for (base, name) in [(&f.lower, "dl"), (&f.mnt, "dm")] {
        let d = base.join(name);
        fs::create_dir(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).unwrap();
        let (c, _, e) = sh(&format!(
            "setfacl -d -m u::rwx,g::rwx,o::rwx '{}'",
            d.display()
        ));
        assert_eq!(c, 0, "{e}");
        let (c, e) = as_nobody(
            "--clear-groups",
            &format!("umask 077; touch {0}/f; mkdir {0}/sub", d.display()),
        );
        assert_eq!(c, 0, "{e}");
    }
    for entry in ["f", "sub"] {
        let via_lower = fs::metadata(f.l(&format!("dl/{entry}"))).unwrap().mode();
        let via_mount = fs::metadata(f.l(&format!("dm/{entry}"))).unwrap().mode();
        assert_eq!(
            via_mount, via_lower,
            "{entry}: mode through the mount differs from LOWER"
        );
    }
}
transports!(acls_and_default_acls_behave_as_on_lower);
