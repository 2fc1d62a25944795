//! What one request did inside: the lower or branch system calls it made, each with its
//! latency (DeBox's per-call record). A [`Trace`] lives on the stack of the profiling layer for
//! the length of one request; the request context carries a reference to it
//! ([`crate::filesystem::Request::trace`]) down to the lower calls, which add to it. Nothing is
//! allocated: a request keeps its [`MAX_CALLS`] slowest calls in the order made (for the slow
//! log's record) and counts the others, and it sums *every* call by call and latency bucket (for the
//! breakdown: [`Trace::sums`]), so a listing that makes a thousand lower calls is explained by
//! all of them, not by the sixteen it keeps.
use std::cell::Cell;

use crate::protocol::ops::Sys;

/// Most inner calls a trace keeps per request (its slowest; the others are counted, not kept).
pub const MAX_CALLS: usize = 16;

/// Most (call, latency bucket) pairs a trace sums per request. Once they are taken, a call of a
/// pair beyond them is added to a pair of the same call (its count and time stay that call's;
/// only its inner bucket is the pair's), and only a call met first beyond them is summed as
/// [`Trace::other_cycles`]. A request of fsprof-fuse rarely makes more than four kinds of call,
/// each over a few buckets; one of a RAIF volume makes each on every branch.
pub const MAX_SUMS: usize = 24;

/// Names an inner call: a system call on the lower directory, or on branch `b` of a RAIF
/// volume (`pread`, `branch1:pwrite`: `docs/format.md#inner-calls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CallId(pub u16);

/// Most branches an inner-call name can carry.
pub const MAX_BRANCHES: u16 = (u16::MAX / Sys::ALL.len() as u16) - 2;

impl CallId {
    /// `sys` on the lower directory (`branch` `None`) or on branch `branch`.
    #[inline]
    pub fn new(branch: Option<u16>, sys: Sys) -> CallId {
        let ns = branch.map_or(0, |b| b.min(MAX_BRANCHES) + 1);
        CallId(ns * Sys::ALL.len() as u16 + sys as u16)
    }

    /// The system call.
    pub fn sys(self) -> Sys {
        Sys::ALL[(self.0 as usize) % Sys::ALL.len()]
    }

    /// The branch, if a branch call.
    pub fn branch(self) -> Option<u16> {
        match self.0 / Sys::ALL.len() as u16 {
            0 => None,
            ns => Some(ns - 1),
        }
    }

    /// The name as profiles and slow records write it: `pread`, `branch1:pwrite`.
    pub fn name(self) -> String {
        match self.branch() {
            None => self.sys().name().to_string(),
            Some(b) => format!("branch{b}:{}", self.sys().name()),
        }
    }

    /// The call of a name written by [`CallId::name`].
    pub fn parse(name: &str) -> Option<CallId> {
        match name.split_once(':') {
            None => Sys::from_name(name).map(|s| CallId::new(None, s)),
            Some((b, s)) => {
                let b: u16 = b.strip_prefix("branch")?.parse().ok()?;
                (b <= MAX_BRANCHES).then_some(())?;
                Sys::from_name(s).map(|s| CallId::new(Some(b), s))
            }
        }
    }
}

/// One inner call of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InnerCall {
    /// Which call.
    pub call: CallId,
    /// Its latency in clock cycles.
    pub cycles: u64,
}

/// Every call of one kind that one request made with latencies in one bucket (resolution 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CallSum {
    /// Which call.
    pub call: CallId,
    /// The latency bucket of these calls (resolution 1: `floor(log2 cycles)`, 0 for 0).
    pub bucket: u8,
    /// How many.
    pub count: u32,
    /// Their latency in clock cycles.
    pub cycles: u64,
}

/// The bucket of a latency at resolution 1: the highest set bit.
#[inline]
fn bucket(cycles: u64) -> u8 {
    (63 - (cycles | 1).leading_zeros()) as u8
}

/// The inner calls of one request (see the module documentation). Not shared between threads.
#[derive(Debug, Default)]
pub struct Trace {
    calls: [Cell<InnerCall>; MAX_CALLS],
    len: Cell<u8>,
    dropped: Cell<u32>,
    sums: [Cell<CallSum>; MAX_SUMS],
    nsums: Cell<u8>,
    other_cycles: Cell<u64>,
}

impl Trace {
    /// An empty trace.
    #[inline]
    pub fn new() -> Trace {
        Trace::default()
    }

    /// Adds a call of `call` that took `cycles`.
    #[inline]
    pub fn push(&self, call: CallId, cycles: u64) {
        let n = self.len.get() as usize;
        if n < MAX_CALLS {
            self.calls[n].set(InnerCall { call, cycles });
            self.len.set(n as u8 + 1);
        } else {
            self.dropped.set(self.dropped.get().saturating_add(1));
            self.keep_if_slower(InnerCall { call, cycles });
        }
        self.sum(call, cycles);
    }

    /// With every place taken, keeps `c` instead of the fastest call kept if `c` is slower
    /// (the calls kept stay in the order made): a slow record names a request's slowest calls,
    /// not its first ones (a listing's 14 ms `openat` after its first sixteen `statx`).
    #[cold]
    fn keep_if_slower(&self, c: InnerCall) {
        let (i, fastest) = self
            .calls
            .iter()
            .map(Cell::get)
            .enumerate()
            .min_by_key(|(_, k)| k.cycles)
            .expect("MAX_CALLS places");
        if c.cycles <= fastest.cycles {
            return;
        }
        for j in i..MAX_CALLS - 1 {
            self.calls[j].set(self.calls[j + 1].get());
        }
        self.calls[MAX_CALLS - 1].set(c);
    }

    /// Adds the call to its (call, bucket) sum.
    #[inline]
    fn sum(&self, call: CallId, cycles: u64) {
        let b = bucket(cycles);
        let n = self.nsums.get() as usize;
        for s in &self.sums[..n] {
            let mut v = s.get();
            if v.call == call && v.bucket == b {
                v.count = v.count.saturating_add(1);
                v.cycles = v.cycles.saturating_add(cycles);
                s.set(v);
                return;
            }
        }
        if n < MAX_SUMS {
            self.sums[n].set(CallSum {
                call,
                bucket: b,
                count: 1,
                cycles,
            });
            self.nsums.set(n as u8 + 1);
        } else if let Some(s) = self.sums.iter().find(|s| s.get().call == call) {
            let mut v = s.get();
            v.count = v.count.saturating_add(1);
            v.cycles = v.cycles.saturating_add(cycles);
            s.set(v);
        } else {
            self.other_cycles
                .set(self.other_cycles.get().saturating_add(cycles));
        }
    }

    /// The calls kept, in the order made.
    pub fn calls(&self) -> impl Iterator<Item = InnerCall> + '_ {
        self.calls[..self.len.get() as usize].iter().map(Cell::get)
    }

    /// Calls made beyond [`MAX_CALLS`] (the fastest, not kept).
    pub fn dropped(&self) -> u32 {
        self.dropped.get()
    }

    /// Every call made, summed by call and latency bucket (beyond [`MAX_SUMS`] pairs, by call
    /// alone; a call met first beyond them: [`Trace::other_cycles`]).
    pub fn sums(&self) -> impl Iterator<Item = CallSum> + '_ {
        self.sums[..self.nsums.get() as usize].iter().map(Cell::get)
    }

    /// The time of the calls beyond [`MAX_SUMS`] (call, bucket) pairs.
    pub fn other_cycles(&self) -> u64 {
        self.other_cycles.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_names_round_trip() {
        let c = CallId::new(None, Sys::Pread);
        assert_eq!(c.name(), "pread");
        assert_eq!(CallId::parse("pread"), Some(c));
        let b = CallId::new(Some(1), Sys::Pwrite);
        assert_eq!(b.name(), "branch1:pwrite");
        assert_eq!(CallId::parse("branch1:pwrite"), Some(b));
        assert_eq!(b.branch(), Some(1));
        assert_eq!(CallId::parse("branchx:pread"), None);
        assert_eq!(CallId::parse("nope"), None);
    }

    #[test]
    fn a_trace_keeps_its_slowest_calls_in_order_and_counts_the_rest() {
        let t = Trace::new();
        for i in 0..MAX_CALLS as u64 + 3 {
            t.push(CallId::new(None, Sys::Pread), i);
        }
        // The 16 slowest, in the order made: 3 to 18.
        let kept: Vec<u64> = t.calls().map(|c| c.cycles).collect();
        assert_eq!(kept, (3..MAX_CALLS as u64 + 3).collect::<Vec<_>>());
        assert_eq!(t.dropped(), 3);
        // A slow call after many fast ones replaces the fastest kept, at the end.
        let t2 = Trace::new();
        for _ in 0..100 {
            t2.push(CallId::new(None, Sys::Statx), 10);
        }
        t2.push(CallId::new(None, Sys::Openat), 1_000_000);
        let last = t2.calls().last().unwrap();
        assert_eq!(
            (last.call, last.cycles),
            (CallId::new(None, Sys::Openat), 1_000_000)
        );
        assert_eq!((t2.calls().count(), t2.dropped()), (MAX_CALLS, 85));
        // Every call is summed, the dropped ones too.
        let sums: Vec<CallSum> = t.sums().collect();
        assert_eq!(
            sums.iter().map(|s| s.count).sum::<u32>(),
            MAX_CALLS as u32 + 3
        );
        assert_eq!(
            sums.iter().map(|s| s.cycles).sum::<u64>(),
            (0..MAX_CALLS as u64 + 3).sum::<u64>()
        );
        // 0 and 1 in bucket 0, 2-3 in bucket 1, 4-7 in 2, 8-15 in 3, 16-18 in 4.
        let by_bucket: Vec<(u8, u32)> = sums.iter().map(|s| (s.bucket, s.count)).collect();
        assert_eq!(by_bucket, [(0, 2), (1, 2), (2, 4), (3, 8), (4, 3)]);
    }

    #[test]
    fn a_thousand_calls_are_summed_and_calls_beyond_the_table_keep_their_count() {
        let t = Trace::new();
        for _ in 0..1000 {
            t.push(CallId::new(None, Sys::Openat), 3000);
            t.push(CallId::new(None, Sys::NameToHandleAt), 1000);
        }
        let sums: Vec<CallSum> = t.sums().collect();
        assert_eq!(sums.len(), 2);
        assert_eq!((sums[0].count, sums[0].cycles), (1000, 3_000_000));
        assert_eq!(sums[1].call, CallId::new(None, Sys::NameToHandleAt));
        assert_eq!(t.other_cycles(), 0);
        // One more pair than the table holds: a call already summed stays that call's (in the
        // table's pair of it), a call met first beyond the table is other.
        let t = Trace::new();
        for b in 0..MAX_SUMS as u32 + 1 {
            t.push(CallId::new(None, Sys::Statx), 1u64 << b);
        }
        t.push(CallId::new(None, Sys::Close), 5);
        assert_eq!(t.sums().count(), MAX_SUMS);
        let statx: Vec<CallSum> = t.sums().collect();
        assert_eq!(
            statx.iter().map(|s| s.count).sum::<u32>(),
            MAX_SUMS as u32 + 1
        );
        assert_eq!(
            statx.iter().map(|s| s.cycles).sum::<u64>(),
            (1u64 << (MAX_SUMS + 1)) - 1
        );
        assert_eq!(t.other_cycles(), 5);
    }
}
