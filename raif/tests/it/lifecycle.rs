//! The command line: bad input refused in one line with exit code 2 and nothing mounted;
//! background mode; unmount ends the daemon; --save; control files; statfs.

use std::fs;
use std::process::{Command, Stdio};
use test_support::{Transport, transports};

use fsprof_fuse::daemon::mount::is_mount_point;
use test_support::unmount_path;

use crate::fixture::{Fixture, bin, statvfs_avail};

fn raif(args: &[String]) -> (i32, String) {
    let o = Command::new(bin()).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

transports!(bad_input_is_refused_in_one_line_and_mounts_nothing);

/// Command lines `raif` must refuse over the fixture's branches, each with what its one-line
/// error says.
fn bad_inputs(f: &Fixture) -> Vec<(Vec<String>, String)> {
    let b = |i: usize| f.branches[i].display().to_string();
    let mnt = f.mnt.display().to_string();
    fs::create_dir(f.b(0, "inner")).unwrap();
    let inner = f.b(0, "inner").display().to_string();
    let in_mnt = f.m("x").display().to_string();
    let full = f.root.join("full");
    fs::create_dir(&full).unwrap();
    fs::write(full.join("f"), b"x").unwrap();
    let bad_policy = f.root.join("bad.toml");
    fs::write(&bad_policy, "[[rule]]\nglob = \"*\"\nlevel = 3\n").unwrap();
    let mnt_in_branch = format!("mount point {inner} lies inside branch {}", b(0));
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        (
            s(&["--branches", &format!("{},{}", b(0), b(0)), &mnt]),
            "given twice",
        ),
        (
            s(&["--branches", &format!("{},{inner}", b(0)), &mnt]),
            "inside branch",
        ),
        (
            s(&["--branches", &format!("{},{in_mnt}", b(0)), &mnt]),
            "inside mount point",
        ),
        (
            s(&["--branches", &format!("{},{}", b(0), b(1)), &inner]),
            &mnt_in_branch,
        ),
        (s(&["--branches", &b(0), &mnt]), "at least two"),
        (
            s(&["--branches", &b(0), &b(1), &b(2), &mnt]),
            "--branches takes one comma-separated list",
        ),
        (
            s(&[
                "--branches",
                &format!("{},{}", b(0), b(1)),
                "--level",
                "5",
                &mnt,
            ]),
            "at least 3",
        ),
        (
            s(&[
                "--branches",
                &format!("{},{}", b(0), b(1)),
                "--level",
                "3",
                &mnt,
            ]),
            "0, 1, 4 or 5",
        ),
        (
            s(&[
                "--branches",
                &format!("{},{}", b(0), b(1)),
                "--copies",
                "3",
                &mnt,
            ]),
            "copies",
        ),
        (
            s(&[
                "--branches",
                &format!("{},{}", b(0), b(1)),
                "--stripe",
                "3K",
                &mnt,
            ]),
            "power of two",
        ),
        (
            s(&["--branches", &format!("{},{}", b(0), full.display()), &mnt]),
            "no RAIF marker",
        ),
        (
            s(&[
                "--branches",
                &format!("{},{}", b(0), b(1)),
                "--policy",
                &bad_policy.display().to_string(),
                &mnt,
            ]),
            "level 3",
        ),
        (
            s(&[
                "--branches",
                &format!("{},{}", b(0), b(1)),
                "--check-interval",
                "2",
                &mnt,
            ]),
            "'2' has no unit: write 2s",
        ),
        (
            s(&[
                "--branches",
                &format!("{},{}", b(0), b(1)),
                "--check-interval",
                "4096c",
                &mnt,
            ]),
            "takes a time",
        ),
        (s(&["--branches", &format!("{},{}", b(0), b(1))]), "MNT"),
        (s(&[&mnt]), "--branches"),
        // Checked before the branches are formatted (they were, and a later mount with a
        // different branch count was refused).
        (
            s(&[
                "--branches",
                &f.branch_list(),
                "--metrics",
                "192.0.2.1:80",
                &mnt,
            ]),
            "--metrics 192.0.2.1:80: ",
        ),
        (
            s(&[
                "--branches",
                &f.branch_list(),
                "--log-file",
                &f.root.display().to_string(),
                &mnt,
            ]),
            "--log-file",
        ),
        (
            s(&[
                "--branches",
                &f.branch_list(),
                "--save",
                &f.root.join("missing/p.fsprof").display().to_string(),
                &mnt,
            ]),
            "p.fsprof: No such file or directory",
        ),
    ]
    .into_iter()
    .map(|(args, want): (Vec<String>, &str)| (args, want.to_string()))
    .collect()
}

fn bad_input_is_refused_in_one_line_and_mounts_nothing(t: Transport) {
    let Some(f) = Fixture::new(t, "badinput", 3) else {
        return;
    };
    let cases = bad_inputs(&f);
    for (args, want) in cases {
        let (code, err) = raif(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line, got {err:?}");
        assert!(err.contains(&want), "{args:?}: {err:?} should say {want:?}");
        assert!(!is_mount_point(&f.mnt), "{args:?} mounted something");
    }
    // The refused volume creations left nothing behind on the empty branches.
    for i in 0..3 {
        let made: Vec<_> = fs::read_dir(&f.branches[i])
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().starts_with(".raif"))
            .collect();
        assert!(made.is_empty(), "branch {i}: {made:?}");
    }
}

/// One directory reached by two paths (a bind mount) is one branch: it was taken for two, and
/// the mount waited 10 s for "another raif process" holding the branch, which was itself.
#[test]
fn a_branch_given_twice_through_a_bind_mount_is_refused_at_once() {
    let Some(f) = Fixture::new(Transport::Classic, "bindtwice", 2) else {
        return;
    };
    let alias = f.root.join("alias");
    fs::create_dir(&alias).unwrap();
    let st = Command::new("mount")
        .arg("--bind")
        .arg(&f.branches[1])
        .arg(&alias)
        .status()
        .unwrap();
    assert!(st.success(), "mount --bind");
    /// Undoes the bind mount, also when an assertion fails.
    struct Bound(std::path::PathBuf);
    impl Drop for Bound {
        fn drop(&mut self) {
            unmount_path(&self.0);
        }
    }
    let _bound = Bound(alias.clone());
    let list = format!(
        "{},{},{}",
        f.branches[0].display(),
        f.branches[1].display(),
        alias.display()
    );
    let (code, err) = raif(&["--branches".into(), list, f.mnt.display().to_string()]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "raif: branches {} and {} are the same directory",
            f.branches[1].display(),
            alias.display()
        )
    );
    assert!(!is_mount_point(&f.mnt));
}

transports!(a_volume_inside_another_is_refused);

/// Branches inside a mounted raif volume: raif reserves the `user.raif*` attributes there, so
/// such a volume mounted and then failed every create with EPERM. It is refused at mount.
fn a_volume_inside_another_is_refused(t: Transport) {
    let Some(f) = Fixture::mounted(t, "stacked", 2, &["--level", "1"]) else {
        return;
    };
    for d in ["x0", "x1"] {
        fs::create_dir(f.m(d)).unwrap();
    }
    let inner = f.root.join("inner");
    fs::create_dir(&inner).unwrap();
    let (code, err) = raif(&[
        "--branches".into(),
        format!("{},{}", f.m("x0").display(), f.m("x1").display()),
        inner.display().to_string(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "raif: branch {} lies inside the raif volume at {}: a volume cannot be stacked on \
             another (raif reserves the user.raif* attributes there)",
            f.m("x0").display(),
            f.mnt.display()
        )
    );
    assert!(!is_mount_point(&inner));
    assert_eq!(fs::read_dir(f.m("x0")).unwrap().count(), 0);
}

transports!(background_mode_control_files_save_and_statfs);

fn background_mode_control_files_save_and_statfs(t: Transport) {
    let Some(f) = Fixture::new(t, "background", 3) else {
        return;
    };
    let save = f.root.join("final.fsprof");
    let args = vec![
        "--branches".to_string(),
        f.branch_list(),
        "--level".into(),
        "5".into(),
        "--save".into(),
        save.display().to_string(),
        f.mnt.display().to_string(),
    ];
    let (code, err) = raif(&args);
    assert_eq!(code, 0, "{err}");
    assert!(is_mount_point(&f.mnt), "returned before the mount was live");
    fs::write(f.m("a"), vec![1u8; 100_000]).unwrap();
    let status = f.status();
    assert!(status.contains("branches 3 online 3"), "{status}");
    let p = f.profile();
    let names: Vec<&str> = p.layers.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["fuse", "branch0", "branch1", "branch2"]);
    assert!(p.layer("branch0").unwrap().count("OP_WRITE") > 0);
    // statfs: the smallest branch's space times two data branches (RAIF5 over three).
    let (mnt_avail, branch_avail) = (statvfs_avail(&f.mnt), statvfs_avail(&f.branches[0]));
    let ratio = mnt_avail as f64 / branch_avail as f64;
    assert!((1.9..2.1).contains(&ratio), "statfs ratio {ratio}");
    // Commands and refusals.
    fs::write(f.m(".raif"), b"check\n").unwrap();
    assert!(fs::write(f.m(".raif"), b"explode\n").is_err());
    // umount ends the daemon, and the profile is saved. (Read once the daemon has exited: the
    // file exists a moment before it is written.)
    let daemon = daemon_pid(&f.mnt).expect("the daemon's process");
    unmount_path(&f.mnt);
    test_support::wait_until(&format!("daemon {daemon} exits"), || {
        fs::read_to_string(format!("/proc/{daemon}/stat")).map_or(true, |s| s.contains(") Z "))
    });
    let text = fs::read_to_string(&save).expect("profile saved at unmount");
    let saved = profile_store::text::parse(&text).unwrap();
    assert!(saved.layer("branch2").is_some());
}

transports!(admin_commands_print_no_progress_when_not_on_a_terminal);

/// `raif scrub` and `raif rebuild` show progress only on a terminal: with standard error
/// piped (here), nothing but their report is printed, and no terminal control characters.
fn admin_commands_print_no_progress_when_not_on_a_terminal(t: Transport) {
    let Some(mut f) = Fixture::mounted(t, "quiet", 3, &["--level", "5"]) else {
        return;
    };
    for i in 0..30 {
        fs::write(f.m(&format!("f{i}")), vec![i as u8; 70_000 * i]).unwrap();
    }
    assert_eq!(f.unmount(), Some(0));
    let clean = |what: &str, o: &crate::fixture::Output| {
        assert_eq!(o.stderr, "", "{what}: standard error");
        assert!(
            !o.stdout.contains(['\r', '\x1b']),
            "{what}: control characters in {:?}",
            o.stdout
        );
    };
    let scrub = f.scrub(false);
    assert_eq!(scrub.code, 0, "{}", scrub.stdout);
    clean("scrub", &scrub);
    assert_eq!(scrub.stdout.lines().count(), 1, "{}", scrub.stdout);
    fs::rename(&f.branches[1], f.root.join("b1.old")).unwrap();
    fs::create_dir(&f.branches[1]).unwrap();
    let rebuilt = f.rebuild(1, &f.branches[1].clone());
    assert_eq!(rebuilt.code, 0, "{}", rebuilt.stdout);
    clean("rebuild", &rebuilt);
    assert_eq!(rebuilt.stdout.lines().count(), 1, "{}", rebuilt.stdout);
}

transports!(admin_commands_show_progress_on_a_terminal);

/// On a terminal (`script` gives the command one), `raif scrub` and `raif rebuild` show their
/// progress on standard error: files and bytes done out of the total, rate and time left. The
/// bar is cleared before the summary.
fn admin_commands_show_progress_on_a_terminal(t: Transport) {
    let Some(mut f) = Fixture::mounted(t, "progress", 3, &["--level", "5"]) else {
        return;
    };
    for i in 0..12 {
        fs::write(f.m(&format!("f{i}")), vec![i as u8; 100_000 * i]).unwrap();
    }
    assert_eq!(f.unmount(), Some(0));
    let on_a_terminal = |args: &str| -> Option<String> {
        let typescript = f.root.join("typescript");
        let o = Command::new("script")
            .args(["-qfec", &format!("{} {args}", bin())])
            .arg(&typescript)
            .output();
        match o {
            Ok(o) if o.status.success() => Some(fs::read_to_string(&typescript).unwrap()),
            _ => {
                eprintln!("SKIPPED: script(1) cannot run {args}");
                None
            }
        }
    };
    let list = f.branch_list();
    let Some(out) = on_a_terminal(&format!("scrub --branches {list}")) else {
        return;
    };
    // Drawn at least once (later draws are rate-limited).
    assert!(
        out.contains("scrub ") && out.contains("/12 files ["),
        "{out}"
    );
    assert!(out.contains(" left"), "{out}");
    assert!(out.contains("\x1b[2K"), "the bar is cleared: {out}");
    assert!(out.contains("scrub: 12 files, 0 directories"), "{out}");
    fs::rename(&f.branches[2], f.root.join("b2.old")).unwrap();
    fs::create_dir(&f.branches[2]).unwrap();
    let b2 = f.branches[2].display().to_string();
    let out = on_a_terminal(&format!("rebuild --branches {list} --replace 2 {b2}")).unwrap();
    assert!(
        out.contains("/12 files [") && out.contains("rebuild "),
        "{out}"
    );
    assert!(out.contains("rebuilt branch 2"), "{out}");
}

/// One raif process at a time serves a volume or works on it offline: a second mount of it,
/// a scrub and an offline rebuild are refused in one line while it is mounted (they took its
/// intent log and markers for those of a crashed mount), and a mount waits for a process that
/// still holds a branch's lock (a daemon finishing its unmount), then gives up.
#[test]
fn one_raif_process_at_a_time_serves_or_works_on_a_volume() {
    let Some(mut f) = Fixture::new(Transport::Classic, "onlyone", 3) else {
        return;
    };
    f.mount(&["--level", "5"]);
    fs::write(f.m("a"), b"kept").unwrap();
    let other = f.root.join("m2");
    fs::create_dir(&other).unwrap();
    // Unmounted on every way out, should a refused mount ever be made.
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            if is_mount_point(&self.0) {
                unmount_path(&self.0);
            }
        }
    }
    let _other_guard = Unmount(other.clone());
    let list = f.branch_list();
    let args = |mnt: &std::path::Path| {
        vec![
            "--branches".to_string(),
            list.clone(),
            mnt.display().to_string(),
        ]
    };
    let (code, err) = raif(&args(&other));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is already mounted at"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!is_mount_point(&other));
    let scrub = f.scrub(true);
    assert_eq!(scrub.code, 2, "{}", scrub.stderr);
    assert!(
        scrub.stderr.contains("unmount it first"),
        "{}",
        scrub.stderr
    );
    let rebuild = f.rebuild(1, &f.branches[1].clone());
    assert_eq!(rebuild.code, 2, "{}", rebuild.stderr);
    assert_eq!(fs::read(f.m("a")).unwrap(), b"kept");
    assert_eq!(f.unmount(), Some(0));

    // A process holding branch 1's lock (as a stopping daemon does): waited for, briefly...
    let b1 = f.branches[1].clone();
    // flock holds the lock itself (-o: cat does not inherit it) until cat ends at the end of
    // its input, which the test closes to let go. (A holder that let go after a fixed time
    // raced the mount, which had to be waiting for it by then.)
    let hold = || {
        Command::new("flock")
            .args(["-o", "-x"])
            .arg(&b1)
            .arg("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    };
    let let_go = |mut holder: std::process::Child| {
        drop(holder.stdin.take());
        assert!(holder.wait().unwrap().success());
    };
    // Whether a lock on branch 1 is free, and a wait until it is (or is not).
    let free = || {
        Command::new("flock")
            .args(["-n", "-x"])
            .arg(&b1)
            .arg("true")
            .status()
            .unwrap()
            .success()
    };
    let wait_free = |want: bool, what: &str| test_support::wait_until(what, || free() == want);
    let holder = hold();
    wait_free(false, "flock takes the lock");
    let mut mount = Command::new(bin())
        .args(args(&f.mnt))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = lines_of(mount.stderr.take().unwrap());
    let mut err = String::new();
    while !err.contains("waiting for another raif process") {
        match said.recv_timeout(test_support::PATIENCE) {
            Ok(l) => err += &l,
            Err(e) => panic!("the mount never waited ({e}): {err}"),
        }
    }
    let_go(holder);
    let status = mount.wait().unwrap();
    err.extend(said.iter());
    assert!(status.success(), "{err}");
    assert_eq!(fs::read(f.m("a")).unwrap(), b"kept");
    unmount_path(&f.mnt);
    // The daemon just unmounted holds its locks until it has exited: wait for that, so that
    // the lock held next is flock's (the mount below could otherwise take it as the daemon
    // lets go, before flock, which waits for it too).
    wait_free(true, "the daemon lets go of its lock");
    // ...and given up on when it does not let go.
    let holder = hold();
    wait_free(false, "flock takes the lock");
    let (code, err) = raif(&args(&other));
    let_go(holder);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is in use by another raif process"), "{err}");
    assert!(!is_mount_point(&other));
}

/// The lines `from` gives, each with its newline, as they come (read on a thread, so that a
/// wait for one can give up).
fn lines_of(from: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for l in std::io::BufReader::new(from).lines() {
            let Ok(l) = l else { break };
            if tx.send(l + "\n").is_err() {
                break;
            }
        }
    });
    rx
}

/// The pid of the raif daemon serving `mnt` (its argv names the mount point).
fn daemon_pid(mnt: &std::path::Path) -> Option<u32> {
    fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
        let cmd = fs::read(e.path().join("cmdline")).ok()?;
        let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
        (args.first()?.ends_with(b"raif") && args.contains(&mnt.as_os_str().as_encoded_bytes()))
            .then_some(pid)
    })
}
