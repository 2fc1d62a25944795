//! The text format of profiles (`docs/format.md#text-format`): writer and parser.
//!
//! ```text
//! # fsprof-profile v1
//! # started_unix_ns=1795000000000000000 clock=tsc cycles_per_sec=2893421000 invariant_tsc=true
//! # layer=fuse resolution=1 buckets=64 epoch_cycles=0 epochs=1 max_epochs_reached=false
//! OP_LOOKUP 3 1800
//!  0 0 0 0 0 0 0 0 0 2 1 0 ... (64 numbers in all)
//! ```
//!
//! * Line 1 is the version line; then one or more global lines (`#` and `key=value` pairs, the
//!   first key not `layer`); then layer blocks, each a `# layer=NAME ...` line and its operations.
//! * An operation is `OP_NAME count total` followed by exactly `epochs` epoch lines, each either
//!   ` n n n ...` (exactly `buckets` numbers, one leading space) or `-` for an all-zero epoch.
//! * Numbers are decimal u64 without leading zeros, separated by one space; no tabs, no trailing
//!   spaces, no blank lines; every line ends with `\n`.
//! * Known keys are written in a fixed order (global: `started_unix_ns clock cycles_per_sec
//!   invariant_tsc`; layer: `resolution buckets epoch_cycles epochs max_epochs_reached`), unknown
//!   ones after them in the order read. Operations are written in listing order
//!   ([`ops::STANDARD`] order, then alphabetical), only those with a non-zero count.
//! * A file without the version line is a profile of the original tools (thesis §5.8): only
//!   operation blocks; it becomes one layer named `original` with resolution 1, the bucket count
//!   of its data and the largest epoch count of its operations (shorter ones are padded with zero
//!   epochs at the end).
//!
//! Writer → parser → writer is byte-identical. The parser reports the first problem with its
//! line number and never panics.
//!
//! # Version 2
//!
//! Version 2 holds what request records and the user level add. A profile that uses any of it
//! starts with `# fsprof-profile v2`; one that does not is written as version 1, byte for byte, so
//! older readers keep reading simple profiles ([`Profile::version`]). Version 2 allows:
//!
//! * operations named `SYS_...` (C library calls timed in the application, the `user` layer);
//! * per-key layers, `LAYER@KEY:VALUE` and `LAYER@other` ([`crate::keyed`]);
//! * sections after the layers, each a `# section=NAME key=value...` line (the first key is
//!   `section`) followed by its lines, up to the next `# section=` line or the end:
//!
//! ```text
//! section  = "# section=" name *(SP key "=" value) LF *section-line
//! section-line = 1*(%x20-7E) LF        ; not starting with "#", no trailing space
//! ```
//!
//! A reader keeps every section as lines ([`Section`]), whether or not it knows its kind; each
//! kind's lines are documented where it is produced. A version-1 profile with any of these is
//! refused (the writer would not write it back as version 1).
//!
//! # Limits
//!
//! A two-byte `-` line stands for a whole epoch of zeros, and a profile of the original tools
//! pads every operation to the longest one's epochs, so a small file can describe a very large
//! profile. The parser bounds what it builds, and checks the bound *before* allocating:
//!
//! * at most [`MAX_BUCKETS`] (512 = 64 · 8, the most any resolution has) buckets per line;
//! * at most [`MAX_EPOCHS`] (65536) epochs per layer;
//! * at most [`MAX_CELLS`] (2^25) bucket counts in the whole profile: operations × epochs ×
//!   buckets summed over the layers, each epoch array also counting [`ARRAY_OVERHEAD`] for its
//!   own bookkeeping. That is about 256 MiB in memory. A recorder with the default 256 epochs
//!   at the highest resolution, every one of fsprof-fuse's 38 operations called, takes
//!   38 × 256 × 520 ≈ 5.1 million: six such layers fit.
//!
//! * at most [`MAX_LINE`] (64 KiB) bytes per line;
//! * names, keys and values count against [`MAX_CELLS`] too (8 bytes a count), so endless
//!   metadata or empty layers are bounded like counts; duplicates are found in linear time.
//!
//! A profile past a limit is rejected with the line that crosses it. [`parse_reader`] reads a
//! stream line by line with these limits applied as it goes, checking each byte as it arrives:
//! memory stays bounded whatever the stream yields (`/dev/zero`, a file with one endless line),
//! and an input whose first line starts neither a profile nor an operation fails within it.

use std::fmt::{self, Write as _};

use crate::bucket::Resolution;
use crate::clock::ClockKind;
use crate::ops;
use crate::profile::{Layer, OpProfile, Profile, Section};

/// The first line of a version-1 profile (what every profile without version-2 content is
/// written as, byte for byte as before version 2 existed).
pub const VERSION_LINE: &str = "# fsprof-profile v1";

/// The first line of a version-2 profile (sections, `SYS_` operations, per-key layers:
/// `docs/format.md#version-2`).
pub const VERSION_LINE_2: &str = "# fsprof-profile v2";

/// Name given to the single layer of a profile of the original tools.
pub const ORIGINAL_LAYER: &str = "original";

use crate::limits::Budget;
pub use crate::limits::{
    ARRAY_OVERHEAD, MAX_BUCKETS, MAX_CELLS, MAX_EPOCHS, RECORDABLE_CELLS, check_recordable,
};

/// A text profile that could not be parsed: the 1-based line and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What was expected or found.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Writes `p` in the text format.
pub fn write(p: &Profile) -> String {
    let mut out =
        String::with_capacity(256 + p.layers.iter().map(|l| l.ops.len() * 300).sum::<usize>());
    out.push_str(if p.version() == 2 {
        VERSION_LINE_2
    } else {
        VERSION_LINE
    });
    out.push('\n');
    let start = out.len();
    out.push('#');
    if let Some(v) = p.started_unix_ns {
        let _ = write!(out, " started_unix_ns={v}");
    }
    if let Some(v) = p.clock {
        let _ = write!(out, " clock={v}");
    }
    if let Some(v) = p.cycles_per_sec {
        let _ = write!(out, " cycles_per_sec={v}");
    }
    if let Some(v) = p.invariant_tsc {
        let _ = write!(out, " invariant_tsc={v}");
    }
    for (k, v) in &p.extra {
        let _ = write!(out, " {k}={v}");
    }
    if out.len() == start + 1 {
        // The grammar needs one key on the global line.
        out.push_str(" source=unknown");
    }
    out.push('\n');
    for layer in &p.layers {
        write_layer(&mut out, layer);
    }
    for sec in &p.sections {
        let _ = write!(out, "# section={}", sec.name);
        for (k, v) in &sec.attrs {
            let _ = write!(out, " {k}={v}");
        }
        out.push('\n');
        for l in &sec.lines {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

fn write_layer(out: &mut String, l: &Layer) {
    let _ = write!(
        out,
        "# layer={} resolution={} buckets={} epoch_cycles={} epochs={} max_epochs_reached={}",
        l.name,
        l.resolution.get(),
        l.buckets,
        l.epoch_cycles,
        l.epochs,
        l.max_epochs_reached
    );
    for (k, v) in &l.extra {
        let _ = write!(out, " {k}={v}");
    }
    out.push('\n');
    for op in l.ops_in_listing_order() {
        if op.count == 0 {
            continue;
        }
        let _ = writeln!(out, "{} {} {}", op.name, op.count, op.total);
        for e in 0..l.epochs {
            match op.epochs.get(e) {
                Some(buckets) if buckets.iter().any(|&v| v != 0) => {
                    for b in 0..l.buckets {
                        let _ = write!(out, " {}", buckets.get(b).copied().unwrap_or(0));
                    }
                    out.push('\n');
                }
                _ => out.push_str("-\n"),
            }
        }
    }
}

/// Parses a text profile given as bytes (reports invalid UTF-8 with its line).
pub fn parse_bytes(input: &[u8]) -> Result<Profile, ParseError> {
    parse_reader(input)
}

/// Parses a text profile, versioned or of the original tools.
pub fn parse(input: &str) -> Result<Profile, ParseError> {
    parse_reader(input.as_bytes())
}

/// Parses a text profile read from `r` as a stream: one line at a time, each at most
/// [`MAX_LINE`] bytes, checked as its bytes arrive, with the limits of this module applied as
/// the profile grows. So memory stays bounded whatever `r` yields, and an input that is not a
/// profile fails within its first line (a control character, such as the NUL bytes of
/// `/dev/zero`, at once). A read error is reported with the line it interrupted.
pub fn parse_reader(r: impl std::io::Read) -> Result<Profile, ParseError> {
    let mut lines = Lines::new(std::io::BufReader::with_capacity(8 << 10, r));
    match lines.peek()? {
        None => Err(ParseError {
            line: 1,
            message: "empty input: expected '# fsprof-profile v1' (or v2) or an OP_ line".into(),
        }),
        Some((_, l)) if l.starts_with('#') => parse_versioned(&mut lines),
        Some(_) => parse_original(&mut lines),
    }
}

/// Most bytes of one line, its newline excluded: a bucket line of [`MAX_BUCKETS`] counts of 20
/// digits takes 10,752; metadata lines are shorter still in practice.
pub const MAX_LINE: usize = 64 << 10;

/// What the first line of a profile starts with: the version line's prefix or an operation.
const FIRST_LINE_PREFIXES: [&str; 2] = ["# fsprof-profile ", "OP_"];

/// Line reader over a stream that checks the character-level rules of every line as it reads
/// it, and the first line's start as soon as its first bytes arrive.
struct Lines<R> {
    r: R,
    /// The current line (without its newline), when `filled`.
    buf: Vec<u8>,
    filled: bool,
    /// The number of the current line (1-based), or of the next to read when not `filled`.
    line: usize,
    eof: bool,
}

impl<R: std::io::BufRead> Lines<R> {
    fn new(r: R) -> Lines<R> {
        Lines {
            r,
            buf: Vec::new(),
            filled: false,
            line: 1,
            eof: false,
        }
    }

    /// The current line and its number, reading it if needed; `None` at the end of input.
    fn peek(&mut self) -> Result<Option<(usize, &str)>, ParseError> {
        if !self.filled && !self.eof {
            self.read_line()?;
        }
        if self.filled {
            // read_line checked that the line is ASCII.
            let l = std::str::from_utf8(&self.buf).expect("checked ASCII");
            Ok(Some((self.line, l)))
        } else {
            Ok(None)
        }
    }

    fn bump(&mut self) {
        if self.filled {
            self.filled = false;
            self.line += 1;
        }
    }

    /// The number of the line [`Lines::peek`] returned last, or at the end of input the number
    /// after the last line: where an error about "what comes next" points.
    fn eof_line(&self) -> usize {
        self.line
    }

    fn read_line(&mut self) -> Result<(), ParseError> {
        let n = self.line;
        let fail = |m: String| {
            Err(ParseError {
                line: n,
                message: m,
            })
        };
        self.buf.clear();
        let mut ascii = true;
        loop {
            let chunk = match self.r.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return fail(format!("read error: {e}")),
            };
            if chunk.is_empty() {
                if self.buf.is_empty() {
                    self.eof = true;
                    return Ok(());
                }
                return fail("last line does not end with a newline".into());
            }
            let (take, end) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            let part = &chunk[..take];
            for &b in part {
                match b {
                    b'\r' => return fail("carriage return: lines must end with LF only".into()),
                    b'\t' => {
                        return fail("tab character: fields are separated by single spaces".into());
                    }
                    0..=0x1f | 0x7f => {
                        return fail(format!(
                            "unexpected control character 0x{b:02X}{}",
                            if n == 1 {
                                ": not an fsprof profile"
                            } else {
                                ""
                            }
                        ));
                    }
                    0x80.. => ascii = false,
                    _ => {}
                }
            }
            if self.buf.len() + part.len() > MAX_LINE {
                return fail(format!(
                    "line longer than {MAX_LINE} bytes{}",
                    if n == 1 {
                        ": not an fsprof profile"
                    } else {
                        ""
                    }
                ));
            }
            self.buf.extend_from_slice(part);
            self.r.consume(take + usize::from(end));
            if n == 1 && !self.first_line_may_start_a_profile() {
                return fail(NOT_A_PROFILE.into());
            }
            if end {
                break;
            }
        }
        if !ascii {
            return match std::str::from_utf8(&self.buf) {
                Err(_) => fail("invalid UTF-8".into()),
                Ok(s) => {
                    let c = s.chars().find(|c| !c.is_ascii()).expect("a non-ASCII byte");
                    fail(format!("unexpected character U+{:04X}", u32::from(c)))
                }
            };
        }
        if self.buf.is_empty() {
            return fail("blank line".into());
        }
        if self.buf.ends_with(b" ") {
            return fail("trailing space".into());
        }
        self.filled = true;
        Ok(())
    }

    /// Whether the first line read so far can still begin a profile: a prefix of the version
    /// line's start, or of an operation's.
    fn first_line_may_start_a_profile(&self) -> bool {
        FIRST_LINE_PREFIXES.iter().any(|p| {
            let k = p.len().min(self.buf.len());
            self.buf[..k] == p.as_bytes()[..k]
        })
    }
}

/// The error for a first line that no profile starts with.
const NOT_A_PROFILE: &str = "not an fsprof profile: the first line is neither '# fsprof-profile \
    v1' nor an operation ('OP_NAME count total')";

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError {
        line,
        message: message.into(),
    })
}

/// `"0" / (%x31-39 *DIGIT)` as a u64.
fn parse_u64(s: &str, what: &str, line: usize) -> Result<u64, ParseError> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    if !canonical {
        return err(
            line,
            format!("expected {what} as a decimal number, found '{s}'"),
        );
    }
    s.parse()
        .or_else(|_| err(line, format!("{what} '{s}' does not fit in 64 bits")))
}

fn parse_bool(s: &str, key: &str, line: usize) -> Result<bool, ParseError> {
    match s {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => err(line, format!("{key} must be true or false, found '{s}'")),
    }
}

/// Whether `k` may be a metadata key: `1*(%x61-7A / DIGIT / "_")` (lower-case letters, digits
/// and underscores).
pub fn is_valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Whether `v` may be a metadata value or a layer name: `1*(%x21-7E except "=")` (printable
/// ASCII without space or `=`).
pub fn is_valid_value(v: &str) -> bool {
    !v.is_empty() && v.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b'=')
}

/// Splits `# k=v k=v` into pairs, checking the key and value character sets.
fn parse_pairs(l: &str, line: usize) -> Result<Vec<(&str, &str)>, ParseError> {
    let Some(rest) = l.strip_prefix("# ") else {
        return err(line, "expected '# key=value ...'");
    };
    let mut pairs = Vec::new();
    for tok in rest.split(' ') {
        if tok.is_empty() {
            return err(line, "two spaces in a row");
        }
        let Some((k, v)) = tok.split_once('=') else {
            return err(line, format!("expected key=value, found '{tok}'"));
        };
        if !is_valid_key(k) {
            return err(
                line,
                format!("bad key '{k}': lower-case letters, digits and _ only"),
            );
        }
        if !is_valid_value(v) {
            return err(line, format!("bad value for {k}: '{v}'"));
        }
        if pairs.iter().any(|(pk, _)| *pk == k) {
            return err(line, format!("key {k} given twice"));
        }
        pairs.push((k, v));
    }
    Ok(pairs)
}

fn parse_versioned<R: std::io::BufRead>(lines: &mut Lines<R>) -> Result<Profile, ParseError> {
    let (n, first) = lines.peek()?.expect("caller peeked");
    let version = if first == VERSION_LINE {
        1
    } else if first == VERSION_LINE_2 {
        2
    } else {
        if let Some(v) = first.strip_prefix("# fsprof-profile ") {
            return err(
                n,
                format!("unsupported profile version '{v}' (this tool reads v1 and v2)"),
            );
        }
        return err(n, format!("expected '{VERSION_LINE}' as the first line"));
    };
    lines.bump();
    let mut p = Profile::default();
    let mut budget = Budget::default();
    parse_globals(lines, &mut p, &mut budget)?;
    parse_layers(lines, version, &mut p, &mut budget)?;
    parse_sections(lines, version, &mut p, &mut budget)?;
    Ok(p)
}

/// The global `# key=value` lines after the version line (at least one).
fn parse_globals<R: std::io::BufRead>(
    lines: &mut Lines<R>,
    p: &mut Profile,
    budget: &mut Budget,
) -> Result<(), ParseError> {
    let mut globals = 0;
    while let Some((n, l)) = lines.peek()? {
        if l.starts_with("# layer=") || l.starts_with("# section=") {
            break;
        }
        if !l.starts_with('#') {
            return err(
                n,
                "expected a global '# key=value' line or a '# layer=' line",
            );
        }
        for (k, v) in parse_pairs(l, n)? {
            let dup = || err(n, format!("global key {k} given twice"));
            match k {
                "started_unix_ns" => {
                    if p.started_unix_ns.is_some() {
                        return dup();
                    }
                    p.started_unix_ns = Some(parse_u64(v, k, n)?);
                }
                "clock" => {
                    if p.clock.is_some() {
                        return dup();
                    }
                    p.clock = Some(ClockKind::parse(v).ok_or_else(|| ParseError {
                        line: n,
                        message: format!("clock must be tsc, cntvct or ns, found '{v}'"),
                    })?);
                }
                "cycles_per_sec" => {
                    if p.cycles_per_sec.is_some() {
                        return dup();
                    }
                    let hz = parse_u64(v, k, n)?;
                    if hz == 0 {
                        return err(n, "cycles_per_sec must not be 0");
                    }
                    p.cycles_per_sec = Some(hz);
                }
                "invariant_tsc" => {
                    if p.invariant_tsc.is_some() {
                        return dup();
                    }
                    p.invariant_tsc = Some(parse_bool(v, k, n)?);
                }
                "layer" => {
                    return err(
                        n,
                        "key layer on a global line: it starts a layer line ('# layer=NAME ...')",
                    );
                }
                _ => {
                    if p.extra.iter().any(|(ek, _)| ek == k) {
                        return dup();
                    }
                    budget
                        .charge_text(k.len() + v.len())
                        .or_else(|m| err(n, m))?;
                    p.extra.push((k.to_string(), v.to_string()))
                }
            }
        }
        globals += 1;
        lines.bump();
    }
    if globals == 0 {
        lines.peek()?;
        let n = lines.eof_line();
        return err(
            n,
            "expected a global '# key=value' line after the version line",
        );
    }
    Ok(())
}

/// The layer blocks (at least one), each a `# layer=` line and its operations.
fn parse_layers<R: std::io::BufRead>(
    lines: &mut Lines<R>,
    version: u32,
    p: &mut Profile,
    budget: &mut Budget,
) -> Result<(), ParseError> {
    // Names seen, so a profile of many layers or operations is checked for duplicates in
    // linear time.
    let mut names = std::collections::HashSet::new();
    while let Some((n, l)) = lines.peek()? {
        if l.starts_with("# section=") {
            break;
        }
        let layer = parse_layer_line(l, n)?;
        budget.charge_text(l.len()).or_else(|m| err(n, m))?;
        if !names.insert(layer.name.clone()) {
            return err(n, format!("layer {} given twice", layer.name));
        }
        if version == 1 && crate::keyed::is_keyed(&layer.name) {
            return err(n, format!("per-key layer {} needs version 2", layer.name));
        }
        lines.bump();
        let layer = parse_ops(lines, layer, budget)?;
        if version == 1 {
            if let Some(o) = layer.ops.iter().find(|o| ops::is_user_call(&o.name)) {
                return err(n, format!("{} needs version 2", o.name));
            }
        }
        p.layers.push(layer);
    }
    if p.layers.is_empty() {
        return err(lines.eof_line(), "expected a '# layer=' line");
    }
    Ok(())
}

/// The `# section=` blocks after the layers (version 2).
fn parse_sections<R: std::io::BufRead>(
    lines: &mut Lines<R>,
    version: u32,
    p: &mut Profile,
    budget: &mut Budget,
) -> Result<(), ParseError> {
    while let Some((n, l)) = lines.peek()? {
        if version == 1 {
            return err(n, "a section needs version 2 ('# fsprof-profile v2')");
        }
        let pairs = parse_pairs(l, n)?;
        let Some(("section", name)) = pairs.first().copied() else {
            return err(
                n,
                "expected a '# section=NAME ...' line: only sections follow the sections",
            );
        };
        budget.charge_text(l.len()).or_else(|m| err(n, m))?;
        let mut sec = Section::new(name);
        for &(k, v) in &pairs[1..] {
            if k == "section" {
                return err(n, "key section given twice");
            }
            sec.attrs.push((k.to_string(), v.to_string()));
        }
        lines.bump();
        while let Some((n, l)) = lines.peek()? {
            if l.starts_with('#') {
                break;
            }
            if !Section::is_valid_line(l) {
                return err(n, format!("bad line in section {}", sec.name));
            }
            budget.charge_text(l.len()).or_else(|m| err(n, m))?;
            sec.lines.push(l.to_string());
            lines.bump();
        }
        p.sections.push(sec);
    }
    Ok(())
}

fn parse_layer_line(l: &str, n: usize) -> Result<Layer, ParseError> {
    if !l.starts_with("# layer=") {
        return err(n, "expected a '# layer=NAME ...' line");
    }
    let pairs = parse_pairs(l, n)?;
    let name = pairs[0].1;
    let mut resolution = None;
    let mut buckets = None;
    let mut epochs = None;
    let mut layer = Layer::new(name, Resolution::ONE);
    for &(k, v) in &pairs[1..] {
        match k {
            "layer" => return err(n, "key layer given twice"),
            "resolution" => {
                let r = parse_u64(v, k, n)?;
                resolution = Some(u32::try_from(r).ok().and_then(Resolution::new).ok_or_else(
                    || ParseError {
                        line: n,
                        message: format!("resolution must be 1, 2, 4 or 8, found {r}"),
                    },
                )?);
            }
            "buckets" => {
                let b = parse_u64(v, k, n)?;
                if b == 0 || b > MAX_BUCKETS as u64 {
                    return err(n, format!("buckets must be 1..={MAX_BUCKETS}, found {b}"));
                }
                buckets = Some(b as usize);
            }
            "epoch_cycles" => layer.epoch_cycles = parse_u64(v, k, n)?,
            "epochs" => {
                let e = parse_u64(v, k, n)?;
                if e == 0 || e > MAX_EPOCHS as u64 {
                    return err(n, format!("epochs must be 1..={MAX_EPOCHS}, found {e}"));
                }
                epochs = Some(e as usize);
            }
            "max_epochs_reached" => layer.max_epochs_reached = parse_bool(v, k, n)?,
            _ => layer.extra.push((k.to_string(), v.to_string())),
        }
    }
    let missing = |k: &str| err(n, format!("layer {name}: missing required key {k}"));
    layer.resolution = match resolution {
        Some(r) => r,
        None => return missing("resolution"),
    };
    layer.buckets = match buckets {
        Some(b) => b,
        None => return missing("buckets"),
    };
    layer.epochs = match epochs {
        Some(e) => e,
        None => return missing("epochs"),
    };
    Ok(layer)
}

/// Parses `OP_NAME count total`.
fn parse_op_line(l: &str, n: usize) -> Result<(String, u64, u64), ParseError> {
    let mut it = l.split(' ');
    let (Some(name), Some(count), Some(total), None) = (it.next(), it.next(), it.next(), it.next())
    else {
        return err(
            n,
            format!("expected 'OP_NAME count total', found '{}'", clip(l)),
        );
    };
    if !ops::is_valid_name(name) {
        return err(
            n,
            format!(
                "bad operation name '{name}': OP_, SYS_ or BLK_ and upper-case letters, digits, _"
            ),
        );
    }
    Ok((
        name.to_string(),
        parse_u64(count, "count", n)?,
        parse_u64(total, "total", n)?,
    ))
}

/// Parses ` n n n` into `out`, which must then hold exactly `want` numbers (any count if None).
fn parse_bucket_line(l: &str, n: usize, want: Option<usize>) -> Result<Vec<u64>, ParseError> {
    let Some(rest) = l.strip_prefix(' ') else {
        return err(n, "expected an epoch line (' n n n ...' or '-')");
    };
    let mut v = Vec::with_capacity(want.unwrap_or(64));
    for tok in rest.split(' ') {
        if tok.is_empty() {
            return err(n, "two spaces in a row");
        }
        if v.len() >= MAX_BUCKETS {
            return err(n, format!("more than {MAX_BUCKETS} buckets"));
        }
        v.push(parse_u64(tok, "a bucket count", n)?);
    }
    if let Some(w) = want {
        if v.len() != w {
            return err(n, format!("expected {w} bucket counts, found {}", v.len()));
        }
    }
    Ok(v)
}

fn parse_ops<R: std::io::BufRead>(
    lines: &mut Lines<R>,
    mut layer: Layer,
    budget: &mut Budget,
) -> Result<Layer, ParseError> {
    let mut names = std::collections::HashSet::new();
    while let Some((n, l)) = lines.peek()? {
        if l.starts_with('#') {
            break;
        }
        if l == "-" || l.starts_with(' ') {
            // An epoch line where an operation line should be: one too many after the last
            // operation, or one before the first.
            return err(
                n,
                match layer.ops.last() {
                    Some(prev) => format!(
                        "more than {} epoch line{} for {} (layer {} has epochs={})",
                        layer.epochs,
                        if layer.epochs == 1 { "" } else { "s" },
                        prev.name,
                        layer.name,
                        layer.epochs
                    ),
                    None => format!(
                        "epoch line before any operation of layer {}: expected 'OP_NAME count total'",
                        layer.name
                    ),
                },
            );
        }
        let (name, count, total) = parse_op_line(l, n)?;
        if !names.insert(name.clone()) {
            return err(n, format!("{name} appears twice in layer {}", layer.name));
        }
        budget
            .charge(layer.epochs as u64, layer.buckets)
            .and_then(|()| budget.charge_text(name.len()))
            .or_else(|m| err(n, format!("{name}: {m}")))?;
        lines.bump();
        let mut epochs = Vec::with_capacity(layer.epochs);
        for e in 0..layer.epochs {
            let Some((n, l)) = lines.peek()? else {
                return err(
                    lines.eof_line(),
                    format!("{name}: expected {} epoch lines, found {e}", layer.epochs),
                );
            };
            if l == "-" {
                epochs.push(vec![0; layer.buckets]);
            } else if l.starts_with(' ') {
                epochs.push(parse_bucket_line(l, n, Some(layer.buckets))?);
            } else {
                return err(
                    n,
                    format!("{name}: expected {} epoch lines, found {e}", layer.epochs),
                );
            }
            lines.bump();
        }
        layer.ops.push(OpProfile {
            name,
            count,
            total,
            epochs,
        });
    }
    Ok(layer)
}

/// An operation of an original-format profile: name, count, total, epochs (`None` for `-`).
type RawOp = (String, u64, u64, Vec<Option<Vec<u64>>>);

fn parse_original<R: std::io::BufRead>(lines: &mut Lines<R>) -> Result<Profile, ParseError> {
    let mut layer = Layer::new(ORIGINAL_LAYER, Resolution::ONE);
    // Epoch lines kept as Option until the bucket count is known ("-" lines carry none).
    let mut raw: Vec<RawOp> = Vec::new();
    let mut buckets: Option<usize> = None;
    // The operation with the most epoch lines (its line and count): every other one is padded
    // to as many.
    let mut longest = (1, 0);
    // What the operations read so far hold, before any padding: a bound on memory while
    // reading. (The padded profile is checked against the limit once the shape is known.)
    let mut held = Budget::default();
    let mut names = std::collections::HashSet::new();
    while let Some((n, l)) = lines.peek()? {
        if l.starts_with('#') {
            return err(n, "'#' line in a profile without the version line");
        }
        let (name, count, total) = parse_op_line(l, n)?;
        if !names.insert(name.clone()) {
            return err(n, format!("{name} appears twice"));
        }
        let op_line = n;
        held.charge_text(name.len()).or_else(|m| err(n, m))?;
        lines.bump();
        let mut epochs = Vec::new();
        while let Some((n, l)) = lines.peek()? {
            if (l == "-" || l.starts_with(' ')) && epochs.len() == MAX_EPOCHS {
                return err(n, format!("{name}: more than {MAX_EPOCHS} epoch lines"));
            }
            if l == "-" {
                // One `Option<Vec>`: three words.
                held.charge(1, 0).or_else(|m| err(n, m))?;
                epochs.push(None);
            } else if l.starts_with(' ') {
                let v = parse_bucket_line(l, n, buckets)?;
                held.charge(1, v.len()).or_else(|m| err(n, m))?;
                buckets = Some(v.len());
                epochs.push(Some(v));
            } else {
                break;
            }
            lines.bump();
        }
        if epochs.is_empty() {
            lines.peek()?;
            return err(
                lines.eof_line(),
                format!("{name}: expected at least one epoch line"),
            );
        }
        if epochs.len() > longest.1 {
            longest = (op_line, epochs.len());
        }
        raw.push((name, count, total, epochs));
    }
    let buckets = buckets.unwrap_or(64);
    let epochs = raw.iter().map(|r| r.3.len()).max().unwrap_or(1);
    // Padding is what costs: check before any of it is allocated. The line blamed is that of
    // the operation whose epoch lines every other one is padded to.
    Budget::default()
        .charge((raw.len() as u64).saturating_mul(epochs as u64), buckets)
        .or_else(|m| {
            err(
                longest.0,
                format!(
                    "{m}: {} operations padded to this one's {epochs} epochs of {buckets} buckets",
                    raw.len()
                ),
            )
        })?;
    layer.buckets = buckets;
    layer.epochs = epochs;
    for (name, count, total, eps) in raw {
        let mut epochs: Vec<Vec<u64>> = eps
            .into_iter()
            .map(|e| e.unwrap_or_else(|| vec![0; buckets]))
            .collect();
        epochs.resize(layer.epochs, vec![0; buckets]);
        layer.ops.push(OpProfile {
            name,
            count,
            total,
            epochs,
        });
    }
    Ok(Profile {
        extra: vec![("source".into(), "original".into())],
        layers: vec![layer],
        ..Profile::default()
    })
}

fn clip(s: &str) -> &str {
    match s.char_indices().nth(40) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
