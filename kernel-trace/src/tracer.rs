//! The tracer of one mount: per-CPU perf rings of the FUSE tracepoints and the ftrace
//! instance of the block ones ([`crate::ftrace`]; or perf rings, where it cannot be made),
//! drained by a thread (and before every snapshot), paired, and recorded into the `kernel`
//! and `block@dev:NAME` layers.
//!
//! # Clock
//!
//! Perf stamps every record with `CLOCK_MONOTONIC` nanoseconds (`use_clockid`), and the
//! ftrace instance's `trace_clock` is `mono`, the same clock. At each drain
//! the tracer reads the cycle counter and `CLOCK_MONOTONIC` together (an anchor) and places a
//! kernel time `t` at `cycles = anchor_cycles + (t - anchor_ns) × cycles_per_sec / 10^9`,
//! with the profile's calibrated rate (measured against `CLOCK_MONOTONIC` too), so a latency is
//! `ns × cycles_per_sec / 10^9` cycles and lands in the same log2 buckets as the daemon's.
//!
//! # Order
//!
//! Each CPU's ring is in time order; across rings a drain sorts by time. Records stamped after
//! the drain began wait for the next drain (a record being written on another CPU may not be
//! visible yet). The pairers do not depend on order for correctness, only for ambiguity.
//!
//! # Snapshots
//!
//! [`Tracer`] is a profile [`Extension`]: every snapshot drains first, so a `.fsprof` read
//! holds every request that ended before it was opened, and a reset drains, then forgets.

use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use profile_store::{Extension, Layer, Recorder, RecorderConfig, Section, clock};

use crate::accounting::{Accounting, KINDS, Totals};
use crate::block::{self, BlockPairs};
use crate::devices::{BlockDevice, Dev};
use crate::error::Refusal;
use crate::events::{Decoder, Event, Record, read_records};
use crate::ftrace::BlockRings;
use crate::fuse::FusePairs;
use crate::plan::{Plan, online_cpus, open_refusal};
use crate::sys::{self, EventSpec, Ring};

/// Data pages of each CPU's ring (4 KiB pages: 1 MiB a CPU).
pub const RING_PAGES: usize = 256;
/// Most FUSE records held while the connection is not yet known.
const MAX_HELD: usize = 1 << 20;
/// How often the thread drains when the rings stay below their wake-up mark.
pub const DRAIN_INTERVAL: Duration = Duration::from_millis(100);

/// The `unique`s of requests the daemon answered itself (its control files): their
/// round trips stay out of the `kernel` layer, as they stay out of `fuse`.
#[derive(Debug, Default)]
pub struct Excluded(Mutex<HashSet<u64>>);

/// Most `unique`s kept in [`Excluded`] (each leaves as its end is read).
const MAX_EXCLUDED: usize = 1 << 14;

impl Excluded {
    /// Request `unique` is not to be timed.
    pub fn note(&self, unique: u64) {
        let mut s = self.0.lock();
        if s.len() >= MAX_EXCLUDED {
            // Their ends were lost: forget them rather than grow.
            s.clear();
        }
        s.insert(unique);
    }

    /// Whether `unique` was noted (and forgets it).
    fn take(&self, unique: u64) -> bool {
        self.0.lock().remove(&unique)
    }
}

/// What the tracer records into: the `kernel` layer and one layer per block device.
struct Layers {
    kernel: Recorder,
    blocks: Vec<(BlockDevice, Recorder)>,
    /// Why there are no block layers.
    no_block: Option<String>,
}

struct CpuRing {
    ring: Ring,
    /// Every event of this CPU, in [`Kind`] order (the first owns the ring).
    fds: Vec<OwnedFd>,
    /// The kind of each of `fds`.
    kinds: Vec<Kind>,
    /// Samples read, per [`Kind`].
    read: [u64; KINDS],
}

/// The events of a CPU, in the order they are opened.
#[derive(Debug, Clone, Copy)]
enum Kind {
    FuseSend = 0,
    FuseEnd = 1,
    Issue = 2,
    Complete = 3,
}

impl Kind {
    fn of(e: &Event) -> Kind {
        match e {
            Event::FuseSend { .. } => Kind::FuseSend,
            Event::FuseEnd { .. } => Kind::FuseEnd,
            Event::Issue { .. } => Kind::Issue,
            Event::Complete { .. } => Kind::Complete,
        }
    }
}

struct State {
    /// The FUSE connection traced, once known.
    conn: Option<Dev>,
    rings: Vec<CpuRing>,
    decoder: Decoder,
    fuse: FusePairs,
    block: BlockPairs,
    buf: Vec<u8>,
    /// Decoded and not yet processed (stamped after the last drain began).
    pending: Vec<Event>,
    /// Records lost in full rings and hits the kernel never wrote.
    accounting: Accounting,
    /// The block tracepoints' ftrace instance, where they are not recorded through perf.
    ftrace: Option<BlockRings>,
    /// Records the ftrace instance dropped or overwrote, since it was made and at the last
    /// reset.
    ftrace_lost: u64,
    ftrace_lost_base: u64,
    /// FUSE records dropped while the connection was not known.
    held_dropped: u64,
    /// Samples read that no decoder knew (their hits count as unsampled).
    undecoded: u64,
    events: u64,
    /// Failed requests: (layer index, op, errno) → count; layer 0 is `kernel`, 1.. blocks.
    errors: HashMap<(usize, usize, i32), u64>,
}

/// The kernel tracer of one mount (see the module's documentation).
pub struct Tracer {
    layers: Layers,
    state: Mutex<State>,
    excluded: Arc<Excluded>,
    poll_fds: Vec<OwnedFd>,
    stop: AtomicBool,
    /// Whether the draining thread runs.
    draining: AtomicBool,
    cycles_per_sec: u64,
    /// How the block tracepoints are recorded: `ftrace` or `perf` (the header's
    /// `block_trace`).
    block_trace: &'static str,
    /// Whether the FUSE tracepoints are traced (the `kernel` layer); not for the block
    /// devices alone.
    traces_fuse: bool,
}

impl Plan {
    /// Opens and enables the events for the FUSE connection `conn` (the mount's device
    /// number; `None` when the mount does not exist yet: then the FUSE records wait until
    /// [`Tracer::set_connection`] names it, and those of other connections are dropped) and
    /// the plan's block devices, and starts the draining thread. The `kernel` layer's
    /// operations are `ops` (the daemon's `fuse` layer table); requests whose `unique` is
    /// noted in `excluded` are left out.
    pub fn start(
        self,
        conn: Option<Dev>,
        ops: &[&str],
        config: &RecorderConfig,
        excluded: Arc<Excluded>,
    ) -> Result<Arc<Tracer>, Refusal> {
        let (block_formats, devices, no_block) = match self.block {
            Ok((f, d)) => (Some(f), d, None),
            Err(why) => (None, Vec::new(), Some(why)),
        };
        let conn_filter = conn.map(conn_filter).unwrap_or_default();
        let dev_filter = devices
            .iter()
            .map(|d| format!("dev == {}", d.dev.kernel()))
            .collect::<Vec<_>>()
            .join(" || ");
        let mut specs: Vec<(&crate::tracefs::Format, &str, Kind)> = Vec::new();
        if let Some(f) = &self.fuse {
            specs.push((&f.send, &conn_filter, Kind::FuseSend));
            specs.push((&f.end, &conn_filter, Kind::FuseEnd));
        }
        let devs: Vec<u32> = devices.iter().map(|d| d.dev.kernel()).collect();
        let mut ftrace = None;
        if let Some(b) = &block_formats {
            let opened = self.ftrace_kb.map(|kb| {
                BlockRings::open(&self.tracefs.root, b, &devs, kb, &online_cpus()?)
                    .map_err(Refusal::new)
            });
            match opened {
                Some(Ok(rings)) => ftrace = Some(rings),
                Some(Err(why)) => log::warn!(
                    "kernel trace: no ftrace instance for the block tracepoints ({why}); recording them through perf, which may count completions it never writes (block_unsampled)"
                ),
                None => {}
            }
            if ftrace.is_none() {
                specs.push((&b.issue, &dev_filter, Kind::Issue));
                specs.push((&b.complete, &dev_filter, Kind::Complete));
            }
        }
        if !self.ring_pages.is_power_of_two() {
            return Err(Refusal::new(format!(
                "{} pages a ring: not a power of two",
                self.ring_pages
            )));
        }
        let (rings, poll_fds) = open_rings(&specs, self.ring_pages)?;
        let kernel = Recorder::new("kernel", ops, config);
        let names = block::op_names();
        let blocks: Vec<(BlockDevice, Recorder)> = devices
            .iter()
            .map(|d| {
                let name = profile_store::keyed::name("block", "dev", d.name.as_bytes());
                (d.clone(), Recorder::new(&name, &names, config))
            })
            .collect();
        let block_trace = if ftrace.is_some() { "ftrace" } else { "perf" };
        let traces_fuse = self.fuse.is_some();
        let tracer = Arc::new(Tracer {
            layers: Layers {
                kernel,
                blocks,
                no_block,
            },
            state: Mutex::new(State {
                conn,
                rings,
                decoder: Decoder::new(self.fuse, block_formats),
                fuse: FusePairs::new(ops),
                block: BlockPairs::new(&devs),
                buf: Vec::new(),
                pending: Vec::new(),
                accounting: Accounting::default(),
                ftrace,
                ftrace_lost: 0,
                ftrace_lost_base: 0,
                held_dropped: 0,
                undecoded: 0,
                events: 0,
                errors: HashMap::new(),
            }),
            excluded,
            poll_fds,
            stop: AtomicBool::new(false),
            draining: AtomicBool::new(true),
            cycles_per_sec: profile_store::ClockInfo::get().cycles_per_sec,
            block_trace,
            traces_fuse,
        });
        {
            let st = tracer.state.lock();
            for r in &st.rings {
                for fd in &r.fds {
                    sys::enable(fd)
                        .map_err(|e| Refusal::new(format!("enabling a tracepoint: {e}")))?;
                }
            }
        }
        let weak = Arc::downgrade(&tracer);
        std::thread::Builder::new()
            .name("kernel-trace".into())
            .spawn(move || drain_loop(weak))
            .map_err(|e| Refusal::new(format!("cannot start the tracing thread: {e}")))?;
        Ok(tracer)
    }
}

impl State {
    /// Records lost since the last reset: in full perf rings, in the ftrace instance's full
    /// buffer, and FUSE records dropped while the mount was being made.
    fn lost(&self) -> u64 {
        self.accounting.lost()
            + self.held_dropped
            + self.ftrace_lost.saturating_sub(self.ftrace_lost_base)
    }
}

/// The filter keeping one connection's FUSE records.
fn conn_filter(conn: Dev) -> String {
    format!("connection == {}", conn.kernel())
}

type Opened = (Vec<CpuRing>, Vec<OwnedFd>);

/// Opens the events of `specs` (tracepoint, filter and kind, in [`Kind`] order) on every
/// online CPU, each CPU's sharing one ring of `pages` data pages; returns the rings and a
/// descriptor of each to poll.
fn open_rings(
    specs: &[(&crate::tracefs::Format, &str, Kind)],
    pages: usize,
) -> Result<Opened, Refusal> {
    let page = sys::page_size();
    let mut rings = Vec::new();
    let mut poll_fds = Vec::new();
    for cpu in online_cpus()? {
        let mut fds: Vec<OwnedFd> = Vec::new();
        let mut kinds = Vec::new();
        let mut ring = None;
        for (f, filter, kind) in specs {
            let fd = sys::open_tracepoint(&EventSpec {
                id: f.id,
                cpu,
                wakeup_bytes: (pages * page / 4) as u32,
            })
            .map_err(|e| open_refusal(&f.name, &e))?;
            if !filter.is_empty() {
                sys::set_filter(&fd, filter).map_err(|e| {
                    Refusal::new(format!("tracepoint {}: filter {filter:?}: {e}", f.name))
                })?;
            }
            let ring_err = |e: std::io::Error| Refusal::new(format!("perf ring of CPU {cpu}: {e}"));
            match fds.first() {
                None => {
                    ring = Some(Ring::map(&fd, pages).map_err(ring_err)?);
                    poll_fds.push(fd.try_clone().map_err(ring_err)?);
                }
                Some(first) => sys::set_output(&fd, first).map_err(|e| {
                    Refusal::new(format!(
                        "tracepoint {}: sharing CPU {cpu}'s ring: {e}",
                        f.name
                    ))
                })?,
            }
            fds.push(fd);
            kinds.push(*kind);
        }
        if let Some(ring) = ring {
            rings.push(CpuRing {
                ring,
                fds,
                kinds,
                read: [0; 4],
            });
        }
    }
    Ok((rings, poll_fds))
}

fn drain_loop(weak: Weak<Tracer>) {
    loop {
        let Some(t) = weak.upgrade() else { return };
        if t.stop.load(Ordering::Relaxed) {
            t.draining.store(false, Ordering::Release);
            return;
        }
        let fds: Vec<&OwnedFd> = t.poll_fds.iter().collect();
        if let Err(e) = sys::poll(&fds, DRAIN_INTERVAL.as_millis() as i32) {
            log::error!("kernel trace: poll: {e}; tracing stops");
            t.draining.store(false, Ordering::Release);
            return;
        }
        t.drain();
    }
}

/// Converts trace-clock nanoseconds to cycle-counter readings (see the module's docs).
#[derive(Debug, Clone, Copy)]
struct Anchor {
    ns: u64,
    cycles: u64,
    cycles_per_sec: u64,
}

impl Anchor {
    fn now(cycles_per_sec: u64) -> Anchor {
        let a = sys::clock_ns();
        let cycles = clock::now();
        let b = sys::clock_ns();
        Anchor {
            ns: a + (b.saturating_sub(a)) / 2,
            cycles,
            cycles_per_sec,
        }
    }

    fn cycles(&self, t: u64) -> u64 {
        let d = (t as i128 - self.ns as i128) * self.cycles_per_sec as i128 / 1_000_000_000;
        (self.cycles as i128 + d).clamp(0, u64::MAX as i128) as u64
    }
}

impl Tracer {
    /// Names the FUSE connection traced (once its mount exists): its records are kept from
    /// now on, and those already read (since the start) too; other connections' are dropped,
    /// and the kernel filters them out from now on.
    pub fn set_connection(&self, conn: Dev) -> Result<(), Refusal> {
        let mut st = self.state.lock();
        let filter = conn_filter(conn);
        for r in &st.rings {
            let fuse = r
                .fds
                .iter()
                .zip(&r.kinds)
                .filter(|(_, k)| matches!(k, Kind::FuseSend | Kind::FuseEnd));
            for (fd, _) in fuse {
                sys::set_filter(fd, &filter).map_err(|e| {
                    Refusal::new(format!("FUSE tracepoints: filter {filter:?}: {e}"))
                })?;
            }
        }
        st.conn = Some(conn);
        Ok(())
    }

    /// Stops the draining thread (within [`DRAIN_INTERVAL`], after at most one more drain;
    /// [`Tracer::is_draining`] says when); the events stay open, and snapshots still drain,
    /// until the tracer is dropped.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// The mount is gone: stops the draining thread, drains once more and removes the block
    /// tracepoints' ftrace instance now (its records stay in the layers), so that it does not
    /// outlive the process however the process ends from here. Snapshots still drain the
    /// perf rings.
    pub fn close(&self) {
        self.stop();
        self.drain();
        self.state.lock().ftrace = None;
    }

    /// Whether the draining thread still runs.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Records lost since the last reset: those lost in full rings, those the kernel counted
    /// without writing them, and FUSE records dropped while the mount was being made.
    pub fn lost(&self) -> u64 {
        let st = self.state.lock();
        let u = st.accounting.unsampled();
        st.lost() + u[0] + u[1]
    }

    /// Records read so far (all kinds), for measuring the cost per event.
    pub fn events(&self) -> u64 {
        self.state.lock().events
    }

    /// Reads every ring, pairs what it can and records it.
    pub fn drain(&self) {
        let started = sys::clock_ns();
        let anchor = Anchor::now(self.cycles_per_sec);
        let mut st = self.state.lock();
        let st = &mut *st;
        let mut n = 0;
        let mut undecoded = 0;
        let mut totals = Totals::default();
        for r in &mut st.rings {
            // Counts first: every sample counted by now is written (or lost, or dropped) by
            // the time the ring is read, but for one still being written on its CPU, which
            // the next drain reads (see crate::accounting).
            for (fd, kind) in r.fds.iter().zip(&r.kinds) {
                let k = *kind as usize;
                let c = sys::read_counts(fd).unwrap_or_default();
                totals.counted[k] += c.hits;
                totals.lost[k] += c.lost;
            }
            let (decoder, pending, seen) = (&st.decoder, &mut st.pending, &mut r.read);
            read_records(&mut r.ring, &mut st.buf, |rec| {
                // PERF_RECORD_LOST reports what the counts' lost samples already hold.
                if let Record::Sample { t, raw } = rec {
                    n += 1;
                    match decoder.decode(t, raw) {
                        Some(e) => {
                            seen[Kind::of(&e) as usize] += 1;
                            pending.push(e);
                        }
                        None => undecoded += 1,
                    }
                }
            });
            for (k, v) in r.read.iter().enumerate() {
                totals.read[k] += v;
            }
        }
        let lost_before = st.lost();
        let mut gone = st.accounting.update(totals);
        if let Some(rings) = &mut st.ftrace {
            let (decoder, pending) = (&st.decoder, &mut st.pending);
            let total = rings.drain(|t, raw| {
                n += 1;
                match decoder.decode(t, raw) {
                    Some(e) => pending.push(e),
                    None => undecoded += 1,
                }
            });
            // Which records were lost is not known: each may be a completion whose issue
            // then waits in vain (crate::block::BlockPairs::unsampled).
            gone += total.saturating_sub(st.ftrace_lost);
            st.ftrace_lost = st.ftrace_lost.max(total);
        }
        if gone > 0 {
            st.block.unsampled(gone);
        }
        let lost = st.lost().saturating_sub(lost_before);
        if lost > 0 {
            log::warn!("kernel trace: {lost} records lost (a ring or buffer was full)");
        }
        if undecoded > 0 && st.undecoded == 0 {
            log::warn!(
                "kernel trace: {undecoded} records of an unknown tracepoint or too short; counted as unsampled"
            );
        }
        st.undecoded += undecoded;
        st.events += n;
        st.pending.sort_by_key(Event::time);
        let ready = st.pending.partition_point(|e| e.time() <= started);
        let now: Vec<Event> = st.pending.drain(..ready).collect();
        let conn = st.conn.map(Dev::kernel);
        let mut held = Vec::new();
        for e in now {
            match (&e, conn) {
                (Event::FuseSend { .. } | Event::FuseEnd { .. }, None) => held.push(e),
                (Event::FuseSend { conn: c, .. } | Event::FuseEnd { conn: c, .. }, Some(k))
                    if *c != k => {}
                _ => self.process(st, e, &anchor),
            }
        }
        if !held.is_empty() {
            // Until the connection is known (the mount is being made): bounded.
            if held.len() > MAX_HELD {
                st.held_dropped += (held.len() - MAX_HELD) as u64;
                held.drain(..held.len() - MAX_HELD);
            }
            held.append(&mut st.pending);
            st.pending = held;
        }
        st.fuse.drained();
        st.block.drained();
    }

    fn process(&self, st: &mut State, e: Event, anchor: &Anchor) {
        match e {
            Event::FuseSend {
                t, unique, opcode, ..
            } => {
                if let Some(d) = st.fuse.send(unique, opcode, t) {
                    self.record_fuse(st, d, anchor);
                }
            }
            Event::FuseEnd {
                t, unique, error, ..
            } => {
                if let Some(d) = st.fuse.end(unique, t, error) {
                    self.record_fuse(st, d, anchor);
                }
            }
            Event::Issue {
                t,
                dev,
                sector,
                sectors,
                op,
            } => {
                if let Some(d) = st.block.issue(dev, sector, sectors, op, t) {
                    self.record_block(st, d, anchor);
                }
            }
            Event::Complete {
                t,
                dev,
                sector,
                sectors,
                error,
            } => {
                if let Some(d) = st.block.complete(dev, sector, sectors, error, t) {
                    self.record_block(st, d, anchor);
                }
            }
        }
    }

    fn record_fuse(&self, st: &mut State, d: crate::fuse::Done, anchor: &Anchor) {
        if self.excluded.take(d.unique) {
            return;
        }
        let rec = &self.layers.kernel;
        let token = rec.start_at(d.op, anchor.cycles(d.start));
        rec.record(token, anchor.cycles(d.end));
        if d.error != 0 {
            *st.errors.entry((0, d.op, -d.error)).or_default() += 1;
        }
    }

    fn record_block(&self, st: &mut State, d: block::Done, anchor: &Anchor) {
        let Some((_, rec)) = self.layers.blocks.get(d.device) else {
            return;
        };
        let token = rec.start_at(d.op, anchor.cycles(d.start));
        rec.record(token, anchor.cycles(d.end));
        if d.error != 0 {
            *st.errors.entry((1 + d.device, d.op, -d.error)).or_default() += 1;
        }
    }
}

/// Value of a header key: the bytes outside printable ASCII, `%` and `=` as `%XX`.
fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (0x21..=0x7e).contains(&b) && b != b'%' && b != b'=' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Extension for Tracer {
    fn layers(&self) -> Vec<Layer> {
        self.drain();
        let st = self.state.lock();
        let mut kernel = self.layers.kernel.snapshot();
        let c = st.fuse.counts;
        let conn = st
            .conn
            .map_or_else(|| "unknown".to_string(), |c| c.to_string());
        kernel.extra = vec![
            ("level".into(), "kernel".into()),
            ("source".into(), "fuse_request_send-fuse_request_end".into()),
            ("scope".into(), "connection".into()),
            ("connection".into(), conn),
            ("kclock".into(), "monotonic".into()),
            ("unpaired".into(), c.unpaired.to_string()),
            ("unended".into(), c.unended.to_string()),
        ];
        let mut out = Vec::new();
        if self.traces_fuse {
            out.push(kernel);
        }
        for (i, (dev, rec)) in self.layers.blocks.iter().enumerate() {
            let mut l = rec.snapshot();
            let c = st.block.counts(i);
            l.extra = vec![
                ("level".into(), "block".into()),
                ("source".into(), "block_rq_issue-block_rq_complete".into()),
                // Every request to the device, whoever made it, not only this mount's.
                ("scope".into(), "device".into()),
                ("device".into(), dev.dev.to_string()),
                ("kclock".into(), "monotonic".into()),
                ("unpaired".into(), c.unpaired.to_string()),
                ("partial".into(), c.partial.to_string()),
                ("ambiguous".into(), c.ambiguous.to_string()),
                ("errors".into(), c.errors.to_string()),
                ("uncompleted".into(), c.uncompleted.to_string()),
            ];
            out.push(l);
        }
        out
    }

    fn sections(&self) -> Vec<Section> {
        let st = self.state.lock();
        let mut by_layer: Vec<Vec<String>> = vec![Vec::new(); 1 + self.layers.blocks.len()];
        let mut keys: Vec<_> = st.errors.iter().collect();
        keys.sort();
        for (&(layer, op, errno), n) in keys {
            let name = if layer == 0 {
                self.layers.kernel.ops()[op].clone()
            } else {
                self.layers.blocks[layer - 1].1.ops()[op].clone()
            };
            by_layer[layer].push(format!("op={name} errno={errno} count={n}"));
        }
        let mut out = Vec::new();
        for (i, lines) in by_layer.into_iter().enumerate() {
            if lines.is_empty() {
                continue;
            }
            let layer = if i == 0 {
                self.layers.kernel.name().to_string()
            } else {
                self.layers.blocks[i - 1].1.name().to_string()
            };
            let mut s = Section::new("errors");
            s.attrs = vec![("layer".into(), layer)];
            s.lines = lines;
            out.push(s);
        }
        out
    }

    fn extra(&self) -> Vec<(String, String)> {
        let (lost, unsampled) = {
            let st = self.state.lock();
            (st.lost(), st.accounting.unsampled())
        };
        let fuse = if self.traces_fuse { "perf" } else { "none" };
        let mut v = vec![
            ("kernel_trace".to_string(), fuse.to_string()),
            ("kernel_lost".to_string(), lost.to_string()),
            ("kernel_unsampled".to_string(), unsampled[0].to_string()),
            ("block_unsampled".to_string(), unsampled[1].to_string()),
        ];
        match &self.layers.no_block {
            Some(why) => v.push(("block_layers".into(), format!("none:{}", escape_value(why)))),
            None => {
                v.push(("block_trace".into(), self.block_trace.to_string()));
                let names: Vec<&str> = self
                    .layers
                    .blocks
                    .iter()
                    .map(|(d, _)| d.name.as_str())
                    .collect();
                v.push(("block_layers".into(), names.join(",")));
            }
        }
        v
    }

    fn reset(&self) {
        self.drain();
        let mut st = self.state.lock();
        st.fuse.reset();
        st.block.reset();
        st.errors.clear();
        st.accounting.reset();
        st.ftrace_lost_base = st.ftrace_lost;
        st.held_dropped = 0;
        self.layers.kernel.reset();
        for (_, r) in &self.layers.blocks {
            r.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_nanoseconds_become_cycles_at_the_profile_rate() {
        let a = Anchor {
            ns: 1_000_000_000,
            cycles: 5_000_000_000,
            cycles_per_sec: 2_500_000_000,
        };
        assert_eq!(a.cycles(1_000_000_000), 5_000_000_000);
        // 2 ms later: 5,000,000 cycles.
        assert_eq!(a.cycles(1_002_000_000) - a.cycles(1_000_000_000), 5_000_000);
        assert_eq!(a.cycles(999_000_000), 5_000_000_000 - 2_500_000);
        assert_eq!(a.cycles(0), 2_500_000_000);
    }

    #[test]
    fn excluded_uniques_are_taken_once_and_bounded() {
        let x = Excluded::default();
        x.note(4);
        assert!(x.take(4));
        assert!(!x.take(4));
        for u in 0..(MAX_EXCLUDED as u64 + 5) {
            x.note(u);
        }
        assert!(x.0.lock().len() <= MAX_EXCLUDED);
    }

    #[test]
    fn header_values_are_escaped() {
        assert_eq!(escape_value("a b=c%"), "a%20b%3Dc%25");
        assert!(profile_store::text::is_valid_value(&escape_value(
            "/tmp/x y is on tmpfs, which has no block device"
        )));
    }
}
