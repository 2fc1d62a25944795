//! Hostile clients of a daemon's `--metrics` endpoint, and the checks that the file system
//! beside it does not suffer (shared by the tests of fsprof-fuse and raif: the endpoint code
//! is one).
//!
//! Each attack of [`run`] ([`Attack`]) runs while a [`Workload`] creates, reads and stats
//! files through the mount, which must see no error; the daemon must stay within the
//! endpoint's budget of sockets, threads or memory during the attack (counts read from
//! `/proc`, never durations), and a normal scrape must succeed once the attack ends (waited
//! for with a generous deadline; the time it took is printed).
//!
//! Every client here talks only to the loopback address it is given, sends a bounded number
//! of bytes and connections, and gives up by itself.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fsprof_fuse::daemon::metrics::Limits;

/// How hard to attack: the full set (once per endpoint) or a smoke test of each attack (on the
/// other daemon and transport).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// The sizes of the issue: 8,000 half-open connections, 2,000 pipelined requests, a header
    /// line of up to 64 MiB.
    Full,
    /// Smaller sizes of the same attacks.
    Smoke,
}

/// One attack on the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attack {
    /// `Content-Length: 99999999999999` on a GET (tiny_http allocated it, and the daemon
    /// aborted).
    BodyLength,
    /// A header line that never ends (tiny_http kept it all).
    EndlessHeader,
    /// Connections that send nothing (tiny_http gave each a thread and two descriptors).
    HalfOpen,
    /// One client pipelining requests and never reading (tiny_http's one thread blocked on it,
    /// and every other scrape timed out).
    Pipelining,
}

/// Every attack.
pub const ALL: [Attack; 4] = [
    Attack::BodyLength,
    Attack::EndlessHeader,
    Attack::HalfOpen,
    Attack::Pipelining,
];

/// What is attacked: the endpoint, the daemon serving it and a directory in its mount.
#[derive(Debug, Clone)]
pub struct Target {
    /// The `--metrics` address.
    pub addr: SocketAddr,
    /// The daemon's pid.
    pub pid: u32,
    /// A directory inside the mount for the workload (made if missing).
    pub dir: PathBuf,
}

/// Runs `attack` at `scale` against `target`, with the workload running through the mount,
/// and checks everything the module says.
pub fn run(target: &Target, attack: Attack, scale: Scale) {
    raise_fd_limit();
    let dir = target.dir.join(format!("{attack:?}").to_lowercase());
    std::fs::create_dir_all(&dir).expect("workload directory");
    // The endpoint answers before the attack.
    wait_for_scrape(target.addr, Duration::from_secs(30));
    let files = match scale {
        Scale::Full => 300,
        Scale::Smoke => 100,
    };
    let workload = Workload::start(&dir, files);
    match attack {
        Attack::BodyLength => body_length(target),
        Attack::EndlessHeader => endless_header(target, scale),
        Attack::HalfOpen => half_open(target, scale),
        Attack::Pipelining => pipelining(target, scale),
    }
    let rounds = workload
        .finish()
        .unwrap_or_else(|e| panic!("{attack:?}: the mount failed during the attack: {e}"));
    let took = wait_for_scrape(target.addr, Duration::from_secs(30));
    eprintln!(
        "{attack:?} ({scale:?}): workload {rounds} rounds of {files} files without error; \
         a normal scrape answered {} ms after the attack ended",
        took.as_millis()
    );
}

/// A GET that declares a body of 99,999,999,999,999 bytes (and sends none): the daemon lives
/// (tiny_http allocated the body once the request was answered, and the daemon aborted), and
/// the request is answered `413` or the connection closed, the body never read.
fn body_length(target: &Target) {
    let mut s = connect(target.addr).expect("connect");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: fsprof\r\nContent-Length: 99999999999999\r\n\r\n")
        .expect("send the request");
    // Until the server closes the connection (or 10 s without a byte).
    let answer = read_some(&mut s, 4096);
    let status = answer.lines().next().unwrap_or("");
    eprintln!("BodyLength: answered {status:?}");
    wait_for_scrape(target.addr, Duration::from_secs(30));
    assert_alive(target);
    assert!(
        status.is_empty() || status.starts_with("HTTP/1.1 4"),
        "a request with a body was answered {status:?}"
    );
}

/// A header line of up to 64 MiB (16 MiB for a smoke test), sent until the server closes the
/// connection: it must close it well before that, and the daemon must not grow by what was
/// sent.
fn endless_header(target: &Target, scale: Scale) {
    let max: u64 = match scale {
        Scale::Full => 64 << 20,
        Scale::Smoke => 16 << 20,
    };
    let rss_before = rss_kib(target.pid);
    let mut s = connect(target.addr).expect("connect");
    let chunk = vec![b'a'; 64 << 10];
    let mut sent = 0u64;
    let r = s
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: fsprof\r\nX-Endless: ")
        .and_then(|()| {
            while sent < max {
                s.write_all(&chunk)?;
                sent += chunk.len() as u64;
            }
            Ok(())
        });
    let rss_after = rss_kib(target.pid);
    let answer = read_some(&mut s, 4096);
    eprintln!(
        "EndlessHeader: {} KiB sent before the server closed ({:?}), answer {:?}; daemon RSS \
         {rss_before} KiB before, {rss_after} KiB after",
        sent >> 10,
        r.as_ref().err().map(io::Error::kind),
        answer.lines().next().unwrap_or("")
    );
    assert!(
        r.is_err(),
        "the server read all {} MiB of one header line",
        max >> 20
    );
    // The kernel's socket buffers hold a few MiB; the daemon keeps none of it.
    assert!(
        rss_after < rss_before + (32 << 10),
        "the daemon grew from {rss_before} KiB to {rss_after} KiB"
    );
    assert_alive(target);
}

/// 8,000 connections (1,000 for a smoke test) that send nothing, held while the workload runs:
/// the daemon holds at most the endpoint's connection limit of sockets and starts no thread,
/// and (full scale) a scrape gets through while the attacker still holds them all, once the
/// header timeout has closed the connections it serves.
fn half_open(target: &Target, scale: Scale) {
    let n = match scale {
        Scale::Full => 8000,
        Scale::Smoke => 1000,
    };
    let limits = Limits::default();
    let (sockets_before, threads_before) = (sockets(target.pid), threads(target.pid));
    let mut held = Vec::with_capacity(n);
    let mut failed = 0;
    let mut most_sockets = 0;
    let mut most_threads = 0;
    for i in 0..n {
        match connect(target.addr) {
            Ok(s) => held.push(s),
            Err(_) => failed += 1,
        }
        if i % 500 == 499 {
            most_sockets = most_sockets.max(sockets(target.pid));
            most_threads = most_threads.max(threads(target.pid));
        }
    }
    most_sockets = most_sockets.max(sockets(target.pid));
    most_threads = most_threads.max(threads(target.pid));
    eprintln!(
        "HalfOpen: {} connections held, {failed} failed; daemon sockets {sockets_before} \
         before, at most {most_sockets} during; threads {threads_before} before, at most \
         {most_threads} during",
        held.len()
    );
    assert!(
        held.len() >= n * 9 / 10,
        "only {} of {n} connections were made",
        held.len()
    );
    assert!(
        most_sockets <= sockets_before + limits.connections + 1,
        "the daemon held {most_sockets} sockets ({sockets_before} before)"
    );
    assert!(
        most_threads <= threads_before + 8,
        "the daemon ran {most_threads} threads ({threads_before} before)"
    );
    if scale == Scale::Full {
        // The connections it serves send no request head: the header timeout ends them, and
        // a scrape gets in while the attacker holds every connection it made.
        let took = wait_for_scrape(target.addr, Duration::from_secs(40));
        eprintln!(
            "HalfOpen: a scrape got through {} ms into the attack, the attacker still \
             holding {} connections",
            took.as_millis(),
            held.len()
        );
    }
    drop(held);
}

/// 2,000 requests pipelined on one connection that never reads: scrapes on other connections
/// are answered meanwhile, and (full scale) the server drops the client once its writes have
/// stalled for the write timeout.
fn pipelining(target: &Target, scale: Scale) {
    let mut s = connect(target.addr).expect("connect");
    let request = b"GET /metrics HTTP/1.1\r\nHost: fsprof\r\n\r\n";
    let all: Vec<u8> = request.repeat(2000);
    // The requests fit in the socket buffers: this returns although nothing is read.
    s.write_all(&all).expect("send the pipelined requests");
    for i in 0..3 {
        // Well under the write timeout (10 s): a scrape waiting for the stalled client to be
        // dropped would fail here; a normal one takes milliseconds.
        let t = Instant::now();
        scrape(target.addr, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("scrape {i} while a client pipelines: {e}"));
        eprintln!(
            "Pipelining: scrape {i} answered in {} ms while the client held its requests",
            t.elapsed().as_millis()
        );
    }
    if scale == Scale::Full {
        let t = Instant::now();
        let deadline = t + Duration::from_secs(40);
        while tcp_state(&s).expect("TCP_INFO") == TCP_ESTABLISHED {
            assert!(
                Instant::now() < deadline,
                "the client that does not read was never dropped"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!(
            "Pipelining: the server dropped the client that does not read {} ms after its \
             requests",
            t.elapsed().as_millis()
        );
    }
    drop(s);
}

/// A connection to `addr` (at most 5 s to connect; reads and writes give up after 10 s).
pub fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.set_write_timeout(Some(Duration::from_secs(10)))?;
    Ok(s)
}

/// `tcpi_state` of an established connection.
const TCP_ESTABLISHED: u8 = 1;

/// The TCP state of `s` (`tcpi_state` of `TCP_INFO`): no longer established once the server
/// has closed or reset it, whatever its receive buffer still holds.
fn tcp_state(s: &TcpStream) -> io::Result<u8> {
    use std::os::fd::AsRawFd;
    // SAFETY: a zeroed tcp_info is valid (plain integers).
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` and `len` are valid out-pointers of the size given; the descriptor is
    // open for the call (borrowed from `s`).
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(info.tcpi_state)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Up to `max` bytes of what the server sends before it closes or goes quiet (as text).
fn read_some(s: &mut TcpStream, max: usize) -> String {
    let mut buf = vec![0u8; max];
    let mut n = 0;
    while n < max {
        match s.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// One normal scrape of `GET /metrics`, given up after `timeout` per step; the exposition must
/// be there.
pub fn scrape(addr: SocketAddr, timeout: Duration) -> Result<(), String> {
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: fsprof\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("send: {e}"))?;
    let mut body = Vec::new();
    (&mut s)
        .take(64 << 20)
        .read_to_end(&mut body)
        .map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&body);
    let status = text.lines().next().unwrap_or("");
    if !status.starts_with("HTTP/1.1 200") {
        return Err(format!("answered {status:?}"));
    }
    if !text.contains("fsprof_build_info") {
        return Err("no exposition in the answer".into());
    }
    Ok(())
}

/// Scrapes `addr` until one succeeds; returns how long that took. Panics after `deadline`.
pub fn wait_for_scrape(addr: SocketAddr, deadline: Duration) -> Duration {
    let start = Instant::now();
    loop {
        match scrape(addr, Duration::from_secs(2)) {
            Ok(()) => return start.elapsed(),
            Err(e) if start.elapsed() > deadline => {
                panic!("no scrape of {addr} succeeded in {deadline:?}: {e}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Panics if the daemon has exited (gone, or a zombie not yet reaped).
fn assert_alive(target: &Target) {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", target.pid)).unwrap_or_default();
    // `PID (COMM) STATE ...`; COMM may hold spaces and parentheses.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    assert!(
        state.is_some_and(|s| s != "Z" && s != "X"),
        "the daemon died (state {state:?})"
    );
}

/// The daemon's open sockets (the endpoint's listener and connections).
pub fn sockets(pid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
        })
        .count()
}

/// A number from the daemon's `/proc/PID/status` line `field:` (0 if it is gone).
fn status_field(pid: u32, field: &str) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix(field)?
                    .strip_prefix(':')?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
        })
        .unwrap_or(0)
}

/// The daemon's threads.
pub fn threads(pid: u32) -> usize {
    status_field(pid, "Threads")
}

/// The daemon's resident memory, in KiB.
pub fn rss_kib(pid: u32) -> usize {
    status_field(pid, "VmRSS")
}

/// Raises this process's open-file limit to its hard limit (the half-open attack holds 8,000
/// connections).
fn raise_fd_limit() {
    let _ = fsprof_fuse::sys::raise_nofile_limit();
}

/// Files created, written, read back and stat'ed through a mount, round after round on a
/// thread of its own, until [`Workload::finish`]; the first error ends it.
pub struct Workload {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<u64, String>>>,
}

impl Workload {
    /// Starts rounds of `files` files in `dir`.
    pub fn start(dir: &Path, files: usize) -> Workload {
        let stop = Arc::new(AtomicBool::new(false));
        let (dir, s) = (dir.to_path_buf(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut rounds = 0u64;
            // At least one whole round, however short the attack.
            while rounds == 0 || !s.load(Ordering::Relaxed) {
                round(&dir, files, rounds)?;
                rounds += 1;
            }
            Ok(rounds)
        });
        Workload {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops after the round under way; the rounds done, or the first error.
    pub fn finish(mut self) -> Result<u64, String> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err("the workload panicked".into()),
            None => Err("no workload".into()),
        }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One round: each file created (or replaced) with contents of its own, read back, stat'ed.
fn round(dir: &Path, files: usize, n: u64) -> Result<(), String> {
    for i in 0..files {
        let p = dir.join(format!("f{i}"));
        let data = format!("round {n} file {i}\n").repeat(1 + i % 64);
        std::fs::write(&p, &data).map_err(|e| format!("write {}: {e}", p.display()))?;
        let back = std::fs::read(&p).map_err(|e| format!("read {}: {e}", p.display()))?;
        if back != data.as_bytes() {
            return Err(format!("{} read back other bytes", p.display()));
        }
        let len = std::fs::metadata(&p)
            .map_err(|e| format!("stat {}: {e}", p.display()))?
            .len();
        if len != data.len() as u64 {
            return Err(format!(
                "{} has {len} bytes, not {}",
                p.display(),
                data.len()
            ));
        }
    }
    Ok(())
}
