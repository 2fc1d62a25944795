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
    rendered_in(browser, page, scratch, WINDOW)
}

/// The window the pages are rendered in: a laptop's browser, not maximised.
const WINDOW: (u32, u32) = (1400, 900);

/// [`rendered`] in a window of `size` (width, height) pixels.
fn rendered_in(browser: &str, page: &Path, scratch: &Path, size: (u32, u32)) -> String {
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
            &format!("--window-size={},{}", size.0, size.1),
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

/// `fsprof profile DATA --findings-only --report PAGE -- COMMAND...` in scene `s`: the exit
/// code, standard output and standard error.
fn profile_with_report(s: &Scene, page: &Path, command: &[&str]) -> (i32, String, String) {
    let data = s.data();
    let mut args = vec![
        "profile",
        data.to_str().unwrap(),
        "--findings-only",
        "--report",
        page.to_str().unwrap(),
        "--",
    ];
    args.extend_from_slice(command);
    output(s.fsprof(&args))
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
    let (code, out, err) = profile_with_report(&s, &page, &["sqlite3", "db", &sql]);
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

/// A test run in the rendered page, after the report's own script: for every sortable table
/// and every column, a click on its header (ascending), its values read back from the DOM,
/// another click (descending), read back again, each checked in the order the column's values
/// have (numbers by their `data-v`, text as the browser compares it); errors thrown by the
/// page's handlers are caught. Also the window's width and the page's. The results go into a
/// `<pre id="clicks">` as JSON.
const CLICKS: &str = r#"<script>
(function(){
  var errors=[];
  window.addEventListener('error',function(e){errors.push(String(e.message));});
  function values(t,i){return Array.from(t.tBodies[0].rows).map(function(r){
    var c=r.cells[i];var v=c.dataset.v;
    return (v!==undefined&&v!==''&&!isNaN(parseFloat(v)))?parseFloat(v):c.textContent;});}
  function ordered(v,up){for(var k=1;k<v.length;k++){var a=v[k-1],b=v[k];
    var d=(typeof a==='number'&&typeof b==='number')?a-b:String(a).localeCompare(String(b));
    if(up?d>0:d<0)return false;}return true;}
  var out={tables:{},errors:errors};
  document.querySelectorAll('table.sortable').forEach(function(t){
    var cols=[];
    Array.from(t.tHead.rows[0].cells).forEach(function(th,i){
      th.dispatchEvent(new MouseEvent('click',{bubbles:true}));
      var up=values(t,i);
      th.dispatchEvent(new MouseEvent('click',{bubbles:true}));
      var down=values(t,i);
      cols.push({column:th.textContent,rows:up.length,up:ordered(up,true),down:ordered(down,false),
        distinct:new Set(up.map(String)).size});
    });
    out.tables[t.id]=cols;
  });
  out.window=window.innerWidth;
  out.scroll=document.documentElement.scrollWidth;
  out.body=Math.round(document.body.getBoundingClientRect().width);
  var pre=document.createElement('pre');pre.id='clicks';pre.textContent=JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"#;

/// What [`CLICKS`] found on the page rendered from `page`.
fn clicked(browser: &str, page: &Path, scratch: &Path) -> serde_json::Value {
    let html = std::fs::read_to_string(page).unwrap();
    let at = html.rfind("</body>").expect("a body");
    let test = page.with_extension("clicks.html");
    std::fs::write(&test, format!("{}{CLICKS}{}", &html[..at], &html[at..])).unwrap();
    let dom = rendered(browser, &test, scratch);
    let start = dom
        .find("<pre id=\"clicks\">")
        .unwrap_or_else(|| panic!("{dom}"))
        + 17;
    let json = &dom[start..start + dom[start..].find("</pre>").unwrap()];
    let json = json
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// Every sortable table of a real report sorts by the column whose header is clicked, within
/// that table, both ways, in a real browser (headless chromium, clicks dispatched and the DOM
/// read back); no handler throws; the page takes the window's width without a scroll bar.
#[test]
fn every_table_sorts_by_the_clicked_column_and_the_page_fits_the_window() {
    if !fuse_available() {
        return;
    }
    let Some(browser) = chromium() else { return };
    let s = Scene::new();
    let page = s.root.path().join("r.html");
    let (code, _, err) = profile_with_report(
        &s,
        &page,
        &[
            "sh",
            "-c",
            "cat a/b/f5 a/b/f6 > /dev/null; ls -l a/b > /dev/null; stat a/b/f1 > /dev/null; \
             head -c 10 a/b/f9 > /dev/null; wc -c a/b/f12 > /dev/null; \
             for i in 1 2 3; do cat a/b/f1$i > /dev/null; done",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let got = clicked(browser, &page, s.root.path());
    assert_eq!(got["errors"], serde_json::json!([]), "{got}");
    let tables = got["tables"].as_object().unwrap();
    for id in [
        "layers-table",
        "slowest-table",
        "files-table",
        "callers-table",
    ] {
        let cols = tables[id]
            .as_array()
            .unwrap_or_else(|| panic!("no {id}: {got}"));
        assert!(cols[0]["rows"].as_u64().unwrap() >= 2, "{id}: {got}");
        for c in cols {
            assert!(c["up"] == true && c["down"] == true, "{id}: {c}");
        }
        // A column whose values differ tells a sort by it from a sort by another one.
        assert!(
            cols.iter().any(|c| c["distinct"].as_u64().unwrap() > 2),
            "{id}: {got}"
        );
    }
    let (window, scroll, body) = (
        got["window"].as_u64().unwrap(),
        got["scroll"].as_u64().unwrap(),
        got["body"].as_u64().unwrap(),
    );
    assert!(scroll <= window, "the page scrolls sideways: {got}");
    assert!(
        body * 10 >= window * 9,
        "the page takes {body} of a window of {window} pixels"
    );
}

/// The views of one profile agree: `why`, `peaks`, `stack` and the findings find the same
/// peaks of an operation with the same calls; `why`'s maximum is the slowest request
/// recorded, and no percentile exceeds it; a level's share of the one above is at most 100%.
#[test]
fn why_peaks_stack_and_the_findings_state_the_same_peaks() {
    if !fuse_available() {
        return;
    }
    let s = Scene::new();
    let data = s.data();
    let saved = s.root.path().join("v.fsprof");
    let (code, _, err) = output(s.fsprof(&[
        "profile",
        data.to_str().unwrap(),
        "--findings-only",
        "--lower",
        "--save",
        saved.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "for i in 1 2 3 4 5 6 7 8; do cat a/b/f* > /dev/null; ls -l a/b > /dev/null; done",
    ]));
    assert_eq!(code, 0, "{err}");
    let p = saved.to_str().unwrap();
    let profile = profile_store::text::parse(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let recorded = profile.section("slowest").expect("the slowest requests");
    let hz = profile.cycles_per_sec.unwrap() as f64;
    let json = |args: &[&str]| -> serde_json::Value {
        let (code, out, err) = output(s.fsprof(args));
        assert_eq!(code, 0, "{args:?}: {err}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    };
    for op in ["OP_READ", "OP_LOOKUP", "OP_GETATTR"] {
        let why = json(&["why", p, op, "--format", "json"]);
        let peaks = json(&[
            "peaks", p, "--layer", "fuse", "--op", op, "--format", "json",
        ]);
        let stack = json(&["stack", p, op, "--format", "json"]);
        let calls = |v: &serde_json::Value, key: &str| -> Vec<(u64, u64, u64)> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| {
                    (
                        x["lo"].as_u64().unwrap(),
                        x["hi"].as_u64().unwrap(),
                        x[key].as_u64().unwrap(),
                    )
                })
                .collect()
        };
        let from_why = calls(&why["peaks"], "requests");
        let from_peaks = calls(&peaks["ops"][0]["peaks"], "calls");
        let fuse = stack["levels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["level"] == "fuse")
            .unwrap();
        let from_stack = calls(&fuse["peaks"], "calls");
        assert_eq!(from_why, from_peaks, "{op}: why against peaks");
        assert_eq!(from_why, from_stack, "{op}: why against stack");
        // Every request of a peak is in its breakdown: one latency per request.
        for pk in why["peaks"].as_array().unwrap() {
            assert_eq!(pk["requests"], pk["broken_down"], "{op}: {pk}");
        }
        // The maximum is the slowest request recorded; no percentile exceeds it.
        let pct: Vec<f64> = why["percentiles_estimated"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q[1].as_f64().unwrap())
            .collect();
        assert!(pct.windows(2).all(|w| w[0] <= w[1]), "{op}: {pct:?}");
        let slowest = recorded
            .lines
            .iter()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|r| r["op"] == op)
            .map(|r| r["latency_ns"].as_f64().unwrap() * hz / 1e9)
            .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.max(c))));
        assert_eq!(why["max_recorded"], slowest.is_some(), "{op}: {why}");
        if let Some(max) = slowest {
            assert!((pct[4] - max).abs() < 1.0, "{op}: {} against {max}", pct[4]);
        }
        for l in stack["levels"].as_array().unwrap() {
            if let Some(share) = l["share_of_above"].as_f64() {
                assert!(share <= 1.0, "{op}: {l}");
            }
        }
    }
}

/// `fsprof profile DIR -- true`: the program makes no request, and the profile holds none;
/// fsprof's own (the mount's checks, the `chdir` into it before the exec) are not in it.
#[test]
fn the_tools_own_requests_are_not_in_the_profile_of_the_program() {
    if !fuse_available() {
        return;
    }
    let s = Scene::new();
    let data = s.data();
    let saved = s.root.path().join("t.fsprof");
    for program in [&["true"][..], &["stat", "a/b/f1"][..]] {
        let mut args = vec![
            "profile",
            data.to_str().unwrap(),
            "--cache",
            "exact",
            "--save",
            saved.to_str().unwrap(),
            "--",
        ];
        args.extend_from_slice(program);
        let (code, out, err) = output(s.fsprof(&args));
        assert_eq!(code, 0, "{err}");
        let p = profile_store::text::parse(&std::fs::read_to_string(&saved).unwrap()).unwrap();
        let fuse = p.layer("fuse").unwrap();
        let callers: Vec<&str> = p
            .layers
            .iter()
            .filter(|l| l.name.starts_with("fuse@") && l.total_count() > 0)
            .map(|l| l.name.as_str())
            .collect();
        if program[0] == "true" {
            assert_eq!(fuse.total_count(), 0, "{out}");
            assert!(callers.is_empty(), "{callers:?}");
        } else {
            // stat's own lookups and getattrs, by stat alone.
            assert!(fuse.count("OP_LOOKUP") >= 2, "{out}");
            assert_eq!(callers, ["fuse@comm:stat"], "{out}");
        }
    }
}
