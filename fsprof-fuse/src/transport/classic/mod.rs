//! The classic transport: fuser 0.18 reading and writing `/dev/fuse`.
//!
//! [`Classic`] is a [`fuser::Filesystem`] over any [`FileSystem`]: each fuser method builds the
//! request context, lends the handle and the reply buffer, calls the file system, and builds the
//! reply. Errors become reply errnos through the shared conversion ([`errno`]), and a panic in one request is
//! contained here ([`Classic::contain`]): logged, answered `EIO` (fuser answers a reply dropped
//! unsent with `EIO`), and the mount keeps serving.
//!
//! fuser answers what it does not decode itself: `STATX` (the kernel falls back to `GETATTR`),
//! `TMPFILE` (`O_TMPFILE` then fails with `EOPNOTSUPP`) and `SYNCFS` get `ENOSYS`. A batch forget
//! reaches [`FileSystem::forget`] once per node (fuser does not export the batch's element
//! type). `INTERRUPT` reaches [`FileSystem::interrupt`] and the end of the connection
//! [`FileSystem::disconnected`], through the vendored fuser's patch (`vendor/fuser/FSPROF.md`),
//! which also grows the worker pool while every worker is busy, up to
//! [`MountSettings::max_threads`].
//!
//! The fuser methods are in `serve.rs`, the conversions and reply helpers they share in
//! `convert.rs`.

#![allow(unsafe_code)]

mod convert;
mod serve;

use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use fuser::{Config, Errno, FileHandle, INodeNo, InitFlags, KernelConfig, MountOption, SessionACL};

use crate::filesystem::{FileSystem, Handle, Init, Ino, Lent, Request};
use crate::protocol::ops::Op;
use crate::transport::settings::MountSettings;

/// An operation's error as fuser's reply errno: the shared conversion
/// ([`crate::protocol::errno::to_reply`]; `EIO` for what the kernel would refuse) in fuser's type.
#[inline]
pub fn errno(e: &io::Error) -> Errno {
    Errno::from_i32(crate::protocol::errno::to_reply(e))
}

/// A [`FileSystem`] served over fuser's `/dev/fuse` session.
pub struct Classic<F> {
    fs: Arc<F>,
    extra: crate::filesystem::Caps,
    negotiated: Arc<parking_lot::Mutex<Option<Init>>>,
    /// Whether fuser's end of session destroys the file system.
    destroy: bool,
    /// How long the kernel may keep a name a `LOOKUP` did not find (zero: answered `ENOENT`).
    pub(super) negative_ttl: std::time::Duration,
}

impl<F: FileSystem> Classic<F> {
    /// Serves `fs`.
    pub fn new(fs: Arc<F>) -> Classic<F> {
        Classic {
            fs,
            extra: crate::filesystem::Caps::empty(),
            negotiated: Arc::default(),
            destroy: true,
            negative_ttl: std::time::Duration::ZERO,
        }
    }

    /// Answers a `LOOKUP` that finds nothing with a negative entry the kernel may keep for
    /// `ttl` ([`crate::filesystem::Entry::or_negative`]).
    pub fn with_negative_ttl(mut self, ttl: std::time::Duration) -> Classic<F> {
        self.negative_ttl = ttl;
        self
    }

    /// Also asks for `caps` at `INIT` (a transport's own, such as `FUSE_OVER_IO_URING`).
    pub fn with_caps(mut self, caps: crate::filesystem::Caps) -> Classic<F> {
        self.extra = caps;
        self
    }

    /// Leaves [`FileSystem::destroy`] to the caller: for a transport whose own threads may still
    /// be serving when fuser's session ends.
    pub fn destroyed_by_caller(mut self) -> Classic<F> {
        self.destroy = false;
        self
    }

    /// Where the outcome of `INIT` is kept once negotiated (for a transport that needs the
    /// request sizes): what was granted, and the request sizes as sent to the kernel.
    pub fn negotiated(&self) -> Arc<parking_lot::Mutex<Option<Init>>> {
        self.negotiated.clone()
    }

    /// Runs `f` (serving `op`), containing a panic in it: logged, and the reply, dropped unsent
    /// while unwinding, answers `EIO`.
    #[inline(always)]
    fn contain(op: Op, f: impl FnOnce()) {
        if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
            log::error!(
                "{} panicked, answered EIO: {}",
                op.name(),
                panic_message(&*p)
            );
        }
    }
}

/// The message of a panic payload.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// The request context of a fuser request.
#[inline(always)]
fn ctx(op: Op, req: &fuser::Request, nodeid: INodeNo) -> Request<'static> {
    Request::new(
        op,
        req.unique().0,
        Ino(nodeid.0),
        req.pid(),
        req.uid(),
        req.gid(),
    )
}

/// Lends the handle behind the kernel's number `fh` for one request.
#[inline(always)]
fn lend<H: Handle>(fh: FileHandle) -> Lent<H> {
    // SAFETY: the kernel passes back only handle numbers this session's file system replied
    // with (`into_raw` of the same type) and sends no request on one after its release.
    unsafe { Lent::new(fh.0) }
}

/// Takes back the handle behind `fh` for `release`/`releasedir`.
#[inline(always)]
fn take<H: Handle>(fh: FileHandle) -> H {
    // SAFETY: as `lend`; the kernel sends the release once, after every other request on it.
    unsafe { H::from_raw(fh.0) }
}

/// Applies what a file system asked for in `init` to fuser's configuration; `init` is left
/// with the request sizes as sent (fuser lowers what the protocol or the kernel does not
/// allow).
fn apply_init(init: &mut Init, config: &mut KernelConfig) {
    let want = InitFlags::from_bits_retain(init.granted().0);
    if let Err(missing) = config.add_capabilities(want) {
        log::warn!("kernel refused capabilities {missing:?}");
    }
    if let Err(max) = config.set_max_write(init.max_write) {
        let _ = config.set_max_write(max);
        init.max_write = max;
    }
    if let Err(max) = config.set_max_readahead(init.max_readahead) {
        let _ = config.set_max_readahead(max);
        init.max_readahead = max;
    }
    if let Some(n) = init.max_background {
        let _ = config.set_max_background(n);
    }
    if let Some(n) = init.congestion_threshold {
        let _ = config.set_congestion_threshold(n);
    }
    if init.max_stack_depth > 0 && config.set_max_stack_depth(init.max_stack_depth).is_err() {
        log::warn!("kernel refused stacking depth {}", init.max_stack_depth);
    }
}

/// fuser's configuration for `s`.
pub(crate) fn config(s: &MountSettings) -> Config {
    let auto_unmount = s.auto_unmount;
    let mut c = Config::default();
    let f = s.flags;
    c.mount_options = vec![
        MountOption::FSName(s.fsname.clone()),
        MountOption::Subtype(s.subtype.clone()),
        if f.dev {
            MountOption::Dev
        } else {
            MountOption::NoDev
        },
        if f.suid {
            MountOption::Suid
        } else {
            MountOption::NoSuid
        },
        // Always: the daemon serves every caller with its own rights (root's, as a rule) and
        // leaves permission checks to the kernel, against the attributes of LOWER.
        MountOption::DefaultPermissions,
    ];
    // mount(8)'s other flags, only where asked (fusermount3 gets what it got before).
    for (on, o) in [
        (f.read_only, MountOption::RO),
        (f.noexec, MountOption::NoExec),
        (f.noatime, MountOption::NoAtime),
        (f.sync, MountOption::Sync),
        (f.dirsync, MountOption::DirSync),
    ] {
        if on {
            c.mount_options.push(o);
        }
    }
    if auto_unmount {
        c.mount_options.push(MountOption::AutoUnmount);
    }
    c.acl = if s.allow_other {
        SessionACL::All
    } else if auto_unmount {
        SessionACL::RootAndOwner
    } else {
        SessionACL::Owner
    };
    c.n_threads = Some(s.threads.max(1));
    c.max_threads = Some(s.max_threads.max(s.threads).max(1));
    c.clone_fd = true;
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The classic transport answers through the shared conversion: an errno the kernel would
    /// refuse (it left the caller waiting for good) is EIO, as on the io_uring transport.
    #[test]
    fn replies_carry_only_errnos_the_kernel_takes() {
        let e = |n| errno(&io::Error::from_raw_os_error(n)).code();
        assert_eq!(e(libc::ENOENT), libc::ENOENT);
        assert_eq!(e(511), 511);
        assert_eq!(e(512), libc::EIO);
        assert_eq!(e(4095), libc::EIO);
        assert_eq!(errno(&io::Error::other("none")).code(), libc::EIO);
    }
}
