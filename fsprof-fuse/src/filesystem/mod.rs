//! The operation trait: the one interface between the kernel transports below and the file
//! systems and layers above.
//!
//! ```text
//!   transport (classic /dev/fuse, or io_uring)   decodes requests, builds replies, one errno
//!       │                                        conversion, contains panics (EIO)
//!   Control                                      the control files; never counted
//!       │
//!   Profiled                                     times each request into the `fuse` layer
//!       │
//!   Passthrough / Raif                           the file system (lower or branch calls timed
//!                                                under the request's operation)
//! ```
//!
//! Each method takes the request's context ([`Request`]: operation, request id, pid, uid, gid,
//! umask, node) and typed arguments, and returns `io::Result` of a typed reply; errors stay raw
//! `io::Error`s carrying the OS errno until a transport turns them into the reply's errno.
//! Reads, `readlink` and the xattr calls fill a buffer the transport lends (its reply buffer,
//! where it has one), and directory listings add to the transport's reply ([`DirSink`],
//! [`DirPlusSink`]), so data is copied once. A layer is a type that implements this trait over
//! an inner one and forwards what it does not handle (see [`crate::layers`]).
//!
//! Open files and directories are typed handles of the file system's choosing
//! ([`FileSystem::File`], [`FileSystem::Dir`]; see [`handle`]). Requests on an open object
//! borrow its handle; `release` and `releasedir` take it back by value.
//!
//! Every method but `init`, `destroy`, `interrupt`, `disconnected` and `forget` answers
//! `ENOSYS` by default, as the kernel
//! expects of an operation a file system does not serve (for some it then stops asking).

pub mod handle;
pub mod init;
pub mod reply;
pub mod request;
pub mod trace;

#[cfg(test)]
pub mod fake;

use std::ffi::OsStr;
use std::io;
use std::path::Path;

pub use handle::{Handle, Key, Layered, Lent};
pub use init::{Caps, Init};
pub use reply::{
    Attr, AttrOut, DirPlusSink, DirSink, Entry, FileType, FopenFlags, IoctlOut, Opened, SetAttr,
    SetTime, Statfs, Timespec, WriteFlags,
};
pub use request::{Ino, Request};

/// `ENOSYS`: the default answer of an operation not served.
#[inline]
pub fn enosys<T>() -> io::Result<T> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

/// What an operation returns: `io::Result<T>`, or `()` for `forget`, which the kernel
/// expects no reply to. Lets code made for every operation ([`for_each_op!`](crate::for_each_op))
/// treat both alike; the conversions compile to nothing.
pub trait Outcome: Sized {
    /// What a success carries.
    type Value;
    /// The answer of an operation not served: `ENOSYS`, or nothing.
    fn unserved() -> Self;
    /// As a result.
    fn into_result(self) -> io::Result<Self::Value>;
    /// From a result (an error of an operation without reply is dropped: nobody reads it).
    fn from_result(r: io::Result<Self::Value>) -> Self;
}

impl<T> Outcome for io::Result<T> {
    type Value = T;
    #[inline(always)]
    fn unserved() -> Self {
        enosys()
    }
    #[inline(always)]
    fn into_result(self) -> io::Result<T> {
        self
    }
    #[inline(always)]
    fn from_result(r: io::Result<T>) -> Self {
        r
    }
}

impl Outcome for () {
    type Value = ();
    #[inline(always)]
    fn unserved() {}
    #[inline(always)]
    fn into_result(self) -> io::Result<()> {
        Ok(())
    }
    #[inline(always)]
    fn from_result(_: io::Result<()>) {}
}

/// The trait's methods, from the table.
macro_rules! trait_methods {
    (($d:tt) {} $($(#[$m:meta])* $op:ident $name:ident ($($arg:ident: $ty:ty),*) -> $ret:ty,
      span[$($span:tt)*], opcodes[$($code:ident)*];)*) => {
        $(
            $(#[$m])*
            fn $name(&self, req: &Request, $($arg: $ty),*) -> $ret {
                Outcome::unserved()
            }
        )*
    };
}

/// Implements [`FileSystem`] for a type with the methods written in it, and every other
/// operation of the table ([`for_each_op!`](crate::for_each_op)) made by `$rest!`, a macro
/// called as `$rest! { ($($args)*) method #[attributes] (arg: Type, ...) -> Return }`
/// ([`forward`]: pass it to a field). So a layer writes only what it does differently, and a
/// new operation reaches it without an edit.
///
/// ```ignore
/// impl_rest! {
///     impl[F: FileSystem] FileSystem for Shy<F>, rest: forward(inner) {
///         type File = F::File;
///         type Dir = F::Dir;
///
///         fn unlink(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<()> {
///             Err(io::Error::from_raw_os_error(libc::EPERM))
///         }
///     }
/// }
/// ```
///
/// (The type's own methods are inside a macro, so rustfmt leaves them as written.)
macro_rules! impl_rest {
    (impl[$($gen:tt)*] FileSystem for $ty:ty, rest: $rest:ident ($($args:tt)*) {
        $(type $tn:ident = $tv:ty;)*
        $($(#[$fm:meta])* fn $f:ident ($($p:tt)*) $(-> $r:ty)? $body:block)*
    }) => {
        $crate::for_each_op!(impl_rest @rest [$($gen)*] [$ty] $rest ($($args)*)
            [$(type $tn = $tv;)* $($(#[$fm])* fn $f ($($p)*) $(-> $r)? $body)*] [$($f)*]);
    };
    (($d:tt) { @rest [$($gen:tt)*] [$ty:ty] $rest:ident ($($args:tt)*) [$($items:tt)*]
        [$($written:ident)*] }
     $($(#[$m:meta])* $op:ident $name:ident ($($arg:ident: $aty:ty),*) -> $ret:ty,
      span[$($span:tt)*], opcodes[$($code:ident)*];)*) => {
        macro_rules! __unless_written {
            $(($written $d($d t:tt)*) => {};)*
            ($d($d t:tt)*) => { $rest! { ($($args)*) $d($d t)* } };
        }
        impl<$($gen)*> FileSystem for $ty {
            $($items)*
            $(__unless_written! { $name $(#[$m])* ($($arg: $aty),*) -> $ret })*
        }
    };
}
pub(crate) use impl_rest;

/// For [`impl_rest!`]: an operation passed to the file system in field `$field`, unchanged.
macro_rules! forward {
    (($field:ident) $name:ident $(#[$m:meta])* ($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        $(#[$m])*
        fn $name(&self, req: &Request, $($arg: $ty),*) -> $ret {
            self.$field.$name(req, $($arg),*)
        }
    };
}
pub(crate) use forward;

/// A byte-range lock as `getlk` and `setlk` see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lock {
    /// First byte.
    pub start: u64,
    /// Last byte (inclusive; `u64::MAX` for "to the end").
    pub end: u64,
    /// `F_RDLCK`, `F_WRLCK` or `F_UNLCK`.
    pub typ: i32,
    /// The holder's pid.
    pub pid: u32,
}

/// A file system served through a transport (see the module documentation).
#[allow(unused_variables)]
pub trait FileSystem: Send + Sync {
    /// An open file's handle.
    type File: Handle;
    /// An open directory's handle.
    type Dir: Handle;

    /// Negotiates with the kernel before the first request.
    fn init(&self, init: &mut Init) -> io::Result<()> {
        Ok(())
    }

    /// The session ends (after the last request).
    fn destroy(&self) {}

    /// The kernel asks that request `unique` end early: its caller got a signal
    /// (`FUSE_INTERRUPT`). Best effort, with no reply of its own: a request that can stop (an
    /// injected delay) answers `EINTR` at once, any other simply finishes. Comes on another
    /// thread than the request's, possibly before the request reaches the file system.
    fn interrupt(&self, unique: u64) {}

    /// The connection has ended (unmounted or aborted) while requests may still be running:
    /// whatever waits should stop waiting, since nobody will read the answer. Called once,
    /// before [`FileSystem::destroy`].
    fn disconnected(&self) {}

    // The operations, from the table (`for_each_op!`): each takes the request and the
    // arguments listed there, and answers `ENOSYS` (or nothing) unless served.
    crate::for_each_op!(trait_methods);
}
