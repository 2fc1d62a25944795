//! `strace` of a daemon, to hold its breakdown against the system calls it really made on the
//! directories below it (fsprof-fuse's LOWER, raif's branches).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::wait_until;

/// Whether `strace` is installed; where it is missing outside CI, says SKIPPED (CI must have
/// it).
pub fn available() -> bool {
    if Command::new("strace").arg("-V").output().is_ok() {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(!ci, "strace is missing (CI must install it)");
    eprintln!("SKIPPED: strace is missing");
    false
}

/// `strace -f -ff -y` of a running daemon, one trace file per thread.
pub struct Strace {
    child: Child,
    out: PathBuf,
}

impl Strace {
    /// Follows the daemon `pid` (every thread), writing one file per thread under `out` (an
    /// empty directory); returns once it has attached to every thread, or `None` (SKIPPED)
    /// where strace is missing outside CI.
    pub fn attach(pid: u32, out: &Path) -> Option<Strace> {
        if !available() {
            return None;
        }
        let child = Command::new("strace")
            .args(["-f", "-ff", "-y", "-qq", "-o"])
            .arg(out.join("trace"))
            .arg("-p")
            .arg(pid.to_string())
            .stdin(Stdio::null())
            .spawn()
            .expect("strace");
        let threads = || fs::read_dir(format!("/proc/{pid}/task")).unwrap().count();
        wait_until("strace attached to every thread", || {
            fs::read_dir(out).unwrap().count() >= threads()
        });
        Some(Strace {
            child,
            out: out.to_path_buf(),
        })
    }

    /// Stops `strace` (it detaches on SIGINT), waits for it, and counts the system calls it
    /// saw made on the directories `roots` (canonical): those whose descriptor (as `-y` decodes
    /// it), path or new descriptor lies in one, or that go through `/proc/self/fd/N` (the
    /// daemons reach only lower objects so), by the name inner calls give them. Calls on
    /// `/dev/fuse`, futexes, the io_uring's and the like are not.
    pub fn stop(mut self, roots: &[PathBuf]) -> BTreeMap<String, u64> {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        self.child.wait().expect("strace exits");
        let tags: Vec<String> = roots.iter().map(|r| format!("<{}", r.display())).collect();
        let mut out = BTreeMap::new();
        for e in fs::read_dir(&self.out).unwrap() {
            let text = fs::read_to_string(e.unwrap().path()).unwrap();
            for line in text.lines() {
                let Some((name, _)) = line.split_once('(') else {
                    continue;
                };
                if !name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                {
                    continue; // "+++ exited", "--- SIGINT", a resumed line
                }
                if tags.iter().any(|t| line.contains(t)) || line.contains("\"/proc/self/fd/") {
                    *out.entry(inner_name(name).to_string()).or_default() += 1;
                }
            }
        }
        out
    }
}

impl Drop for Strace {
    fn drop(&mut self) {
        // A test that failed before `stop`: no tracer left attached.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The inner calls' names for the system calls strace names otherwise.
fn inner_name(syscall: &str) -> &str {
    match syscall {
        "pread64" => "pread",
        "pwrite64" => "pwrite",
        "fstatfs" => "fstatvfs",
        s => s,
    }
}

/// Every inner call the breakdown of `p` holds, by its call's name (a raif branch's
/// `branchN:` dropped), summed over operations and buckets; none is beyond the table's slots.
pub fn breakdown_calls(p: &profile_store::Profile) -> BTreeMap<String, u64> {
    let s = p
        .section(profile_store::inner::SECTION)
        .expect("a breakdown");
    let ic = profile_store::inner::InnerCalls::from_section(s).unwrap();
    let mut out = BTreeMap::new();
    for r in &ic.rows {
        assert_eq!(
            r.other_cycles, 0,
            "{} bucket {}: calls beyond the slots",
            r.op, r.bucket
        );
        for c in &r.calls {
            let name = c.call.split_once(':').map_or(&c.call[..], |(_, n)| n);
            *out.entry(name.to_string()).or_default() += c.count;
        }
    }
    out
}

/// A mixed workload in the mount `m`, over a directory `d` of files `f0` to `f39`: a listing,
/// reads, writes, creates, renames, removals, links, attributes, a directory made and removed.
pub fn mixed(m: &Path) {
    let script = "set -e; ls -l d > /dev/null; cat d/f1 d/f2 > /dev/null; echo more >> d/f3; \
        touch d/new; mkdir e; mv d/f4 e/; rm d/f5; ln -s f6 d/l; readlink d/l > /dev/null; \
        ln d/f7 d/hard; chmod 600 d/f8; truncate -s 2 d/f9; setfattr -n user.a -v 1 d/f10; \
        getfattr -d d/f10 > /dev/null; stat -f . > /dev/null; rm e/f4; rmdir e; \
        ls -l d > /dev/null";
    let out = Command::new("sh")
        .args(["-c", script])
        .current_dir(m)
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
