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
//! operation's kind (`OP_READ`: the data reads, `BLK_READ` and `BLK_READ_SYNC`; `OP_WRITE`:
//! the data writes; `OP_FSYNC`, `OP_FSYNCDIR`, `OP_FLUSH`: every write and flush; any other
//! operation, a metadata one: the requests the kernel marks as metadata, `*_META`), and no
//! share of the level above: the device's time is not a part of it (it may exceed it).
//!
//! Every level's peaks are found by [`peaks::of`], as every other view finds them; a level's
//! share of the level above is shown only where it is a part of it (at most 100%).

use std::fmt::Write as _;

use profile_store::{Layer, OpProfile, Profile, keyed};
use serde::Serialize;

use crate::error::Error;
use crate::hist::Histogram;
use crate::input::{self, Loaded};
use crate::maxima::Maxima;
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

/// Whether the block operation `blk` (`BLK_READ_SYNC_META`) is of the kind operation `op`
/// (a FUSE operation or a system call) leads to (see the module documentation).
pub fn block_kind_of(op: &str, blk: &str) -> bool {
    let meta = blk.ends_with("_META");
    match (
        crate::levels::fuse_counterpart(op).unwrap_or(op),
        block_base(blk),
    ) {
        ("OP_READ", "READ") | ("OP_WRITE", "WRITE") => !meta,
        ("OP_FSYNC" | "OP_FSYNCDIR" | "OP_FLUSH", base) => base == "WRITE" || base == "FLUSH",
        ("OP_READ" | "OP_WRITE", _) => false,
        _ => meta,
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
                let mine = l.ops.iter().filter(|o| block_kind_of(op, &o.name));
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
    /// Estimated p50, p90, p99, p99.9 and maximum in cycles (none above the maximum).
    pub percentiles_cycles: Option<[f64; 5]>,
    /// Whether the maximum is the slowest request recorded (exact).
    pub max_recorded: bool,
    /// Its total as a share (0..=1) of the level above's total; `None` at the top, for a block
    /// level (the device's time, whoever asked, is not a part of it), and where it would exceed
    /// the level above's (a level that sees calls the one above does not).
    pub share_of_above: Option<f64>,
    /// Its peaks.
    pub peaks: Vec<peaks::Peak>,
}

/// The rows of `levels`, their maxima as `maxima` records them.
pub fn rows(levels: &[Level], maxima: &Maxima) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    for l in levels {
        let h = Histogram::of(&l.op, l.buckets);
        let above = out.last().map(|r| r.total_cycles);
        let res = l.buckets.resolution;
        out.push(Row {
            level: l.level.to_string(),
            layer: l.layer.clone(),
            calls: l.op.count,
            total_cycles: l.op.total,
            mean_cycles: l.op.mean(),
            percentiles_cycles: maxima.percentiles_in(&l.layer, res, &l.op),
            max_recorded: maxima.is_exact_in(&l.layer, res, &l.op),
            share_of_above: above
                .filter(|_| l.level != "block")
                .map(|a| {
                    if a == 0 {
                        f64::INFINITY
                    } else {
                        l.op.total as f64 / a as f64
                    }
                })
                .filter(|s| *s <= 1.0),
            peaks: peaks::of(&h),
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
    let rows = rows(&lv, &crate::maxima::Maxima::of(&p.profile));
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
        let max = if r.max_recorded {
            pc(4)
        } else {
            r.percentiles_cycles
                .map_or("-".into(), |q| format!("<={}", clock.latency(q[4])))
        };
        t.row(vec![
            r.level.clone(),
            r.layer.clone(),
            r.calls.to_string(),
            clock.latency(r.total_cycles as f64),
            clock.latency(r.mean_cycles),
            pc(0),
            pc(2),
            max,
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
                    "{} call{}, mean {}, [{}, {})",
                    pk.calls,
                    if pk.calls == 1 { "" } else { "s" },
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
            "(a block level counts every request of its device of the operation's kind, not only \
             this mount's: no share of the level above)"
        );
    }
    let over =
        rows.iter().enumerate().skip(1).any(|(i, r)| {
            r.level != "block" && r.share_of_above.is_none() && rows[i - 1].calls > 0
        });
    if over {
        let _ = writeln!(
            out,
            "(of above: -: more time than the level above, whose calls it does not all come from)"
        );
    }
    if let [only] = rows {
        let _ = writeln!(out, "{}", one_level_hint(&only.level));
    }
    if let Some(why) = p
        .extra("block_layers")
        .and_then(|v| v.strip_prefix("none:"))
    {
        let _ = writeln!(out, "(no block level: {})", profile_store::name::shown(why));
    }
}

/// What to record for more than the one level a profile holds.
fn one_level_hint(level: &str) -> &'static str {
    match level {
        "user" => {
            "(one level: a stack needs more; `fsprof profile DIR --user --kernel -- COMMAND` \
             records the program's calls beside the mount's levels and the kernel's)"
        }
        _ => {
            "(one level: a stack needs more; record with --kernel (the kernel's round trip and \
             the block devices), --user (fsprof profile: the program's calls) or --layers \
             fuse,lower (the lower system calls))"
        }
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
        // The device's time is not a part of the lower level's: no share.
        assert!(rows(&lv, &Maxima::default())[4].share_of_above.is_none());
        let r = rows(&lv, &Maxima::default());
        assert!(r[0].share_of_above.is_none());
        let share = r[1].share_of_above.unwrap();
        assert!((share - 0.5).abs() < 1e-9, "{share}");
        assert_eq!(block_base("BLK_WRITE_ZEROES_SYNC_META"), "WRITE_ZEROES");
        // A metadata operation gets the metadata requests, not the data reads.
        assert!(block_kind_of("OP_READDIRPLUS", "BLK_READ_SYNC_META"));
        assert!(!block_kind_of("OP_READDIRPLUS", "BLK_READ"));
        assert!(!block_kind_of("OP_READ", "BLK_READ_META"));
        assert!(block_kind_of("OP_FSYNC", "BLK_FLUSH"));
        assert_eq!(level_of("branch12"), Some((4, "branch")));
        assert_eq!(level_of("branchx"), None);
    }

    /// A profile of one level is no stack: the output says what to record for more.
    #[test]
    fn one_level_says_what_to_record() {
        let stack_of = |layers: Vec<Layer>| {
            let p = Profile {
                layers,
                ..Profile::default()
            };
            let mut out = String::new();
            render(
                &p,
                "OP_READ",
                &rows(&levels(&p, "OP_READ"), &Maxima::default()),
                Clock(None),
                &mut out,
            );
            out
        };
        let fuse = stack_of(vec![layer("fuse", &[("OP_READ", 15, 100)])]);
        assert!(fuse.contains("(one level: "), "{fuse}");
        assert!(
            fuse.contains("--kernel") && fuse.contains("--user"),
            "{fuse}"
        );
        let user = stack_of(vec![layer("user", &[("SYS_PREAD", 17, 100)])]);
        assert!(
            user.contains("fsprof profile DIR --user --kernel"),
            "{user}"
        );
        let two = stack_of(vec![
            layer("fuse", &[("OP_READ", 15, 100)]),
            layer("lower", &[("OP_READ", 14, 100)]),
        ]);
        assert!(!two.contains("one level"), "{two}");
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
        let c = cached(&rows(&lv, &Maxima::default())).unwrap();
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
        assert_eq!(cached(&rows(&lv, &Maxima::default())), None);
    }
}
