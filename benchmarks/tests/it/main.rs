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
use std::sync::atomic::{AtomicUsize, Ordering};

use benchmarks::harness::mounts;

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
/// dropped (also while unwinding from a failed assertion).
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new, empty directory named after the test.
    pub fn new(name: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "fsprof-benchmarks-it-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A subdirectory, created.
    pub fn dir(&self, name: &str) -> PathBuf {
        let d = self.0.join(name);
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
        for m in mounts::mounts_under(&self.0) {
            mounts::unmount(&m, 5);
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
