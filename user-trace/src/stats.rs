//! `fsprof trace stats`: Horikawa's event-trace measures, per process and overall, read from a
//! trace in one streaming pass.
//!
//! Each traced call is a request whose acceptance and finish the trace times (its start and
//! its latency), so:
//!
//! * **response time** of a call: its latency; per call, as a log2 profile (layer `user` for
//!   the whole trace, `user@pid:N` per process, so every profile tool reads it), and its mean;
//! * **throughput**: calls (and bytes read and written) per second of the measured period, from
//!   the first call's start to the last call's end;
//! * **mean concurrency**: the mean number of calls in flight, the sum of response times over
//!   the period (Little's law);
//! * **think time**: on each thread, the time from the end of one call to the start of the
//!   next, the application's own work between requests; its mean, and the share of the
//!   threads' time it takes.
//!
//! Each process is named by the programs it ran (see [`crate::trace::Names`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;

use profile_store::{Layer, OpProfile, Profile, Resolution, keyed};

use crate::abi::{BUCKETS, CALLS, id};
use crate::error::Error;
use crate::trace::{Names, ReadReport, Record, TraceHeader, TraceReader};

/// Processes with a layer of their own in the response-time profile; the calls of later ones
/// go to `user@other` (memory stays bounded whatever the trace).
pub const MAX_PROCESS_LAYERS: usize = 64;

/// Measures of a set of calls (a process, or the whole trace).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Measures {
    /// Calls.
    pub calls: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Threads that made them.
    pub threads: u64,
    /// Clock at the first call's start.
    pub first_start: u64,
    /// Clock at the last call's end.
    pub last_end: u64,
    /// Sum of response times, cycles.
    pub busy: u128,
    /// Sum of think times, cycles.
    pub think: u128,
    /// Think intervals (between two calls of one thread).
    pub gaps: u64,
    /// Bytes read by read-like calls.
    pub bytes_read: u64,
    /// Bytes written by write-like calls.
    pub bytes_written: u64,
}

impl Measures {
    fn add(&mut self, rec: &Record) {
        if self.calls == 0 || rec.start < self.first_start {
            self.first_start = rec.start;
        }
        self.last_end = self.last_end.max(rec.end());
        self.calls += 1;
        self.busy += rec.latency as u128;
        if rec.result < 0 {
            self.errors += 1;
            return;
        }
        use id::*;
        match rec.call {
            READ | PREAD | READV | PREADV | PREADV2 | FREAD | FGETS => {
                self.bytes_read += rec.result as u64
            }
            WRITE | PWRITE | WRITEV | PWRITEV | PWRITEV2 | FWRITE | COPY_FILE_RANGE | SENDFILE => {
                self.bytes_written += rec.result as u64
            }
            FPUTS => self.bytes_written += rec.size().unwrap_or(0),
            _ => {}
        }
    }

    /// The measured period in seconds.
    pub fn period(&self, h: &TraceHeader) -> f64 {
        h.cycles_to_ns(self.last_end.saturating_sub(self.first_start)) as f64 / 1e9
    }

    /// Calls per second.
    pub fn throughput(&self, h: &TraceHeader) -> f64 {
        per_sec(self.calls as f64, self.period(h))
    }

    /// Mean number of calls in flight.
    pub fn concurrency(&self, h: &TraceHeader) -> f64 {
        let p = self.period(h);
        if p > 0.0 {
            cycles_secs(h, self.busy) / p
        } else {
            0.0
        }
    }

    /// Mean response time in seconds.
    pub fn mean_response(&self, h: &TraceHeader) -> f64 {
        mean(cycles_secs(h, self.busy), self.calls)
    }

    /// Mean think time in seconds.
    pub fn mean_think(&self, h: &TraceHeader) -> f64 {
        mean(cycles_secs(h, self.think), self.gaps)
    }

    /// Share of the threads' time spent thinking (between calls) rather than in calls.
    pub fn think_share(&self) -> f64 {
        let all = self.busy + self.think;
        if all == 0 {
            0.0
        } else {
            self.think as f64 / all as f64
        }
    }
}

fn cycles_secs(h: &TraceHeader, c: u128) -> f64 {
    c as f64 / h.cycles_per_sec.max(1) as f64
}

fn per_sec(v: f64, secs: f64) -> f64 {
    if secs > 0.0 { v / secs } else { 0.0 }
}

fn mean(total: f64, n: u64) -> f64 {
    if n == 0 { 0.0 } else { total / n as f64 }
}

/// Horikawa's measures of a trace.
#[derive(Debug, Clone)]
pub struct TraceStats {
    /// The trace header (clock rate, command).
    pub header: TraceHeader,
    /// Over every call.
    pub overall: Measures,
    /// Per process, by pid.
    pub processes: Vec<(u32, Measures)>,
    /// What each process ran.
    pub names: Names,
    /// Response time per call: layer `user` for the calls on files (`user@fd:KIND` for those
    /// on pipes, sockets, terminals...), `user@pid:N` per process for all of its calls (the
    /// first [`MAX_PROCESS_LAYERS`]), `user@other` for the rest.
    pub profile: Profile,
    /// What reading found (torn tail, damage).
    pub read: ReadReport,
}

type Counters = [u64; 2 + BUCKETS];

/// What to measure.
#[derive(Debug, Clone, Default)]
pub struct StatsConfig {
    /// The trace.
    pub trace: PathBuf,
}

/// Reads the trace once and derives its measures.
pub fn stats(config: &StatsConfig) -> Result<TraceStats, Error> {
    let mut reader = TraceReader::open(&config.trace)?;
    let header = reader.header().clone();
    let mut overall = Measures::default();
    let mut procs: BTreeMap<u32, Measures> = BTreeMap::new();
    let mut threads: HashMap<(u32, u32), ()> = HashMap::new();
    // Per slot: the end of its previous call.
    let mut last_end: HashMap<u32, u64> = HashMap::new();
    // Per call and descriptor kind (row `kind × calls + call`, as the shared region counts).
    let all_ops: &mut Vec<Counters> = &mut vec![[0; 2 + BUCKETS]; crate::abi::ROWS];
    // Per-process layers, in order of first appearance; index MAX_PROCESS_LAYERS is "other".
    let mut layer_of: HashMap<u32, usize> = HashMap::new();
    let mut layer_pids: Vec<u32> = Vec::new();
    let mut per_layer: Vec<HashMap<u8, Counters>> = Vec::new();
    let mut names = Names::default();
    reader.for_each_record(|h, rec| {
        names.saw(h);
        let b = 63 - (rec.latency | 1).leading_zeros() as usize;
        let bump = |c: &mut Counters| {
            c[0] += 1;
            c[1] = c[1].wrapping_add(rec.latency);
            c[2 + b] += 1;
        };
        bump(&mut all_ops[rec.kind as usize * CALLS.len() + rec.call as usize]);
        let li = *layer_of.entry(h.pid).or_insert_with(|| {
            if layer_pids.len() < MAX_PROCESS_LAYERS {
                layer_pids.push(h.pid);
                per_layer.push(HashMap::new());
                layer_pids.len() - 1
            } else {
                if per_layer.len() == MAX_PROCESS_LAYERS {
                    per_layer.push(HashMap::new());
                }
                MAX_PROCESS_LAYERS
            }
        });
        bump(per_layer[li].entry(rec.call).or_insert([0; 2 + BUCKETS]));
        let m = procs.entry(h.pid).or_default();
        m.add(rec);
        overall.add(rec);
        if threads.insert((h.pid, h.tid), ()).is_none() {
            m.threads += 1;
            overall.threads += 1;
        }
        if let Some(prev) = last_end.insert(h.slot, rec.end()) {
            // A call made by a signal handler inside another starts before it ends: no gap.
            if rec.start >= prev {
                let gap = (rec.start - prev) as u128;
                m.think += gap;
                m.gaps += 1;
                overall.think += gap;
                overall.gaps += 1;
            }
        }
    })?;
    let read = reader.report().clone();
    names.add_images(reader.images());

    let layer = |name: String, ops: &mut dyn Iterator<Item = (u8, Counters)>| {
        let mut l = Layer::new(name, Resolution::ONE);
        for (call, c) in ops {
            let mut op = OpProfile::new(CALLS[call as usize].name, BUCKETS, 1);
            op.count = c[0];
            op.total = c[1];
            op.epochs[0].copy_from_slice(&c[2..]);
            l.ops.push(op);
        }
        l.ops
            .sort_by(|a, b| profile_store::ops::listing_order(&a.name, &b.name));
        l
    };
    // `user` for the calls on files, `user@fd:KIND` for those on pipes, sockets... (as `fsprof
    // run` keeps them); the per-process layers hold every call.
    let mut layers = Vec::new();
    for (k, rows) in all_ops.chunks(CALLS.len()).enumerate() {
        let mut ops = rows
            .iter()
            .enumerate()
            .filter(|(_, c)| c[0] > 0)
            .map(|(i, c)| (i as u8, *c))
            .peekable();
        if k == 0 || ops.peek().is_some() {
            let name = match k {
                0 => "user".to_string(),
                k => keyed::name("user", "fd", crate::abi::KINDS[k].as_bytes()),
            };
            layers.push(layer(name, &mut ops));
        }
    }
    for (i, ops) in per_layer.into_iter().enumerate() {
        let name = match layer_pids.get(i) {
            Some(pid) => keyed::name("user", "pid", pid.to_string().as_bytes()),
            None => keyed::other("user"),
        };
        layers.push(layer(name, &mut ops.into_iter()));
    }
    let profile = Profile {
        started_unix_ns: Some(header.ref_unix_ns),
        clock: Some(header.clock),
        cycles_per_sec: Some(header.cycles_per_sec),
        invariant_tsc: header.invariant_tsc,
        extra: Vec::new(),
        sections: Vec::new(),
        layers,
    };
    Ok(TraceStats {
        header,
        overall,
        processes: procs.into_iter().collect(),
        names,
        profile,
        read,
    })
}

impl fmt::Display for TraceStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = &self.header;
        let cmd: Vec<String> = h
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let plural = |n: usize, one: &'static str, many: &'static str| {
            format!("{n} {}", if n == 1 { one } else { many })
        };
        writeln!(
            f,
            "trace of `{}` in {}: {}, {}, {} calls over {:.3} s",
            cmd.join(" "),
            h.root.display(),
            plural(self.processes.len(), "process", "processes"),
            plural(self.overall.threads as usize, "thread", "threads"),
            self.overall.calls,
            self.overall.period(h)
        )?;
        for p in self.read.problems() {
            writeln!(f, "trace: {p}")?;
        }
        writeln!(
            f,
            "{:<12} {:>10} {:>7} {:>7} {:>10} {:>11} {:>10} {:>10} {:>10} {:>9} {:>10} {:>6}  program",
            "",
            "calls",
            "errors",
            "threads",
            "period s",
            "calls/s",
            "read MB/s",
            "write MB/s",
            "resp us",
            "in flight",
            "think us",
            "think%"
        )?;
        let row = |f: &mut fmt::Formatter<'_>, name: &str, m: &Measures, program: &str| {
            let p = m.period(h);
            let line = format!(
                "{:<12} {:>10} {:>7} {:>7} {:>10.3} {:>11.1} {:>10.2} {:>10.2} {:>10.2} {:>9.3} {:>10.2} {:>6.1}  {}",
                name,
                m.calls,
                m.errors,
                m.threads,
                p,
                m.throughput(h),
                per_sec(m.bytes_read as f64 / 1e6, p),
                per_sec(m.bytes_written as f64 / 1e6, p),
                m.mean_response(h) * 1e6,
                m.concurrency(h),
                m.mean_think(h) * 1e6,
                m.think_share() * 100.0,
                program
            );
            writeln!(f, "{}", line.trim_end())
        };
        row(f, "all", &self.overall, "")?;
        for (pid, m) in &self.processes {
            row(f, &format!("pid {pid}"), m, &self.names.describe(*pid))?;
        }
        Ok(())
    }
}
