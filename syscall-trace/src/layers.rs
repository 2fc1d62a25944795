//! What the program's maps hold, as profile layers and sections: the `syscall` layer, the
//! per-caller layers (`syscall@comm:tar`..., the callers with the most latency, the others in
//! `syscall@other`) and the `hot_files` section (`layer=syscall`).

use std::collections::HashMap;

use profile_store::{Layer, OpProfile, Resolution, Section, keyed};

use crate::abi::{self, Hist, HotKey, HotVal, KeyedKey, KeyedVal};
use crate::names::Namer;

/// What one read of the maps found.
#[derive(Clone, Default)]
pub struct Readout {
    /// Per operation, since the last reset.
    pub hists: Vec<Hist>,
    /// Per-caller entries.
    pub keyed: Vec<(KeyedKey, KeyedVal)>,
    /// Hot-file entries.
    pub hot: Vec<(HotKey, HotVal)>,
    /// `stats`, since the last reset.
    pub stats: [u64; abi::ST_SLOTS as usize],
    /// Calls the kernel skipped while a program ran, since the last reset.
    pub misses: u64,
}

fn op_profile(name: &str, h: &Hist, buckets: usize) -> OpProfile {
    let mut o = OpProfile::new(name, buckets, 1);
    o.count = h.count;
    o.total = h.total;
    o.epochs[0].copy_from_slice(&h.b[..buckets]);
    o
}

/// A layer named `name` of the operations in `hists` that were called.
pub fn layer(name: &str, ops: &[&str], hists: &[Hist], res: Resolution) -> Layer {
    let mut l = Layer::new(name, res);
    let buckets = res.buckets();
    for (op, h) in ops.iter().zip(hists) {
        if h.count > 0 {
            l.ops.push(op_profile(op, h, buckets));
        }
    }
    l.ops
        .sort_by(|a, b| profile_store::ops::listing_order(&a.name, &b.name));
    l
}

/// A caller: its layer's key (`pid`, `uid`, `comm`) and value.
type Caller = (&'static str, Vec<u8>);

/// The caller a per-caller key names.
fn caller(k: &KeyedKey) -> Option<Caller> {
    match k.kind {
        abi::BY_PID => Some(("pid", k.id.to_string().into_bytes())),
        abi::BY_UID => Some(("uid", k.id.to_string().into_bytes())),
        abi::BY_COMM => {
            let end = k.comm.iter().position(|&b| b == 0).unwrap_or(k.comm.len());
            Some(("comm", k.comm[..end].to_vec()))
        }
        _ => None,
    }
}

/// The per-caller layers: the `max` callers with the most latency, then `syscall@other`.
pub fn keyed_layers(
    ops: &[&str],
    entries: &[(KeyedKey, KeyedVal)],
    max: usize,
    res: Resolution,
) -> Vec<Layer> {
    let n = ops.len();
    let mut callers: HashMap<Caller, Vec<Hist>> = HashMap::new();
    let mut other = vec![Hist::default(); n];
    for (k, v) in entries {
        let op = k.op as usize;
        if op >= n {
            continue;
        }
        match caller(k) {
            Some(c) => callers.entry(c).or_insert_with(|| vec![Hist::default(); n])[op].add(v),
            None => other[op].add(v),
        }
    }
    let mut ranked: Vec<(Caller, Vec<Hist>)> = callers.into_iter().collect();
    ranked.sort_by(|a, b| {
        let t = |h: &[Hist]| h.iter().map(|x| x.total as u128).sum::<u128>();
        t(&b.1).cmp(&t(&a.1)).then_with(|| a.0.cmp(&b.0))
    });
    let mut out = Vec::new();
    for (i, ((key, value), hists)) in ranked.into_iter().enumerate() {
        if i < max {
            let name = keyed::name(crate::LAYER, key, &value);
            out.push(layer(&name, ops, &hists, res));
        } else {
            for (o, h) in other.iter_mut().zip(&hists) {
                o.add(h);
            }
        }
    }
    if other.iter().any(|h| h.count > 0) {
        out.push(layer(&keyed::other(crate::LAYER), ops, &other, res));
    }
    out
}

/// The `hot_files` section of the layer: the `n` files with the most latency, then the `n`
/// with the most calls (exact counts: `error=0`).
pub fn hot_section(entries: &[(HotKey, HotVal)], n: usize, namer: &Namer) -> Section {
    let mut s = Section::new("hot_files");
    s.attrs = vec![
        ("n".into(), n.to_string()),
        ("layer".into(), crate::LAYER.into()),
    ];
    for (by, key) in [("latency", 0), ("calls", 1)] {
        let mut v: Vec<&(HotKey, HotVal)> = entries.iter().filter(|e| e.1.count > 0).collect();
        v.sort_by(|a, b| {
            let val = |e: &(HotKey, HotVal)| if key == 0 { e.1.total } else { e.1.count };
            val(b)
                .cmp(&val(a))
                .then_with(|| (a.0.dev, a.0.ino).cmp(&(b.0.dev, b.0.ino)))
        });
        for (rank, (k, val)) in v.into_iter().take(n).enumerate() {
            let value = if key == 0 { val.total } else { val.count };
            let path = namer
                .path(val.name_kind, &val.name, val.name_len, k.dev)
                .map_or_else(|| "?".to_string(), |p| Section::escape(&p));
            s.lines.push(format!(
                "by={by} rank={} ino={} value={value} error=0 path={path}",
                rank + 1,
                k.ino
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(count: u64, total: u64, b: usize) -> Hist {
        let mut h = Hist {
            count,
            total,
            ..Hist::default()
        };
        h.b[b] = count;
        h
    }

    #[test]
    fn callers_beyond_the_bound_share_other() {
        let ops = ["SYS_READ", "SYS_PREAD"];
        let key = |comm: &str, op: u16| {
            let mut k = KeyedKey {
                op,
                kind: abi::BY_COMM,
                ..KeyedKey::default()
            };
            k.comm[..comm.len()].copy_from_slice(comm.as_bytes());
            k
        };
        let entries = vec![
            (key("tar", 0), hist(3, 300, 8)),
            (key("cat", 1), hist(1, 50, 5)),
            (key("dd", 0), hist(2, 100, 6)),
            (
                KeyedKey {
                    op: 1,
                    kind: abi::BY_OTHER,
                    ..KeyedKey::default()
                },
                hist(4, 40, 3),
            ),
        ];
        let ls = keyed_layers(&ops, &entries, 2, Resolution::ONE);
        let names: Vec<&str> = ls.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            ["syscall@comm:tar", "syscall@comm:dd", "syscall@other"]
        );
        let other = &ls[2];
        assert_eq!(other.count("SYS_PREAD"), 5);
        assert_eq!(ls[0].count("SYS_READ"), 3);
        let total: u64 = ls.iter().map(|l| l.total_count()).sum();
        assert_eq!(total, 10, "every call in exactly one layer");
    }

    #[test]
    fn hot_files_rank_by_latency_then_calls() {
        let val = |count, total, name: &[u8]| {
            let mut v = HotVal {
                count,
                total,
                name_kind: abi::NAME_DENTRIES,
                name_len: name.len() as u32,
                name: [0; abi::NAME_BYTES],
            };
            v.name[..name.len()].copy_from_slice(name);
            v
        };
        let k = |ino| HotKey {
            dev: 5,
            pad: 0,
            ino,
        };
        let e = vec![
            (k(1), val(10, 100, b"a\0")),
            (k(2), val(2, 900, b"b c\0d\0")),
        ];
        let s = hot_section(&e, 5, &Namer::mount(std::path::Path::new("/m")));
        assert_eq!(s.attr("layer"), Some("syscall"));
        assert_eq!(
            s.lines,
            [
                "by=latency rank=1 ino=2 value=900 error=0 path=/d/b%20c",
                "by=latency rank=2 ino=1 value=100 error=0 path=/a",
                "by=calls rank=1 ino=1 value=10 error=0 path=/a",
                "by=calls rank=2 ino=2 value=2 error=0 path=/d/b%20c",
            ]
        );
    }
}
