//! A fake file system for the unit tests of what sits over the operation trait (layers,
//! transports): it records every call it gets, with its arguments and what the request carried,
//! and answers from fixed data, or fails every request with the errno it is told to. Something
//! to do inside each request (panic, reset a profile, make a lower call) can be given
//! ([`Fake::during`]). Nothing touches a disk.
//!
//! Its fixed data: every name is object [`FAKE_INO`] (a regular file of [`FAKE_DATA`]); opens
//! return handle [`FAKE_FH`]; a directory lists [`FAKE_NAMES`] (entry `k` is node `100 + k` and
//! is followed by offset `k + 1`).
//!
//! [`Listing`] and [`list`] read directory listings of any file system as the kernel does.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::{
    Attr, AttrOut, DirPlusSink, DirSink, Entry, FileSystem, FileType, Init, Ino, IoctlOut, Key,
    Lock, Opened, Request, SetAttr, Statfs, WriteFlags,
};
use super::{Outcome, impl_rest};
use crate::protocol::ops::Op;

/// The node every name is.
pub const FAKE_INO: u64 = 42;
/// The handle every open returns.
pub const FAKE_FH: u64 = 7;
/// The contents of every file.
pub const FAKE_DATA: &[u8] = b"fake file data";
/// The names of every directory, in listing order.
pub const FAKE_NAMES: [&str; 3] = ["a", "b", "c"];

/// One call the fake got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The method and its arguments, as `read ino=5 fh=7 offset=0 size=4096`.
    pub what: String,
    /// The request's operation (`None` for `init` and `destroy`, which have no request).
    pub op: Option<Op>,
    /// The request's id.
    pub unique: u64,
    /// Whether the request is recorded ([`Request::recorded`]).
    pub recorded: bool,
    /// Whether the request carries a trace ([`Request::trace`]).
    pub traced: bool,
}

/// What [`Fake::during`] runs.
type During = Box<dyn Fn(&Request) + Send + Sync>;

/// The fake file system (see the module documentation).
#[derive(Default)]
pub struct Fake {
    calls: Mutex<Vec<Call>>,
    fail: AtomicI32,
    during: Option<During>,
}

/// The attributes of node `ino` (a regular file of [`FAKE_DATA`]).
pub fn attr(ino: u64) -> Attr {
    Attr {
        ino,
        size: FAKE_DATA.len() as u64,
        mode: libc::S_IFREG | 0o644,
        nlink: 1,
        ..Attr::default()
    }
}

/// The entry of node `ino`.
pub fn entry(ino: u64) -> Entry {
    Entry {
        attr: attr(ino),
        generation: 1,
        entry_ttl: Duration::from_secs(1),
        attr_ttl: Duration::from_secs(1),
    }
}

impl Fake {
    /// A fake that answers every request.
    pub fn new() -> Fake {
        Fake::default()
    }

    /// A fake that runs `f` inside every request (after recording it, before answering).
    pub fn during(f: impl Fn(&Request) + Send + Sync + 'static) -> Fake {
        Fake {
            during: Some(Box::new(f)),
            ..Fake::default()
        }
    }

    /// From now on, fails every request with `errno` (0: answers again).
    pub fn fail_with(&self, errno: i32) {
        self.fail.store(errno, Ordering::Relaxed);
    }

    /// The calls so far, oldest first.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().clone()
    }

    /// What the calls so far were (their [`Call::what`]), oldest first.
    pub fn seen(&self) -> Vec<String> {
        self.calls.lock().iter().map(|c| c.what.clone()).collect()
    }

    /// Records the call `what` of `req`, runs what is to be done during it, and says whether
    /// to fail it.
    fn call(&self, req: &Request, what: String) -> io::Result<()> {
        self.calls.lock().push(Call {
            what,
            op: Some(req.op),
            unique: req.unique,
            recorded: req.recorded(),
            traced: req.trace().is_some(),
        });
        if let Some(f) = &self.during {
            f(req);
        }
        match self.fail.load(Ordering::Relaxed) {
            0 => Ok(()),
            e => Err(io::Error::from_raw_os_error(e)),
        }
    }

    /// Records a call without a request.
    fn call_bare(&self, what: &str) {
        self.calls.lock().push(Call {
            what: what.into(),
            op: None,
            unique: 0,
            recorded: false,
            traced: false,
        });
    }
}

/// Copies what fits of `value` into `buf` as the xattr calls do: its length for an empty
/// `buf`, `ERANGE` if it does not fit.
fn sized(value: &[u8], buf: &mut [u8]) -> io::Result<usize> {
    if buf.is_empty() {
        return Ok(value.len());
    }
    let dst = buf
        .get_mut(..value.len())
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ERANGE))?;
    dst.copy_from_slice(value);
    Ok(value.len())
}

/// The listing from `offset`: (node, next offset, name) of each entry.
fn listing(offset: u64) -> impl Iterator<Item = (u64, u64, &'static OsStr)> {
    FAKE_NAMES
        .iter()
        .enumerate()
        .skip(offset as usize)
        .map(|(k, n)| (100 + k as u64, k as u64 + 1, OsStr::new(*n)))
}

/// For [`impl_rest!`]: an operation the fake has no data to answer with: recorded as
/// `method arg=value ...` ([`Shown`]), then answered with nothing.
macro_rules! record {
    (() $name:ident $(#[$m:meta])* ($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        $(#[$m])*
        fn $name(&self, req: &Request, $($arg: $ty),*) -> $ret {
            let mut what = String::from(stringify!($name));
            $(what.push_str(&format!(" {}={}", stringify!($arg), Shown::shown(&$arg)));)*
            Outcome::from_result(self.call(req, what).map(|()| Default::default()))
        }
    };
}

/// An argument as [`Call::what`] shows it: node ids and handles as numbers, names quoted,
/// data by its length.
trait Shown {
    fn shown(&self) -> String;
}

impl<T: Shown + ?Sized> Shown for &T {
    fn shown(&self) -> String {
        (**self).shown()
    }
}

impl Shown for Ino {
    fn shown(&self) -> String {
        self.0.to_string()
    }
}

impl Shown for Key {
    fn shown(&self) -> String {
        self.get().to_string()
    }
}

impl Shown for [u8] {
    fn shown(&self) -> String {
        self.len().to_string()
    }
}

macro_rules! shown_as {
    ($fmt:literal: $($t:ty),*) => {
        $(impl Shown for $t {
            fn shown(&self) -> String {
                format!($fmt, self)
            }
        })*
    };
}
shown_as!("{}": u32, i32, u64, i64, bool);
shown_as!("{:?}": OsStr, Path, Lock);

impl_rest! {
    impl[] FileSystem for Fake, rest: record() {

        type File = Key;
        type Dir = Key;

        fn init(&self, _init: &mut Init) -> io::Result<()> {
            self.call_bare("init");
            Ok(())
        }

        fn destroy(&self) {
            self.call_bare("destroy");
        }

        fn lookup(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<Entry> {
            self.call(req, format!("lookup parent={} name={name:?}", parent.0))?;
            Ok(entry(FAKE_INO))
        }

        fn getattr(&self, req: &Request, ino: Ino, fh: Option<&Key>) -> io::Result<AttrOut> {
            let fh = fh.map(Key::get);
            self.call(req, format!("getattr ino={} fh={fh:?}", ino.0))?;
            Ok(AttrOut {
                attr: attr(ino.0),
                ttl: Duration::from_secs(1),
            })
        }

        fn setattr(
            &self,
            req: &Request,
            ino: Ino,
            set: &SetAttr,
            fh: Option<&Key>,
        ) -> io::Result<AttrOut> {
            let fh = fh.map(Key::get);
            self.call(req, format!("setattr ino={} {set:?} fh={fh:?}", ino.0))?;
            Ok(AttrOut {
                attr: attr(ino.0),
                ttl: Duration::from_secs(1),
            })
        }

        fn readlink(&self, req: &Request, ino: Ino, buf: &mut [u8]) -> io::Result<usize> {
            self.call(req, format!("readlink ino={} size={}", ino.0, buf.len()))?;
            sized(b"target", buf)
        }

        fn mknod(
            &self,
            req: &Request,
            parent: Ino,
            name: &OsStr,
            mode: u32,
            rdev: u32,
        ) -> io::Result<Entry> {
            let p = parent.0;
            self.call(
                req,
                format!("mknod parent={p} name={name:?} mode={mode:o} rdev={rdev}"),
            )?;
            Ok(entry(FAKE_INO))
        }

        fn mkdir(&self, req: &Request, parent: Ino, name: &OsStr, mode: u32) -> io::Result<Entry> {
            let p = parent.0;
            self.call(req, format!("mkdir parent={p} name={name:?} mode={mode:o}"))?;
            Ok(entry(FAKE_INO))
        }

        fn symlink(
            &self,
            req: &Request,
            parent: Ino,
            name: &OsStr,
            target: &Path,
        ) -> io::Result<Entry> {
            let p = parent.0;
            self.call(
                req,
                format!("symlink parent={p} name={name:?} target={target:?}"),
            )?;
            Ok(entry(FAKE_INO))
        }

        fn link(&self, req: &Request, ino: Ino, newparent: Ino, newname: &OsStr) -> io::Result<Entry> {
            let (i, np) = (ino.0, newparent.0);
            self.call(
                req,
                format!("link ino={i} newparent={np} newname={newname:?}"),
            )?;
            Ok(entry(ino.0))
        }

        fn open(&self, req: &Request, ino: Ino, flags: i32) -> io::Result<Opened<Key>> {
            self.call(req, format!("open ino={} flags={flags:o}", ino.0))?;
            Ok(Opened::new(Key::new(FAKE_FH), Default::default()))
        }

        fn read(
            &self,
            req: &Request,
            ino: Ino,
            fh: &Key,
            offset: u64,
            buf: &mut [u8],
        ) -> io::Result<usize> {
            let (i, f, n) = (ino.0, fh.get(), buf.len());
            self.call(req, format!("read ino={i} fh={f} offset={offset} size={n}"))?;
            let data = FAKE_DATA.get(offset as usize..).unwrap_or_default();
            let n = n.min(data.len());
            buf[..n].copy_from_slice(&data[..n]);
            Ok(n)
        }

        fn write(
            &self,
            req: &Request,
            ino: Ino,
            fh: &Key,
            offset: u64,
            data: &[u8],
            flags: WriteFlags,
        ) -> io::Result<u32> {
            let (i, f, n) = (ino.0, fh.get(), data.len());
            self.call(
                req,
                format!("write ino={i} fh={f} offset={offset} size={n} {flags:?}"),
            )?;
            Ok(n as u32)
        }

        fn opendir(&self, req: &Request, ino: Ino, flags: i32) -> io::Result<Opened<Key>> {
            self.call(req, format!("opendir ino={} flags={flags:o}", ino.0))?;
            Ok(Opened::new(Key::new(FAKE_FH), Default::default()))
        }

        fn readdir(
            &self,
            req: &Request,
            ino: Ino,
            dh: &Key,
            offset: u64,
            out: &mut dyn DirSink,
        ) -> io::Result<()> {
            let (i, d) = (ino.0, dh.get());
            self.call(req, format!("readdir ino={i} fh={d} offset={offset}"))?;
            for (ino, next, name) in listing(offset) {
                if out.add(ino, next, FileType::RegularFile, name) {
                    break;
                }
            }
            Ok(())
        }

        fn readdirplus(
            &self,
            req: &Request,
            ino: Ino,
            dh: &Key,
            offset: u64,
            out: &mut dyn DirPlusSink,
        ) -> io::Result<()> {
            let (i, d) = (ino.0, dh.get());
            self.call(req, format!("readdirplus ino={i} fh={d} offset={offset}"))?;
            for (ino, next, name) in listing(offset) {
                if out.add(&entry(ino), next, name) {
                    break;
                }
            }
            Ok(())
        }

        fn statfs(&self, req: &Request, ino: Ino) -> io::Result<Statfs> {
            self.call(req, format!("statfs ino={}", ino.0))?;
            Ok(Statfs {
                blocks: 1000,
                bsize: 4096,
                namelen: 255,
                ..Statfs::default()
            })
        }

        fn getxattr(&self, req: &Request, ino: Ino, name: &OsStr, buf: &mut [u8]) -> io::Result<usize> {
            let (i, n) = (ino.0, buf.len());
            self.call(req, format!("getxattr ino={i} name={name:?} size={n}"))?;
            sized(b"value", buf)
        }

        fn listxattr(&self, req: &Request, ino: Ino, buf: &mut [u8]) -> io::Result<usize> {
            self.call(req, format!("listxattr ino={} size={}", ino.0, buf.len()))?;
            sized(b"user.a\0", buf)
        }

        fn create(
            &self,
            req: &Request,
            parent: Ino,
            name: &OsStr,
            mode: u32,
            flags: i32,
        ) -> io::Result<(Entry, Opened<Key>)> {
            let p = parent.0;
            self.call(
                req,
                format!("create parent={p} name={name:?} mode={mode:o} flags={flags:o}"),
            )?;
            let o = Opened::new(Key::new(FAKE_FH), Default::default());
            Ok((entry(FAKE_INO), o))
        }

        fn getlk(
            &self,
            req: &Request,
            ino: Ino,
            fh: &Key,
            owner: u64,
            lock: &Lock,
        ) -> io::Result<Lock> {
            let (i, f) = (ino.0, fh.get());
            self.call(req, format!("getlk ino={i} fh={f} owner={owner} {lock:?}"))?;
            Ok(*lock)
        }

        fn bmap(&self, req: &Request, ino: Ino, blocksize: u32, idx: u64) -> io::Result<u64> {
            let i = ino.0;
            self.call(req, format!("bmap ino={i} blocksize={blocksize} idx={idx}"))?;
            Ok(idx)
        }

        fn ioctl(
            &self,
            req: &Request,
            ino: Ino,
            fh: &Key,
            flags: u32,
            cmd: u32,
            in_data: &[u8],
            out_size: u32,
        ) -> io::Result<IoctlOut> {
            let (i, f, n) = (ino.0, fh.get(), in_data.len());
            self.call(
                req,
                format!("ioctl ino={i} fh={f} flags={flags} cmd={cmd} in={n} out={out_size}"),
            )?;
            Ok(IoctlOut {
                result: 0,
                data: in_data.to_vec(),
            })
        }

        fn poll(&self, req: &Request, ino: Ino, fh: &Key, events: u32, flags: u32) -> io::Result<u32> {
            let (i, f) = (ino.0, fh.get());
            self.call(
                req,
                format!("poll ino={i} fh={f} events={events} flags={flags}"),
            )?;
            Ok(events)
        }

        fn lseek(
            &self,
            req: &Request,
            ino: Ino,
            fh: &Key,
            offset: i64,
            whence: i32,
        ) -> io::Result<i64> {
            let (i, f) = (ino.0, fh.get());
            self.call(
                req,
                format!("lseek ino={i} fh={f} offset={offset} whence={whence}"),
            )?;
            Ok(offset)
        }

        fn copy_file_range(
            &self,
            req: &Request,
            ino_in: Ino,
            fh_in: &Key,
            offset_in: u64,
            ino_out: Ino,
            fh_out: &Key,
            offset_out: u64,
            len: u64,
            flags: u32,
        ) -> io::Result<u32> {
            let (a, fa, b, fb) = (ino_in.0, fh_in.get(), ino_out.0, fh_out.get());
            self.call(
                req,
                format!(
                    "copy_file_range in={a}/{fa}@{offset_in} out={b}/{fb}@{offset_out} len={len} flags={flags}"
                ),
            )?;
            Ok(len as u32)
        }
    }
}

/// A directory listing's reply: (node, next offset, name) of each entry added, as far as
/// `room` entries (then it says it is full).
pub struct Listing {
    /// The entries added.
    pub entries: Vec<(u64, u64, OsString)>,
    room: usize,
}

impl Listing {
    /// An empty reply with room for `room` entries.
    pub fn new(room: usize) -> Listing {
        Listing {
            entries: Vec::new(),
            room,
        }
    }

    /// The names added, in order.
    pub fn names(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|e| e.2.to_string_lossy().into_owned())
            .collect()
    }
}

impl DirSink for Listing {
    fn add(&mut self, ino: u64, offset: u64, _: FileType, name: &OsStr) -> bool {
        if self.entries.len() >= self.room {
            return true;
        }
        self.entries.push((ino, offset, name.to_os_string()));
        false
    }
}

impl DirPlusSink for Listing {
    fn add(&mut self, entry: &Entry, offset: u64, name: &OsStr) -> bool {
        DirSink::add(self, entry.attr.ino, offset, FileType::RegularFile, name)
    }
}

/// Lists directory `ino` (open as `dh`) of `fs` as the kernel does: `room` entries per
/// request, each from the offset the last entry gave, until a reply comes back empty (at most
/// 10,000 requests); with `plus`, by `readdirplus`.
pub fn list<F: FileSystem>(
    fs: &F,
    req: &Request,
    ino: Ino,
    dh: &F::Dir,
    room: usize,
    plus: bool,
) -> Listing {
    let mut all = Listing::new(usize::MAX);
    let mut offset = 0;
    for _ in 0..10_000 {
        let mut out = Listing::new(room);
        let r = if plus {
            fs.readdirplus(req, ino, dh, offset, &mut out)
        } else {
            fs.readdir(req, ino, dh, offset, &mut out)
        };
        r.unwrap_or_else(|e| panic!("listing {} from offset {offset}: {e}", ino.0));
        let Some(last) = out.entries.last() else {
            return all;
        };
        offset = last.1;
        all.entries.append(&mut out.entries);
    }
    panic!("the listing of {} does not end", ino.0);
}
