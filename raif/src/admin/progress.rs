//! Progress of the long admin commands (`raif scrub`, `raif rebuild`) on a terminal: files and
//! bytes done out of the total, the rate and an estimate of the time left, on standard error.
//!
//! Only when standard error is a terminal: then a first walk of the tree counts the files and
//! the bytes the command will go through (from the files' records, no data read), and the bar
//! is drawn while the command runs. Otherwise nothing is counted or drawn, and the output is
//! the command's report alone.

use std::io::IsTerminal;
use std::os::fd::OwnedFd;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{Entry, walk};

/// A progress bar, or nothing (standard error is not a terminal).
pub(super) struct Progress {
    bar: Option<ProgressBar>,
    files: u64,
}

impl Progress {
    /// Progress of `what` (`scrub`, `rebuild`) over the tree of branch `reference` (`dirs`: the
    /// branch roots, as for [`walk`]); `bytes(e)` is what the command will go through for the
    /// regular file `e`. Counted and drawn only if standard error is a terminal.
    pub(super) fn start(
        what: &str,
        dirs: &[Option<OwnedFd>],
        reference: usize,
        mut bytes: impl FnMut(&Entry) -> u64,
    ) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress {
                bar: None,
                files: 0,
            };
        }
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
        }
    }

    /// `n` more bytes gone through.
    #[inline]
    pub(super) fn bytes(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    /// One more file done (`done` in all).
    pub(super) fn file_done(&self, done: u64) {
        if let Some(b) = &self.bar {
            b.set_message(format!("{done}/{} files", self.files));
        }
    }

    /// Prints a line of the report on standard output without tearing the bar.
    pub(super) fn println(&self, line: &str) {
        match &self.bar {
            Some(b) => b.suspend(|| println!("{line}")),
            None => println!("{line}"),
        }
    }

    /// Removes the bar (before the command's summary).
    pub(super) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
