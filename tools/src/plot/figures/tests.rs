//! Tests of the figures: well-formed SVG, axes, labels and marks.

use super::*;
use profile_store::Resolution;

fn layer() -> Layer {
    let mut l = Layer::new("fuse", Resolution::ONE);
    let mut o = OpProfile::new("OP_READ", 64, 3);
    o.epochs[0][10] = 100;
    o.epochs[1][10] = 50;
    o.epochs[1][20] = 3;
    o.epochs[2][21] = 1;
    o.count = 154;
    o.total = 154 * 2000;
    l.ops.push(o);
    l.epoch_cycles = 1 << 32;
    l.epochs = 3;
    l
}

fn count(svg: &str, class: &str) -> usize {
    svg.matches(&format!("<rect class=\"{class}\"")).count()
}

#[test]
fn one_bar_per_bucket_and_one_cell_per_non_empty_cell() {
    let l = layer();
    let ops: Vec<&OpProfile> = l.ops.iter().collect();
    let clock = Clock(Some(2_000_000_000));
    assert_eq!(
        count(&histogram(&l, &ops, clock, "t", Shares::default()), "bar"),
        3
    );
    assert_eq!(
        count(&latency(&l, &ops, clock, "t", Shares::default()), "bar"),
        3
    );
    assert_eq!(
        count(&heatmap(&l, ops[0], clock, "t", Shares::default()), "cell"),
        4
    );
    let o = overlay(&l, Some(ops[0]), "A", &l, None, "B", Clock(None), "t");
    assert_eq!(count(&o, "bar a"), 3);
    assert_eq!(count(&o, "bar b"), 0);
}

#[test]
fn latency_figure_past_f64_bounds_has_no_nan() {
    let l = crate::testutil::wide_read_layer(0, &[(1000, 1), (1022, 1), (1050, 1)]);
    let ops: Vec<&OpProfile> = l.ops.iter().collect();
    for clock in [Clock(None), Clock(Some(1_000_000_000))] {
        for svg in [
            latency(&l, &ops, clock, "t", Shares::default()),
            histogram(&l, &ops, clock, "t", Shares::default()),
        ] {
            assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
            roxmltree::Document::parse(&svg).unwrap();
        }
        // Bars for the two buckets with finite estimates.
        assert_eq!(
            count(&latency(&l, &ops, clock, "t", Shares::default()), "bar"),
            2
        );
    }
}

#[test]
fn axis_widens_small_ranges() {
    let geo = Buckets {
        resolution: Resolution::ONE,
        len: 64,
    };
    let a = XAxis::new([(10, 10)].into_iter(), geo, Clock(None));
    assert_eq!(a.slots(), MIN_SLOTS);
    assert!(a.lo <= 9 && a.hi >= 11);
    let a = XAxis::new([(0, 0)].into_iter(), geo, Clock(None));
    assert_eq!((a.lo, a.slots()), (0, MIN_SLOTS));
    let a = XAxis::new([(63, 63)].into_iter(), geo, Clock(None));
    assert_eq!((a.hi, a.slots()), (63, MIN_SLOTS));
}

/// The labels (x, text) and tick positions of the axis row whose labels sit at `y_text`
/// and whose ticks start at `y_line`, and the row name's right end.
fn row(svg: &str, y_text: f64, y_line: f64) -> (Vec<(f64, String)>, Vec<f64>, f64) {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let num = |n: roxmltree::Node, a: &str| n.attribute(a).unwrap().parse::<f64>().unwrap();
    let mut labels = Vec::new();
    let mut name_end = f64::NAN;
    for n in doc.descendants().filter(|n| n.has_tag_name("text")) {
        if (num(n, "y") - y_text).abs() > 0.01 {
            continue;
        }
        match n.attribute("class") {
            Some("label") => labels.push((num(n, "x"), n.text().unwrap().to_string())),
            Some("rowlabel") => name_end = num(n, "x"),
            _ => {}
        }
    }
    let ticks = doc
        .descendants()
        .filter(|n| n.has_tag_name("line") && n.attribute("class") == Some("tick"))
        .filter(|n| (num(*n, "y1") - y_line).abs() < 0.01)
        .map(|n| num(n, "x1"))
        .collect();
    (labels, ticks, name_end)
}

#[test]
fn wide_axes_space_their_labels_and_thin_their_ticks() {
    // Resolution 8 over every bucket (0-511): 1.3 pixels a bucket. Labels at least
    // LABEL_GAP apart (by their estimated widths), ticks at least TICK_GAP apart, and the
    // row's name clear of the first label. Resolution 1 over a few buckets keeps a label
    // per bucket.
    let cases = [
        (8u32, 0usize, 511usize, Clock(Some(2_000_000_000))),
        (8, 0, 511, Clock(None)),
        (4, 0, 255, Clock(Some(2_893_421_000))),
        (2, 20, 90, Clock(Some(1_000_000_000))),
        (1, 9, 27, Clock(Some(2_893_421_000))),
    ];
    for (r, lo, hi, clock) in cases {
        let geo = Buckets {
            resolution: Resolution::new(r).unwrap(),
            len: 64 * r as usize,
        };
        let axis = XAxis::new([(lo, hi)].into_iter(), geo, clock);
        let mut svg = Svg::new(WIDTH, 400.0);
        axis.draw_top(&mut svg, 100.0);
        axis.draw_bottom(&mut svg, 300.0);
        let doc = svg.finish("t", CSS);
        for (y_text, y_line) in [(92.0, 100.0), (317.0, 300.0)] {
            let (labels, ticks, name_end) = row(&doc, y_text, y_line);
            assert!(labels.len() >= 2, "r={r}: {labels:?}");
            for w in labels.windows(2) {
                let right = w[0].0 + text_width(&w[0].1) / 2.0;
                let left = w[1].0 - text_width(&w[1].1) / 2.0;
                // (Coordinates are written with one decimal.)
                assert!(left - right >= LABEL_GAP - 0.1, "r={r} y={y_text}: {w:?}");
            }
            let first_left = labels[0].0 - text_width(&labels[0].1) / 2.0;
            assert!(name_end <= first_left - LABEL_GAP + 0.1, "r={r} y={y_text}");
            for w in ticks.windows(2) {
                assert!(w[1] - w[0] >= TICK_GAP.min(axis.slot_w()) - 0.1, "r={r}");
            }
            if axis.slot_w() >= TICK_GAP {
                assert_eq!(ticks.len(), axis.slots(), "r={r}: a tick per bucket");
            }
        }
        if r == 8 {
            // Labels on octave boundaries.
            let (labels, _, _) = row(&doc, 92.0, 100.0);
            assert!(
                labels
                    .iter()
                    .all(|(_, t)| t.parse::<usize>().unwrap() % 8 == 0)
            );
        }
        if r == 1 {
            let (labels, _, _) = row(&doc, 92.0, 100.0);
            assert_eq!(labels.len(), axis.slots(), "every bucket numbered");
        }
    }
}

#[test]
fn helpers() {
    assert_eq!(decade(0), "1");
    assert_eq!(decade(4), "10k");
    assert_eq!(decade(6), "1M");
    assert_eq!(nice_step(1000.0), 500.0);
    assert_eq!(nice_step(7.0), 2.0);
    assert_eq!(color(0.0), "#440154");
    assert_eq!(color(1.0), "#fde725");
    assert_eq!(heat(1, 100), 0.0);
}

#[test]
fn peaks_are_marked_and_background_operations_keep_out_of_the_shares() {
    // OP_READ has two peaks (buckets 10 and 20-21): two bands.
    let mut l = layer();
    let ops: Vec<&OpProfile> = l.ops.iter().collect();
    let clock = Clock(Some(2_000_000_000));
    let svg = histogram_with_peaks(&l, &ops, clock, "t", Shares::default());
    assert_eq!(count(&svg, "peak"), 2);
    assert!(svg.contains(">peak 2<"));
    roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(
        count(&histogram(&l, &ops, clock, "t", Shares::default()), "peak"),
        0
    );
    // A FORGET holding most of the time: left out of the shares unless counted in.
    let mut f = OpProfile::new("OP_FORGET", 64, 3);
    f.epochs[0][25] = 10;
    f.count = 10;
    f.total = 10 << 26;
    l.ops.push(f);
    let read = &l.ops[0];
    assert!(
        op_title(read, &l, clock, Shares::default())
            .starts_with("OP_READ: 154 calls, 100.0% of latency, mean ")
    );
    let forget = &l.ops[1];
    assert!(
        op_title(forget, &l, clock, Shares::default()).contains("background, not in the shares")
    );
    let with = Shares {
        with_background: true,
    };
    assert!(op_title(forget, &l, clock, with).contains("100.0% of latency"));
    assert!(op_title(read, &l, clock, with).contains("<0.1% of latency"));
}
