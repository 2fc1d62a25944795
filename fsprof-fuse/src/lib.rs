//! # fsprof-fuse
//!
//! A passthrough FUSE file system (a user-space Base0fs) that serves a lower directory unchanged
//! and profiles every operation it serves, in log2 latency buckets (the FSprof/OSprof method).
//!
//! The pieces, usable on their own (RAIF builds on them):
//!
//! * [`filesystem`]: the operation trait between the transports and the file systems, its
//!   request context, typed handles and typed replies.
//! * [`layers`]: wrappers of the trait: [`layers::control`] (the control files of
//!   [`control`]) and [`layers::profiled`] (timing into the `fuse` layer).
//! * [`transport`]: [`transport::classic`] (fuser over `/dev/fuse`) and [`transport::uring`]
//!   (FUSE over io_uring, Linux 6.14+); each builds replies and converts errnos in one place,
//!   and contains panics.
//! * [`ioctl`]: the answer to `ioctl` requests (none reaches the lower file).
//! * [`kernel`]: `--kernel`, the kernel's layers (crate `kernel-trace`) wired into a mount.
//! * [`passthrough`]: the passthrough file system, split by concern.
//! * The toolkit RAIF shares: [`lower`] (timing lower or branch system calls), [`dircursor`]
//!   (reading a lower directory from any offset), [`buffer`] (buffers aligned for direct I/O), [`fdcache`] (the bounded, pinnable
//!   descriptor cache), [`sharded`] and [`handles`] (sharded maps and handle tables), [`init`]
//!   (what is asked of the kernel at `INIT`), [`xattr`] (which names a caller sees),
//!   [`creds`] (creating as the caller), [`attr`], [`mount`] (mount-point checks, background
//!   mode, signals).
//! * [`sys`]: safe wrappers, one per system call, split by domain.
//! * [`inode`]: the passthrough's inode store (file handles or parent+name, cached
//!   descriptors).
//! * [`app`]: the `fsprof-fuse` program's configuration, the stack of one mount, and the
//!   daemon lifecycle; [`cli`]: command-line options shared with `raif`; [`cache`]: the
//!   kernel-cache presets (`--cache exact|normal|fast`).
//!
//! ```no_run
//! use fsprof_fuse::layers::{control::Control, profiled::profiled};
//! use fsprof_fuse::toolkit::lower::Lower;
//! use fsprof_fuse::passthrough::{Passthrough, PassthroughConfig};
//! use fsprof_fuse::sys::fuse::Device;
//! use profile_store::{Recorder, RecorderConfig};
//!
//! let rec = Recorder::new("fuse", &fsprof_fuse::protocol::ops::NAMES, &RecorderConfig::default());
//! let device = Device::new();
//! let pt = Passthrough::new("/srv/data".as_ref(), PassthroughConfig::default(), Lower::default(), device.clone()).unwrap();
//! let fs = Control::new(profiled(pt, Some(rec), None, Default::default()), None);
//! // fsprof_fuse::daemon::mount::LiveMount::start(fs, &settings, &device).unwrap();
//! # drop(fs);
//! ```
//!
//! Limitations: on the classic transport (fuser 0.18), and so on the io_uring transport, which
//! answers alike, no `TMPFILE` (so `O_TMPFILE` fails with `EOPNOTSUPP`), `STATX` (the kernel
//! falls back to `GETATTR`) or `SYNCFS` requests. `FUSE_INTERRUPT` reaches
//! [`filesystem::FileSystem::interrupt`] through the vendored fuser's patch (an injected delay
//! then ends with `EINTR`). POSIX and BSD locks are kernel-local (the kernel does not
//! forward them): correct between processes using this mount, invisible to processes using
//! LOWER directly. Mounts always use `default_permissions` (the kernel checks permissions
//! against LOWER's attributes), so `ACCESS` is never sent and not implemented.

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod daemon;
pub mod filesystem;
pub mod layers;
pub mod passthrough;
pub mod protocol;
pub mod records;
pub mod sys;
pub mod toolkit;
pub mod transport;
