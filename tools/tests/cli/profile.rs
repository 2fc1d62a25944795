//! `fsprof profile`: real mounts of a real directory, with the workload's signals, exit status,
//! progress, layers, a private mount point, and what a dead daemon looks like afterwards.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use test_support::{fuse_available, unmount_path};

/// A directory to profile and a private `TMPDIR` for fsprof's mount points; on drop, every
/// mount left under that `TMPDIR` is removed and every process started is killed.
pub(crate) struct Scene {
    pub(crate) root: tempfile::TempDir,
    children: Vec<Child>,
}

impl Scene {
    pub(crate) fn new() -> Scene {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data/a/b");
        std::fs::create_dir_all(&data).unwrap();
        for i in 0..20 {
            std::fs::write(data.join(format!("f{i}")), vec![b'x'; 100 * i]).unwrap();
        }
        std::fs::create_dir(root.path().join("tmp")).unwrap();
        Scene {
            root,
            children: Vec::new(),
        }
    }

    pub(crate) fn data(&self) -> PathBuf {
        self.root.path().join("data")
    }

    fn tmp(&self) -> PathBuf {
        self.root.path().join("tmp")
    }

    /// `fsprof args...` with TMPDIR in the scene and no colour, ready to spawn.
    pub(crate) fn fsprof(&self, args: &[&str]) -> Command {
        self.setup(Command::new(env!("CARGO_BIN_EXE_fsprof")), args)
    }

    /// `c` (fsprof, or a program that runs it) with `args` in this scene.
    fn setup(&self, mut c: Command, args: &[&str]) -> Command {
        c.args(args)
            .env("TMPDIR", self.tmp())
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Mounts under the scene's TMPDIR, from /proc/self/mountinfo.
    pub(crate) fn mounts(&self) -> Vec<PathBuf> {
        let tmp = self.tmp();
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .map(PathBuf::from)
            .filter(|m| m.starts_with(&tmp))
            .collect()
    }

    /// Waits (at most 30 s) until fsprof has mounted.
    fn wait_for_mount(&self) -> PathBuf {
        let t = Instant::now();
        loop {
            if let Some(m) = self.mounts().into_iter().next() {
                return m;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "fsprof never mounted"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for m in self.mounts() {
            unmount_path(&m);
        }
    }
}

/// Waits for `child` at most 30 s (a guard against a hang, not a measurement).
fn wait_bounded(child: &mut Child) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "still running after 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn output(mut cmd: Command) -> (i32, String, String) {
    let o = cmd.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn the_mount_point_is_a_fresh_private_directory_never_a_planted_path() {
    if !fuse_available() {
        return;
    }
    let s = Scene::new();
    // Another user's trap: symlinks at /tmp/fsprof-profile-<pid> for the coming pids, to a
    // directory of theirs. fsprof used to accept an existing path and mount over its target.
    let target = s.root.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let planted = last + 1..last + 3000;
    for pid in planted.clone() {
        std::os::unix::fs::symlink(&target, s.tmp().join(format!("fsprof-profile-{pid}"))).unwrap();
    }
    let data = s.data();
    let mut cmd = s.fsprof(&[
        "profile",
        data.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "echo \"$PPID $(pwd -P)\"; grep -c \" $(pwd -P) fuse\" /proc/mounts",
    ]);
    cmd.stdout(Stdio::piped());
    let (code, out, err) = output(cmd);
    assert_eq!(code, 0, "{err}");
    let first = out.lines().next().unwrap();
    let (ppid, mnt) = first.split_once(' ').unwrap();
    let ppid: u32 = ppid.parse().unwrap();
    assert!(
        planted.contains(&ppid),
        "fsprof's pid {ppid} was not among the planted ones: the test proved nothing"
    );
    let mnt = Path::new(mnt);
    assert_eq!(mnt.parent(), Some(s.tmp().as_path()), "{out}");
    let name = mnt.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("fsprof-profile-"), "{name}");
    assert_ne!(name, format!("fsprof-profile-{ppid}"));
    // The workload ran in the FUSE mount (the grep found it), and the target was never used.
    assert_eq!(out.lines().nth(1), Some("1"), "{out}");
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    assert!(s.mounts().is_empty());
    assert!(
        !mnt.exists(),
        "the mount point is removed after the unmount"
    );
}

#[test]
fn ctrl_c_stops_the_workload_and_the_profile_is_still_shown() {
    if !fuse_available() {
        return;
    }
    let mut s = Scene::new();
    let data = s.data();
    // With SIGINT at its default, as a shell's foreground job has it (fsprof passes its
    // dispositions on, and a test runner started as a background job, `cmd &` in a script,
    // has SIGINT ignored).
    let mut env = Command::new("env");
    env.args(["--default-signal=INT", env!("CARGO_BIN_EXE_fsprof")]);
    let mut cmd = s.setup(
        env,
        &["profile", data.to_str().unwrap(), "--", "sleep", "100"],
    );
    // Its own process group, as a shell's foreground job: Ctrl-C goes to the whole group.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    s.children.push(cmd.spawn().unwrap());
    s.wait_for_mount();
    // The workload must be running with the mount as its working directory: wait for it
    // to be `sleep` (past its exec).
    let pid = s.children[0].id();
    let t = Instant::now();
    let is_sleep = |c: String| {
        c.split_whitespace().any(|child| {
            std::fs::read_to_string(format!("/proc/{child}/comm")).is_ok_and(|n| n == "sleep\n")
        })
    };
    while !std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).is_ok_and(is_sleep) {
        assert!(t.elapsed() < Duration::from_secs(30), "no workload");
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = Command::new("kill")
        .args(["-INT", "--", &format!("-{pid}")])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = wait_bounded(&mut s.children[0]);
    let child = s.children.remove(0);
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    // sleep ended by SIGINT: 128 + 2, as a shell reports it.
    assert_eq!(status.code(), Some(130), "{out}");
    assert!(out.contains("ran sleep: signal: 2 (SIGINT)"), "{out}");
    assert!(out.contains("layer fuse:"), "{out}");
    assert!(s.mounts().is_empty(), "a mount was left");
}

#[test]
fn the_workload_gets_the_signal_mask_fsprof_was_started_with() {
    if !fuse_available() {
        return;
    }
    let s = Scene::new();
    let data = s.data();
    let (code, out, err) = output(s.fsprof(&[
        "profile",
        data.to_str().unwrap(),
        "--",
        "grep",
        "SigBlk",
        "/proc/self/status",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("SigBlk:\t0000000000000000"), "{out}");
}

#[test]
fn fsprof_exits_with_the_workload_status() {
    if !fuse_available() {
        return;
    }
    let s = Scene::new();
    let data = s.data();
    for (script, want) in [
        ("exit 0", 0),
        ("false", 1),
        ("exit 7", 7),
        ("kill -TERM $$", 143),
    ] {
        let (code, out, err) =
            output(s.fsprof(&["profile", data.to_str().unwrap(), "--", "sh", "-c", script]));
        assert_eq!(code, want, "{script}: {err}");
        assert!(out.contains("layer fuse:"), "{script}: {out}");
    }
    assert!(s.mounts().is_empty());
}

#[test]
fn progress_on_a_terminal_and_nothing_on_a_pipe() {
    if !fuse_available() {
        return;
    }
    let s = Scene::new();
    let data = s.data();
    let (code, out, err) = output(s.fsprof(&["profile", data.to_str().unwrap()]));
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "progress on a pipe: {err:?}");
    assert!(out.contains("read 20 files (19000 bytes)"), "{out}");
    // On a terminal (script(1) gives it one): the progress line, then the report.
    let line = format!(
        "{} profile {}",
        env!("CARGO_BIN_EXE_fsprof"),
        data.to_str().unwrap()
    );
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"])
        .env("TMPDIR", s.tmp())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    let (code, out, _) = output(cmd);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("walking: "), "{out}");
    assert!(out.contains(" files, "), "{out}");
}

#[test]
fn every_recorded_layer_is_shown() {
    if !fuse_available() {
        return;
    }
    let s = Scene::new();
    let data = s.data();
    let (code, out, err) = output(s.fsprof(&["profile", data.to_str().unwrap(), "--lower"]));
    assert_eq!(code, 0, "{err}");
    let fuse = out.find("layer fuse:").expect("the fuse layer");
    let lower = out.find("layer lower:").expect("the lower layer");
    assert!(fuse < lower, "{out}");
}

#[test]
fn a_mount_whose_daemon_died_is_named_as_such() {
    if !fuse_available() {
        return;
    }
    let mut s = Scene::new();
    let data = s.data();
    let pidfile = s.root.path().join("workload.pid");
    let script = format!("echo $$ > {}; exec sleep 100", pidfile.display());
    let cmd = s.fsprof(&["profile", data.to_str().unwrap(), "--", "sh", "-c", &script]);
    let mut cmd = cmd;
    s.children.push(cmd.spawn().unwrap());
    let mnt = s.wait_for_mount();
    let t = Instant::now();
    let workload = loop {
        if let Some(pid) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        {
            break pid;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no workload");
        std::thread::sleep(Duration::from_millis(20));
    };
    // kill -9 the daemon (fsprof serves its own mount): the mount stays, dead.
    s.children[0].kill().unwrap();
    s.children[0].wait().unwrap();
    let _ = Command::new("kill")
        .args(["-KILL", &workload.to_string()])
        .status();
    let m = mnt.to_str().unwrap();
    for args in [vec!["show", m], vec!["summary", m], vec!["check", m]] {
        let (code, _, err) = output(s.fsprof(&args));
        assert_eq!(code, 2, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert_eq!(
            err.trim_end(),
            format!(
                "fsprof: {m}: the fsprof daemon of {m} has died (its FUSE connection is gone); \
                 `umount {m}` (or `fusermount3 -u {m}`) clears it"
            )
        );
    }
    // What the message says works.
    let st = Command::new("umount").arg(m).status().unwrap();
    assert!(st.success());
    assert!(s.mounts().is_empty());
}

/// `fsprof profile DIR --user -- reader FILES...` in the scene; the saved profile.
fn profile_user(s: &Scene, reader: &Path, files: &[&str], save: &Path) -> profile_store::Profile {
    let data = s.data();
    let mut args = vec![
        "profile",
        data.to_str().unwrap(),
        "--user",
        "--save",
        save.to_str().unwrap(),
        "--",
        reader.to_str().unwrap(),
    ];
    args.extend_from_slice(files);
    let (code, out, err) = output(s.fsprof(&args));
    assert_eq!(code, 0, "{err}");
    // Three layers shown, the program's first.
    let at = |l: &str| {
        out.find(&format!("layer {l}:"))
            .unwrap_or_else(|| panic!("{out}"))
    };
    assert!(at("user") < at("fuse") && at("fuse") < at("lower"), "{out}");
    profile_store::text::parse(&std::fs::read_to_string(save).unwrap()).unwrap()
}

#[test]
fn user_fuse_and_lower_layers_count_what_each_level_sees() {
    if !fuse_available() {
        return;
    }
    let s = Scene::new();
    let reader = crate::util::compile_c(s.root.path(), "tools/tests/c/reader.c", &[]);
    let count = crate::util::count;
    // N cold reads of N distinct files: 16 KiB each, read 4 KiB at a time to the end.
    let dir = s.data().join("cold");
    std::fs::create_dir(&dir).unwrap();
    let names: Vec<String> = (0..8).map(|i| format!("cold/g{i}")).collect();
    for n in &names {
        std::fs::write(s.data().join(n), vec![b'z'; 16384]).unwrap();
    }
    let files: Vec<&str> = names.iter().map(String::as_str).collect();
    let p = profile_user(&s, &reader, &files, &s.root.path().join("cold.fsprof"));
    assert_eq!(count(&p, "user", "SYS_OPENAT"), 8);
    assert_eq!(count(&p, "user", "SYS_READ"), 8 * 5);
    assert_eq!(count(&p, "user", "SYS_CLOSE"), 8);
    assert_eq!(count(&p, "fuse", "OP_OPEN"), 8);
    assert_eq!(count(&p, "lower", "OP_OPEN"), 8);
    // Every file's data came through the daemon at least once.
    assert!(count(&p, "fuse", "OP_READ") >= 8, "{p:?}");
    assert_eq!(count(&p, "lower", "OP_READ"), count(&p, "fuse", "OP_READ"));
    // compare sets the levels side by side, the user calls summed per FUSE operation.
    let saved = s.root.path().join("cold.fsprof");
    let (code, out, err) = output(s.fsprof(&[
        "compare",
        "--layers",
        "user,fuse",
        "--method",
        "totops",
        saved.to_str().unwrap(),
    ]));
    assert_eq!(code, 0, "{err}");
    let row = |op: &str| {
        let line = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(op))
            .unwrap_or_else(|| panic!("no {op} row: {out}"));
        line.split_whitespace()
            .skip(1)
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(row("OP_OPEN"), "8 8", "{out}");
    assert_eq!(
        row("OP_READ"),
        format!("40 {}", count(&p, "fuse", "OP_READ"))
    );
    assert!(out.contains("layer user vs fuse"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["OP_READ", "SYS_READ"]),
        "{out}"
    );

    // One file read once, then five times, each in a fresh mount: the first read is cold
    // either way, and the page cache (kept across opens) serves the other four. The user
    // layer sees every read, the daemon only the first pass's.
    let f = "a/b/f19";
    let once = profile_user(&s, &reader, &[f], &s.root.path().join("once.fsprof"));
    let five = profile_user(&s, &reader, &[f; 5], &s.root.path().join("five.fsprof"));
    // 1900 bytes: one read with data, one at the end.
    assert_eq!(count(&once, "user", "SYS_READ"), 2);
    assert_eq!(count(&five, "user", "SYS_READ"), 10);
    assert_eq!(count(&five, "user", "SYS_OPENAT"), 5);
    assert!(count(&once, "fuse", "OP_READ") >= 1);
    assert_eq!(
        count(&five, "fuse", "OP_READ"),
        count(&once, "fuse", "OP_READ"),
        "cached reads reached the daemon"
    );
    // Opens are not cached: each reaches the daemon.
    assert_eq!(count(&five, "fuse", "OP_OPEN"), 5);
    assert!(s.mounts().is_empty());
}

#[test]
fn with_user_a_static_program_is_refused_before_mounting_and_without_it_is_profiled() {
    if !fuse_available() {
        return;
    }
    let s = Scene::new();
    let reader = crate::util::compile_c(s.root.path(), "tools/tests/c/reader.c", &["-static"]);
    let data = s.data();
    let r = reader.to_str().unwrap();
    let (code, out, err) = output(s.fsprof(&[
        "profile",
        data.to_str().unwrap(),
        "--user",
        "--",
        r,
        "a/b/f1",
    ]));
    assert_eq!(code, 2, "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("statically linked"), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(s.mounts().is_empty());
    // Without --user, the same program is profiled at the file-system level.
    let (code, out, err) =
        output(s.fsprof(&["profile", data.to_str().unwrap(), "--", r, "a/b/f1"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("OP_OPEN: 1 call"), "{out}");
}

/// Runs `fsprof profile DATA --save FILE EXTRA -- CMD` (exit code 0) and returns the saved
/// profile as JSON.
fn profile_saved(s: &Scene, extra: &[&str], cmd: &[&str]) -> serde_json::Value {
    let data = s.data();
    let saved = s.root.path().join("p.json");
    let mut args = vec![
        "profile",
        data.to_str().unwrap(),
        "--save",
        saved.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(cmd);
    let (code, out, err) = output(s.fsprof(&args));
    assert_eq!(code, 0, "{out}{err}");
    let json = std::fs::read_to_string(&saved).unwrap();
    serde_json::from_str(&json).unwrap()
}

/// `fsprof profile` takes the record options of fsprof-fuse (one shared definition), records
/// what its report needs by default, and records only the histograms with `--no-record`.
#[test]
fn the_record_options_of_the_daemons_are_taken_and_have_defaults() {
    if !fuse_available() {
        return;
    }
    let s = Scene::new();
    let data = s.data();
    let run = |extra: &[&str]| profile_saved(&s, extra, &["cat", "a/b/f3", "a/b/f4"]);
    let layers = |p: &serde_json::Value| -> Vec<String> {
        p["layers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap().to_string())
            .collect()
    };
    let sections = |p: &serde_json::Value| -> Vec<String> {
        p["sections"]
            .as_array()
            .map(|v| {
                v.iter()
                    .map(|s| s["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    // By default: callers by command name, the breakdown and the hottest files. Every
    // request is the workload's, its chdir into the mount too: none is fsprof's own (`?`:
    // the kernel's background requests, RELEASE, with no caller).
    let p = run(&[]);
    assert_eq!(
        layers(&p)
            .iter()
            .filter(|l| l.starts_with("fuse@comm:") && *l != "fuse@comm:?")
            .collect::<Vec<_>>(),
        ["fuse@comm:cat"],
        "{:?}",
        layers(&p)
    );
    let secs = sections(&p);
    assert!(secs.iter().any(|s| s == "inner_calls"), "{secs:?}");
    assert!(secs.iter().any(|s| s == "hot_files"), "{secs:?}");
    // An option given replaces its default: by uid.
    let p = run(&["--by", "uid"]);
    assert!(
        layers(&p).iter().any(|l| l == "fuse@uid:0"),
        "{:?}",
        layers(&p)
    );
    assert!(!layers(&p).iter().any(|l| l.starts_with("fuse@comm")));
    // --no-record: the fuse layer alone, no sections.
    let p = run(&["--no-record"]);
    assert_eq!(layers(&p), ["fuse"]);
    assert!(sections(&p).is_empty(), "{:?}", sections(&p));
    // With --no-record, what is asked for explicitly is still recorded; and an injected
    // error reaches the workload, as on fsprof-fuse.
    let p = run(&["--no-record", "--hot-files=5", "--resolution", "2"]);
    assert_eq!(sections(&p), ["hot_files"]);
    assert_eq!(p["layers"][0]["resolution"], 2);
    let (code, _, err) = output(s.fsprof(&[
        "profile",
        data.to_str().unwrap(),
        "--inject",
        "op=open,every=1,errno=EACCES,path=/a/b/f3",
        "--",
        "cat",
        "a/b/f3",
    ]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("Permission denied"), "{err}");
    // A bad value is one line, exit 2, and nothing stays mounted.
    let (code, _, err) = output(s.fsprof(&[
        "profile",
        data.to_str().unwrap(),
        "--slow-ring",
        "0",
        "--slow",
        "1ms",
    ]));
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(s.mounts().is_empty());
}

#[test]
fn the_cache_preset_is_taken_and_named_in_the_header() {
    if !fuse_available() {
        return;
    }
    let s = Scene::new();
    for (extra, name) in [
        (&[][..], "normal"),
        (&["--cache", "exact"][..], "exact"),
        (&["--cache", "fast"][..], "fast"),
    ] {
        let p = profile_saved(
            &s,
            extra,
            &["sh", "-c", "stat a/b/f3 a/b/f3 a/b/f3 >/dev/null"],
        );
        assert_eq!(p["extra"]["cache"], name, "{extra:?}");
        // Three stats of one file: exact asks the daemon each time, normal and fast once.
        let getattrs = p["layers"][0]["ops"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == "OP_GETATTR")
            .map_or(0, |o| o["count"].as_u64().unwrap());
        if name == "exact" {
            assert!(getattrs >= 3, "{getattrs}");
        } else {
            assert!(getattrs < 3, "{name}: {getattrs}");
        }
    }
    assert!(s.mounts().is_empty());
}
