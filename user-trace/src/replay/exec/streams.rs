//! Replaying the standard I/O streams and directory streams. A stream opened by path is
//! opened beneath the replay directory (as `open` is), then made a stream of that descriptor.

use std::ffi::{CString, c_int};
use std::os::fd::IntoRawFd;

use super::table::{Call, Handle, MAX_TRANSFER, Outcome, Owned, Skip, denied, lock, plain, sized};
use crate::abi::id::*;
use crate::replay::plan::fopen_flags;
use crate::sys::streams::{Dir, Stream};

/// Replays `c` if it is a stream call.
pub(super) fn run(c: &mut Call) -> Option<Outcome> {
    Some(match c.rec.call {
        OPENDIR => opendir(c),
        FDOPENDIR | FDOPEN => fdopen(c),
        READDIR => readdir(c),
        CLOSEDIR | FCLOSE => c.close(),
        FOPEN => fopen(c),
        FREOPEN => freopen(c),
        FFLUSH if c.rec.fd(0) == Some(-1) => {
            let mut t = lock(c.table);
            let mut v = 0;
            for h in t.fds.values_mut() {
                if let Handle::Stream(s, _) = h {
                    v = v.min(s.flush());
                }
            }
            plain(v)
        }
        FREAD | FWRITE | FGETS | FPUTS | FFLUSH | FSEEK | FSEEKO | FTELL | FTELLO => stdio(c),
        _ => return None,
    })
}

/// opendir: opened beneath the replay directory, then `fdopendir`.
fn opendir(c: &mut Call) -> Outcome {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NONBLOCK;
    let fd = match c.root.open_at(c.path(0)?, flags, 0) {
        Ok(fd) => fd.into_raw_fd(),
        Err(d) => return denied(d),
    };
    let got = match Dir::fdopen(fd) {
        Ok(d) => {
            if c.rec.result >= 0 {
                lock(c.table).fds.insert(c.rec.result, Handle::Dir(d));
            }
            fd as i64
        }
        Err(e) => {
            drop(Owned(fd));
            e
        }
    };
    plain(got)
}

/// readdir.
fn readdir(c: &mut Call) -> Outcome {
    let key = c.rec.fd(0).ok_or(Skip::Fd)?;
    match lock(c.table).fds.get_mut(&key) {
        Some(Handle::Dir(d)) => plain(d.read()),
        _ => Err(Skip::Fd),
    }
}

/// fdopendir, fdopen: the traced descriptor becomes a stream.
fn fdopen(c: &mut Call) -> Outcome {
    let dir = c.rec.call == FDOPENDIR;
    let mode = if dir {
        None
    } else {
        Some(c.string(0).ok_or(Skip::Fd)?)
    };
    let key = c.rec.fd(0).ok_or(Skip::Fd)?;
    let mut t = lock(c.table);
    let raw = match t.fds.remove(&key).ok_or(Skip::Fd)? {
        Handle::Fd(f) => f.into_raw(),
        other => {
            t.fds.insert(key, other);
            return Err(Skip::Unsupported);
        }
    };
    let made = match mode {
        None => Dir::fdopen(raw).map(Handle::Dir),
        Some(mode) => Stream::fdopen(raw, &mode).map(|s| Handle::Stream(s, mode)),
    };
    match made {
        Ok(h) => {
            t.fds.insert(key, h);
            plain(raw as i64)
        }
        Err(e) => {
            t.fds.insert(key, Handle::Fd(Owned(raw)));
            plain(e)
        }
    }
}

/// A stream on `rel` opened as `fopen(rel, mode)` would, beneath the replay directory: its
/// descriptor (or `-errno`), and the stream.
fn open_stream(c: &Call, mode: &CString) -> Result<(i64, Option<Stream>), Skip> {
    let flags = fopen_flags(mode.to_bytes());
    let fd = match c.root.open_at(c.path(0)?, flags, 0o666) {
        Ok(fd) => fd.into_raw_fd(),
        Err(d) => return denied(d).map(|(v, _)| (v, None)),
    };
    Ok(match Stream::fdopen(fd, mode) {
        Ok(s) => (fd as i64, Some(s)),
        Err(e) => {
            drop(Owned(fd));
            (e, None)
        }
    })
}

/// fopen.
fn fopen(c: &mut Call) -> Outcome {
    let mode = c.string(1).ok_or(Skip::Fd)?;
    fopen_then(c, mode)
}

/// freopen: the old stream is closed, a new one opened.
fn freopen(c: &mut Call) -> Outcome {
    let mode = c.string(1).ok_or(Skip::Fd)?;
    c.path(0)?;
    if let Some(old) = c.rec.fd(0).and_then(|k| lock(c.table).fds.remove(&k)) {
        old.close();
    }
    fopen_then(c, mode)
}

/// Opens the stream of fopen or freopen, in the table under the traced result.
fn fopen_then(c: &mut Call, mode: CString) -> Outcome {
    let (got, stream) = open_stream(c, &mode)?;
    if let (Some(s), true) = (stream, c.rec.result >= 0) {
        lock(c.table)
            .fds
            .insert(c.rec.result, Handle::Stream(s, mode));
    }
    plain(got)
}

/// The calls on an open stream.
fn stdio(c: &mut Call) -> Outcome {
    let key = c.rec.fd(0).ok_or(Skip::Fd)?;
    let (call, n, off, whence) = (c.rec.call, c.size(), c.off(0), c.int(0));
    let buf = &mut *c.buf;
    let mut t = lock(c.table);
    let Some(Handle::Stream(s, _)) = t.fds.get_mut(&key) else {
        return Err(Skip::Fd);
    };
    let v = match call {
        FREAD => s.read(sized(buf, n)),
        FWRITE => s.write(sized(buf, n)),
        FGETS => s.gets(sized(buf, n)),
        FPUTS => {
            let line = CString::new(vec![b'x'; (n as usize).min(MAX_TRANSFER)]).unwrap_or_default();
            s.puts(&line)
        }
        FFLUSH => s.flush(),
        FSEEK | FSEEKO => s.seek(off, whence as c_int),
        _ => s.tell(),
    };
    plain(v)
}
