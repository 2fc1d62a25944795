//! # fsprof-fuse
//!
//! A passthrough FUSE file system (a user-space Base0fs) that serves a lower directory unchanged
//! and profiles every operation it serves, in log2 latency buckets (the FSprof/OSprof method).
//!
//! The pieces, usable on their own (RAIF builds on them):
//!
//! * [`sys`]: safe wrappers, one per system call (the only `unsafe`).
//! * [`errno`]: the one conversion from `io::Error` to a FUSE errno.
//! * [`init`]: what the file systems ask of the kernel at `INIT` (also RAIF's).
//! * [`fdcache`]: the bounded, pinnable descriptor cache (also RAIF's).
//! * [`inode`]: the inode store (file handles or parent+name, cached descriptors).
//! * [`ioctl`]: the answer to `ioctl` requests (none reaches the lower file).
//! * [`passthrough`]: the passthrough file system, split by concern.
//! * [`profiled`]: the profiling decorator over any [`fuser::Filesystem`], with the control files
//!   of [`control`] and panic containment.
//! * [`mount`]: mount-point checks, background mode, signals.
//! * [`app`]: the `fsprof-fuse` program's configuration and run, and the daemon lifecycle.
//! * [`cli`]: command-line options and helpers shared with `raif`.
//! * [`xattr`]: extended-attribute replies (also RAIF's).
//! * [`testing`]: helpers for mount tests (a daemon that is always unmounted).
//!
//! ```no_run
//! use fsprof_fuse::passthrough::{Lower, Passthrough, PassthroughConfig};
//! use fsprof_fuse::profiled::Profiled;
//! use profile_store::{Recorder, RecorderConfig};
//!
//! let rec = Recorder::new("fuse", &fsprof_fuse::ops::NAMES, &RecorderConfig::default());
//! let pt = Passthrough::new("/srv/data".as_ref(), PassthroughConfig::default(), Lower::default()).unwrap();
//! let fs = Profiled::new(pt, Some(rec), None);
//! // fuser::mount(fs, "/mnt", &fuser::Config::default()).unwrap();
//! # drop(fs);
//! ```
//!
//! Limitations (fuser 0.18): no `TMPFILE` (so `O_TMPFILE` fails with `EOPNOTSUPP`), `STATX`
//! (the kernel falls back to `GETATTR`) or `SYNCFS` requests; `FUSE_INTERRUPT` is answered with
//! `ENOSYS`. POSIX and BSD locks are kernel-local (the kernel does not forward them): correct
//! between processes using this mount, invisible to processes using LOWER directly. Mounts
//! always use `default_permissions` (the kernel checks permissions against LOWER's attributes),
//! so `ACCESS` is never sent and not implemented.

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod app;
pub mod attr;
pub mod cli;
pub mod control;
pub mod creds;
pub mod errno;
pub mod fdcache;
pub mod handles;
pub mod init;
pub mod inode;
pub mod ioctl;
pub mod mount;
pub mod ops;
pub mod passthrough;
pub mod profiled;
pub mod sys;
pub mod testing;
pub mod xattr;
