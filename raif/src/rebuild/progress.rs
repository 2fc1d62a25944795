//! Progress of the long admin commands (`raif scrub`, `raif rebuild`) on a terminal: files and
//! bytes done out of the total, the rate and an estimate of the time left, on standard error.
//!
//! Only when standard error is a terminal: then a first walk of the tree counts the files and
//! the bytes the command will go through (from the files' records, no data read), and the bar
//! is drawn while the command runs. Otherwise nothing is counted or drawn, and the output is
//! the command's report alone.

use std::io::IsTerminal;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::offline::{Entry, walk};

/// Counts of a rebuild while mounted, shown in `.raif` ([`crate::online`]).
#[derive(Debug, Default)]
pub struct Meter {
    /// Pass (1, 2, ...).
    pub pass: AtomicU64,
    /// Regular files and bytes to go through in this pass (counted before it starts).
    pub files_total: AtomicU64,
    /// See `files_total`.
    pub bytes_total: AtomicU64,
    /// Gone through so far in this pass.
    pub files_done: AtomicU64,
    /// See `files_done`.
    pub bytes_done: AtomicU64,
}

/// A progress bar, or nothing (standard error is not a terminal), or the counters of a
/// rebuild while mounted.
pub struct Progress {
    bar: Option<ProgressBar>,
    files: u64,
    meter: Option<Arc<Meter>>,
}

/// Counts the files and bytes of the tree (see [`Progress::start`]).
fn count(
    dirs: &[Option<OwnedFd>],
    reference: usize,
    mut bytes: impl FnMut(&Entry) -> u64,
) -> (u64, u64) {
    let (mut files, mut total) = (0u64, 0u64);
    let mut count = |e: &Entry| {
        if e.st.mode & libc::S_IFMT == libc::S_IFREG {
            files += 1;
            total += bytes(e);
        }
        Ok(())
    };
    // A tree that cannot be walked is reported by the command's own walk.
    let _ = walk(dirs, reference, &mut count, &mut |_| Ok(()));
    (files, total)
}

impl Progress {
    /// Progress of `what` (`scrub`, `rebuild`) over the tree of branch `reference` (`dirs`: the
    /// branch roots, as for [`walk`]); `bytes(e)` is what the command will go through for the
    /// regular file `e`. Counted and drawn only if standard error is a terminal.
    pub fn start(
        what: &str,
        dirs: &[Option<OwnedFd>],
        reference: usize,
        bytes: impl FnMut(&Entry) -> u64,
    ) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress {
                bar: None,
                files: 0,
                meter: None,
            };
        }
        let (files, total) = count(dirs, reference, bytes);
        let style = ProgressStyle::with_template(
            "{prefix} {msg} [{elapsed}] {bytes}/{total_bytes} {binary_bytes_per_sec}, {eta} left",
        )
        .expect("a valid template");
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
            .with_style(style)
            .with_prefix(what.to_string())
            .with_message(format!("0/{files} files"));
        bar.enable_steady_tick(Duration::from_millis(250));
        Progress {
            bar: Some(bar),
            files,
            meter: None,
        }
    }

    /// Progress of pass `pass` of a rebuild while mounted, kept in `meter` (counted always):
    /// files of this pass, bytes of every pass so far (a last pass that finds nothing to copy
    /// showed `bytes=0/0` after a rebuild that wrote the whole branch).
    pub fn shared(
        dirs: &[Option<OwnedFd>],
        reference: usize,
        bytes: impl FnMut(&Entry) -> u64,
        meter: Arc<Meter>,
        pass: u64,
    ) -> Progress {
        let (files, total) = count(dirs, reference, bytes);
        if pass <= 1 {
            meter.bytes_total.store(0, Ordering::Relaxed);
            meter.bytes_done.store(0, Ordering::Relaxed);
        }
        meter.pass.store(pass, Ordering::Relaxed);
        meter.files_total.store(files, Ordering::Relaxed);
        meter.bytes_total.fetch_add(total, Ordering::Relaxed);
        meter.files_done.store(0, Ordering::Relaxed);
        Progress {
            bar: None,
            files,
            meter: Some(meter),
        }
    }

    /// `n` more bytes gone through.
    #[inline]
    pub fn bytes(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
        if let Some(m) = &self.meter {
            m.bytes_done.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// One more file done (`done` in all).
    pub fn file_done(&self, done: u64) {
        if let Some(b) = &self.bar {
            b.set_message(format!("{done}/{} files", self.files));
        }
        if let Some(m) = &self.meter {
            m.files_done.store(done, Ordering::Relaxed);
        }
    }

    /// Prints a line of the report on standard output without tearing the bar.
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(b) => b.suspend(|| println!("{line}")),
            None => println!("{line}"),
        }
    }

    /// Removes the bar (before the command's summary).
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
