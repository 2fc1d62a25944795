//! `fsprof show`: golden histograms and time-lapse matrices, widths, colour.

use crate::util::{
    assert_fits, fsprof, fsprof_without_no_color, golden, input, synthetic, write_profile,
};

#[test]
fn golden_show() {
    let out = fsprof(&["show", "sample.fsprof", "--color", "never"]).ok();
    golden("show.txt", &out);
    assert_fits(&out, 80);
}

#[test]
fn golden_show_lower_layer_ascii_top() {
    let out = fsprof(&[
        "show",
        "sample.fsprof",
        "--color",
        "never",
        "--layer",
        "lower",
        "--top",
        "2",
        "--ascii",
    ])
    .ok();
    golden("show-lower-top2-ascii.txt", &out);
    assert_fits(&out, 80);
}

#[test]
fn golden_show_epochs() {
    let out = fsprof(&["show", "timelapse.fsprof", "--color", "never", "--epochs"]).ok();
    golden("show-epochs.txt", &out);
    assert_fits(&out, 80);
}

#[test]
fn golden_show_original_tools_profile() {
    // The thesis's §5.8 sample: no header, 29 buckets, 8 epochs, no clock rate.
    let out = fsprof(&["show", "original.fsprof", "--color", "never"]).ok();
    golden("show-original.txt", &out);
    assert!(out.contains("clock rate unknown"));
    assert_fits(&out, 80);
}

#[test]
fn epochs_matrix_of_a_wide_resolution_8_profile_fits_the_width() {
    // Resolution 8, calls from bucket 0 to 511 in 3 epochs: one column per bucket would be
    // 512 columns. Columns merge 2, 4, 8... buckets (powers of two, so octaves stay whole)
    // until the matrix fits, and hold the sum of their buckets.
    let dir = tempfile::tempdir().unwrap();
    let mut l = profile_store::Layer::new("fuse", profile_store::Resolution::new(8).unwrap());
    l.epochs = 3;
    l.epoch_cycles = 1 << 32;
    let mut o = profile_store::OpProfile::new("OP_READ", 512, 3);
    for (e, b, n) in [
        (0, 0, 5),
        (0, 7, 3),
        (1, 8, 1),
        (1, 100, 40),
        (2, 511, 2),
        (2, 510, 7),
    ] {
        o.epochs[e][b] = n;
        o.count += n;
        o.total += n * profile_store::Resolution::new(8)
            .unwrap()
            .lowest(b)
            .unwrap();
    }
    l.ops.push(o);
    let mut p = synthetic(&[]);
    p.layers = vec![l];
    let path = write_profile(dir.path(), "r8.fsprof", &p);
    for (width, per) in [(80usize, 8usize), (120, 8), (60, 16), (40, 32)] {
        let w = width.to_string();
        let out = fsprof(&["show", &path, "--epochs", "--width", &w, "--color", "never"]).ok();
        let rows: Vec<&str> = out.lines().filter(|l| l.ends_with('|')).collect();
        assert_eq!(rows.len(), 3, "{out}");
        for row in &rows {
            assert_fits(row, width);
            let cells = &row[row.find('|').unwrap() + 1..row.len() - 1];
            assert_eq!(cells.chars().count(), 512 / per, "width {width}: {row}");
        }
        // Epoch 0: buckets 0 and 7 share the first column; epoch 1: 8 and 100 are apart.
        let first = |row: &str| row[row.find('|').unwrap() + 1..].chars().next().unwrap();
        assert_ne!(first(rows[0]), ' ');
        assert!(out.contains(&format!("a column is {per} buckets")), "{out}");
        if width >= 80 {
            assert_fits(&out, width);
        }
    }
    // Wide enough for one column per bucket: no merging, no note.
    let out = fsprof(&[
        "show", &path, "--epochs", "--width", "600", "--color", "never",
    ])
    .ok();
    assert!(!out.contains("a column is"));
    assert!(
        out.lines()
            .any(|l| l.ends_with('|') && l.len() == 14 + 512 + 1)
    );
}

#[test]
fn colour_only_when_asked_or_on_a_terminal() {
    // NO_COLOR unset: a pipe gets no colour because it is not a terminal, nothing else.
    let plain = fsprof_without_no_color(&["show", &input("sample.fsprof"), "--top", "1"]).ok();
    assert!(!plain.contains('\x1b'), "a pipe is not a terminal");
    let plain = fsprof_without_no_color(&[
        "show",
        &input("sample.fsprof"),
        "--top",
        "1",
        "--color",
        "auto",
    ])
    .ok();
    assert!(!plain.contains('\x1b'), "a pipe is not a terminal");
    let coloured = fsprof(&[
        "show",
        &input("sample.fsprof"),
        "--top",
        "1",
        "--color",
        "always",
    ])
    .ok();
    assert!(coloured.contains("\x1b[36m"));
}

/// Ten epochs of one second at 1 GHz, calls only in epochs 3, 4 and 5.
fn mostly_idle(dir: &std::path::Path) -> String {
    let mut p = crate::util::synthetic(&[]);
    let l = &mut p.layers[0];
    l.epochs = 10;
    l.epoch_cycles = 1_000_000_000;
    let mut o = profile_store::OpProfile::new("OP_READ", 64, 10);
    for (e, n) in [(3, 5), (4, 50), (5, 7)] {
        o.epochs[e][12] = n;
        o.count += n;
        o.total += n * 6144;
    }
    l.ops.push(o);
    crate::util::write_profile(dir, "idle.fsprof", &p)
}

#[test]
fn idle_epochs_are_trimmed_and_a_window_keeps_its_times() {
    let dir = tempfile::tempdir().unwrap();
    let p = mostly_idle(dir.path());
    let rows = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.ends_with('|') && l.contains(" |"))
            .map(|l| l.split('|').next().unwrap().trim().to_string())
            .collect()
    };
    let all = fsprof(&["show", &p, "--epochs", "--color", "never"]).ok();
    assert_eq!(rows(&all).len(), 10, "{all}");
    let trimmed = fsprof(&["show", &p, "--epochs", "--trim", "--color", "never"]).ok();
    assert_eq!(
        rows(&trimmed),
        ["3   3.0s", "4   4.0s", "5   5.0s"],
        "{trimmed}"
    );
    let window = fsprof(&[
        "show", &p, "--epochs", "--from", "4s", "--to", "5s", "--color", "never",
    ])
    .ok();
    assert_eq!(rows(&window), ["4   4.0s"], "{window}");
    // The histogram of the window counts the window's calls.
    let h = fsprof(&[
        "show", &p, "--from", "4s", "--to", "4500ms", "--color", "never",
    ])
    .ok();
    assert!(h.contains("OP_READ: 50 calls"), "{h}");
    // The plot's heat map has one row of cells per kept epoch.
    let svg = fsprof(&["plot", &p, "--kind", "heatmap", "--trim", "-o", "-"]).ok();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let cells = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("class") == Some("cell"))
        .count();
    assert_eq!(cells, 3);
    // Durations take a unit.
    let r = fsprof(&["show", &p, "--from", "4"]);
    assert!(r.one_line_error(2).contains("no unit"), "{}", r.stderr);
}
