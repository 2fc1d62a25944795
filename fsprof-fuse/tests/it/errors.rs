//! Errors of the lower file system reach the caller with the same errno.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::os::fd::AsFd;

use fsprof_fuse::sys;

use crate::fixture::{Fixture, Transport, errno, sh};

fn errors_are_propagated_unchanged(t: Transport) {
    let Some(f) = Fixture::mounted("errors", t, &[]) else {
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
transports!(errors_are_propagated_unchanged);

fn permission_errors_match_lower(t: Transport) {
    // The kernel checks permissions (default_permissions) against the attributes of LOWER.
    {
        let args: &[&str] = &["--allow-other"];
        let Some(f) = Fixture::mounted("perm-errors", t, args) else {
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
transports!(permission_errors_match_lower);

/// A file system mounted (by `mount(8)`) over a directory for the life of the guard; unmounted
/// when dropped, lazily if still busy (e.g. a failed test left the daemon above it running).
struct LowerMount(std::path::PathBuf);

impl LowerMount {
    fn new(dir: &std::path::Path, args: &str) -> LowerMount {
        let (c, _, e) = sh(&format!("mount {args} '{}'", dir.display()));
        assert_eq!(c, 0, "mount {args}: {e}");
        LowerMount(dir.to_path_buf())
    }
}

impl Drop for LowerMount {
    fn drop(&mut self) {
        if sys::umount(&self.0, false).is_err() {
            let _ = sys::umount(&self.0, true);
        }
    }
}

fn a_full_lower_file_system_gives_enospc(t: Transport) {
    let Some(mut f) = Fixture::new("enospc", t) else {
        return;
    };
    let _tmpfs = LowerMount::new(&f.lower, "-t tmpfs -o size=1m,nr_inodes=32 fsprof-enospc");
    f.mount(&[]);
    // Out of blocks: the write fails with the lower file system's errno.
    let mut w = File::create(f.m("big")).unwrap();
    let chunk = vec![7u8; 64 * 1024];
    let mut written = 0usize;
    let err = loop {
        match std::io::Write::write(&mut w, &chunk) {
            Ok(n) => written += n,
            Err(e) => break e,
        }
        assert!(written < 4 << 20, "wrote {written} bytes to a 1 MiB tmpfs");
    };
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    drop(w);
    fs::remove_file(f.m("big")).unwrap();
    // Out of inodes: creating fails with ENOSPC too, as on LOWER.
    let mut made = 0;
    let err = loop {
        match File::create(f.m(&format!("f{made}"))) {
            Ok(_) => made += 1,
            Err(e) => break e,
        }
        assert!(made < 64, "created {made} files on a tmpfs of 32 inodes");
    };
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    assert_eq!(errno(fs::create_dir(f.m("dir"))), libc::ENOSPC);
    assert_eq!(errno(fs::create_dir(f.l("dir"))), libc::ENOSPC);
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}
transports!(a_full_lower_file_system_gives_enospc);

/// A `--slow-log` file whose disk fills: the daemon goes on serving, the records stay in the
/// ring, and nothing more is appended, so that freeing the space later cannot add a record to
/// the end of a line cut short (every line before the last stays whole).
fn a_full_disk_under_the_slow_log_file_cuts_it_cleanly(t: Transport) {
    let Some(mut f) = Fixture::new("slowlog-full", t) else {
        return;
    };
    let logfs = f.root.join("logfs");
    fs::create_dir(&logfs).unwrap();
    let _tmpfs = LowerMount::new(&logfs, "-t tmpfs -o size=256k fsprof-slowlog");
    let log = logfs.join("slow.jsonl");
    f.mount(&[
        "--slow",
        "0s",
        "--slow-log",
        log.to_str().unwrap(),
        "--attr-timeout",
        "0s",
        "--entry-timeout",
        "0s",
    ]);
    // Fill the log's file system but for a page or so, then stat until the log is cut.
    let filler = logfs.join("filler");
    sh(&format!(
        "dd if=/dev/zero of='{}' bs=1k count=250 status=none",
        filler.display()
    ));
    fs::write(f.l("file"), b"x").unwrap();
    let stat_many = |n: usize| {
        for _ in 0..n {
            fs::metadata(f.m("file")).unwrap();
        }
    };
    stat_many(200);
    let log_len = fs::metadata(&log).unwrap().len();
    stat_many(10);
    assert_eq!(
        fs::metadata(&log).unwrap().len(),
        log_len,
        "the log grew on a full disk"
    );
    // Room again: still nothing is appended after the cut.
    fs::remove_file(&filler).unwrap();
    stat_many(50);
    let text = fs::read_to_string(&log).unwrap();
    assert_eq!(text.len() as u64, log_len, "appended after the cut");
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    assert!(lines.len() > 1, "{text}");
    let mut seq = 0;
    for l in lines.iter().filter(|l| l.ends_with('\n')) {
        let r: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        seq += 1;
        assert_eq!(r["seq"], seq, "{l}");
    }
    // The ring kept every record since, and the daemon said why the file stopped.
    let ring = fs::read_to_string(f.m(".fsprof.slow")).unwrap();
    let last: serde_json::Value = serde_json::from_str(ring.lines().last().unwrap()).unwrap();
    assert!(last["seq"].as_u64().unwrap() > seq + 100, "{last}");
    assert_eq!(f.unmount(), Some(0));
    let daemon = f.log_text();
    assert!(
        daemon.contains("--slow-log: No space left on device"),
        "{daemon}"
    );
}
transports!(a_full_disk_under_the_slow_log_file_cuts_it_cleanly);

fn a_read_only_lower_file_system_gives_erofs(t: Transport) {
    let Some(mut f) = Fixture::new("erofs", t) else {
        return;
    };
    let src = f.root.join("src");
    fs::create_dir(&src).unwrap();
    fs::write(src.join("file"), b"data").unwrap();
    fs::create_dir(src.join("dir")).unwrap();
    let _bind = LowerMount::new(&f.lower, &format!("--bind '{}'", src.display()));
    let (c, _, e) = sh(&format!("mount -o remount,bind,ro '{}'", f.lower.display()));
    assert_eq!(c, 0, "{e}");
    f.mount(&[]);
    assert_eq!(fs::read(f.m("file")).unwrap(), b"data");
    let file = File::open(f.m("file")).unwrap();
    for (what, r) in [
        ("create", File::create(f.m("new")).map(drop)),
        ("mkdir", fs::create_dir(f.m("newdir"))),
        (
            "open for writing",
            OpenOptions::new().write(true).open(f.m("file")).map(drop),
        ),
        ("unlink", fs::remove_file(f.m("file"))),
        ("rmdir", fs::remove_dir(f.m("dir"))),
        ("rename", fs::rename(f.m("file"), f.m("renamed"))),
        (
            "chmod",
            fs::set_permissions(
                f.m("file"),
                std::os::unix::fs::PermissionsExt::from_mode(0o600),
            ),
        ),
        ("symlink", std::os::unix::fs::symlink("file", f.m("sym"))),
        (
            "setxattr",
            sys::setxattr_fd(file.as_fd(), OsStr::new("user.k"), b"v", 0),
        ),
    ] {
        assert_eq!(
            r.as_ref().map_err(|e| e.raw_os_error()).err(),
            Some(Some(libc::EROFS)),
            "{what}: {r:?}"
        );
    }
    assert_eq!(errno(File::create(f.l("new"))), libc::EROFS);
    drop(file);
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}
transports!(a_read_only_lower_file_system_gives_erofs);

/// A daemon started with a file-size limit (`ulimit -f`, systemd's `LimitFSIZE`) was killed by
/// SIGXFSZ when a caller wrote past it, and the mount with it. The caller gets EFBIG, as it
/// would from LOWER under that limit, and the mount goes on serving.
fn a_write_past_the_daemons_file_size_limit_answers_efbig(t: Transport) {
    use std::io::Write;
    let Some(mut f) = Fixture::new("fsize", t) else {
        return;
    };
    f.mount_with(&["prlimit", "--fsize=2000000"], &[]);
    let mut out = File::create(f.m("big")).unwrap();
    let chunk = vec![7u8; 1 << 20];
    let mut written = 0usize;
    let e = loop {
        match out.write(&chunk) {
            Ok(0) => panic!("write returned 0"),
            Ok(n) => written += n,
            Err(e) => break e,
        }
        assert!(written < 3 << 20, "{written} bytes written past the limit");
    };
    drop(out);
    assert_eq!(e.raw_os_error(), Some(libc::EFBIG), "{e}");
    assert!(written <= 2_000_000, "{written}");
    assert_eq!(fs::metadata(f.l("big")).unwrap().len(), written as u64);
    fs::write(f.m("small"), b"still served").unwrap();
    assert_eq!(fs::read(f.l("small")).unwrap(), b"still served");
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}

transports!(a_write_past_the_daemons_file_size_limit_answers_efbig);

/// Both transports answer an injected errno as it is, up to 511, the largest a FUSE reply can
/// carry. A larger one is refused at start, in one line, by number: on the classic transport an
/// injected 512 to 4095 reached the kernel, which refused the reply, and the caller waited for
/// good.
fn injected_errnos_are_the_ones_a_reply_can_carry(t: Transport) {
    let Some(mut f) = Fixture::new("errno-seam", t) else {
        return;
    };
    for refused in ["512", "4095", "0"] {
        let rule = format!("op=open,every=1,errno={refused}");
        let mut daemon = std::process::Command::new(crate::fixture::bin())
            .arg("-f")
            .arg(&f.lower)
            .arg(&f.mnt)
            .args(["--inject", &rule])
            .args(crate::fixture::transport_args(t))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Refused before anything is mounted; a daemon that mounts instead is stopped.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let status = loop {
            if let Some(s) = daemon.try_wait().unwrap() {
                break s;
            }
            if std::time::Instant::now() > deadline || crate::fixture::is_mounted(&f.mnt) {
                crate::fixture::unmount_path(&f.mnt);
                let _ = daemon.kill();
                let _ = daemon.wait();
                panic!("{rule} was not refused");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut daemon.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(2), "{rule}: {err}");
        assert!(err.contains("give 1 to 511"), "{rule}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{rule}: {err}");
    }
    fs::write(f.l("e"), b"x").unwrap();
    fs::write(f.l("n"), b"x").unwrap();
    f.mount(&[
        "--inject",
        "op=open,every=1,errno=511,path=/e",
        "--inject",
        "op=open,every=1,errno=ENOSPC,path=/n",
    ]);
    assert_eq!(errno(File::open(f.m("e"))), 511);
    assert_eq!(errno(File::open(f.m("n"))), libc::ENOSPC);
    fs::write(f.m("other"), b"served").unwrap();
    assert_eq!(fs::read(f.m("other")).unwrap(), b"served");
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}

transports!(injected_errnos_are_the_ones_a_reply_can_carry);
