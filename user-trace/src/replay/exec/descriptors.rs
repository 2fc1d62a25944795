//! Replaying the calls on descriptors: data transfers, positions, syncs, descriptor
//! metadata, locks and duplicates.

use std::ffi::c_int;

use super::table::{Call, Handle, MAX_TRANSFER, Outcome, Owned, Skip, lock, plain};
use crate::abi::id::*;
use crate::sys::calls::{self, Io, Xattr};
use crate::trace::Arg;

/// Replays `c` if it is a call on descriptors.
pub(super) fn run(c: &mut Call) -> Option<Outcome> {
    let call = c.rec.call;
    Some(match call {
        CLOSE => c.close(),
        READ | PREAD | READV | PREADV | PREADV2 | WRITE | PWRITE | WRITEV | PWRITEV | PWRITEV2 => {
            transfer(c)
        }
        LSEEK => c
            .fd(0)
            .and_then(|f| plain(calls::lseek(f, c.off(0), c.int(0)))),
        FSTAT | FCHDIR => c.fd(0).map(|f| {
            let (v, st) = calls::fstat(f);
            (v, if call == FSTAT { st } else { None })
        }),
        FSTATFS => c.fd(0).and_then(|f| plain(calls::fstatfs(f))),
        FTRUNCATE => c
            .fd(0)
            .and_then(|f| plain(calls::truncate(None, f, c.off(0)))),
        FSYNC | FDATASYNC => c
            .fd(0)
            .and_then(|f| plain(calls::fsync(f, call == FDATASYNC))),
        FALLOCATE => c
            .fd(0)
            .and_then(|f| plain(calls::fallocate(f, c.int(0), c.off(0), c.off(1)))),
        POSIX_FALLOCATE => c
            .fd(0)
            .and_then(|f| plain(calls::posix_fallocate(f, c.off(0), c.off(1)))),
        COPY_FILE_RANGE => (|| {
            let (i, o) = (c.fd(0)?, c.fd(1)?);
            let n = (c.size() as usize).min(MAX_TRANSFER);
            let flags = c.flags() as u32;
            plain(calls::copy_file_range(i, c.off(0), o, c.off(1), n, flags))
        })(),
        SENDFILE => (|| {
            let (o, i) = (c.fd(0)?, c.fd(1)?);
            let n = (c.size() as usize).min(MAX_TRANSFER);
            plain(calls::sendfile(o, i, c.off(0), n))
        })(),
        GETDENTS64 => (|| {
            let f = c.fd(0)?;
            let n = c.size();
            plain(calls::getdents64(f, c.buffer(n)))
        })(),
        FCHMOD => c
            .fd(0)
            .and_then(|f| plain(calls::chmod(None, f, c.mode(), 0))),
        FCHOWN => c
            .fd(0)
            .and_then(|f| plain(calls::fchown(f, c.int(0) as u32, c.int(1) as u32))),
        FUTIMENS => c.fd(0).and_then(|f| plain(calls::utimens(f, None, 0))),
        FSETXATTR | FGETXATTR | FLISTXATTR | FREMOVEXATTR => xattr(c),
        FCNTL => fcntl(c),
        FLOCK => c.fd(0).and_then(|f| plain(calls::flock(f, c.int(0)))),
        DUP => c.fd(0).and_then(|f| c.new_fd(calls::dup_min(f, 3))),
        DUP2 | DUP3 => dup2(c),
        _ => return None,
    })
}

/// read, write and their positioned and vectored forms.
fn transfer(c: &mut Call) -> Outcome {
    let call = c.rec.call;
    let io = match call {
        READ | WRITE => Io::Plain,
        PREAD | PWRITE => Io::At(c.off(0)),
        READV | WRITEV => Io::Vec,
        PREADV | PWRITEV => Io::VecAt(c.off(0)),
        _ => Io::VecAt2(c.off(0), c.flags()),
    };
    let f = c.fd(0)?;
    let n = c.size();
    if matches!(call, READ | PREAD | READV | PREADV | PREADV2) {
        plain(calls::read(f, c.buffer(n), io))
    } else {
        plain(calls::write(f, c.buffer(n), io))
    }
}

/// The extended-attribute calls on a descriptor.
fn xattr(c: &mut Call) -> Outcome {
    let op = match c.rec.call {
        FSETXATTR => Xattr::Set(c.flags()),
        FGETXATTR => Xattr::Get,
        FLISTXATTR => Xattr::List,
        _ => Xattr::Remove,
    };
    let name = c.string(0);
    let f = c.fd(0)?;
    let n = c.size();
    plain(calls::xattr(
        None,
        false,
        f,
        name.as_deref(),
        c.buffer(n),
        op,
    ))
}

/// fcntl: locks, duplicates, descriptor and status flags.
fn fcntl(c: &mut Call) -> Outcome {
    let cmd = c.int(0);
    let f = c.fd(0)?;
    let arg = c.rec.args.iter().find_map(|a| match a {
        Arg::Lock(l) => Some(Err(*l)),
        Arg::FcntlArg(v) => Some(Ok(*v)),
        _ => None,
    });
    match (cmd, arg) {
        (_, Some(Err(l))) => plain(calls::fcntl_lock(f, cmd, l)),
        (libc::F_DUPFD | libc::F_DUPFD_CLOEXEC, Some(Ok(min))) => {
            c.new_fd(calls::dup_min(f, min.max(0) as c_int))
        }
        (libc::F_GETFD | libc::F_SETFD | libc::F_GETFL | libc::F_SETFL, Some(Ok(v))) => {
            plain(calls::fcntl_int(f, cmd, v as c_int))
        }
        _ => Err(Skip::Unsupported),
    }
}

/// dup2, dup3: the duplicate goes under the traced new number.
fn dup2(c: &mut Call) -> Outcome {
    let got = calls::dup_min(c.fd(0)?, 3);
    if got >= 0 {
        match c.rec.fd(1) {
            Some(new) if c.rec.result >= 0 => {
                let old = lock(c.table)
                    .fds
                    .insert(new, Handle::Fd(Owned(got as c_int)));
                drop(old);
            }
            _ => {
                calls::close(got as c_int);
            }
        }
    }
    plain(got)
}
