//! Checksum entries kept in the home part's record attribute, after its record, and the
//! overflow file after them, seen as one array of bytes
//! ([`Xattr`]); and the writing of a record that keeps the entries after it.

use std::io;

use super::{ENTRY, read_at_most, write_all};
use crate::layout::WINDOW;

/// The calls on where one part's entries are kept in an attribute (of its home part, and the
/// overflow file), made by each [`Parts`](crate::part_io::Parts) with its own accounting.
pub trait XattrIo {
    /// The entries the part's attribute holds, into `buf` (at most [`WINDOW`] bytes): their
    /// length, 0 when it holds none or names another file ([`entries_in`]).
    fn get(&self, buf: &mut [u8]) -> io::Result<usize>;
    /// Makes `entries` what the part's attribute holds ([`with_entries`]).
    fn set(&self, entries: &[u8]) -> io::Result<()>;
    /// Runs `f` with the part's attribute to itself (its updates read, change and write the
    /// whole value).
    fn locked<R>(&self, f: impl FnOnce() -> R) -> R;
    /// `pread` of the overflow file; 0 when there is none.
    fn over_pread(&self, buf: &mut [u8], off: u64) -> io::Result<usize>;
    /// `pwrite` of the overflow file, made first where there is none.
    fn over_pwrite(&self, buf: &[u8], off: u64) -> io::Result<usize>;
    /// `ftruncate` of the overflow file, if there is one.
    fn over_truncate(&self, len: u64) -> io::Result<()>;
}

/// A part's checksum entries as the mount last read or wrote them (see
/// [`crate::inode::FileState::xcache`]).
#[derive(Debug)]
pub struct CachedAttr {
    /// The part's branch.
    pub b: usize,
    /// Its home branch, where the attribute is.
    pub h: usize,
    /// The home part, while there is a change to write back (a clean entry holds no
    /// descriptor, which the descriptor cache may then close).
    pub fd: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
    /// The entries (empty: none).
    pub value: Vec<u8>,
    /// Changed since written.
    pub dirty: bool,
}

/// The entries of file `id` in `v`, the value of its home part's record attribute: none when
/// it names another file (a part copied by hand), or holds none.
pub fn entries_in(v: &[u8], id: u64) -> &[u8] {
    let rec = crate::layout::record_of(v);
    let ours = crate::layout::Meta::decode(rec).is_some_and(|m| m.id() == id);
    let e = match v.get(rec.len() + 1..) {
        Some(e) if ours => e,
        _ => &[],
    };
    &e[..(e.len() / ENTRY as usize * ENTRY as usize).min(WINDOW)]
}

/// Puts in `out` a value of [`crate::layout::XATTR`] made of `record` and, with `entries`, a
/// NUL and them (none at all still marks the part as keeping its entries there); returns its
/// length.
fn compose(
    out: &mut [u8; crate::layout::ATTR_MAX],
    record: &[u8],
    entries: Option<&[u8]>,
) -> usize {
    let r = record.len().min(crate::layout::META_MAX);
    out[..r].copy_from_slice(&record[..r]);
    let Some(entries) = entries else {
        return r;
    };
    let e = entries.len().min(WINDOW);
    out[r] = 0;
    out[r + 1..r + 1 + e].copy_from_slice(&entries[..e]);
    r + 1 + e
}

/// What a record written with [`with_record`] has after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After<'a> {
    /// What the attribute it replaces had (read first).
    Kept,
    /// Nothing (a part known to keep no entries there).
    Nothing,
    /// These entries (the mount's cached ones).
    Entries(&'a [u8]),
}

/// The result of a `getxattr` into a buffer as long as any value RAIF writes: 0 bytes where
/// there is no value, or a longer one (not RAIF's).
#[inline]
pub fn absent_is_empty(r: io::Result<usize>) -> io::Result<usize> {
    match r {
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENODATA | libc::ERANGE)) => Ok(0),
        r => r,
    }
}

/// Reads a value of [`crate::layout::XATTR`] with `get`: its length in `v` (0 when there is
/// none, or it is longer than any RAIF writes).
fn get_record_attr(
    get: impl FnOnce(&mut [u8]) -> io::Result<usize>,
    v: &mut [u8; crate::layout::ATTR_MAX],
) -> io::Result<usize> {
    absent_is_empty(get(v))
}

/// Makes `entries` what a part's [`crate::layout::XATTR`] holds after its record: reads the
/// value with `get` and writes it with `set`, the record kept. A part with no record is not
/// one (`ENODATA`).
pub fn with_entries(
    get: impl FnOnce(&mut [u8]) -> io::Result<usize>,
    set: impl FnOnce(&[u8]) -> io::Result<()>,
    entries: &[u8],
) -> io::Result<()> {
    let mut v = [0u8; crate::layout::ATTR_MAX];
    let n = get_record_attr(get, &mut v)?;
    let rec = crate::layout::record_of(&v[..n]);
    if rec.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENODATA));
    }
    let mut out = [0u8; crate::layout::ATTR_MAX];
    let m = compose(&mut out, rec, Some(entries));
    set(&out[..m])
}

/// Writes `record` as a part's record (its attribute read with `get`, written with `set`),
/// followed by what `after` says.
pub fn with_record(
    get: impl FnOnce(&mut [u8]) -> io::Result<usize>,
    set: impl FnOnce(&[u8]) -> io::Result<()>,
    record: &[u8],
    after: After,
) -> io::Result<()> {
    let mut v = [0u8; crate::layout::ATTR_MAX];
    let old = match after {
        After::Entries(e) => Some(e),
        After::Nothing => None,
        After::Kept => {
            let n = get_record_attr(get, &mut v)?;
            let r = crate::layout::record_of(&v[..n]).len();
            v.get(r + 1..n)
        }
    };
    let mut out = [0u8; crate::layout::ATTR_MAX];
    let m = compose(&mut out, record, old);
    set(&out[..m])
}

/// Whether the home part `fd` keeps the checksum entries of the part before it after its
/// record (a NUL follows the record). The `fgetxattr` is made through `call` (which counts it).
pub fn held_by(
    fd: std::os::fd::BorrowedFd,
    call: impl Fn(&mut dyn FnMut() -> io::Result<usize>) -> io::Result<usize>,
) -> io::Result<bool> {
    use fsprof_fuse::sys::fgetxattr;
    let mut v = [0u8; crate::layout::ATTR_MAX];
    let rec = std::ffi::OsStr::new(crate::layout::XATTR);
    let n = call(&mut || absent_is_empty(fgetxattr(fd, rec, &mut v)))?;
    Ok(crate::layout::record_of(&v[..n]).len() < n)
}

/// The entries of one part kept in an attribute, seen as one array of bytes (see the module
/// docs): what a [`Parts`](crate::part_io::Parts) answers for [`Parts::sums_pread`](crate::part_io::Parts::sums_pread) and the others when the part
/// keeps them so.
pub struct Xattr<'a, X: XattrIo>(pub &'a X);

impl<X: XattrIo> Xattr<'_, X> {
    /// Fills `buf` with the entry bytes at `off` (unknown ones 0); returns its length.
    pub fn pread(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let (io, w) = (self.0, WINDOW as u64);
        let end = off + buf.len() as u64;
        if off < w {
            let n = (end.min(w) - off) as usize;
            let mut v = [0u8; WINDOW];
            let len = io.get(&mut v)?.min(WINDOW);
            let at = off as usize;
            let have = len.saturating_sub(at).min(n);
            if have > 0 {
                buf[..have].copy_from_slice(&v[at..at + have]);
            }
            buf[have..n].fill(0);
        }
        if end > w {
            let s = off.max(w);
            let rest = &mut buf[(s - off) as usize..];
            let done = read_at_most(|b, o| io.over_pread(b, o), rest, s)?;
            rest[done..].fill(0);
        }
        Ok(buf.len())
    }

    /// Writes the entry bytes `buf` at `off`; returns its length.
    pub fn pwrite(&self, buf: &[u8], off: u64) -> io::Result<usize> {
        let (io, w) = (self.0, WINDOW as u64);
        let end = off + buf.len() as u64;
        if off < w {
            let n = (end.min(w) - off) as usize;
            io.locked(|| {
                let mut v = [0u8; WINDOW];
                let len = io.get(&mut v)?.min(WINDOW);
                let at = off as usize;
                // Entries between the old end and this write's start stay unknown.
                if at > len {
                    v[len..at].fill(0);
                }
                v[at..at + n].copy_from_slice(&buf[..n]);
                io.set(&v[..len.max(at + n)])
            })?;
        }
        if end > w {
            let s = off.max(w);
            write_all(|b, o| io.over_pwrite(b, o), &buf[(s - off) as usize..], s)?;
        }
        Ok(buf.len())
    }

    /// Keeps the first `len` entry bytes.
    pub fn truncate(&self, len: u64) -> io::Result<()> {
        let io = self.0;
        if len < WINDOW as u64 {
            io.locked(|| {
                let mut v = [0u8; WINDOW];
                let have = io.get(&mut v)?.min(WINDOW);
                if have > len as usize {
                    io.set(&v[..len as usize])?;
                }
                Ok::<_, io::Error>(())
            })?;
        }
        // The overflow file's first bytes are never read: it may as well be empty.
        io.over_truncate(if len > WINDOW as u64 { len } else { 0 })
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::super::tests::{rd, rw};
    use super::*;

    /// A part's record attribute and an overflow file in memory.
    struct Mem {
        id: u64,
        attr: RefCell<Vec<u8>>,
        over: RefCell<Option<Vec<u8>>>,
    }

    fn record(id: u64) -> Vec<u8> {
        crate::layout::Meta::Dir(id).encode().as_bytes().to_vec()
    }

    impl Mem {
        fn new(id: u64) -> Mem {
            Mem {
                id,
                attr: RefCell::new(record(id)),
                over: RefCell::new(None),
            }
        }
        fn raw_get(&self, buf: &mut [u8]) -> io::Result<usize> {
            let v = self.attr.borrow();
            if v.len() > buf.len() {
                return Err(io::Error::from_raw_os_error(libc::ERANGE));
            }
            buf[..v.len()].copy_from_slice(&v);
            Ok(v.len())
        }
    }

    impl XattrIo for Mem {
        fn get(&self, buf: &mut [u8]) -> io::Result<usize> {
            let mut v = [0u8; crate::layout::ATTR_MAX];
            let n = match self.raw_get(&mut v) {
                Ok(n) => n,
                Err(_) => return Ok(0),
            };
            let e = entries_in(&v[..n], self.id);
            buf[..e.len()].copy_from_slice(e);
            Ok(e.len())
        }
        fn set(&self, entries: &[u8]) -> io::Result<()> {
            with_entries(
                |b| self.raw_get(b),
                |v| {
                    *self.attr.borrow_mut() = v.to_vec();
                    Ok(())
                },
                entries,
            )
        }
        fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
            f()
        }
        fn over_pread(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
            self.over
                .borrow()
                .as_ref()
                .map_or(Ok(0), |v| rd(v, buf, off))
        }
        fn over_pwrite(&self, buf: &[u8], off: u64) -> io::Result<usize> {
            rw(
                self.over.borrow_mut().get_or_insert_with(Vec::new),
                buf,
                off,
            )
        }
        fn over_truncate(&self, len: u64) -> io::Result<()> {
            if let Some(v) = self.over.borrow_mut().as_mut() {
                v.resize(len as usize, 0);
            }
            Ok(())
        }
    }

    #[test]
    fn entries_map_onto_the_record_attribute_then_the_overflow_file() {
        let m = Mem::new(0x1234);
        let rec = record(0x1234);
        let x = Xattr(&m);
        let w = WINDOW as u64;
        // Nothing kept: every entry unknown, and no overflow file made by a read.
        let mut e = [0xffu8; 16];
        assert_eq!(x.pread(&mut e, 8).unwrap(), 16);
        assert_eq!(e, [0; 16]);
        assert!(m.over.borrow().is_none());
        assert_eq!(*m.attr.borrow(), rec, "a read changes nothing");
        // A small part: entries in the attribute only, after the record and a NUL.
        x.pwrite(&[1, 2, 3, 4], 4).unwrap();
        let v = m.attr.borrow().clone();
        assert_eq!(&v[..rec.len()], &rec[..]);
        assert_eq!(&v[rec.len()..], &[0, 0, 0, 0, 0, 1, 2, 3, 4]);
        assert_eq!(
            crate::layout::Meta::decode(&v),
            Some(crate::layout::Meta::Dir(0x1234))
        );
        assert!(
            m.over.borrow().is_none(),
            "no overflow file for a small part"
        );
        // A new record keeps the entries; given entries replace them.
        let set = |v: &[u8]| {
            *m.attr.borrow_mut() = v.to_vec();
            Ok(())
        };
        let rec2 = record(0x1234_0000_0000);
        with_record(|b| m.raw_get(b), set, &rec2, After::Kept).unwrap();
        assert_eq!(&m.attr.borrow()[rec2.len()..], &[0, 0, 0, 0, 0, 1, 2, 3, 4]);
        with_record(|b| m.raw_get(b), set, &rec, After::Entries(&[5; 4])).unwrap();
        assert_eq!(&m.attr.borrow()[rec.len()..], &[0, 5, 5, 5, 5]);
        with_record(|b| m.raw_get(b), set, &rec, After::Entries(&[])).unwrap();
        assert_eq!(
            m.attr.borrow()[rec.len()..],
            [0],
            "no entries, but kept here"
        );
        with_record(|b| m.raw_get(b), set, &rec2, After::Kept).unwrap();
        assert_eq!(m.attr.borrow()[rec2.len()..], [0], "the mark kept");
        with_record(|b| m.raw_get(b), set, &rec, After::Nothing).unwrap();
        assert_eq!(*m.attr.borrow(), rec, "nothing: the record alone");
        x.pwrite(&[1, 2, 3, 4], 4).unwrap();
        // A write across the attribute's end: the rest goes to the overflow file, at the
        // entries' own offsets.
        let data: Vec<u8> = (0..16).collect();
        x.pwrite(&data, w - 8).unwrap();
        assert_eq!(m.attr.borrow().len(), rec.len() + 1 + WINDOW);
        let over = m.over.borrow().clone().unwrap();
        assert_eq!(over.len() as u64, w + 8);
        assert_eq!(&over[WINDOW..], &data[8..]);
        let mut back = [0u8; 16];
        x.pread(&mut back, w - 8).unwrap();
        assert_eq!(back.to_vec(), data);
        // Cut inside the attribute: it shrinks, the overflow file empties.
        x.truncate(8).unwrap();
        assert_eq!(m.attr.borrow().len(), rec.len() + 1 + 8);
        assert_eq!(m.over.borrow().as_ref().unwrap().len(), 0);
        x.pread(&mut back, 0).unwrap();
        assert_eq!(back, [0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
        // Another file's record (a part copied by hand): its entries count as none, and
        // a write replaces them, that record kept.
        let other = Mem::new(0x9999);
        *other.attr.borrow_mut() = m.attr.borrow().clone();
        let ox = Xattr(&other);
        ox.pread(&mut back, 0).unwrap();
        assert_eq!(back, [0; 16]);
        ox.pwrite(&[9; 4], 8).unwrap();
        assert_eq!(
            &other.attr.borrow()[rec.len()..],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9]
        );
        // A value longer than any written (not ours): empty too.
        let mut long = rec.clone();
        long.resize(crate::layout::ATTR_MAX + 64, 7);
        *m.attr.borrow_mut() = long;
        x.pread(&mut back, 0).unwrap();
        assert_eq!(back, [0; 16]);
    }
}
