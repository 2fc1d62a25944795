//! Unit tests of [`Hooked`]: every operation reaches the file system once, through the hook,
//! over its span.

use std::ffi::OsString;

use parking_lot::Mutex;

use super::*;
use crate::filesystem::fake::{FAKE_DATA, FAKE_FH, FAKE_INO, FAKE_NAMES, Fake, Listing};
use crate::filesystem::{Caps, Key};
use crate::protocol::ops::Op;

/// What the hook saw of one request: its operation, id and span.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    op: Op,
    unique: u64,
    offset: Option<u64>,
    size: Option<u64>,
    name: Option<OsString>,
}

/// A hook that records each request and serves it, or answers it itself with `refuse`.
#[derive(Default)]
struct Spy {
    seen: Mutex<Vec<Seen>>,
    refuse: Option<i32>,
}

impl Hook for Spy {
    fn around<R>(
        &self,
        req: &Request,
        span: Span<'_>,
        serve: impl FnOnce(&Request) -> io::Result<R>,
    ) -> io::Result<R> {
        self.seen.lock().push(Seen {
            op: req.op,
            unique: req.unique,
            offset: span.offset,
            size: span.size,
            name: span.name.map(OsStr::to_os_string),
        });
        match self.refuse {
            Some(e) => Err(io::Error::from_raw_os_error(e)),
            None => serve(req),
        }
    }
}

type Spied = Hooked<Spy, Fake>;

fn spied() -> Spied {
    Hooked::new(Spy::default(), Fake::new())
}

/// The span a request should be seen with: (offset, size, name).
type Want = (Option<u64>, Option<u64>, Option<&'static str>);

const NONE: Want = (None, None, None);

fn named(name: &'static str) -> Want {
    (None, None, Some(name))
}

fn at(offset: u64, size: u64) -> Want {
    (Some(offset), Some(size), None)
}

/// Runs one request of `op` through `fs` with `call`; checks that the file system got it
/// exactly once, as `what` and with the request's id, and that the hook saw it exactly once
/// over `span`. Returns the answer.
fn check<R>(
    fs: &Spied,
    op: Op,
    span: Want,
    what: &str,
    call: impl FnOnce(&Spied, &Request) -> io::Result<R>,
) -> R {
    let (hooked, served) = (fs.hook().seen.lock().len(), fs.inner().calls().len());
    let unique = 1000 + hooked as u64;
    let req = Request::new(op, unique, Ino(5), 77, 1000, 1000);
    let r = call(fs, &req).unwrap_or_else(|e| panic!("{what}: {e}"));
    let calls = fs.inner().calls();
    assert_eq!(
        calls.len(),
        served + 1,
        "{what}: the file system got it once"
    );
    let got = &calls[served];
    assert_eq!(
        (got.what.as_str(), got.op, got.unique),
        (what, Some(op), unique)
    );
    let seen = fs.hook().seen.lock();
    assert_eq!(seen.len(), hooked + 1, "{what}: the hook saw it once");
    let want = Seen {
        op,
        unique,
        offset: span.0,
        size: span.1,
        name: span.2.map(OsString::from),
    };
    assert_eq!(seen[hooked], want, "{what}");
    r
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

#[test]
fn name_operations_are_seen_with_the_name_they_act_on() {
    let fs = spied();
    let e = check(
        &fs,
        Op::Lookup,
        named("n"),
        "lookup parent=5 name=\"n\"",
        |fs, r| fs.lookup(r, Ino(5), os("n")),
    );
    assert_eq!(e.attr.ino, FAKE_INO);
    let what = "mknod parent=5 name=\"p\" mode=10644 rdev=3";
    check(&fs, Op::Mknod, named("p"), what, |fs, r| {
        fs.mknod(r, Ino(5), os("p"), libc::S_IFIFO | 0o644, 3)
    });
    let what = "mkdir parent=5 name=\"d\" mode=755";
    check(&fs, Op::Mkdir, named("d"), what, |fs, r| {
        fs.mkdir(r, Ino(5), os("d"), 0o755)
    });
    check(
        &fs,
        Op::Unlink,
        named("u"),
        "unlink parent=5 name=\"u\"",
        |fs, r| fs.unlink(r, Ino(5), os("u")),
    );
    check(
        &fs,
        Op::Rmdir,
        named("r"),
        "rmdir parent=5 name=\"r\"",
        |fs, r| fs.rmdir(r, Ino(5), os("r")),
    );
    let what = "symlink parent=5 name=\"l\" target=\"/t\"";
    check(&fs, Op::Symlink, named("l"), what, |fs, r| {
        fs.symlink(r, Ino(5), os("l"), Path::new("/t"))
    });
    // A rename is seen with its old name, a link with its new one.
    let what = "rename parent=5 name=\"old\" newparent=6 newname=\"new\" flags=1";
    check(&fs, Op::Rename, named("old"), what, |fs, r| {
        fs.rename(r, Ino(5), os("old"), Ino(6), os("new"), 1)
    });
    let what = "link ino=9 newparent=6 newname=\"hard\"";
    let e = check(&fs, Op::Link, named("hard"), what, |fs, r| {
        fs.link(r, Ino(9), Ino(6), os("hard"))
    });
    assert_eq!(e.attr.ino, 9);
    let what = "create parent=5 name=\"f\" mode=100600 flags=102";
    let (e, o) = check(&fs, Op::Create, named("f"), what, |fs, r| {
        fs.create(r, Ino(5), os("f"), libc::S_IFREG | 0o600, 0o102)
    });
    assert_eq!((e.attr.ino, o.fh.get()), (FAKE_INO, FAKE_FH));
}

#[test]
fn data_operations_are_seen_with_their_offset_and_size() {
    let fs = spied();
    let fh = Key::new(FAKE_FH);
    let mut buf = vec![0u8; 4096];
    let what = "read ino=5 fh=7 offset=0 size=4096";
    let n = check(&fs, Op::Read, at(0, 4096), what, |fs, r| {
        fs.read(r, Ino(5), &fh, 0, &mut buf)
    });
    assert_eq!(&buf[..n], FAKE_DATA, "the reply comes back whole");
    let what = "read ino=5 fh=7 offset=8192 size=10";
    let n = check(&fs, Op::Read, at(8192, 10), what, |fs, r| {
        fs.read(r, Ino(5), &fh, 8192, &mut buf[..10])
    });
    assert_eq!(n, 0);
    let flags = WriteFlags {
        kill_suidgid: true,
        direct: false,
        cache: false,
    };
    let what = format!("write ino=5 fh=7 offset=100 size=3 {flags:?}");
    let n = check(&fs, Op::Write, at(100, 3), &what, |fs, r| {
        fs.write(r, Ino(5), &fh, 100, b"abc", flags)
    });
    assert_eq!(n, 3);
    let what = "fallocate ino=5 fh=7 offset=4096 length=65536 mode=1";
    check(&fs, Op::Fallocate, at(4096, 65536), what, |fs, r| {
        fs.fallocate(r, Ino(5), &fh, 4096, 65536, 1)
    });
    let what = "copy_file_range in=5/7@10 out=6/7@20 len=30 flags=0";
    let n = check(&fs, Op::CopyFileRange, at(10, 30), what, |fs, r| {
        fs.copy_file_range(r, Ino(5), &fh, 10, Ino(6), &fh, 20, 30, 0)
    });
    assert_eq!(n, 30);
    // A truncation is seen at its new size; another setattr over nothing.
    let cut = SetAttr {
        size: Some(100),
        ..SetAttr::default()
    };
    let what = format!("setattr ino=5 {cut:?} fh=Some(7)");
    let span = (Some(100), None, None);
    check(&fs, Op::Setattr, span, &what, |fs, r| {
        fs.setattr(r, Ino(5), &cut, Some(&fh))
    });
    let chmod = SetAttr {
        mode: Some(0o600),
        ..SetAttr::default()
    };
    let what = format!("setattr ino=5 {chmod:?} fh=None");
    check(&fs, Op::Setattr, NONE, &what, |fs, r| {
        fs.setattr(r, Ino(5), &chmod, None)
    });
}

#[test]
fn file_operations_are_forwarded_with_their_arguments() {
    let fs = spied();
    let fh = Key::new(FAKE_FH);
    check(
        &fs,
        Op::Getattr,
        NONE,
        "getattr ino=5 fh=Some(7)",
        |fs, r| fs.getattr(r, Ino(5), Some(&fh)),
    );
    let mut buf = [0u8; 64];
    let n = check(
        &fs,
        Op::Readlink,
        NONE,
        "readlink ino=5 size=64",
        |fs, r| fs.readlink(r, Ino(5), &mut buf),
    );
    assert_eq!(&buf[..n], b"target");
    let o = check(&fs, Op::Open, NONE, "open ino=5 flags=2", |fs, r| {
        fs.open(r, Ino(5), libc::O_RDWR)
    });
    assert_eq!(o.fh.get(), FAKE_FH);
    check(&fs, Op::Flush, NONE, "flush ino=5 fh=7", |fs, r| {
        fs.flush(r, Ino(5), &fh)
    });
    check(
        &fs,
        Op::Fsync,
        NONE,
        "fsync ino=5 fh=7 datasync=true",
        |fs, r| fs.fsync(r, Ino(5), &fh, true),
    );
    let lock = Lock {
        start: 1,
        end: 2,
        typ: libc::F_WRLCK,
        pid: 9,
    };
    let what = format!("getlk ino=5 fh=7 owner=3 {lock:?}");
    let got = check(&fs, Op::Getlk, NONE, &what, |fs, r| {
        fs.getlk(r, Ino(5), &fh, 3, &lock)
    });
    assert_eq!(got, lock);
    let what = format!("setlk ino=5 fh=7 owner=3 lock={lock:?} sleep=true");
    check(&fs, Op::Setlk, NONE, &what, |fs, r| {
        fs.setlk(r, Ino(5), &fh, 3, &lock, true)
    });
    let what = "ioctl ino=5 fh=7 flags=1 cmd=2 in=3 out=4";
    let out = check(&fs, Op::Ioctl, NONE, what, |fs, r| {
        fs.ioctl(r, Ino(5), &fh, 1, 2, b"xyz", 4)
    });
    assert_eq!(out.data, b"xyz");
    check(
        &fs,
        Op::Poll,
        NONE,
        "poll ino=5 fh=7 events=1 flags=0",
        |fs, r| fs.poll(r, Ino(5), &fh, 1, 0),
    );
    let what = "lseek ino=5 fh=7 offset=-4 whence=3";
    let at = check(&fs, Op::Lseek, NONE, what, |fs, r| {
        fs.lseek(r, Ino(5), &fh, -4, libc::SEEK_DATA)
    });
    assert_eq!(at, -4);
    check(
        &fs,
        Op::Bmap,
        NONE,
        "bmap ino=5 blocksize=512 idx=8",
        |fs, r| fs.bmap(r, Ino(5), 512, 8),
    );
    check(&fs, Op::Release, NONE, "release ino=5 fh=7", |fs, r| {
        fs.release(r, Ino(5), Key::new(FAKE_FH))
    });
}

#[test]
fn directory_xattr_and_other_operations_are_forwarded_with_their_arguments() {
    let fs = spied();
    let dh = Key::new(FAKE_FH);
    check(&fs, Op::Opendir, NONE, "opendir ino=5 flags=0", |fs, r| {
        fs.opendir(r, Ino(5), 0)
    });
    let mut out = Listing::new(2);
    check(
        &fs,
        Op::Readdir,
        NONE,
        "readdir ino=5 fh=7 offset=1",
        |fs, r| fs.readdir(r, Ino(5), &dh, 1, &mut out),
    );
    assert_eq!(out.names(), FAKE_NAMES[1..]);
    let mut out = Listing::new(1);
    let what = "readdirplus ino=5 fh=7 offset=0";
    check(&fs, Op::Readdirplus, NONE, what, |fs, r| {
        fs.readdirplus(r, Ino(5), &dh, 0, &mut out)
    });
    assert_eq!(out.entries, [(100, 1, OsString::from("a"))]);
    let what = "fsyncdir ino=5 dh=7 datasync=false";
    check(&fs, Op::Fsyncdir, NONE, what, |fs, r| {
        fs.fsyncdir(r, Ino(5), &dh, false)
    });
    check(
        &fs,
        Op::Releasedir,
        NONE,
        "releasedir ino=5 dh=7",
        |fs, r| fs.releasedir(r, Ino(5), Key::new(FAKE_FH)),
    );
    let s = check(&fs, Op::Statfs, NONE, "statfs ino=5", |fs, r| {
        fs.statfs(r, Ino(5))
    });
    assert_eq!(s.namelen, 255);
    let what = "setxattr ino=5 name=\"user.x\" value=2 flags=1 position=0";
    check(&fs, Op::Setxattr, NONE, what, |fs, r| {
        fs.setxattr(r, Ino(5), os("user.x"), b"ab", libc::XATTR_CREATE, 0)
    });
    let mut buf = [0u8; 16];
    let what = "getxattr ino=5 name=\"user.x\" size=16";
    let n = check(&fs, Op::Getxattr, NONE, what, |fs, r| {
        fs.getxattr(r, Ino(5), os("user.x"), &mut buf)
    });
    assert_eq!(&buf[..n], b"value");
    let n = check(
        &fs,
        Op::Listxattr,
        NONE,
        "listxattr ino=5 size=0",
        |fs, r| fs.listxattr(r, Ino(5), &mut []),
    );
    assert_eq!(n, 7, "a size query answers the size");
    let what = "removexattr ino=5 name=\"user.x\"";
    check(&fs, Op::Removexattr, NONE, what, |fs, r| {
        fs.removexattr(r, Ino(5), os("user.x"))
    });
    check(&fs, Op::Access, NONE, "access ino=5 mask=4", |fs, r| {
        fs.access(r, Ino(5), libc::R_OK)
    });
    check(&fs, Op::Forget, NONE, "forget ino=5 nlookup=3", |fs, r| {
        fs.forget(r, Ino(5), 3);
        Ok(())
    });
}

#[test]
fn init_and_destroy_pass_the_hook_by() {
    let fs = spied();
    let mut init = Init::offered(Caps::ASYNC_READ, 4096);
    fs.init(&mut init).unwrap();
    fs.destroy();
    assert_eq!(fs.inner().seen(), ["init", "destroy"]);
    assert!(fs.inner().calls().iter().all(|c| c.op.is_none()));
    assert!(fs.hook().seen.lock().is_empty());
}

#[test]
fn a_hook_that_answers_itself_keeps_the_request_from_the_file_system() {
    let fs = Hooked::new(
        Spy {
            refuse: Some(libc::EACCES),
            ..Spy::default()
        },
        Fake::new(),
    );
    let req = Request::new(Op::Lookup, 1, Ino(1), 7, 0, 0);
    let e = fs.lookup(&req, Ino(1), os("x")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EACCES));
    // A forget has no answer: refused, it is simply not passed on.
    fs.forget(&Request::new(Op::Forget, 2, Ino(9), 0, 0, 0), Ino(9), 1);
    assert!(fs.inner().calls().is_empty());
    let seen = fs.hook().seen.lock();
    assert_eq!(
        seen.iter().map(|s| (s.op, s.unique)).collect::<Vec<_>>(),
        [(Op::Lookup, 1), (Op::Forget, 2)]
    );
}

#[test]
fn an_inner_error_comes_back_through_the_hook_unchanged() {
    let fs = spied();
    fs.inner().fail_with(libc::ENOSPC);
    let req = Request::new(Op::Mkdir, 3, Ino(1), 7, 0, 0);
    let e = fs.mkdir(&req, Ino(1), os("d"), 0o755).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
    assert_eq!(fs.inner().calls().len(), 1);
    assert_eq!(fs.hook().seen.lock().len(), 1);
}
