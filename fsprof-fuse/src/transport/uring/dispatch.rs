//! Serves one request that arrived on a ring entry: decodes it ([`abi::decode`]), builds the
//! request context, lends the handle and the entry's payload buffer, calls the
//! [`FileSystem`], and writes the reply into the entry's buffers. Errors become reply errnos
//! through the shared conversion ([`crate::protocol::errno::to_reply`]); a panic in one request is
//! contained here (logged, answered `EIO`), so a queue thread never dies of one.
//!
//! It answers exactly as the classic transport (fuser 0.18) does, so that the profiles of one
//! workload agree between transports:
//!
//! * Before any file-system code runs, fuser answers `ENOSYS` to opcodes it does not know
//!   (`STATX`, `TMPFILE`, `SYNCFS`, ...) or cannot parse, `EACCES` to callers its access rule
//!   refuses ([`Access`]), `EINVAL` to offsets beyond `i64::MAX`, `ENOSYS` to `NOTIFY_REPLY`,
//!   unrestricted ioctls and `CUSE_INIT`, `EIO` to a second `INIT`. None of these reaches the
//!   file system, so none is counted. (`INTERRUPT` comes on `/dev/fuse`, never on a ring, and
//!   reaches the file system there; one on a ring would get `ENOSYS`.)
//! * Replies carry the same bytes: `CREATE` and `READDIRPLUS` entries use the name's time-out
//!   for the attributes too, `getxattr`/`listxattr` with size 0 answer the length, a longer
//!   value than asked for is `ERANGE`, ioctl replies say one input and one output iovec.
//!
//! The data of a `READ` goes straight into the payload buffer the kernel copies from (one copy
//! fewer than fuser, and page-aligned for `O_DIRECT`); directory listings are written there as
//! `fuse_dirent`s or `fuse_direntplus`es as the file system adds them. Nothing here allocates.

// The handle conversions (`Lent::new`, `Handle::from_raw`), as in the classic transport.
#![allow(unsafe_code)]

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::filesystem::IoctlOut as IoctlReply;
use crate::filesystem::{
    Entry, FileSystem, Handle, Ino, Lent, Request, SetAttr, SetTime, Timespec, WriteFlags,
};
use crate::protocol::abi::{
    self, Args, BmapOut, CopyFileRangeIn, DecodeError, FallocateIn, FsyncIn, GetxattrIn,
    GetxattrOut, InHeader, IoctlIn, IoctlOut, LkIn, LkOut, LseekOut, OpenIn, PollOut, ReadIn,
    SetattrIn, UringReqHeader, WriteIn, WriteOut, fattr, opcode, put,
};
use crate::protocol::ops::Op;
use crate::sys::PATH_MAX;
use crate::toolkit::xattr_names::XATTR_MAX;
use crate::transport::classic::panic_message;
use crate::transport::uring::encode::{
    DirBuf, attr_out, entry_out, entry_out_one_ttl, file_lock, lock, open_out, statfs_out,
};

/// Who may use the mount: fuser's access rule (`SessionACL`), which it checks before serving
/// any request but the ones the kernel makes on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Everyone (`allow_other`).
    All,
    /// Root and the mount's owner (`auto_unmount` without `allow_other`).
    RootAndOwner(u32),
    /// The mount's owner.
    Owner(u32),
}

impl Access {
    /// Whether a request `opcode` from `uid` is served (else `EACCES`).
    pub fn allows(self, opcode: u32, uid: u32) -> bool {
        let refused = match self {
            Access::All => false,
            Access::RootAndOwner(owner) => uid != owner && uid != 0,
            Access::Owner(owner) => uid != owner,
        };
        // What the kernel may send without a caller's uid.
        !refused
            || matches!(
                opcode,
                opcode::INIT
                    | opcode::DESTROY
                    | opcode::READ
                    | opcode::READDIR
                    | opcode::READDIRPLUS
                    | opcode::BATCH_FORGET
                    | opcode::FORGET
                    | opcode::WRITE
                    | opcode::FSYNC
                    | opcode::FSYNCDIR
                    | opcode::RELEASE
                    | opcode::RELEASEDIR
            )
    }
}

/// From the table of operations ([`for_each_op!`](crate::for_each_op)): `op_of`, and
/// `call!(fs, Variant(req, args...))`, which calls the method of operation `Variant` with the
/// request `req(Op::Variant)`, so that the operation a request is counted under and the method
/// that serves it cannot disagree.
macro_rules! from_the_table {
    (($d:tt) {} $($(#[$m:meta])* $op:ident $name:ident ($($arg:ident: $ty:ty),*) -> $ret:ty,
      span[$($span:tt)*], opcodes[$($code:ident)*];)*) => {
        /// The operation of an opcode the file systems serve.
        fn op_of(opcode: u32) -> Option<Op> {
            use crate::protocol::abi::opcode as o;
            Some(match opcode {
                $($(o::$code)|* => Op::$op,)*
                _ => return None,
            })
        }

        macro_rules! call {
            $(($d fs:expr, $op($d req:expr $d(, $d arg:expr)*)) => {
                $d fs.$name(&$d req(Op::$op) $d(, $d arg)*)
            };)*
        }
    };
}

crate::for_each_op!(from_the_table);

/// Whether an `FSYNC` or `FSYNCDIR` asks for the data only.
fn datasync(f: &FsyncIn) -> bool {
    f.fsync_flags & abi::FSYNC_FDATASYNC != 0
}

/// Lends the handle behind the kernel's number `fh` for one request.
#[inline(always)]
fn lend<H: Handle>(fh: u64) -> Lent<H> {
    // SAFETY: the kernel passes back only handle numbers this session's file system replied
    // with (`into_raw` of the same type, through either transport) and sends no request on one
    // after its release.
    unsafe { Lent::new(fh) }
}

/// Takes back the handle behind `fh` for `release`/`releasedir`.
#[inline(always)]
fn take<H: Handle>(fh: u64) -> H {
    // SAFETY: as `lend`; the kernel sends the release once, after every other request on it.
    unsafe { H::from_raw(fh) }
}

/// An error with errno `n`.
#[inline]
fn fail<T>(n: i32) -> io::Result<T> {
    Err(io::Error::from_raw_os_error(n))
}

/// fuser's check of an offset or length that must fit in `off_t`.
#[inline]
fn off_t(v: u64) -> io::Result<u64> {
    if v > i64::MAX as u64 {
        return fail(libc::EINVAL);
    }
    Ok(v)
}

/// The answer to `getxattr`/`listxattr` asked with buffer size `size` when the file system
/// found `n` bytes and had `room`: the length alone for a size query, `ERANGE` when it does
/// not fit, else the bytes (already at the start of the payload).
fn sized(payload: &mut [u8], size: u32, n: usize, room: usize) -> io::Result<usize> {
    if size == 0 {
        Ok(put(
            payload,
            &GetxattrOut {
                size: n as u32,
                padding: 0,
            },
        ))
    } else if n > size as usize || n > room {
        fail(libc::ERANGE)
    } else {
        Ok(n)
    }
}

/// A time to set from a `fuse_setattr_in`: now, or the time sent.
fn set_time(valid: u32, set: u32, now: u32, sec: i64, nsec: u32) -> Option<SetTime> {
    let t = if valid & now != 0 {
        SetTime::Now
    } else {
        SetTime::At(Timespec { sec, nsec })
    };
    (valid & set != 0).then_some(t)
}

/// Logs the first request that cannot be decoded (the kernel never sends one; a second would
/// only repeat the news).
static UNDECODABLE: AtomicBool = AtomicBool::new(false);

/// Serves the requests of every ring queue of one mount.
pub struct Dispatch<F> {
    fs: Arc<F>,
    access: Access,
    /// How long the kernel may keep a name a `LOOKUP` did not find (zero: answered `ENOENT`).
    negative_ttl: std::time::Duration,
}

impl<F: FileSystem> Dispatch<F> {
    /// Serves `fs` to the callers `access` admits.
    pub fn new(fs: Arc<F>, access: Access) -> Dispatch<F> {
        Dispatch {
            fs,
            access,
            negative_ttl: std::time::Duration::ZERO,
        }
    }

    /// Answers a `LOOKUP` that finds nothing with a negative entry the kernel may keep for
    /// `ttl` ([`Entry::or_negative`]).
    pub fn with_negative_ttl(mut self, ttl: std::time::Duration) -> Dispatch<F> {
        self.negative_ttl = ttl;
        self
    }

    /// Serves the request in an entry's header buffer `hdr` and payload buffer `payload`, and
    /// leaves the reply there.
    pub fn serve(&self, hdr: &mut UringReqHeader, payload: &mut [u8]) {
        let h = abi::in_header(hdr);
        let answer = match catch_unwind(AssertUnwindSafe(|| self.call(&h, hdr, payload))) {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(e)) => Err(crate::protocol::errno::to_reply(&e)),
            Err(p) => {
                let name = op_of(h.opcode).map_or("a request", Op::name);
                log::error!("{name} panicked, answered EIO: {}", panic_message(&*p));
                Err(libc::EIO)
            }
        };
        abi::reply(hdr, h.unique, answer);
    }

    /// Decodes and serves one request; returns the length of the reply in the payload.
    #[inline]
    fn call(&self, h: &InHeader, hdr: &UringReqHeader, payload: &mut [u8]) -> io::Result<usize> {
        let args = decode(hdr, payload)?;
        if !self.access.allows(h.opcode, h.uid) {
            return fail(libc::EACCES);
        }
        let ino = Ino(h.nodeid);
        let req = |op: Op| Request::new(op, h.unique, ino, h.pid, h.uid, h.gid);
        let fs = &*self.fs;
        match args {
            Args::Lookup { name } => {
                let e = Entry::or_negative(call!(fs, Lookup(req, ino, name)), self.negative_ttl)?;
                Ok(put(payload, &entry_out(&e)))
            }
            Args::Getattr(g) => {
                let fh = (g.getattr_flags & abi::GETATTR_FH != 0).then(|| lend::<F::File>(g.fh));
                let a = call!(fs, Getattr(req, ino, fh.as_deref()))?;
                Ok(put(payload, &attr_out(&a)))
            }
            Args::Setattr(s) => self.setattr(&req(Op::Setattr), ino, &s, payload),
            Args::Readlink => {
                let room = PATH_MAX.min(payload.len());
                let n = call!(fs, Readlink(req, ino, &mut payload[..room]))?;
                within(n, room)
            }
            Args::Symlink { name, target } => {
                let e = call!(fs, Symlink(req, ino, name, target))?;
                Ok(put(payload, &entry_out(&e)))
            }
            Args::Mknod { arg, name } => {
                let r = req(Op::Mknod).with_umask(arg.umask);
                let e = fs.mknod(&r, ino, name, arg.mode, arg.rdev)?;
                Ok(put(payload, &entry_out(&e)))
            }
            Args::Mkdir { arg, name } => {
                let r = req(Op::Mkdir).with_umask(arg.umask);
                let e = fs.mkdir(&r, ino, name, arg.mode)?;
                Ok(put(payload, &entry_out(&e)))
            }
            Args::Unlink { name } => call!(fs, Unlink(req, ino, name)).map(|()| 0),
            Args::Rmdir { name } => call!(fs, Rmdir(req, ino, name)).map(|()| 0),
            Args::Rename {
                newdir,
                flags,
                name,
                newname,
            } => fs
                .rename(&req(Op::Rename), ino, name, Ino(newdir), newname, flags)
                .map(|()| 0),
            Args::Link { arg, name } => {
                // The request is about the linked node; the header's node is the new parent.
                let old = Ino(arg.oldnodeid);
                let r = Request::new(Op::Link, h.unique, old, h.pid, h.uid, h.gid);
                Ok(put(payload, &entry_out(&fs.link(&r, old, ino, name)?)))
            }
            Args::Open(o) => self.open(req(Op::Open), ino, &o, payload),
            Args::Read(r) => self.read(&req(Op::Read), ino, &r, payload),
            Args::Write { arg, data } => {
                let n = self.write(&req(Op::Write), ino, &arg, data)?;
                Ok(put_written(payload, n))
            }
            Args::Statfs => {
                let s = call!(fs, Statfs(req, ino))?;
                Ok(put(payload, &statfs_out(&s)))
            }
            Args::Release(r) => fs
                .release(&req(Op::Release), ino, take::<F::File>(r.fh))
                .map(|()| 0),
            Args::Fsync(f) => {
                call!(fs, Fsync(req, ino, &lend::<F::File>(f.fh), datasync(&f))).map(|()| 0)
            }
            Args::Setxattr { arg, name, value } => fs
                .setxattr(&req(Op::Setxattr), ino, name, value, arg.flags as i32, 0)
                .map(|()| 0),
            Args::Getxattr { arg, name } => {
                self.getxattr(&req(Op::Getxattr), ino, &arg, name.len(), payload)
            }
            Args::Listxattr(g) => {
                let room = (g.size as usize).min(XATTR_MAX).min(payload.len());
                let n = call!(fs, Listxattr(req, ino, &mut payload[..room]))?;
                sized(payload, g.size, n, room)
            }
            Args::Removexattr { name } => call!(fs, Removexattr(req, ino, name)).map(|()| 0),
            Args::Flush(f) => {
                let fh = lend::<F::File>(f.fh);
                call!(fs, Flush(req, ino, &fh)).map(|()| 0)
            }
            Args::Opendir(o) => Ok(put_opened(
                payload,
                call!(fs, Opendir(req, ino, o.flags as i32))?,
            )),
            Args::Readdir(r) => self.readdir(&req(Op::Readdir), ino, &r, payload, false),
            Args::Readdirplus(r) => self.readdir(&req(Op::Readdirplus), ino, &r, payload, true),
            Args::Releasedir(r) => fs
                .releasedir(&req(Op::Releasedir), ino, take::<F::Dir>(r.fh))
                .map(|()| 0),
            Args::Fsyncdir(f) => {
                call!(fs, Fsyncdir(req, ino, &lend::<F::Dir>(f.fh), datasync(&f))).map(|()| 0)
            }
            Args::Getlk(lk) => self.getlk(&req(Op::Getlk), ino, &lk, payload),
            Args::Setlk { arg, sleep } => {
                let fh = lend::<F::File>(arg.fh);
                let lock = lock(&arg.lk);
                call!(fs, Setlk(req, ino, &fh, arg.owner, &lock, sleep)).map(|()| 0)
            }
            Args::Access(a) => call!(fs, Access(req, ino, a.mask as i32)).map(|()| 0),
            Args::Create { arg, name } => {
                let r = req(Op::Create)
                    .with_umask(arg.umask)
                    .with_kill_suidgid(arg.open_flags & abi::OPEN_KILL_SUIDGID != 0);
                let (e, o) = fs.create(&r, ino, name, arg.mode, arg.flags as i32)?;
                put_create(payload, &e, o)
            }
            Args::Bmap(b) => {
                let block = call!(fs, Bmap(req, ino, b.blocksize, b.block))?;
                Ok(put(payload, &BmapOut { block }))
            }
            Args::Ioctl { arg, data } => {
                let out = self.ioctl(&req(Op::Ioctl), ino, &arg, data)?;
                put_ioctl(payload, out)
            }
            Args::Poll(p) => {
                let fh = lend::<F::File>(p.fh);
                let revents = call!(fs, Poll(req, ino, &fh, p.events, p.flags))?;
                let out = PollOut {
                    revents,
                    padding: 0,
                };
                Ok(put(payload, &out))
            }
            Args::Fallocate(f) => self.fallocate(&req(Op::Fallocate), ino, &f),
            Args::Lseek(l) => {
                let fh = lend::<F::File>(l.fh);
                let offset = call!(fs, Lseek(req, ino, &fh, l.offset as i64, l.whence as i32));
                Ok(put(payload, &LseekOut { offset: offset? }))
            }
            Args::CopyFileRange(c) => {
                self.copy_file_range(&req(Op::CopyFileRange), ino, &c, payload)
            }
            Args::NotServed(op) => match op {
                // INIT is fuser's, before any ring exists; a second one is an error.
                opcode::INIT => fail(libc::EIO),
                // Only sent by fuseblk mounts; the session ends at unmount.
                opcode::DESTROY => Ok(0),
                _ => fail(libc::ENOSYS),
            },
        }
    }

    fn setattr(
        &self,
        r: &Request,
        ino: Ino,
        s: &SetattrIn,
        payload: &mut [u8],
    ) -> io::Result<usize> {
        let v = s.valid;
        let set = SetAttr {
            mode: (v & fattr::MODE != 0).then_some(s.mode),
            uid: (v & fattr::UID != 0).then_some(s.uid),
            gid: (v & fattr::GID != 0).then_some(s.gid),
            size: (v & fattr::SIZE != 0).then_some(s.size),
            atime: set_time(v, fattr::ATIME, fattr::ATIME_NOW, s.atime, s.atimensec),
            mtime: set_time(v, fattr::MTIME, fattr::MTIME_NOW, s.mtime, s.mtimensec),
            kill_suidgid: v & fattr::KILL_SUIDGID != 0,
        };
        let fh = (v & fattr::FH != 0).then(|| lend::<F::File>(s.fh));
        let a = self.fs.setattr(r, ino, &set, fh.as_deref())?;
        Ok(put(payload, &attr_out(&a)))
    }

    fn open(&self, r: Request, ino: Ino, o: &OpenIn, payload: &mut [u8]) -> io::Result<usize> {
        let r = r.with_kill_suidgid(o.open_flags & abi::OPEN_KILL_SUIDGID != 0);
        Ok(put_opened(payload, self.fs.open(&r, ino, o.flags as i32)?))
    }

    fn read(&self, req: &Request, ino: Ino, r: &ReadIn, payload: &mut [u8]) -> io::Result<usize> {
        let offset = off_t(r.offset)?;
        let fh = lend::<F::File>(r.fh);
        let room = (r.size as usize).min(payload.len());
        let n = self.fs.read(req, ino, &fh, offset, &mut payload[..room])?;
        within(n, room)
    }

    fn write(&self, r: &Request, ino: Ino, arg: &WriteIn, data: &[u8]) -> io::Result<u32> {
        let offset = off_t(arg.offset)?;
        let fh = lend::<F::File>(arg.fh);
        let flags = WriteFlags {
            kill_suidgid: arg.write_flags & abi::WRITE_KILL_SUIDGID != 0,
            direct: arg.flags as i32 & libc::O_DIRECT != 0,
            cache: arg.write_flags & abi::WRITE_CACHE != 0,
        };
        self.fs.write(r, ino, &fh, offset, data, flags)
    }

    /// The value goes after the name (which stays where the kernel put it, 8-byte aligned),
    /// then moves to the front.
    fn getxattr(
        &self,
        r: &Request,
        ino: Ino,
        arg: &GetxattrIn,
        name_len: usize,
        payload: &mut [u8],
    ) -> io::Result<usize> {
        let skip = (name_len + 1).next_multiple_of(8);
        let (front, out) = payload.split_at_mut(skip);
        let name = OsStr::from_bytes(&front[..name_len]);
        let room = (arg.size as usize).min(XATTR_MAX).min(out.len());
        let n = self.fs.getxattr(r, ino, name, &mut out[..room])?;
        if arg.size != 0 && n <= room {
            payload.copy_within(skip..skip + n, 0);
        }
        sized(payload, arg.size, n, room)
    }

    fn getlk(&self, r: &Request, ino: Ino, lk: &LkIn, payload: &mut [u8]) -> io::Result<usize> {
        let fh = lend::<F::File>(lk.fh);
        let l = self.fs.getlk(r, ino, &fh, lk.owner, &lock(&lk.lk))?;
        Ok(put(payload, &LkOut { lk: file_lock(&l) }))
    }

    fn ioctl(&self, r: &Request, ino: Ino, arg: &IoctlIn, data: &[u8]) -> io::Result<IoctlReply> {
        if arg.flags & abi::IOCTL_UNRESTRICTED != 0 {
            return fail(libc::ENOSYS);
        }
        let fh = lend::<F::File>(arg.fh);
        self.fs
            .ioctl(r, ino, &fh, arg.flags, arg.cmd, data, arg.out_size)
    }

    fn fallocate(&self, r: &Request, ino: Ino, f: &FallocateIn) -> io::Result<usize> {
        let (offset, length) = (off_t(f.offset)?, off_t(f.length)?);
        let fh = lend::<F::File>(f.fh);
        self.fs
            .fallocate(r, ino, &fh, offset, length, f.mode as i32)?;
        Ok(0)
    }

    fn readdir(
        &self,
        req: &Request,
        ino: Ino,
        r: &ReadIn,
        payload: &mut [u8],
        plus: bool,
    ) -> io::Result<usize> {
        let dh = lend::<F::Dir>(r.fh);
        let room = (r.size as usize).min(payload.len());
        let mut out = DirBuf::new(&mut payload[..room]);
        if plus {
            self.fs.readdirplus(req, ino, &dh, r.offset, &mut out)?;
        } else {
            self.fs.readdir(req, ino, &dh, r.offset, &mut out)?;
        }
        Ok(out.len())
    }

    fn copy_file_range(
        &self,
        r: &Request,
        ino: Ino,
        c: &CopyFileRangeIn,
        payload: &mut [u8],
    ) -> io::Result<usize> {
        let (off_in, off_out) = (off_t(c.off_in)?, off_t(c.off_out)?);
        let (fh_in, fh_out) = (lend::<F::File>(c.fh_in), lend::<F::File>(c.fh_out));
        let n = self.fs.copy_file_range(
            r,
            ino,
            &fh_in,
            off_in,
            Ino(c.nodeid_out),
            &fh_out,
            off_out,
            c.len,
            c.flags as u32,
        )?;
        Ok(put_written(payload, n))
    }
}

/// The arguments of the request in `hdr` and `payload`; an opcode that is unknown or cannot be
/// decoded is answered ENOSYS (the latter logged once).
fn decode<'a>(hdr: &'a UringReqHeader, payload: &'a [u8]) -> io::Result<Args<'a>> {
    match abi::decode(hdr, payload) {
        Ok(d) => Ok(d.args),
        Err(DecodeError::Unknown { opcode }) => {
            log::debug!("opcode {opcode} answered ENOSYS");
            fail(libc::ENOSYS)
        }
        Err(e) => {
            if !UNDECODABLE.swap(true, Ordering::Relaxed) {
                log::warn!("a ring request could not be decoded ({e:?}): answered ENOSYS");
            }
            fail(libc::ENOSYS)
        }
    }
}

/// `n` bytes of a reply given room for `room`: more is the file system's error (EIO).
fn within(n: usize, room: usize) -> io::Result<usize> {
    if n > room { fail(libc::EIO) } else { Ok(n) }
}

/// A write's (or a copy's) reply: how much was written.
fn put_written(payload: &mut [u8], n: u32) -> usize {
    put(
        payload,
        &WriteOut {
            size: n,
            padding: 0,
        },
    )
}

/// An open's (or an opendir's) reply.
fn put_opened<H: Handle>(payload: &mut [u8], o: crate::filesystem::Opened<H>) -> usize {
    put(payload, &open_out(o.fh.into_raw(), o.flags, o.backing))
}

/// A create's reply: two out-arguments back to back, the entry, then the open file.
fn put_create<H: Handle>(
    payload: &mut [u8],
    e: &crate::filesystem::Entry,
    o: crate::filesystem::Opened<H>,
) -> io::Result<usize> {
    let n = put(payload, &entry_out_one_ttl(e));
    let out = open_out(o.fh.into_raw(), o.flags, o.backing);
    Ok(n + put(&mut payload[n..], &out))
}

/// An ioctl's reply: its header, then the data it gives back.
fn put_ioctl(payload: &mut [u8], out: IoctlReply) -> io::Result<usize> {
    let head = IoctlOut {
        result: out.result,
        flags: 0,
        in_iovs: 1,
        out_iovs: 1,
    };
    let n = put(payload, &head);
    let Some(dst) = payload.get_mut(n..n + out.data.len()) else {
        return fail(libc::EIO);
    };
    dst.copy_from_slice(&out.data);
    Ok(n + out.data.len())
}

#[cfg(test)]
mod layered_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filesystem::{self, Entry, FileType, Key, Opened};
    use std::path::Path;
    use std::sync::Mutex;
    use std::time::Duration;
    use zerocopy::{FromBytes, IntoBytes};

    /// A file system that records what it was asked and answers from fixed data.
    #[derive(Default)]
    struct Probe {
        seen: Mutex<Vec<String>>,
    }

    impl Probe {
        fn saw(&self, what: String) {
            self.seen.lock().unwrap().push(what);
        }
    }

    fn attr(ino: u64) -> filesystem::Attr {
        filesystem::Attr {
            ino,
            mode: libc::S_IFREG | 0o644,
            nlink: 1,
            size: 3,
            ..Default::default()
        }
    }

    fn entry(ino: u64) -> Entry {
        Entry {
            attr: attr(ino),
            generation: 0,
            entry_ttl: Duration::from_secs(1),
            attr_ttl: Duration::from_secs(2),
        }
    }

    impl FileSystem for Probe {
        type File = Key;
        type Dir = Key;

        fn lookup(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<Entry> {
            self.saw(format!("lookup {} {name:?} {:?}", parent.0, req.op));
            if name == "boom" {
                panic!("deliberate");
            }
            Ok(entry(9))
        }

        fn create(
            &self,
            req: &Request,
            parent: Ino,
            name: &OsStr,
            mode: u32,
            flags: i32,
        ) -> io::Result<(Entry, Opened<Key>)> {
            self.saw(format!(
                "create {} {name:?} {mode:o} {flags:o} umask {:o}",
                parent.0, req.umask
            ));
            Ok((entry(10), Opened::new(Key::new(33), Default::default())))
        }

        fn read(
            &self,
            _: &Request,
            _: Ino,
            fh: &Key,
            offset: u64,
            buf: &mut [u8],
        ) -> io::Result<usize> {
            self.saw(format!(
                "read {} {offset} {} aligned {}",
                fh.get(),
                buf.len(),
                crate::toolkit::buffer::is_aligned(buf)
            ));
            buf[..3].copy_from_slice(b"abc");
            Ok(3)
        }

        fn getxattr(&self, _: &Request, _: Ino, name: &OsStr, buf: &mut [u8]) -> io::Result<usize> {
            self.saw(format!("getxattr {name:?} {}", buf.len()));
            let v = b"value";
            if buf.is_empty() {
                return Ok(v.len());
            }
            if buf.len() < v.len() {
                return Err(io::Error::from_raw_os_error(libc::ERANGE));
            }
            buf[..v.len()].copy_from_slice(v);
            Ok(v.len())
        }

        fn link(
            &self,
            req: &Request,
            ino: Ino,
            newparent: Ino,
            newname: &OsStr,
        ) -> io::Result<Entry> {
            self.saw(format!(
                "link {} {} {newname:?} req {}",
                ino.0, newparent.0, req.nodeid.0
            ));
            Ok(entry(ino.0))
        }

        fn symlink(
            &self,
            _: &Request,
            parent: Ino,
            name: &OsStr,
            target: &Path,
        ) -> io::Result<Entry> {
            self.saw(format!("symlink {} {name:?} {target:?}", parent.0));
            Err(io::Error::from_raw_os_error(libc::EEXIST))
        }

        fn readdir(
            &self,
            _: &Request,
            _: Ino,
            _: &Key,
            offset: u64,
            out: &mut dyn filesystem::DirSink,
        ) -> io::Result<()> {
            for i in offset..100 {
                if out.add(i + 100, i + 1, FileType::RegularFile, OsStr::new("entry")) {
                    break;
                }
            }
            Ok(())
        }
    }

    /// An entry holding request `opcode` for node 1 from uid `uid`, with `op_in` and `payload`
    /// in an 8 KiB page-aligned payload buffer.
    fn request(
        opcode: u32,
        uid: u32,
        op_in: &[u8],
        payload: &[u8],
    ) -> (Box<UringReqHeader>, crate::toolkit::buffer::Aligned) {
        let mut h = abi::new_header();
        let ih = InHeader {
            len: 40 + (op_in.len() + payload.len()) as u32,
            opcode,
            unique: 99,
            nodeid: 1,
            uid,
            gid: 0,
            pid: 7,
            total_extlen: 0,
            padding: 0,
        };
        put(&mut h.in_out, &ih);
        h.op_in[..op_in.len()].copy_from_slice(op_in);
        h.ring_ent_in_out.commit_id = 99;
        h.ring_ent_in_out.payload_sz = payload.len() as u32;
        let mut buf = crate::toolkit::buffer::Aligned::new();
        buf.get(8192)[..payload.len()].copy_from_slice(payload);
        (h, buf)
    }

    /// Serves the request; returns (error, reply payload).
    fn serve(
        d: &Dispatch<Probe>,
        h: &mut UringReqHeader,
        buf: &mut crate::toolkit::buffer::Aligned,
    ) -> (i32, Vec<u8>) {
        let payload = buf.get(8192);
        d.serve(h, payload);
        let (out, _) = abi::OutHeader::read_from_prefix(&h.in_out).unwrap();
        assert_eq!(out.unique, 99);
        let n = h.ring_ent_in_out.payload_sz as usize;
        (out.error, payload[..n].to_vec())
    }

    fn dispatch() -> Dispatch<Probe> {
        Dispatch::new(Arc::new(Probe::default()), Access::Owner(0))
    }

    fn seen(d: &Dispatch<Probe>) -> Vec<String> {
        d.fs.seen.lock().unwrap().clone()
    }

    #[test]
    fn lookup_answers_an_entry() {
        let d = dispatch();
        let (mut h, mut b) = request(opcode::LOOKUP, 0, &[], b"name\0");
        let (err, out) = serve(&d, &mut h, &mut b);
        assert_eq!(err, 0);
        assert_eq!(out.len(), 128);
        let (e, _) = abi::EntryOut::read_from_prefix(&out).unwrap();
        assert_eq!((e.nodeid, e.entry_valid, e.attr_valid), (9, 1, 2));
        assert_eq!(seen(&d), ["lookup 1 \"name\" Lookup"]);
    }

    #[test]
    fn create_answers_entry_then_open_and_passes_the_umask() {
        let d = dispatch();
        let op = abi::CreateIn {
            flags: 0o102,
            mode: 0o100644,
            umask: 0o027,
            open_flags: 0,
        };
        let (mut h, mut b) = request(opcode::CREATE, 0, op.as_bytes(), b"f\0");
        let (err, out) = serve(&d, &mut h, &mut b);
        assert_eq!((err, out.len()), (0, 144));
        let (e, rest) = abi::EntryOut::read_from_prefix(&out).unwrap();
        assert_eq!((e.nodeid, e.attr_valid), (10, 1), "one time-out, as fuser");
        let (o, _) = abi::OpenOut::read_from_prefix(rest).unwrap();
        assert_eq!((o.fh, o.open_flags, o.backing_id), (33, 0, 0));
        assert_eq!(seen(&d), ["create 1 \"f\" 100644 102 umask 27"]);
    }

    #[test]
    fn reads_land_in_the_aligned_payload() {
        let d = dispatch();
        let op = abi::ReadIn {
            fh: 5,
            offset: 4096,
            size: 4096,
            ..Default::default()
        };
        let (mut h, mut b) = request(opcode::READ, 0, op.as_bytes(), &[]);
        let (err, out) = serve(&d, &mut h, &mut b);
        assert_eq!((err, &out[..]), (0, &b"abc"[..]));
        assert_eq!(seen(&d), ["read 5 4096 4096 aligned true"]);
        // An offset beyond off_t is refused before the file system sees it, as fuser does.
        let op = abi::ReadIn {
            offset: 1 << 63,
            ..op
        };
        let (mut h, mut b) = request(opcode::READ, 0, op.as_bytes(), &[]);
        assert_eq!(serve(&d, &mut h, &mut b).0, -libc::EINVAL);
        assert_eq!(seen(&d).len(), 1);
    }

    #[test]
    fn getxattr_size_query_value_and_erange() {
        let d = dispatch();
        let ask = |size: u32| {
            let op = abi::GetxattrIn { size, padding: 0 };
            let (mut h, mut b) = request(opcode::GETXATTR, 0, op.as_bytes(), b"user.a-long-name\0");
            serve(&d, &mut h, &mut b)
        };
        let (err, out) = ask(0);
        assert_eq!(
            (err, &out[..]),
            (
                0,
                &5u32
                    .to_le_bytes()
                    .iter()
                    .chain(&[0; 4])
                    .copied()
                    .collect::<Vec<_>>()[..]
            )
        );
        assert_eq!(ask(64), (0, b"value".to_vec()));
        assert_eq!(ask(3).0, -libc::ERANGE);
        assert_eq!(
            seen(&d),
            [
                "getxattr \"user.a-long-name\" 0",
                "getxattr \"user.a-long-name\" 64",
                "getxattr \"user.a-long-name\" 3"
            ]
        );
    }

    #[test]
    fn link_is_about_the_old_node() {
        let d = dispatch();
        let op = abi::LinkIn { oldnodeid: 42 };
        let (mut h, mut b) = request(opcode::LINK, 0, op.as_bytes(), b"hard\0");
        assert_eq!(serve(&d, &mut h, &mut b).0, 0);
        assert_eq!(seen(&d), ["link 42 1 \"hard\" req 42"]);
    }

    #[test]
    fn errors_unknown_opcodes_and_panics() {
        let d = dispatch();
        let (mut h, mut b) = request(opcode::SYMLINK, 0, &[], b"l\0t\0");
        assert_eq!(serve(&d, &mut h, &mut b), (-libc::EEXIST, vec![]));
        // Not served, and never shown to the file system: STATX, TMPFILE, SYNCFS, INTERRUPT.
        for op in [
            opcode::STATX,
            opcode::TMPFILE,
            opcode::SYNCFS,
            opcode::INTERRUPT,
        ] {
            let (mut h, mut b) = request(op, 0, &[], &[]);
            assert_eq!(serve(&d, &mut h, &mut b), (-libc::ENOSYS, vec![]));
        }
        // Served by default: ENOSYS from the trait.
        let (mut h, mut b) = request(opcode::STATFS, 0, &[], &[]);
        assert_eq!(serve(&d, &mut h, &mut b).0, -libc::ENOSYS);
        // A panic is answered EIO.
        let (mut h, mut b) = request(opcode::LOOKUP, 0, &[], b"boom\0");
        assert_eq!(serve(&d, &mut h, &mut b), (-libc::EIO, vec![]));
        assert_eq!(
            seen(&d),
            ["symlink 1 \"l\" \"t\"", "lookup 1 \"boom\" Lookup"]
        );
    }

    #[test]
    fn other_users_are_refused_as_fuser_refuses_them() {
        let d = dispatch();
        let (mut h, mut b) = request(opcode::LOOKUP, 1000, &[], b"x\0");
        assert_eq!(serve(&d, &mut h, &mut b).0, -libc::EACCES);
        // What the kernel sends on its own is served whoever it names.
        let op = abi::ReadIn {
            fh: 1,
            size: 10,
            ..Default::default()
        };
        let (mut h, mut b) = request(opcode::READ, 1000, op.as_bytes(), &[]);
        assert_eq!(serve(&d, &mut h, &mut b).0, 0);
        assert!(Access::RootAndOwner(5).allows(opcode::LOOKUP, 0));
        assert!(Access::RootAndOwner(5).allows(opcode::LOOKUP, 5));
        assert!(!Access::RootAndOwner(5).allows(opcode::LOOKUP, 6));
        assert!(Access::All.allows(opcode::LOOKUP, 6));
    }

    #[test]
    fn readdir_fills_the_size_asked_for() {
        let d = dispatch();
        let op = abi::ReadIn {
            fh: 1,
            offset: 0,
            size: 100,
            ..Default::default()
        };
        let (mut h, mut b) = request(opcode::READDIR, 0, op.as_bytes(), &[]);
        let (err, out) = serve(&d, &mut h, &mut b);
        // Three 32-byte entries fit in 100 bytes.
        assert_eq!((err, out.len()), (0, 96));
        let (first, _) = abi::Dirent::read_from_prefix(&out).unwrap();
        assert_eq!((first.ino, first.off, first.namelen), (100, 1, 5));
    }
}
