//! Layers: types that implement [`FileSystem`] over an inner one, stacked by the program in one
//! place (`daemon/app.rs`): transport → [`control::Control`] → [`profiled`] → [`recorded`] →
//! file system.
//!
//! Most layers only need to act around every request (time it, delay it, log it): they
//! implement [`Hook`], and [`Hooked`] does the forwarding of every operation once, for all of
//! them (made from the table of operations, [`for_each_op!`](crate::for_each_op)). A layer that
//! answers some requests itself ([`control::Control`]) writes those methods and forwards the
//! rest (`filesystem::impl_rest!`).

pub mod access;
pub mod control;
pub mod control_files;
pub mod profiled;
pub mod recorded;

use std::ffi::OsStr;
use std::io;
use std::path::Path;

use crate::filesystem::request::Span;
use crate::filesystem::{
    AttrOut, DirPlusSink, DirSink, Entry, FileSystem, Init, Ino, IoctlOut, Lock, Opened, Outcome,
    Request, SetAttr, Statfs, WriteFlags,
};

/// Something done around every request of a [`Hooked`] file system.
pub trait Hook: Send + Sync {
    /// Runs the request `req` (about node [`Request::nodeid`], over `span` of it) by calling
    /// `serve` with `req` (or a copy of it that carries more, e.g. [`Request::traced`]), which
    /// runs it in the inner file system, and returns what that answers (or its own answer
    /// instead).
    fn around<R>(
        &self,
        req: &Request,
        span: Span<'_>,
        serve: impl FnOnce(&Request) -> io::Result<R>,
    ) -> io::Result<R>;

    /// Request `unique` should end early ([`FileSystem::interrupt`]); the inner file system is
    /// told too.
    fn interrupt(&self, unique: u64) {
        let _ = unique;
    }

    /// The connection has ended ([`FileSystem::disconnected`]); the inner file system is told
    /// too.
    fn disconnected(&self) {}
}

/// A file system with a [`Hook`] around each of its requests.
pub struct Hooked<H, F> {
    hook: H,
    inner: F,
}

impl<H: Hook, F: FileSystem> Hooked<H, F> {
    /// `inner` with `hook` around its requests.
    pub fn new(hook: H, inner: F) -> Hooked<H, F> {
        Hooked { hook, inner }
    }

    /// The hook.
    pub fn hook(&self) -> &H {
        &self.hook
    }

    /// The inner file system.
    pub fn inner(&self) -> &F {
        &self.inner
    }
}

/// Where a request acts, from its entry in the table of operations (`span[...]`).
macro_rules! span {
    () => {
        Span::NONE
    };
    (name($name:expr)) => {
        Span::named($name)
    };
    (range($offset:expr, $len:expr)) => {
        Span::at($offset, $len as u64)
    };
    (truncate($size:expr)) => {
        Span {
            offset: $size,
            ..Span::NONE
        }
    };
}

/// [`Hooked`]'s operations, from the table: each runs in the hook, over its span.
macro_rules! hooked {
    (($d:tt) {} $($(#[$m:meta])* $op:ident $name:ident ($($arg:ident: $ty:ty),*) -> $ret:ty,
      span[$($span:tt)*], opcodes[$($code:ident)*];)*) => {
        impl<H: Hook, F: FileSystem> FileSystem for Hooked<H, F> {
            type File = F::File;
            type Dir = F::Dir;

            fn init(&self, init: &mut Init) -> io::Result<()> {
                self.inner.init(init)
            }

            fn destroy(&self) {
                self.inner.destroy()
            }

            fn interrupt(&self, unique: u64) {
                self.hook.interrupt(unique);
                self.inner.interrupt(unique)
            }

            fn disconnected(&self) {
                self.hook.disconnected();
                self.inner.disconnected()
            }

            $(
                $(#[$m])*
                fn $name(&self, req: &Request, $($arg: $ty),*) -> $ret {
                    let span = span!($($span)*);
                    let served = self.hook.around(req, span, |req| {
                        self.inner.$name(req, $($arg),*).into_result()
                    });
                    Outcome::from_result(served)
                }
            )*
        }
    };
}

crate::for_each_op!(hooked);

#[cfg(test)]
mod tests;
