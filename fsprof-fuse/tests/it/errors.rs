//! Errors of the lower file system reach the caller with the same errno.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::os::fd::AsFd;

use fsprof_fuse::sys;

use crate::fixture::{Fixture, errno, sh};

#[test]
fn errors_are_propagated_unchanged() {
    let Some(f) = Fixture::mounted("errors", &[]) else {
        return;
    };
    fs::create_dir(f.m("dir")).unwrap();
    fs::write(f.m("dir/f"), b"x").unwrap();
    fs::write(f.m("file"), b"x").unwrap();
    assert_eq!(errno(File::open(f.m("missing"))), libc::ENOENT);
    assert_eq!(errno(fs::create_dir(f.m("dir"))), libc::EEXIST);
    assert_eq!(errno(fs::remove_dir(f.m("dir"))), libc::ENOTEMPTY);
    assert_eq!(errno(fs::remove_file(f.m("dir"))), libc::EISDIR);
    assert_eq!(errno(fs::remove_dir(f.m("file"))), libc::ENOTDIR);
    assert_eq!(errno(File::open(f.m("file/x"))), libc::ENOTDIR);
    assert_eq!(
        errno(
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(f.m("file"))
        ),
        libc::EEXIST
    );
    assert_eq!(errno(fs::read(f.m("dir"))), libc::EISDIR);
    assert_eq!(errno(fs::read_link(f.m("file"))), libc::EINVAL);
    let root = File::open(&f.mnt).unwrap();
    let e = sys::renameat2(
        root.as_fd(),
        OsStr::new("file"),
        root.as_fd(),
        OsStr::new("dir"),
        0,
    );
    assert_eq!(errno(e), libc::EISDIR);
    let file = File::open(f.m("file")).unwrap();
    let mut b = [0u8; 8];
    assert_eq!(
        errno(sys::getxattr_fd(
            file.as_fd(),
            OsStr::new("user.none"),
            &mut b
        )),
        libc::ENODATA
    );
    assert_eq!(
        errno(sys::setxattr_fd(
            file.as_fd(),
            OsStr::new("bogus.ns"),
            b"v",
            0
        )),
        libc::EOPNOTSUPP
    );
    // O_TMPFILE is a documented limit of fuser 0.18.
    let r = sys::openat(
        root.as_fd(),
        OsStr::new("."),
        libc::O_TMPFILE | libc::O_RDWR,
        0o600,
    );
    assert_eq!(errno(r), libc::EOPNOTSUPP);
}

#[test]
fn permission_errors_match_lower() {
    // The kernel checks permissions (default_permissions) against the attributes of LOWER.
    {
        let args: &[&str] = &["--allow-other"];
        let Some(f) = Fixture::mounted("perm-errors", args) else {
            return;
        };
        fs::create_dir(f.m("private")).unwrap();
        fs::set_permissions(
            f.m("private"),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        fs::set_permissions(&f.mnt, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        for (what, cmd) in [
            ("list", format!("ls '{}'", f.m("private").display())),
            ("create", format!("touch '{}/x'", f.mnt.display())),
        ] {
            let run = |p: &std::path::Path| {
                sh(&format!(
                    "setpriv --reuid=65534 --regid=65534 --clear-groups {}",
                    cmd.replace(&f.mnt.display().to_string(), &p.display().to_string())
                ))
            };
            let (cm, _, em) = run(&f.mnt);
            let (cl, _, el) = run(&f.lower);
            assert_eq!(
                cm != 0,
                cl != 0,
                "{what} {args:?}: mount {em:?} lower {el:?}"
            );
            assert!(em.contains("Permission denied"), "{what} {args:?}: {em}");
        }
    }
}
