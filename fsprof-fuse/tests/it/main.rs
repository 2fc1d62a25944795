//! Integration tests of fsprof-fuse: real mounts over real directories, each mount test on both
//! transports (`NAME::classic`, `NAME::uring`; see `fixture`).
//!
//! Mount tests need /dev/fuse and root; without them they skip with a message, except under
//! `CI=true`, where that is a failure. Every mount is unmounted by the fixture's `Drop`, on
//! success, failure and panic.

#[macro_use]
extern crate test_support;

mod fixture;

mod blocking;
mod cache;
mod data;
mod direct_io;
mod errors;
mod fidelity;
mod handles;
mod inject;
mod ioctl;
mod kernel;
mod lifecycle;
mod locks;
mod logging;
mod mapped;
mod metrics;
mod multiuser;
mod namespace;
mod panics;
mod perms;
mod privs;
mod profile;
mod scale;
mod syscalls;
mod timing;
mod transports;
mod unlinked;
