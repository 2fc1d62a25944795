//! Text and JSON formats: golden files, round trips, the thesis sample, parser errors.

use std::path::PathBuf;

use profile_store::{ClockKind, Layer, OpProfile, Profile, Resolution, Section, json, ops, text};
use proptest::prelude::*;

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// Compares `actual` with a golden file; `FSPROF_BLESS=1` rewrites it instead.
fn assert_golden(name: &str, actual: &str) {
    let path = golden(name);
    if std::env::var_os("FSPROF_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (FSPROF_BLESS=1 creates it)", path.display()));
    assert_eq!(actual, expected, "golden file {name} differs");
}

#[test]
fn golden_text_round_trips_byte_for_byte() {
    for name in [
        "two-layers.fsprof",
        "time-lapse.fsprof",
        "resolution-4.fsprof",
    ] {
        let input = std::fs::read_to_string(golden(name)).unwrap();
        let p = text::parse(&input).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(text::write(&p), input, "{name}");
        // And through JSON and back.
        let j = json::write(&p);
        assert_eq!(json::parse(&j).unwrap(), p, "{name} via JSON");
    }
}

#[test]
fn golden_json_form() {
    let input = std::fs::read_to_string(golden("two-layers.fsprof")).unwrap();
    let p = text::parse(&input).unwrap();
    assert_golden("two-layers.json", &json::write(&p));
    let parsed = profile_store::parse_any(
        std::fs::read_to_string(golden("two-layers.json"))
            .unwrap()
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(parsed, p);
}

#[test]
fn golden_content_is_what_it_says() {
    let p = text::parse(&std::fs::read_to_string(golden("two-layers.fsprof")).unwrap()).unwrap();
    assert_eq!(p.clock, Some(ClockKind::Tsc));
    assert_eq!(p.cycles_per_sec, Some(2_893_421_000));
    assert_eq!(p.invariant_tsc, Some(true));
    assert_eq!(p.layers.len(), 2);
    let fuse = &p.layers[0];
    assert_eq!(fuse.name, "fuse");
    assert_eq!(fuse.count("OP_LOOKUP"), 3);
    assert_eq!(fuse.op("OP_LOOKUP").unwrap().epochs[0][9], 2);
    assert_eq!(p.layers[1].name, "lower");
    assert_eq!(
        p.layers[1].extra,
        vec![("note".to_string(), "syscalls".to_string())]
    );
}

#[test]
fn thesis_sample_parses_as_an_original_profile() {
    let input = std::fs::read_to_string(golden("thesis-sample.txt")).unwrap();
    let p = text::parse(&input).unwrap();
    assert_eq!(p.cycles_per_sec, None);
    assert_eq!(p.clock, None);
    let l = &p.layers[0];
    assert_eq!(l.resolution, Resolution::ONE);
    assert_eq!(l.buckets, 29);
    assert_eq!(l.epochs, 8);
    let o = l.op("OP_WRITE_SUPER").unwrap();
    assert_eq!((o.count, o.total), (14, 213_428_976));
    assert_eq!(o.bucket_sum(), 14);
    let per_epoch: Vec<u64> = o.epochs.iter().map(|e| e.iter().sum()).collect();
    assert_eq!(per_epoch, [2, 0, 1, 0, 1, 0, 9, 1]);
    assert_eq!(o.epochs[7][22], 1);
    assert!(profile_store::views::check(&p, 0).is_empty());
    // Written back it becomes a versioned profile that reads the same.
    let again = text::parse(&text::write(&p)).unwrap();
    assert_eq!(again, p);
}

/// (input, line, fragment of the message)
const MALFORMED: &[(&str, usize, &str)] = &[
    ("", 1, "empty input"),
    (
        "# fsprof-profile v3\n# clock=tsc\n",
        1,
        "unsupported profile version",
    ),
    ("# something else\n", 1, "not an fsprof profile"),
    (
        "# fsprof-profile v1\n# layer=fuse resolution=1 buckets=2 epochs=1\n",
        2,
        "global",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n",
        3,
        "expected a '# layer=' line",
    ),
    (
        "# fsprof-profile v1\n# clock=quartz\n# layer=a resolution=1 buckets=2 epochs=1\n",
        2,
        "clock must be",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=3 buckets=2 epochs=1\n",
        3,
        "resolution must be",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 epochs=1\n",
        3,
        "missing required key buckets",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2\n",
        3,
        "missing required key epochs",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a buckets=2 epochs=1\n",
        3,
        "missing required key resolution",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\nOP_READ 1 5\n 1 0 0\n",
        5,
        "expected 2 bucket counts, found 3",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=2\nOP_READ 1 5\n 1 0\nOP_WRITE 1 1\n",
        6,
        "expected 2 epoch lines, found 1",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\nOP_READ 1 5\n 1 0\nOP_READ 1 5\n-\n",
        6,
        "appears twice",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\nOP_read 1 5\n-\n",
        4,
        "bad operation name",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\nOP_READ 01 5\n-\n",
        4,
        "expected count as a decimal number",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\nOP_READ 1 18446744073709551616\n-\n",
        4,
        "does not fit in 64 bits",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\nOP_READ 1 5\n 1  0\n",
        5,
        "two spaces",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\nOP_READ 1 5\n 1 0 \n",
        5,
        "trailing space",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\nOP_READ 1 5\n 1\t0\n",
        5,
        "tab",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\nOP_READ 1 5\n 1 0",
        5,
        "does not end with a newline",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n\n# layer=a resolution=1 buckets=2 epochs=1\n",
        3,
        "blank line",
    ),
    (
        "# fsprof-profile v1\r\n# clock=tsc\r\n",
        1,
        "carriage return",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\n# layer=a resolution=1 buckets=2 epochs=1\n",
        4,
        "layer a given twice",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc clock=ns\n",
        2,
        "given twice",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\nOP_READ 1\n-\n",
        4,
        "expected 'OP_NAME count total'",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\nOP_READ 1 5\n 1 x\n",
        5,
        "expected a bucket count",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=0 epochs=1\n",
        3,
        "buckets must be",
    ),
    (
        "# fsprof-profile v1\n# invariant_tsc=maybe\n",
        2,
        "true or false",
    ),
    ("# fsprof-profile v1\n# Clock=tsc\n", 2, "bad key"),
    ("OP_READ 1 5\n", 2, "at least one epoch line"),
    ("OP_READ 1 5\n 1 0\n 1 0 0\n", 3, "expected 2 bucket counts"),
    ("OP_READ 1 5\n 1 0\n# clock=tsc\n", 3, "'#' line"),
    ("hello\n", 1, "not an fsprof profile"),
    // A text that is not a profile at all fails on its first line, whatever follows.
    (
        "Dear reader,\n\nthis is a letter.\n",
        1,
        "not an fsprof profile",
    ),
    (
        "OP_READ 1 5\n 1 0\n\u{0}\n",
        3,
        "unexpected control character 0x00",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\nOP_READ 1 5\n+\n",
        5,
        "expected 1 epoch lines, found 0",
    ),
    // One epoch line too many names the operation and the layer's epoch count (it was read as
    // an operation line with an empty name).
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\nOP_READ 1 5\n 1 0\n 0 1\n",
        6,
        "more than 1 epoch line for OP_READ (layer a has epochs=1)",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=2\nOP_READ 1 5\n-\n 1 0\n-\n",
        7,
        "more than 2 epoch lines for OP_READ",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\n-\n",
        4,
        "epoch line before any operation of layer a",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc layer=x\n# layer=a resolution=1 buckets=2 epochs=1\n",
        2,
        "key layer on a global line",
    ),
    // Version 2's additions are refused in version 1 (the writer would not write them back).
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=user resolution=1 buckets=2 epochs=1\nSYS_OPENAT 1 5\n 1 0\n",
        3,
        "SYS_OPENAT needs version 2",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=fuse@uid:0 resolution=1 buckets=2 epochs=1\n",
        3,
        "needs version 2",
    ),
    (
        "# fsprof-profile v1\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\n# section=x\n",
        4,
        "a section needs version 2",
    ),
    // Sections come last, and a section line needs its name first.
    (
        "# fsprof-profile v2\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\n# section=x\nab\n# layer=b resolution=1 buckets=2 epochs=1\n",
        6,
        "only sections follow",
    ),
    (
        "# fsprof-profile v2\n# clock=tsc\n# layer=a resolution=1 buckets=2 epochs=1\n# section=x section=y\n",
        4,
        "key section given twice",
    ),
    (
        "# fsprof-profile v2\n# clock=tsc\n# section=x\n",
        3,
        "expected a '# layer=",
    ),
];

#[test]
fn version_2_is_written_only_when_needed_and_sections_round_trip() {
    let mut l = Layer::new("fuse", Resolution::ONE);
    let mut op = OpProfile::new("OP_READ", 64, 1);
    op.count = 1;
    op.total = 10;
    op.epochs[0][3] = 1;
    l.ops.push(op);
    let mut p = Profile {
        clock: Some(ClockKind::Tsc),
        layers: vec![l],
        ..Profile::default()
    };
    assert_eq!(p.version(), 1);
    assert!(text::write(&p).starts_with("# fsprof-profile v1\n"));
    assert!(json::write(&p).contains("\"version\":1"));
    let mut sec = Section::new("files");
    sec.attrs.push(("n".into(), "2".into()));
    sec.lines.push("7 1200 /a b/c".into());
    sec.lines.push("9 300 -".into());
    p.sections.push(sec);
    // An unknown section is kept as it is, and its lines may hold single spaces.
    p.sections.push(Section::new("zz_unknown"));
    assert_eq!(p.version(), 2);
    let t = text::write(&p);
    assert!(t.starts_with("# fsprof-profile v2\n"), "{t}");
    assert!(
        t.ends_with("# section=files n=2\n7 1200 /a b/c\n9 300 -\n# section=zz_unknown\n"),
        "{t}"
    );
    let back = text::parse(&t).unwrap();
    assert_eq!(back, p);
    assert_eq!(text::write(&back), t);
    let j = json::write(&p);
    assert!(j.contains("\"version\":2"), "{j}");
    assert_eq!(json::parse(&j).unwrap(), p);
    // A JSON profile must say the version its content needs.
    let lying = j.replace("\"version\":2", "\"version\":1");
    assert!(
        json::parse(&lying)
            .unwrap_err()
            .to_string()
            .contains("content is version 2")
    );
}

#[test]
fn malformed_inputs_are_rejected_with_line_and_reason() {
    for (i, &(input, line, fragment)) in MALFORMED.iter().enumerate() {
        match text::parse(input) {
            Ok(p) => panic!("case {i} parsed: {input:?} -> {p:?}"),
            Err(e) => {
                assert_eq!(e.line, line, "case {i} {input:?}: {e}");
                assert!(e.message.contains(fragment), "case {i} {input:?}: {e}");
                // One line, with the line number.
                assert!(!e.to_string().contains('\n'));
                assert!(e.to_string().starts_with(&format!("line {line}: ")));
            }
        }
    }
}

#[test]
fn invalid_utf8_is_reported_with_its_line() {
    let e = text::parse_bytes(b"# fsprof-profile v1\n# clock=\xff\n").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.message.contains("UTF-8"));
}

#[test]
fn malformed_json_is_rejected() {
    let good = json::write(
        &text::parse(&std::fs::read_to_string(golden("two-layers.fsprof")).unwrap()).unwrap(),
    );
    for (bad, fragment) in [
        ("{", "JSON"),
        ("[]", "JSON"),
        (&good.replace("\"fsprof-profile\"", "\"other\""), "format"),
        (&good.replace("\"version\":1", "\"version\":2"), "version"),
        (
            &good.replace("\"resolution\":1", "\"resolution\":5"),
            "resolution",
        ),
        (
            &good.replace("\"OP_LOOKUP\"", "\"lookup\""),
            "bad operation name",
        ),
        (
            &good.replace("\"layers\":[", "\"layers\":[],\"x\":["),
            "JSON",
        ),
        // Extra keys the text form could not carry: given twice, or a global `layer` (which
        // would start the global line and make it a layer line).
        (
            &good.replace(
                "\"layers\":[",
                "\"extra\":{\"a\":\"1\",\"a\":\"2\"},\"layers\":[",
            ),
            "extra key 'a' given twice",
        ),
        (
            &good.replace("\"layers\":[", "\"extra\":{\"layer\":\"x\"},\"layers\":["),
            "extra key 'layer' is a standard key",
        ),
        (
            &good.replace("\"note\":\"syscalls\"", "\"note\":\"a\",\"note\":\"b\""),
            "extra key 'note' given twice",
        ),
        (
            &good.replace("\"note\":\"syscalls\"", "\"note\":\"two words\""),
            "bad extra key or value",
        ),
        (
            &good.replace("\"name\":\"lower\"", "\"name\":\"low er\""),
            "bad layer name",
        ),
    ] {
        let e = json::parse(bad).unwrap_err().to_string();
        assert!(e.contains(fragment), "{e}");
        assert!(!e.contains('\n'));
    }
}

#[test]
fn parser_never_panics_on_mutations() {
    let base = std::fs::read_to_string(golden("time-lapse.fsprof")).unwrap();
    let bytes = base.as_bytes();
    // Every single-byte deletion and a few substitutions: errors are fine, panics are not.
    for i in 0..bytes.len() {
        let mut v = bytes.to_vec();
        v.remove(i);
        let _ = text::parse_bytes(&v);
        for c in [b' ', b'\n', b'-', b'9', b'#', b'='] {
            let mut v = bytes.to_vec();
            v[i] = c;
            let _ = text::parse_bytes(&v);
        }
    }
}

fn arb_layer(name: String) -> impl Strategy<Value = Layer> {
    (
        0usize..4,
        1usize..4,
        any::<bool>(),
        prop::collection::vec(any::<bool>(), ops::STANDARD.len() + 4),
    )
        .prop_flat_map(move |(ri, epochs, reached, pick)| {
            let res = Resolution::new([1, 2, 4, 8][ri]).unwrap();
            let nb = res.buckets();
            let mut names: Vec<String> = ops::STANDARD.iter().map(|s| s.to_string()).collect();
            names.push("OP_ZZ_CUSTOM".into());
            names.push("OP_AA_CUSTOM".into());
            // Version 2: user-level calls.
            names.push("SYS_OPENAT".into());
            names.push("SYS_FREAD".into());
            let chosen: Vec<String> = names
                .into_iter()
                .zip(pick)
                .filter(|(_, p)| *p)
                .map(|(n, _)| n)
                .collect();
            let name = name.clone();
            prop::collection::vec(
                (
                    1u64..u64::MAX,
                    any::<u64>(),
                    prop::collection::vec(
                        prop::collection::vec(prop_oneof![3 => Just(0u64), 1 => any::<u64>()], nb),
                        epochs,
                    ),
                ),
                chosen.len(),
            )
            .prop_map(move |data| {
                let mut l = Layer::new(name.clone(), res);
                l.epochs = epochs;
                l.epoch_cycles = if epochs > 1 { 1 << 32 } else { 0 };
                l.max_epochs_reached = reached && epochs > 1;
                l.ops = chosen
                    .iter()
                    .zip(data)
                    .map(|(n, (count, total, epochs))| OpProfile {
                        name: n.clone(),
                        count,
                        total,
                        epochs,
                    })
                    .collect();
                l
            })
        })
}

fn arb_profile() -> impl Strategy<Value = Profile> {
    (
        prop::option::of(any::<u64>()),
        prop::option::of(prop_oneof![
            Just(ClockKind::Tsc),
            Just(ClockKind::Cntvct),
            Just(ClockKind::Ns)
        ]),
        prop::option::of(1u64..u64::MAX),
        prop::option::of(any::<bool>()),
        1usize..4,
        any::<bool>(),
        prop::collection::vec(arb_section(), 0..3),
    )
        .prop_flat_map(|(started, clock, hz, inv, nlayers, keyed, sections)| {
            let layers: Vec<_> = (0..nlayers)
                .map(|i| {
                    // Version 2: a per-key layer, its value escaped.
                    arb_layer(if keyed && i > 0 {
                        profile_store::keyed::name("layer0", "comm", format!("t {i}").as_bytes())
                    } else {
                        format!("layer{i}")
                    })
                })
                .collect();
            (Just((started, clock, hz, inv, sections)), layers)
        })
        .prop_map(|((started, clock, hz, inv, sections), layers)| Profile {
            started_unix_ns: started,
            clock,
            cycles_per_sec: hz,
            invariant_tsc: inv,
            extra: vec![("host".into(), "test-1".into())],
            layers,
            sections,
        })
}

fn arb_section() -> impl Strategy<Value = Section> {
    (
        "[a-z][a-z0-9_]{0,8}",
        prop::collection::vec(("[a-z][a-z_]{0,5}", "[!-<>-~]{1,6}"), 0..3),
        prop::collection::vec("[!-\"$-~][ -~]{0,30}[!-~]", 0..5),
    )
        .prop_map(|(name, attrs, lines)| {
            let mut attrs: Vec<(String, String)> = attrs;
            attrs.retain(|(k, _)| k != "section");
            attrs.sort();
            attrs.dedup_by(|a, b| a.0 == b.0);
            Section {
                name,
                attrs,
                lines: lines.into_iter().map(|l| l.replace("  ", " ")).collect(),
            }
        })
}

/// What the writer keeps: operations in listing order (all have count > 0 here).
fn normalized(mut p: Profile) -> Profile {
    for l in &mut p.layers {
        l.ops.sort_by(|a, b| ops::listing_order(&a.name, &b.name));
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn text_round_trip(p in arb_profile()) {
        let written = text::write(&p);
        prop_assert_eq!(written.starts_with("# fsprof-profile v2\n"), p.version() == 2);
        let parsed = text::parse(&written).map_err(|e| TestCaseError::fail(format!("{e}\n{written}")))?;
        prop_assert_eq!(&parsed, &normalized(p));
        prop_assert_eq!(text::write(&parsed), written);
    }

    #[test]
    fn json_round_trip(p in arb_profile()) {
        let written = json::write(&p);
        let parsed = json::parse(&written).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&parsed, &normalized(p));
        prop_assert_eq!(json::write(&parsed), written);
    }
}

#[test]
fn writers_omit_operations_never_called() {
    // Only operations with a non-zero count are written, in both formats
    // (docs/format.md#writer-order).
    let mut l = Layer::new("fuse", Resolution::ONE);
    l.ops.push(OpProfile::new("OP_READ", 64, 1));
    let mut w = OpProfile::new("OP_WRITE", 64, 1);
    w.count = 1;
    w.total = 20;
    w.epochs[0][4] = 1;
    l.ops.push(w);
    l.ops.push(OpProfile::new("OP_ZZ_NEVER", 64, 1));
    let p = Profile {
        clock: Some(ClockKind::Tsc),
        layers: vec![l],
        ..Profile::default()
    };
    let t = text::write(&p);
    assert!(!t.contains("OP_READ") && !t.contains("OP_ZZ_NEVER"), "{t}");
    assert!(t.contains("\nOP_WRITE 1 20\n"), "{t}");
    let j = json::write(&p);
    assert!(!j.contains("OP_READ") && !j.contains("OP_ZZ_NEVER"), "{j}");
    for parsed in [text::parse(&t).unwrap(), json::parse(&j).unwrap()] {
        let names: Vec<&str> = parsed.layers[0]
            .ops
            .iter()
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(names, ["OP_WRITE"]);
    }
}
