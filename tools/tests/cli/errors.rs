//! Errors of every command: one line, non-zero, never a panic.

use crate::util::{fsprof, fsprof_with_input, input};

/// Malformed inputs and the text their one-line error must contain.
fn malformed(dir: &std::path::Path) -> Vec<(String, &'static str)> {
    let mut v = Vec::new();
    let mut put = |name: &str, body: &[u8], expect: &'static str| {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        v.push((p.to_str().unwrap().to_string(), expect));
    };
    let good = std::fs::read_to_string(input("sample.fsprof")).unwrap();
    // A bucket line with one number too few, on line 5.
    let mut lines: Vec<String> = good.lines().map(str::to_string).collect();
    lines[4] = lines[4].rsplit_once(' ').unwrap().0.to_string();
    put(
        "short.fsprof",
        (lines.join("\n") + "\n").as_bytes(),
        "line 5",
    );
    put("empty.fsprof", b"", "line 1");
    put("garbage.fsprof", b"\x00\xff\xfe binary\n", "line 1");
    put(
        "version.fsprof",
        b"# fsprof-profile v9\n# clock=tsc\n",
        "unsupported profile version",
    );
    put("brace.json", b"{", "line 1");
    let json = fsprof(&["export", &input("sample.fsprof"), "--format", "json"]).ok();
    put("cut.json", &json.as_bytes()[..json.len() / 2], "JSON");
    put(
        "wrongfmt.json",
        br#"{"format":"other","version":1,"layers":[]}"#,
        "format",
    );
    v.push((
        dir.join("missing.fsprof").to_str().unwrap().to_string(),
        "No such file",
    ));
    let empty_dir = dir.join("not-a-mount");
    std::fs::create_dir(&empty_dir).unwrap();
    v.push((
        empty_dir.to_str().unwrap().to_string(),
        "a directory, but not an fsprof-fuse or raif mount",
    ));
    v
}

#[test]
fn every_subcommand_reports_malformed_input_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = input("sample.fsprof");
    let svg = dir.path().join("out.svg");
    let svg = svg.to_str().unwrap();
    for (bad, expect) in malformed(dir.path()) {
        let cases: Vec<Vec<&str>> = vec![
            vec!["show", &bad],
            vec!["show", &bad, "--epochs"],
            vec!["summary", &bad],
            vec!["check", &bad],
            vec!["peaks", &bad],
            vec!["compare", &bad, &good],
            vec!["compare", &good, &bad],
            vec!["diff", &bad, &good],
            vec!["diff", &good, &bad],
            vec!["plot", &bad, "-o", svg],
            vec!["plot", &good, &bad, "-o", svg],
            vec!["export", &bad, "--format", "json"],
        ];
        for args in cases {
            let r = fsprof(&args);
            let line = r.one_line_error(2);
            assert!(line.contains(bad.as_str()), "{args:?}: {line}");
            assert!(line.contains(expect), "{args:?}: want {expect:?} in {line}");
            assert!(r.stdout.is_empty(), "{args:?}: {}", r.stdout);
        }
    }
    // Standard input is named '-'.
    let r = fsprof_with_input(&["show", "-"], b"OP_READ 1 2\n 0 x\n");
    assert_eq!(
        r.one_line_error(2),
        "fsprof: -: line 2: expected a bucket count as a decimal number, found 'x'"
    );
}

#[test]
fn usage_errors_are_one_line() {
    let p = input("sample.fsprof");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["show", &p, "--op", "OP_NOPE"], "--op OP_NOPE"),
        (vec!["show", &p, "--layer", "nope"], "--layer nope"),
        (
            vec!["compare", &p, &p, "--method", "nope"],
            "unknown method",
        ),
        (vec!["summary", &p, "--format", "xml"], "unknown format"),
        (
            vec!["why", &p, "read", "--format", "csv"],
            "fsprof why writes text or json",
        ),
        (
            vec!["plot", &p, "--kind", "overlay", "-o", "/tmp/x.svg"],
            "needs two profiles",
        ),
        (vec!["diff", &p, &p, "--threshold", "300"], "--threshold"),
        (vec!["peaks"], "required"),
        (vec!["nope"], "unrecognized subcommand"),
        (vec!["show", &p, "--bogus"], "unexpected argument"),
        // A clock rate of 0 would divide every latency by zero.
        (
            vec!["show", &p, "--cycles-per-sec", "0"],
            "--cycles-per-sec",
        ),
        (
            vec![
                "export",
                &p,
                "--format",
                "prometheus",
                "--cycles-per-sec",
                "0",
            ],
            "0 is not in 1..",
        ),
    ];
    for (args, expect) in cases {
        let r = fsprof(&args);
        let line = r.one_line_error(2);
        assert!(line.contains(expect), "{args:?}: {line}");
    }
    // Writing where one cannot.
    let r = fsprof(&["plot", &p, "-o", "/nonexistent-dir/x.svg"]);
    assert!(r.one_line_error(2).contains("/nonexistent-dir/x.svg"));
}

#[test]
fn errors_naming_a_newline_stay_on_one_line() {
    let p = input("sample.fsprof");
    // An operation name with a newline in it.
    let r = fsprof(&["show", &p, "--op", "a\nb"]);
    assert!(
        r.one_line_error(2).contains("--op OP_A\\nB"),
        "{}",
        r.stderr
    );
    // A file name with a newline: missing, then present but malformed, then as an output.
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("two\nlines.fsprof");
    let odd_s = odd.to_str().unwrap();
    let r = fsprof(&["summary", odd_s]);
    assert!(
        r.one_line_error(2).contains("two\\nlines.fsprof"),
        "{}",
        r.stderr
    );
    std::fs::write(&odd, "OP_READ 1 2\n 0 x\n").unwrap();
    for args in [
        vec!["summary", odd_s],
        vec!["diff", odd_s, &p],
        vec!["check", odd_s],
    ] {
        let r = fsprof(&args);
        assert!(
            r.one_line_error(2).contains("two\\nlines.fsprof: line 2"),
            "{}",
            r.stderr
        );
    }
    let out = dir.path().join("fig\nure.svg");
    let r = fsprof(&[
        "plot",
        &p,
        "-o",
        &format!("{}/no-such-dir/x\ny.svg", dir.path().display()),
    ]);
    assert!(r.one_line_error(2).contains("x\\ny.svg"), "{}", r.stderr);
    fsprof(&["plot", &p, "-o", out.to_str().unwrap()]).ok();
    assert!(out.exists());
}

#[test]
fn usage_errors_point_to_the_help_of_their_subcommand() {
    let p = input("sample.fsprof");
    for (args, help) in [
        (vec!["show", &p, "--bogus"], "(see fsprof show --help)"),
        (vec!["peaks"], "(see fsprof peaks --help)"),
        (
            vec!["--color", "never", "diff", &p, &p, "--top", "x"],
            "(see fsprof diff --help)",
        ),
        (vec!["nope"], "(see fsprof --help)"),
    ] {
        let r = fsprof(&args);
        let line = r.one_line_error(2);
        assert!(line.ends_with(help), "{args:?}: {line}");
    }
}

#[test]
fn a_text_that_is_no_profile_says_so_on_its_first_line() {
    let dir = tempfile::tempdir().unwrap();
    let letter = dir.path().join("letter.txt");
    // Fourteen lines of prose and a blank line: this said 'line 15: blank line'.
    let mut text = String::new();
    for i in 0..14 {
        text.push_str(&format!("OPening line {i} of a letter\n"));
    }
    text.push('\n');
    std::fs::write(&letter, text).unwrap();
    let l = letter.to_str().unwrap();
    let r = fsprof(&["show", l]);
    assert!(
        r.one_line_error(2)
            .starts_with(&format!("fsprof: {l}: line 1: not an fsprof profile")),
        "{}",
        r.stderr
    );
}

#[test]
fn slow_given_a_profile_says_what_it_is_or_lists_its_slowest_requests() {
    let dir = tempfile::tempdir().unwrap();
    // A profile with no slowest requests: one line, no header before it (it printed the
    // header, then 'line 1: expected value at line 1 column 1').
    let p = input("sample.fsprof");
    let r = fsprof(&["slow", &p]);
    let line = r.one_line_error(2);
    assert!(
        line.contains("a profile, not slow records") && line.contains("--slowest"),
        "{line}"
    );
    assert_eq!(r.stdout, "");
    // A file of something else.
    let letter = dir.path().join("letter.txt");
    std::fs::write(&letter, "Dear reader,\n").unwrap();
    let r = fsprof(&["slow", letter.to_str().unwrap()]);
    assert!(
        r.one_line_error(2).contains("not slow records"),
        "{}",
        r.stderr
    );
    // A profile with a slowest section: its requests, slowest first.
    let mut text = std::fs::read_to_string(&p).unwrap();
    let rec = |seq: u32, ns: u64, path: &str| {
        format!(
            r#"{{"seq":{seq},"time_unix_ns":0,"op":"OP_FSYNC","latency_ns":{ns},"errno":0,"ino":9,"path":"{path}","pid":7,"tgid":7,"comm":"sqlite3","uid":0,"offset":null,"size":null,"inner":[{{"call":"fdatasync","latency_ns":{ns}}}],"inner_dropped":0}}"#
        )
    };
    if !text.starts_with("# fsprof-profile v2") {
        text = text.replacen("# fsprof-profile v1", "# fsprof-profile v2", 1);
    }
    text.push_str("# section=slowest n=2\n");
    text.push_str(&(rec(2, 9_000_000, "/db-journal") + "\n"));
    text.push_str(&(rec(1, 3_000_000, "/db") + "\n"));
    let with = dir.path().join("with.fsprof");
    std::fs::write(&with, text).unwrap();
    let out = fsprof(&["slow", with.to_str().unwrap()]).ok();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].starts_with("TIME(UTC)"), "{out}");
    assert!(
        lines[1].contains("sqlite3") && lines[1].contains("/db-journal"),
        "{out}"
    );
    assert!(lines[1].contains("fdatasync"), "{out}");
    assert!(lines[2].contains(" /db  [fdatasync "), "{out}");
}

/// A path that is not there is named once in the error, whatever the command ("fsprof:
/// work/nonexistent: directory work/nonexistent: No such file or directory" named it twice),
/// with no `(os error 2)`; and `slow` on a directory that is no mount says so, as every other
/// command does, rather than asking whether the slow log is on.
#[test]
fn a_missing_path_is_named_once_and_a_directory_that_is_no_mount_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("work/nonexistent");
    let m = p.to_str().unwrap();
    let out = dir.path().join("x.svg");
    let o = out.to_str().unwrap();
    for args in [
        vec!["profile", m],
        vec!["show", m],
        vec!["summary", m],
        vec!["peaks", m],
        vec!["check", m],
        vec!["why", m, "read"],
        vec!["slow", m],
        vec!["files", m],
        vec!["stack", m],
        vec!["report", m, "-o", o],
        vec!["export", m, "--format", "json"],
        vec!["plot", m, "-o", o],
        vec!["top", "-b", "-n", "1", m],
        vec!["diff", m, m],
        vec!["trace", "show", m],
        vec!["trace", "stats", m],
        vec!["replay", "--in", o, m],
    ] {
        let r = fsprof(&args);
        let e = r.one_line_error(2);
        assert_eq!(e.matches("nonexistent").count(), 1, "{args:?}: {e}");
        assert!(e.contains("No such file or directory"), "{args:?}: {e}");
        assert!(!e.contains("os error"), "{args:?}: {e}");
    }
    // A directory, but no mount of fsprof-fuse or raif: slow says what top and show say.
    let plain = dir.path().to_str().unwrap();
    for args in [
        vec!["slow", plain],
        vec!["show", plain],
        vec!["top", "-b", "-n", "1", plain],
    ] {
        let e = fsprof(&args).one_line_error(2).to_string();
        assert!(
            e.contains("a directory, but not an fsprof-fuse or raif mount (it has no .fsprof)"),
            "{args:?}: {e}"
        );
        assert!(!e.contains("slow log"), "{args:?}: {e}");
    }
}
