//! What the parsers hold in memory: a small hostile file cannot make them allocate gigabytes
//! (text::MAX_CELLS and friends), and what the recorders write still parses.

use profile_store::text::{self, MAX_BUCKETS, MAX_CELLS, MAX_EPOCHS};
use profile_store::{Recorder, RecorderConfig, Resolution, json, ops};
use proptest::prelude::*;

use crate::sys;

const HEADER: &str = "# fsprof-profile v1\n# clock=tsc\n";

/// Parses `input`, returning the result and the most bytes held above the start while parsing.
fn parse_measured(input: &str) -> (Result<profile_store::Profile, text::ParseError>, usize) {
    let start = sys::live();
    sys::reset_peak();
    let r = text::parse(input);
    let peak = sys::peak_since(start);
    (r, peak)
}

#[test]
fn a_layer_past_the_cell_limit_is_refused_at_its_first_operation_before_allocating() {
    // 65536 epochs of 512 buckets are 65536 × 520 counts: past 2^25 for one operation. The
    // file is 131 KB of '-' lines, which stand for 268 MB of zeros.
    let mut input =
        format!("{HEADER}# layer=a resolution=8 buckets=512 epochs={MAX_EPOCHS}\nOP_READ 1 5\n");
    input.push_str(&"-\n".repeat(MAX_EPOCHS));
    let (r, peak) = parse_measured(&input);
    let e = r.unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert!(e.message.starts_with("OP_READ: profile too large"), "{e}");
    assert!(e.message.contains(&MAX_CELLS.to_string()), "{e}");
    // The line table (16 bytes a line) and little else.
    assert!(peak < 4 << 20, "parsing held {peak} bytes");
}

#[test]
fn the_cell_limit_counts_every_layer() {
    // Layer a: one operation of 20000 × 520 counts; layer b: one of 45000 × 520. Each fits
    // alone, together they pass 2^25: refused at b's operation, with a's 82 MB held.
    let mut input = format!("{HEADER}# layer=a resolution=8 buckets=512 epochs=20000\n");
    input.push_str("OP_READ 1 5\n");
    input.push_str(&"-\n".repeat(20_000));
    input.push_str("# layer=b resolution=8 buckets=512 epochs=45000\nOP_READ 1 5\n");
    let b_op_line = 3 + 1 + 20_000 + 2;
    input.push_str(&"-\n".repeat(45_000));
    let (r, peak) = parse_measured(&input);
    let e = r.unwrap_err();
    assert_eq!(e.line, b_op_line, "{e}");
    assert!(e.message.contains("profile too large"), "{e}");
    let a_bytes = 20_000 * 512 * 8;
    assert!(peak >= a_bytes, "layer a was parsed: {peak}");
    assert!(
        peak < a_bytes + (8 << 20),
        "layer b was not allocated: {peak}"
    );
}

#[test]
fn original_profile_padding_past_the_limit_is_refused_before_padding() {
    // A profile of the original tools pads every operation to the most epochs of any: one
    // operation of 65536 '-' lines and 30 of one line make 31 × 65536 × (64 + 8) counts, from
    // a 132 KB file. Refused at the long operation's line, before the padding is allocated.
    let mut input = String::from("OP_LONG 1 5\n");
    input.push_str(&"-\n".repeat(MAX_EPOCHS));
    let zeros = " 0".repeat(64) + "\n";
    for i in 0..30 {
        input.push_str(&format!("OP_SHORT{i} 1 5\n{zeros}"));
    }
    let (r, peak) = parse_measured(&input);
    let e = r.unwrap_err();
    assert_eq!(e.line, 1, "{e}");
    assert!(e.message.contains("profile too large"), "{e}");
    assert!(
        e.message
            .contains("31 operations padded to this one's 65536 epochs of 64 buckets"),
        "{e}"
    );
    // Lines, one Option per '-' line and 30 short bucket lines.
    assert!(peak < 8 << 20, "parsing held {peak} bytes");
}

#[test]
fn original_profile_with_too_many_epoch_lines() {
    let mut input = String::from("OP_LONG 1 5\n");
    input.push_str(&"-\n".repeat(MAX_EPOCHS + 1));
    let e = text::parse(&input).unwrap_err();
    assert_eq!(e.line, MAX_EPOCHS + 2, "{e}");
    assert!(
        e.message
            .contains(&format!("OP_LONG: more than {MAX_EPOCHS} epoch lines")),
        "{e}"
    );
}

#[test]
fn bucket_and_epoch_limits_are_line_errors() {
    let cases = [
        (
            format!("{HEADER}# layer=a resolution=8 buckets=513 epochs=1\n"),
            3,
            format!("buckets must be 1..={MAX_BUCKETS}, found 513"),
        ),
        (
            format!("{HEADER}# layer=a resolution=1 buckets=64 epochs=65537\n"),
            3,
            format!("epochs must be 1..={MAX_EPOCHS}, found 65537"),
        ),
        (
            format!("{HEADER}# layer=a resolution=1 buckets=64 epochs=4294967295\n"),
            3,
            "epochs must be".to_string(),
        ),
        (
            format!("OP_READ 1 5\n{}\n", " 0".repeat(MAX_BUCKETS + 1)),
            2,
            format!("more than {MAX_BUCKETS} buckets"),
        ),
    ];
    for (input, line, fragment) in cases {
        let e = text::parse(&input).unwrap_err();
        assert_eq!(e.line, line, "{e}");
        assert!(e.message.contains(&fragment), "{e}");
    }
    // The largest shapes are accepted: 512 buckets, 65536 epochs (of one bucket).
    let ok = format!(
        "{HEADER}# layer=a resolution=8 buckets=512 epochs=1\nOP_READ 1 5\n{}\n",
        " 0".repeat(MAX_BUCKETS)
    );
    text::parse(&ok).unwrap();
    let mut ok = format!("{HEADER}# layer=a resolution=1 buckets=1 epochs={MAX_EPOCHS}\n");
    ok.push_str("OP_READ 1 5\n");
    ok.push_str(&"-\n".repeat(MAX_EPOCHS));
    assert_eq!(text::parse(&ok).unwrap().layers[0].epochs, MAX_EPOCHS);
}

#[test]
fn json_has_the_same_limits() {
    let p = text::parse(&format!(
        "{HEADER}# layer=a resolution=1 buckets=2 epochs=1\nOP_READ 1 5\n 1 0\n"
    ))
    .unwrap();
    let j = json::write(&p);
    let wide = j.replace("\"buckets\":2", &format!("\"buckets\":{}", MAX_BUCKETS + 1));
    assert!(
        json::parse(&wide)
            .unwrap_err()
            .to_string()
            .contains("buckets must be")
    );
    let long = j.replace("\"epochs\":1", &format!("\"epochs\":{}", MAX_EPOCHS + 1));
    assert!(
        json::parse(&long)
            .unwrap_err()
            .to_string()
            .contains("epochs must be")
    );
}

#[test]
fn a_full_two_layer_profile_at_resolution_8_parses_and_round_trips() {
    // What fsprof-fuse with --resolution 8 and the default 256 epochs writes when every
    // standard operation was called: 2 × 35 × 256 × 512 counts, well within the limit.
    let mut input = String::from(HEADER);
    for layer in ["fuse", "lower"] {
        input.push_str(&format!(
            "# layer={layer} resolution=8 buckets=512 epoch_cycles=4294967296 epochs=256 \
             max_epochs_reached=false\n"
        ));
        for (i, op) in ops::STANDARD.iter().enumerate() {
            input.push_str(&format!("{op} 1 {}\n", 100 + i));
            for e in 0..256 {
                if e == i {
                    let mut row = vec!["0"; 512];
                    row[40] = "1";
                    input.push(' ');
                    input.push_str(&row.join(" "));
                    input.push('\n');
                } else {
                    input.push_str("-\n");
                }
            }
        }
    }
    let p = text::parse(&input).unwrap();
    assert_eq!(p.layers.len(), 2);
    assert_eq!(p.layers[1].ops.len(), ops::STANDARD.len());
    assert_eq!(text::write(&p), input);
}

#[test]
fn a_recorder_keeps_at_most_max_epochs_so_its_snapshot_parses() {
    let rec = Recorder::new(
        "fuse",
        &["OP_READ"],
        &RecorderConfig {
            resolution: Resolution::ONE,
            epoch_cycles: 1 << 40,
            max_epochs: MAX_EPOCHS + 100,
        },
    );
    let t = rec.start(0);
    // Far past the last epoch: folded into it.
    rec.record(t, t.start_cycles() + (1 << 40) * (MAX_EPOCHS as u64 + 50));
    let l = rec.snapshot();
    assert_eq!(l.epochs, MAX_EPOCHS);
    assert!(l.max_epochs_reached);
    assert_eq!(l.ops[0].epochs[MAX_EPOCHS - 1].iter().sum::<u64>(), 1);
    let p = profile_store::Profile {
        clock: Some(profile_store::ClockKind::Tsc),
        layers: vec![l],
        ..profile_store::Profile::default()
    };
    let written = text::write(&p);
    // (Not assert_eq: the Debug form of 65536 epochs is megabytes.)
    assert!(text::parse(&written).unwrap() == p, "round trip differs");
}

/// One line of a line-structured random profile: every kind of line the grammar knows, with
/// shapes from tiny to past every limit.
fn arb_line() -> impl Strategy<Value = String> {
    let big = prop_oneof![
        0u64..4,
        Just(512),
        Just(513),
        Just(4096),
        Just(65_535),
        Just(65_536),
        Just(65_537),
        Just(u32::MAX as u64),
        Just(u64::MAX),
        any::<u64>(),
    ];
    prop_oneof![
        Just("# fsprof-profile v1".to_string()),
        Just("# clock=tsc cycles_per_sec=1000".to_string()),
        (0u32..10, big.clone(), big.clone())
            .prop_map(|(r, b, e)| format!("# layer=l{r} resolution={r} buckets={b} epochs={e}")),
        ("[A-Z]{1,3}", 0u64..3).prop_map(|(n, c)| format!("OP_{n} {c} {c}")),
        prop::collection::vec(0u64..3, 0..70)
            .prop_map(|v| { v.iter().map(|x| format!(" {x}")).collect::<String>() }),
        Just("-".to_string()),
        (Just("-"), 1usize..2000).prop_map(|(d, n)| vec![d; n].join("\n")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn line_structured_random_inputs_never_panic_and_stay_bounded(
        lines in prop::collection::vec(arb_line(), 1..40),
        versioned in any::<bool>(),
    ) {
        let mut input = String::new();
        if versioned {
            input.push_str(HEADER);
        }
        for l in &lines {
            input.push_str(l);
            input.push('\n');
        }
        let (r, peak) = parse_measured(&input);
        if let Ok(p) = r {
            let cells: u64 = p
                .layers
                .iter()
                .map(|l| (l.ops.len() * l.epochs) as u64 * (l.buckets as u64 + text::ARRAY_OVERHEAD))
                .sum();
            prop_assert!(cells <= MAX_CELLS);
            prop_assert!(p.layers.iter().all(|l| l.buckets <= MAX_BUCKETS && l.epochs <= MAX_EPOCHS));
        }
        // Whatever the outcome, memory stays within the limit's 256 MiB (and these inputs,
        // with at most a few thousand lines, far below it).
        prop_assert!(peak < (MAX_CELLS as usize) * 8, "{peak} bytes");
    }
}
