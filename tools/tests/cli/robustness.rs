//! Whatever parses is shown, scored, plotted and exported without a panic.

use crate::util::input;

#[test]
fn mutated_profiles_never_panic() {
    use tools::units::{Buckets, Clock};
    use tools::{check, compare, diff, export, hist::Histogram, peaks, plot, show, summary};

    let base = std::fs::read_to_string(input("sample.fsprof")).unwrap();
    let reference = profile_store::parse_any(base.as_bytes()).unwrap();
    let tokens: Vec<&str> = base.split(' ').collect();
    let replacements = [
        "0",
        "1",
        "18446744073709551615",
        "9223372036854775808",
        "2",
        "resolution=8",
        "buckets=128",
        "epochs=2",
        "cycles_per_sec=1",
        "epoch_cycles=1",
        "max_epochs_reached=true",
    ];
    // A fixed linear congruential sequence: the same mutations on every run.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: usize| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) as usize % n
    };
    let mut parsed = 0;
    for _ in 0..400 {
        let mut t: Vec<String> = tokens.iter().map(|s| s.to_string()).collect();
        for _ in 0..1 + next(3) {
            let i = next(t.len());
            let keep_newline = t[i].ends_with('\n');
            let mut r = replacements[next(replacements.len())].to_string();
            if keep_newline {
                r.push('\n');
            }
            t[i] = r;
        }
        let text = t.join(" ");
        let Ok(p) = profile_store::parse_any(text.as_bytes()) else {
            continue;
        };
        parsed += 1;
        let clock = Clock(p.cycles_per_sec);
        let _ = check::check(&p, 0);
        let maxima = tools::maxima::Maxima::of(&p);
        for l in &p.layers {
            let ops: Vec<_> = l.ops.iter().collect();
            let style = show::ShowStyle::default();
            let _ = show::render(l, &ops, clock, false, &style, &maxima);
            let _ = show::render(l, &ops, clock, true, &style, &maxima);
            let _ = summary::render(
                &summary::summarize(l, clock, Default::default(), &maxima),
                summary::TableFormat::Json,
            );
            let _ = plot::figures::histogram(l, &ops, clock, "t", Default::default());
            let _ = plot::figures::latency(l, &ops, clock, "t", Default::default());
            let geo = Buckets::of(l);
            for o in &ops {
                let _ = plot::figures::heatmap(l, o, clock, "t", Default::default());
                let h = Histogram::of(o, geo);
                let _ = peaks::find(&h, 1.0);
            }
            if let Some(r) = reference
                .layer(&l.name)
                .filter(|r| r.resolution == l.resolution)
            {
                let report = diff::diff(r, l, &diff::DiffConfig::default());
                let mut s = String::new();
                diff::render(&report, clock, 10, &mut s);
                for o in &ops {
                    let other = r.op(&o.name).map_or_else(
                        || Histogram::empty(Buckets::of(r)),
                        |x| Histogram::of(x, Buckets::of(r)),
                    );
                    let pair = tools::pairs::Pair::new(other, Histogram::of(o, geo));
                    for m in compare::Method::ALL {
                        let d = compare::score(m, &pair, &compare::GroupConfig::default()).d;
                        assert!((0.0..=100.0).contains(&d), "{m}: {d}");
                    }
                }
            }
        }
        for f in [
            export::ExportFormat::Text,
            export::ExportFormat::Json,
            export::ExportFormat::Csv,
            export::ExportFormat::Prometheus,
        ] {
            let _ = export::export(&p, f, "x");
        }
    }
    assert!(
        parsed > 100,
        "only {parsed} mutations parsed: the test exercises too little"
    );
}
