//! Permissions through RAIF as a normal user (`nobody`): POSIX ACLs, the caller's umask, and
//! names of extended attributes only root may see.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use test_support::{Transport, transports};

use test_support::sh;

use crate::fixture::{Fixture, xattr_set};

/// Runs `cmd` with `sh -c` as nobody (uid and gid 65534, no supplementary groups): exit code,
/// stdout and stderr.
fn as_nobody(cmd: &str) -> (i32, String, String) {
    sh(&format!(
        "setpriv --reuid=65534 --regid=65534 --clear-groups -- sh -c '{cmd}'"
    ))
}

/// Whether `setfacl` is there (under CI it must be: package acl).
fn have_setfacl() -> bool {
    if sh("command -v setfacl").0 == 0 {
        return true;
    }
    assert_ne!(
        std::env::var("CI").as_deref(),
        Ok("true"),
        "setfacl missing under CI (package acl)"
    );
    eprintln!("SKIPPED: setfacl not installed (package acl)");
    false
}

transports!(an_acl_entry_denying_a_user_is_enforced);

/// Regression: RAIF did not ask the kernel for `FUSE_POSIX_ACL`, so an ACL entry denying a user
/// was ignored by the kernel's permission check and the user read the file anyway.
fn an_acl_entry_denying_a_user_is_enforced(t: Transport) {
    let Some(f) = Fixture::mounted(t, "acl", 2, &["--allow-other"]) else {
        return;
    };
    if !have_setfacl() {
        return;
    }
    for name in ["secret", "open"] {
        fs::write(f.m(name), b"data\n").unwrap();
        fs::set_permissions(f.m(name), fs::Permissions::from_mode(0o644)).unwrap();
    }
    let (c, _, e) = sh(&format!(
        "setfacl -m u:nobody:--- '{}'",
        f.m("secret").display()
    ));
    assert_eq!(c, 0, "{e}");
    // The ACL reached every branch...
    for b in 0..2 {
        let (c, out, e) = sh(&format!("getfacl -n '{}'", f.b(b, "secret").display()));
        assert_eq!(c, 0, "{e}");
        assert!(out.contains("user:65534:---"), "branch {b}: {out}");
    }
    // ... and is enforced through the mount, as on a branch; the file without one is readable
    // (so the refusal is the ACL's).
    let m = f.mnt.display();
    let (c, out, e) = as_nobody(&format!("cat {m}/open"));
    assert_eq!((c, out.as_str()), (0, "data\n"), "{e}");
    for base in [f.branches[0].display(), f.mnt.display()] {
        let (c, out, e) = as_nobody(&format!("cat {base}/secret"));
        assert_ne!(c, 0, "nobody read {base}/secret despite the ACL: {out}");
        assert!(e.contains("Permission denied"), "{e}");
    }
    // Removing the entry lets nobody in again.
    let (c, _, e) = sh(&format!(
        "setfacl -x u:nobody '{}'",
        f.m("secret").display()
    ));
    assert_eq!(c, 0, "{e}");
    let (c, out, e) = as_nobody(&format!("cat {m}/secret"));
    assert_eq!((c, out.as_str()), (0, "data\n"), "{e}");
}

transports!(default_acls_and_the_umask_behave_as_on_a_plain_directory);

/// New objects in a directory with a default ACL take their mode from it, not from the
/// caller's umask, as on a plain directory: the umask reaches the branches unapplied.
fn default_acls_and_the_umask_behave_as_on_a_plain_directory(t: Transport) {
    let Some(f) = Fixture::mounted(t, "default-acl", 2, &["--allow-other"]) else {
        return;
    };
    if !have_setfacl() {
        return;
    }
    let plain = f.root.join("plain");
    let (d_acl, d_mask) = ("acl", "masked");
    for base in [&plain, &f.mnt] {
        for (name, acl) in [(d_acl, true), (d_mask, false)] {
            let d = base.join(name);
            fs::create_dir_all(&d).unwrap();
            fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).unwrap();
            if acl {
                let (c, _, e) = sh(&format!(
                    "setfacl -d -m u::rwx,g::rwx,o::rwx '{}'",
                    d.display()
                ));
                assert_eq!(c, 0, "{e}");
            }
            let (c, _, e) = as_nobody(&format!(
                "umask 027; touch {0}/f; mkdir {0}/sub; mkfifo {0}/fifo",
                d.display()
            ));
            assert_eq!(c, 0, "{e}");
        }
    }
    for dir in [d_acl, d_mask] {
        for entry in ["f", "sub", "fifo"] {
            let rel = format!("{dir}/{entry}");
            let want = fs::metadata(plain.join(&rel)).unwrap().permissions().mode();
            for b in 0..2 {
                let got = fs::symlink_metadata(f.b(b, &rel)).unwrap();
                assert_eq!(
                    got.permissions().mode(),
                    want,
                    "{rel} on branch {b}: mode {:o}, {:o} in a plain directory",
                    got.permissions().mode(),
                    want
                );
            }
        }
    }
    // The default ACL gave 0666/0777 despite the umask; without one the umask applies.
    let mode = |rel: &str| fs::metadata(plain.join(rel)).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode("acl/f"), mode("acl/sub")), (0o666, 0o777));
    assert_eq!((mode("masked/f"), mode("masked/sub")), (0o640, 0o750));
}

transports!(trusted_attribute_names_are_listed_to_root_only);

/// Regression: RAIF listed `trusted.*` attribute names to every caller (which the kernel then
/// refuses to read to anyone but root), as a local file system does not.
fn trusted_attribute_names_are_listed_to_root_only(t: Transport) {
    let Some(f) = Fixture::mounted(t, "trusted", 2, &["--allow-other"]) else {
        return;
    };
    fs::write(f.m("file"), b"x").unwrap();
    fs::create_dir(f.m("dir")).unwrap();
    for name in ["file", "dir"] {
        for b in 0..2 {
            xattr_set(&f.b(b, name), "trusted.t", b"1");
        }
        xattr_set(&f.m(name), "user.u", b"2");
        // Names only (`getfattr` without `-d` reads no value): what listxattr answered.
        let p = f.m(name).display().to_string();
        let names = |out: &str| -> Vec<String> {
            out.lines()
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(String::from)
                .collect()
        };
        // (Other names, e.g. security.*, may be there; RAIF's own record, user.raif, is shown to
        // no one.)
        let (c, out, e) = sh(&format!("getfattr --absolute-names -m - '{p}'"));
        assert_eq!(c, 0, "{e}");
        let root = names(&out);
        assert!(
            root.contains(&"trusted.t".into()) && root.contains(&"user.u".into()),
            "root, {name}: {root:?}"
        );
        assert!(
            !root.contains(&"user.raif".into()),
            "root, {name}: {root:?}"
        );
        let (c, out, e) = as_nobody(&format!("getfattr --absolute-names -m - {p}"));
        assert_eq!(c, 0, "{e}");
        let other = names(&out);
        assert!(
            other.contains(&"user.u".into()),
            "nobody, {name}: {other:?}"
        );
        assert!(
            !other
                .iter()
                .any(|n| n.starts_with("trusted.") || n == "user.raif"),
            "nobody, {name}: {other:?}"
        );
    }
}

transports!(another_user_reads_no_name_it_may_not_search);

/// Issue 38 on RAIF: uid 65534 read the name of a file below a 0700 directory of root's from
/// the control files. By default others read the mount's histograms only; with
/// `--share-records` the records are filtered for them (a path only below directories they may
/// search, asked of a branch), and the slow log opens.
fn another_user_reads_no_name_it_may_not_search(t: Transport) {
    for share in [false, true] {
        let mut args = vec!["--allow-other", "--hot-files", "--slow", "0ms", "--slowest"];
        if share {
            args.push("--share-records");
        }
        let Some(f) = Fixture::mounted(t, "records-policy", 2, &args) else {
            return;
        };
        fs::create_dir(f.m("private")).unwrap();
        fs::write(f.m("private/secret-name-of-root"), b"s").unwrap();
        fs::set_permissions(f.m("private"), fs::Permissions::from_mode(0o700)).unwrap();
        fs::write(f.m("open-name"), b"p").unwrap();
        fs::set_permissions(f.m("open-name"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::read(f.m("private/secret-name-of-root")).unwrap();
        fs::read(f.m("open-name")).unwrap();
        let root = fs::read_to_string(f.m(".fsprof")).unwrap();
        assert!(
            root.contains("secret-name-of-root"),
            "root reads all: {root}"
        );
        let m = f.m("").display().to_string();
        let (c, text, e) = as_nobody(&format!("cat {m}/.fsprof {m}/.fsprof.json"));
        assert_eq!(c, 0, "share={share}: {e}");
        assert!(!text.contains("secret-name"), "share={share}: {text}");
        assert_eq!(text.contains("open-name"), share, "share={share}: {text}");
        assert_eq!(text.contains("withheld="), !share, "share={share}: {text}");
        let (c, slow, e) = as_nobody(&format!("cat {m}/.fsprof.slow"));
        if share {
            assert_eq!(c, 0, "{e}");
            assert!(
                !slow.contains("secret-name") && slow.contains("open-name"),
                "{slow}"
            );
        } else {
            assert_ne!(c, 0, "the slow log is root's: {slow}");
            assert!(e.contains("Permission denied"), "{e}");
        }
    }
}
