//! What a file system learns about a request besides its arguments: which operation, whose,
//! about which node.

use std::ffi::OsStr;

use crate::filesystem::trace::Trace;
use crate::protocol::ops::Op;

/// A node id: the number the kernel knows an inode by (1 is the root).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ino(pub u64);

impl Ino {
    /// The root directory.
    pub const ROOT: Ino = Ino(1);
}

/// Node ids at or above this are the layers' own (the control files,
/// [`crate::layers::control_files`]): a file system hands out ids below it.
pub const RESERVED_BASE: u64 = u64::MAX - 15;

/// Where a request acts, for layers that report or target it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span<'a> {
    /// Byte offset (read, write, fallocate, copy_file_range: its source).
    pub offset: Option<u64>,
    /// Byte count asked for.
    pub size: Option<u64>,
    /// The name in the request's node (a directory) that it acts on: lookup, mknod, mkdir,
    /// unlink, rmdir, symlink, link and create (the new name), rename (the old one).
    pub name: Option<&'a OsStr>,
}

impl<'a> Span<'a> {
    /// Nowhere in particular (the whole node).
    pub(crate) const NONE: Span<'static> = Span {
        offset: None,
        size: None,
        name: None,
    };

    /// `size` bytes from `offset`.
    pub(crate) fn at(offset: u64, size: u64) -> Span<'static> {
        Span {
            offset: Some(offset),
            size: Some(size),
            name: None,
        }
    }

    /// The name `name` in the request's node.
    pub(crate) fn named(name: &'a OsStr) -> Span<'a> {
        Span {
            name: Some(name),
            ..Span::NONE
        }
    }
}

/// The context of one request, built by the transport from the kernel's request header and
/// passed by reference through every layer to the file system.
///
/// Lower and branch system calls are recorded under [`Request::op`] (no operation travels as a
/// parameter); a request whose work must not be recorded anywhere (a control file's `statfs`,
/// answered by the file system as for the root) is made with [`Request::unrecorded`].
///
/// A records layer that wants to know what the request did inside gives the layers below a
/// copy carrying a [`Trace`] ([`Request::traced`]); the lower and branch calls add to it.
#[derive(Debug, Clone)]
pub struct Request<'t> {
    /// The operation.
    pub op: Op,
    /// The kernel's request id (`unique`).
    pub unique: u64,
    /// The node the request is about (the parent directory for name operations).
    pub nodeid: Ino,
    /// The calling thread's id as the kernel sends it; 0 for requests the kernel makes on its
    /// own (writeback, background releases, forgets).
    pub pid: u32,
    /// The caller's file-system user id.
    pub uid: u32,
    /// The caller's file-system group id.
    pub gid: u32,
    /// The caller's umask, where the kernel sends one (create, mkdir, mknod, tmpfile); else 0.
    pub umask: u32,
    /// An `O_TRUNC` open (`OPEN`, or `CREATE` of a file that exists) by a caller without
    /// `CAP_FSETID`: setuid/setgid bits are cleared as the truncation would clear them on a
    /// local file system (`FUSE_OPEN_KILL_SUIDGID`). False for every other operation.
    pub kill_suidgid: bool,
    recorded: bool,
    trace: Option<&'t Trace>,
}

impl Request<'static> {
    /// A request `unique` for `op` on `nodeid` from `pid`/`uid`/`gid`, recorded by every layer.
    #[inline]
    pub fn new(op: Op, unique: u64, nodeid: Ino, pid: u32, uid: u32, gid: u32) -> Request<'static> {
        Request {
            op,
            unique,
            nodeid,
            pid,
            uid,
            gid,
            umask: 0,
            kill_suidgid: false,
            recorded: true,
            trace: None,
        }
    }

    /// A request made by the daemon itself (tests, tools): pid 0, root.
    pub fn internal(op: Op, nodeid: Ino) -> Request<'static> {
        Request::new(op, 0, nodeid, 0, 0, 0)
    }
}

impl<'t> Request<'t> {
    /// This request with the caller's `umask`.
    #[inline]
    pub fn with_umask(mut self, umask: u32) -> Request<'t> {
        self.umask = umask;
        self
    }

    /// This request with `FUSE_OPEN_KILL_SUIDGID` as the kernel sent it (see
    /// [`Request::kill_suidgid`]).
    #[inline]
    pub fn with_kill_suidgid(mut self, kill: bool) -> Request<'t> {
        self.kill_suidgid = kill;
        self
    }

    /// Whether the layers and the lower or branch calls record this request.
    #[inline]
    pub fn recorded(&self) -> bool {
        self.recorded
    }

    /// A copy of this request, about `nodeid`, whose work nothing records: not the profiling
    /// layer, not the lower or branch layers.
    pub fn unrecorded(&self, nodeid: Ino) -> Request<'t> {
        Request {
            nodeid,
            recorded: false,
            trace: None,
            ..self.clone()
        }
    }

    /// A copy of this request whose inner calls are added to `trace`.
    #[inline]
    pub fn traced<'a>(&self, trace: &'a Trace) -> Request<'a> {
        Request {
            op: self.op,
            unique: self.unique,
            nodeid: self.nodeid,
            pid: self.pid,
            uid: self.uid,
            gid: self.gid,
            umask: self.umask,
            kill_suidgid: self.kill_suidgid,
            recorded: self.recorded,
            trace: Some(trace),
        }
    }

    /// Where the inner calls of this request are recorded, if anywhere.
    #[inline]
    pub fn trace(&self) -> Option<&'t Trace> {
        self.trace
    }
}
