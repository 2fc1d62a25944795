//! # fsprof-fuse
//!
//! A passthrough FUSE file system (a user-space Base0fs) that serves a lower directory unchanged
//! and profiles every operation it serves, in log2 latency buckets (the FSprof/OSprof method).
//!
//! The parts, each a folder (RAIF builds on all but the passthrough):
//!
//! * [`protocol`]: the FUSE protocol: the kernel's structs and opcodes ([`protocol::abi`]),
//!   the names of the operations and of the lower system calls ([`protocol::ops`]), and the
//!   errno a reply carries ([`protocol::errno`]).
//! * [`sys`]: safe wrappers, one per system call, split by domain.
//! * [`filesystem`]: the operation trait between the transports and the file systems, its
//!   request (with the trace and span it carries), typed handles and replies, and a fake.
//! * [`toolkit`]: what the file systems share: [`toolkit::lower`] (timing lower or branch
//!   system calls), [`toolkit::dircursor`], [`toolkit::buffer`], [`toolkit::fdcache`],
//!   [`toolkit::sharded`] and [`toolkit::handle_table`], what is asked of the kernel at `INIT`
//!   ([`toolkit::init_flags`], [`toolkit::kernel_cache`]), which extended attributes a caller
//!   sees ([`toolkit::xattr_names`]), creating as the caller ([`toolkit::create_as`]),
//!   [`toolkit::attr`], [`toolkit::ioctl`], and the users' input ([`toolkit::caller`],
//!   [`toolkit::glob`], [`toolkit::config_file`]).
//! * [`records`]: request records (which file, which process, which lower call made a request
//!   slow) and injected faults.
//! * [`passthrough`]: the passthrough file system, split by concern, with its inode store
//!   ([`passthrough::inode_store`]).
//! * [`layers`]: wrappers of the trait: [`layers::control`] (serving the control files whose
//!   content is [`layers::control_files`], read as [`layers::access`] allows),
//!   [`layers::profiled`] (timing into the `fuse` layer) and [`layers::recorded`] (the
//!   records around each request).
//! * [`transport`]: [`transport::classic`] (fuser over `/dev/fuse`) and [`transport::uring`]
//!   (FUSE over io_uring, Linux 6.14+); each builds replies and converts errnos in one place,
//!   and contains panics.
//! * [`daemon`]: the programs' set-up: [`daemon::app`] (the configuration, the stack of one
//!   mount, the lifecycle), [`daemon::cli`] (options shared with `raif`), [`daemon::mount`],
//!   [`daemon::kernel`] (`--kernel`, `--syscalls`), [`daemon::metrics`], [`daemon::daemon_log`]
//!   and [`daemon::setup`] (the one-line error of a set-up).
//!
//! The modules depend on each other in one direction only, from the bottom up: the protocol
//! ([`protocol`]); the system calls ([`sys`]); the operation trait and its request
//! ([`filesystem`]); the toolkit ([`toolkit`]) beside the request records ([`records`]), which
//! use each other (a lower call applies the injection rules; the rules are read with the
//! toolkit's globs and files); the passthrough ([`passthrough`]); the layers ([`layers`]); the
//! transports ([`transport`]); the daemon ([`daemon`]).
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
