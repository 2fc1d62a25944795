//! Typed open-file and open-directory handles.
//!
//! A file system chooses what its handles are (an owned lower descriptor, a key into a table, a
//! boxed state) through [`FileSystem::File`](super::FileSystem::File) and
//! [`FileSystem::Dir`](super::FileSystem::Dir); files and directories are different types, so
//! one can never be taken for the other. Between requests the kernel holds a handle as a plain
//! number ([`Handle::into_raw`]); a transport turns the number of each request back into the
//! handle with [`Handle::from_raw`], lends it to the file system for that request
//! ([`Lent`]), and gives it back by value only to `release`/`releasedir`, after which the
//! kernel never sends that number again.
//!
//! This module holds the handle conversions' `unsafe` (with [`crate::sys`] and the
//! transports).

#![allow(unsafe_code)]

use std::mem::ManuallyDrop;
use std::ops::Deref;

/// An open-file or open-directory handle as the kernel keeps it: a number between requests.
///
/// [`Handle::from_raw`] is the exact inverse of [`Handle::into_raw`], and the numbers
/// `into_raw` returns stay below `2^63`: the control files' layer uses the numbers above for its
/// own handles (see [`crate::layers::control`]).
pub trait Handle: Sized {
    /// The number the kernel keeps for this handle (below `2^63`).
    fn into_raw(self) -> u64;

    /// The handle behind `raw`.
    ///
    /// # Safety
    ///
    /// `raw` must be a number that [`Handle::into_raw`] of this type returned, and the handle
    /// must not have been taken back already: at most one owned value exists at a time. The
    /// kernel guarantees this for the handles of one session: it passes back only the numbers
    /// that `open`, `create` and `opendir` replied with, and sends `release`/`releasedir` once,
    /// after every other request on the handle has been answered.
    unsafe fn from_raw(raw: u64) -> Self;
}

/// A handle lent to a file system for one request: the transport rebuilds it from the kernel's
/// number and never drops it (dropping could close what the kernel still holds open).
pub struct Lent<H>(ManuallyDrop<H>);

impl<H: Handle> Lent<H> {
    /// Lends the handle behind `raw` for the current request.
    ///
    /// # Safety
    ///
    /// As [`Handle::from_raw`]: `raw` came from `into_raw` of this handle type in this session
    /// and the handle has not been released. The value is never dropped, so lending the same
    /// live handle to several concurrent requests is sound as long as `H` allows shared use
    /// through `&H` (a descriptor does).
    #[inline]
    pub unsafe fn new(raw: u64) -> Lent<H> {
        // SAFETY: the caller's contract is `from_raw`'s.
        Lent(ManuallyDrop::new(unsafe { H::from_raw(raw) }))
    }
}

impl<H> Deref for Lent<H> {
    type Target = H;

    #[inline]
    fn deref(&self) -> &H {
        &self.0
    }
}

/// A handle that is only a number (a key into a table of the file system's own), for file
/// systems that keep their open objects in a table.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Key(u64);

impl Key {
    /// The handle for table key `k` (below `2^63`).
    pub fn new(k: u64) -> Key {
        debug_assert!(k < 1 << 63, "handle keys stay below 2^63");
        Key(k)
    }

    /// The table key.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0
    }
}

/// A lower descriptor as a handle: its number is the descriptor's.
impl Handle for crate::sys::FdHandle {
    #[inline]
    fn into_raw(self) -> u64 {
        use std::os::fd::IntoRawFd;
        self.into_fd().into_raw_fd() as u64
    }

    #[inline]
    unsafe fn from_raw(raw: u64) -> crate::sys::FdHandle {
        use std::os::fd::{FromRawFd, OwnedFd, RawFd};
        // SAFETY: the caller's contract (`Handle::from_raw`): `raw` is the number of a
        // descriptor this type gave up with `into_raw` and that no other value owns.
        crate::sys::FdHandle::new(unsafe { OwnedFd::from_raw_fd(raw as RawFd) })
    }
}

impl Handle for Key {
    #[inline]
    fn into_raw(self) -> u64 {
        self.0
    }

    #[inline]
    unsafe fn from_raw(raw: u64) -> Key {
        Key(raw)
    }
}

/// The first handle number of a layer's own handles ([`Layered::Own`]).
pub const OWN_BASE: u64 = 1 << 63;

/// An open file of a layer that opens some files itself (the control files' snapshots) over an
/// inner file system: the layer's own handles are numbered from `2^63`, where no inner handle
/// goes ([`Handle`]).
#[derive(Debug)]
pub enum Layered<H> {
    /// One of the layer's own, by its number (below `2^63`).
    Own(u64),
    /// A file of the layer below.
    Inner(H),
}

impl<H: Handle> Handle for Layered<H> {
    #[inline]
    fn into_raw(self) -> u64 {
        match self {
            Layered::Own(n) => OWN_BASE | n,
            Layered::Inner(h) => {
                let raw = h.into_raw();
                debug_assert!(raw < OWN_BASE, "inner handles stay below 2^63");
                raw
            }
        }
    }

    #[inline]
    unsafe fn from_raw(raw: u64) -> Layered<H> {
        if raw >= OWN_BASE {
            Layered::Own(raw & !OWN_BASE)
        } else {
            // SAFETY: the caller's contract: `raw` came from `into_raw` of this type, and
            // numbers below 2^63 are the inner file system's own.
            Layered::Inner(unsafe { H::from_raw(raw) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layered_handles_keep_the_two_spaces_apart() {
        let own: Layered<Key> = Layered::Own(5);
        let raw = own.into_raw();
        assert_eq!(raw, OWN_BASE | 5);
        // SAFETY: `raw` came from `into_raw` just above.
        assert!(matches!(
            unsafe { Layered::<Key>::from_raw(raw) },
            Layered::Own(5)
        ));
        let inner: Layered<Key> = Layered::Inner(Key::new(7));
        let raw = inner.into_raw();
        assert_eq!(raw, 7);
        // SAFETY: as above.
        match unsafe { Layered::<Key>::from_raw(raw) } {
            Layered::Inner(k) => assert_eq!(k.get(), 7),
            Layered::Own(_) => panic!("inner handle taken for the layer's own"),
        }
    }
}
