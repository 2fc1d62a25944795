//! Integration tests of fsprof-fuse: real mounts over real directories.
//!
//! Mount tests need /dev/fuse and root; without them they skip with a message, except under
//! `CI=true`, where that is a failure. Every mount is unmounted by the fixture's `Drop`, on
//! success, failure and panic.

mod fixture;

mod data;
mod direct_io;
mod errors;
mod ioctl;
mod lifecycle;
mod locks;
mod namespace;
mod panics;
mod perms;
mod profile;
mod reply_ready;
mod scale;
mod unlinked;
