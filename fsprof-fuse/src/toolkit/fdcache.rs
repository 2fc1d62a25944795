//! A bounded cache of descriptors of lower objects: the one implementation behind
//! fsprof-fuse's inode store ([`crate::passthrough::inode_store`]) and RAIF's.
//!
//! An object that can have descriptors cached (an inode) embeds [`FdSlots`]: one slot per
//! descriptor it may have (one for the passthrough, one per branch for RAIF), a CLOCK reference
//! bit and a count of pins; it implements [`Cached`] to show them to the cache. [`FdCache`]
//! bounds the descriptors held in all slots together.
//!
//! # Replacement
//!
//! An object whose slots get their first descriptor joins a ring (CLOCK), in one of a few shards
//! with a lock each. When the shard holds more unpinned descriptors than its share of the
//! capacity (pinned ones are counted when room is made, and do not count against it), its ring
//! is walked: recently used objects lose their reference bit and stay, pinned ones stay, the
//! others give up all their descriptors. Evicted, taken and replaced descriptors are closed
//! after the locks are released, never under one. When an `open` fails because the process is
//! out of descriptors, [`FdCache::retry_emfile`] evicts harder and retries once.
//!
//! # Pins
//!
//! While the kernel holds an open handle of an object, its descriptors are pinned
//! ([`FdCache::pin`] until [`FdCache::unpin`] or [`FdCache::release`]): never evicted, so an
//! object that loses its name (unlinked, or replaced by a rename) stays reachable for the
//! operations on it. The cache then holds at most its capacity plus the pinned objects'
//! descriptors, which the open handles bound.
//!
//! # Memory
//!
//! An object is in its ring at most once. Entries of objects that were dropped, or whose
//! descriptors were taken (forgotten, removed), go when eviction passes them, or when a ring
//! grows to twice what it held after it was last tidied (and at least twice its shard's
//! capacity): so the rings stay bounded by the objects holding descriptors, whatever the churn
//! of objects created and removed.

use std::collections::VecDeque;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

/// A cached descriptor, shared with the operations using it.
pub type Fd = Arc<OwnedFd>;

/// The slots of one object's descriptors.
pub trait FdArray: Send + 'static {
    /// The slots.
    fn slots(&self) -> &[Option<Fd>];
    /// The slots, to change.
    fn slots_mut(&mut self) -> &mut [Option<Fd>];
    /// Moves every descriptor out into a new array, leaving these slots empty.
    fn take_all(&mut self) -> Self
    where
        Self: Sized;
    /// Moves the descriptors of the slots `which` picks out into a new array (the others there
    /// empty), leaving the rest.
    fn take_where(&mut self, which: impl Fn(usize) -> bool) -> Self
    where
        Self: Sized;
}

impl<const N: usize> FdArray for [Option<Fd>; N] {
    fn slots(&self) -> &[Option<Fd>] {
        self
    }
    fn slots_mut(&mut self) -> &mut [Option<Fd>] {
        self
    }
    fn take_all(&mut self) -> Self {
        std::array::from_fn(|i| self[i].take())
    }
    fn take_where(&mut self, which: impl Fn(usize) -> bool) -> Self {
        std::array::from_fn(|i| if which(i) { self[i].take() } else { None })
    }
}

impl FdArray for Box<[Option<Fd>]> {
    fn slots(&self) -> &[Option<Fd>] {
        self
    }
    fn slots_mut(&mut self) -> &mut [Option<Fd>] {
        self
    }
    fn take_all(&mut self) -> Self {
        self.iter_mut().map(Option::take).collect()
    }
    fn take_where(&mut self, which: impl Fn(usize) -> bool) -> Self {
        self.iter_mut()
            .enumerate()
            .map(|(i, f)| if which(i) { f.take() } else { None })
            .collect()
    }
}

/// The cached descriptors of one object, with its replacement state.
#[derive(Debug)]
pub struct FdSlots<S> {
    fds: Mutex<S>,
    /// CLOCK reference bit.
    referenced: AtomicBool,
    /// Open handles; while non-zero nothing is evicted. Raised under the `fds` lock, so an
    /// eviction, which checks it under that lock, cannot take descriptors just promised to a
    /// new handle.
    pins: AtomicU32,
    /// In its shard's ring (changed under the ring's lock only).
    queued: AtomicBool,
    /// Descriptors that are not the cache's (see [`FdSlots::fixed`]).
    fixed: bool,
}

impl<S: FdArray> FdSlots<S> {
    /// Slots to be filled by the cache (`empty` holds no descriptor).
    pub fn new(empty: S) -> FdSlots<S> {
        FdSlots {
            fds: Mutex::new(empty),
            referenced: AtomicBool::new(false),
            pins: AtomicU32::new(0),
            queued: AtomicBool::new(false),
            fixed: false,
        }
    }

    /// Slots holding descriptors that live as long as the object (a root directory): never
    /// counted, evicted or taken; the cache adds none to them.
    pub fn fixed(fds: S) -> FdSlots<S> {
        FdSlots {
            fixed: true,
            ..FdSlots::new(fds)
        }
    }

    /// Descriptor `i`, if cached (marks the object used).
    #[inline]
    pub fn get(&self, i: usize) -> Option<Fd> {
        let fd = self.fds.lock().slots().get(i).cloned().flatten();
        if fd.is_some() && !self.referenced.load(Ordering::Relaxed) {
            self.referenced.store(true, Ordering::Relaxed);
        }
        fd
    }

    /// Whether descriptor `i` is cached.
    pub fn has(&self, i: usize) -> bool {
        self.fds.lock().slots().get(i).is_some_and(Option::is_some)
    }

    /// Open handles pinning the descriptors.
    pub fn pins(&self) -> u32 {
        self.pins.load(Ordering::Relaxed)
    }
}

/// An object whose descriptors the cache holds.
pub trait Cached: Send + Sync + 'static {
    /// Its slots' storage.
    type Fds: FdArray;
    /// Its slots.
    fn fd_slots(&self) -> &FdSlots<Self::Fds>;
    /// A number that spreads objects over the shards (a node id).
    fn cache_key(&self) -> u64;
    /// Whether slot `i` keeps its descriptor at the last [`FdCache::release`] (then it stays
    /// cached, unpinned, until evicted or taken): none by default, for objects that hold
    /// descriptors only while open.
    fn kept_after_release(&self, _i: usize) -> bool {
        false
    }
}

/// Number of `Some` slots.
fn count(fds: &impl FdArray) -> usize {
    fds.slots().iter().filter(|f| f.is_some()).count()
}

/// A shard's ring.
struct Ring<E> {
    queue: VecDeque<Weak<E>>,
    /// Tidied when it grows past this.
    tidy_at: usize,
}

struct Shard<E> {
    /// Descriptors held in this shard's objects (changed under each object's `fds` lock).
    open: AtomicUsize,
    /// Pinned descriptors, as counted when room was last made: they do not count against the
    /// capacity, so a shard whose open files alone fill it neither walks its ring at every
    /// insert nor strips the few unpinned objects it still has.
    pinned: AtomicUsize,
    ring: Mutex<Ring<E>>,
}

/// The bounded cache: see the module documentation.
pub struct FdCache<E> {
    /// Capacity of each shard (descriptors).
    shard_cap: usize,
    shards: Box<[Shard<E>]>,
}

impl<E: Cached> FdCache<E> {
    /// A cache of about `capacity` descriptors (at least 16).
    pub fn new(capacity: usize) -> FdCache<E> {
        let capacity = capacity.max(16);
        // Shards of at least 256 descriptors, so eviction stays close to global CLOCK.
        let n = (capacity / 256).clamp(1, 16);
        let shard_cap = capacity / n;
        FdCache {
            shard_cap,
            shards: (0..n)
                .map(|_| Shard {
                    open: AtomicUsize::new(0),
                    pinned: AtomicUsize::new(0),
                    ring: Mutex::new(Ring {
                        queue: VecDeque::new(),
                        tidy_at: 2 * shard_cap,
                    }),
                })
                .collect(),
        }
    }

    fn shard(&self, e: &E) -> &Shard<E> {
        let k = (e.cache_key().wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize;
        &self.shards[k % self.shards.len()]
    }

    /// Descriptors held.
    pub fn cached(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.open.load(Ordering::Relaxed))
            .sum()
    }

    /// Entries in the rings (for tests: bounded by the objects holding descriptors, not by how
    /// many came and went).
    pub fn entries(&self) -> usize {
        self.shards.iter().map(|s| s.ring.lock().queue.len()).sum()
    }

    /// Caches `fd` as descriptor `i` of `e`, unless one is there already; returns the one cached
    /// (a descriptor not kept is closed outside the locks; one for a slot `e` does not have is
    /// returned uncached). With `pin`, also pins `e`
    /// for a new open handle (see [`FdCache::pin`]).
    pub fn insert(&self, e: &Arc<E>, i: usize, fd: Fd, pin: bool) -> Fd {
        self.insert_with(e, i, fd, pin, drop)
    }

    /// [`FdCache::insert`], giving the descriptors it evicts to make room to `evicted` (called
    /// outside the locks; dropping them closes them): a request that wants their `close` calls
    /// counted as its own makes them there.
    pub fn insert_with(
        &self,
        e: &Arc<E>,
        i: usize,
        fd: Fd,
        pin: bool,
        evicted: impl FnOnce(Vec<E::Fds>),
    ) -> Fd {
        let s = e.fd_slots();
        let shard = self.shard(e);
        let (first, open) = {
            let mut fds = s.fds.lock();
            if pin {
                s.pins.fetch_add(1, Ordering::Relaxed);
            }
            if s.fixed {
                return fd;
            }
            let first = fds.slots().iter().all(Option::is_none);
            let Some(slot) = fds.slots_mut().get_mut(i) else {
                return fd; // no such slot: not cached
            };
            if let Some(cached) = slot {
                // Another thread opened it meanwhile; ours closes when dropped, after the lock.
                return cached.clone();
            }
            *slot = Some(fd.clone());
            // Counted under the slots' lock, so a take of this descriptor subtracts after.
            (first, shard.open.fetch_add(1, Ordering::Relaxed) + 1)
        };
        s.referenced.store(true, Ordering::Relaxed);
        let limit = self.shard_cap + shard.pinned.load(Ordering::Relaxed);
        if first || open > limit {
            let dropped = {
                let mut ring = shard.ring.lock();
                if !s.queued.swap(true, Ordering::Relaxed) {
                    ring.queue.push_back(Arc::downgrade(e));
                }
                let evicted = if open > limit {
                    self.make_room_locked(shard, &mut ring.queue)
                } else {
                    Vec::new()
                };
                if ring.queue.len() > ring.tidy_at {
                    Self::tidy(&mut ring, self.shard_cap);
                }
                evicted
            };
            // Closed outside the ring's lock.
            evicted(dropped);
        }
        fd
    }

    /// Puts `fd` in slot `i` of `e` in place of what is there (clears it with `None`), fixed
    /// slots included; returns the descriptor it held, for the caller to close. For a
    /// descriptor that no longer leads where it should (a branch replaced under the mount).
    pub fn replace(&self, e: &Arc<E>, i: usize, fd: Option<Fd>) -> Option<Fd> {
        let s = e.fd_slots();
        let had = {
            let mut fds = s.fds.lock();
            let slot = fds.slots_mut().get_mut(i)?;
            if s.fixed {
                return std::mem::replace(slot, fd);
            }
            if slot.is_some() || fd.is_none() {
                let old = std::mem::replace(slot, fd);
                if old.is_some() && slot.is_none() {
                    self.shard(e).open.fetch_sub(1, Ordering::Relaxed);
                }
                return old;
            }
            None
        };
        // An empty slot filled: as any new descriptor (counted, queued, room made).
        if let Some(fd) = fd {
            self.insert(e, i, fd, false);
        }
        had
    }

    /// Drops the ring entries of objects that are gone or hold no descriptor.
    fn tidy(ring: &mut Ring<E>, shard_cap: usize) {
        ring.queue.retain(|w| {
            let Some(e) = w.upgrade() else {
                return false;
            };
            let s = e.fd_slots();
            let keep = count(&*s.fds.lock()) > 0;
            if !keep {
                s.queued.store(false, Ordering::Relaxed);
            }
            keep
        });
        ring.tidy_at = (2 * ring.queue.len()).max(2 * shard_cap);
    }

    /// Pins `e` (one more open handle): its descriptors are not evicted until as many
    /// [`FdCache::unpin`]s or [`FdCache::release`]s. Returns whether it holds any descriptor now
    /// (if not, the caller caches some, and they are pinned too).
    pub fn pin(&self, e: &E) -> bool {
        let s = e.fd_slots();
        // Under the slots' lock: an eviction either took the descriptors before (and the caller
        // caches new ones) or sees the pin.
        let fds = s.fds.lock();
        s.pins.fetch_add(1, Ordering::Relaxed);
        count(&*fds) > 0
    }

    /// One pin less; the descriptors stay cached. (No lock: an eviction racing with this at
    /// worst still sees the pin and keeps them one round longer.) Unpinning more often than
    /// pinning does not wrap.
    pub fn unpin(&self, e: &E) {
        let _ = e
            .fd_slots()
            .pins
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// One pin less, and if that was the last, takes `e`'s descriptors out of the cache (for
    /// objects that hold descriptors only while open), but those of the slots it keeps
    /// ([`Cached::kept_after_release`]): the caller closes them.
    pub fn release(&self, e: &E) -> Option<E::Fds> {
        let s = e.fd_slots();
        let mut fds = s.fds.lock();
        let before = s
            .pins
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        if before.is_ok_and(|n| n > 1) {
            return None;
        }
        self.take_locked_where(e, &mut fds, |i| !e.kept_after_release(i))
    }

    /// Takes the descriptors of `e`'s slots that `which` picks out of the cache, pinned or not
    /// (for descriptors an open handle holds copies of): the caller closes them.
    pub fn take_slots(&self, e: &E, which: impl Fn(usize) -> bool) -> Option<E::Fds> {
        self.take_locked_where(e, &mut e.fd_slots().fds.lock(), which)
    }

    /// Takes all of `e`'s descriptors out of the cache (the object was forgotten or replaced):
    /// the caller closes them, outside its own locks.
    pub fn take(&self, e: &E) -> Option<E::Fds> {
        self.take_locked(e, &mut e.fd_slots().fds.lock())
    }

    /// [`FdCache::take`], unless `e` is pinned (an object removed while open keeps its
    /// descriptors for its handles).
    pub fn take_unpinned(&self, e: &E) -> Option<E::Fds> {
        let s = e.fd_slots();
        let mut fds = s.fds.lock();
        if s.pins.load(Ordering::Relaxed) > 0 {
            return None;
        }
        self.take_locked(e, &mut fds)
    }

    fn take_locked(&self, e: &E, fds: &mut E::Fds) -> Option<E::Fds> {
        self.take_locked_where(e, fds, |_| true)
    }

    fn take_locked_where(
        &self,
        e: &E,
        fds: &mut E::Fds,
        which: impl Fn(usize) -> bool,
    ) -> Option<E::Fds> {
        if e.fd_slots().fixed {
            return None;
        }
        let n = fds
            .slots()
            .iter()
            .enumerate()
            .filter(|&(i, f)| f.is_some() && which(i))
            .count();
        if n == 0 {
            return None;
        }
        self.shard(e).open.fetch_sub(n, Ordering::Relaxed);
        Some(fds.take_where(which))
    }

    /// Runs an `open`; when the process is out of descriptors (`EMFILE`, `ENFILE`), evicts about
    /// a quarter of the cache and tries once more.
    pub fn retry_emfile<T>(&self, mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
        match f() {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                self.evict_fraction(4);
                f()
            }
            r => r,
        }
    }

    /// Evicts about `1/divisor` of the capacity.
    pub fn evict_fraction(&self, divisor: usize) {
        for shard in self.shards.iter() {
            let evicted = Self::evict_locked(
                shard,
                &mut shard.ring.lock().queue,
                self.shard_cap / divisor + 1,
            );
            drop(evicted);
        }
    }

    /// Brings the shard's unpinned descriptors back under its capacity (with some slack):
    /// counts the pinned ones first, which stay whatever happens, and notes their number.
    fn make_room_locked(&self, shard: &Shard<E>, ring: &mut VecDeque<Weak<E>>) -> Vec<E::Fds> {
        let pinned: usize = ring
            .iter()
            .filter_map(Weak::upgrade)
            .map(|e| {
                let s = e.fd_slots();
                let fds = s.fds.lock();
                if s.pins.load(Ordering::Relaxed) > 0 {
                    count(&*fds)
                } else {
                    0
                }
            })
            .sum();
        shard.pinned.store(pinned, Ordering::Relaxed);
        let open = shard.open.load(Ordering::Relaxed);
        let limit = self.shard_cap + pinned;
        if open <= limit {
            return Vec::new();
        }
        Self::evict_locked(shard, ring, open - limit + self.shard_cap / 16)
    }

    /// Takes up to about `want` descriptors of objects neither recently used nor pinned;
    /// returns them for the caller to close once the ring's lock is released.
    fn evict_locked(shard: &Shard<E>, ring: &mut VecDeque<Weak<E>>, want: usize) -> Vec<E::Fds> {
        let mut evicted = Vec::new();
        let mut taken = 0;
        let mut budget = ring.len() * 2;
        while taken < want && budget > 0 {
            budget -= 1;
            let Some(w) = ring.pop_front() else { break };
            let Some(e) = w.upgrade() else {
                continue; // dropped; whoever dropped it took its descriptors
            };
            let s = e.fd_slots();
            if s.referenced.swap(false, Ordering::Relaxed) {
                ring.push_back(w);
                continue;
            }
            let mut fds = s.fds.lock();
            if s.pins.load(Ordering::Relaxed) > 0 {
                // Pinned by an open handle: stays, and is looked at again next round.
                drop(fds);
                ring.push_back(w);
                continue;
            }
            s.queued.store(false, Ordering::Relaxed);
            let n = count(&*fds);
            if n > 0 {
                shard.open.fetch_sub(n, Ordering::Relaxed);
                taken += n;
                evicted.push(fds.take_all());
            }
        }
        evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// An object with `n` descriptor slots.
    struct Obj {
        id: u64,
        slots: FdSlots<Box<[Option<Fd>]>>,
        /// Slots from this one on are kept at the last release.
        kept_from: usize,
    }

    impl Cached for Obj {
        type Fds = Box<[Option<Fd>]>;
        fn fd_slots(&self) -> &FdSlots<Self::Fds> {
            &self.slots
        }
        fn cache_key(&self) -> u64 {
            self.id
        }
        fn kept_after_release(&self, i: usize) -> bool {
            i >= self.kept_from
        }
    }

    fn obj(id: u64, n: usize) -> Arc<Obj> {
        obj_keeping(id, n, usize::MAX)
    }

    fn obj_keeping(id: u64, n: usize, kept_from: usize) -> Arc<Obj> {
        Arc::new(Obj {
            id,
            slots: FdSlots::new((0..n).map(|_| None).collect()),
            kept_from,
        })
    }

    #[test]
    fn slots_kept_after_release_stay_cached_until_evicted_or_taken() {
        let c: FdCache<Obj> = FdCache::new(16);
        let o = obj_keeping(1, 4, 2);
        c.pin(&o);
        for i in 0..4 {
            c.insert(&o, i, fd(), false);
        }
        assert_eq!(c.cached(), 4);
        let taken = c.release(&o).expect("the last release takes the others");
        assert!(taken[0].is_some() && taken[1].is_some());
        assert!(taken[2].is_none() && taken[3].is_none());
        assert_eq!(c.cached(), 2);
        assert!(!o.slots.has(0) && o.slots.has(2) && o.slots.has(3));
        // Taken on demand, pinned or not.
        c.pin(&o);
        let t = c.take_slots(&o, |i| i == 3).expect("slot 3");
        assert!(t[3].is_some() && t.iter().filter(|f| f.is_some()).count() == 1);
        assert_eq!(c.cached(), 1);
        drop(c.release(&o));
        // Unpinned, they give way to other objects' descriptors.
        let others: Vec<_> = (10..60).map(|i| obj(i, 1)).collect();
        for x in &others {
            c.insert(x, 0, fd(), false);
        }
        assert!(!o.slots.has(2), "an unpinned kept descriptor is evicted");
        assert!(c.cached() <= 16 + 1);
    }

    fn fd() -> Fd {
        Arc::new(crate::sys::open_path("/".as_ref(), libc::O_PATH).unwrap())
    }

    #[test]
    fn descriptors_stay_within_the_capacity() {
        let c: FdCache<Obj> = FdCache::new(16);
        let objs: Vec<_> = (0..200).map(|i| obj(i, 2)).collect();
        let mut most = 0;
        for o in &objs {
            c.insert(o, 0, fd(), false);
            c.insert(o, 1, fd(), false);
            most = most.max(c.cached());
        }
        assert!(most <= 16 + 2, "{most} descriptors cached");
        // Each object is in the ring once, however many of its slots were filled.
        assert!(c.entries() <= 200);
        let held: usize = objs.iter().map(|o| count(&*o.slots.fds.lock())).sum();
        assert_eq!(held, c.cached());
    }

    #[test]
    fn objects_that_come_and_go_leave_the_rings_bounded() {
        // The RAIF leak: a directory made (its descriptor cached), removed (taken), forgotten,
        // many times over, within the capacity so that eviction never runs.
        let c: FdCache<Obj> = FdCache::new(64);
        let keep: Vec<_> = (0..10).map(|i| obj(i, 2)).collect();
        for o in &keep {
            c.insert(o, 0, fd(), false);
        }
        let mut most = 0;
        for i in 0..10_000 {
            let o = obj(1000 + i, 2);
            c.insert(&o, 0, fd(), false);
            c.insert(&o, 1, fd(), false);
            // Removed (or forgotten): its descriptors are taken, and it is dropped.
            assert_eq!(c.take(&o).map(|t| count(&t)), Some(2));
            most = most.max(c.entries());
        }
        assert!(most <= 2 * 64 + 1, "ring grew to {most} entries");
        assert_eq!(c.cached(), 10);
        // The same object emptied and filled again is queued once.
        let o = obj(7, 1);
        for _ in 0..1000 {
            assert!(!c.pin(&o));
            c.insert(&o, 0, fd(), false);
            assert!(c.release(&o).is_some());
        }
        assert!(c.entries() <= 2 * 64 + 1);
    }

    #[test]
    fn pinned_descriptors_are_never_evicted() {
        let c: FdCache<Obj> = FdCache::new(16);
        let pinned = obj(1, 2);
        assert!(!c.pin(&pinned));
        let kept = c.insert(&pinned, 1, fd(), false);
        for i in 0..500 {
            let o = obj(100 + i, 1);
            c.insert(&o, 0, fd(), false);
        }
        c.evict_fraction(1);
        let again = pinned.slots.get(1).expect("pinned descriptor kept");
        assert!(Arc::ptr_eq(&kept, &again));
        assert!(crate::sys::fstat(again.as_fd()).is_ok());
        assert!(c.take_unpinned(&pinned).is_none());
        // A second handle, then both released: the last release takes the descriptors.
        assert!(c.pin(&pinned));
        assert!(c.release(&pinned).is_none());
        assert_eq!(pinned.slots.pins(), 1);
        let taken = c.release(&pinned).expect("last release takes");
        assert_eq!(count(&taken), 1);
        assert_eq!(pinned.slots.pins(), 0);
        // Unpinning more often than pinning does not wrap.
        c.unpin(&pinned);
        assert!(c.release(&pinned).is_none());
        assert_eq!(pinned.slots.pins(), 0);
    }

    #[test]
    fn open_files_beyond_the_capacity_do_not_strip_the_rest_at_every_insert() {
        let c: FdCache<Obj> = FdCache::new(16);
        // More pinned (open) objects than the cache holds.
        let open: Vec<_> = (0..24).map(|i| obj(i, 1)).collect();
        for o in &open {
            assert!(!c.pin(o));
            c.insert(o, 0, fd(), false);
        }
        // A few more, unpinned and recently used: the pinned ones are over the capacity, but
        // evicting cannot help that, so these stay cached.
        let others: Vec<_> = (100..104).map(|i| obj(i, 1)).collect();
        for o in &others {
            c.insert(o, 0, fd(), false);
        }
        for o in &others {
            assert!(o.slots.has(0), "object {} was evicted", o.id);
        }
        // Once the open objects are released, the cache shrinks back to its capacity.
        for o in &open {
            drop(c.release(o));
        }
        let more: Vec<_> = (200..240).map(|i| obj(i, 1)).collect();
        for o in &more {
            c.insert(o, 0, fd(), false);
        }
        assert!(c.cached() <= 16 + 1, "{} descriptors cached", c.cached());
        let held: usize = others
            .iter()
            .chain(&more)
            .map(|o| count(&*o.slots.fds.lock()))
            .sum();
        assert_eq!(held, c.cached());
    }

    #[test]
    fn a_second_descriptor_for_a_slot_is_not_kept_and_fixed_slots_are_left_alone() {
        let c: FdCache<Obj> = FdCache::new(16);
        let o = obj(1, 1);
        let first = c.insert(&o, 0, fd(), false);
        let second = c.insert(&o, 0, fd(), false);
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(c.cached(), 1);
        let root = Arc::new(Obj {
            id: 1,
            slots: FdSlots::fixed(vec![Some(fd()), None].into_boxed_slice()),
            kept_from: usize::MAX,
        });
        c.insert(&root, 1, fd(), false);
        assert!(!root.slots.has(1));
        assert!(c.take(&root).is_none());
        assert!(root.slots.has(0));
        assert_eq!(c.cached(), 1);
    }
}
