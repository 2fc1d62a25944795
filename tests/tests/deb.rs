//! `install.sh --deb`: the Debian package of fsprof, installed with apt-get, used from
//! `/usr/bin` (`fsprof run` finds its preload library in `/usr/lib/fsprof`, `mount -t
//! fuse.fsprof-fuse` mounts), removed (the daemons' logs stay) and purged (nothing of it
//! stays). Uses the programs `cargo test --workspace --release` built (`--no-build`).
//!
//! It changes the machine's package database for the time it runs, so it runs as root only,
//! and a guard purges the package whatever happens to the test (failure, panic); it refuses to
//! start where an `fsprof` package is installed already (someone else's). The commands that
//! write logs (the daemon, dpkg's maintainer scripts) run in a private mount namespace whose
//! `/var/log` is a directory of the test's: the purge's removal of `/var/log/fsprof/` must
//! not reach the logs other tests' daemons write there, and the machine's `/usr/local` (where
//! another fsprof-fuse could stand first on mount(8)'s helper path) is hidden there too.

use std::path::{Path, PathBuf};
use std::process::Command;

use test_support::namespace::PrivateMounts;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn run(cmd: &mut Command) -> (i32, String, String) {
    let o = cmd.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Whether the package `fsprof` is installed (or half-installed: anything dpkg must purge).
fn installed() -> bool {
    let (code, out, _) = run(Command::new("dpkg-query").args(["-W", "-f=${Status}", "fsprof"]));
    code == 0 && !out.ends_with("not-installed") && !out.is_empty()
}

/// Purges the package when dropped, if it is there (a failed test), in a mount namespace of
/// its own whose `/var/log` is the directory given: the postrm's removal of `/var/log/fsprof/`
/// must not take the logs of other tests' daemons.
struct Purge(PathBuf);

impl Drop for Purge {
    fn drop(&mut self) {
        if installed() {
            let _ = std::fs::create_dir_all(&self.0);
            let (code, out, err) = run(Command::new("unshare").args([
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                &format!(
                    "mount --bind '{}' /var/log && dpkg --purge --force-remove-reinstreq fsprof",
                    self.0.display()
                ),
            ]));
            assert!(
                !installed(),
                "the guard could not purge fsprof ({code}): {out}{err}"
            );
        }
    }
}

/// Writes the package with `install.sh --deb DIR --no-build`; returns its path.
fn build_deb(dir: &Path, extra: &[&str], path: Option<&Path>) -> (i32, String, String) {
    let release = tests::bin("fsprof").parent().unwrap().to_path_buf();
    let mut cmd = Command::new("bash");
    cmd.arg(workspace().join("install.sh"))
        .arg("--deb")
        .arg(dir)
        .args(extra)
        .arg("--target-dir")
        .arg(release.parent().unwrap());
    if let Some(p) = path {
        let old = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![p.to_path_buf()];
        paths.extend(std::env::split_paths(&old));
        cmd.env("PATH", std::env::join_paths(paths).unwrap());
    }
    run(&mut cmd)
}

/// What the package holds, and says of itself: every program, the library, man pages,
/// completions and documents, all root's, nothing under /usr/local.
fn assert_package_holds(deb: &Path) {
    let (_, info, _) = run(Command::new("dpkg-deb").arg("--info").arg(deb));
    for field in ["Package: fsprof", "Depends: ", "fuse3", "/var/log/fsprof"] {
        assert!(info.contains(field), "{field}: {info}");
    }
    let (_, contents, _) = run(Command::new("dpkg-deb").arg("--contents").arg(deb));
    for f in [
        "./usr/bin/fsprof",
        "./usr/bin/fsprof-fuse",
        "./usr/bin/raif",
        "./usr/bin/fsprof-postmark",
        "./usr/bin/fsprof-bench",
        "./usr/lib/fsprof/libfsprof_preload.so",
        "./usr/share/man/man1/fsprof-profile.1.gz",
        "./usr/share/man/man1/fsprof-fuse.1.gz",
        "./usr/share/bash-completion/completions/raif",
        "./usr/share/zsh/vendor-completions/_fsprof",
        "./usr/share/fish/vendor_completions.d/fsprof.fish",
        "./usr/share/doc/fsprof/README.md",
        "./usr/share/doc/fsprof/copyright",
        "./usr/share/doc/fsprof/changelog.gz",
    ] {
        assert!(
            contents.lines().any(|l| l.ends_with(&format!(" {f}"))),
            "{f} is not in the package:\n{contents}"
        );
    }
    assert!(
        contents
            .lines()
            .all(|l| l.contains(" root/root ") && !l.contains(" ./usr/local")),
        "{contents}"
    );
}

#[test]
fn the_debian_package_installs_works_and_purges_cleanly() {
    if !tests::fuse_available() {
        return;
    }
    for tool in ["dpkg-deb", "apt-get", "unshare"] {
        let (code, ..) = run(Command::new("sh").args(["-c", &format!("command -v {tool}")]));
        assert_eq!(
            code, 0,
            "{tool} is missing (Debian's dpkg, apt, util-linux)"
        );
    }
    if installed() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !ci,
            "an fsprof package is installed already: CI machines start without it"
        );
        eprintln!("SKIPPED: an fsprof package is installed already (someone else's)");
        return;
    }
    let scratch = tests::scratch("deb");
    let varlog = scratch.join("varlog");
    std::fs::create_dir_all(varlog.join("apt")).unwrap();
    let _purge = Purge(varlog.clone());
    let out = scratch.join("out");
    let (code, stdout, err) = build_deb(&out, &["--no-build"], None);
    assert_eq!(code, 0, "{stdout}{err}");
    let arch = run(Command::new("dpkg").arg("--print-architecture")).1;
    let deb = out.join(format!("fsprof_0.1.0_{}.deb", arch.trim()));
    assert!(deb.is_file(), "{stdout}");
    assert!(
        stdout.contains(&format!("apt-get install {}", deb.display())),
        "{stdout}"
    );

    assert_package_holds(&deb);

    // Installed with apt-get, used from /usr/bin, in a namespace whose /var/log is the test's
    // and whose /usr/local is empty (nothing installed there stands before /usr/bin).
    let ns = PrivateMounts::new(&[], &scratch);
    let (code, o, e) = ns.sh(&format!(
        "mount --bind '{}' /var/log && mount --bind '{}' /usr/local/share",
        varlog.display(),
        scratch.join("ns-empty").display()
    ));
    assert_eq!(code, 0, "{o}{e}");
    let apt = |args: &str| {
        ns.sh(&format!(
            "DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=600 {args}"
        ))
    };
    let (code, o, e) = apt(&format!("install '{}'", deb.display()));
    assert_eq!(code, 0, "apt-get install: {o}{e}");
    assert!(installed());
    let work = scratch.join("work");
    std::fs::create_dir_all(work.join("lower")).unwrap();
    std::fs::create_dir_all(work.join("mnt")).unwrap();
    std::fs::write(work.join("lower/f"), "hello\n").unwrap();
    // fsprof run finds the library in /usr/lib/fsprof, with nothing pointing elsewhere.
    let (code, o, e) = ns.sh(&format!(
        "cd '{}' && env -u FSPROF_PRELOAD /usr/bin/fsprof run -- cat lower/f",
        work.display()
    ));
    assert_eq!(code, 0, "{o}{e}");
    assert!(o.contains("SYS_READ") || o.contains("SYS_OPENAT"), "{o}");
    let (code, o, e) = ns.sh("man -w fsprof-profile");
    assert_eq!(
        (code, o.trim()),
        (0, "/usr/share/man/man1/fsprof-profile.1.gz"),
        "{e}"
    );
    // mount(8) runs /usr/bin/fsprof-fuse: silent, in the background, logging to /var/log.
    let mnt = work.join("mnt");
    let (code, o, e) = ns.sh(&format!(
        "mount -t fuse.fsprof-fuse '{}' '{}' -o cache=exact",
        work.join("lower").display(),
        mnt.display()
    ));
    assert_eq!((code, o.as_str(), e.as_str()), (0, "", ""));
    let daemons = ns.pids_of(Path::new("/usr/bin/fsprof-fuse"));
    assert_eq!(
        daemons.len(),
        1,
        "the installed fsprof-fuse serves the mount"
    );
    let (code, o, _) = ns.sh(&format!("cat '{}/f'", mnt.display()));
    assert_eq!((code, o.as_str()), (0, "hello\n"));
    let (code, o, e) = ns.sh(&format!("umount '{}'", mnt.display()));
    assert_eq!(code, 0, "{o}{e}");
    test_support::wait_until("the daemon's exit", || {
        ns.pids_of(Path::new("/usr/bin/fsprof-fuse")).is_empty()
    });
    assert!(varlog.join("fsprof/fsprof-fuse.log").is_file());

    // Every file dpkg lists for the package, before it goes.
    let (_, listed, _) = run(Command::new("dpkg").args(["-L", "fsprof"]));
    let files: Vec<PathBuf> = listed
        .lines()
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .collect();
    assert!(files.len() > 40, "{listed}");
    // Removed: the files go, the daemons' logs stay.
    let (code, o, e) = apt("remove fsprof");
    assert_eq!(code, 0, "apt-get remove: {o}{e}");
    assert!(varlog.join("fsprof/fsprof-fuse.log").is_file());
    assert!(!Path::new("/usr/bin/fsprof-fuse").exists());
    // Purged: nothing of it is left, the logs neither.
    let (code, o, e) = apt("purge fsprof");
    assert_eq!(code, 0, "apt-get purge: {o}{e}");
    assert!(!installed());
    let left: Vec<&PathBuf> = files.iter().filter(|p| p.exists()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    for d in ["/usr/lib/fsprof", "/usr/share/doc/fsprof"] {
        assert!(!Path::new(d).exists(), "{d} is left behind");
    }
    assert!(
        !varlog.join("fsprof").exists(),
        "purge keeps /var/log/fsprof"
    );
    drop(ns);
    let _ = std::fs::remove_dir_all(&scratch);
}

/// Without `--no-build`, `--deb` builds first (`cargo build --release`, here a `cargo` that
/// records its arguments and leaves the built programs as they are), then packages.
#[test]
fn deb_builds_first_unless_told_not_to() {
    let scratch = tests::scratch("deb-build");
    let bin = scratch.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = scratch.join("cargo.log");
    let fake = bin.join("cargo");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\necho \"$* CARGO_TARGET_DIR=$CARGO_TARGET_DIR\" >> '{}'\n",
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = scratch.join("out");
    let (code, stdout, err) = build_deb(&out, &[], Some(&bin));
    assert_eq!(code, 0, "{stdout}{err}");
    let called = std::fs::read_to_string(&log).unwrap();
    assert!(
        called.starts_with("build --release --workspace --bins --lib CARGO_TARGET_DIR="),
        "{called}"
    );
    assert!(stdout.contains("install.sh: building"), "{stdout}");
    assert!(stdout.contains("install.sh: wrote "), "{stdout}");
    // Bad arguments: one line, exit 2, nothing written.
    let (code, _, err) = build_deb(&scratch.join("x"), &["--prefix", "/tmp/p"], None);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--deb and --prefix"), "{err}");
    let _ = std::fs::remove_dir_all(&scratch);
}
