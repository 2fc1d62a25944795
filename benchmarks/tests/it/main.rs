//! Integration tests of the benchmarks crate, in one binary: `postmark` runs `fsprof-postmark`
//! (against Debian's `postmark`, the reference, where it is installed), `harness` runs
//! `fsprof-bench` end to end, mounts included.
//!
//! Tests that need a prerequisite (`/usr/bin/postmark`, `/dev/fuse`, the workspace's
//! `fsprof-fuse`, root) skip with a visible message when it is missing, except under `CI=true`,
//! where a missing prerequisite is a failure: CI must really run them.

mod harness;
mod postmark;

use std::path::{Path, PathBuf};

use benchmarks::harness::mounts;
use tempfile::TempDir;

/// `fsprof-postmark`, built for these tests.
pub const POSTMARK: &str = env!("CARGO_BIN_EXE_fsprof-postmark");
/// `fsprof-bench`, built for these tests.
pub const BENCH: &str = env!("CARGO_BIN_EXE_fsprof-bench");

/// Whether this is CI (`CI=true`), where nothing may be skipped.
pub fn ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Skips a test that lacks `what`: a visible message, or a failure under `CI=true`.
pub fn skip(what: &str) {
    assert!(!ci(), "{what} (CI=true: this test must run, not skip)");
    eprintln!("SKIPPED: {what}");
}

/// A scratch directory: whatever is mounted below it is unmounted and it is removed when
/// dropped (also while unwinding from a failed assertion); kept if a mount below it cannot be
/// undone (nothing is removed through a mount).
pub struct Scratch(Option<TempDir>);

impl Scratch {
    /// A new, empty directory named after the test.
    pub fn new(name: &str) -> Scratch {
        let d = tempfile::Builder::new()
            .prefix(&format!("fsprof-benchmarks-it-{name}-"))
            .tempdir()
            .expect("scratch directory");
        Scratch(Some(d))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.0.as_ref().expect("not dropped").path()
    }

    /// A subdirectory, created.
    pub fn dir(&self, name: &str) -> PathBuf {
        let d = self.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Names of the entries of `dir` (a run must leave none).
    pub fn entries(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let Some(d) = self.0.take() else {
            return;
        };
        for m in mounts::mounts_under(d.path()) {
            mounts::unmount(&m, 5);
        }
        if !mounts::mounts_under(d.path()).is_empty() {
            eprintln!("still mounted below it: keeping {}", d.keep().display());
        }
    }
}
