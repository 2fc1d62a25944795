//! `fsprof profile --report` and `fsprof report`: the findings of real workloads on real
//! mounts, and the page rendered by a real browser (Debian's chromium, headless).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use test_support::fuse_available;

use crate::profile::{Scene, output};

/// Debian's chromium, or a visible skip (a failure under `CI=true`, where .ci/run installs it).
fn chromium() -> Option<&'static str> {
    let found = Command::new("chromium")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return Some("chromium");
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "chromium is missing (CI must install it)"
    );
    eprintln!("SKIP: chromium is missing");
    None
}

/// The DOM of `page` after headless chromium loaded it and ran its script (`--dump-dom`), with
/// no network and a fresh profile directory; killed after 60 s.
fn rendered(browser: &str, page: &Path, scratch: &Path) -> String {
    let profile = tempfile::tempdir_in(scratch).unwrap();
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).unwrap();
        s
    });
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium ran for 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

/// The number in `data-NAME="N"` on the rendered page's body.
fn body_count(dom: &str, name: &str) -> usize {
    let key = format!("data-{name}=\"");
    let at = dom
        .find(&key)
        .unwrap_or_else(|| panic!("no {key} in {dom}"))
        + key.len();
    dom[at..].split('"').next().unwrap().parse().unwrap()
}

/// The rows of the table `id` on the rendered page.
fn table_rows<'d>(dom: &'d str, id: &str) -> Vec<&'d str> {
    let start = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no table {id}"));
    let table = &dom[start..];
    let body = &table[table.find("<tbody>").unwrap()..table.find("</tbody>").unwrap()];
    body.split("<tr>").skip(1).collect()
}

/// The lines of the findings' slowest requests.
fn slowest(out: &str) -> Vec<&str> {
    out.lines()
        .skip_while(|l| !l.starts_with("  slowest requests:"))
        .skip(1)
        .take_while(|l| l.starts_with("    "))
        .collect()
}

#[test]
fn sqlite_inserts_name_the_fsync_peak_fdatasync_and_the_journal() {
    if !fuse_available() {
        return;
    }
    let Some(browser) = chromium() else { return };
    let s = Scene::new();
    let page = s.root.path().join("r.html");
    let mut sql = String::from("create table t(a);");
    for i in 0..40 {
        sql.push_str(&format!("insert into t values({i});"));
    }
    let data = s.data();
    let (code, out, err) = output(s.fsprof(&[
        "profile",
        data.to_str().unwrap(),
        "--findings-only",
        "--report",
        page.to_str().unwrap(),
        "--",
        "sqlite3",
        "db",
        &sql,
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(s.mounts().is_empty());
    // Each insert is a transaction: the journal written and synced, then the database. The
    // syncs hold the time, the lower fdatasync holds theirs, on the journal, by sqlite3.
    let first = out
        .lines()
        .find(|l| l.contains(" holds ") && l.contains(" of the time"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(first.starts_with("  OP_FSYNC holds "), "{out}");
    let peak = out
        .lines()
        .find(|l| l.starts_with("    peak "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(peak.contains("; fdatasync holds "), "{out}");
    assert!(
        slowest(&out)
            .iter()
            .any(|l| l.contains("OP_FSYNC /db-journal by sqlite3")),
        "{out}"
    );
    assert!(out.contains("/db-journal (deleted)"), "{out}");
    assert!(!out.contains("(unknown)"), "{out}");
    assert!(!out.contains("\nlayer fuse:"), "--findings-only: {out}");
    assert!(out.contains(&format!("report written to {}", page.display())));
    // The page, as the browser rendered it: the findings, four sortable tables with rows,
    // figures with bars.
    let dom = rendered(browser, &page, s.root.path());
    assert!(dom.contains("OP_FSYNC holds "), "{dom}");
    assert_eq!(body_count(&dom, "sortable"), 4);
    assert!(body_count(&dom, "bars") > 10);
    let rows = table_rows(&dom, "slowest-table");
    assert!(rows.iter().any(|r| r.contains("/db-journal")), "{dom}");
    assert!(table_rows(&dom, "files-table").len() >= 2);
    assert!(table_rows(&dom, "callers-table")[0].contains("comm sqlite3"));
    // No trace of sqlite3's run left: the mount is gone.
    assert!(s.mounts().is_empty());
}

#[test]
fn a_tar_of_a_cold_tree_names_the_slowest_files() {
    if !fuse_available() {
        return;
    }
    let s = Scene::new();
    let data = s.data();
    for d in 0..8 {
        let dir = data.join(format!("d{d}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..25 {
            std::fs::write(dir.join(format!("f{f}")), vec![b'y'; 4096 * (1 + f % 8)]).unwrap();
        }
    }
    // Written out, then out of every cache: the reads go to the disk.
    let st = Command::new("sync").status().unwrap();
    assert!(st.success());
    test_support::drop_all_caches();
    let (code, out, err) = output(s.fsprof(&[
        "profile",
        data.to_str().unwrap(),
        "--findings-only",
        "--",
        "sh",
        "-c",
        "tar cf - . | cat >/dev/null",
    ]));
    assert_eq!(code, 0, "{err}");
    let lines = slowest(&out);
    assert_eq!(lines.len(), 5, "{out}");
    // Each names a file or directory of the tree, and the process.
    for l in &lines {
        let path = l
            .split_whitespace()
            .find(|w| w.starts_with('/'))
            .unwrap_or_else(|| panic!("no path: {out}"));
        assert!(
            data.join(path.trim_start_matches('/')).exists(),
            "{path}: {out}"
        );
        assert!(l.contains(" by tar (pid "), "{out}");
    }
    assert!(out.contains("hottest files (time): /"), "{out}");
    assert!(!out.contains("(unknown)"), "{out}");
    assert!(out.contains("heaviest callers (time): comm tar "), "{out}");
}

/// `--by comm` names the program that made a request, not the one it was before its exec:
/// fsprof's child chdirs into the mount (a request under the name `fsprof`), then execs the
/// workload, whose requests came within the second the name was cached for.
#[test]
fn callers_are_named_after_their_exec() {
    if !fuse_available() {
        return;
    }
    let s = Scene::new();
    let data = s.data();
    let saved = s.root.path().join("p.fsprof");
    let layer_ops = |args: &[&str]| {
        let mut all = vec![
            "profile",
            data.to_str().unwrap(),
            "--findings-only",
            "--save",
        ];
        all.push(saved.to_str().unwrap());
        all.push("--");
        all.extend_from_slice(args);
        let (code, _, err) = output(s.fsprof(&all));
        assert_eq!(code, 0, "{err}");
        let p = profile_store::text::parse(&std::fs::read_to_string(&saved).unwrap()).unwrap();
        move |layer: &str, op: &str| {
            p.layer(&format!("fuse@comm:{layer}"))
                .and_then(|l| l.op(op))
                .map_or(0, |o| o.count)
        }
    };
    // The workload exec'd by fsprof's child itself.
    let count = layer_ops(&["cat", "a/b/f5"]);
    assert_eq!(count("cat", "OP_OPEN"), 1);
    assert!(count("cat", "OP_READ") >= 1);
    assert_eq!(count("fsprof", "OP_OPEN") + count("fsprof", "OP_READ"), 0);
    // Programs a shell starts.
    let count = layer_ops(&["sh", "-c", "cat a/b/f5 > /dev/null; ls a/b > /dev/null"]);
    assert_eq!(count("cat", "OP_OPEN"), 1);
    assert!(count("ls", "OP_READDIR") + count("ls", "OP_READDIRPLUS") >= 1);
    assert_eq!(count("sh", "OP_OPEN") + count("fsprof", "OP_OPEN"), 0);
}

#[test]
fn report_of_a_saved_profile_writes_one_page_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("sample.html");
    let out = crate::util::fsprof(&[
        "report",
        &crate::util::input("sample.fsprof"),
        "-o",
        page.to_str().unwrap(),
    ])
    .ok();
    assert!(
        out.starts_with(&format!("report written to {} (", page.display())),
        "{out}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    // Both layers of the sample, the findings of its fuse layer, and no slowest requests
    // (the sample has none: the page says how to record them).
    assert!(html.contains("Layer fuse: histograms") && html.contains("Layer lower: histograms"));
    assert!(html.contains("OP_READ holds "), "{html}");
    assert!(html.contains("record them with --slowest"));
    // A page that cannot be written is one line, exit 2.
    let r = crate::util::fsprof(&[
        "report",
        &crate::util::input("sample.fsprof"),
        "-o",
        "/nonexistent/dir/x.html",
    ]);
    assert!(
        r.one_line_error(2).contains("/nonexistent/dir/x.html"),
        "{}",
        r.stderr
    );
}
