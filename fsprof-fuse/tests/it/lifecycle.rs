//! The command line: bad input, background mode, signals, --save.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::Path;
use std::process::Command;

use crate::fixture::{Fixture, Transport, bin, is_mounted, transport_args, unmount_path};

fn run(args: &[&std::ffi::OsStr]) -> (i32, String) {
    run_over(Transport::Classic, args)
}

/// Runs `fsprof-fuse ARGS` over transport `t`; returns its exit code and stderr.
fn run_over(t: Transport, args: &[&std::ffi::OsStr]) -> (i32, String) {
    let o = Command::new(bin())
        .args(args)
        .args(transport_args(t))
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn bad_input_is_one_line_and_mounts_nothing() {
    // Nothing mounts: the transport does not matter.
    let Some(f) = Fixture::new("badinput", Transport::Classic) else {
        return;
    };
    for (args, want) in bad_inputs(&f) {
        let refs: Vec<&OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let (code, err) = run(&refs);
        assert_ne!(code, 0, "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(err.starts_with("fsprof-fuse: "), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(!is_mounted(&f.mnt) && !is_mounted(&f.l("inner")) && !is_mounted(&f.lower));
    }
}

/// Command lines [`bad_input_is_one_line_and_mounts_nothing`] gives, each with what its
/// one-line refusal must say (the files and directories they name are made here).
fn bad_inputs(f: &Fixture) -> Vec<(Vec<OsString>, &'static str)> {
    fs::write(f.l("file"), b"x").unwrap();
    fs::create_dir(f.root.join("full")).unwrap();
    fs::write(f.root.join("full/x"), b"x").unwrap();
    fs::create_dir(f.l("inner")).unwrap();
    let missing = f.root.join("missing");
    let pair = |lower: &Path, mnt: &Path| vec![lower.into(), mnt.into()];
    // LOWER MNT and options.
    let with = |opts: &[&OsStr]| {
        let mut v = pair(&f.lower, &f.mnt);
        v.extend(opts.iter().map(|o| o.to_os_string()));
        v
    };
    let o = |s: &'static str| OsStr::new(s);
    vec![
        (pair(&missing, &f.mnt), "lower directory"),
        (pair(&f.l("file"), &f.mnt), "not a directory"),
        (pair(&f.lower, &missing), "mount point"),
        (pair(&f.lower, &f.root.join("full")), "not empty"),
        (pair(&f.lower, &f.l("inner")), "inside lower"),
        (pair(&f.lower, &f.lower), "inside lower"),
        (pair(&f.l("inner"), &f.lower), "inside mount point"),
        (with(&[o("--bogus")]), "--bogus"),
        (with(&[o("--resolution"), o("3")]), "1, 2, 4 or 8"),
        (with(&[o("--epoch"), o("soon")]), "epoch"),
        // Durations take a unit: a bare number is refused with the unit to add.
        (
            with(&[o("--epoch"), o("2")]),
            "'--epoch <LENGTH>': duration '2' has no unit: write 2s",
        ),
        (
            with(&[o("--entry-timeout"), o("2")]),
            "'--entry-timeout <TIME>': duration '2' has no unit: write 2s",
        ),
        (
            with(&[o("--attr-timeout"), o("1.5")]),
            "duration '1.5' has no unit",
        ),
        (
            with(&[o("--attr-timeout"), o("4096c")]),
            "this option takes a time",
        ),
        (vec![f.lower.clone().into()], "MNT"),
        // What the daemon writes later, and the metrics address, are checked before the
        // mount: the log's error was reported as the mount point's, and the profile of a
        // --save that cannot be written was lost at the unmount without a word.
        (with(&[o("--log-file"), f.root.as_os_str()]), "--log-file"),
        (
            with(&[o("--save"), f.root.join("missing/p.json").as_os_str()]),
            "p.json: No such file or directory",
        ),
        (
            with(&[o("--metrics"), o("192.0.2.1:80")]),
            "--metrics 192.0.2.1:80: ",
        ),
        // A profile the tools could not read back (and that took the daemon 1.9 GB to write).
        (
            with(&[o("--epoch"), o("100us"), o("--max-epochs"), o("65536")]),
            "(--max-epochs: at most ",
        ),
    ]
}

/// After `kill -9` the kernel keeps the dead mount, and every access to it fails with
/// `ENOTCONN`: a new mount there says that the daemon died and how to clear the mount.
fn mounting_over_a_dead_daemon_says_so_and_how_to_clear_it(t: Transport) {
    let Some(f) = Fixture::mounted("dead", t, &[]) else {
        return;
    };
    let killed = Command::new("kill")
        .args(["-9", &f.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    test_support::wait_until("the mount goes dead", || {
        fs::metadata(&f.mnt).err().and_then(|e| e.raw_os_error()) == Some(libc::ENOTCONN)
    });
    let (code, err) = run_over(t, &[f.lower.as_os_str(), f.mnt.as_os_str()]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let m = f.mnt.display();
    assert!(err.contains(&format!("daemon of {m} has died")), "{err}");
    assert!(err.contains(&format!("`umount {m}`")), "{err}");
    assert!(err.contains(&format!("`fusermount3 -u {m}`")), "{err}");
    // The fixture unmounts the dead mount.
}
transports!(mounting_over_a_dead_daemon_says_so_and_how_to_clear_it);

fn already_mounted_is_refused(t: Transport) {
    let Some(f) = Fixture::mounted("twice", t, &[]) else {
        return;
    };
    let args = [
        f.lower.as_os_str(),
        f.mnt.as_os_str(),
        "--nonempty".as_ref(),
    ];
    let (code, err) = run_over(t, &args);
    assert_ne!(code, 0);
    assert!(err.contains("already mounted"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1);
}
transports!(already_mounted_is_refused);

fn background_mode_returns_when_live_and_umount_ends_it_with_save(t: Transport) {
    let Some(f) = Fixture::new("background", t) else {
        return;
    };
    let saved = f.root.join("final.fsprof");
    let args = [
        f.lower.as_os_str(),
        f.mnt.as_os_str(),
        "--save".as_ref(),
        saved.as_os_str(),
    ];
    let (code, err) = run_over(t, &args);
    assert_eq!(code, 0, "{err}");
    // Live as soon as the command returned.
    assert!(is_mounted(&f.mnt));
    fs::create_dir(f.m("made")).unwrap();
    assert!(f.l("made").is_dir());
    let daemon = daemon_pid(&f.mnt).expect("daemon process");
    unmount_path(&f.mnt);
    wait_gone(daemon);
    let p =
        profile_store::text::parse(&fs::read_to_string(&saved).expect("--save wrote the profile"))
            .unwrap();
    assert_eq!(p.layers[0].count("OP_MKDIR"), 1);
}
transports!(background_mode_returns_when_live_and_umount_ends_it_with_save);

/// Sends `signal` to a foreground daemon: it unmounts, saves its profile and exits 0. With
/// `extra` arguments: `--metrics`, whose endpoint's threads did not block the signal, took it,
/// and ended the daemon with the mount left dead.
fn signal_unmounts_cleanly_and_saves(t: Transport, signal: &str, extra: &[&str]) {
    let Some(mut f) = Fixture::new(&format!("sig{signal}"), t) else {
        return;
    };
    let saved = f.root.join("final.json");
    let mut args = vec!["--save", saved.to_str().unwrap()];
    args.extend_from_slice(extra);
    f.mount(&args);
    fs::write(f.m("x"), b"1").unwrap();
    // kill(1) from util-linux/procps.
    let st = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(f.pid().to_string())
        .status()
        .unwrap();
    assert!(st.success());
    test_support::wait_until(&format!("unmounted after SIG{signal}"), || {
        !is_mounted(&f.mnt)
    });
    assert_eq!(f.unmount(), Some(0));
    let p = profile_store::json::parse(&fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(p.layers[0].count("OP_CREATE"), 1);
}

fn sigterm_unmounts_cleanly_and_saves(t: Transport) {
    signal_unmounts_cleanly_and_saves(t, "TERM", &["--metrics", "127.0.0.1:0"]);
}
transports!(sigterm_unmounts_cleanly_and_saves);

fn sigint_unmounts_cleanly_and_saves(t: Transport) {
    signal_unmounts_cleanly_and_saves(t, "INT", &[]);
}
transports!(sigint_unmounts_cleanly_and_saves);

/// A `umount` right after the mount, before the daemon has read the kernel's first request
/// (strace holds the return of its mount(2) for a second): the daemon ends as after any
/// unmount, exit 0 with its profile saved. It used to fail the mount ("FUSE device
/// disconnected during handshake", exit 2), which a RAIF test met under load.
fn an_unmount_before_the_first_request_ends_the_daemon_cleanly(t: Transport) {
    let Some(mut f) = Fixture::new("early-umount", t) else {
        return;
    };
    if !test_support::strace::available() {
        return;
    }
    let saved = f.root.join("final.json");
    // strace holds the return of the daemon's mount(2) for a second.
    let wrapper = [
        "strace",
        "-f",
        "-qq",
        "-o",
        "/dev/null",
        "-e",
        "trace=mount",
        "-e",
        "inject=mount:delay_exit=1s",
    ];
    f.mount_with(&wrapper, &["--save", saved.to_str().unwrap()]);
    let code = f.unmount();
    assert_eq!(code, Some(0), "{}", f.log_text());
    assert!(!is_mounted(&f.mnt));
    let p = profile_store::json::parse(&fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(p.layers[0].count("OP_LOOKUP"), 0);
}
transports!(an_unmount_before_the_first_request_ends_the_daemon_cleanly);

fn nonempty_mounts_over_a_non_empty_directory(t: Transport) {
    let Some(mut f) = Fixture::new("nonempty", t) else {
        return;
    };
    fs::write(f.mnt.join("underneath"), b"covered").unwrap();
    fs::write(f.l("served"), b"lower").unwrap();
    f.mount(&["--nonempty"]);
    assert!(is_mounted(&f.mnt));
    assert_eq!(fs::read(f.m("served")).unwrap(), b"lower");
    assert!(
        !f.m("underneath").exists(),
        "the covered file shows through"
    );
    fs::write(f.m("made"), b"new").unwrap();
    assert_eq!(fs::read(f.l("made")).unwrap(), b"new");
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
    // Uncovered again, untouched.
    assert_eq!(fs::read(f.mnt.join("underneath")).unwrap(), b"covered");
    assert!(!f.mnt.join("made").exists());
}
transports!(nonempty_mounts_over_a_non_empty_directory);

/// The pid of the daemon serving `mnt` (its argv names the mount point).
fn daemon_pid(mnt: &std::path::Path) -> Option<u32> {
    for e in fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
        if args.first().is_some_and(|a| a.ends_with(b"fsprof-fuse"))
            && args.contains(&mnt.as_os_str().as_encoded_bytes())
        {
            return Some(pid);
        }
    }
    None
}

fn wait_gone(pid: u32) {
    test_support::wait_until(&format!("daemon {pid} exits"), || {
        // A zombie has exited (and cannot be ours: the daemon's parent exited).
        fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
    });
}
