//! `fsprof-postmark` end to end: against Debian's `postmark` (the reference: same transcripts,
//! same counts), error handling, JSON, concurrent clients and the client profile.
//!
//! The comparison tests need `/usr/bin/postmark`. Without it they skip with a message, except
//! under `CI=true`, where a missing reference is a failure (CI installs it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::{POSTMARK as OURS, Scratch, skip};

const REFERENCE: &str = "/usr/bin/postmark";

/// Whether the reference is installed; fails under `CI=true` when it is not.
fn have_reference() -> bool {
    if Path::new(REFERENCE).exists() {
        return true;
    }
    skip(&format!(
        "{REFERENCE} is not installed (apt-get install postmark); not comparing"
    ));
    false
}

/// Writes a command file: `set location DIR`, the body, `run`, `quit`.
fn command_file(scratch: &Scratch, name: &str, location: &Path, body: &str) -> PathBuf {
    let f = scratch.path().join(name);
    std::fs::write(
        &f,
        format!("set location {}\n{body}\nrun\nquit\n", location.display()),
    )
    .unwrap();
    f
}

fn run(program: &str, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let input = stdin.unwrap_or("").to_string();
    let mut pipe = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(input.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The verbose report's count lines (Files section) and data lines (Data section), without the
/// per-second rates, which depend on timing.
fn count_and_data_lines(report: &str) -> Vec<String> {
    let start = report
        .find("\nFiles:\n")
        .unwrap_or_else(|| panic!("no verbose report in:\n{report}"));
    report[start..]
        .lines()
        .filter(|l| l.starts_with('\t'))
        .take(10)
        .map(|l| l.split(" (").next().unwrap().trim().to_string())
        .collect()
}

/// Runs both programs on `body` in separate directories and compares their count and data
/// lines; returns ours.
fn compare_with_reference(body: &str) -> Option<Vec<String>> {
    if !have_reference() {
        return None;
    }
    let s = Scratch::new("cmp");
    let (ref_dir, our_dir) = (s.dir("reference"), s.dir("ours"));
    let ref_cfg = command_file(&s, "reference.pm", &ref_dir, body);
    let our_cfg = command_file(&s, "ours.pm", &our_dir, body);
    let r = run(REFERENCE, &[ref_cfg.to_str().unwrap()], None);
    let o = run(OURS, &["-q", our_cfg.to_str().unwrap()], None);
    assert!(
        o.status.success(),
        "fsprof-postmark failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (rl, ol) = (
        count_and_data_lines(&stdout(&r)),
        count_and_data_lines(&stdout(&o)),
    );
    assert_eq!(rl.len(), 10, "reference report: {rl:?}");
    assert_eq!(ol, rl, "count/data lines differ from {REFERENCE}");
    assert!(Scratch::entries(&our_dir).is_empty(), "files left behind");
    Some(ol)
}

#[test]
fn same_counts_and_bytes_as_postmark_unbuffered() {
    let lines = compare_with_reference(
        "set number 100\nset seed 7\nset transactions 400\nset size 300 20000\n\
         set buffering false",
    );
    if let Some(l) = lines {
        assert!(l[0].ends_with("created"), "{l:?}");
        assert!(l[8].ends_with("read"), "{l:?}");
        assert!(l[9].ends_with("written"), "{l:?}");
    }
}

#[test]
fn same_counts_and_bytes_as_postmark_buffered_with_subdirectories() {
    compare_with_reference(
        "set number 80\nset seed 1234\nset transactions 300\nset buffering true\n\
         set subdirectories 5\nset read 1000\nset write 3000",
    );
}

#[test]
fn same_counts_and_bytes_as_postmark_with_biases() {
    let lines = compare_with_reference(
        "set number 30\nset seed 99\nset transactions 100\nset bias read -1\n\
         set bias create 10",
    );
    if let Some(l) = lines {
        // Read/append locked out; every transaction tries to create (the table of 60 slots
        // fills up after 30).
        assert_eq!(l[3], "0 read");
        assert_eq!(l[4], "0 appended");
        assert_eq!(l[0], "60 created");
    }
}

/// Large enough that the 32-bit float byte sums drop units (above 2^24 bytes).
const BEYOND_FLOAT_PRECISION: &str = "set number 500\nset seed 42\nset transactions 3000\n\
    set size 5000 20000\nset buffering false\nset read 4096\nset write 4096";

#[test]
fn same_bytes_as_postmark_beyond_float_precision() {
    compare_with_reference(BEYOND_FLOAT_PRECISION);
}

/// The thirteen fields of a terse report line.
fn terse_fields(report: &str) -> Vec<String> {
    report
        .lines()
        .find(|l| l.split(' ').count() == 13)
        .unwrap_or_else(|| panic!("no terse line in {report}"))
        .split(' ')
        .map(str::to_string)
        .collect()
}

/// The verbose report prints megabytes with two decimals, which hides whether bytes are summed
/// in 32-bit floats (as Postmark does) or exactly. The terse report prints the byte sums
/// divided by the whole elapsed seconds (1 for any run under a second) to the unit, where the
/// difference shows: Postmark prints 21578828.00 bytes read here where exactly 21578855 were.
/// Our float sums, divided by Postmark's own elapsed time the way it divides, must print what
/// it printed; the exact sums must not (or this test could not tell them apart).
#[test]
fn terse_byte_sums_are_postmarks_float_sums() {
    if !have_reference() {
        return;
    }
    let s = Scratch::new("f32");
    let (rd, od) = (s.dir("r"), s.dir("o"));
    let terse = format!("{BEYOND_FLOAT_PRECISION}\nset report terse");
    let r = run(
        REFERENCE,
        &[command_file(&s, "r.pm", &rd, &terse).to_str().unwrap()],
        None,
    );
    let rt = terse_fields(&stdout(&r));
    // Ours on the same workload: exact and float sums from the JSON document.
    let v = json_run(
        &[],
        &format!(
            "set location {}\n{BEYOND_FLOAT_PRECISION}\nrun\n",
            od.display()
        ),
    );
    let ours = &v["runs"][0];
    let exact = |k: &str| ours[k].as_u64().unwrap();
    let float = |k: &str| ours[k].as_f64().unwrap() as f32;
    // Postmark: `(float)bytes / elapsed` printed with %.2f.
    let printed = |sum: f32, elapsed: &str| {
        let e = elapsed.parse::<i64>().unwrap() as f32;
        format!("{:.2}", (sum / e) as f64)
    };
    for (field, key) in [(11, "bytes_read"), (12, "bytes_written")] {
        let f32_key = format!("{key}_f32");
        assert_eq!(
            printed(float(&f32_key), &rt[0]),
            rt[field],
            "{key}: our float sum against {REFERENCE}'s terse line {rt:?}"
        );
        assert_ne!(
            printed(exact(key) as f32, &rt[0]),
            rt[field],
            "{key}: the exact sum prints the same; this configuration cannot tell them apart"
        );
    }
    // Our own terse report prints them the same way, with our elapsed time.
    let o = run(
        OURS,
        &[
            "-q",
            command_file(&s, "o.pm", &od, &terse).to_str().unwrap(),
        ],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ot = terse_fields(&stdout(&o));
    assert_eq!(ot[11], printed(float("bytes_read_f32"), &ot[0]), "{ot:?}");
    assert_eq!(
        ot[12],
        printed(float("bytes_written_f32"), &ot[0]),
        "{ot:?}"
    );
    if ot[0] == rt[0] {
        assert_eq!(ot[11..], rt[11..]);
    }
}

#[test]
fn terse_report_and_show_match_postmark_layout() {
    if !have_reference() {
        return;
    }
    let s = Scratch::new("terse");
    let body = "set number 20\nset transactions 40\nset report terse\nshow";
    let (rd, od) = (s.dir("r"), s.dir("o"));
    let r = stdout(&run(
        REFERENCE,
        &[command_file(&s, "r.pm", &rd, body).to_str().unwrap()],
        None,
    ));
    let o = stdout(&run(
        OURS,
        &[command_file(&s, "o.pm", &od, body).to_str().unwrap()],
        None,
    ));
    // `show` lines are identical but for the directory.
    let show = |t: &str, d: &Path| -> Vec<String> {
        t.lines()
            .skip_while(|l| !l.starts_with("Current configuration"))
            .take(12)
            .map(|l| l.replace(&d.display().to_string(), "DIR"))
            .collect()
    };
    assert_eq!(show(&o, &od), show(&r, &rd));
    // Terse: thirteen numbers, the two elapsed times whole seconds.
    let (tr, to) = (terse_fields(&r), terse_fields(&o));
    assert!(to[0].parse::<i64>().is_ok() && to[1].parse::<i64>().is_ok());
    for t in [&tr, &to] {
        assert!(t[2..].iter().all(|v| v.contains('.')));
    }
}

/// `text` with `dir` written DIR and every run of digits N: what stays is the line structure,
/// which must be Postmark's (the figures depend on timing).
fn structure(text: &str, dir: &Path) -> Vec<String> {
    let text = text.replace(&dir.display().to_string(), "DIR");
    text.split_inclusive('\n')
        .map(|l| {
            let mut out = String::new();
            let mut digits = false;
            for ch in l.chars() {
                if ch.is_ascii_digit() {
                    if !digits {
                        out.push('N');
                    }
                    digits = true;
                } else {
                    out.push(ch);
                    digits = false;
                }
            }
            out
        })
        .collect()
}

/// The same session, from a file and at the prompt, verbose and terse, with `show` and `help`:
/// our transcript has Postmark's lines, character for character but for the figures, and
/// nothing more (no tables of ours unless asked for).
#[test]
fn transcripts_have_postmarks_lines() {
    if !have_reference() {
        return;
    }
    let s = Scratch::new("transcript");
    let body = |dir: &Path| {
        format!(
            "set location {}\nset number 20\nset transactions 40\nset seed 7\n\
             set subdirectories 3\nrun\nset report terse\nrun\nshow\nhelp\nquit\n",
            dir.display()
        )
    };
    let (rd, od) = (s.dir("reference"), s.dir("ours"));
    let (rc, oc) = (s.path().join("r.pm"), s.path().join("o.pm"));
    std::fs::write(&rc, body(&rd)).unwrap();
    std::fs::write(&oc, body(&od)).unwrap();
    for from_file in [true, false] {
        let (r, o) = if from_file {
            (
                run(REFERENCE, &[rc.to_str().unwrap()], None),
                run(OURS, &[oc.to_str().unwrap()], None),
            )
        } else {
            (
                run(REFERENCE, &[], Some(&body(&rd))),
                run(OURS, &[], Some(&body(&od))),
            )
        };
        let (rt, ot) = (
            stdout(&r).replace(&rc.display().to_string(), "CFG"),
            stdout(&o).replace(&oc.display().to_string(), "CFG"),
        );
        let (rs, os) = (structure(&rt, &rd), structure(&ot, &od));
        assert_eq!(
            os, rs,
            "from a file: {from_file}\nours:\n{ot}\nreference:\n{rt}"
        );
        assert!(rs.iter().any(|l| l == "Time:\n"), "{rt}");
        assert!(rs.iter().any(|l| l.starts_with("N N N.N N.N")), "{rt}");
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            String::from_utf8_lossy(&r.stderr)
        );
        assert!(Scratch::entries(&od).is_empty());
    }
}

/// What Postmark answers to bad lines, byte for byte, on both streams: `Eh?` for what is not
/// a command (blank lines and comments included), its `Error:` lines for bad settings, and
/// the session goes on (the `show` near the end sees what was taken). At the prompt and in a
/// file alike (where `?` and `exit` are not aliases).
#[test]
fn bad_lines_are_answered_as_postmark_answers_them() {
    if !have_reference() {
        return;
    }
    let s = Scratch::new("eh");
    let cfg = s.path().join("bad.pm");
    std::fs::write(
        &cfg,
        "\n# comment\n  set number 5\nset  number 6\nset number 0\nset number abc\n\
         set number\nset number 7 8\nset number 9x\nset seed -1\nset bias read 11\n\
         set report short\nset colour blue\nset size 900 100\nset buffering x\n\
         set bias create 11\nset report x\nset location\nset location -/nope\nload\n\
         load /nonexistent/fsprof.pm\nhelp set b\nshow\n?\nexit\nset number 3\n",
    )
    .unwrap();
    let text = std::fs::read_to_string(&cfg).unwrap();
    let c = cfg.to_str().unwrap();
    for (args, input) in [(&[][..], Some(text.as_str())), (&[c][..], None)] {
        let (r, o) = (run(REFERENCE, args, input), run(OURS, args, input));
        assert_eq!(stdout(&o), stdout(&r), "standard output, {args:?}");
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            String::from_utf8_lossy(&r.stderr),
            "standard error, {args:?}"
        );
        assert_eq!(o.status.code(), Some(0));
        assert!(stdout(&o).contains("Eh?\n"));
        assert!(stdout(&o).contains("The base number of files is 9\n"));
    }
}

/// `--strict` ends the session at the first bad line, naming it (what a benchmark wants).
#[test]
fn strict_stops_at_a_bad_line_with_its_line() {
    let s = Scratch::new("bad");
    let f = s.path().join("bad.pm");
    std::fs::write(&f, "set number 10\n\nset frob 3\nrun\n").unwrap();
    let o = run(OURS, &["--strict", f.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("bad.pm:3: unknown setting 'set frob'"),
        "{err}"
    );
    // Without it, as Postmark: `Eh?`, and the run happens.
    let loc = s.dir("loc");
    std::fs::write(
        &f,
        format!(
            "set location {}\nset number 10\nset transactions 20\nset frob 3\nrun\nquit\n",
            loc.display()
        ),
    )
    .unwrap();
    let o = run(OURS, &[f.to_str().unwrap()], None);
    assert!(o.status.success());
    assert!(
        stdout(&o).contains("Eh?\nCreating files...Done\n"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn bad_numbers_are_errors_when_strict() {
    for (line, needle) in [
        ("set number 0", "number of files must be between"),
        ("set number 9x", "bad number of files '9x'"),
        ("set transactions ten", "bad number of transactions 'ten'"),
        ("set size 900 100", "below low file size"),
        ("set bias create 12", "bad bias '12'"),
    ] {
        let o = run(
            OURS,
            &["--strict"],
            Some(&format!("set seed 3\n{line}\nrun\n")),
        );
        assert_eq!(o.status.code(), Some(2), "{line}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("<stdin>:2: "), "{line}: {err}");
        assert!(err.contains(needle), "{line}: {err}");
    }
}

#[test]
fn missing_location_is_an_error_when_strict() {
    let o = run(
        OURS,
        &["--strict"],
        Some("set location /nonexistent/fsprof-pm\nrun\n"),
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("<stdin>:1: location '/nonexistent/fsprof-pm' does not exist"),
        "{err}"
    );
}

/// Files cannot be created in /proc, even by root: the failure names the path and errno and
/// the run stops with status 1.
#[test]
fn failed_file_operation_names_path_and_errno() {
    let o = run(
        OURS,
        &[],
        Some("set location /proc\nset number 5\nset transactions 10\nrun\n"),
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("<stdin>:4: run failed: open '/proc/1'"),
        "{err}"
    );
    assert!(err.contains("[errno "), "{err}");
}

#[test]
fn unset_location_is_the_current_directory() {
    let s = Scratch::new("cwd");
    let o = Command::new(OURS)
        .args(["-q"])
        .current_dir(s.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(
                b"set number 10\nset transactions 20\nset subdirectories 2\nrun\nshow\n",
            )?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(out.contains("\t\tCreation alone: 10 files"), "{out}");
    let cwd = std::fs::canonicalize(s.path()).unwrap();
    assert!(
        out.contains(&format!("Working directory: {}\n", cwd.display())),
        "{out}"
    );
    assert!(Scratch::entries(s.path()).is_empty());
}

fn json_run(args: &[&str], commands: &str) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let o = run(OURS, &all, Some(commands));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("stdout is one JSON document")
}

/// Every latency summary of a run, checked: the five percentiles present, at least 1 ns and
/// ordered p50 <= p90 <= p99 <= p99.9 <= max, the mean within them. Returns (op, count).
fn checked_latencies(run: &serde_json::Value) -> Vec<(String, u64)> {
    run["latency"]
        .as_array()
        .expect("latency array")
        .iter()
        .map(|l| {
            let op = l["op"].as_str().unwrap().to_string();
            let p: Vec<u64> = ["p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"]
                .iter()
                .map(|k| {
                    l[k].as_u64()
                        .unwrap_or_else(|| panic!("{op}: {k} missing in {l}"))
                })
                .collect();
            assert!(p[0] >= 1, "{op}: {l}");
            assert!(p.windows(2).all(|w| w[0] <= w[1]), "{op} not ordered: {l}");
            let mean = l["mean_ns"].as_f64().unwrap();
            assert!(mean >= 1.0 && mean <= p[4] as f64, "{op}: {l}");
            (op, l["count"].as_u64().unwrap())
        })
        .collect()
}

/// Latency summaries exist for exactly the calls the run made, as many as it made: with
/// 1-byte blocks every byte is one `read` or `write` call, plus the last (empty) one per file.
#[test]
fn latency_percentiles_are_ordered_and_counted() {
    let s = Scratch::new("latency");
    let loc = s.dir("loc");
    let cmds = format!(
        "set location {}\nset number 30\nset transactions 90\nset size 10 60\n\
         set read 1\nset write 1\nset subdirectories 3\nset buffering false\nset seed 11\nrun\n",
        loc.display()
    );
    let v = json_run(&[], &cmds);
    let r = &v["runs"][0];
    let n = |k: &str| r[k].as_u64().unwrap();
    let (created, read, appended, deleted) = (n("created"), n("read"), n("appended"), n("deleted"));
    assert!(read > 0 && appended > 0, "{r}");
    let mut expected = vec![
        ("OP_MKDIR", 3),
        ("OP_UNLINK", deleted),
        ("OP_RMDIR", 3),
        ("OP_OPEN", read + appended),
        ("OP_READ", n("bytes_read") + read),
        ("OP_WRITE", n("bytes_written") + created + appended),
        ("OP_RELEASE", created + read + appended),
        ("OP_CREATE", created),
        ("OP_PM_CREATE", created),
        ("OP_PM_READ", read),
        ("OP_PM_APPEND", appended),
        ("OP_PM_DELETE", deleted),
    ];
    let mut got = checked_latencies(r);
    got.sort();
    expected.sort();
    let expected: Vec<(String, u64)> = expected
        .into_iter()
        .map(|(o, c)| (o.to_string(), c))
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn json_output_and_clients_aggregate() {
    let s = Scratch::new("clients");
    let loc = s.dir("loc");
    let cmds = format!(
        "set location {}\nset number 40\nset transactions 120\nset seed 5\nrun\n",
        loc.display()
    );
    let one = json_run(&[], &cmds);
    let three = json_run(&["--clients", "3"], &cmds);
    let (a, b) = (&one["runs"][0], &three["runs"][0]);
    assert_eq!(a["clients"], 1);
    assert_eq!(b["clients"], 3);
    assert_eq!(a["complete"], true);
    // Same seed: each client repeats the single client's workload in its own directory.
    for k in [
        "created",
        "read",
        "appended",
        "deleted",
        "bytes_read",
        "bytes_written",
    ] {
        assert_eq!(b[k].as_u64().unwrap(), 3 * a[k].as_u64().unwrap(), "{k}");
    }
    assert_eq!(b["creation_alone"], 120);
    // Three clients made three times the calls of one.
    let (la, lb) = (checked_latencies(a), checked_latencies(b));
    let tripled: Vec<(String, u64)> = la.iter().map(|(o, c)| (o.clone(), 3 * c)).collect();
    assert_eq!(lb, tripled);
    let count = |op: &str| la.iter().find(|(o, _)| o == op).map(|(_, c)| *c);
    for (op, k) in [
        ("OP_PM_CREATE", "created"),
        ("OP_PM_DELETE", "deleted"),
        ("OP_PM_READ", "read"),
        ("OP_PM_APPEND", "appended"),
        ("OP_CREATE", "created"),
        ("OP_UNLINK", "deleted"),
    ] {
        assert_eq!(count(op), a[k].as_u64(), "{op}");
    }
    assert_eq!(
        count("OP_OPEN"),
        Some(a["read"].as_u64().unwrap() + a["appended"].as_u64().unwrap())
    );
    assert!(count("OP_READ").unwrap() >= a["read"].as_u64().unwrap());
    assert!(a["seconds"]["total"].as_f64().unwrap() > 0.0);
    // Client directories are removed again.
    assert!(
        Scratch::entries(&loc).is_empty(),
        "{:?}",
        Scratch::entries(&loc)
    );

    let distinct = json_run(&["--clients", "2", "--distinct-seeds"], &cmds);
    assert_eq!(distinct["runs"][0]["clients"], 2);
}

/// `--profile FILE`: text, or JSON when FILE ends in `.json`; either way the `client` layer
/// counts what the run did, and every operation's buckets add up to its count.
#[test]
fn profile_has_client_layer_matching_counts() {
    let s = Scratch::new("profile");
    let loc = s.dir("loc");
    let cmds = format!(
        "set location {}\nset number 30\nset transactions 90\nset buffering false\nrun\n",
        loc.display()
    );
    for name in ["client.fsprof", "client.fsprof.json"] {
        let prof = s.path().join(name);
        let v = json_run(&["--profile", prof.to_str().unwrap()], &cmds);
        let r = &v["runs"][0];
        let text = std::fs::read_to_string(&prof).unwrap();
        let p = if name.ends_with(".json") {
            let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(doc["format"], "fsprof-profile", "{name}");
            profile_store::json::parse(&text).unwrap()
        } else {
            assert!(text.starts_with("# fsprof-profile v1\n"));
            profile_store::text::parse(&text).unwrap()
        };
        let layer = p.layer("client").expect("client layer");
        let n = |k: &str| r[k].as_u64().unwrap();
        assert_eq!(layer.count("OP_PM_CREATE"), n("created"), "{name}");
        assert_eq!(layer.count("OP_PM_DELETE"), n("deleted"), "{name}");
        assert_eq!(layer.count("OP_PM_READ"), n("read"), "{name}");
        assert_eq!(layer.count("OP_PM_APPEND"), n("appended"), "{name}");
        assert_eq!(layer.count("OP_UNLINK"), n("deleted"), "{name}");
        assert_eq!(layer.count("OP_OPEN"), n("read") + n("appended"), "{name}");
        for op in &layer.ops {
            let sum: u64 = op.epochs.iter().flatten().sum();
            assert_eq!(sum, op.count, "{name}: {}", op.name);
        }
    }
}

/// `-c FILE` reads the commands from FILE (standard input, empty here, is not read); naming
/// a file twice is a usage error, a missing one a one-line error; both exit 2.
#[test]
fn config_option_reads_the_command_file() {
    let s = Scratch::new("dash-c");
    let loc = s.dir("loc");
    let f = command_file(&s, "c.pm", &loc, "set number 10\nset transactions 20");
    let f = f.to_str().unwrap();
    let o = run(OURS, &["-q", "-c", f], None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = stdout(&o);
    assert!(out.contains("\t\tCreation alone: 10 files"), "{out}");
    assert!(Scratch::entries(&loc).is_empty());

    let o = run(OURS, &["-c", f, f], None);
    assert_eq!(o.status.code(), Some(2));
    let o = run(OURS, &["--config", "/nonexistent/fsprof.pm"], None);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot read '/nonexistent/fsprof.pm'"),
        "{err}"
    );
}

#[test]
fn run_output_file_and_load() {
    let s = Scratch::new("load");
    let loc = s.dir("loc");
    let inner = s.path().join("inner.pm");
    std::fs::write(
        &inner,
        format!(
            "set location {}\nset number 10\nset transactions 20\n",
            loc.display()
        ),
    )
    .unwrap();
    let report = s.path().join("report.txt");
    let o = run(
        OURS,
        &["-q", "--latency"],
        Some(&format!(
            "load {}\nrun {}\nquit\n",
            inner.display(),
            report.display()
        )),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(text.contains("\t\tCreation alone: 10 files"), "{text}");
    assert!(text.contains("Wall time (1 client):"), "{text}");
    assert!(text.contains("Latency in microseconds"), "{text}");
    assert!(
        stdout(&o).contains(&format!(
            "Reading configuration from file '{}'\n",
            inner.display()
        )),
        "{}",
        stdout(&o)
    );

    std::fs::write(&inner, "set number 10\nset bias read 42\n").unwrap();
    let o = run(
        OURS,
        &["--strict"],
        Some(&format!("load {}\n", inner.display())),
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("inner.pm:2: bad bias '42'"), "{err}");
}

/// With every transaction deleting, the files run out: both programs say so and print no
/// report.
#[test]
fn out_of_files_like_postmark() {
    let s = Scratch::new("out");
    let body = "set number 10\nset transactions 50\nset bias create 0";
    let od = s.dir("o");
    let o = run(
        OURS,
        &[command_file(&s, "o.pm", &od, body).to_str().unwrap()],
        None,
    );
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(out.contains("out of files!"), "{out}");
    assert!(!out.contains("\nFiles:\n"), "{out}");
    assert!(Scratch::entries(&od).is_empty());
    if have_reference() {
        let rd = s.dir("r");
        let r = stdout(&run(
            REFERENCE,
            &[command_file(&s, "r.pm", &rd, body).to_str().unwrap()],
            None,
        ));
        assert!(r.contains("out of files!"), "{r}");
        assert!(!r.contains("\nFiles:\n"), "{r}");
    }
}
