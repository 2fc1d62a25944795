//! Load distribution (thesis §9.3): after a Postmark run on RAIF5 over three branches, every
//! operation with at least 1% of the calls has TOTOPS within 10% between any two branch
//! layers.

use std::io::Write;
use std::process::{Command, Stdio};
use test_support::{Transport, transports};

use crate::fixture::{Fixture, workspace_bin};

transports!(raif5_spreads_postmark_evenly_over_three_branches);

fn raif5_spreads_postmark_evenly_over_three_branches(t: Transport) {
    let Some(postmark) = workspace_bin("fsprof-postmark") else {
        return;
    };
    let Some(f) = Fixture::mounted(t, "postmark", 3, &["--level", "5"]) else {
        return;
    };
    f.reset();
    // The profile says which transport carried the requests.
    assert_eq!(f.profile().extra("transport"), Some(t.name()));
    // 20,000 transactions: with fewer, which files a run happens to read, and which names the
    // kernel happens to look up again, moved a branch's share of OP_LOOKUP or OP_READ by up to
    // 12% from run to run; here the largest TOTOPS stays under 5%.
    let mut child = Command::new(postmark)
        .current_dir(&f.mnt)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"set size 512 10240\nset number 500\nset seed 42\nset transactions 20000\n\
              set subdirectories 10\nset read 4096\nset write 4096\nset buffering false\n\
              set bias read 5\nset bias create 5\nrun\nquit\n",
        )
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Wait (bounded) until every open file is released and no call is in flight: the kernel
    // sends RELEASE after close(2) returns.
    let p = f.profile_when(|p| {
        let l = p.layer("fuse").unwrap();
        l.count("OP_RELEASE") == l.count("OP_OPEN") + l.count("OP_CREATE")
            && profile_store::views::check(p, 0).is_empty()
    });
    let layers: Vec<_> = (0..3)
        .map(|i| p.layer(&format!("branch{i}")).expect("branch layer"))
        .collect();
    let total: u64 = layers
        .iter()
        .flat_map(|l| l.ops.iter())
        .map(|o| o.count)
        .sum();
    let mut checked = Vec::new();
    let mut worst = (0.0f64, String::new());
    for op in layers
        .iter()
        .flat_map(|l| l.ops.iter().map(|o| o.name.clone()))
    {
        if checked.contains(&op) {
            continue;
        }
        let counts: Vec<u64> = layers.iter().map(|l| l.count(&op)).collect();
        let sum: u64 = counts.iter().sum();
        if sum * 100 < total {
            continue; // under 1% of the calls
        }
        for a in 0..3 {
            for b in 0..3 {
                let (n, m) = (counts[a] as f64, counts[b] as f64);
                let totops = (n - m).abs() / n * 100.0;
                assert!(
                    totops <= 10.0,
                    "{op}: branch{a} {n} vs branch{b} {m}: TOTOPS {totops:.1}"
                );
                if totops > worst.0 {
                    worst = (totops, op.clone());
                }
            }
        }
        checked.push(op);
    }
    assert!(checked.len() >= 5, "checked {checked:?}");
    // The same comparison with the tools: `raif split` the layers, `fsprof compare` two.
    let dir = f.root.join("layers");
    let out = f.raif(&[
        "split",
        &f.mnt.display().to_string(),
        &dir.display().to_string(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    if let Some(fsprof) = workspace_bin("fsprof") {
        let o = Command::new(fsprof)
            .arg("compare")
            .arg(dir.join("branch0.fsprof"))
            .arg(dir.join("branch2.fsprof"))
            .args(["--method", "totops"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success() && text.contains("OP_WRITE"), "{text}");
    }
    eprintln!(
        "balanced within 10%: {checked:?}; largest TOTOPS {:.1} ({})",
        worst.0, worst.1
    );
}

transports!(split_layers_keep_their_names_and_branch_layers_say_they_count_system_calls);

/// `raif split` used to rename every layer `layer`, so each report on a split file was headed
/// `layer layer`, and nothing said that branch layers count system calls (a create is two per
/// branch) rather than FUSE requests. The split files keep their layers' names and say what
/// branch layers count; the live profile says it too.
fn split_layers_keep_their_names_and_branch_layers_say_they_count_system_calls(t: Transport) {
    let Some(f) = Fixture::mounted(t, "split", 3, &["--level", "5"]) else {
        return;
    };
    f.reset();
    for i in 0..20 {
        std::fs::write(f.m(&format!("f{i}")), b"some bytes").unwrap();
    }
    let p = f.profile_when(|p| {
        let l = p.layer("fuse").unwrap();
        l.count("OP_RELEASE") == l.count("OP_CREATE")
    });
    assert_eq!(p.extra("branch_layers"), Some("system_calls"));
    let (fuse, b0) = (p.layer("fuse").unwrap(), p.layer("branch0").unwrap());
    assert_eq!(fuse.count("OP_CREATE"), 20);
    // The file and its record on each branch, and a stat on the file's first branch.
    assert!(b0.count("OP_CREATE") >= 40, "{}", b0.count("OP_CREATE"));
    let dir = f.root.join("layers");
    let out = f.raif(&[
        "split",
        &f.mnt.display().to_string(),
        &dir.display().to_string(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for name in ["fuse", "branch0", "branch1", "branch2"] {
        let text = std::fs::read_to_string(dir.join(format!("{name}.fsprof"))).unwrap();
        let header = text
            .lines()
            .find(|l| l.starts_with("# layer="))
            .expect("layer line");
        assert!(header.starts_with(&format!("# layer={name} ")), "{header}");
        assert_eq!(
            header.ends_with(" counts=system_calls"),
            name != "fuse",
            "{header}"
        );
    }
    if let Some(fsprof) = workspace_bin("fsprof") {
        let show = Command::new(&fsprof)
            .arg("show")
            .arg(dir.join("branch1.fsprof"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&show.stdout);
        assert!(show.status.success(), "{text}");
        assert!(text.contains("layer branch1:"), "{text}");
        assert!(!text.contains("layer layer"), "{text}");
        let cmp = Command::new(&fsprof)
            .arg("compare")
            .arg(dir.join("branch0.fsprof"))
            .arg(dir.join("branch2.fsprof"))
            .args(["--method", "totops"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&cmp.stdout);
        assert!(cmp.status.success(), "{text}");
        assert!(text.contains("branch0 vs branch2"), "{text}");
        assert!(!text.contains("layer layer"), "{text}");
    }
}

transports!(the_header_names_the_cache_preset_and_exact_counts_every_stat);

/// `--cache`: the profile names the preset; with `exact` every stat reaches the daemon, with
/// the default (`normal`) a repeated one is the kernel's.
fn the_header_names_the_cache_preset_and_exact_counts_every_stat(t: Transport) {
    for (args, name) in [(&[][..], "normal"), (&["--cache", "exact"][..], "exact")] {
        let Some(f) = Fixture::mounted(t, "cache", 2, args) else {
            return;
        };
        std::fs::write(f.m("f"), b"x").unwrap();
        std::fs::metadata(f.m("f")).unwrap();
        f.reset();
        for _ in 0..10 {
            std::fs::metadata(f.m("f")).unwrap();
        }
        // No call in flight: every stat has been answered.
        let p = f.profile_when(|p| profile_store::views::check(p, 0).is_empty());
        assert_eq!(p.extra("cache"), Some(name), "{t:?}");
        let getattrs = p.layer("fuse").unwrap().count("OP_GETATTR");
        if name == "exact" {
            assert!(getattrs >= 10, "{t:?}: {getattrs}");
        } else {
            assert_eq!(getattrs, 0, "{t:?}");
        }
    }
}
