//! `fsprof plot`: well-formed figures with one mark per bucket or cell.

use crate::util::{fsprof, input, synthetic, write_profile};

fn rects<'a>(doc: &'a roxmltree::Document, class: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("class") == Some(class))
        .collect()
}

#[test]
fn plots_are_well_formed_svg_with_one_bar_per_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.svg");
    let out = path.to_str().unwrap();
    let sample = input("sample.fsprof");
    // Histogram of three operations: bars = non-empty buckets of those operations.
    fsprof(&["plot", &sample, "--top", "3", "-o", out]).ok();
    let svg = std::fs::read_to_string(&path).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let p = profile_store::parse_any(std::fs::read(&sample).unwrap().as_slice()).unwrap();
    let mut ops: Vec<_> = p.layers[0].ops.iter().collect();
    ops.sort_by_key(|o| std::cmp::Reverse(o.total));
    let want: usize = ops[..3]
        .iter()
        .map(|o| o.merged().iter().filter(|&&c| c > 0).count())
        .sum();
    assert_eq!(rects(&doc, "bar").len(), want);
    // Every bar has a tooltip naming its bucket.
    assert!(rects(&doc, "bar").iter().all(|r| {
        r.first_element_child()
            .is_some_and(|t| t.text().unwrap_or("").starts_with("bucket "))
    }));
    // Both x scales: bucket numbers and latencies.
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    assert!(texts.contains(&"bucket") && texts.contains(&"latency"));
    assert!(texts.iter().any(|t| t.ends_with("us")));

    // Latency figure of one operation.
    fsprof(&[
        "plot", &sample, "--kind", "latency", "--op", "write", "-o", out,
    ])
    .ok();
    let svg = std::fs::read_to_string(&path).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(rects(&doc, "bar").len(), 7);

    // Heat map: one cell per non-empty (epoch, bucket).
    fsprof(&[
        "plot",
        &input("timelapse.fsprof"),
        "--kind",
        "heatmap",
        "--op",
        "lookup",
        "-o",
        out,
    ])
    .ok();
    let svg = std::fs::read_to_string(&path).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let t = profile_store::parse_any(std::fs::read(input("timelapse.fsprof")).unwrap().as_slice())
        .unwrap();
    let cells = t.layers[0]
        .op("OP_LOOKUP")
        .unwrap()
        .epochs
        .iter()
        .flatten()
        .filter(|&&c| c > 0)
        .count();
    assert_eq!(rects(&doc, "cell").len(), cells);

    // Overlay: A's and B's bars.
    let b = input("sample-write-contention.fsprof");
    fsprof(&["plot", &sample, &b, "--op", "write", "-o", out]).ok();
    let svg = std::fs::read_to_string(&path).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(rects(&doc, "bar a").len(), 7);
    assert_eq!(rects(&doc, "bar b").len(), 10);

    // SVG on standard output.
    let svg = fsprof(&["plot", &input("original.fsprof"), "-o", "-"]).ok();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(rects(&doc, "bar").len(), 3);
}

#[test]
fn show_and_plot_label_a_bucket_alike() {
    // Bucket 18 at 1 GHz: 262us to 524us, mid-point 393us. show labelled it 262us, the plots
    // 393us. Both now use the lower bound and say so.
    let dir = tempfile::tempdir().unwrap();
    let p = write_profile(
        dir.path(),
        "b18.fsprof",
        &synthetic(&[("OP_READ", &[(18, 5)])]),
    );
    let shown = fsprof(&["show", &p, "--color", "never"]).ok();
    let row = shown
        .lines()
        .find(|l| l.trim_start().starts_with("18 "))
        .unwrap();
    assert!(row.contains("262us"), "{row}");
    assert!(shown.contains("labelled by their lower bound"), "{shown}");
    let svg = fsprof(&["plot", &p, "-o", "-"]).ok();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    assert!(texts.contains(&"262us"), "{texts:?}");
    assert!(!texts.contains(&"393us"), "{texts:?}");
    assert!(texts.iter().any(|t| t.contains("lower bound")), "{texts:?}");
}

#[test]
fn figures_are_written_by_extension_and_other_names_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sample = input("sample.fsprof");
    for (name, magic) in [
        ("f.svg", &b"<?xml"[..]),
        ("f.png", &b"\x89PNG\r\n\x1a\n"[..]),
        ("f.PDF", &b"%PDF-"[..]),
    ] {
        let path = dir.path().join(name);
        fsprof(&["plot", &sample, "--top", "2", "-o", path.to_str().unwrap()]).ok();
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.starts_with(magic), "{name}: {:?}", &bytes[..8]);
    }
    for name in ["f.jpg", "f"] {
        let path = dir.path().join(name);
        let r = fsprof(&["plot", &sample, "-o", path.to_str().unwrap()]);
        assert!(
            r.one_line_error(2)
                .contains("a figure is written as .svg, .png or .pdf"),
            "{}",
            r.stderr
        );
        assert!(!path.exists());
    }
}

#[test]
fn one_operation_figures_refuse_several_operations() {
    let sample = input("sample.fsprof");
    let other = input("sample-write-contention.fsprof");
    for args in [
        vec![
            "plot",
            &sample,
            "--kind",
            "heatmap",
            "--op",
            "read,lookup",
            "-o",
            "-",
        ],
        vec![
            "plot", &sample, &other, "--op", "read", "--op", "write", "-o", "-",
        ],
    ] {
        let r = fsprof(&args);
        assert!(
            r.one_line_error(2)
                .contains("draws one operation, 2 given with --op"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(r.stdout.is_empty());
    }
}

/// PNG and PDF are made by rsvg-convert; where it is missing (here: a PATH without it), the
/// error says in one line what to install, and nothing is written. Built with `--features
/// native-plot`, fsprof renders them itself and needs no converter.
#[test]
fn png_and_pdf_without_a_converter_say_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let sample = input("sample.fsprof");
    for name in ["f.png", "f.pdf"] {
        let path = dir.path().join(name);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_fsprof"))
            .args(["plot", &sample, "--top", "2", "-o", path.to_str().unwrap()])
            .env("PATH", dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        if cfg!(feature = "native-plot") {
            assert!(o.status.success(), "{err}");
            assert!(path.is_file());
            continue;
        }
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("rsvg-convert, which is not installed")
                && err.contains("`apt-get install librsvg2-bin`"),
            "{err}"
        );
        assert!(!path.exists());
    }
}
