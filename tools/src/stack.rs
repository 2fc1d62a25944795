//! `fsprof stack MNT|PROFILE [OP]`: one operation down the levels a profile holds, from the
//! top: `user` (the program's calls, summed per FUSE operation they lead to) → `syscall` (the
//! system calls, timed in the kernel, `--syscalls`, summed the same way) → `kernel` (FUSE's
//! round trip, `--kernel`) → `fuse` (the daemon) → `lower` or the RAIF branches (the daemon's
//! system calls) → `block@dev:NAME` (the devices' requests, `--kernel`). For each: calls,
//! total time, mean, estimated percentiles, its peaks, and its total time as a share of the
//! level above's (thesis §3: comparing levels finds where latency starts). With both a
//! `syscall` and a `fuse` level, it also says what share of the system calls the kernel
//! served from its caches: the calls no FUSE request matches.
//!
//! OP may be a system call (`SYS_PREAD`), as on a profile made with `--no-mount`: the levels
//! are then `user` (the C-library functions that make that call), `syscall` and the block
//! devices.
//!
//! A block layer counts every request of its device, whoever made it, and a request cannot be
//! traced back to the operation that caused it: the level shows the device's requests of the
//! operation's kind (`OP_READ`: `BLK_READ*`; `OP_WRITE`: `BLK_WRITE*`; `OP_FSYNC`,
//! `OP_FSYNCDIR`, `OP_FLUSH`: `BLK_WRITE*` and `BLK_FLUSH*`; any other: every request).

use std::fmt::Write as _;

use profile_store::{Layer, OpProfile, Profile, keyed, views};
use serde::Serialize;

use crate::error::Error;
use crate::hist::Histogram;
use crate::input::{self, Loaded};
use crate::peaks;
use crate::summary::TableFormat;
use crate::table::Table;
use crate::units::{Buckets, Clock};

/// `fsprof stack`.
#[derive(Debug, Clone, PartialEq)]
pub struct StackConfig {
    /// A mount point or a profile.
    pub input: String,
    /// The operation (`OP_READ`); `None`: the one with the most time in the `fuse` layer.
    pub op: Option<String>,
    /// Text or JSON.
    pub format: TableFormat,
}

/// One level of the stack for one operation.
#[derive(Debug, Clone)]
pub struct Level {
    /// `user`, `kernel`, `fuse`, `lower`, `branch` or `block`.
    pub level: &'static str,
    /// The layer's name.
    pub layer: String,
    /// The operation's calls at this level (for a block layer, the device's requests of its
    /// kind; for `user`, the calls summed into it), as one operation record.
    pub op: OpProfile,
    /// Bucket geometry of the layer.
    pub buckets: Buckets,
}

/// The level of a layer and its rank from the top, for the layers a stack shows.
pub fn level_of(name: &str) -> Option<(u8, &'static str)> {
    match name {
        "user" => Some((0, "user")),
        "syscall" => Some((1, "syscall")),
        "kernel" => Some((2, "kernel")),
        "fuse" => Some((3, "fuse")),
        "lower" => Some((4, "lower")),
        n if n.starts_with("branch") && n[6..].bytes().all(|b| b.is_ascii_digit()) => {
            Some((4, "branch"))
        }
        n => match keyed::parse(n) {
            Some(keyed::Keyed::Key { base: "block", .. }) => Some((5, "block")),
            _ => None,
        },
    }
}

/// Base block operations (without `_SYNC`/`_META`) that operation `op` (a FUSE operation or a
/// system call) leads to; empty: all.
pub fn block_kinds(op: &str) -> &'static [&'static str] {
    match crate::levels::fuse_counterpart(op).unwrap_or(op) {
        "OP_READ" => &["READ"],
        "OP_WRITE" => &["WRITE"],
        "OP_FSYNC" | "OP_FSYNCDIR" | "OP_FLUSH" => &["WRITE", "FLUSH"],
        _ => &[],
    }
}

/// The calls of a `user` or `syscall` layer `l` that stand for operation `op`: summed per
/// FUSE operation for an `OP_` operation; for a system call, the calls of that name and, in
/// the user layer, the C-library functions that make it.
fn calls_for(l: &Layer, level: &str, op: &str) -> Option<OpProfile> {
    if op.starts_with("OP_") {
        let (grouped, _) = crate::levels::grouped_by_fuse_op(l);
        return grouped
            .op(op)
            .map(|o| summed(op, std::iter::once(o), l.buckets));
    }
    let mine = l.ops.iter().filter(|o| {
        o.name == op
            || (level == "user" && syscall_trace::table::c_library_call(&o.name) == Some(op))
    });
    Some(summed(op, mine, l.buckets)).filter(|o| o.count > 0)
}

/// The base of a block operation name: `BLK_WRITE_ZEROES_SYNC` → `WRITE_ZEROES`.
fn block_base(name: &str) -> &str {
    let b = name.strip_prefix("BLK_").unwrap_or(name);
    let b = b.strip_suffix("_META").unwrap_or(b);
    b.strip_suffix("_SYNC").unwrap_or(b)
}

/// The sum of `ops` as one record named `name`.
fn summed<'a>(name: &str, ops: impl Iterator<Item = &'a OpProfile>, buckets: usize) -> OpProfile {
    let mut out = OpProfile::new(name, buckets, 1);
    for o in ops {
        out.count = out.count.saturating_add(o.count);
        out.total = out.total.saturating_add(o.total);
        for (d, s) in out.epochs[0].iter_mut().zip(o.merged()) {
            *d = d.saturating_add(s);
        }
    }
    out
}

/// The levels of `p` for operation `op`, from the top; layers without it are left out.
pub fn levels(p: &Profile, op: &str) -> Vec<Level> {
    let mut out: Vec<(u8, Level)> = Vec::new();
    for l in &p.layers {
        let Some((rank, level)) = level_of(&l.name) else {
            continue;
        };
        let buckets = Buckets::of(l);
        let rec = match level {
            "user" | "syscall" => calls_for(l, level, op),
            "block" => {
                let kinds = block_kinds(op);
                let mine = l
                    .ops
                    .iter()
                    .filter(|o| kinds.is_empty() || kinds.contains(&block_base(&o.name)));
                Some(summed(op, mine, l.buckets)).filter(|o| o.count > 0)
            }
            _ => l.op(op).map(|o| summed(op, std::iter::once(o), l.buckets)),
        };
        if let Some(op) = rec {
            out.push((
                rank,
                Level {
                    level,
                    layer: l.name.clone(),
                    op,
                    buckets,
                },
            ));
        }
    }
    out.sort_by_key(|(r, _)| *r);
    out.into_iter().map(|(_, l)| l).collect()
}

/// The operation a stack shows by default: the most time in `fuse` (or, without a mount, in
/// `syscall`; or in the first layer).
pub fn default_op(p: &Profile) -> Option<String> {
    let l: &Layer = p
        .layer("fuse")
        .or_else(|| p.layer(syscall_trace::LAYER))
        .or_else(|| p.layers.first())?;
    l.ops.iter().max_by_key(|o| o.total).map(|o| o.name.clone())
}

/// One level as shown and as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Level.
    pub level: String,
    /// Layer name.
    pub layer: String,
    /// Calls.
    pub calls: u64,
    /// Total time in cycles.
    pub total_cycles: u64,
    /// Mean in cycles (of the calls that finished).
    pub mean_cycles: f64,
    /// Estimated p50, p90, p99, p99.9 and maximum in cycles.
    pub percentiles_cycles: Option<[f64; 5]>,
    /// Its total as a share (0..) of the level above's total; `None` at the top.
    pub share_of_above: Option<f64>,
    /// Its peaks.
    pub peaks: Vec<peaks::Peak>,
}

/// The rows of `levels`.
pub fn rows(levels: &[Level]) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    for l in levels {
        let h = Histogram::of(&l.op, l.buckets);
        let above = out.last().map(|r| r.total_cycles);
        out.push(Row {
            level: l.level.to_string(),
            layer: l.layer.clone(),
            calls: l.op.count,
            total_cycles: l.op.total,
            mean_cycles: l.op.mean(),
            percentiles_cycles: views::percentiles(&l.op, l.buckets.resolution),
            share_of_above: above.map(|a| {
                if a == 0 {
                    0.0
                } else {
                    l.op.total as f64 / a as f64
                }
            }),
            peaks: peaks::find_significant(&h, peaks::DEFAULT_PROMINENCE, peaks::DEFAULT_MIN_SHARE),
        });
    }
    out
}

/// What the kernel served from its caches: the system calls (`syscall` level) that no FUSE
/// request (`fuse` level) matches, as calls, requests and the share of the calls; `None`
/// without both levels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cached {
    /// Calls in the `syscall` level.
    pub syscall_calls: u64,
    /// Requests in the `fuse` level.
    pub fuse_requests: u64,
    /// `(syscall − fuse) / syscall`, at least 0.
    pub share: f64,
}

/// The share of `rows`' system calls served from the kernel's caches ([`Cached`]).
pub fn cached(rows: &[Row]) -> Option<Cached> {
    let sys = rows.iter().find(|r| r.level == "syscall")?.calls;
    let fuse = rows.iter().find(|r| r.level == "fuse")?.calls;
    Some(Cached {
        syscall_calls: sys,
        fuse_requests: fuse,
        share: if sys == 0 {
            0.0
        } else {
            sys.saturating_sub(fuse) as f64 / sys as f64
        },
    })
}

/// `fsprof stack`.
pub fn run(p: &Loaded, c: &StackConfig, out: &mut String) -> Result<(), Error> {
    let op = match &c.op {
        Some(o) => input::op_name(o),
        None => default_op(&p.profile)
            .ok_or_else(|| Error::usage(&p.name, "the profile has no operation"))?,
    };
    let lv = levels(&p.profile, &op);
    if lv.is_empty() {
        return Err(Error::usage(
            format!("{} {op}", p.name),
            "no level of the profile has this operation",
        ));
    }
    let rows = rows(&lv);
    let clock = p.clock();
    match c.format {
        TableFormat::Json => {
            let v = serde_json::json!({
                "operation": op,
                "levels": rows,
                "served_from_caches": cached(&rows),
            });
            let _ = writeln!(out, "{v}");
        }
        _ => render(&p.profile, &op, &rows, clock, out),
    }
    Ok(())
}

fn render(p: &Profile, op: &str, rows: &[Row], clock: Clock, out: &mut String) {
    let _ = writeln!(out, "{op} down the stack of {} level(s)", rows.len());
    let mut t = Table::new(&[
        "level", "layer", "calls", "total", "mean", "p50", "p99", "max", "of above",
    ]);
    t.align_left(0);
    t.align_left(1);
    for r in rows {
        let pc = |i: usize| {
            r.percentiles_cycles
                .map_or("-".to_string(), |q| clock.latency(q[i]))
        };
        t.row(vec![
            r.level.clone(),
            r.layer.clone(),
            r.calls.to_string(),
            clock.latency(r.total_cycles as f64),
            clock.latency(r.mean_cycles),
            pc(0),
            pc(2),
            pc(4),
            r.share_of_above
                .map_or("-".to_string(), |s| format!("{:.1}%", s * 100.0)),
        ]);
    }
    t.render(0, out);
    let _ = writeln!(out, "peaks (calls, mean, bucket range):");
    for r in rows {
        let list: Vec<String> = r
            .peaks
            .iter()
            .map(|pk| {
                let geo = p.layer(&r.layer).map(Buckets::of).expect("the row's layer");
                format!(
                    "{} calls, mean {}, [{}, {})",
                    pk.calls,
                    clock.latency(pk.mean_cycles),
                    clock.latency(geo.lo(pk.lo)),
                    clock.latency(geo.hi(pk.hi))
                )
            })
            .collect();
        let _ = writeln!(out, "  {:<7} {}", r.level, list.join("; "));
    }
    if let Some(c) = cached(rows) {
        let _ = writeln!(
            out,
            "served from the kernel's caches: {:.1}% of the system calls ({} in syscall, {} \
             reached the daemon)",
            c.share * 100.0,
            c.syscall_calls,
            c.fuse_requests
        );
    }
    if rows.iter().any(|r| r.level == "block") {
        let _ = writeln!(
            out,
            "(a block level counts every request of its device of the operation's kind, not only this mount's)"
        );
    }
    if let Some(why) = p
        .extra("block_layers")
        .and_then(|v| v.strip_prefix("none:"))
    {
        let _ = writeln!(
            out,
            "(no block level: {})",
            profile_store::Section::unescape(why)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::Resolution;

    fn layer(name: &str, ops: &[(&str, usize, u64)]) -> Layer {
        let mut l = Layer::new(name, Resolution::ONE);
        for &(n, b, c) in ops {
            let mut o = OpProfile::new(n, 64, 1);
            o.epochs[0][b] = c;
            o.count = c;
            o.total = c * (3 << (b - 1));
            l.ops.push(o);
        }
        l
    }

    #[test]
    fn levels_are_ordered_from_the_user_down_and_block_sums_the_kind() {
        let p = Profile {
            layers: vec![
                layer("fuse", &[("OP_READ", 15, 100)]),
                layer(
                    "block@dev:loop0",
                    &[
                        ("BLK_READ", 14, 60),
                        ("BLK_READ_SYNC", 14, 40),
                        ("BLK_WRITE", 14, 7),
                    ],
                ),
                layer("lower", &[("OP_READ", 14, 100)]),
                layer("kernel", &[("OP_READ", 16, 100)]),
                layer("user", &[("SYS_PREAD", 17, 100)]),
                layer("fuse@uid:0", &[("OP_READ", 15, 100)]),
            ],
            ..Profile::default()
        };
        let lv = levels(&p, "OP_READ");
        let names: Vec<&str> = lv.iter().map(|l| l.layer.as_str()).collect();
        assert_eq!(
            names,
            ["user", "kernel", "fuse", "lower", "block@dev:loop0"]
        );
        assert_eq!(
            lv[4].op.count, 100,
            "BLK_READ and BLK_READ_SYNC, not BLK_WRITE"
        );
        let r = rows(&lv);
        assert!(r[0].share_of_above.is_none());
        let share = r[1].share_of_above.unwrap();
        assert!((share - 0.5).abs() < 1e-9, "{share}");
        assert_eq!(block_base("BLK_WRITE_ZEROES_SYNC_META"), "WRITE_ZEROES");
        assert_eq!(level_of("branch12"), Some((4, "branch")));
        assert_eq!(level_of("branchx"), None);
    }

    #[test]
    fn the_syscall_level_sits_under_user_and_says_what_the_caches_served() {
        let p = Profile {
            layers: vec![
                layer("fuse", &[("OP_READ", 15, 10)]),
                layer("syscall", &[("SYS_PREAD", 12, 900), ("SYS_READ", 16, 100)]),
                layer("user", &[("SYS_PREAD", 12, 1000)]),
            ],
            ..Profile::default()
        };
        let lv = levels(&p, "OP_READ");
        let names: Vec<&str> = lv.iter().map(|l| l.level).collect();
        assert_eq!(names, ["user", "syscall", "fuse"]);
        assert_eq!(lv[1].op.count, 1000);
        let c = cached(&rows(&lv)).unwrap();
        assert_eq!((c.syscall_calls, c.fuse_requests), (1000, 10));
        assert!((c.share - 0.99).abs() < 1e-9);
        // A system call, as on a profile made without a mount: the user level's functions
        // that make it (glibc's stat makes newfstatat).
        let p = Profile {
            layers: vec![
                layer("user", &[("SYS_STAT", 12, 5), ("SYS_FSTATAT", 12, 2)]),
                layer("syscall", &[("SYS_FSTATAT", 12, 7)]),
            ],
            ..Profile::default()
        };
        let lv = levels(&p, "SYS_FSTATAT");
        assert_eq!((lv[0].op.count, lv[1].op.count), (7, 7));
        assert_eq!(cached(&rows(&lv)), None);
    }
}
