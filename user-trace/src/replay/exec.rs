//! Executing a replay plan: one thread per traced thread, each traced process's descriptors
//! in a table (traced number → the replay's handle), waits for the steps other threads must
//! finish first, and the traced think times when asked.

use std::collections::HashMap;
use std::ffi::{CString, c_int};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use profile_store::bucket::{BucketMap, Resolution};

use crate::abi::{self, BUCKETS, CALLS, id, is_lock_cmd};
use crate::replay::plan::{Step, StepKind, ThreadInfo};
use crate::sys::calls::{self, Io, StatInfo, StatKind, Xattr};
use crate::sys::streams::{Dir, Stream};
use crate::trace::{Arg, Record, format_call, format_result};

/// Largest transfer a replayed call makes (a bigger traced one is cut, and then mismatches).
const MAX_TRANSFER: usize = 64 << 20;

/// A descriptor the replay owns; closed on drop.
#[derive(Debug)]
struct Owned(c_int);

impl Owned {
    fn into_raw(self) -> c_int {
        let f = self.0;
        std::mem::forget(self);
        f
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        calls::close(self.0);
    }
}

/// A replayed descriptor.
#[derive(Debug)]
enum Handle {
    Fd(Owned),
    Stream(Stream, CString),
    Dir(Dir),
}

impl Handle {
    fn fd(&self) -> c_int {
        match self {
            Handle::Fd(f) => f.0,
            Handle::Stream(s, _) => s.fd(),
            Handle::Dir(d) => d.fd(),
        }
    }

    /// The child's copy at a fork: a duplicate sharing the open file description.
    fn dup(&mut self) -> Option<Handle> {
        let fd = calls::dup_min(self.fd(), 3);
        if fd < 0 {
            return None;
        }
        let fd = Owned(fd as c_int);
        match self {
            Handle::Fd(_) => Some(Handle::Fd(fd)),
            Handle::Stream(s, mode) => {
                s.flush();
                let raw = fd.into_raw();
                match Stream::fdopen(raw, mode) {
                    Ok(c) => Some(Handle::Stream(c, mode.clone())),
                    Err(_) => {
                        drop(Owned(raw));
                        None
                    }
                }
            }
            Handle::Dir(_) => {
                let raw = fd.into_raw();
                match Dir::fdopen(raw) {
                    Ok(d) => Some(Handle::Dir(d)),
                    Err(_) => {
                        drop(Owned(raw));
                        None
                    }
                }
            }
        }
    }

    /// Closes the handle: the result of close, fclose or closedir.
    fn close(self) -> i64 {
        match self {
            Handle::Fd(f) => calls::close(f.into_raw()),
            Handle::Stream(s, _) => s.close(),
            Handle::Dir(d) => d.close(),
        }
    }
}

/// One traced process's descriptors.
#[derive(Debug, Default)]
struct Table {
    fds: HashMap<i64, Handle>,
}

/// Why a call was not replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skip {
    /// A descriptor the trace did not open (standard streams, pipes, sockets), or one whose
    /// replayed open failed.
    Fd,
    /// A call or command the replay does not issue.
    Unsupported,
}

/// Waits between threads: how many steps each thread has finished.
struct Progress {
    done: Vec<AtomicUsize>,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Progress {
    fn new(threads: usize) -> Progress {
        Progress {
            done: (0..threads).map(|_| AtomicUsize::new(0)).collect(),
            waiters: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// Waits until thread `t` has finished its step `i`.
    fn wait(&self, t: u32, i: u32) {
        let (t, i) = (t as usize, i as usize);
        if self.done[t].load(Ordering::SeqCst) > i {
            return;
        }
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.waiters.fetch_add(1, Ordering::SeqCst);
        while self.done[t].load(Ordering::SeqCst) <= i {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// Thread `t` finished its step `i`.
    fn complete(&self, t: usize, i: usize) {
        self.done[t].store(i + 1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.cv.notify_all();
        }
    }
}

/// A call whose replayed result differs from the traced one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Traced process.
    pub pid: u32,
    /// Traced thread.
    pub tid: u32,
    /// The traced call as strace prints it, with its traced result.
    pub call: String,
    /// What the replay got.
    pub got: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "mismatch: {}/{} {}, replay {}",
            self.pid, self.tid, self.call, self.got
        )
    }
}

/// What one replay thread did.
#[derive(Debug)]
pub struct ThreadOutcome {
    /// Per call id: count, total cycles, buckets.
    pub counters: Vec<[u64; 2 + BUCKETS]>,
    /// Calls replayed.
    pub replayed: u64,
    /// Calls on paths outside the root.
    pub outside: u64,
    /// Calls on descriptors the replay does not have.
    pub no_fd: u64,
    /// Calls the replay does not issue.
    pub unsupported: u64,
    /// Mismatches found.
    pub mismatches: u64,
    /// The first of them.
    pub listed: Vec<Mismatch>,
    /// When the thread's last call ended (the replay's elapsed time is the latest of these, not
    /// when the progress loop noticed).
    pub ended: Instant,
}

/// State shared by the replay threads.
pub struct Shared<'a> {
    threads: &'a [ThreadInfo],
    progress: Progress,
    tables: Mutex<HashMap<u32, Arc<Mutex<Table>>>>,
    recorded: bool,
    list_limit: usize,
    /// Calls finished so far, over all threads (for progress reports).
    pub finished: AtomicU64,
    /// Opened when the threads may start (the first steps are queued).
    go: (Mutex<bool>, Condvar),
}

impl<'a> Shared<'a> {
    /// State for replaying `threads`; `recorded` keeps the traced think times.
    pub fn new(threads: &'a [ThreadInfo], recorded: bool, list_limit: usize) -> Shared<'a> {
        Shared {
            threads,
            progress: Progress::new(threads.len()),
            tables: Mutex::new(HashMap::new()),
            recorded,
            list_limit,
            finished: AtomicU64::new(0),
            go: (Mutex::new(false), Condvar::new()),
        }
    }

    /// Lets the replay threads start.
    pub fn start(&self) {
        *lock(&self.go.0) = true;
        self.go.1.notify_all();
    }

    fn table(&self, pid: u32) -> Arc<Mutex<Table>> {
        let mut t = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        t.entry(pid).or_default().clone()
    }

    /// Replays thread `t`: the steps `steps` brings, in order, until it closes.
    pub fn run_thread(&self, t: usize, steps: std::sync::mpsc::Receiver<Step>) -> ThreadOutcome {
        let th = &self.threads[t];
        let map = BucketMap::new(Resolution::ONE);
        let mut out = ThreadOutcome {
            counters: vec![[0; 2 + BUCKETS]; CALLS.len()],
            replayed: 0,
            outside: 0,
            no_fd: 0,
            unsupported: 0,
            mismatches: 0,
            listed: Vec::new(),
            ended: Instant::now(),
        };
        let mut buf = Vec::new();
        let mut open = lock(&self.go.0);
        while !*open {
            open = self.go.1.wait(open).unwrap_or_else(|e| e.into_inner());
        }
        drop(open);
        let mut prev_end = Instant::now();
        for (i, step) in steps.iter().enumerate() {
            for &(dt, di) in &step.deps {
                self.progress.wait(dt, di);
            }
            if self.recorded && step.think_ns > 0 {
                wait_until(prev_end + Duration::from_nanos(step.think_ns));
            }
            self.step(th.pid, th.tid, &step, &mut buf, &map, &mut out);
            prev_end = Instant::now();
            self.progress.complete(t, i);
            self.finished.fetch_add(1, Ordering::Relaxed);
        }
        out.ended = prev_end;
        out
    }

    fn step(
        &self,
        pid: u32,
        tid: u32,
        step: &Step,
        buf: &mut Vec<u8>,
        map: &BucketMap,
        out: &mut ThreadOutcome,
    ) {
        match &step.kind {
            StepKind::Fork { child } => {
                let parent = self.table(pid);
                let mut copy = Table::default();
                for (&k, h) in lock(&parent).fds.iter_mut() {
                    if let Some(d) = h.dup() {
                        copy.fds.insert(k, d);
                    }
                }
                *lock(&self.table(*child)) = copy;
            }
            StepKind::Call { outside: true, .. } => out.outside += 1,
            StepKind::Call { rec, paths, .. } => {
                let table = self.table(pid);
                let t0 = profile_store::clock::now();
                let r = run_call(rec, paths, &table, buf);
                let cycles = profile_store::clock::now().saturating_sub(t0);
                match r {
                    Ok((got, st)) => {
                        out.replayed += 1;
                        let c = &mut out.counters[rec.call as usize];
                        c[0] += 1;
                        c[1] = c[1].wrapping_add(cycles);
                        c[2 + map.bucket(cycles)] += 1;
                        if let Some(why) = mismatch(rec, got, st) {
                            out.mismatches += 1;
                            if out.listed.len() < self.list_limit {
                                out.listed.push(Mismatch {
                                    pid,
                                    tid,
                                    call: format!("{} = {}", format_call(rec), format_result(rec)),
                                    got: why,
                                });
                            }
                        }
                    }
                    Err(Skip::Fd) => out.no_fd += 1,
                    Err(Skip::Unsupported) => out.unsupported += 1,
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits until `t`: sleeps for most of a long wait, spins the last stretch.
fn wait_until(t: Instant) {
    const SPIN: Duration = Duration::from_micros(100);
    loop {
        let now = Instant::now();
        if now >= t {
            return;
        }
        let left = t - now;
        if left > SPIN {
            std::thread::sleep(left - SPIN);
        } else {
            std::hint::spin_loop();
        }
    }
}

/// A result as text.
fn result_text(v: i64) -> String {
    format_result(&Record {
        result: v,
        ..Record::default()
    })
}

/// Why the replayed result differs from the traced one, if it does.
fn mismatch(rec: &Record, got: i64, st: Option<StatInfo>) -> Option<String> {
    use id::*;
    let traced = rec.result;
    let differ = if traced < 0 || got < 0 {
        traced != got
    } else {
        match rec.call {
            // New descriptors are numbered by the replay's own table.
            OPEN | OPENAT | CREAT | DUP | DUP2 | DUP3 | FOPEN | FDOPEN | FREOPEN | OPENDIR
            | FDOPENDIR => false,
            // Values that depend on the file system (flags, name lengths, labels).
            FCNTL if !is_lock_cmd(rec.int(0).unwrap_or(0)) => false,
            READLINK | READLINKAT | LISTXATTR | LLISTXATTR | FLISTXATTR => false,
            // Directory listings: entries come in another order and size; compare the end.
            GETDENTS64 | FGETS => (traced > 0) != (got > 0),
            _ => traced != got,
        }
    };
    if differ {
        return Some(result_text(got));
    }
    if let (Some((mode, size)), Some((_, got_size))) = (rec.stat(), st) {
        if mode as u32 & libc::S_IFMT == libc::S_IFREG && size != got_size {
            return Some(format!(
                "{} with size {got_size} (traced {size})",
                result_text(got)
            ));
        }
    }
    None
}

/// A buffer of `n` bytes (capped), reused between calls.
fn buffer(buf: &mut Vec<u8>, n: u64) -> &mut [u8] {
    let n = (n as usize).min(MAX_TRANSFER);
    if buf.len() < n {
        buf.resize(n, b'x');
    }
    &mut buf[..n]
}

/// The replay's descriptor for the traced descriptor `fd`.
fn fd_in(table: &Mutex<Table>, fd: Option<i64>) -> Result<c_int, Skip> {
    let fd = fd.ok_or(Skip::Fd)?;
    lock(table).fds.get(&fd).map(Handle::fd).ok_or(Skip::Fd)
}

/// A string item of the record as a C string.
fn cstr(rec: &Record, k: usize) -> Option<CString> {
    rec.path(k).and_then(|s| CString::new(s).ok())
}

/// Runs one traced call against the replay directory: its result (or `-errno`) and, for stat
/// calls, what it found.
fn run_call(
    rec: &Record,
    paths: &[Option<CString>],
    table: &Mutex<Table>,
    buf: &mut Vec<u8>,
) -> Result<(i64, Option<StatInfo>), Skip> {
    use id::*;
    let path = |k: usize| paths.get(k).and_then(Option::as_deref).ok_or(Skip::Fd);
    let fd = |k: usize| fd_in(table, rec.fd(k));
    let size = rec.size().unwrap_or(0);
    let off = |k: usize| rec.off(k).unwrap_or(0);
    let int = |k: usize| rec.int(k).unwrap_or(0) as c_int;
    let plain = |v: i64| Ok((v, None));
    let new_fd = |got: i64| {
        if got >= 0 {
            if rec.result >= 0 {
                let old = lock(table)
                    .fds
                    .insert(rec.result, Handle::Fd(Owned(got as c_int)));
                drop(old);
            } else {
                calls::close(got as c_int);
            }
        }
        Ok((got, None))
    };
    let call = rec.call;
    match call {
        OPEN | OPENAT => new_fd(calls::open(
            path(0)?,
            rec.flags() as c_int,
            rec.mode() as u32,
        )),
        CREAT => new_fd(calls::creat(path(0)?, rec.mode() as u32)),
        CLOSE => {
            let h = lock(table)
                .fds
                .remove(&rec.fd(0).ok_or(Skip::Fd)?)
                .ok_or(Skip::Fd)?;
            plain(h.close())
        }
        READ | PREAD | READV | PREADV | PREADV2 => {
            let io = match call {
                READ => Io::Plain,
                PREAD => Io::At(off(0)),
                READV => Io::Vec,
                PREADV => Io::VecAt(off(0)),
                _ => Io::VecAt2(off(0), rec.flags() as c_int),
            };
            let f = fd(0)?;
            plain(calls::read(f, buffer(buf, size), io))
        }
        WRITE | PWRITE | WRITEV | PWRITEV | PWRITEV2 => {
            let io = match call {
                WRITE => Io::Plain,
                PWRITE => Io::At(off(0)),
                WRITEV => Io::Vec,
                PWRITEV => Io::VecAt(off(0)),
                _ => Io::VecAt2(off(0), rec.flags() as c_int),
            };
            let f = fd(0)?;
            plain(calls::write(f, buffer(buf, size), io))
        }
        LSEEK => plain(calls::lseek(fd(0)?, off(0), int(0))),
        STAT => Ok(calls::stat(path(0)?, StatKind::Follow)),
        LSTAT => Ok(calls::stat(path(0)?, StatKind::NoFollow)),
        FSTATAT => Ok(calls::stat(path(0)?, StatKind::At(rec.flags() as c_int))),
        STATX => Ok(calls::statx(
            libc::AT_FDCWD,
            path(0)?,
            rec.flags() as c_int,
            rec.mode() as u32,
        )),
        FSTAT => Ok(calls::fstat(fd(0)?)),
        STATFS => plain(calls::statfs(Some(path(0)?), -1)),
        FSTATFS => plain(calls::statfs(None, fd(0)?)),
        ACCESS => plain(calls::access(path(0)?, int(0), 0)),
        FACCESSAT => plain(calls::access(path(0)?, int(0), rec.flags() as c_int)),
        MKDIR | MKDIRAT => plain(calls::mkdir(path(0)?, rec.mode() as u32)),
        RMDIR => plain(calls::rmdir(path(0)?)),
        UNLINK => plain(calls::unlink(path(0)?, 0)),
        UNLINKAT => plain(calls::unlink(path(0)?, rec.flags() as c_int)),
        REMOVE => plain(calls::remove(path(0)?)),
        RENAME | RENAMEAT => plain(calls::rename(path(0)?, path(1)?, 0)),
        RENAMEAT2 => plain(calls::rename(path(0)?, path(1)?, rec.flags() as u32)),
        LINK => plain(calls::link(path(0)?, path(1)?, 0)),
        LINKAT => plain(calls::link(path(0)?, path(1)?, rec.flags() as c_int)),
        SYMLINK | SYMLINKAT => {
            let target = paths
                .first()
                .cloned()
                .flatten()
                .or_else(|| cstr(rec, 0))
                .ok_or(Skip::Fd)?;
            plain(calls::symlink(&target, path(1)?))
        }
        READLINK | READLINKAT => plain(calls::readlink(path(0)?, buffer(buf, size))),
        TRUNCATE => plain(calls::truncate(Some(path(0)?), -1, off(0))),
        FTRUNCATE => plain(calls::truncate(None, fd(0)?, off(0))),
        FSYNC => plain(calls::fsync(fd(0)?, false)),
        FDATASYNC => plain(calls::fsync(fd(0)?, true)),
        FALLOCATE => plain(calls::fallocate(fd(0)?, int(0), off(0), off(1))),
        POSIX_FALLOCATE => plain(calls::posix_fallocate(fd(0)?, off(0), off(1))),
        COPY_FILE_RANGE => plain(calls::copy_file_range(
            fd(0)?,
            off(0),
            fd(1)?,
            off(1),
            (size as usize).min(MAX_TRANSFER),
            rec.flags() as u32,
        )),
        SENDFILE => plain(calls::sendfile(
            fd(0)?,
            fd(1)?,
            off(0),
            (size as usize).min(MAX_TRANSFER),
        )),
        OPENDIR => {
            let got = match Dir::open(path(0)?) {
                Ok(d) => {
                    let f = d.fd() as i64;
                    if rec.result >= 0 {
                        lock(table).fds.insert(rec.result, Handle::Dir(d));
                    }
                    f
                }
                Err(e) => e,
            };
            plain(got)
        }
        FDOPENDIR => {
            let key = rec.fd(0).ok_or(Skip::Fd)?;
            let mut t = lock(table);
            let raw = match t.fds.remove(&key).ok_or(Skip::Fd)? {
                Handle::Fd(f) => f.into_raw(),
                other => {
                    t.fds.insert(key, other);
                    return Err(Skip::Unsupported);
                }
            };
            match Dir::fdopen(raw) {
                Ok(d) => {
                    t.fds.insert(key, Handle::Dir(d));
                    plain(raw as i64)
                }
                Err(e) => {
                    t.fds.insert(key, Handle::Fd(Owned(raw)));
                    plain(e)
                }
            }
        }
        READDIR => match lock(table).fds.get_mut(&rec.fd(0).ok_or(Skip::Fd)?) {
            Some(Handle::Dir(d)) => plain(d.read()),
            _ => Err(Skip::Fd),
        },
        CLOSEDIR => {
            let h = lock(table)
                .fds
                .remove(&rec.fd(0).ok_or(Skip::Fd)?)
                .ok_or(Skip::Fd)?;
            plain(h.close())
        }
        GETDENTS64 => {
            let f = fd(0)?;
            plain(calls::getdents64(f, buffer(buf, size)))
        }
        CHMOD => plain(calls::chmod(Some(path(0)?), -1, rec.mode() as u32, 0)),
        FCHMOD => plain(calls::chmod(None, fd(0)?, rec.mode() as u32, 0)),
        FCHMODAT => plain(calls::chmod(
            Some(path(0)?),
            -1,
            rec.mode() as u32,
            rec.flags() as c_int,
        )),
        CHOWN | LCHOWN | FCHOWNAT => {
            let flags = match call {
                LCHOWN => libc::AT_SYMLINK_NOFOLLOW,
                FCHOWNAT => rec.flags() as c_int,
                _ => 0,
            };
            plain(calls::chown(
                Some(path(0)?),
                -1,
                int(0) as u32,
                int(1) as u32,
                flags,
            ))
        }
        FCHOWN => plain(calls::chown(None, fd(0)?, int(0) as u32, int(1) as u32, 0)),
        UTIMENSAT => plain(calls::utimens(
            libc::AT_FDCWD,
            Some(path(0)?),
            rec.flags() as c_int,
        )),
        FUTIMENS => plain(calls::utimens(fd(0)?, None, 0)),
        SETXATTR | LSETXATTR | GETXATTR | LGETXATTR | LISTXATTR | LLISTXATTR | REMOVEXATTR
        | LREMOVEXATTR => {
            let nofollow = matches!(call, LSETXATTR | LGETXATTR | LLISTXATTR | LREMOVEXATTR);
            let op = match call {
                SETXATTR | LSETXATTR => Xattr::Set(rec.flags() as c_int),
                GETXATTR | LGETXATTR => Xattr::Get,
                LISTXATTR | LLISTXATTR => Xattr::List,
                _ => Xattr::Remove,
            };
            let name = cstr(rec, 1);
            let p = path(0)?;
            plain(calls::xattr(
                Some(p),
                nofollow,
                -1,
                name.as_deref(),
                buffer(buf, size),
                op,
            ))
        }
        FSETXATTR | FGETXATTR | FLISTXATTR | FREMOVEXATTR => {
            let op = match call {
                FSETXATTR => Xattr::Set(rec.flags() as c_int),
                FGETXATTR => Xattr::Get,
                FLISTXATTR => Xattr::List,
                _ => Xattr::Remove,
            };
            let name = cstr(rec, 0);
            let f = fd(0)?;
            plain(calls::xattr(
                None,
                false,
                f,
                name.as_deref(),
                buffer(buf, size),
                op,
            ))
        }
        FCNTL => {
            let cmd = int(0);
            let f = fd(0)?;
            let arg = rec.args.iter().find_map(|a| match a {
                Arg::Lock(l) => Some(Err(*l)),
                Arg::FcntlArg(v) => Some(Ok(*v)),
                _ => None,
            });
            match (cmd, arg) {
                (_, Some(Err(l))) => plain(calls::fcntl_lock(f, cmd, l)),
                (libc::F_DUPFD | libc::F_DUPFD_CLOEXEC, Some(Ok(min))) => {
                    new_fd(calls::dup_min(f, min.max(0) as c_int))
                }
                (libc::F_GETFD | libc::F_SETFD | libc::F_GETFL | libc::F_SETFL, Some(Ok(v))) => {
                    plain(calls::fcntl_int(f, cmd, v as c_int))
                }
                _ => Err(Skip::Unsupported),
            }
        }
        FLOCK => plain(calls::flock(fd(0)?, int(0))),
        DUP => new_fd(calls::dup_min(fd(0)?, 3)),
        DUP2 | DUP3 => {
            let got = calls::dup_min(fd(0)?, 3);
            if got >= 0 {
                match rec.fd(1) {
                    Some(new) if rec.result >= 0 => {
                        let old = lock(table).fds.insert(new, Handle::Fd(Owned(got as c_int)));
                        drop(old);
                    }
                    _ => {
                        calls::close(got as c_int);
                    }
                }
            }
            plain(got)
        }
        CHDIR => {
            // Paths are resolved against the traced working directory already; the replay
            // checks the directory as chdir would.
            let (v, st) = calls::stat(path(0)?, StatKind::Follow);
            let v = match st {
                Some((mode, _)) if mode as u32 & libc::S_IFMT != libc::S_IFDIR => {
                    -(libc::ENOTDIR as i64)
                }
                _ => v,
            };
            plain(v)
        }
        FCHDIR => plain(calls::fstat(fd(0)?).0),
        FOPEN => {
            let mode = cstr(rec, 1).ok_or(Skip::Fd)?;
            let got = match Stream::open(path(0)?, &mode) {
                Ok(s) => {
                    let f = s.fd() as i64;
                    if rec.result >= 0 {
                        lock(table).fds.insert(rec.result, Handle::Stream(s, mode));
                    }
                    f
                }
                Err(e) => e,
            };
            plain(got)
        }
        FDOPEN => {
            let mode = cstr(rec, 0).ok_or(Skip::Fd)?;
            let key = rec.fd(0).ok_or(Skip::Fd)?;
            let mut t = lock(table);
            let raw = match t.fds.remove(&key).ok_or(Skip::Fd)? {
                Handle::Fd(f) => f.into_raw(),
                other => {
                    t.fds.insert(key, other);
                    return Err(Skip::Unsupported);
                }
            };
            match Stream::fdopen(raw, &mode) {
                Ok(s) => {
                    t.fds.insert(key, Handle::Stream(s, mode));
                    plain(raw as i64)
                }
                Err(e) => {
                    t.fds.insert(key, Handle::Fd(Owned(raw)));
                    plain(e)
                }
            }
        }
        FREOPEN => {
            let mode = cstr(rec, 1).ok_or(Skip::Fd)?;
            let p = path(0)?;
            if let Some(old) = rec.fd(0).and_then(|k| lock(table).fds.remove(&k)) {
                old.close();
            }
            let got = match Stream::open(p, &mode) {
                Ok(s) => {
                    let f = s.fd() as i64;
                    if rec.result >= 0 {
                        lock(table).fds.insert(rec.result, Handle::Stream(s, mode));
                    }
                    f
                }
                Err(e) => e,
            };
            plain(got)
        }
        FCLOSE => {
            let h = lock(table)
                .fds
                .remove(&rec.fd(0).ok_or(Skip::Fd)?)
                .ok_or(Skip::Fd)?;
            plain(h.close())
        }
        FFLUSH if rec.fd(0) == Some(-1) => {
            let mut t = lock(table);
            let mut v = 0;
            for h in t.fds.values_mut() {
                if let Handle::Stream(s, _) = h {
                    v = v.min(s.flush());
                }
            }
            plain(v)
        }
        FREAD | FWRITE | FGETS | FPUTS | FFLUSH | FSEEK | FSEEKO | FTELL | FTELLO => {
            let mut t = lock(table);
            let Some(Handle::Stream(s, _)) = t.fds.get_mut(&rec.fd(0).ok_or(Skip::Fd)?) else {
                return Err(Skip::Fd);
            };
            let v = match call {
                FREAD => s.read(buffer(buf, size)),
                FWRITE => s.write(buffer(buf, size)),
                FGETS => s.gets(buffer(buf, size)),
                FPUTS => {
                    let line = CString::new(vec![b'x'; (size as usize).min(MAX_TRANSFER)])
                        .unwrap_or_default();
                    s.puts(&line)
                }
                FFLUSH => s.flush(),
                FSEEK | FSEEKO => s.seek(off(0), int(0)),
                _ => s.tell(),
            };
            plain(v)
        }
        _ => Err(Skip::Unsupported),
    }
}

/// The calls of a finished replay as a user layer.
pub fn layer(outcomes: &[ThreadOutcome]) -> profile_store::Layer {
    let mut layer = profile_store::Layer::new("user", Resolution::ONE);
    for (c, spec) in abi::CALLS.iter().enumerate() {
        let mut op = profile_store::OpProfile::new(spec.name, BUCKETS, 1);
        for o in outcomes {
            let k = &o.counters[c];
            op.count += k[0];
            op.total = op.total.wrapping_add(k[1]);
            for (b, v) in op.epochs[0].iter_mut().zip(&k[2..]) {
                *b += v;
            }
        }
        if op.count > 0 {
            layer.ops.push(op);
        }
    }
    layer
        .ops
        .sort_by(|a, b| profile_store::ops::listing_order(&a.name, &b.name));
    layer
}
