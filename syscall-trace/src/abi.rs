//! The BPF program's maps as Rust sees them: `#[repr(C)]` copies of the C structs of
//! `bpf/syscalls.bpf.c` (same fields, same order, same sizes; the tests check the sizes the
//! object's BTF gives), the slots of its `ctl` and `stats` arrays, and its constants.
//!
//! The `unsafe impl Pod` lines are aya's contract for a map's key or value type: plain data,
//! any bit pattern valid, no padding the kernel would leave uninitialised (every struct here
//! is made of `u64`s and arrays of 4 or 8 bytes, laid out without holes).

#![allow(unsafe_code)]

/// Buckets the program keeps per operation (resolution 8 at most: `64 × 8`).
pub const MAX_BUCKETS: usize = 512;
/// Bytes of a name kept in an event or a hot-file entry (with `NAME_MAX_PART` of slack).
pub const NAME_BYTES: usize = 256 + 64;
/// Control-file names the program knows, and their longest length.
pub const CTL_NAMES: usize = 4;
/// Longest control-file name + 1.
pub const CTL_NAME_MAX: usize = 32;
/// Longest mount path + 1.
pub const MNT_MAX: usize = 256;

/// `mode`: the mount's files, or the followed processes.
pub const MODE_MOUNT: u32 = 1;
/// `mode`: every call of the followed processes.
pub const MODE_PROCS: u32 = 2;

/// `ctl` slots.
pub const CTL_GEN: u32 = 0;
/// The slow threshold in cycles (0: off).
pub const CTL_SLOW: u32 = 1;
/// The process whose next child is followed (from its exec).
pub const CTL_LAUNCHER: u32 = 2;
/// The mount's device (kernel encoding), once mounted.
pub const CTL_MNT_DEV: u32 = 3;
/// Raised whenever a running process is followed: tasks look again whether they are.
pub const CTL_FOLLOW_GEN: u32 = 4;
/// Set by the program once the hot-file table is full (cleared at a reset).
pub const CTL_HOT_FULL: u32 = 5;

/// `stats` slots.
pub const ST_EVENTS_LOST: u32 = 0;
/// Calls not timed: no task storage.
pub const ST_STORAGE: u32 = 1;
/// Calls counted in a per-caller `other` entry.
pub const ST_KEYED_FULL: u32 = 2;
/// Calls in no hot-file entry.
pub const ST_HOT_FULL: u32 = 3;
/// Path calls not decided (mount scope).
pub const ST_PATH_UNREAD: u32 = 4;
/// Descendants not followed.
pub const ST_PROCS_FULL: u32 = 5;
/// Calls whose exit never came.
pub const ST_UNENDED: u32 = 6;
/// Slow events sent.
pub const ST_EVENTS: u32 = 7;
/// Slots of `stats`.
pub const ST_SLOTS: u32 = 16;

/// Per-caller key kinds.
pub const BY_PID: u8 = 1;
/// By user id.
pub const BY_UID: u8 = 2;
/// By command name.
pub const BY_COMM: u8 = 3;
/// The `other` entries user space makes for a full table.
pub const BY_OTHER: u8 = 0xff;

/// Name kinds.
pub const NAME_ARG: u32 = 1;
/// The file's dentries up to its file system's root, leaf first.
pub const NAME_DENTRIES: u32 = 2;
/// The same, stopped short of the root.
pub const NAME_DENTRIES_CUT: u32 = 3;

/// `struct hist_val`: one operation's counts on one CPU.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Hist {
    /// Calls.
    pub count: u64,
    /// Their cycles.
    pub total: u64,
    /// Calls per bucket.
    pub b: [u64; MAX_BUCKETS],
}

// SAFETY: plain `u64`s, no padding; any bit pattern is a valid value.
unsafe impl aya::Pod for Hist {}

impl Hist {
    /// Adds `o` to these counts.
    pub fn add(&mut self, o: &Hist) {
        self.count = self.count.wrapping_add(o.count);
        self.total = self.total.wrapping_add(o.total);
        for (a, b) in self.b.iter_mut().zip(o.b.iter()) {
            *a = a.wrapping_add(*b);
        }
    }

    /// These counts less `base` (a reset's baseline), never below 0.
    pub fn since(&self, base: &Hist) -> Hist {
        let mut out = Hist {
            count: self.count.saturating_sub(base.count),
            total: self.total.saturating_sub(base.total),
            b: [0; MAX_BUCKETS],
        };
        for (o, (a, b)) in out.b.iter_mut().zip(self.b.iter().zip(base.b.iter())) {
            *o = a.saturating_sub(*b);
        }
        out
    }
}

/// `struct keyed_val`: one caller's counts of one operation (the layout of [`Hist`]).
pub type KeyedVal = Hist;

impl Default for Hist {
    fn default() -> Hist {
        Hist {
            count: 0,
            total: 0,
            b: [0; MAX_BUCKETS],
        }
    }
}

/// `struct keyed_key`: an operation of one caller.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct KeyedKey {
    /// The operation (index).
    pub op: u16,
    /// [`BY_PID`], [`BY_UID`], [`BY_COMM`] or [`BY_OTHER`].
    pub kind: u8,
    /// Zero.
    pub pad: u8,
    /// The thread id or user id.
    pub id: u32,
    /// The command name, NUL-padded.
    pub comm: [u8; 16],
}

// SAFETY: integers and a byte array, 24 bytes without holes.
unsafe impl aya::Pod for KeyedKey {}

/// `struct slowest_state`: how full one CPU's heap of its slowest calls is.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct SlowestState {
    /// Latencies in the heap.
    pub len: u32,
    /// Zero.
    pub pad: u32,
}

// SAFETY: integers, without holes.
unsafe impl aya::Pod for SlowestState {}

/// `struct hot_key`: a file.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct HotKey {
    /// Its device (kernel encoding).
    pub dev: u32,
    /// Zero.
    pub pad: u32,
    /// Its inode number.
    pub ino: u64,
}

// SAFETY: integers, 16 bytes without holes.
unsafe impl aya::Pod for HotKey {}

/// `struct hot_val`: a file's calls and its name.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct HotVal {
    /// Calls.
    pub count: u64,
    /// Their cycles.
    pub total: u64,
    /// [`NAME_ARG`], [`NAME_DENTRIES`], [`NAME_DENTRIES_CUT`], or 0.
    pub name_kind: u32,
    /// Bytes of `name` used.
    pub name_len: u32,
    /// The name.
    pub name: [u8; NAME_BYTES],
}

// SAFETY: integers and a byte array, without holes (8 + 8 + 4 + 4 + 320).
unsafe impl aya::Pod for HotVal {}

/// `struct event`: one call over a threshold.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Event {
    /// When it ended (`CLOCK_MONOTONIC` ns).
    pub end_ns: u64,
    /// Its latency in cycles.
    pub cycles: u64,
    /// What it returned (a negative errno for a failure).
    pub ret: i64,
    /// Its file's inode number, where known.
    pub ino: u64,
    /// Its offset (`flags & 1`).
    pub off: u64,
    /// Its byte count (`flags & 2`).
    pub size: u64,
    /// The calling thread.
    pub tid: u32,
    /// Its process.
    pub tgid: u32,
    /// Its user id.
    pub uid: u32,
    /// Its file's device, where known.
    pub dev: u32,
    /// The operation (index).
    pub op: u16,
    /// 1: over the slow threshold; 2: possibly among the slowest.
    pub why: u8,
    /// How `name` names the file.
    pub name_kind: u8,
    /// Bytes of `name` used.
    pub name_len: u32,
    /// 1: `off` applies; 2: `size` applies.
    pub flags: u32,
    /// Zero.
    pub pad: u32,
    /// The command name.
    pub comm: [u8; 16],
    /// The name.
    pub name: [u8; NAME_BYTES],
}

impl Event {
    /// Reads an event from a ring buffer record, if it is one.
    pub fn read(bytes: &[u8]) -> Option<Event> {
        if bytes.len() < std::mem::size_of::<Event>() {
            return None;
        }
        // SAFETY: `bytes` holds at least size_of::<Event>() bytes; read_unaligned copies them
        // without an alignment requirement, and every bit pattern is a valid Event (integers
        // and byte arrays only).
        Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<Event>()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes the C structs have (checked against the object's BTF in the loader tests).
    #[test]
    fn sizes_match_the_c_structs() {
        assert_eq!(std::mem::size_of::<Hist>(), 16 + 8 * MAX_BUCKETS);
        assert_eq!(std::mem::size_of::<KeyedKey>(), 24);
        assert_eq!(std::mem::size_of::<HotKey>(), 16);
        assert_eq!(std::mem::size_of::<HotVal>(), 24 + NAME_BYTES);
        assert_eq!(std::mem::size_of::<Event>(), 96 + NAME_BYTES);
    }
}
