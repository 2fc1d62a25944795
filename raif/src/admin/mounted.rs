//! The admin commands that talk to a mount through its control file `MNT/.raif`:
//!
//! * `raif replace MNT N NEWDIR` (and its alias `raif rebuild --mounted MNT --replace N
//!   NEWDIR`): asks the mount to rebuild branch N onto NEWDIR while it serves (`rebuild N
//!   NEWDIR`, see [`crate::online`]), then follows the `rebuild` line of `MNT/.raif`: a
//!   progress bar on a terminal (a line every few seconds otherwise) until the branch is
//!   online or the rebuild failed.
//! * `raif fail MNT N`: `fail N`.
//!
//! A refusal is said in the mount's words (its `refused` line), not only as an errno.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fsprof_fuse::daemon::mount::{SetupError, absolute_dir, plain, setup_err};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::report::Rebuild;

/// How often `.raif` is read.
const POLL: Duration = Duration::from_millis(200);
/// How often a line of progress is printed when standard error is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(5);

/// The `rebuild branch N ...` line of `status` (for branch `n`).
fn parse(status: &str, n: usize) -> Option<Rebuild> {
    status
        .lines()
        .filter(|l| l.starts_with(&format!("rebuild branch {n} ")))
        .find_map(Rebuild::parse)
}

/// The control file of the raif mount at `mnt`, checked to be one.
fn control(mnt: &Path) -> Result<PathBuf, SetupError> {
    let mnt = absolute_dir(mnt, "MNT")?;
    let ctl: PathBuf = mnt.join(crate::status::NAME);
    let text = std::fs::read_to_string(&ctl).map_err(|e| {
        setup_err(format!(
            "{}: {} (not a raif mount, or mounted with --no-profile: admin commands talk to a \
             mount through its control file)",
            ctl.display(),
            plain(&e)
        ))
    })?;
    if !text.starts_with("volume ") {
        return Err(setup_err(format!(
            "{}: not a raif status file",
            ctl.display()
        )));
    }
    Ok(ctl)
}

/// Writes the command `line` to the control file `ctl`; a refusal is the mount's reason.
fn ask(ctl: &Path, line: &str) -> Result<(), SetupError> {
    std::fs::write(ctl, format!("{line}\n")).map_err(|e| {
        let why = std::fs::read_to_string(ctl)
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("refused "))
                    .map(|r| r.trim_matches('"').to_string())
            })
            .and_then(|r| Some(r.strip_prefix(line)?.strip_prefix(": ")?.to_string()))
            .unwrap_or_else(|| plain(&e));
        setup_err(format!("the mount refused '{line}': {why}"))
    })
}

/// `raif fail MNT N`: takes branch N of the mount at `mnt` out of service.
pub fn fail_mounted(mnt: &Path, n: usize) -> Result<(), SetupError> {
    let ctl = control(mnt)?;
    ask(&ctl, &format!("fail {n}"))?;
    let text = std::fs::read_to_string(&ctl).unwrap_or_default();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("branch {n} ")))
        .unwrap_or("");
    println!("{line}");
    Ok(())
}

/// Runs the command; returns whether nothing was lost.
pub fn rebuild_mounted(mnt: &Path, n: usize, newdir: &Path) -> Result<bool, SetupError> {
    let ctl = control(mnt)?;
    let read = || std::fs::read_to_string(&ctl);
    let newdir = absolute_dir(newdir, "NEWDIR")?;
    ask(&ctl, &format!("rebuild {n} {}", newdir.display()))?;
    let bar = std::io::stderr().is_terminal().then(|| {
        let style = ProgressStyle::with_template(
            "{prefix} {msg} [{elapsed}] {bytes}/{total_bytes} {binary_bytes_per_sec}, {eta} left",
        )
        .expect("a valid template");
        let b = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr())
            .with_style(style)
            .with_prefix(format!("rebuild {n}"));
        b.enable_steady_tick(Duration::from_millis(250));
        b
    });
    let mut said = Instant::now();
    let mut pass = 0;
    let end = loop {
        std::thread::sleep(POLL);
        let status = read().map_err(|e| {
            setup_err(format!(
                "{}: {} (the mount went away; a rebuild cut short resumes when asked again)",
                ctl.display(),
                plain(&e)
            ))
        })?;
        let Some(l) = parse(&status, n) else {
            continue;
        };
        if l.state != "running" {
            break l;
        }
        if let Some(b) = &bar {
            if l.pass != pass {
                b.reset();
                pass = l.pass;
            }
            b.set_length(l.bytes.1);
            b.set_position(l.bytes.0);
            b.set_message(format!("pass {} {}/{} files", l.pass, l.files.0, l.files.1));
        } else if said.elapsed() >= LINE_EVERY {
            eprintln!(
                "rebuild {n}: pass {} {}/{} files, {}/{} bytes",
                l.pass, l.files.0, l.files.1, l.bytes.0, l.bytes.1
            );
            said = Instant::now();
        }
    };
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    match end.state.as_str() {
        "done" => {
            let summary = end.summary.unwrap_or_default();
            println!("{summary}");
            Ok(!summary.contains("could not be restored"))
        }
        _ => Err(setup_err(format!(
            "rebuild failed: {}",
            end.reason.unwrap_or_default()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_is_read_back() {
        let s = "volume 1\nrebuild branch 1 dir=/a b state=failed pass=2 files=3/9 bytes=10/90 \
                 elapsed=1.0s reason=\"no room\"\nprofile fuse\n";
        let l = parse(s, 1).expect("parsed");
        assert_eq!(l.state, "failed");
        assert_eq!((l.pass, l.files, l.bytes), (2, (3, 9), (10, 90)));
        assert_eq!(l.reason.as_deref(), Some("no room"));
        assert_eq!(parse(s, 0), None);
    }
}
