//! Integration tests of raif: real mounts over real branch directories.
//!
//! Mount tests need /dev/fuse and root; without them they skip with a message, except under
//! `CI=true`, where that is a failure. Every mount is unmounted by the fixture's `Drop`, on
//! success, failure and panic.

mod fixture;
mod records;
mod request_records;

mod alloc;
mod audit;
mod checksums;
mod control;
mod crash;
mod failure;
mod fdlimit;
mod full;
mod kernel;
mod levels;
mod lifecycle;
mod metrics;
mod namespace;
mod online;
mod perms;
mod policy;
mod posix;
mod privs;
mod profile;
mod sparse;
mod unlinked;
mod volume;
