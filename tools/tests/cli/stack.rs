//! `fsprof stack` and `fsprof plot --kind stack`: one operation down the levels of a profile
//! of known structure (as `--kernel` writes them: `kernel` and `block@dev:NAME` beside the
//! daemon's layers).

use serde_json::Value;

use crate::util::{fsprof, synthetic, write_profile};

/// fuse, lower, kernel and a loop device: 1000 reads, 10 of them 2^21 cycles slower at every
/// level, and writes at the device that `OP_READ`'s block level leaves out.
fn stacked() -> profile_store::Profile {
    let mut p = synthetic(&[("OP_READ", &[(14, 990), (21, 10)])]);
    let fuse = p.layers[0].clone();
    let rename = |name: &str, shift: usize, op: &str| {
        let mut l = fuse.clone();
        l.name = name.to_string();
        for o in &mut l.ops {
            o.name = op.to_string();
            if shift > 0 {
                let e = &mut o.epochs[0];
                e.rotate_right(shift);
            }
        }
        l
    };
    p.layers.push(rename("lower", 0, "OP_READ"));
    p.layers.insert(0, rename("kernel", 1, "OP_READ"));
    let mut block = rename("block@dev:loop0", 0, "BLK_READ_SYNC");
    let mut w = block.ops[0].clone();
    w.name = "BLK_WRITE".into();
    block.ops.push(w);
    p.layers.push(block);
    p
}

#[test]
fn stack_lists_the_levels_from_the_top_with_their_share() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_profile(dir.path(), "s.fsprof", &stacked());
    let out = fsprof(&["stack", &path, "read", "--format", "json"]).ok();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["operation"], "OP_READ");
    let levels = v["levels"].as_array().unwrap();
    let names: Vec<&str> = levels
        .iter()
        .map(|l| l["layer"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["kernel", "fuse", "lower", "block@dev:loop0"]);
    // The block level holds the device's reads only, not its writes.
    assert_eq!(levels[3]["calls"], 1000);
    assert!(levels[0]["share_of_above"].is_null());
    // Each level's peaks: the fast path and the ten slow calls.
    for l in levels {
        let calls: Vec<u64> = l["peaks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["calls"].as_u64().unwrap())
            .collect();
        assert_eq!(calls, [990, 10], "{}", l["layer"]);
    }
    let text = fsprof(&["stack", &path]).ok();
    assert!(
        text.starts_with("OP_READ down the stack of 4 level(s)"),
        "{text}"
    );
    assert!(text.contains("every request of its device"), "{text}");
    // An operation no level has (without a block layer, whose requests any operation may
    // have caused) is a usage error.
    let fuse_only = write_profile(
        dir.path(),
        "f.fsprof",
        &synthetic(&[("OP_READ", &[(14, 5)])]),
    );
    let e = fsprof(&["stack", &fuse_only, "mkdir"]);
    assert!(
        e.one_line_error(2).contains("no level"),
        "{:?}",
        e.one_line_error(2)
    );
}

#[test]
fn plot_stack_draws_one_series_per_level() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_profile(dir.path(), "s.fsprof", &stacked());
    let svg = dir.path().join("s.svg");
    fsprof(&[
        "plot",
        "--kind",
        "stack",
        &path,
        "--op",
        "read",
        "-o",
        svg.to_str().unwrap(),
    ])
    .ok();
    let text = std::fs::read_to_string(&svg).unwrap();
    roxmltree::Document::parse(&text).expect("well-formed SVG");
    // Two non-empty buckets at each of four levels.
    for class in ["bar a", "bar b", "bar c", "bar d"] {
        assert_eq!(
            text.matches(&format!("class=\"{class}\"")).count(),
            2,
            "{class}"
        );
    }
    assert!(text.contains("block@dev:loop0: 1000 calls"));
}
