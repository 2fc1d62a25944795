//! `raif rebuild --mounted MNT --replace N NEWDIR`: asks the mount to rebuild branch N onto
//! NEWDIR while it serves (`rebuild N NEWDIR` written to `MNT/.raif`, see [`crate::online`]),
//! then follows the `rebuild` line of `MNT/.raif`: a progress bar on a terminal (a line every
//! few seconds otherwise) until the branch is online or the rebuild failed.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fsprof_fuse::mount::{SetupError, absolute_dir, plain, setup_err};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often `.raif` is read.
const POLL: Duration = Duration::from_millis(200);
/// How often a line of progress is printed when standard error is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(5);

/// The fields of the `rebuild` line of `.raif`.
#[derive(Debug, Default, PartialEq)]
struct Line {
    state: String,
    pass: u64,
    files: (u64, u64),
    bytes: (u64, u64),
    reason: String,
    summary: String,
}

/// Parses the `rebuild branch N ...` line of `status` (for branch `n`).
fn parse(status: &str, n: usize) -> Option<Line> {
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("rebuild branch {n} ")))?;
    let field = |k: &str| {
        let at = line.find(&format!(" {k}="))? + k.len() + 2;
        let rest = &line[at..];
        Some(match rest.strip_prefix('"') {
            Some(q) => q.split('"').next().unwrap_or("").to_string(),
            None => rest.split(' ').next().unwrap_or("").to_string(),
        })
    };
    let pair = |k: &str| {
        let v = field(k)?;
        let (a, b) = v.split_once('/')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    };
    Some(Line {
        state: field("state")?,
        pass: field("pass")?.parse().ok()?,
        files: pair("files")?,
        bytes: pair("bytes")?,
        reason: field("reason").unwrap_or_default(),
        summary: field("summary").unwrap_or_default(),
    })
}

/// Runs the command; returns whether nothing was lost.
pub fn rebuild_mounted(mnt: &Path, n: usize, newdir: &Path) -> Result<bool, SetupError> {
    let mnt = absolute_dir(mnt, "--mounted")?;
    let ctl: PathBuf = mnt.join(crate::status::NAME);
    let read = || std::fs::read_to_string(&ctl);
    let not_raif = |e: std::io::Error| {
        setup_err(format!(
            "{}: {} (not a raif mount, or mounted with --no-profile: the rebuild is asked \
             through its control file)",
            ctl.display(),
            plain(&e)
        ))
    };
    let before = read().map_err(not_raif)?;
    if !before.starts_with("volume ") {
        return Err(setup_err(format!(
            "{}: not a raif status file",
            ctl.display()
        )));
    }
    let newdir = absolute_dir(newdir, "NEWDIR")?;
    let asked = format!("rebuild {n} {}\n", newdir.display());
    if let Err(e) = std::fs::write(&ctl, asked) {
        let why = read()
            .ok()
            .and_then(|s| parse(&s, n))
            .map(|l| l.reason)
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| plain(&e));
        return Err(setup_err(format!("the mount refused: {why}")));
    }
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
            println!("{}", end.summary);
            Ok(!end.summary.contains("could not be restored"))
        }
        _ => Err(setup_err(format!("rebuild failed: {}", end.reason))),
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
        assert_eq!(l.reason, "no room");
        assert_eq!(parse(s, 0), None);
    }
}
