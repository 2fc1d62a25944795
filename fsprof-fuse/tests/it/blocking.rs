//! Requests that wait (an injected delay stands in for a slow lower call) hold up no other
//! request, on either transport; the serving threads grow under them, to their bound; a signal
//! to the caller cuts its request's delay short with EINTR; and the end of the mount ends every
//! delay. Each check waits for a state (the request is in its delay, the caller waits in the
//! kernel), never for a length of time.

use std::ffi::OsStr;
use std::fs;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::fixture::{Fixture, Transport};

/// How long a state may take to come about on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(20);

/// A caller process, killed and reaped (for a bounded time) when dropped.
struct Caller(Child);

impl Caller {
    /// Runs `cmd args...` on CPU `cpu` (or anywhere), its output captured.
    fn start(cpu: Option<u32>, cmd: &str, args: &[&OsStr]) -> Caller {
        let mut c = match cpu {
            Some(n) => {
                let mut c = Command::new("taskset");
                c.args(["-c", &n.to_string(), cmd]);
                c
            }
            None => Command::new(cmd),
        };
        c.args(args).stdout(Stdio::piped()).stderr(Stdio::null());
        Caller(c.spawn().unwrap_or_else(|e| panic!("{cmd}: {e}")))
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn running(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }

    /// Waits for it to end; panics past the deadline. Returns how it ended, what it printed and
    /// how long it took from now.
    fn reaped(&mut self, what: &str) -> (ExitStatus, String, Duration) {
        let start = Instant::now();
        wait_for(what, || !self.running());
        let status = self.0.wait().unwrap();
        let mut out = String::new();
        if let Some(mut o) = self.0.stdout.take() {
            std::io::Read::read_to_string(&mut o, &mut out).unwrap();
        }
        (status, out, start.elapsed())
    }

    /// Whether it waits in the kernel for the answer to a FUSE request.
    fn waits_on_fuse(&self) -> bool {
        fs::read_to_string(format!("/proc/{}/wchan", self.pid()))
            .is_ok_and(|w| w.trim() == "request_wait_answer")
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.pid().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig} {}", self.pid());
    }
}

impl Drop for Caller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.0.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Waits until `done` holds; panics naming `what` past the deadline.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `(injected, cut)` of each injection rule of the mount, from its profile.
fn injections(f: &Fixture) -> Vec<(u64, u64)> {
    let p = f.profile();
    let field = |line: &str, key: &str| {
        line.split(' ')
            .find_map(|w| w.strip_prefix(key))
            .map_or(0, |n| n.parse().unwrap())
    };
    p.section("injections")
        .expect("an injections section")
        .lines
        .iter()
        .map(|l| (field(l, "injected="), field(l, "cut=")))
        .collect()
}

/// The daemon's threads whose names `pick` picks.
fn threads(pid: u32, pick: impl Fn(&str) -> bool) -> usize {
    fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| pick(name.trim_end()))
        .count()
}

/// The serving threads of CPU 0's requests: the classic transport's workers (`fuser-N`), or
/// CPU 0's ring's (`fuse-ring-0`).
fn cpu0_servers(f: &Fixture) -> usize {
    match f.transport {
        Transport::Classic => threads(f.pid(), |n| {
            n.strip_prefix("fuser-")
                .is_some_and(|i| i.bytes().all(|b| b.is_ascii_digit()))
        }),
        Transport::Uring => threads(f.pid(), |n| n == "fuse-ring-0"),
    }
}

/// A `taskset -c 0 stat M/q` answers while a read by a caller on the same CPU waits in a 30 s
/// delay (checked: that caller has not finished when `stat` has). On `--uring` it used to wait
/// behind the read (2.71 s for a 3 s delay): one thread served each CPU's ring. Then the
/// reader is killed and the mount unmounted while the read's delay has 30 s to go: the daemon
/// exits at once (it used to sleep the delay out).
fn a_waiting_request_holds_up_no_other_on_its_cpu(t: Transport) {
    let Some(mut f) = Fixture::new("hol", t) else {
        return;
    };
    fs::create_dir(f.l("slow")).unwrap();
    fs::write(f.l("slow/f"), b"slow").unwrap();
    fs::write(f.l("q"), b"quick").unwrap();
    f.mount(&["--inject", "op=read,every=1,delay=30s,path=/slow/**"]);
    let mut reader = Caller::start(Some(0), "cat", &[f.m("slow/f").as_os_str()]);
    wait_for("the read in its delay", || injections(&f) == [(1, 0)]);
    let mut stat = Caller::start(Some(0), "stat", &[f.m("q").as_os_str()]);
    let (status, out, took) = stat.reaped("stat beside a waiting read");
    assert!(status.success(), "{status}: {out}");
    assert!(
        reader.running(),
        "the read had ended when stat answered: stat waited behind it ({took:?})"
    );
    eprintln!("stat answered in {took:?} while a read on its CPU waited");
    drop(reader);
    // Daemon::stop allows 10 s for the daemon to exit: the delay had 30 s to go.
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}
transports!(a_waiting_request_holds_up_no_other_on_its_cpu);

/// A caller killed while its request waits in a 600 s delay is gone at once (the kernel's
/// FUSE_INTERRUPT ends the delay; fuser 0.18 answered it ENOSYS, and the caller stayed in D
/// state), and the mount unmounts. A caller that catches a signal gets EINTR, which the slow
/// log records too.
fn a_signal_cuts_a_delay_short(t: Transport) {
    let Some(mut f) = Fixture::new("interrupt", t) else {
        return;
    };
    fs::create_dir(f.l("slow")).unwrap();
    fs::write(f.l("slow/f"), b"x").unwrap();
    f.mount(&[
        "--inject",
        "op=lookup,every=1,delay=600s,path=/slow",
        "--slow",
        "1ms",
    ]);
    let mut killed = Caller::start(None, "stat", &[f.m("slow/f").as_os_str()]);
    wait_for("the lookup in its delay", || injections(&f) == [(1, 0)]);
    wait_for("the caller waiting on the mount", || killed.waits_on_fuse());
    killed.signal("KILL");
    let (_, _, took) = killed.reaped("the killed caller");
    eprintln!("a caller killed during a 600 s delay was reaped after {took:?}");
    wait_for("the delay counted as cut", || injections(&f) == [(1, 1)]);

    // perl's handler does not restart the call: stat fails with the errno the mount answered.
    let script = "$SIG{USR1} = sub {}; my @s = stat($ARGV[0]); print(@s ? 0 : 0 + $!)";
    let target = f.m("slow/f");
    let mut caught = Caller::start(
        None,
        "perl",
        &["-e".as_ref(), script.as_ref(), target.as_os_str()],
    );
    wait_for("the second lookup in its delay", || {
        injections(&f) == [(2, 1)]
    });
    wait_for("perl waiting on the mount", || caught.waits_on_fuse());
    caught.signal("USR1");
    let (status, out, _) = caught.reaped("the interrupted caller");
    assert!(status.success(), "{status}");
    assert_eq!(out.trim(), libc::EINTR.to_string(), "stat's errno");
    wait_for("both delays counted as cut", || injections(&f) == [(2, 2)]);
    // A delay counts as cut when the interrupt ends it, and the request is put in the slow log
    // when it has returned through the layers, a moment later (under stress-ng, a read of the
    // log in between found one record).
    let eintr = |slow: &str| {
        slow.lines()
            .filter(|l| {
                l.contains("\"OP_LOOKUP\"") && l.contains(&format!("\"errno\":{},", libc::EINTR))
            })
            .count()
    };
    let slow = || fs::read_to_string(f.m(".fsprof.slow")).unwrap();
    wait_for("both EINTR lookups in the slow log", || eintr(&slow()) >= 2);
    let slow = slow();
    assert_eq!(eintr(&slow), 2, "{slow}");
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}
transports!(a_signal_cuts_a_delay_short);

/// With `--max-threads 3`, CPU 0's callers get three serving threads and no more: two waiting
/// requests leave one to serve the rest; a third takes it, and then the next request waits
/// (once as many requests waited as there were threads, the whole file system used to stop;
/// now that takes the bound). `umount -f` (an abort) frees them all, and the daemon exits at
/// once.
fn the_serving_threads_grow_to_their_bound(t: Transport) {
    let Some(mut f) = Fixture::new("pool", t) else {
        return;
    };
    fs::create_dir(f.l("slow")).unwrap();
    for n in ["a", "b", "c"] {
        fs::write(f.l("slow").join(n), b"x").unwrap();
    }
    fs::write(f.l("q"), b"x").unwrap();
    f.mount(&[
        "--threads",
        "1",
        "--max-threads",
        "3",
        "--inject",
        "op=getattr,every=1,delay=600s,path=/slow/*",
        "--attr-timeout",
        "0s",
    ]);
    let waiting: Vec<Caller> = ["a", "b"]
        .iter()
        .map(|n| Caller::start(Some(0), "stat", &[f.m(&format!("slow/{n}")).as_os_str()]))
        .collect();
    wait_for("two getattrs in their delay", || injections(&f) == [(2, 0)]);
    let mut stat = Caller::start(Some(0), "stat", &[f.m("q").as_os_str()]);
    assert!(stat.reaped("stat beside two waiting requests").0.success());
    assert_eq!(cpu0_servers(&f), 3, "two waiting, one serving");

    let third = Caller::start(Some(0), "stat", &[f.m("slow/c").as_os_str()]);
    wait_for("the third caller waiting", || third.waits_on_fuse());
    let mut blocked = Caller::start(Some(0), "stat", &[f.m("q").as_os_str()]);
    wait_for("the next caller waiting", || blocked.waits_on_fuse());
    // Whatever the third request's state, no fourth thread may start.
    for _ in 0..50 {
        assert_eq!(cpu0_servers(&f), 3, "the bound");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(blocked.running());
    // Aborts the connection (the unmount itself fails while callers are inside): every
    // request fails at once.
    crate::fixture::sh(&format!("umount -f {}", f.mnt.display()));
    assert!(!blocked.reaped("the blocked caller").0.success());
    drop((waiting, third));
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}
transports!(the_serving_threads_grow_to_their_bound);
