//! Timing one call: count it before it runs, add its latency after, and append its trace
//! record; all of it with no lock and no allocation.
//!
//! # Protocol
//!
//! [`timed`] reads the clock around the real function. The count is bumped before the call and
//! the total and bucket after it (`docs/format.md#buckets`), in the thread's slot with plain
//! stores. Each update runs with the thread's `busy` flag set; a hooked call that finds the flag
//! set can only come from a signal handler that interrupted the update (the library itself never
//! calls a hooked function), so it is counted with atomic adds in the overflow slot instead, and
//! the interrupted plain stores lose nothing. A call that merely runs while the handler's thread is
//! blocked in a real function (the common case) records normally: the flag covers the library's own
//! instructions only.
//!
//! `errno` is what the real function left, on return from every hook.
//!
//! # Trace
//!
//! With tracing on, the record is encoded into the slot's trace buffer in shared memory (see
//! [`crate::abi`] for the byte layout); when the buffer has less room than the largest record,
//! it is written to the trace file as one chunk, with one `open`/`writev`/`close` (no
//! descriptor is kept open in the program, so the program cannot close or reuse it). What is
//! left in the buffer when a thread or process ends, whatever the way, is written by
//! `fsprof run` from the shared region.

use std::ffi::c_char;
use std::sync::atomic::{Ordering, compiler_fence};

use crate::abi::{self, header, slot};
use crate::region::{self, LOCAL, Local, Sink};
use crate::sys;

/// Room a record may need: the fixed part and two strings at their longest.
const MAX_RECORD: usize = abi::MAX_RECORD_FIXED + 2 * (abi::MAX_STRING + 4);

/// A started call.
#[derive(Clone, Copy)]
pub struct Started {
    call: u8,
    /// Its descriptor's kind ([`abi::KINDS`]; 0 for a file, or a call on no descriptor).
    kind: u8,
    sink: Sink,
    t0: u64,
    /// The calling thread's state, looked up once per call.
    local: Option<&'static Local>,
}

/// The calling thread's [`Local`], for the duration of one hooked call (one thread-local
/// lookup per call, not one per use).
#[inline(always)]
fn local() -> &'static Local {
    // SAFETY: the reference is used only by this thread within the hook that took it; the
    // thread-local has no destructor and lives as long as the thread, which outlives the hook.
    LOCAL.with(|l| unsafe { &*(l as *const Local) })
}

/// Runs `real` timed as `call`. `result` turns the return value and `errno` into the trace's
/// result (the value, or `-errno`); `args` encodes the trace arguments. Neither runs unless the
/// region is attached, and `args` only when tracing.
#[inline(always)]
pub fn timed<R: Copy>(
    call: u8,
    real: impl FnOnce() -> R,
    result: impl FnOnce(R, i32) -> i64,
    args: impl FnOnce(&mut Encoder, R),
) -> R {
    timed_kind(call, 0, real, result, args)
}

/// [`timed`] for a call on descriptor `fd`: counted under the descriptor's kind
/// ([`crate::fds`]), so that a read of a pipe is not a read of a file.
#[inline(always)]
pub fn timed_fd<R: Copy>(
    call: u8,
    fd: libc::c_int,
    real: impl FnOnce() -> R,
    result: impl FnOnce(R, i32) -> i64,
    args: impl FnOnce(&mut Encoder, R),
) -> R {
    if region::base().is_none() && !region::attaching_here() {
        return real();
    }
    timed_kind(call, crate::fds::kind(fd), real, result, args)
}

#[inline(always)]
fn timed_kind<R: Copy>(
    call: u8,
    kind: u8,
    real: impl FnOnce() -> R,
    result: impl FnOnce(R, i32) -> i64,
    args: impl FnOnce(&mut Encoder, R),
) -> R {
    let s = begin(call, kind);
    if matches!(s.sink, Sink::Off) {
        return real();
    }
    let r = real();
    let err = sys::errno();
    end(s, |enc| {
        enc.head(result(r, err));
        args(enc, r);
    });
    sys::set_errno(err);
    r
}

/// The usual result of `int`/`ssize_t` functions: the value, or `-errno` for -1.
#[inline(always)]
pub fn ret(r: i64, err: i32) -> i64 {
    if r == -1 { -(err as i64) } else { r }
}

/// The counter row of `call` on a descriptor of `kind` (`abi::ROWS`).
#[inline(always)]
fn row(call: u8, kind: u8) -> usize {
    kind as usize * abi::CALLS.len() + call as usize
}

/// Counts the start of `call` (on a descriptor of `kind`) and reads the clock.
#[inline(always)]
fn begin(call: u8, kind: u8) -> Started {
    let r = row(call, kind);
    let (sink, local) = match region::base() {
        Some(base) => {
            let l = local();
            let s = if l.busy.get() {
                let s = Sink::Overflow(base);
                region::count(s, r);
                s
            } else {
                enter(l);
                let s = region::sink(base, l);
                region::count(s, r);
                leave(l);
                s
            };
            (s, Some(l))
        }
        None if region::attaching_here() => {
            region::count(Sink::Pending, r);
            (Sink::Pending, None)
        }
        None => (Sink::Off, None),
    };
    Started {
        call,
        kind,
        sink,
        t0: profile_store::clock::now(),
        local,
    }
}

/// Records the end of a started call; `encode` writes its trace record from the result on.
#[inline(always)]
fn end(s: Started, encode: impl FnOnce(&mut Encoder)) {
    let t1 = profile_store::clock::now();
    // A negative difference (a thread moved between unsynchronised counters) counts as 0.
    let cycles = t1.saturating_sub(s.t0);
    let r = row(s.call, s.kind);
    match (s.sink, s.local) {
        (Sink::Slot(p), Some(l)) => {
            if l.busy.get() {
                // Not reachable through `begin`, which saw the same flag; kept exact anyway.
                finish_untraced(Sink::Overflow(region::base().unwrap_or(p)), r, cycles);
                return;
            }
            enter(l);
            region::finish(s.sink, r, cycles);
            if region::tracing() {
                append(p, l, s, cycles, encode);
            }
            leave(l);
        }
        (other, _) => finish_untraced(other, r, cycles),
    }
}

#[cold]
fn finish_untraced(sink: Sink, row: usize, cycles: u64) {
    region::finish(sink, row, cycles);
    if let (Sink::Overflow(base), true) = (sink, region::tracing()) {
        region::u64_at(base, header::UNTRACED).fetch_add(1, Ordering::Relaxed);
    }
}

#[inline(always)]
fn enter(l: &Local) {
    l.busy.set(true);
    compiler_fence(Ordering::SeqCst);
}

#[inline(always)]
fn leave(l: &Local) {
    compiler_fence(Ordering::SeqCst);
    l.busy.set(false);
}

/// Appends the record of a finished call to the slot's trace buffer, writing the buffer out
/// first when a record might not fit.
#[inline(always)]
fn append(p: *mut u8, l: &Local, s: Started, cycles: u64, encode: impl FnOnce(&mut Encoder)) {
    let head_field = region::u32_at(p, slot::HEAD);
    let mut head = head_field.load(Ordering::Relaxed) as usize;
    if head + MAX_RECORD > abi::TRACE_BUFFER {
        flush(p);
        head = 0;
    }
    if head == 0 {
        region::u64_at(p, slot::BASE).store(s.t0, Ordering::Relaxed);
        l.last_start.set(s.t0);
    }
    // SAFETY: the buffer is TRACE_BUFFER bytes inside this thread's slot, which only this
    // thread writes (the reader looks at it after the thread is gone); head + MAX_RECORD fits.
    let buf = unsafe {
        std::slice::from_raw_parts_mut(region::buffer(p).add(head), abi::TRACE_BUFFER - head)
    };
    let mut enc = Encoder { buf, pos: 0 };
    enc.var(s.call as u64 | (s.kind as u64) << abi::KIND_SHIFT);
    enc.var(abi::zigzag(s.t0.wrapping_sub(l.last_start.get()) as i64));
    enc.var(cycles);
    encode(&mut enc);
    l.last_start.set(s.t0);
    head_field.store((head + enc.pos) as u32, Ordering::Release);
}

/// Writes the slot's pending records to the trace file as one chunk and empties the buffer.
#[cold]
fn flush(p: *mut u8) {
    let head = region::u32_at(p, slot::HEAD).load(Ordering::Relaxed) as usize;
    if head == 0 {
        return;
    }
    let base = region::base().unwrap_or(std::ptr::null_mut());
    let seq = region::u32_at(p, slot::SEQ);
    region::u32_at(p, slot::FLUSHING).store(1, Ordering::Release);
    // SAFETY: the first `head` bytes of this thread's buffer hold complete records.
    let payload = unsafe { std::slice::from_raw_parts(region::buffer(p), head) };
    let index = LOCAL.with(|l| l.index.get());
    let h = abi::ChunkHeader {
        kind: abi::CHUNK_RECORDS,
        flags: 0,
        len: head as u32,
        slot: index,
        seq: seq.load(Ordering::Relaxed),
        pid: region::u32_at(p, slot::PID).load(Ordering::Relaxed),
        tid: region::u32_at(p, slot::TID).load(Ordering::Relaxed),
        ppid: region::u32_at(p, slot::PPID).load(Ordering::Relaxed),
        origin: region::u32_at(p, slot::ORIGIN).load(Ordering::Relaxed) as u8,
        parent_slot: region::u32_at(p, slot::PARENT_SLOT).load(Ordering::Relaxed),
        born: region::u64_at(p, slot::BORN).load(Ordering::Relaxed),
        base: region::u64_at(p, slot::BASE).load(Ordering::Relaxed),
        payload_crc: abi::crc32(0, payload),
    }
    .encode();
    let written = sys::append(region::trace_path(), &h, payload);
    if !base.is_null() {
        let field = if written {
            header::CHUNKS
        } else {
            header::WRITE_ERRORS
        };
        region::u64_at(base, field).fetch_add(1, Ordering::Relaxed);
    }
    region::u32_at(p, slot::HEAD).store(0, Ordering::Release);
    seq.store(
        seq.load(Ordering::Relaxed).wrapping_add(1),
        Ordering::Release,
    );
    region::u32_at(p, slot::FLUSHING).store(0, Ordering::Release);
}

/// Writes a trace record's items into the slot buffer (room for them was reserved).
pub struct Encoder<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl Encoder<'_> {
    #[inline(always)]
    fn var(&mut self, v: u64) {
        self.pos += abi::put_varint(&mut self.buf[self.pos..], v);
    }

    #[inline(always)]
    fn head(&mut self, result: i64) {
        self.var(abi::zigzag(result));
    }

    /// `d`: a descriptor.
    #[inline(always)]
    pub fn fd(&mut self, fd: i32) {
        self.var(abi::zigzag(fd as i64));
    }

    /// `x`: flags.
    #[inline(always)]
    pub fn flags(&mut self, f: u64) {
        self.var(f);
    }

    /// `m`: a mode or mask.
    #[inline(always)]
    pub fn mode(&mut self, m: u64) {
        self.var(m);
    }

    /// `n`: a size.
    #[inline(always)]
    pub fn size(&mut self, n: u64) {
        self.var(n);
    }

    /// `o`: an offset or length.
    #[inline(always)]
    pub fn off(&mut self, o: i64) {
        self.var(abi::zigzag(o));
    }

    /// `i`: a small integer.
    #[inline(always)]
    pub fn int(&mut self, i: i64) {
        self.var(abi::zigzag(i));
    }

    /// `t`: a stat result (only for successful calls).
    #[inline(always)]
    pub fn stat(&mut self, ok: bool, mode: u64, size: u64) {
        if ok {
            self.var(mode);
            self.var(size);
        }
    }

    /// `p`: a C string, cut at [`abi::MAX_STRING`] bytes.
    ///
    /// # Safety
    /// `s` must be null or point to a NUL-terminated string (or at least `MAX_STRING`
    /// readable bytes).
    #[inline(always)]
    pub unsafe fn path(&mut self, s: *const c_char) {
        if s.is_null() {
            self.var(0);
            return;
        }
        // SAFETY: per the caller's contract.
        let n = unsafe { sys::strnlen(s, abi::MAX_STRING) };
        self.var(n as u64 + 1);
        // SAFETY: `n` bytes are readable at `s`; the reservation leaves room for them.
        let src = unsafe { std::slice::from_raw_parts(s.cast::<u8>(), n) };
        self.buf[self.pos..self.pos + n].copy_from_slice(src);
        self.pos += n;
    }
}
