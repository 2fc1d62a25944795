//! `fsprof slow MNT [-f]`: the slow-operation log of a mount (`MNT/.fsprof.slow`, recorded with
//! `--slow`), one line per request, like ext4slower; with `-f`, new records as they come.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::error::Error;
use crate::units::fmt_secs;

/// `fsprof slow`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowConfig {
    /// The mount point (or a file of slow records: `--slow-log`'s, or a copy of the ring).
    pub input: PathBuf,
    /// Keep reading and print new records as they come.
    pub follow: bool,
    /// How often to look for new records when following.
    pub interval: Duration,
    /// Print the records as JSON lines, as recorded.
    pub json: bool,
}

#[derive(Debug, Deserialize)]
struct Inner {
    call: String,
    latency_ns: u64,
}

/// One slow record (the fields `fsprof slow` shows; SPEC §10 lists them all).
#[derive(Debug, Deserialize)]
struct Record {
    seq: u64,
    time_unix_ns: u64,
    op: String,
    latency_ns: u64,
    errno: i32,
    path: Option<String>,
    pid: u32,
    comm: Option<String>,
    uid: u32,
    offset: Option<u64>,
    size: Option<u64>,
    #[serde(default)]
    inner: Vec<Inner>,
}

const HEADER: &str = "TIME(UTC)     COMM             PID    UID    OP               LAT(ms) ERR      OFFSET    BYTES PATH  [INNER CALLS]";

fn source(input: &Path) -> PathBuf {
    if input.is_dir() {
        input.join(".fsprof.slow")
    } else {
        input.to_path_buf()
    }
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::NotFound {
            " (is the mount's slow log on? mount with --slow TIME)"
        } else {
            ""
        };
        Error::input(path.display().to_string(), format!("{e}{hint}"))
    })
}

fn line(r: &Record, out: &mut String) {
    let secs = r.time_unix_ns / 1_000_000_000;
    let ms = (r.time_unix_ns / 1_000_000) % 1000;
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let _ = write!(
        out,
        "{h:02}:{m:02}:{s:02}.{ms:03}  {:<16} {:<6} {:<6} {:<16} {:>7.3} {:<4} {:>10} {:>8} {}",
        r.comm.as_deref().unwrap_or("?"),
        r.pid,
        r.uid,
        r.op,
        r.latency_ns as f64 / 1e6,
        r.errno,
        opt(r.offset),
        opt(r.size),
        r.path.as_deref().unwrap_or("(unknown)"),
    );
    if !r.inner.is_empty() {
        let calls: Vec<String> = r
            .inner
            .iter()
            .map(|c| format!("{} {}", c.call, fmt_secs(c.latency_ns as f64 / 1e9)))
            .collect();
        let _ = write!(out, "  [{}]", calls.join(", "));
    }
    out.push('\n');
}

/// Appends the records of `text` newer than `after` to `out`; returns the last `seq` seen.
fn render(text: &str, after: u64, json: bool, name: &str, out: &mut String) -> Result<u64, Error> {
    let mut last = after;
    for (i, l) in text.lines().enumerate() {
        if l.is_empty() {
            continue;
        }
        let r: Record = serde_json::from_str(l)
            .map_err(|e| Error::input(name, format!("line {}: {e}", i + 1)))?;
        if r.seq <= after {
            continue;
        }
        last = last.max(r.seq);
        if json {
            out.push_str(l);
            out.push('\n');
        } else {
            line(&r, out);
        }
    }
    Ok(last)
}

/// `fsprof slow` without `-f`: every record in the ring, oldest first.
pub fn run(c: &SlowConfig, out: &mut String) -> Result<(), Error> {
    let path = source(&c.input);
    let text = read(&path)?;
    if !c.json {
        out.push_str(HEADER);
        out.push('\n');
    }
    render(&text, 0, c.json, &path.display().to_string(), out)?;
    Ok(())
}

/// `fsprof slow -f`: prints the records, then new ones every `interval`, until the mount goes
/// away (an error) or the output is closed (success).
pub fn follow(c: &SlowConfig, w: &mut impl std::io::Write) -> Result<(), Error> {
    let path = source(&c.input);
    let name = path.display().to_string();
    let mut last = 0;
    let mut first = true;
    loop {
        let text = read(&path)?;
        let mut out = String::new();
        if first && !c.json {
            out.push_str(HEADER);
            out.push('\n');
        }
        first = false;
        last = render(&text, last, c.json, &name, &mut out)?;
        if let Err(e) = w.write_all(out.as_bytes()).and_then(|()| w.flush()) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(());
            }
            return Err(Error::output("standard output", e));
        }
        std::thread::sleep(c.interval);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REC: &str = r#"{"seq":3,"time_unix_ns":1795476748024716989,"op":"OP_READ","latency_ns":1077142,"errno":0,"ino":10068225,"path":"/f","pid":13100,"tgid":13100,"comm":"dd","uid":0,"offset":1022976,"size":1024,"inner":[{"call":"pread","latency_ns":1076711}],"inner_dropped":0}"#;

    #[test]
    fn records_print_one_line_each_and_only_new_ones() {
        let mut out = String::new();
        assert_eq!(render(REC, 0, false, "x", &mut out).unwrap(), 3);
        assert!(out.contains("dd"), "{out}");
        assert!(out.contains("OP_READ"));
        assert!(out.contains("1.077"));
        assert!(out.contains("/f  [pread 1.1ms]"), "{out}");
        let mut again = String::new();
        assert_eq!(render(REC, 3, false, "x", &mut again).unwrap(), 3);
        assert!(again.is_empty());
        assert!(
            render("{", 0, false, "x", &mut again)
                .unwrap_err()
                .to_string()
                .contains("line 1")
        );
    }
}
