//! The inner-call breakdown section (`docs/format.md#inner-call-breakdown`), recorded by the file
//! systems and read by `fsprof why`: for each operation of a layer, which lower or branch calls its
//! requests made, keyed by the bucket the outer request landed in.
//!
//! Grammar (after `# section=inner_calls layer=NAME resolution=R`; inner buckets are at
//! resolution 1):
//!
//! ```text
//! line   = outer / call
//! outer  = op SP bucket SP "count=" n SP "cycles=" n SP "other_cycles=" n
//! call   = op SP bucket SP "call=" name SP "count=" n SP "cycles=" n SP "buckets=" b ":" n *("," b ":" n)
//! ```
//!
//! A `call` line follows the `outer` line of its operation and bucket. `cycles` of an outer
//! line is the total latency of the requests that landed in that bucket; of a call line, the
//! total latency of that call made by them; `other_cycles` is the time of inner calls beyond
//! the recorder's slots.
//!
//! ```
//! use profile_store::inner::InnerCalls;
//! let s = profile_store::Section {
//!     name: "inner_calls".into(),
//!     attrs: vec![("layer".into(), "fuse".into()), ("resolution".into(), "1".into())],
//!     lines: vec![
//!         "OP_READ 21 count=20 cycles=42000000 other_cycles=0".into(),
//!         "OP_READ 21 call=pread count=20 cycles=41000000 buckets=20:3,21:17".into(),
//!     ],
//! };
//! let ic = InnerCalls::from_section(&s).unwrap();
//! assert_eq!(ic.to_section(), s);
//! let why = ic.explain("OP_READ", 20, 22);
//! assert_eq!(why.calls[0].name, "pread");
//! assert_eq!(why.calls[0].peak_bucket, 21);
//! ```

use crate::bucket::Resolution;
use crate::profile::Section;

/// The section's name.
pub const SECTION: &str = "inner_calls";

/// One inner call's numbers within an outer bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Inner-call name (`pread`, `branch1:pwrite`).
    pub call: String,
    /// Calls made.
    pub count: u64,
    /// Their total latency in cycles.
    pub cycles: u64,
    /// `(inner bucket at resolution 1, calls)`, buckets increasing, counts non-zero.
    pub buckets: Vec<(usize, u64)>,
}

/// The requests of one operation that landed in one outer bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OuterRow {
    /// Operation (`OP_READ`).
    pub op: String,
    /// Outer bucket (at the section's resolution).
    pub bucket: usize,
    /// Requests.
    pub count: u64,
    /// Their total latency in cycles.
    pub cycles: u64,
    /// Time of inner calls that found no slot.
    pub other_cycles: u64,
    /// The inner calls.
    pub calls: Vec<Row>,
}

/// The whole breakdown of one layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InnerCalls {
    /// The outer layer (`fuse`).
    pub layer: String,
    /// Resolution of the outer buckets.
    pub resolution: Resolution,
    /// Rows, by operation then bucket.
    pub rows: Vec<OuterRow>,
}

/// What explains the requests of one peak ([`InnerCalls::explain`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// Requests in the peak.
    pub count: u64,
    /// Their total latency in cycles.
    pub cycles: u64,
    /// One entry per inner call, most time first.
    pub calls: Vec<CallShare>,
    /// Cycles no inner call explains (the daemon's own time, or waiting for it).
    pub unexplained: u64,
}

/// One inner call's part of a peak.
#[derive(Debug, Clone, PartialEq)]
pub struct CallShare {
    /// Inner-call name.
    pub name: String,
    /// Calls made by the peak's requests.
    pub count: u64,
    /// Their total latency in cycles.
    pub cycles: u64,
    /// `cycles` as a share of the peak's time, 0 to 1 (more than 1 only with clock skew).
    pub share: f64,
    /// The inner bucket (resolution 1) holding most of these calls' time (calls × the
    /// bucket's mid-point, `1.5 · 2^b` cycles): the inner latency peak where the peak's time
    /// is. A bucket of many fast calls does not win over one of a few slow calls that hold
    /// more of the time.
    pub peak_bucket: usize,
}

/// Why a section is not a valid inner-call breakdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionError(pub String);

impl std::fmt::Display for SectionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "section {SECTION}: {}", self.0)
    }
}

impl std::error::Error for SectionError {}

fn field<'a>(tok: Option<&'a str>, key: &str, line: usize) -> Result<&'a str, SectionError> {
    tok.and_then(|t| t.strip_prefix(key))
        .and_then(|t| t.strip_prefix('='))
        .ok_or_else(|| SectionError(format!("line {line}: expected {key}=")))
}

fn num(s: &str, line: usize) -> Result<u64, SectionError> {
    s.parse()
        .map_err(|_| SectionError(format!("line {line}: '{s}' is not a number")))
}

impl InnerCalls {
    /// Reads the section.
    pub fn from_section(s: &Section) -> Result<InnerCalls, SectionError> {
        let layer = s.attr("layer").unwrap_or("fuse").to_string();
        let resolution = s
            .attr("resolution")
            .and_then(|r| r.parse().ok())
            .and_then(Resolution::new)
            .ok_or_else(|| SectionError("resolution= missing or not 1, 2, 4 or 8".into()))?;
        let max_bucket = 64 * resolution.get() as usize;
        let mut rows: Vec<OuterRow> = Vec::new();
        for (i, l) in s.lines.iter().enumerate() {
            let n = i + 1;
            let mut t = l.split(' ');
            let op = t.next().unwrap_or_default().to_string();
            let bucket = num(t.next().unwrap_or_default(), n)? as usize;
            if bucket >= max_bucket {
                return Err(SectionError(format!(
                    "line {n}: bucket {bucket} out of range"
                )));
            }
            let third = t.next();
            if let Some(call) = third.and_then(|x| x.strip_prefix("call=")) {
                let count = num(field(t.next(), "count", n)?, n)?;
                let cycles = num(field(t.next(), "cycles", n)?, n)?;
                let mut buckets = Vec::new();
                for p in field(t.next(), "buckets", n)?.split(',') {
                    let (b, c) = p
                        .split_once(':')
                        .ok_or_else(|| SectionError(format!("line {n}: '{p}' is not b:n")))?;
                    let b = num(b, n)? as usize;
                    if b >= 64 {
                        return Err(SectionError(format!(
                            "line {n}: inner bucket {b} out of range"
                        )));
                    }
                    buckets.push((b, num(c, n)?));
                }
                let outer = rows
                    .last_mut()
                    .filter(|r| r.op == op && r.bucket == bucket)
                    .ok_or_else(|| {
                        SectionError(format!("line {n}: call line before its outer line"))
                    })?;
                outer.calls.push(Row {
                    call: call.to_string(),
                    count,
                    cycles,
                    buckets,
                });
            } else {
                let count = num(field(third, "count", n)?, n)?;
                let cycles = num(field(t.next(), "cycles", n)?, n)?;
                let other_cycles = num(field(t.next(), "other_cycles", n)?, n)?;
                rows.push(OuterRow {
                    op,
                    bucket,
                    count,
                    cycles,
                    other_cycles,
                    calls: Vec::new(),
                });
            }
            if t.next().is_some() {
                return Err(SectionError(format!("line {n}: trailing fields")));
            }
        }
        Ok(InnerCalls {
            layer,
            resolution,
            rows,
        })
    }

    /// Writes the section.
    pub fn to_section(&self) -> Section {
        let mut s = Section::new(SECTION);
        s.attrs = vec![
            ("layer".into(), self.layer.clone()),
            ("resolution".into(), self.resolution.get().to_string()),
        ];
        for r in &self.rows {
            s.lines.push(format!(
                "{} {} count={} cycles={} other_cycles={}",
                r.op, r.bucket, r.count, r.cycles, r.other_cycles
            ));
            for c in &r.calls {
                let b: Vec<String> = c.buckets.iter().map(|(b, n)| format!("{b}:{n}")).collect();
                s.lines.push(format!(
                    "{} {} call={} count={} cycles={} buckets={}",
                    r.op,
                    r.bucket,
                    c.call,
                    c.count,
                    c.cycles,
                    b.join(",")
                ));
            }
        }
        s
    }

    /// What the inner calls of `op`'s requests in outer buckets `lo..hi` account for.
    pub fn explain(&self, op: &str, lo: usize, hi: usize) -> Explanation {
        let mut count = 0u64;
        let mut cycles = 0u64;
        let mut explained = 0u64;
        let mut calls: Vec<(String, u64, u64, [u64; 64])> = Vec::new();
        for r in self
            .rows
            .iter()
            .filter(|r| r.op == op && (lo..hi).contains(&r.bucket))
        {
            count += r.count;
            cycles = cycles.saturating_add(r.cycles);
            explained = explained.saturating_add(r.other_cycles);
            if r.other_cycles > 0 {
                Self::add_call(&mut calls, "other", 0, r.other_cycles, &[]);
            }
            for c in &r.calls {
                explained = explained.saturating_add(c.cycles);
                Self::add_call(&mut calls, &c.call, c.count, c.cycles, &c.buckets);
            }
        }
        let mut out: Vec<CallShare> = calls
            .into_iter()
            .map(|(name, n, c, b)| CallShare {
                name,
                count: n,
                cycles: c,
                share: if cycles == 0 {
                    0.0
                } else {
                    c as f64 / cycles as f64
                },
                peak_bucket: time_peak(&b),
            })
            .collect();
        out.sort_by(|a, b| b.cycles.cmp(&a.cycles).then(a.name.cmp(&b.name)));
        Explanation {
            count,
            cycles,
            calls: out,
            unexplained: cycles.saturating_sub(explained),
        }
    }

    fn add_call(
        calls: &mut Vec<(String, u64, u64, [u64; 64])>,
        name: &str,
        n: u64,
        c: u64,
        buckets: &[(usize, u64)],
    ) {
        let i = match calls.iter().position(|x| x.0 == name) {
            Some(i) => i,
            None => {
                calls.push((name.to_string(), 0, 0, [0; 64]));
                calls.len() - 1
            }
        };
        let e = &mut calls[i];
        e.1 += n;
        e.2 = e.2.saturating_add(c);
        for &(b, k) in buckets {
            e.3[b] += k;
        }
    }
}

/// The inner bucket (resolution 1) holding the most time: calls × `2^b` (the mid-point's
/// common factor 1.5 left out), exact in `u128`; ties go to the faster bucket.
fn time_peak(b: &[u64; 64]) -> usize {
    (0..64)
        .max_by_key(|&i| ((b[i] as u128) << i, std::cmp::Reverse(i)))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        let mut s = Section::new(SECTION);
        s.attrs = vec![("resolution".into(), "1".into())];
        s.lines = vec!["OP_READ 3 call=pread count=1 cycles=2 buckets=1:1".into()];
        assert!(
            InnerCalls::from_section(&s)
                .unwrap_err()
                .0
                .contains("before its outer")
        );
        s.lines = vec!["OP_READ 99 count=1 cycles=1 other_cycles=0".into()];
        assert!(
            InnerCalls::from_section(&s)
                .unwrap_err()
                .0
                .contains("out of range")
        );
        s.lines = vec!["OP_READ 3 count=x cycles=1 other_cycles=0".into()];
        assert!(
            InnerCalls::from_section(&s)
                .unwrap_err()
                .0
                .contains("line 1")
        );
        s.attrs.clear();
        assert!(InnerCalls::from_section(&s).is_err());
    }

    #[test]
    fn explain_sums_shares_over_the_peak_and_leaves_the_rest_unexplained() {
        let mut s = Section::new(SECTION);
        s.attrs = vec![("resolution".into(), "1".into())];
        s.lines = vec![
            "OP_READ 10 count=100 cycles=100000 other_cycles=0".into(),
            "OP_READ 10 call=pread count=100 cycles=50000 buckets=9:100".into(),
            "OP_READ 20 count=2 cycles=2000000 other_cycles=0".into(),
            "OP_READ 20 call=pread count=2 cycles=1980000 buckets=19:2".into(),
            "OP_READ 20 call=statx count=2 cycles=1000 buckets=8:2".into(),
        ];
        let ic = InnerCalls::from_section(&s).unwrap();
        let e = ic.explain("OP_READ", 19, 22);
        assert_eq!((e.count, e.cycles, e.unexplained), (2, 2_000_000, 19_000));
        assert_eq!(e.calls[0].name, "pread");
        assert!((e.calls[0].share - 0.99).abs() < 1e-9);
        assert_eq!(e.calls[0].peak_bucket, 19);
        assert_eq!(e.calls[1].name, "statx");
    }

    #[test]
    fn the_inner_peak_is_where_the_time_is_not_where_most_calls_are() {
        // A 142 ms readdirplus: 900 getdents64 of about 1 us (bucket 11 at 2 GHz) and 3 of
        // about 40 ms (bucket 26). By count the fast bucket wins; by time the slow one holds
        // 3 · 2^26 against 900 · 2^11 cycles.
        let mut s = Section::new(SECTION);
        s.attrs = vec![("resolution".into(), "1".into())];
        s.lines = vec![
            "OP_READDIRPLUS 28 count=1 cycles=284000000 other_cycles=0".into(),
            "OP_READDIRPLUS 28 call=getdents64 count=903 cycles=283000000 buckets=11:900,26:3"
                .into(),
        ];
        let ic = InnerCalls::from_section(&s).unwrap();
        let e = ic.explain("OP_READDIRPLUS", 28, 29);
        assert_eq!(e.calls[0].peak_bucket, 26);
        // Where the fast calls do hold the time, they win.
        let mut b = [0u64; 64];
        b[11] = 900_000;
        b[26] = 3;
        assert_eq!(time_peak(&b), 11);
        assert_eq!(time_peak(&[0; 64]), 0);
    }
}
