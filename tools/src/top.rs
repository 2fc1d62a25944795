//! `fsprof top MNT|URL`: a live view of a mount (its `.fsprof`) or of a `--metrics` endpoint,
//! refreshed every interval, like `top`.
//!
//! Each frame is the difference between two reads of the profile: per operation of the layer
//! shown, the calls started in the interval and per second, the mean and estimated p99 of the
//! calls that finished in it, the time at stake (their summed latency), and the change of the
//! call rate since the interval before. Rows are sorted by time at stake unless another key is
//! chosen. Where the mount records them, the processes or users (`--by` layers) with the most
//! time at stake, and the hottest files (`--hot-files`, counted since the last reset) follow.
//! A profile reset between two reads starts the differences again from zero.
//!
//! Interactive (the default on a terminal): `q` quits, `t` `c` `m` `p` `n` sort by time at
//! stake, calls, mean, p99, name. `-b` prints frames one after another for logs (`-n` of them).

use crate::background::is_background;
use std::fmt::Write as _;
use std::io::Write;
use std::time::{Duration, Instant};

use profile_store::{Layer, OpProfile, Profile, keyed, name, views};

use crate::error::{Error, printable};
use crate::units::Clock;

/// What rows are sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    /// Latency summed over the interval's calls.
    #[default]
    Time,
    /// Calls in the interval.
    Calls,
    /// Mean latency.
    Mean,
    /// Estimated p99.
    P99,
    /// Operation name.
    Name,
}

impl SortKey {
    fn from_key(c: char) -> Option<SortKey> {
        Some(match c {
            't' => SortKey::Time,
            'c' => SortKey::Calls,
            'm' => SortKey::Mean,
            'p' => SortKey::P99,
            'n' => SortKey::Name,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            SortKey::Time => "time at stake",
            SortKey::Calls => "calls",
            SortKey::Mean => "mean",
            SortKey::P99 => "p99",
            SortKey::Name => "name",
        }
    }
}

impl std::str::FromStr for SortKey {
    type Err = String;
    fn from_str(s: &str) -> Result<SortKey, String> {
        match s {
            "time" => Ok(SortKey::Time),
            "calls" => Ok(SortKey::Calls),
            "mean" => Ok(SortKey::Mean),
            "p99" => Ok(SortKey::P99),
            "name" => Ok(SortKey::Name),
            _ => Err(format!(
                "unknown sort key '{s}' (time, calls, mean, p99, name)"
            )),
        }
    }
}

/// `fsprof top`.
#[derive(Debug, Clone, PartialEq)]
pub struct TopConfig {
    /// A mount point, a `/metrics` URL, or a profile file.
    pub input: String,
    /// Time between frames.
    pub interval: Duration,
    /// Print frames one after another instead of redrawing the screen.
    pub batch: bool,
    /// Stop after this many frames.
    pub iterations: Option<u64>,
    /// Initial sort.
    pub sort: SortKey,
    /// The layer shown (default: the primary one).
    pub layer: Option<String>,
    /// Operations listed at most.
    pub rows: usize,
    /// `--cycles-per-sec` for inputs without a clock rate.
    pub cycles_per_sec: Option<u64>,
}

/// One operation's interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The operation (or, for a key table, the key).
    pub name: String,
    /// Calls started in the interval.
    pub calls: u64,
    /// Calls per second.
    pub rate: f64,
    /// Mean latency of the calls finished, in cycles.
    pub mean: f64,
    /// Estimated p99, in cycles.
    pub p99: f64,
    /// Summed latency of the calls finished, in cycles.
    pub time: f64,
    /// Change of the call rate since the interval before (`None` in the first).
    pub rate_change: Option<f64>,
}

/// The differences between two reads of a profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// The layer's rows.
    pub ops: Vec<Row>,
    /// Rows of the `--by` layers (`fuse@pid:...`), by key.
    pub keys: Vec<Row>,
    /// The hottest files (cumulative): path and latency at stake in cycles.
    pub files: Vec<(String, u64)>,
    /// The layer shown.
    pub layer: String,
    /// Seconds between the reads.
    pub seconds: f64,
}

/// `cur − prev` of one operation (all of `cur` when `prev` is missing or was reset).
fn delta(cur: &OpProfile, prev: Option<&OpProfile>) -> OpProfile {
    let Some(p) = prev.filter(|p| p.count <= cur.count && p.total <= cur.total) else {
        return cur.clone();
    };
    let mut d = cur.clone();
    d.count -= p.count;
    d.total -= p.total;
    for (e, row) in d.epochs.iter_mut().enumerate() {
        for (b, v) in row.iter_mut().enumerate() {
            let before = p.epochs.get(e).and_then(|r| r.get(b)).copied().unwrap_or(0);
            *v = v.saturating_sub(before);
        }
    }
    d
}

fn row(l: &Layer, name: &str, d: &OpProfile, seconds: f64) -> Row {
    let finished = d.bucket_sum();
    Row {
        name: name.to_string(),
        calls: d.count,
        rate: d.count as f64 / seconds.max(1e-9),
        mean: if finished > 0 {
            d.total as f64 / finished as f64
        } else {
            0.0
        },
        p99: views::percentiles(d, l.resolution).map_or(0.0, |q| q[2]),
        time: d.total as f64,
        rate_change: None,
    }
}

/// The frame between `prev` (none: since the last reset) and `cur`, `seconds` apart; the rate
/// changes against `last` (the frame before).
pub fn frame(
    prev: Option<&Profile>,
    cur: &Profile,
    seconds: f64,
    layer: Option<&str>,
    last: Option<&Frame>,
) -> Result<Frame, String> {
    let l = crate::input::select_layer(cur, layer)?;
    let pl = prev.and_then(|p| p.layer(&l.name));
    let mut ops: Vec<Row> = l
        .ops
        .iter()
        .map(|o| {
            row(
                l,
                &o.name,
                &delta(o, pl.and_then(|p| p.op(&o.name))),
                seconds,
            )
        })
        .collect();
    ops.retain(|r| r.calls > 0 || r.time > 0.0);
    let mut keys = Vec::new();
    for kl in &cur.layers {
        let label = match keyed::parse(&kl.name) {
            Some(keyed::Keyed::Key { base, key, value }) if base == l.name => {
                format!("{key}:{}", printable(&value))
            }
            Some(keyed::Keyed::Other { base }) if base == l.name => "other".to_string(),
            _ => continue,
        };
        let pk = prev.and_then(|p| p.layer(&kl.name));
        let mut sum = OpProfile::new(kl.name.clone(), kl.buckets, 1);
        for o in &kl.ops {
            let d = delta(o, pk.and_then(|p| p.op(&o.name)));
            sum.count += d.count;
            sum.total += d.total;
            for (s, v) in sum.epochs[0].iter_mut().zip(d.merged()) {
                *s += v;
            }
        }
        let r = row(kl, &label, &sum, seconds);
        if r.calls > 0 || r.time > 0.0 {
            keys.push(r);
        }
    }
    keys.sort_by(|a, b| b.time.total_cmp(&a.time));
    keys.truncate(5);
    let files = hot_files(cur);
    let mut f = Frame {
        ops,
        keys,
        files,
        layer: l.name.clone(),
        seconds,
    };
    if let Some(last) = last {
        for r in &mut f.ops {
            let before = last
                .ops
                .iter()
                .find(|x| x.name == r.name)
                .map_or(0.0, |x| x.rate);
            r.rate_change = Some(r.rate - before);
        }
    }
    Ok(f)
}

/// The top five of the `hot_files` section by latency: path and cycles.
fn hot_files(p: &Profile) -> Vec<(String, u64)> {
    let Some(s) = p.section(profile_store::HOT_FILES_SECTION) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for l in &s.lines {
        let field = |k: &str| {
            l.split(' ')
                .find_map(|f| f.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
        };
        if field("by") != Some("latency") {
            continue;
        }
        if let (Some(v), Some(path)) = (
            field("value").and_then(|v| v.parse::<u64>().ok()),
            field("path"),
        ) {
            // Kept in the text form; shown with `name::shown`.
            out.push((path.to_string(), v));
        }
    }
    out.sort_by_key(|e| std::cmp::Reverse(e.1));
    out.truncate(5);
    out
}

fn sort(rows: &mut [Row], key: SortKey) {
    match key {
        // No caller waits for a background operation (`FORGET`, `RELEASE`): its time is at
        // stake for no one, so it comes after every operation a caller waits for, as in
        // every other view's ranking.
        SortKey::Time => rows.sort_by(|a, b| {
            is_background(&a.name)
                .cmp(&is_background(&b.name))
                .then(b.time.total_cmp(&a.time))
        }),
        SortKey::Calls => rows.sort_by_key(|r| std::cmp::Reverse(r.calls)),
        SortKey::Mean => rows.sort_by(|a, b| b.mean.total_cmp(&a.mean)),
        SortKey::P99 => rows.sort_by(|a, b| b.p99.total_cmp(&a.p99)),
        SortKey::Name => rows.sort_by(|a, b| a.name.cmp(&b.name)),
    }
}

/// The frame as text: a header line, then a table.
pub fn render(f: &Frame, key: SortKey, clock: Clock, rows: usize, input: &str) -> String {
    let mut out = String::new();
    let total: u64 = f.ops.iter().map(|r| r.calls).sum();
    let _ = writeln!(
        out,
        "fsprof top - {input} - layer {} - {total} calls in {:.2}s - sorted by {}",
        f.layer,
        f.seconds,
        key.name()
    );
    let lat = |c: f64| clock.latency(c);
    let _ = writeln!(
        out,
        "{:<18} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "OPERATION", "CALLS", "CALLS/S", "Δ/S", "MEAN", "P99", "AT STAKE"
    );
    let mut ops = f.ops.clone();
    sort(&mut ops, key);
    let mut legend = Vec::new();
    for r in ops.iter().take(rows) {
        let change = r
            .rate_change
            .map_or_else(|| "-".to_string(), |c| format!("{c:+.1}"));
        let name = if is_background(&r.name) {
            if legend.is_empty() {
                legend.push(BACKGROUND_LEGEND);
            }
            format!("{}{BACKGROUND_MARK}", r.name)
        } else {
            r.name.clone()
        };
        let _ = writeln!(
            out,
            "{:<18} {:>9} {:>10.1} {:>10} {:>10} {:>10} {:>10}",
            name,
            r.calls,
            r.rate,
            change,
            lat(r.mean),
            lat(r.p99),
            lat(r.time)
        );
    }
    if !f.keys.is_empty() {
        let _ = writeln!(
            out,
            "\n{:<28} {:>9} {:>10} {:>10}",
            "WHO", "CALLS", "MEAN", "AT STAKE"
        );
        for r in &f.keys {
            if r.name == "comm:?" {
                legend.push(KERNEL_KEY_LEGEND);
            }
            let _ = writeln!(
                out,
                "{:<28} {:>9} {:>10} {:>10}",
                r.name,
                r.calls,
                lat(r.mean),
                lat(r.time)
            );
        }
    }
    if !f.files.is_empty() {
        let _ = writeln!(
            out,
            "\n{:<10} HOTTEST FILES (since the last reset)",
            "AT STAKE"
        );
        for (path, v) in &f.files {
            let _ = writeln!(out, "{:<10} {}", lat(*v as f64), name::shown(path));
        }
    }
    if !legend.is_empty() {
        out.push('\n');
        for l in legend {
            let _ = writeln!(out, "{l}");
        }
    }
    out
}

/// Marks an operation no caller waits for.
const BACKGROUND_MARK: &str = " *";

/// What [`BACKGROUND_MARK`] means, under a frame that shows one.
const BACKGROUND_LEGEND: &str = "* background: the kernel sends it and no caller waits for it \
     (FORGET, RELEASE...); listed after the operations a caller waits for";

/// What the key `comm:?` means, under a frame that shows it.
const KERNEL_KEY_LEGEND: &str = "comm:? the kernel's own requests (pid 0, no process: \
     RELEASE after the last close, FORGET, writeback)";

/// A source of successive profiles.
struct Source<'a> {
    cfg: &'a TopConfig,
    prev: Option<(Profile, Instant)>,
    last: Option<Frame>,
}

impl Source<'_> {
    /// Reads the input and returns the frame since the read before (the first frame: since the
    /// last reset, over the time the profile says it has been recording, if it says).
    fn next(&mut self) -> Result<(Frame, Clock), Error> {
        let loaded = crate::input::load(&self.cfg.input, self.cfg.cycles_per_sec)?;
        let now = Instant::now();
        let cur = loaded.profile;
        let seconds = match &self.prev {
            Some((_, t)) => now.duration_since(*t).as_secs_f64(),
            None => since_start(&cur).unwrap_or(self.cfg.interval.as_secs_f64()),
        };
        let f = frame(
            self.prev.as_ref().map(|(p, _)| p),
            &cur,
            seconds,
            self.cfg.layer.as_deref(),
            self.last.as_ref(),
        )
        .map_err(|e| Error::input(&self.cfg.input, e))?;
        let clock = Clock(cur.cycles_per_sec);
        self.prev = Some((cur, now));
        self.last = Some(f.clone());
        Ok((f, clock))
    }
}

/// Seconds since the profile's start (its last reset), if it records one.
fn since_start(p: &Profile) -> Option<f64> {
    let start = p.started_unix_ns?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos() as u64;
    (now > start).then(|| (now - start) as f64 / 1e9)
}

/// `fsprof top -b`: frames one after another on `out`, each after the interval, `iterations`
/// of them (forever without).
pub fn batch(cfg: &TopConfig, out: &mut dyn Write) -> Result<(), Error> {
    let mut src = Source {
        cfg,
        prev: None,
        last: None,
    };
    let mut n = 0u64;
    // The first read only sets the baseline; each frame is one interval.
    src.next()?;
    src.last = None;
    loop {
        std::thread::sleep(cfg.interval);
        let (f, clock) = src.next()?;
        let text = render(&f, cfg.sort, clock, cfg.rows, &cfg.input);
        let io = |e: std::io::Error| Error::output("standard output", e);
        writeln!(out, "{text}").map_err(io)?;
        out.flush().map_err(io)?;
        n += 1;
        if cfg.iterations.is_some_and(|max| n >= max) {
            return Ok(());
        }
    }
}

/// `fsprof top`: redraws the screen each interval until `q` (or the `-n` frames).
pub fn interactive(cfg: &TopConfig) -> Result<(), Error> {
    use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
    use crossterm::{cursor, execute, terminal};

    let term = |e: std::io::Error| Error::output("terminal", e);
    let mut src = Source {
        cfg,
        prev: None,
        last: None,
    };
    // The first frame covers the time since the last reset.
    let mut shown = Some(src.next()?);
    terminal::enable_raw_mode().map_err(term)?;
    let mut stdout = std::io::stdout();
    let _restore = Restore;
    execute!(stdout, terminal::EnterAlternateScreen, cursor::Hide).map_err(term)?;
    let mut key = cfg.sort;
    let mut frames = 0u64;
    let mut next = Instant::now() + cfg.interval;
    loop {
        if let Some((f, clock)) = &shown {
            let text = render(f, key, *clock, cfg.rows, &cfg.input);
            execute!(
                stdout,
                cursor::MoveTo(0, 0),
                terminal::Clear(terminal::ClearType::All)
            )
            .map_err(term)?;
            for line in text.lines() {
                write!(stdout, "{line}\r\n").map_err(term)?;
            }
            write!(
                stdout,
                "\r\nq quit  t c m p n sort by time, calls, mean, p99, name\r\n"
            )
            .map_err(term)?;
            stdout.flush().map_err(term)?;
        }
        let wait = next.saturating_duration_since(Instant::now());
        if event::poll(wait).map_err(term)? {
            if let Event::Key(k) = event::read().map_err(term)? {
                if k.kind != KeyEventKind::Press {
                    continue;
                }
                match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                        return Ok(());
                    }
                    KeyCode::Char(c) => {
                        if let Some(s) = SortKey::from_key(c) {
                            key = s;
                        }
                    }
                    _ => {}
                }
            }
            continue;
        }
        next = Instant::now() + cfg.interval;
        shown = Some(src.next()?);
        frames += 1;
        if cfg.iterations.is_some_and(|max| frames >= max) {
            return Ok(());
        }
    }
}

/// Leaves raw mode and the alternate screen when dropped (also on an error or a panic).
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        use crossterm::{cursor, execute, terminal};
        let _ = execute!(
            std::io::stdout(),
            terminal::LeaveAlternateScreen,
            cursor::Show
        );
        let _ = terminal::disable_raw_mode();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::Resolution;

    fn prof(reads: u64, bucket: usize) -> Profile {
        let mut l = Layer::new("fuse", Resolution::ONE);
        let mut o = OpProfile::new("OP_READ", l.buckets, 1);
        o.count = reads;
        o.epochs[0][bucket] = reads;
        o.total = reads * (1 << bucket);
        l.ops.push(o);
        Profile {
            cycles_per_sec: Some(1_000_000),
            layers: vec![l],
            ..Profile::default()
        }
    }

    #[test]
    fn a_frame_is_the_difference_of_two_reads() {
        let a = prof(10, 10);
        let b = prof(25, 10);
        let f1 = frame(Some(&a), &b, 2.0, None, None).unwrap();
        assert_eq!(f1.ops.len(), 1);
        let r = &f1.ops[0];
        assert_eq!(r.calls, 15);
        assert_eq!(r.rate, 7.5);
        assert_eq!(r.mean, 1024.0);
        assert_eq!(r.rate_change, None);
        let c = prof(45, 10);
        let f2 = frame(Some(&b), &c, 2.0, None, Some(&f1)).unwrap();
        assert_eq!(f2.ops[0].calls, 20);
        assert_eq!(f2.ops[0].rate_change, Some(2.5));
        // A reset between two reads: the frame counts from zero.
        let f3 = frame(Some(&c), &prof(3, 10), 1.0, None, None).unwrap();
        assert_eq!(f3.ops[0].calls, 3);
        let text = render(&f2, SortKey::Calls, Clock(Some(1_000_000)), 10, "m");
        assert!(
            text.contains("sorted by calls") && text.contains("OP_READ"),
            "{text}"
        );
        assert!(frame(None, &a, 1.0, Some("nope"), None).is_err());
    }

    #[test]
    fn background_operations_rank_after_those_a_caller_waits_for() {
        let row = |name: &str, time: f64| Row {
            name: name.into(),
            calls: 1,
            rate: 1.0,
            mean: time,
            p99: time,
            time,
            rate_change: None,
        };
        let mut rows = vec![
            row("OP_RELEASE", 900.0),
            row("OP_READ", 10.0),
            row("OP_FORGET", 500.0),
            row("OP_LOOKUP", 20.0),
        ];
        sort(&mut rows, SortKey::Time);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["OP_LOOKUP", "OP_READ", "OP_RELEASE", "OP_FORGET"]);
        // On screen, a background operation is marked, the mark explained under the table,
        // and so is the kernel's own key.
        let f = Frame {
            ops: rows,
            keys: vec![row("comm:?", 900.0), row("comm:tar", 30.0)],
            files: Vec::new(),
            layer: "fuse".into(),
            seconds: 1.0,
        };
        let text = render(&f, SortKey::Time, Clock(Some(1_000_000)), 10, "m");
        let line = |op: &str| {
            text.lines()
                .find(|l| l.starts_with(op))
                .unwrap()
                .to_string()
        };
        assert!(line("OP_RELEASE").starts_with("OP_RELEASE *"), "{text}");
        assert!(line("OP_FORGET").starts_with("OP_FORGET *"), "{text}");
        assert!(!line("OP_READ").contains('*'), "{text}");
        assert!(text.contains("\n* background: "), "{text}");
        assert!(
            text.contains("\ncomm:? the kernel's own requests"),
            "{text}"
        );
        // Neither legend without what it explains.
        let plain = Frame {
            ops: vec![row("OP_READ", 1.0)],
            keys: vec![row("comm:tar", 1.0)],
            ..f
        };
        let text = render(&plain, SortKey::Time, Clock(Some(1_000_000)), 10, "m");
        assert!(
            !text.contains("background") && !text.contains("comm:?"),
            "{text}"
        );
    }
}
