//! The daemon's own limits are not a branch's failure (issue 32): a client holding more files
//! open than the daemon may hold descriptors is served, and where the daemon does run out of
//! descriptors the caller gets `EMFILE` and every branch stays in service.
//!
//! Regression: open files pinned their parts (one descriptor per branch), so on a RAIF5 volume
//! over three branches one process opening files without closing them stopped at about a
//! third of the daemon's limit with `EMFILE`, and the branch check that the error set off
//! could not open the branch either: branch 0 was failed ("Too many open files"), then the
//! others ("cannot write its marker"), and every access answered `EIO` until unmount. Which
//! branch the first `EMFILE` landed on depended on the limit, hence the three limits below.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use test_support::{Transport, transports};

use crate::fixture::Fixture;

/// Files each client process holds open.
const PER_CLIENT: usize = 10_000;
/// Client processes (each under the test's own descriptor limit).
const CLIENTS: usize = 2;
/// Directories the files are spread over.
const DIRS: usize = 50;
/// Every `WRITE_EVERY`th file held gets a write.
const WRITE_EVERY: usize = 10;

/// What a client writes into file `i`: 6,000 bytes across the first stripe unit's end (64
/// KiB), so that a write touches two units and both parities of a RAIF5 row.
fn content(i: usize) -> Vec<u8> {
    (0..6000).map(|k| (i * 31 + k * 7) as u8 | 1).collect()
}

const AT: u64 = (64 << 10) - 3000;

fn path(dir: &Path, i: usize) -> std::path::PathBuf {
    dir.join(format!("d{}/f{i}", i % DIRS))
}

/// Run by a client process (this test binary re-executed, see [`Client::start`]): opens
/// (creating) files `RAIF_FD_FROM..RAIF_FD_FROM + PER_CLIENT` under `RAIF_FD_DIR`, holding
/// them; every open must succeed or fail with `EMFILE`. Writes to every `WRITE_EVERY`th file
/// held, reads each back, says `held H refused R wrote W` and waits for a line on standard
/// input; then reads every written file again through the descriptors it holds, closes them
/// and says `verified W`.
#[test]
#[ignore = "helper process for the descriptor-limit tests"]
fn fd_client_helper() {
    let Some(dir) = std::env::var_os("RAIF_FD_DIR") else {
        return;
    };
    let dir = Path::new(&dir);
    let from: usize = std::env::var("RAIF_FD_FROM").unwrap().parse().unwrap();
    fsprof_fuse::sys::raise_nofile_limit().unwrap();
    let mut held: Vec<(usize, File)> = Vec::with_capacity(PER_CLIENT);
    let mut refused = 0;
    for i in from..from + PER_CLIENT {
        let r = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path(dir, i));
        match r {
            Ok(f) => held.push((i, f)),
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => refused += 1,
            Err(e) => panic!("open {}: {e}", path(dir, i).display()),
        }
    }
    let mut written = Vec::new();
    for (i, f) in held.iter().step_by(WRITE_EVERY) {
        f.write_all_at(&content(*i), AT)
            .unwrap_or_else(|e| panic!("write {i}: {e}"));
        written.push((*i, f));
    }
    let check = |written: &[(usize, &File)]| {
        for (i, f) in written {
            let mut back = vec![0u8; 6000];
            f.read_exact_at(&mut back, AT)
                .unwrap_or_else(|e| panic!("read {i}: {e}"));
            assert!(back == content(*i), "file {i} reads back other bytes");
        }
    };
    check(&written);
    println!(
        "held {} refused {refused} wrote {}",
        held.len(),
        written.len()
    );
    std::io::stdout().flush().unwrap();
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    check(&written);
    let n = written.len();
    drop(written);
    drop(held);
    println!("verified {n}");
}

/// A client process (see [`fd_client_helper`]).
struct Client {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Client {
    fn start(mnt: &Path, from: usize) -> Client {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "fdlimit::fd_client_helper",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("RAIF_FD_DIR", mnt)
            .env("RAIF_FD_FROM", from.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Client { child, out }
    }

    /// The numbers in the next line where the client says `word` (the test harness says
    /// other things, on the same line too).
    fn says(&mut self, word: &str) -> Vec<usize> {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.out.read_line(&mut line).unwrap();
            assert!(n > 0, "the client ended without saying '{word}'");
            if let Some(at) = line.find(word) {
                return line[at..]
                    .split(' ')
                    .filter_map(|w| w.trim().parse().ok())
                    .collect();
            }
        }
    }

    fn finish(mut self) -> usize {
        writeln!(self.child.stdin.as_mut().unwrap(), "go").unwrap();
        let verified = self.says("verified")[0];
        assert!(self.child.wait().unwrap().success(), "the client failed");
        verified
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `.raif` line saying how many branches are online.
fn online(f: &Fixture) -> String {
    let s = f.status();
    s.lines()
        .find(|l| l.starts_with("branches "))
        .unwrap_or_default()
        .to_string()
}

fn clients_hold_many_files(t: Transport, limit: u32) {
    let Some(mut f) = Fixture::new(t, &format!("fdlimit-{limit}"), 3) else {
        return;
    };
    // Each branch on a tmpfs of its own: 60,000 parts go at its unmount, not file by file.
    if !f.tmpfs(&["200m", "200m", "200m"]) {
        return;
    }
    let nofile = format!("--nofile={limit}:{limit}");
    f.mount_with(&["prlimit", &nofile], &["--level", "5"]);
    for d in 0..DIRS {
        fs::create_dir(f.m(&format!("d{d}"))).unwrap();
    }
    let mut clients: Vec<Client> = (0..CLIENTS)
        .map(|c| Client::start(&f.mnt, c * PER_CLIENT))
        .collect();
    let (mut held, mut refused) = (0, 0);
    for c in &mut clients {
        let said = c.says("held");
        held += said[0];
        refused += said[1];
    }
    // Every open was answered, and every branch is in service while the files are held.
    assert_eq!(held + refused, CLIENTS * PER_CLIENT);
    assert_eq!(online(&f), "branches 3 online 3", "{}", f.status());
    // The cache serves them all under the daemon's limit.
    assert_eq!(held, CLIENTS * PER_CLIENT, "{refused} opens refused");
    let verified: usize = clients.into_iter().map(Client::finish).sum();
    assert_eq!(verified, held.div_ceil(WRITE_EVERY));
    assert_eq!(online(&f), "branches 3 online 3", "{}", f.status());
    assert!(!f.log_text().contains("failed"), "{}", f.log_text());
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
    f.scrub_is_clean();
}

transports!(
    twenty_thousand_open_files_fail_no_branch_under_4096_fds,
    twenty_thousand_open_files_fail_no_branch_under_4097_fds,
    twenty_thousand_open_files_fail_no_branch_under_4098_fds
);

fn twenty_thousand_open_files_fail_no_branch_under_4096_fds(t: Transport) {
    clients_hold_many_files(t, 4096);
}

fn twenty_thousand_open_files_fail_no_branch_under_4097_fds(t: Transport) {
    clients_hold_many_files(t, 4097);
}

fn twenty_thousand_open_files_fail_no_branch_under_4098_fds(t: Transport) {
    clients_hold_many_files(t, 4098);
}

/// Most files the client below opens (it stops at the daemon's first `EMFILE`).
const MOST_KEPT: usize = 2000;

/// Opens (creating) files and removes their names while they are open, until the daemon
/// answers `EMFILE`: a file that lost its name keeps its parts' descriptors, so these are
/// descriptors the cache cannot give back. Returns the files held (with their first byte
/// written) and the `EMFILE`s met.
fn hold_nameless_files(f: &Fixture) -> (Vec<File>, usize) {
    let mut held = Vec::new();
    let mut refused = 0;
    for i in 0..MOST_KEPT {
        let p = f.m(&format!("k{i}"));
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&p)
        {
            Ok(file) => file,
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => {
                refused += 1;
                break;
            }
            Err(e) => panic!("create k{i}: {e}"),
        };
        file.write_all_at(&[i as u8 | 1], 0)
            .unwrap_or_else(|e| panic!("write k{i}: {e}"));
        match fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => refused += 1,
            Err(e) => panic!("unlink k{i}: {e}"),
        }
        held.push(file);
        if refused > 0 {
            break;
        }
    }
    (held, refused)
}

fn a_daemon_out_of_descriptors_fails_no_branch(t: Transport) {
    let Some(mut f) = Fixture::new(t, "fdlimit-out", 3) else {
        return;
    };
    f.mount_with(
        &["prlimit", "--nofile=256:256"],
        &["--level", "5", "--check-interval", "50ms"],
    );
    let (mut held, refused) = hold_nameless_files(&f);
    assert!(
        refused > 0,
        "the daemon never ran out of descriptors ({} files held)",
        held.len()
    );
    // Out of descriptors, the volume is served: every branch in service (reading .raif checks
    // them), the files held read and write through their kept descriptors.
    for _ in 0..3 {
        assert_eq!(online(&f), "branches 3 online 3", "{}", f.status());
    }
    for (i, file) in held.iter_mut().enumerate() {
        let mut b = [0u8; 1];
        file.read_exact_at(&mut b, 0).unwrap();
        assert_eq!(b[0], i as u8 | 1, "k{i}");
    }
    // A decision about a branch's health still gets its markers written (from the
    // descriptors the daemon holds back for them): not "cannot write its marker".
    fs::write(f.m(".raif"), "fail 2\n").unwrap();
    let s = f.status();
    assert!(s.contains("branches 3 online 2"), "{s}");
    assert!(s.contains("reason=\"failed by the administrator\""), "{s}");
    drop(held);
    assert!(!f.log_text().contains("cannot write"), "{}", f.log_text());
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
    for b in 0..2 {
        let marker = fs::read_to_string(f.b(b, ".raif-branch")).unwrap();
        assert!(
            marker.lines().any(|l| l.starts_with("failed=2")),
            "branch {b}: {marker}"
        );
    }
}

transports!(a_daemon_out_of_descriptors_fails_no_branch);
