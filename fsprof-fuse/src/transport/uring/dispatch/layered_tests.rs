//! The dispatcher over layers and a fake file system: what a mount cannot reach easily. A
//! panic inside a layer, a directory listing that fails (or panics) after it has filled part of
//! the reply, and handles lent for a request and given back only to `release`.

use std::ffi::OsStr;
use std::sync::atomic::{AtomicUsize, Ordering};

use zerocopy::{FromBytes, IntoBytes};

use super::*;
use crate::filesystem::request::Span;
use crate::filesystem::{AttrOut, DirPlusSink, DirSink, Entry, FileType, Opened};
use crate::layers::{Hook, Hooked};
use crate::toolkit::buffer::Aligned;

/// Handles dropped so far (only by [`Counted`]).
static DROPPED: AtomicUsize = AtomicUsize::new(0);

/// A handle that counts its drops.
struct Counted(u64);

impl Drop for Counted {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

impl Handle for Counted {
    fn into_raw(self) -> u64 {
        let raw = self.0;
        std::mem::forget(self);
        raw
    }

    unsafe fn from_raw(raw: u64) -> Counted {
        Counted(raw)
    }
}

/// A file system whose listings fill part of the reply and then fail (`readdir`) or panic
/// (`readdirplus`), and whose files are [`Counted`].
struct Fake;

impl FileSystem for Fake {
    type File = Counted;
    type Dir = Counted;

    fn getattr(&self, _: &Request, _: Ino, _: Option<&Counted>) -> io::Result<AttrOut> {
        Ok(AttrOut {
            attr: Default::default(),
            ttl: std::time::Duration::ZERO,
        })
    }

    fn open(&self, _: &Request, _: Ino, _: i32) -> io::Result<Opened<Counted>> {
        Ok(Opened::new(Counted(77), Default::default()))
    }

    fn read(&self, _: &Request, _: Ino, fh: &Counted, _: u64, buf: &mut [u8]) -> io::Result<usize> {
        buf[0] = fh.0 as u8;
        Ok(1)
    }

    fn release(&self, _: &Request, _: Ino, fh: Counted) -> io::Result<()> {
        assert_eq!(fh.0, 77);
        Ok(())
    }

    fn readdir(
        &self,
        _: &Request,
        _: Ino,
        _: &Counted,
        _: u64,
        out: &mut dyn DirSink,
    ) -> io::Result<()> {
        assert!(!out.add(10, 1, FileType::RegularFile, OsStr::new("one")));
        assert!(!out.add(11, 2, FileType::RegularFile, OsStr::new("two")));
        Err(io::Error::from_raw_os_error(libc::EIO))
    }

    fn readdirplus(
        &self,
        _: &Request,
        _: Ino,
        _: &Counted,
        _: u64,
        out: &mut dyn DirPlusSink,
    ) -> io::Result<()> {
        let e = Entry {
            attr: Default::default(),
            generation: 0,
            entry_ttl: std::time::Duration::ZERO,
            attr_ttl: std::time::Duration::ZERO,
        };
        assert!(!out.add(&e, 1, OsStr::new("one")));
        panic!("deliberate, after one entry");
    }
}

/// A layer that panics around every getattr.
struct Panicky;

impl Hook for Panicky {
    fn around<R>(
        &self,
        req: &Request,
        _: Span<'_>,
        serve: impl FnOnce(&Request) -> io::Result<R>,
    ) -> io::Result<R> {
        if req.op == Op::Getattr {
            panic!("deliberate, in a layer");
        }
        serve(req)
    }
}

/// Serves request `opcode` for node 1 with `op_in` through `d`; returns (error, reply payload).
fn ask<F: FileSystem>(d: &Dispatch<F>, opcode: u32, op_in: &[u8]) -> (i32, Vec<u8>) {
    let mut h = abi::new_header();
    let ih = InHeader {
        len: 40 + op_in.len() as u32,
        opcode,
        unique: 5,
        nodeid: 1,
        uid: 0,
        gid: 0,
        pid: 7,
        total_extlen: 0,
        padding: 0,
    };
    put(&mut h.in_out, &ih);
    h.op_in[..op_in.len()].copy_from_slice(op_in);
    let mut buf = Aligned::new();
    let payload = buf.get(8192);
    d.serve(&mut h, payload);
    let (out, _) = abi::OutHeader::read_from_prefix(&h.in_out).unwrap();
    let n = h.ring_ent_in_out.payload_sz as usize;
    (out.error, payload[..n].to_vec())
}

fn listing(fh: u64) -> abi::ReadIn {
    abi::ReadIn {
        fh,
        size: 4096,
        ..Default::default()
    }
}

#[test]
fn a_panic_inside_a_layer_is_answered_eio_and_the_mount_goes_on() {
    let d = Dispatch::new(Arc::new(Hooked::new(Panicky, Fake)), Access::All);
    assert_eq!(ask(&d, opcode::GETATTR, &[0; 16]), (-libc::EIO, vec![]));
    // The next request, through the same layer, is served.
    let (err, out) = ask(&d, opcode::READ, listing(3).as_bytes());
    assert_eq!((err, &out[..]), (0, &[3][..]));
}

/// A listing's reply is lent to the file system, which writes entries into it; when the
/// listing then fails, or panics, the entries written are dropped and only the error goes back.
#[test]
fn a_listing_that_fails_after_filling_part_of_its_reply_answers_only_the_error() {
    let d = Dispatch::new(Arc::new(Fake), Access::All);
    assert_eq!(
        ask(&d, opcode::READDIR, listing(1).as_bytes()),
        (-libc::EIO, vec![])
    );
    assert_eq!(
        ask(&d, opcode::READDIRPLUS, listing(1).as_bytes()),
        (-libc::EIO, vec![])
    );
}

/// A handle is lent to each request on it and never dropped by one; `release` takes it back,
/// and it is dropped once, there.
#[test]
fn lent_handles_are_dropped_only_at_release() {
    let d = Dispatch::new(Arc::new(Hooked::new(Panicky, Fake)), Access::All);
    let (err, out) = ask(&d, opcode::OPEN, &[0; 8]);
    assert_eq!(err, 0);
    let (open, _) = abi::OpenOut::read_from_prefix(&out).unwrap();
    assert_eq!(open.fh, 77);
    for _ in 0..3 {
        assert_eq!(
            ask(&d, opcode::READ, listing(open.fh).as_bytes()),
            (0, vec![77])
        );
    }
    assert_eq!(DROPPED.load(Ordering::SeqCst), 0);
    let release = abi::ReleaseIn {
        fh: open.fh,
        ..Default::default()
    };
    assert_eq!(ask(&d, opcode::RELEASE, release.as_bytes()).0, 0);
    assert_eq!(DROPPED.load(Ordering::SeqCst), 1);
}
