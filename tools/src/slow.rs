//! `fsprof slow MNT [-f]`: the slow-operation log of a mount (`MNT/.fsprof.slow`, recorded with
//! `--slow`), one line per request, like ext4slower; with `-f`, new records as they come.
//!
//! It also reads a file of records, such as the one `--slow-log` appends to. That file has no
//! bound, so it is read line by line, and `-f` reads on from where it stopped (like `tail -f`).

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read as _, Seek as _, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, printable};
use crate::units::fmt_secs;
use profile_store::name;

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

/// One inner call of a slow record.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Inner {
    /// The lower or branch call (`pread`, `branch1:fsync`).
    pub call: String,
    /// Its latency in nanoseconds.
    pub latency_ns: u64,
}

/// One slow record (the fields `fsprof slow` shows; `docs/format.md#slow-log` lists them all), from a mount's
/// slow log or a profile's `slowest` section.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Record {
    /// Record number since the mount.
    pub seq: u64,
    /// When the request ended.
    pub time_unix_ns: u64,
    /// Operation (`OP_FSYNC`).
    pub op: String,
    /// Latency in nanoseconds.
    pub latency_ns: u64,
    /// 0 for success.
    pub errno: i32,
    /// Path in the mount, when the daemon knew it.
    pub path: Option<String>,
    /// Calling thread (0: the kernel's own request); `None` when the reader may not see
    /// another user's process (a mount's shared records, `--share-records`).
    pub pid: Option<u32>,
    /// Command name of the caller.
    pub comm: Option<String>,
    /// Caller's uid (`None` as for `pid`).
    pub uid: Option<u32>,
    /// Offset, where it applies.
    pub offset: Option<u64>,
    /// Size, where it applies.
    pub size: Option<u64>,
    /// Inner calls, in the order made.
    #[serde(default)]
    pub inner: Vec<Inner>,
    /// Inner calls made beyond those kept (their latency is not known).
    #[serde(default)]
    pub inner_dropped: u32,
}

/// Inner calls listed by name before the rest are summed up (`+N more`).
pub const INNER_SHOWN: usize = 4;

/// The inner calls of `r` as `slow` and the report's table list them: the first
/// [`INNER_SHOWN`] in the order made, then `+N more (TIME)` for the others (a READDIRPLUS makes
/// one `statx` per entry), then `(unexplained) TIME`, the request's time no inner call
/// explains (the daemon's own, or waiting), when it is a tenth of the request or more and
/// every inner call was kept.
pub fn inner_summary(r: &Record) -> Vec<String> {
    let t = |ns: u64| fmt_secs(ns as f64 / 1e9);
    let mut out: Vec<String> = r
        .inner
        .iter()
        .take(INNER_SHOWN)
        .map(|c| format!("{} {}", printable(&c.call), t(c.latency_ns)))
        .collect();
    let rest = &r.inner[r.inner.len().min(INNER_SHOWN)..];
    let more = rest.len() + r.inner_dropped as usize;
    if more > 0 {
        let known: u64 = rest.iter().map(|c| c.latency_ns).sum();
        out.push(match (rest.is_empty(), r.inner_dropped) {
            (true, _) => format!("+{more} more"),
            (false, 0) => format!("+{more} more ({})", t(known)),
            (false, _) => format!("+{more} more (over {})", t(known)),
        });
    }
    let explained: u64 = r.inner.iter().map(|c| c.latency_ns).sum();
    let unexplained = r.latency_ns.saturating_sub(explained);
    if !r.inner.is_empty() && r.inner_dropped == 0 && unexplained * 10 >= r.latency_ns {
        out.push(format!("(unexplained) {}", t(unexplained)));
    }
    out
}

/// The profile section of the slowest requests (`--slowest`).
pub const SLOWEST_SECTION: &str = profile_store::SLOWEST_SECTION;

/// The slowest requests a profile holds for the layer its findings are about (its `slowest`
/// section, slowest first); `None` when it has none.
pub fn slowest_of(p: &profile_store::Profile) -> Result<Option<Vec<Record>>, String> {
    let layer = crate::levels::analysed(p).map_or("fuse", |l| l.name.as_str());
    let Some(s) = crate::input::section_for(p, SLOWEST_SECTION, layer) else {
        return Ok(None);
    };
    s.lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| format!("section {SLOWEST_SECTION} line {}: {e}", i + 1))
        })
        .collect::<Result<Vec<Record>, String>>()
        .map(Some)
}

const HEADER: &str = "TIME(UTC)     COMM             PID    UID    OP               LAT(ms) ERR      OFFSET    BYTES PATH  [INNER CALLS]";

/// Longest line taken as a record: one holds a few KiB at most (its inner calls are bounded).
const MAX_LINE: u64 = 1 << 20;

/// Where the records are.
#[derive(Debug)]
enum Source {
    /// A mount's ring (`.fsprof.slow`): bounded, read whole each time, and records already
    /// printed are known by their `seq`.
    Ring(PathBuf),
    /// A file that records are appended to (`--slow-log`): read on from where the last read
    /// stopped.
    Log(PathBuf),
}

impl Source {
    fn of(input: &Path) -> Source {
        if input.is_dir() {
            Source::Ring(input.join(SLOW_FILE))
        } else if input.file_name() == Some(std::ffi::OsStr::new(SLOW_FILE)) {
            Source::Ring(input.to_path_buf())
        } else {
            Source::Log(input.to_path_buf())
        }
    }

    fn path(&self) -> &Path {
        match self {
            Source::Ring(p) | Source::Log(p) => p,
        }
    }
}

fn open(path: &Path) -> Result<std::fs::File, Error> {
    profile_store::open::regular(path).map_err(|e| {
        let plain = fsprof_fuse::daemon::mount::plain(&e);
        let ring = path.file_name() == Some(std::ffi::OsStr::new(SLOW_FILE));
        match path.parent().filter(|d| ring && d.is_dir()) {
            // A mount's ring: a directory that is no mount says so, as every other command
            // does; a mount without one was mounted without --slow.
            Some(dir) if e.kind() == std::io::ErrorKind::NotFound => {
                if dir.join(crate::input::MOUNT_PROFILE).exists() {
                    Error::input(
                        dir.display().to_string(),
                        "the mount keeps no slow log (mount with --slow TIME)",
                    )
                } else {
                    crate::input::not_a_mount(&dir.display().to_string(), dir, SLOW_FILE, &e)
                }
            }
            Some(dir) => crate::input::not_a_mount(&dir.display().to_string(), dir, SLOW_FILE, &e),
            None => Error::input(path.display().to_string(), plain),
        }
    })
}

/// A mount's slow log.
const SLOW_FILE: &str = ".fsprof.slow";

fn line(r: &Record, out: &mut String) {
    let secs = r.time_unix_ns / 1_000_000_000;
    let ms = (r.time_unix_ns / 1_000_000) % 1000;
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let _ = write!(
        out,
        "{h:02}:{m:02}:{s:02}.{ms:03}  {:<16} {:<6} {:<6} {:<16} {:>7.3} {:<4} {:>10} {:>8} {}",
        r.comm.as_deref().map_or_else(|| "?".into(), name::shown),
        unknown(r.pid),
        unknown(r.uid),
        printable(&r.op),
        r.latency_ns as f64 / 1e6,
        r.errno,
        opt(r.offset),
        opt(r.size),
        r.path
            .as_deref()
            .map_or_else(|| "(unknown)".into(), name::shown),
    );
    let calls = inner_summary(r);
    if !calls.is_empty() {
        let _ = write!(out, "  [{}]", calls.join(", "));
    }
    out.push('\n');
}

/// `v`, or `?` when it was not shown.
pub fn unknown(v: Option<u32>) -> String {
    v.map_or_else(|| "?".into(), |v| v.to_string())
}

/// How far a source has been read.
#[derive(Debug, Default)]
struct Cursor {
    /// Highest `seq` printed; with `by_seq`, records at or below it are skipped.
    seq: u64,
    by_seq: bool,
    /// Bytes of whole lines consumed.
    offset: u64,
    /// Lines consumed (for error messages).
    lines: u64,
}

/// Prints the records that `r` holds past `cur` to `w`, one line each (as recorded with
/// `json`), and moves `cur` past them. A last line without its newline is printed only with
/// `eof_ends`; otherwise it is left for the next read (a writer may be in the middle of it).
/// Returns `false` when `w` was closed (a closed pipe, as with `| head`: stop quietly).
fn render(
    r: &mut impl BufRead,
    cur: &mut Cursor,
    json: bool,
    eof_ends: bool,
    name: &str,
    w: &mut dyn Write,
) -> Result<bool, Error> {
    let mut buf = Vec::new();
    let mut text = String::new();
    loop {
        buf.clear();
        let n = r
            .by_ref()
            .take(MAX_LINE + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::input(name, e))?;
        if n == 0 {
            return Ok(true);
        }
        let whole = buf.last() == Some(&b'\n');
        if !whole && n as u64 > MAX_LINE {
            return Err(Error::input(
                name,
                format!(
                    "line {}: longer than {} KiB, not a slow record",
                    cur.lines + 1,
                    MAX_LINE >> 10
                ),
            ));
        }
        if !whole && !eof_ends {
            return Ok(true);
        }
        cur.lines += 1;
        cur.offset += n as u64;
        let l = std::str::from_utf8(&buf)
            .map_err(|_| Error::input(name, format!("line {}: not UTF-8 text", cur.lines)))?
            .trim_end_matches(['\n', '\r']);
        if l.trim().is_empty() {
            continue;
        }
        let rec: Record = serde_json::from_str(l).map_err(|e| {
            let cut = if whole {
                ""
            } else {
                " (the last line, cut short: its writer stopped in the middle of it)"
            };
            Error::input(name, format!("line {}: {e}{cut}", cur.lines))
        })?;
        if cur.by_seq && rec.seq <= cur.seq {
            continue;
        }
        cur.seq = cur.seq.max(rec.seq);
        text.clear();
        if json {
            text.push_str(l);
            text.push('\n');
        } else {
            line(&rec, &mut text);
        }
        if !emit(w, text.as_bytes())? {
            return Ok(false);
        }
    }
}

/// Writes `bytes`; `false` when the reader has gone (a closed pipe).
fn emit(w: &mut dyn Write, bytes: &[u8]) -> Result<bool, Error> {
    match w.write_all(bytes) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(Error::output("standard output", e)),
    }
}

/// Reads what `src` holds past `cur` and prints it (see [`render`]). A log file shorter than
/// what was read of it was cut or replaced: it is read again from its start.
fn read_on(
    src: &Source,
    cur: &mut Cursor,
    c: &SlowConfig,
    eof_ends: bool,
    w: &mut dyn Write,
) -> Result<bool, Error> {
    let path = src.path();
    let name = path.display().to_string();
    let mut f = open(path)?;
    match src {
        Source::Ring(_) => {
            cur.by_seq = true;
            cur.offset = 0;
            cur.lines = 0;
        }
        Source::Log(_) => {
            let len = f.metadata().map_err(|e| Error::input(&name, e))?.len();
            if len < cur.offset {
                *cur = Cursor::default();
            }
            f.seek(SeekFrom::Start(cur.offset))
                .map_err(|e| Error::input(&name, e))?;
        }
    }
    let more = render(&mut BufReader::new(f), cur, c.json, eof_ends, &name, w)?;
    Ok(more && emit_flush(w)?)
}

fn emit_flush(w: &mut dyn Write) -> Result<bool, Error> {
    match w.flush() {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(Error::output("standard output", e)),
    }
}

/// What a file given to `fsprof slow` holds, judged by its first line.
enum Holds {
    /// Slow records (or nothing yet).
    Records,
    /// A profile's slowest requests (its `slowest` section), slowest first, parsed and as
    /// recorded.
    Slowest(Vec<Record>, Vec<String>),
}

/// Looks at the first line of a file of records before anything is printed: a profile given
/// instead (`fsprof slow PROFILE`) is listed from its `slowest` section if it has one, and
/// refused in one line otherwise; any other file that is not records is refused in one line.
fn holds(path: &Path) -> Result<Holds, Error> {
    let name = path.display().to_string();
    let mut first = Vec::new();
    BufReader::new(open(path)?)
        .take(MAX_LINE + 1)
        .read_until(b'\n', &mut first)
        .map_err(|e| Error::input(&name, e))?;
    if first.len() as u64 > MAX_LINE && first.last() != Some(&b'\n') {
        return Err(Error::input(
            &name,
            format!(
                "line 1: longer than {} KiB, not a slow record",
                MAX_LINE >> 10
            ),
        ));
    }
    let line = String::from_utf8_lossy(&first);
    let line = line.trim();
    if line.is_empty() || serde_json::from_str::<Record>(line).is_ok() {
        return Ok(Holds::Records);
    }
    let what = "fsprof slow reads a mount (its .fsprof.slow) or a --slow-log file: JSON lines \
                with seq, op, latency_ns";
    match crate::input::load(&name, None) {
        Ok(p) => match slowest_of(&p.profile) {
            Ok(Some(records)) => {
                let lines = p
                    .profile
                    .section(SLOWEST_SECTION)
                    .map(|s| s.lines.clone())
                    .unwrap_or_default();
                Ok(Holds::Slowest(records, lines))
            }
            Ok(None) => Err(Error::input(
                &name,
                format!(
                    "a profile, not slow records ({what}); this profile holds no slowest \
                     requests (record them with --slowest)"
                ),
            )),
            Err(e) => Err(Error::input(&name, e)),
        },
        Err(_) => Err(Error::input(
            &name,
            format!("not slow records ({what}), nor a profile: its first line is not a record"),
        )),
    }
}

/// `fsprof slow` without `-f`: every record, oldest first, written as it is read; for a
/// profile, its slowest requests, slowest first.
pub fn run(c: &SlowConfig, w: &mut dyn Write) -> Result<(), Error> {
    let src = Source::of(&c.input);
    // Opened (and a file's first line read) before the header is printed, so that a wrong
    // path, or a file of something else, prints only its error.
    drop(open(src.path())?);
    let holds = match &src {
        Source::Log(p) => holds(p)?,
        Source::Ring(_) => Holds::Records,
    };
    if !c.json && !emit(w, format!("{HEADER}\n").as_bytes())? {
        return Ok(());
    }
    match holds {
        Holds::Records => {
            read_on(&src, &mut Cursor::default(), c, true, w)?;
        }
        Holds::Slowest(records, lines) => {
            let mut text = String::new();
            for (r, l) in records.iter().zip(&lines) {
                text.clear();
                if c.json {
                    text.push_str(l);
                    text.push('\n');
                } else {
                    line(r, &mut text);
                }
                if !emit(w, text.as_bytes())? {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// `fsprof slow -f`: prints the records, then new ones every `interval`, until the mount or the
/// file goes away (an error) or the output is closed (success).
pub fn follow(c: &SlowConfig, w: &mut dyn Write) -> Result<(), Error> {
    let src = Source::of(&c.input);
    drop(open(src.path())?);
    if !c.json && !emit(w, format!("{HEADER}\n").as_bytes())? {
        return Ok(());
    }
    let mut cur = Cursor::default();
    while read_on(&src, &mut cur, c, false, w)? {
        std::thread::sleep(c.interval);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const REC: &str = r#"{"seq":3,"time_unix_ns":1795476748024716989,"op":"OP_READ","latency_ns":1077142,"errno":0,"ino":10068225,"path":"/f","pid":13100,"tgid":13100,"comm":"dd","uid":0,"offset":1022976,"size":1024,"inner":[{"call":"pread","latency_ns":1076711}],"inner_dropped":0}"#;

    fn rendered(text: &str, cur: &mut Cursor, eof_ends: bool) -> Result<String, Error> {
        let mut out = Vec::new();
        assert!(render(
            &mut text.as_bytes(),
            cur,
            false,
            eof_ends,
            "x",
            &mut out
        )?);
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn records_print_one_line_each_and_only_new_ones() {
        let mut cur = Cursor {
            by_seq: true,
            ..Cursor::default()
        };
        let out = rendered(REC, &mut cur, true).unwrap();
        assert_eq!(cur.seq, 3);
        assert!(out.contains("dd"), "{out}");
        assert!(out.contains("OP_READ"));
        assert!(out.contains("1.077"));
        assert!(out.contains("/f  [pread 1.1ms]"), "{out}");
        let mut cur = Cursor {
            by_seq: true,
            ..cur
        };
        assert_eq!(rendered(REC, &mut cur, true).unwrap(), "");
        let e = rendered("{", &mut Cursor::default(), true).unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
    }

    #[test]
    fn a_line_still_being_written_waits_for_its_end() {
        let half = &REC[..REC.len() / 2];
        let text = format!("{REC}\n{half}");
        let mut cur = Cursor::default();
        let out = rendered(&text, &mut cur, false).unwrap();
        assert_eq!(out.lines().count(), 1, "{out}");
        assert_eq!(
            cur.offset,
            REC.len() as u64 + 1,
            "read on from the half line"
        );
        // Ended (not following), the half line is an error of its own line.
        let e = rendered(&text, &mut Cursor::default(), true).unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        assert!(e.to_string().contains("cut short"), "{e}");
    }

    #[test]
    fn an_endless_line_is_refused_after_its_first_mebibyte() {
        // Bytes without a newline, as from /dev/zero: refused once MAX_LINE is passed.
        let mut endless = std::io::BufReader::new(std::io::repeat(b'x').take(64 << 20));
        let mut out = Vec::new();
        let e = render(
            &mut endless,
            &mut Cursor::default(),
            false,
            true,
            "x",
            &mut out,
        )
        .unwrap_err();
        assert!(e.to_string().contains("longer than 1024 KiB"), "{e}");
        assert!(out.is_empty());
        // What it read: the line's first mebibyte (and the reader's buffer), not all 64 MiB.
        assert!(endless.into_inner().limit() > 60 << 20);
    }

    #[test]
    fn a_log_file_is_read_on_from_where_it_stopped_and_again_once_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("slow.jsonl");
        let rec = |seq: u64| REC.replace("\"seq\":3", &format!("\"seq\":{seq}"));
        let c = SlowConfig {
            input: path.clone(),
            follow: true,
            interval: Duration::from_millis(1),
            json: true,
        };
        let src = Source::of(&path);
        assert!(matches!(src, Source::Log(_)), "{src:?}");
        let mut cur = Cursor::default();
        let read = |cur: &mut Cursor| {
            let mut out = Vec::new();
            assert!(read_on(&src, cur, &c, false, &mut out).unwrap());
            String::from_utf8(out)
                .unwrap()
                .lines()
                .map(|l| l[7..l.find(',').unwrap()].to_string())
                .collect::<Vec<_>>()
        };
        std::fs::write(&path, format!("{}\n{}\n", rec(1), rec(2))).unwrap();
        assert_eq!(read(&mut cur), ["1", "2"]);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(format!("{}\n", rec(3)).as_bytes()).unwrap();
        assert_eq!(read(&mut cur), ["3"]);
        assert_eq!(read(&mut cur), Vec::<String>::new());
        // Cut and written anew (a new mount's log): its records count again from 1.
        std::fs::write(&path, format!("{}\n", rec(1))).unwrap();
        assert_eq!(read(&mut cur), ["1"]);
    }

    /// A READDIRPLUS that made one statx per entry is not a wall of statx: four, `+N more`
    /// with their time, and the time no inner call explains.
    #[test]
    fn many_inner_calls_are_summed_up_and_the_unexplained_time_named() {
        let mut r: Record = serde_json::from_str(REC).unwrap();
        r.op = "OP_READDIRPLUS".into();
        r.latency_ns = 9_274_000;
        r.inner = (0..16)
            .map(|_| Inner {
                call: "statx".into(),
                latency_ns: 5_000,
            })
            .collect();
        assert_eq!(
            inner_summary(&r),
            [
                "statx 5.0us",
                "statx 5.0us",
                "statx 5.0us",
                "statx 5.0us",
                "+12 more (60us)",
                "(unexplained) 9.2ms"
            ]
        );
        let mut text = String::new();
        line(&r, &mut text);
        assert!(
            text.ends_with("[statx 5.0us, statx 5.0us, statx 5.0us, statx 5.0us, +12 more (60us), (unexplained) 9.2ms]\n"),
            "{text}"
        );
        // Calls beyond those the daemon kept: counted, and no unexplained time claimed.
        r.inner_dropped = 3;
        assert_eq!(inner_summary(&r)[4], "+15 more (over 60us)");
        assert_eq!(inner_summary(&r).len(), 5);
        // One inner call that explains the request: just it.
        let one: Record = serde_json::from_str(REC).unwrap();
        assert_eq!(inner_summary(&one), ["pread 1.1ms"]);
    }

    #[test]
    fn control_characters_of_names_are_escaped() {
        // A file name or command with ESC, BEL and a newline: one line, no raw escapes.
        let hostile = REC
            .replace("\"path\":\"/f\"", r#""path":"/e\u001b[2J\u0007\rX\nY""#)
            .replace("\"comm\":\"dd\"", r#""comm":"c\u001b[31m""#);
        let out = rendered(&hostile, &mut Cursor::default(), true).unwrap();
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(!out.contains(['\u{1b}', '\u{7}', '\r']), "{out:?}");
        assert!(out.contains(r"/e\u{1b}[2J\u{7}\rX\nY"), "{out}");
        assert!(out.contains(r"c\u{1b}[31m"), "{out}");
    }

    #[test]
    fn a_closed_output_stops_quietly() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let more = render(
            &mut REC.as_bytes(),
            &mut Cursor::default(),
            false,
            true,
            "x",
            &mut Closed,
        )
        .unwrap();
        assert!(!more);
    }
}
