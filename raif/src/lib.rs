//! # raif
//!
//! RAIF (Redundant Array of Independent Filesystems, thesis chapter 9) in user space: a fan-out
//! FUSE file system that serves one namespace over several *branch* directories, which may lie
//! on different file systems, with RAID-like redundancy chosen per file:
//!
//! * RAIF0 stripes a file over the branches, RAIF1 keeps a copy on each (or on `copies` of
//!   them), RAIF4 stripes over N−1 branches with XOR parity on a dedicated one, RAIF5 rotates
//!   the parity row by row ([`layout`], [`stripe`]).
//! * Every branch holds its part of a file at the same relative path as an ordinary file;
//!   directories, symlinks and special files exist on every branch.
//! * A policy file maps name globs to levels, stripe units and copies ([`policy`]); each
//!   file's layout, size and generation are kept in a `user.raif` extended attribute on its
//!   parts, so a new mount serves the same content.
//! * Each branch carries a marker naming the volume, its index, each member's generation and
//!   the volume's settings for new files ([`marker`], [`volume`]); a branch that is missing,
//!   replaced while mounted or answering `EIO` is failed and the volume is served degraded
//!   ([`branch`]); a directory that is not the member it is given as (an old copy of it,
//!   another volume's) is refused at mount; a branch that comes back is not trusted for files
//!   it missed.
//! * `raif status`, `raif fail`, `raif replace`, `raif rebuild` and `raif scrub` ([`admin`])
//!   show the volume, take a branch out, restore it and verify copies and parity.
//! * The mount is profiled like fsprof-fuse (it is wrapped in
//!   [`fsprof_fuse::layers::profiled`]): the `fuse` layer, plus one layer per branch in which
//!   every system call is recorded under the FUSE operation that made it ([`fs`]).
//!
//! ```no_run
//! use std::sync::Arc;
//! use fsprof_fuse::toolkit::lower::Lower;
//! use raif::branch::{Admit, BranchSet};
//! use raif::fs::{FsConfig, Raif};
//!
//! let branches = ["/srv/b0".into(), "/srv/b1".into()];
//! let layers = vec![Lower::default(), Lower::default()];
//! let bs = BranchSet::open(&branches, layers, true, Admit::Refuse).unwrap();
//! let fs = Raif::new(FsConfig::default(), Arc::new(bs)).unwrap();
//! // fsprof_fuse::daemon::mount::LiveMount::start(fs, &settings, &Default::default()).unwrap();
//! # drop(fs);
//! ```
//!
//! The RAID-5 write hole is closed by a write-intent log ([`intent`]): the rows being written
//! at a crash are resynchronised at the next mount.
//!
//! Every 4 KiB block of every part has a CRC-32C kept on the next branch ([`sums`]): reads
//! verify it and repair a bad block from redundancy; scrub names the bad block.
//!
//! A failed branch is rebuilt ([`rebuild`]) while the volume serves ([`online`]), or offline
//! (`raif rebuild`, [`admin`]).
//!
//! The modules depend on each other in one direction only, from the bottom up: the leaves
//! [`layout`] and [`reserved`]; the vocabulary of I/O on a file's parts ([`part_io`]) and the
//! policy ([`policy`]); checksums ([`sums`]); the data path ([`stripe`]); markers ([`marker`]);
//! branches ([`branch`]); what the write-intent log shares with the admin commands
//! ([`offline`]); the write-intent log ([`intent`]); inodes ([`inode`]); the file system
//! ([`fs`]) and its gate ([`gate`]); the rebuild engine ([`rebuild`]); the volume's report
//! ([`report`]); the rebuild while mounted ([`online`], which runs the engine under the
//! mount); the status file ([`status`]); the volume's remembered settings ([`volume`]); the
//! admin commands' front ends ([`admin`]); the program ([`app`]).
//!
//! Limitations: files without checksums (`--no-checksums`, or older) are judged by scrub only on
//! evidence; `readdir` shows the branches' inode numbers (`stat` shows the mount's); branches
//! need `user.*` extended attributes (ext4, xfs, btrfs, tmpfs ≥ 6.6).

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod admin;
pub mod app;
pub mod branch;
pub mod fs;
pub mod gate;
pub mod inode;
pub mod intent;
pub mod layout;
pub mod marker;
pub mod offline;
pub mod online;
pub mod part_io;
pub mod policy;
pub mod rebuild;
pub mod report;
pub mod reserved;
pub mod status;
pub mod stripe;
pub mod sums;
pub mod volume;
