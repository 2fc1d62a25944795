//! What one request did inside: the lower or branch system calls it made, each with its
//! latency (DeBox's per-call record). A [`Trace`] lives on the stack of the records layer for
//! the length of one request; the request context carries a reference to it
//! ([`crate::filesystem::Request::trace`]) down to the lower calls, which add to it. Nothing is
//! allocated: a request keeps its first [`MAX_CALLS`] calls and counts the rest.

use std::cell::Cell;

use crate::ops::Sys;

/// Most inner calls a trace keeps per request (later ones are counted, not kept).
pub const MAX_CALLS: usize = 16;

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

/// The inner calls of one request (see the module documentation). Not shared between threads.
#[derive(Debug, Default)]
pub struct Trace {
    calls: [Cell<InnerCall>; MAX_CALLS],
    len: Cell<u8>,
    dropped: Cell<u32>,
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
        }
    }

    /// The calls kept, in the order made.
    pub fn calls(&self) -> impl Iterator<Item = InnerCall> + '_ {
        self.calls[..self.len.get() as usize].iter().map(Cell::get)
    }

    /// Calls made beyond [`MAX_CALLS`] (not kept).
    pub fn dropped(&self) -> u32 {
        self.dropped.get()
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
    fn a_trace_keeps_its_first_calls_and_counts_the_rest() {
        let t = Trace::new();
        for i in 0..MAX_CALLS as u64 + 3 {
            t.push(CallId::new(None, Sys::Pread), i);
        }
        assert_eq!(t.calls().count(), MAX_CALLS);
        assert_eq!(t.calls().last().unwrap().cycles, MAX_CALLS as u64 - 1);
        assert_eq!(t.dropped(), 3);
    }
}
