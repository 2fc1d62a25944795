//! Other users' names and connections against the tools and the metrics endpoint (issue 38):
//! process and file names from uid 65534 reach every terminal escaped, come back from a
//! `--metrics` URL as the mount wrote them, byte for byte, and 24 dripping connections from
//! uid 65534 do not starve a Prometheus that has the token.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tests::{Mounted, bin};

/// Command names of the issue: escape sequences, a forged line, label syntax, invalid UTF-8.
const COMMS: [&[u8]; 10] = [
    b"\x1b]0;OWNED\x07\x1b[2J",
    b"a\n# layer=x",
    b"z,1",
    b"a,op=\"OP_X",
    b"c\\\"d",
    b"x\\",
    b"}",
    b"\"}evil{x=\"",
    b"cat,x",
    b"\xff\xfe",
];

/// Opens the test's directories to uid 65534.
fn open_to_all(m: &Mounted) {
    fs::set_permissions(&m.root, fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&m.lower, fs::Permissions::from_mode(0o777)).unwrap();
}

/// Runs `cat file` as uid 65534 under the command name `comm` (a symbolic link to cat, whose
/// name the kernel takes as the comm).
fn cat_as(root: &Path, comm: &[u8], file: &Path) {
    let dir = root.join("names");
    fs::create_dir_all(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    let link = dir.join(OsStr::from_bytes(comm));
    if !link.exists() {
        std::os::unix::fs::symlink("/bin/cat", &link).unwrap();
    }
    let st = Command::new(&link)
        .arg(file)
        .uid(65534)
        .gid(65534)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "{comm:?}");
}

/// `fsprof args...`: (exit code, stdout bytes, stderr).
fn fsprof(args: &[&OsStr], env: &[(&str, &Path)]) -> (i32, Vec<u8>, String) {
    let mut c = Command::new(bin("fsprof"));
    c.args(args).env("NO_COLOR", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        o.stdout,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Asserts that `out` holds no control character but newlines, and no bidi override.
fn assert_safe(what: &str, out: &[u8]) {
    let text = String::from_utf8_lossy(out);
    for (i, l) in text.lines().enumerate() {
        assert!(
            !l.chars().any(|c| c.is_control() && c != '\t') && !l.contains('\u{202e}'),
            "{what}: line {i} reaches the terminal raw: {l:?}"
        );
        assert!(!l.starts_with("# layer=x"), "{what}: a forged line: {l:?}");
    }
}

#[test]
fn names_from_other_users_reach_every_terminal_escaped_and_byte_exact() {
    let Some(m) = Mounted::start(
        "names",
        "fsprof-fuse",
        &[
            "--allow-other",
            "--by",
            "comm",
            "--hot-files",
            "--slow",
            "0ms",
            "--slowest",
        ],
    ) else {
        return;
    };
    open_to_all(&m);
    let names: [&[u8]; 3] = [
        b"bad\xff\xfeutf8",
        b"bad\xfe\xffutf8",
        "rtl\u{202e}gnp.exe".as_bytes(),
    ];
    for n in names {
        fs::write(m.lower.join(OsStr::from_bytes(n)), b"x").unwrap();
    }
    let mnt = m.mnt.as_os_str();
    // fsprof top, while the hostile processes read: its WHO section names them.
    let top = std::thread::scope(|s| {
        let top = s.spawn(|| {
            fsprof(
                &[
                    OsStr::new("top"),
                    OsStr::new("-b"),
                    OsStr::new("-n"),
                    OsStr::new("3"),
                    mnt,
                ],
                &[],
            )
        });
        // The hostile processes read until top has printed its last frame (bounded), so that
        // every frame has them to show.
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until && !top.is_finished() {
            for c in COMMS {
                for n in names {
                    cat_as(&m.root, c, &m.mnt.join(OsStr::from_bytes(n)));
                }
            }
        }
        top.join().unwrap()
    });
    assert_eq!(top.0, 0, "{}", top.2);
    assert_safe("top", &top.1);
    let out = String::from_utf8_lossy(&top.1);
    // WHO lists the busiest callers only: under load either hostile name may rank below the
    // others, but at least one of them is there, escaped.
    assert!(
        out.contains("comm:\\u{1b}]0;OWNED\\u{7}\\u{1b}[2J") || out.contains("comm:a\\n# layer=x"),
        "{out}"
    );
    // The recorded names keep every byte: two names that differ only in invalid bytes stay two.
    let text = fs::read_to_string(m.mnt.join(".fsprof")).unwrap();
    assert!(text.contains("path=/bad%FF%FEutf8") && text.contains("path=/bad%FE%FFutf8"));
    let slow = fs::read_to_string(m.mnt.join(".fsprof.slow")).unwrap();
    assert!(slow.contains("\"path\":\"/bad%FF%FEutf8\""), "{slow}");
    assert!(slow.contains("\"comm\":\"%FF%FE\""), "{slow}");
    for cmd in ["files", "slow", "summary", "show", "report"] {
        let mut args = vec![OsStr::new(cmd), mnt];
        let html = m.root.join("r.html");
        if cmd == "report" {
            args.extend([OsStr::new("-o"), html.as_os_str()]);
        }
        let (c, out, e) = fsprof(&args, &[]);
        assert_eq!(c, 0, "{cmd}: {e}");
        assert_safe(cmd, &out);
        let out = String::from_utf8_lossy(&out);
        if cmd == "files" || cmd == "slow" {
            assert!(out.contains("/bad\\xFF\\xFEutf8"), "{cmd}: {out}");
            assert!(out.contains("/bad\\xFE\\xFFutf8"), "{cmd}: {out}");
            assert!(out.contains("/rtl\\u{202e}gnp.exe"), "{cmd}: {out}");
        }
        if cmd == "report" {
            let h = fs::read_to_string(&html).unwrap();
            assert!(!h.contains('\u{202e}') && !h.contains('\u{1b}'));
        }
    }
}

#[test]
fn a_metrics_url_reads_back_the_layers_and_counts_of_the_mount() {
    let port = test_support::prometheus::free_port();
    let addr = format!("127.0.0.1:{port}");
    let token = tests::scratch("token").join("token");
    fs::write(&token, "a-token-of-32-characters-or-more-xyz\n").unwrap();
    let Some(m) = Mounted::start(
        "exposition",
        "fsprof-fuse",
        &[
            "--allow-other",
            "--by",
            "comm",
            "--metrics",
            &addr,
            "--metrics-token-file",
            token.to_str().unwrap(),
        ],
    ) else {
        return;
    };
    open_to_all(&m);
    fs::write(m.lower.join("f"), b"x").unwrap();
    for c in COMMS {
        cat_as(&m.root, c, &m.mnt.join("f"));
    }
    let url = format!("http://{addr}/metrics");
    let layers = |src: &OsStr, env: &[(&str, &Path)]| {
        let (c, out, e) = fsprof(
            &[
                OsStr::new("export"),
                OsStr::new("--format"),
                OsStr::new("text"),
                src,
            ],
            env,
        );
        assert_eq!(c, 0, "{e}");
        let p = profile_store::parse_any(&out).unwrap();
        let mut v: Vec<(String, Vec<(String, u64)>)> = p
            .layers
            .iter()
            .map(|l| {
                let mut ops: Vec<(String, u64)> =
                    l.ops.iter().map(|o| (o.name.clone(), o.count)).collect();
                ops.sort();
                (l.name.clone(), ops)
            })
            .collect();
        v.sort();
        v
    };
    let env = [("FSPROF_METRICS_TOKEN_FILE", token.as_path())];
    test_support::wait_until("the URL and the mount agree", || {
        layers(OsStr::new(&url), &env) == layers(m.mnt.as_os_str(), &[])
    });
    let from_url = layers(OsStr::new(&url), &env);
    for c in COMMS {
        let name = profile_store::keyed::name("fuse", "comm", c);
        assert!(
            from_url.iter().any(|(l, _)| *l == name),
            "{name} in {from_url:?}"
        );
    }
    // Without the token: the histograms only, and a one-line error for nothing.
    let (c, out, e) = fsprof(&[OsStr::new("summary"), OsStr::new(&url)], &[]);
    assert_eq!(c, 2, "{}", String::from_utf8_lossy(&out));
    assert!(e.contains("HTTP 401") && e.lines().count() == 1, "{e}");
    let _ = fs::remove_dir_all(token.parent().unwrap());
}

#[test]
fn prometheus_with_the_token_scrapes_through_24_dripping_connections() {
    let port = test_support::prometheus::free_port();
    let addr = format!("127.0.0.1:{port}");
    let dir = tests::scratch("drip");
    let token = dir.join("token");
    fs::write(&token, "another-token-for-prometheus-0123\n").unwrap();
    let Some(m) = Mounted::start(
        "drip",
        "fsprof-fuse",
        &[
            "--metrics",
            &addr,
            "--metrics-token-file",
            token.to_str().unwrap(),
        ],
    ) else {
        let _ = fs::remove_dir_all(&dir);
        return;
    };
    let job = format!(
        "    authorization:\n      credentials_file: {}\n",
        token.display()
    );
    let Some(prom) = test_support::prometheus::Prometheus::start_job(&[&addr], None, &[], &job)
    else {
        let _ = fs::remove_dir_all(&dir);
        return;
    };
    prom.wait_for("up{job=\"fsprof\"}", |v| v == 1.0);
    // 24 clients of uid 65534 that each send a byte every 0.5 s, and connect again when
    // dropped; bounded: they stop by themselves after 40 s, and are killed at the end.
    let drip = format!(
        "end=$(($(date +%s)+40)); while [ $(date +%s) -lt $end ]; do \
         exec 3<>/dev/tcp/127.0.0.1/{port} || {{ sleep 0.2; continue; }}; \
         while [ $(date +%s) -lt $end ] && printf G >&3 2>/dev/null; do sleep 0.5; done; \
         exec 3>&-; done"
    );
    let mut drippers: Vec<_> = (0..24)
        .map(|_| {
            Command::new("setpriv")
                .args([
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    "--",
                    "bash",
                    "-c",
                ])
                .arg(&drip)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    // 25 s of scrapes, one a second.
    std::thread::sleep(Duration::from_secs(26));
    let q = |e: &str| prom.query(e).unwrap_or(0.0);
    let scrapes = q("count_over_time(up{job=\"fsprof\"}[25s])");
    let ok = q("sum_over_time(up{job=\"fsprof\"}[25s])");
    for d in &mut drippers {
        let _ = d.kill();
        let _ = d.wait();
    }
    eprintln!("{ok} of {scrapes} scrapes succeeded beside 24 dripping connections");
    assert!(scrapes >= 10.0, "{scrapes} scrapes in 25 s\n{}", prom.log());
    assert!(ok >= 0.95 * scrapes, "{ok} of {scrapes} scrapes succeeded");
    drop(m);
    let _ = fs::remove_dir_all(&dir);
}
