//! `install.sh`: installed into a fresh prefix outside the build tree, the programs work from
//! there (`fsprof run` finds its preload library), `man` finds every page, and the completion
//! scripts load. Uses the programs `cargo test --workspace --release` built (`--no-build`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The release directory the test binaries were built in (`target/release`).
fn release_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/release/deps/install-HASH
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

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

/// Installs into a new prefix; returns it.
fn install(dir: &Path) -> PathBuf {
    let release = release_dir();
    for p in [
        "fsprof",
        "fsprof-fuse",
        "raif",
        "fsprof-postmark",
        "fsprof-bench",
    ] {
        assert!(
            release.join(p).is_file(),
            "{} is missing: build the workspace first (cargo test --workspace --release does)",
            release.join(p).display()
        );
    }
    let prefix = dir.join("prefix");
    let (code, out, err) = run(Command::new("bash")
        .arg(workspace().join("install.sh"))
        .args(["--no-build", "--prefix"])
        .arg(&prefix)
        .arg("--target-dir")
        .arg(release.parent().unwrap()));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("installed 5 programs"), "{out}");
    // The prefix is on neither path: the hints are commands to paste ("MANPATH=DIR: man
    // fsprof" read like a typo).
    let man = prefix.join("share/man");
    assert!(
        out.lines()
            .any(|l| l.trim() == format!("man -M {} fsprof", man.display())),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.trim() == format!("export PATH={}:\"$PATH\"", prefix.join("bin").display())),
        "{out}"
    );
    prefix
}

#[test]
fn an_installed_fsprof_runs_programs_with_its_preload_library_and_has_man_pages() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = install(dir.path());
    let fsprof = prefix.join("bin/fsprof");
    // From a directory outside the build tree, with nothing pointing at the build tree.
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("f"), "hello\n").unwrap();
    let (code, out, err) = run(Command::new(&fsprof)
        .args(["run", "--", "cat", "f"])
        .current_dir(&work)
        .env_remove("FSPROF_PRELOAD"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("SYS_READ") || out.contains("SYS_OPENAT"),
        "{out}"
    );
    assert!(!out.contains(" 0 calls"), "{out}");

    // Every program's page, and one per subcommand.
    let man = prefix.join("share/man");
    for page in [
        "fsprof",
        "fsprof-profile",
        "fsprof-fuse",
        "raif",
        "raif-scrub",
        "fsprof-bench",
    ] {
        let (code, out, err) = run(Command::new("man")
            .args(["-P", "cat", page])
            .env("MANPATH", format!("{}:", man.display()))
            .env("MANWIDTH", "100"));
        assert_eq!(code, 0, "man {page}: {err}");
        assert!(
            out.contains("NAME") && out.contains("SYNOPSIS"),
            "man {page}: {out}"
        );
    }
    // The completions exist, and bash's loads and registers each program.
    for p in [
        "fsprof",
        "fsprof-fuse",
        "raif",
        "fsprof-postmark",
        "fsprof-bench",
    ] {
        let bash = prefix.join("share/bash-completion/completions").join(p);
        assert!(bash.is_file());
        assert!(
            prefix
                .join(format!("share/zsh/site-functions/_{p}"))
                .is_file()
        );
        assert!(
            prefix
                .join(format!("share/fish/vendor_completions.d/{p}.fish"))
                .is_file()
        );
        let (code, out, err) = run(Command::new("bash")
            .arg("-c")
            .arg(format!("source '{}' && complete -p {p}", bash.display())));
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(p), "{out}");
    }
}

/// The library fsprof loads into every program it runs must be its owner's or root's and
/// writable by no one else; one that others can write is refused, in one line.
#[test]
fn a_preload_library_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let prefix = install(dir.path());
    let lib = prefix.join("lib/fsprof/libfsprof_preload.so");
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (code, out, err) = run(Command::new(prefix.join("bin/fsprof"))
        .args(["run", "--", "true"])
        .env_remove("FSPROF_PRELOAD"));
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("can be written by others"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// Wrong arguments are one line and exit 2, before anything is installed.
#[test]
fn bad_arguments_install_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["--bogus"][..], &["--prefix"]] {
        let (code, _, err) = run(Command::new("bash")
            .arg(workspace().join("install.sh"))
            .args(args)
            .env("HOME", dir.path()));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
