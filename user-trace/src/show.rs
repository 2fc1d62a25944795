//! `fsprof trace show`: a trace printed like strace, one call per line, in the order the calls
//! started, optionally only some processes or calls.
//!
//! ```text
//!     0.000312 4242/4242 openat(AT_FDCWD, "in/b", O_RDONLY) = 4 <0.000009>
//! ```
//!
//! Time is seconds since the program started; `pid/tid`; the call and its arguments as the
//! trace holds them, each descriptor followed by its path where the trace opened it, or by its
//! kind where it is not a file (`read(3</srv/f>, 4096)`, `read(0<pipe>, 4096)`:
//! [`crate::trace::fds`]); the result (`-1 ENOENT` for an error); the latency in seconds. Each
//! program a process starts (the command, and each exec) has a line of its own where it
//! started, when no call filter is given (a trace of version 1 records none):
//!
//! ```text
//!     0.000101 4242/4242 +++ exec "/usr/bin/tar", comm "tar" +++
//! ```
//!
//! Order in bounded memory: a first pass over the file indexes the chunks of each thread (a
//! few dozen bytes per 64 KiB chunk); the second merges the threads by start time, holding one
//! decoded chunk per thread.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::abi::{self, CALLS, CHUNK_HEADER};
use crate::error::Error;
use crate::trace::record::quote;
use crate::trace::{
    FdNames, Image, ReadReport, Record, TraceHeader, TraceReader, format_call_naming, format_result,
};

/// What to show.
#[derive(Debug, Clone, Default)]
pub struct ShowConfig {
    /// The trace.
    pub trace: PathBuf,
    /// Only these processes (empty: all).
    pub pids: Vec<u32>,
    /// Only these calls, by C name or profile name, any case: `openat`, `SYS_PREAD` (empty:
    /// all).
    pub calls: Vec<String>,
}

/// What `show` printed and found.
#[derive(Debug, Clone, Default)]
pub struct ShowSummary {
    /// Lines printed.
    pub printed: u64,
    /// What reading the trace found (torn tail, damage).
    pub read: ReadReport,
}

/// The call ids named by `names`; an unknown name is an error.
pub fn call_ids(names: &[String]) -> Result<Vec<u8>, Error> {
    names
        .iter()
        .map(|n| {
            let up = n.to_ascii_uppercase();
            let full = if up.starts_with("SYS_") {
                up
            } else {
                format!("SYS_{up}")
            };
            CALLS
                .iter()
                .position(|c| c.name == full)
                .map(|i| i as u8)
                .ok_or_else(|| {
                    Error::Config(format!("unknown call '{n}' (e.g. openat, pread, fopen)"))
                })
        })
        .collect()
}

/// One thread's chunks (file offsets), in order.
struct Stream {
    pid: u32,
    tid: u32,
    ppid: u32,
    chunks: Vec<u64>,
    next: usize,
    records: Vec<Record>,
    at: usize,
}

/// Prints the trace to `out`; returns what was printed and what reading found (the caller
/// reports [`ReadReport::problems`], a torn tail for instance, where warnings go).
pub fn show(config: &ShowConfig, out: &mut dyn Write) -> Result<ShowSummary, Error> {
    let ids = call_ids(&config.calls)?;
    let path = &config.trace;
    let (header, streams, read, mut images) = index(path)?;
    // Programs started, by time, shown when no call filter is given.
    images.retain(|i| ids.is_empty() && (config.pids.is_empty() || config.pids.contains(&i.pid)));
    images.sort_by_key(|i| i.born);
    let mut images = images.into_iter().peekable();
    let mut file = profile_store::open::regular(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let mut streams: Vec<Stream> = streams;
    let mut heap = BinaryHeap::new();
    for (i, s) in streams.iter_mut().enumerate() {
        if load_next(&mut file, path, s)? {
            heap.push(Reverse((s.records[0].start, i)));
        }
    }
    let mut printed = 0;
    let mut names = FdNames::default();
    for s in &streams {
        names.parent(s.pid, s.ppid);
    }
    let wio = |e| Error::io("writing the trace listing", e);
    while let Some(Reverse((at, i))) = heap.pop() {
        while let Some(image) = images.next_if(|im| im.born <= at) {
            print_image(out, &header, &image).map_err(wio)?;
            printed += 1;
        }
        let s = &mut streams[i];
        let rec = &s.records[s.at];
        let (pid, tid) = (s.pid, s.tid);
        if (config.pids.is_empty() || config.pids.contains(&pid))
            && (ids.is_empty() || ids.contains(&rec.call))
        {
            print_record(out, &header, pid, tid, rec, &names).map_err(wio)?;
            printed += 1;
        }
        names.learn(pid, rec);
        s.at += 1;
        if s.at >= s.records.len() && !load_next(&mut file, path, s)? {
            continue;
        }
        heap.push(Reverse((s.records[s.at].start, i)));
    }
    for image in images {
        print_image(out, &header, &image).map_err(wio)?;
        printed += 1;
    }
    Ok(ShowSummary { printed, read })
}

/// Prints the line of a program a process started.
fn print_image(out: &mut dyn Write, header: &TraceHeader, i: &Image) -> std::io::Result<()> {
    let t = header.ns_since_start(i.born) as f64 / 1e9;
    let mut s = String::new();
    quote(&mut s, Some(&i.exe));
    s.push_str(", comm ");
    quote(&mut s, Some(&i.comm));
    writeln!(out, "{t:13.6} {}/{} +++ exec {s} +++", i.pid, i.tid)
}

/// Prints one record, its descriptors named as far as `names` knows them.
pub fn print_record(
    out: &mut dyn Write,
    header: &TraceHeader,
    pid: u32,
    tid: u32,
    rec: &Record,
    names: &FdNames,
) -> std::io::Result<()> {
    let t = header.ns_since_start(rec.start) as f64 / 1e9;
    let lat = header.cycles_to_ns(rec.latency) as f64 / 1e9;
    writeln!(
        out,
        "{t:13.6} {pid}/{tid} {} = {} <{lat:.6}>",
        format_call_naming(rec, &|fd| names.get(pid, fd)),
        format_result(rec)
    )
}

/// A trace's header, its threads' chunks, what reading found, and the programs started.
type Indexed = (TraceHeader, Vec<Stream>, ReadReport, Vec<Image>);

/// First pass: each thread's chunk offsets (duplicates and damage left out by the reader),
/// and the programs started.
fn index(path: &Path) -> Result<Indexed, Error> {
    let mut reader = TraceReader::open(path)?;
    let header = reader.header().clone();
    let mut by_slot: BTreeMap<u32, (u32, u32, u32, Vec<u64>)> = BTreeMap::new();
    let mut records = 0;
    while let Some(c) = reader.next_chunk()? {
        by_slot
            .entry(c.header.slot)
            .or_insert_with(|| (c.header.pid, c.header.tid, c.header.ppid, Vec::new()))
            .3
            .push(c.offset);
        let mut it = c.records();
        let mut r = Record::default();
        while let Ok(true) = it.next_into(&mut r) {
            records += 1;
        }
    }
    let mut read = reader.report().clone();
    read.records = records;
    let streams = by_slot
        .into_values()
        .map(|(pid, tid, ppid, chunks)| Stream {
            pid,
            tid,
            ppid,
            chunks,
            next: 0,
            records: Vec::new(),
            at: 0,
        })
        .collect();
    Ok((header, streams, read, reader.images().to_vec()))
}

/// Loads a stream's next chunk; false when it has none left.
fn load_next(file: &mut File, path: &Path, s: &mut Stream) -> Result<bool, Error> {
    let io = |e| Error::io(format!("reading {}", path.display()), e);
    loop {
        let Some(&off) = s.chunks.get(s.next) else {
            return Ok(false);
        };
        s.next += 1;
        let mut hb = [0u8; CHUNK_HEADER];
        file.seek(SeekFrom::Start(off)).map_err(io)?;
        file.read_exact(&mut hb).map_err(io)?;
        let h = abi::ChunkHeader::decode(&hb).ok_or_else(|| Error::BadTraceHeader {
            path: path.to_path_buf(),
            reason: format!("chunk at {off} changed while reading"),
        })?;
        let mut payload = vec![0u8; h.len as usize];
        file.read_exact(&mut payload).map_err(io)?;
        let mut it = crate::trace::Records::new(&payload, h.base);
        s.records.clear();
        s.at = 0;
        loop {
            let mut r = Record::default();
            match it.next_into(&mut r) {
                Ok(true) => s.records.push(r),
                _ => break,
            }
        }
        if !s.records.is_empty() {
            return Ok(true);
        }
    }
}
