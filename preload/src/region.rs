//! The shared region as this process sees it: attaching (once per process image), claiming a
//! slot (once per thread), and the counters of a slot and of the overflow slot.
//!
//! # Invariants
//!
//! * The region is mapped once per image and never unmapped; fork children inherit the
//!   mapping (it is `MAP_SHARED`, so parent and child see the same counters) and exec'd
//!   images attach again from the environment.
//! * A claimed slot is written only by its thread, with plain load-then-store (release). A
//!   fork child must not keep writing its parent thread's slot: the fork handler forgets the
//!   slot, and the child claims its own on its next call.
//! * The overflow counters are written with atomic adds by anyone: threads beyond the
//!   capacity, and calls made while the same thread is inside the library's own critical
//!   section (a signal handler interrupting a record).
//! * Calls made while this very thread is attaching (a signal handler during the attach) are
//!   counted in process-local pending counters and folded into the overflow counters as soon as
//!   the region is mapped.

use std::cell::Cell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, Ordering};

use crate::abi::{self, CALLS, COUNTERS_PER_CALL, Origin, ROWS, header, slot};
use crate::sys;

/// Calls in this library's table.
const NCALLS: usize = CALLS.len();
/// Size of one slot in the layout this library writes.
const SLOT_SIZE: usize = abi::slot_size(ROWS);
/// Offset of slot 0.
const SLOTS_OFFSET: usize = abi::slots_offset(ROWS);
/// Offset of a slot's trace buffer.
const BUFFER_OFFSET: usize = abi::slot_buffer_offset(ROWS);

/// Process state: not tried yet, being attached, attached, off (no region).
const UNTRIED: u8 = 0;
const ATTACHING: u8 = 1;
const ATTACHED: u8 = 2;
const OFF: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(UNTRIED);
static BASE: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static CAPACITY: AtomicU32 = AtomicU32::new(0);
static TRACING: AtomicBool = AtomicBool::new(false);
static FORK_HANDLER: AtomicBool = AtomicBool::new(false);

/// The trace file's path (NUL-terminated), copied from the environment at attach.
pub struct TracePath {
    bytes: std::cell::UnsafeCell<[u8; abi::MAX_STRING + 1]>,
}

// SAFETY: written once, by the attaching thread, before `STATE` is released as ATTACHED;
// read only after an acquire load of ATTACHED.
unsafe impl Sync for TracePath {}

static TRACE_PATH: TracePath = TracePath {
    bytes: std::cell::UnsafeCell::new([0; abi::MAX_STRING + 1]),
};

/// Counters for calls made by a thread while it attaches (see the module invariants).
static PENDING: [AtomicU64; ROWS * COUNTERS_PER_CALL] =
    [const { AtomicU64::new(0) }; ROWS * COUNTERS_PER_CALL];

/// What a thread knows about itself. Const-initialised, no destructor.
pub struct Local {
    /// This thread's slot, null until claimed.
    pub slot: Cell<*mut u8>,
    /// 0 unclaimed, 1 slot claimed, 2 no slot left (record in the overflow slot).
    pub claim: Cell<u8>,
    /// Inside a critical section of the library (counter update, trace append, attach).
    pub busy: Cell<bool>,
    /// The slot's index.
    pub index: Cell<u32>,
    /// Clock at the fork that made this process (fork children only), else 0.
    pub forked_at: Cell<u64>,
    /// The forking thread's slot index (fork children only).
    pub parent_slot: Cell<u32>,
    /// Clock start of the last record appended to the trace buffer.
    pub last_start: Cell<u64>,
}

thread_local! {
    /// The calling thread's [`Local`].
    pub static LOCAL: Local = const {
        Local {
            slot: Cell::new(std::ptr::null_mut()),
            claim: Cell::new(0),
            busy: Cell::new(false),
            index: Cell::new(0),
            forked_at: Cell::new(0),
            parent_slot: Cell::new(u32::MAX),
            last_start: Cell::new(0),
        }
    };
}

/// Where a call's counters live.
#[derive(Clone, Copy)]
pub enum Sink {
    /// Nothing is recorded (no region).
    Off,
    /// This thread's slot (plain stores).
    Slot(*mut u8),
    /// The overflow counters (atomic adds).
    Overflow(*mut u8),
    /// The process-local pending counters (this thread is attaching).
    Pending,
}

/// The region base if attached, attaching first if this image has not tried yet.
#[inline(always)]
pub fn base() -> Option<*mut u8> {
    match STATE.load(Ordering::Acquire) {
        ATTACHED => Some(BASE.load(Ordering::Relaxed)),
        OFF => None,
        _ => attach_slow(),
    }
}

/// Whether calls are traced.
#[inline(always)]
pub fn tracing() -> bool {
    TRACING.load(Ordering::Relaxed)
}

/// The trace file's path (valid once attached with tracing on).
pub fn trace_path() -> &'static CStr {
    // SAFETY: see `TracePath`; the buffer always holds a NUL (its last byte is never written).
    let bytes = unsafe { &*TRACE_PATH.bytes.get() };
    CStr::from_bytes_until_nul(bytes).unwrap_or(c"")
}

/// Attaches the process image (from the constructor, or a hook called before it).
pub fn attach_now() {
    let _ = base();
}

#[cold]
fn attach_slow() -> Option<*mut u8> {
    match STATE.compare_exchange(UNTRIED, ATTACHING, Ordering::Acquire, Ordering::Acquire) {
        Ok(_) => {
            let was_busy = LOCAL.with(|l| l.busy.replace(true));
            let (state, base) = match attach() {
                Some(b) => (ATTACHED, b),
                None => (OFF, std::ptr::null_mut()),
            };
            BASE.store(base, Ordering::Relaxed);
            STATE.store(state, Ordering::Release);
            if state == ATTACHED {
                fold_pending(base);
                register_fork_handler();
            }
            LOCAL.with(|l| l.busy.set(was_busy));
            (state == ATTACHED).then_some(base)
        }
        Err(_) => {
            // Another thread attaches, or this one does and a signal handler interrupted it.
            if LOCAL.with(|l| l.busy.get()) {
                return None;
            }
            loop {
                match STATE.load(Ordering::Acquire) {
                    ATTACHED => return Some(BASE.load(Ordering::Relaxed)),
                    OFF => return None,
                    _ => std::hint::spin_loop(),
                }
            }
        }
    }
}

/// Whether this thread is the one attaching (calls then go to the pending counters).
pub fn attaching_here() -> bool {
    STATE.load(Ordering::Acquire) == ATTACHING && LOCAL.with(|l| l.busy.get())
}

/// Maps the region named by the environment and lays it out if this is the first process.
fn attach() -> Option<*mut u8> {
    let path = sys::getenv(c"FSPROF_SHM")?;
    let fd = sys::open(path, libc::O_RDWR | libc::O_CLOEXEC, 0).ok()?;
    let mapped = sys::file_size(fd)
        .ok()
        .and_then(|len| usize::try_from(len).ok())
        .filter(|&len| abi::capacity(len, ROWS) > 0)
        .and_then(|len| sys::map_shared(fd, len).ok().map(|p| (p, len)));
    sys::close(fd);
    let (base, len) = mapped?;
    if !lay_out(base, len) {
        return None;
    }
    CAPACITY.store(
        u32_at(base, header::SLOTS).load(Ordering::Relaxed),
        Ordering::Relaxed,
    );
    if let Some(trace) = sys::getenv(c"FSPROF_TRACE") {
        let src = trace.to_bytes();
        if src.len() < abi::MAX_STRING {
            // SAFETY: this thread is the only writer, before ATTACHED is published.
            let dst = unsafe { &mut *TRACE_PATH.bytes.get() };
            dst[..src.len()].copy_from_slice(src);
            dst[src.len()] = 0;
            TRACING.store(true, Ordering::Relaxed);
            let field = if crate::image::announce(trace) {
                header::CHUNKS
            } else {
                header::WRITE_ERRORS
            };
            u64_at(base, field).fetch_add(1, Ordering::Relaxed);
        }
    }
    u64_at(base, header::ATTACHES).fetch_add(1, Ordering::Relaxed);
    Some(base)
}

/// Writes the layout into a fresh region, or waits for the process that does; false if the
/// region is not one this library can use.
fn lay_out(base: *mut u8, len: usize) -> bool {
    let state = u32_at(base, header::STATE);
    if state
        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Acquire)
        .is_ok()
    {
        // SAFETY: the region is at least one page (capacity > 0); this process won the right
        // to write the header, which no one reads before STATE is 2.
        unsafe {
            std::ptr::copy_nonoverlapping(abi::REGION_MAGIC.as_ptr(), base, 8);
        }
        u32_at(base, header::VERSION).store(abi::REGION_VERSION, Ordering::Relaxed);
        u32_at(base, header::CALLS).store(NCALLS as u32, Ordering::Relaxed);
        u32_at(base, header::SLOT_SIZE).store(SLOT_SIZE as u32, Ordering::Relaxed);
        let cap = abi::capacity(len, ROWS).min(u32::MAX as usize) as u32;
        u32_at(base, header::SLOTS).store(cap, Ordering::Relaxed);
        u32_at(base, header::TRACE_BUFFER).store(abi::TRACE_BUFFER as u32, Ordering::Relaxed);
        state.store(abi::STATE_READY, Ordering::Release);
    } else {
        // Another process lays it out; it does so in a few stores.
        let mut spins = 0u64;
        while state.load(Ordering::Acquire) != abi::STATE_READY {
            spins += 1;
            if spins > 1 << 26 {
                return false;
            }
            std::hint::spin_loop();
        }
    }
    u32_at(base, header::VERSION).load(Ordering::Relaxed) == abi::REGION_VERSION
        && u32_at(base, header::CALLS).load(Ordering::Relaxed) == NCALLS as u32
        && u32_at(base, header::SLOT_SIZE).load(Ordering::Relaxed) == SLOT_SIZE as u32
}

fn register_fork_handler() {
    if !FORK_HANDLER.swap(true, Ordering::Relaxed) {
        sys::at_fork_child(forked);
    }
}

/// In a fork child: forget the parent thread's slot, so the child claims its own.
unsafe extern "C" fn forked() {
    let now = profile_store::clock::now();
    LOCAL.with(|l| {
        let parent = if l.claim.get() == 1 {
            l.index.get()
        } else {
            u32::MAX
        };
        l.slot.set(std::ptr::null_mut());
        l.claim.set(0);
        l.busy.set(false);
        l.forked_at.set(now.max(1));
        l.parent_slot.set(parent);
        l.last_start.set(0);
    });
}

/// The sink of the calling thread (claiming a slot on its first call). Call with `busy` set.
#[inline(always)]
pub fn sink(base: *mut u8, l: &Local) -> Sink {
    match l.claim.get() {
        1 => Sink::Slot(l.slot.get()),
        2 => Sink::Overflow(base),
        _ => claim(base, l),
    }
}

#[cold]
fn claim(base: *mut u8, l: &Local) -> Sink {
    let i = u32_at(base, header::NEXT_SLOT).fetch_add(1, Ordering::Relaxed);
    if i >= CAPACITY.load(Ordering::Relaxed) {
        l.claim.set(2);
        return Sink::Overflow(base);
    }
    // SAFETY: i < capacity, so the slot lies inside the mapping.
    let s = unsafe { base.add(SLOTS_OFFSET + i as usize * SLOT_SIZE) };
    let (pid, tid) = (sys::getpid(), sys::gettid());
    let forked_at = l.forked_at.get();
    let (origin, parent, born) = if forked_at != 0 {
        (Origin::Fork, l.parent_slot.get(), forked_at)
    } else if pid == tid {
        (Origin::Image, u32::MAX, profile_store::clock::now())
    } else {
        (Origin::Thread, u32::MAX, profile_store::clock::now())
    };
    u32_at(s, slot::PID).store(pid, Ordering::Relaxed);
    u32_at(s, slot::TID).store(tid, Ordering::Relaxed);
    u32_at(s, slot::PPID).store(sys::getppid(), Ordering::Relaxed);
    u32_at(s, slot::ORIGIN).store(origin.code() as u32, Ordering::Relaxed);
    u32_at(s, slot::PARENT_SLOT).store(parent, Ordering::Relaxed);
    u64_at(s, slot::BORN).store(born, Ordering::Relaxed);
    u32_at(s, slot::STATE).store(1, Ordering::Release);
    l.slot.set(s);
    l.index.set(i);
    l.claim.set(1);
    l.forked_at.set(0);
    l.last_start.set(0);
    Sink::Slot(s)
}

/// The `k`-th counter of `call` in a counter block (`k`: 0 count, 1 total, 2 + b bucket b).
#[inline(always)]
fn counter(block: *mut u8, row: usize, k: usize) -> &'static AtomicU64 {
    let i = row * COUNTERS_PER_CALL + k;
    // SAFETY: `block` is a slot's or the overflow's counter block, which holds
    // ROWS × COUNTERS_PER_CALL aligned u64 inside the mapping; row < ROWS and
    // k < COUNTERS_PER_CALL by construction. The region is never unmapped.
    unsafe { &*(block.add(i * 8) as *const AtomicU64) }
}

/// Owner-only increment: a plain load and a release store.
#[inline(always)]
fn bump(c: &AtomicU64, by: u64) {
    c.store(
        c.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Release,
    );
}

/// The counter block of a sink.
#[inline(always)]
fn block(s: Sink) -> *mut u8 {
    match s {
        // SAFETY (both): offsets inside the mapping, per the layout.
        Sink::Slot(p) => unsafe { p.add(abi::SLOT_COUNTERS) },
        Sink::Overflow(b) => unsafe { b.add(abi::OVERFLOW_OFFSET) },
        Sink::Off | Sink::Pending => std::ptr::null_mut(),
    }
}

/// Counts the start of a call.
#[inline(always)]
pub fn count(s: Sink, row: usize) {
    match s {
        Sink::Slot(_) => bump(counter(block(s), row, 0), 1),
        Sink::Overflow(b) => {
            counter(block(s), row, 0).fetch_add(1, Ordering::Relaxed);
            u64_at(b, header::OVERFLOW_CALLS).fetch_add(1, Ordering::Relaxed);
        }
        Sink::Pending => {
            PENDING[row * COUNTERS_PER_CALL].fetch_add(1, Ordering::Relaxed);
        }
        Sink::Off => {}
    }
}

/// Adds a finished call's latency to its total and bucket.
#[inline(always)]
pub fn finish(s: Sink, row: usize, cycles: u64) {
    // Resolution 1: the bucket is the index of the highest set bit (docs/format.md#buckets). This
    // is what `profile_store::bucket` computes for r = 1; its general form builds a table on first
    // use (an allocation and a lock), which a hook must not do.
    let b = 63 - (cycles | 1).leading_zeros() as usize;
    match s {
        Sink::Slot(_) => {
            let blk = block(s);
            bump(counter(blk, row, 1), cycles);
            bump(counter(blk, row, 2 + b), 1);
        }
        Sink::Overflow(_) => {
            let blk = block(s);
            counter(blk, row, 1).fetch_add(cycles, Ordering::Relaxed);
            counter(blk, row, 2 + b).fetch_add(1, Ordering::Relaxed);
        }
        Sink::Pending => {
            let i = row * COUNTERS_PER_CALL;
            PENDING[i + 1].fetch_add(cycles, Ordering::Relaxed);
            PENDING[i + 2 + b].fetch_add(1, Ordering::Relaxed);
        }
        Sink::Off => {}
    }
}

/// Moves the pending counters into the overflow counters.
fn fold_pending(base: *mut u8) {
    // SAFETY: the overflow block lies inside the mapping.
    let blk = unsafe { base.add(abi::OVERFLOW_OFFSET) };
    for (i, p) in PENDING.iter().enumerate() {
        let v = p.swap(0, Ordering::Relaxed);
        if v != 0 {
            counter(blk, i / COUNTERS_PER_CALL, i % COUNTERS_PER_CALL)
                .fetch_add(v, Ordering::Relaxed);
            if i % COUNTERS_PER_CALL == 0 {
                u64_at(base, header::OVERFLOW_CALLS).fetch_add(v, Ordering::Relaxed);
            }
        }
    }
}

/// A 32-bit field of the region or of a slot.
#[inline(always)]
pub fn u32_at(p: *mut u8, off: usize) -> &'static AtomicU32 {
    // SAFETY: callers pass offsets of aligned u32 fields of the documented layout, inside
    // the mapping, which is never unmapped.
    unsafe { &*(p.add(off) as *const AtomicU32) }
}

/// A 64-bit field of the region or of a slot.
#[inline(always)]
pub fn u64_at(p: *mut u8, off: usize) -> &'static AtomicU64 {
    // SAFETY: as in `u32_at`, for aligned u64 fields.
    unsafe { &*(p.add(off) as *const AtomicU64) }
}

/// A slot's trace buffer.
#[inline(always)]
pub fn buffer(slot: *mut u8) -> *mut u8 {
    // SAFETY: the buffer lies inside the slot, per the layout.
    unsafe { slot.add(BUFFER_OFFSET) }
}
