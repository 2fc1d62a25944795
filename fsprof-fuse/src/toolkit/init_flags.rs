//! What the file systems ask of the kernel at `INIT`: one negotiation for the passthrough and
//! RAIF, so that a capability one of them needs for correctness (POSIX ACLs, the caller's
//! umask) cannot be left out of the other.
//!
//! fuser asks for almost nothing by default. Every fsprof file system wants:
//!
//! * `FUSE_ASYNC_READ`, `FUSE_BIG_WRITES`, `FUSE_MAX_PAGES`, `FUSE_PARALLEL_DIROPS`,
//!   `FUSE_ATOMIC_O_TRUNC`, `FUSE_CACHE_SYMLINKS`: speed.
//! * `FUSE_POSIX_ACL`: the kernel's permission checks (mounts use `default_permissions`) include
//!   the ACLs stored in the lower files' `system.posix_acl_*` attributes; without it an ACL
//!   entry denying a user is ignored.
//! * `FUSE_DONT_MASK`: the caller's umask comes unapplied and the file system creates with it
//!   ([`crate::toolkit::create_as::create_as`]), so the lower file system applies it only where no default
//!   ACL says otherwise, as locally.
//! * `FUSE_HANDLE_KILLPRIV_V2`: the file system clears setuid/setgid bits on writes and
//!   truncation by other users itself; without it the kernel asks `GETXATTR
//!   security.capability` before every write.
//!
//! and, as [`Wants`] says, `FUSE_AUTO_INVAL_DATA` (a page cache kept across opens),
//! `FUSE_DO_READDIRPLUS` (a file system that serves it), `FUSE_WRITEBACK_CACHE` and others.
//! Locks stay kernel-local: `FUSE_POSIX_LOCKS` and `FUSE_FLOCK_LOCKS` are never requested.

use crate::filesystem::{Caps, Init};
use crate::toolkit::kernel_cache::Readdirplus;

/// What every fsprof file system asks for (see the module documentation).
pub const COMMON: Caps = Caps::ASYNC_READ
    .union(Caps::BIG_WRITES)
    .union(Caps::MAX_PAGES)
    .union(Caps::PARALLEL_DIROPS)
    .union(Caps::ATOMIC_O_TRUNC)
    .union(Caps::CACHE_SYMLINKS)
    .union(Caps::POSIX_ACL)
    .union(Caps::DONT_MASK)
    .union(Caps::HANDLE_KILLPRIV_V2);

/// Where file systems differ in what they ask of the kernel.
#[derive(Debug, Clone, Copy)]
pub struct Wants {
    /// Keep the page cache across opens, invalidated when a file's size or mtime changes
    /// (`FUSE_AUTO_INVAL_DATA`).
    pub keep_cache: bool,
    /// The file system serves `READDIRPLUS` (`FUSE_DO_READDIRPLUS`, `FUSE_READDIRPLUS_AUTO`).
    pub readdirplus: bool,
    /// Kernel writeback cache (`FUSE_WRITEBACK_CACHE`).
    pub writeback: bool,
    /// Further capabilities (e.g. `FUSE_PASSTHROUGH`).
    pub extra: Caps,
    /// Capabilities not to request, whatever the rest says (for measuring what each buys).
    pub off: Caps,
    /// Largest read or write request and readahead (bytes); the kernel's maximum if it allows
    /// less.
    pub max_io: u32,
    /// Kernel background request limit (the congestion threshold is 3/4 of it); `None` leaves
    /// the kernel's default.
    pub max_background: Option<u16>,
}

/// The `READDIRPLUS` capabilities not to ask for, so that the kernel lists directories `when`
/// (of a file system that serves `READDIRPLUS`).
pub fn readdirplus_off(when: Readdirplus) -> Caps {
    match when {
        Readdirplus::Auto => Caps::empty(),
        Readdirplus::On => Caps::READDIRPLUS_AUTO,
        Readdirplus::Off => Caps::DO_READDIRPLUS | Caps::READDIRPLUS_AUTO,
    }
}

/// Asks the kernel for [`COMMON`] and what `w` adds, as far as it supports them, and sets the
/// request sizes. Returns the capabilities asked for and supported.
pub fn negotiate(init: &mut Init, w: &Wants) -> Caps {
    let mut want = COMMON | w.extra;
    if w.keep_cache {
        want |= Caps::AUTO_INVAL_DATA;
    }
    if w.readdirplus {
        want |= Caps::DO_READDIRPLUS | Caps::READDIRPLUS_AUTO;
    }
    if w.writeback {
        want |= Caps::WRITEBACK_CACHE;
    }
    want = want & !w.off;
    let unsupported = want & !init.offered;
    if !unsupported.is_empty() {
        log::info!("kernel lacks capabilities {:#x}", unsupported.0);
    }
    init.want |= want;
    init.max_write = w.max_io;
    init.max_readahead = init.max_readahead.min(w.max_io);
    if let Some(n) = w.max_background {
        init.max_background = Some(n);
        init.congestion_threshold = Some(n * 3 / 4);
    }
    want & init.offered
}
