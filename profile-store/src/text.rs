//! The text format of profiles (SPEC §4): writer and parser.
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
//!   ones after them in the order read. Operations are written in listing order (SPEC §6 order,
//!   then alphabetical), only those with a non-zero count.
//! * A file without the version line is a profile of the original tools (thesis §5.8): only
//!   operation blocks; it becomes one layer named `original` with resolution 1, the bucket count
//!   of its data and the largest epoch count of its operations (shorter ones are padded with zero
//!   epochs at the end).
//!
//! Writer → parser → writer is byte-identical. The parser reports the first problem with its
//! line number and never panics.
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
//! A profile past a limit is rejected with the line that crosses it.

use std::fmt::{self, Write as _};

use crate::bucket::Resolution;
use crate::clock::ClockKind;
use crate::ops;
use crate::profile::{Layer, OpProfile, Profile};

/// The first line of every profile this tool writes.
pub const VERSION_LINE: &str = "# fsprof-profile v1";

/// Name given to the single layer of a profile of the original tools.
pub const ORIGINAL_LAYER: &str = "original";

/// Most buckets per line the parser accepts: 8 per octave × 64 octaves, the most any resolution
/// has. (It also keeps every bucket bound and mid-point finite as an `f64`, which past bucket
/// 1023 of resolution 1 they are not.)
pub const MAX_BUCKETS: usize = 512;

/// Most epochs per layer the parser accepts (a recorder keeps at most this many, too).
pub const MAX_EPOCHS: usize = 65_536;

/// Most bucket counts a parsed profile may hold: operations × epochs × (buckets +
/// [`ARRAY_OVERHEAD`]), summed over its layers. About 256 MiB of memory.
pub const MAX_CELLS: u64 = 1 << 25;

/// What one epoch array costs against [`MAX_CELLS`] beyond its buckets: its vector header and
/// allocation, in 8-byte words, so that arrays of one bucket are bounded too.
pub const ARRAY_OVERHEAD: u64 = 8;

/// The memory a parser has spent, in bucket counts (see [`MAX_CELLS`]).
#[derive(Debug, Default)]
pub(crate) struct Budget {
    used: u64,
}

impl Budget {
    /// Takes `arrays` epoch arrays of `buckets` counts from the budget, or says why it cannot.
    pub(crate) fn charge(&mut self, arrays: u64, buckets: usize) -> Result<(), String> {
        let cost = arrays.saturating_mul(buckets as u64 + ARRAY_OVERHEAD);
        match self.used.checked_add(cost) {
            Some(total) if total <= MAX_CELLS => {
                self.used = total;
                Ok(())
            }
            _ => Err(format!(
                "profile too large: more than {MAX_CELLS} bucket counts (operations x epochs x \
                 buckets), the most this parser holds in memory"
            )),
        }
    }
}

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
    out.push_str(VERSION_LINE);
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
    match std::str::from_utf8(input) {
        Ok(s) => parse(s),
        Err(e) => {
            let line = input[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            Err(ParseError {
                line,
                message: "invalid UTF-8".into(),
            })
        }
    }
}

/// Parses a text profile, versioned or of the original tools.
pub fn parse(input: &str) -> Result<Profile, ParseError> {
    let mut lines = Lines::new(input)?;
    match lines.peek() {
        None => Err(ParseError {
            line: 1,
            message: "empty input: expected '# fsprof-profile v1' or an OP_ line".into(),
        }),
        Some((_, l)) if l.starts_with('#') => parse_versioned(&mut lines),
        Some(_) => parse_original(&mut lines),
    }
}

/// Line reader that checks the character-level rules once for every line.
struct Lines<'a> {
    lines: Vec<&'a str>,
    next: usize,
}

impl<'a> Lines<'a> {
    fn new(input: &'a str) -> Result<Lines<'a>, ParseError> {
        let mut lines: Vec<&str> = input.split('\n').collect();
        // split leaves one empty piece after the final newline.
        match lines.pop() {
            Some("") => {}
            Some(_) if !input.is_empty() => {
                return Err(ParseError {
                    line: lines.len() + 1,
                    message: "last line does not end with a newline".into(),
                });
            }
            _ => {}
        }
        for (i, l) in lines.iter().enumerate() {
            let err = |m: &str| {
                Err(ParseError {
                    line: i + 1,
                    message: m.into(),
                })
            };
            if l.is_empty() {
                return err("blank line");
            }
            if l.contains('\r') {
                return err("carriage return: lines must end with LF only");
            }
            if l.contains('\t') {
                return err("tab character: fields are separated by single spaces");
            }
            if l.ends_with(' ') {
                return err("trailing space");
            }
            if let Some(c) = l.chars().find(|c| !c.is_ascii() || c.is_ascii_control()) {
                return Err(ParseError {
                    line: i + 1,
                    message: format!("unexpected character {c:?}"),
                });
            }
        }
        Ok(Lines { lines, next: 0 })
    }

    fn peek(&self) -> Option<(usize, &'a str)> {
        self.lines.get(self.next).map(|l| (self.next + 1, *l))
    }

    fn bump(&mut self) {
        self.next += 1;
    }

    /// Line number for errors at the end of input.
    fn eof_line(&self) -> usize {
        self.lines.len() + 1
    }
}

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

fn parse_versioned(lines: &mut Lines) -> Result<Profile, ParseError> {
    let (n, first) = lines.peek().expect("caller peeked");
    if first != VERSION_LINE {
        if let Some(v) = first.strip_prefix("# fsprof-profile ") {
            return err(
                n,
                format!("unsupported profile version '{v}' (this tool reads v1)"),
            );
        }
        return err(n, format!("expected '{VERSION_LINE}' as the first line"));
    }
    lines.bump();
    let mut p = Profile::default();
    let mut globals = 0;
    while let Some((n, l)) = lines.peek() {
        if l.starts_with("# layer=") {
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
                    p.extra.push((k.to_string(), v.to_string()))
                }
            }
        }
        globals += 1;
        lines.bump();
    }
    if globals == 0 {
        let n = lines.peek().map_or(lines.eof_line(), |(n, _)| n);
        return err(
            n,
            "expected a global '# key=value' line after the version line",
        );
    }
    let mut budget = Budget::default();
    while let Some((n, l)) = lines.peek() {
        let layer = parse_layer_line(l, n)?;
        if p.layers.iter().any(|x| x.name == layer.name) {
            return err(n, format!("layer {} given twice", layer.name));
        }
        lines.bump();
        p.layers.push(parse_ops(lines, layer, &mut budget)?);
    }
    if p.layers.is_empty() {
        return err(lines.eof_line(), "expected a '# layer=' line");
    }
    Ok(p)
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
            format!("bad operation name '{name}': OP_ and upper-case letters, digits, _"),
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

fn parse_ops(
    lines: &mut Lines,
    mut layer: Layer,
    budget: &mut Budget,
) -> Result<Layer, ParseError> {
    while let Some((n, l)) = lines.peek() {
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
        if layer.op(&name).is_some() {
            return err(n, format!("{name} appears twice in layer {}", layer.name));
        }
        budget
            .charge(layer.epochs as u64, layer.buckets)
            .or_else(|m| err(n, format!("{name}: {m}")))?;
        lines.bump();
        let mut epochs = Vec::with_capacity(layer.epochs);
        for e in 0..layer.epochs {
            let Some((n, l)) = lines.peek() else {
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

fn parse_original(lines: &mut Lines) -> Result<Profile, ParseError> {
    let mut layer = Layer::new(ORIGINAL_LAYER, Resolution::ONE);
    // Epoch lines kept as Option until the bucket count is known ("-" lines carry none).
    let mut raw: Vec<RawOp> = Vec::new();
    let mut buckets: Option<usize> = None;
    // The operation with the most epoch lines (its line and count): every other one is padded
    // to as many.
    let mut longest = (1, 0);
    while let Some((n, l)) = lines.peek() {
        if l.starts_with('#') {
            return err(n, "'#' line in a profile without the version line");
        }
        let (name, count, total) = parse_op_line(l, n)?;
        if raw.iter().any(|r| r.0 == name) {
            return err(n, format!("{name} appears twice"));
        }
        let op_line = n;
        lines.bump();
        let mut epochs = Vec::new();
        while let Some((n, l)) = lines.peek() {
            if (l == "-" || l.starts_with(' ')) && epochs.len() == MAX_EPOCHS {
                return err(n, format!("{name}: more than {MAX_EPOCHS} epoch lines"));
            }
            if l == "-" {
                epochs.push(None);
            } else if l.starts_with(' ') {
                let v = parse_bucket_line(l, n, buckets)?;
                buckets = Some(v.len());
                epochs.push(Some(v));
            } else {
                break;
            }
            lines.bump();
        }
        if epochs.is_empty() {
            return err(
                lines.peek().map_or(lines.eof_line(), |(n, _)| n),
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
