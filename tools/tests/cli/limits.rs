//! Inputs that are not profiles, however large: every command reads them as a stream and fails
//! with one line, within the memory it is given (`prlimit --as`), having read little.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::util::Run;

/// Runs `fsprof args...` with its address space limited to `limit` bytes, feeding standard
/// input `head` and then `body` over and over until fsprof stops reading.
fn fsprof_within(limit: u64, args: &[&str], feed: Option<(&[u8], &[u8])>) -> Run {
    let mut child = Command::new("prlimit")
        .arg(format!("--as={limit}"))
        .arg(env!("CARGO_BIN_EXE_fsprof"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("prlimit (util-linux) starts");
    let mut stdin = child.stdin.take().unwrap();
    let (head, body) = feed.map_or((Vec::new(), Vec::new()), |(h, b)| (h.to_vec(), b.to_vec()));
    let writer = std::thread::spawn(move || {
        if stdin.write_all(&head).is_err() || body.is_empty() {
            return;
        }
        let chunk: Vec<u8> = body.iter().copied().cycle().take(64 << 10).collect();
        while stdin.write_all(&chunk).is_ok() {}
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// 64 MiB of address space: the binary and its libraries take about 10.
const SMALL: u64 = 64 << 20;

const COMMANDS: &[&[&str]] = &[
    &["show"],
    &["summary"],
    &["check"],
    &["peaks"],
    &["export", "--format", "json"],
];

#[test]
fn dev_zero_fails_at_its_first_byte_in_small_memory() {
    for cmd in COMMANDS {
        let args: Vec<&str> = cmd[..1]
            .iter()
            .copied()
            .chain(["/dev/zero"])
            .chain(cmd[1..].iter().copied())
            .collect();
        let r = fsprof_within(SMALL, &args, None);
        assert_eq!(
            r.one_line_error(2),
            "fsprof: /dev/zero: a character device, not a regular file: only files are read (or - \
             for standard input)",
            "{args:?}"
        );
    }
    let r = fsprof_within(SMALL, &["diff", "/dev/zero", "/dev/zero"], None);
    r.one_line_error(2);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never-written.svg");
    let r = fsprof_within(
        SMALL,
        &["plot", "/dev/zero", "-o", out.to_str().unwrap()],
        None,
    );
    r.one_line_error(2);
    assert!(!out.exists());
}

#[test]
fn a_two_gigabyte_sparse_file_fails_at_its_first_byte_in_small_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sparse.fsprof");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let p = path.to_str().unwrap();
    let r = fsprof_within(SMALL, &["show", p], None);
    assert!(
        r.one_line_error(2)
            .ends_with("line 1: unexpected control character 0x00: not an fsprof profile"),
        "{}",
        r.stderr
    );
    let r = fsprof_within(SMALL, &["compare", p, p], None);
    r.one_line_error(2);
}

#[test]
fn a_line_that_never_ends_fails_at_the_line_limit_in_small_memory() {
    let r = fsprof_within(SMALL, &["show", "-"], Some((b"OP_", b"A")));
    assert_eq!(
        r.one_line_error(2),
        "fsprof: -: line 1: line longer than 65536 bytes: not an fsprof profile"
    );
    // Text that is no profile at all fails on its first line, whatever follows.
    let r = fsprof_within(SMALL, &["summary", "-"], Some((b"", b"hello world\n")));
    assert!(
        r.one_line_error(2)
            .starts_with("fsprof: -: line 1: not an fsprof profile"),
        "{}",
        r.stderr
    );
}

#[test]
fn endless_json_fails_at_the_json_limit_in_bounded_memory() {
    // 64 MiB of JSON at most, 32 Mi counts of 8 bytes in a vector that doubles: well under
    // 1 GiB, where reading it whole took all the memory there was.
    let head = br#"{"format":"fsprof-profile","version":1,"layers":[{"name":"fuse","resolution":1,"buckets":64,"ops":[{"name":"OP_READ","count":1,"total":1,"epochs":[["#;
    let r = fsprof_within(1 << 30, &["show", "-"], Some((head, b"0,")));
    let line = r.one_line_error(2);
    assert!(line.contains("JSON profile larger than 64 MiB"), "{line}");
    // Not JSON after its brace: at once, in small memory.
    let r = fsprof_within(SMALL, &["show", "-"], Some((b"{", b"x")));
    assert!(
        r.one_line_error(2).starts_with("fsprof: -: JSON: "),
        "{}",
        r.stderr
    );
}
