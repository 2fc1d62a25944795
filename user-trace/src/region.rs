//! The shared region from `fsprof run`'s side: created before the program starts, read after
//! it ends into the user layer of a profile, and drained of the trace records that threads
//! left in their buffers.

use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use profile_store::{Layer, OpProfile, Resolution};

use crate::abi::{self, CALLS, COUNTERS_PER_CALL, KINDS, ROWS, header, slot};
use crate::sys::{self, Mapping};

/// The shared region of one run.
pub struct Region {
    fd: OwnedFd,
    map: Mapping,
}

/// What the region says about the run besides the counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegionStats {
    /// Process images that attached (the command, its fork children do not count, every
    /// exec'd program does).
    pub attaches: u64,
    /// Slots claimed (threads of process images that made a call), including those that
    /// found no free slot.
    pub slots_claimed: u64,
    /// Slots in the region.
    pub slot_capacity: u64,
    /// Calls counted in the overflow slot (threads beyond the capacity, calls from signal
    /// handlers that interrupted the library's bookkeeping).
    pub overflow_calls: u64,
}

/// One counter row's counters (a call on descriptors of one kind, `abi::ROWS`) summed over
/// every slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallCounts {
    /// Calls started.
    pub count: u64,
    /// Total cycles of the calls that finished.
    pub total: u64,
    /// Per bucket: calls that finished.
    pub buckets: Vec<u64>,
}

/// A claimed slot's identity and trace state.
#[derive(Debug, Clone, Copy)]
struct SlotInfo {
    index: u32,
    offset: usize,
    pid: u32,
}

impl Region {
    /// A zeroed region with room for `slots` slots.
    pub fn create(slots: usize) -> io::Result<Region> {
        let len = abi::region_len(slots.max(1));
        let fd = sys::memfd(c"fsprof-user", len as u64)?;
        let map = Mapping::new(&fd, len)?;
        Ok(Region { fd, map })
    }

    /// The path a program opens the region by (through this process's descriptor table, so
    /// no file is left behind and the descriptor need not be inherited).
    pub fn path(&self) -> String {
        format!("/proc/{}/fd/{}", std::process::id(), self.fd.as_raw_fd())
    }

    /// Whether a process laid the region out; an error if one did with another layout.
    fn ready(&self) -> Result<bool, String> {
        if self.map.u32(header::STATE) != abi::STATE_READY {
            return Ok(false);
        }
        let magic = self.map.bytes(header::MAGIC, 8);
        let version = self.map.u32(header::VERSION);
        let calls = self.map.u32(header::CALLS) as usize;
        let slot_size = self.map.u32(header::SLOT_SIZE) as usize;
        if magic != abi::REGION_MAGIC
            || version != abi::REGION_VERSION
            || calls != CALLS.len()
            || slot_size != abi::slot_size(ROWS)
        {
            return Err(format!(
                "the preload library wrote shared-region layout {version} with {calls} calls; \
                 this fsprof reads layout {} with {} calls (use the library built with it)",
                abi::REGION_VERSION,
                CALLS.len()
            ));
        }
        Ok(true)
    }

    fn claimed_slots(&self) -> Vec<SlotInfo> {
        let cap = self.map.u32(header::SLOTS);
        let n = self.map.u32(header::NEXT_SLOT).min(cap);
        let base = abi::slots_offset(ROWS);
        let size = abi::slot_size(ROWS);
        (0..n)
            .map(|i| (i, base + i as usize * size))
            .filter(|&(_, off)| {
                off + size <= self.map.len() && self.map.u32(off + slot::STATE) == 1
            })
            .map(|(index, offset)| SlotInfo {
                index,
                offset,
                pid: self.map.u32(offset + slot::PID),
            })
            .collect()
    }

    /// The counters of every row (call and descriptor kind, `abi::ROWS`), summed over the
    /// slots and the overflow slot.
    pub fn counts(&self) -> Result<(Vec<CallCounts>, RegionStats), String> {
        let mut out: Vec<CallCounts> = (0..ROWS)
            .map(|_| CallCounts {
                count: 0,
                total: 0,
                buckets: vec![0; abi::BUCKETS],
            })
            .collect();
        if !self.ready()? {
            return Ok((out, RegionStats::default()));
        }
        let mut add = |block: usize| {
            for (c, o) in out.iter_mut().enumerate() {
                let at = |k: usize| self.map.u64(block + (c * COUNTERS_PER_CALL + k) * 8);
                o.count = o.count.wrapping_add(at(0));
                o.total = o.total.wrapping_add(at(1));
                for (b, v) in o.buckets.iter_mut().enumerate() {
                    *v = v.wrapping_add(at(2 + b));
                }
            }
        };
        add(abi::OVERFLOW_OFFSET);
        for s in self.claimed_slots() {
            add(s.offset + abi::SLOT_COUNTERS);
        }
        let stats = RegionStats {
            attaches: self.map.u64(header::ATTACHES),
            slots_claimed: self.map.u32(header::NEXT_SLOT) as u64,
            slot_capacity: self.map.u32(header::SLOTS) as u64,
            overflow_calls: self.map.u64(header::OVERFLOW_CALLS),
        };
        Ok((out, stats))
    }

    /// The user layers (operations `SYS_...`, resolution 1) of the counts: `user`, the calls
    /// on files (and those that take no descriptor), first; then `user@fd:KIND` for the calls
    /// on pipes, sockets, character devices and descriptors of no file type that were made
    /// (`abi::KINDS`), so that their time is not taken for the file system's.
    pub fn user_layers(counts: &[CallCounts]) -> Vec<Layer> {
        let mut layers = vec![Self::user_layer(
            &counts[..CALLS.len().min(counts.len())],
            "user",
        )];
        for (k, kind) in KINDS.iter().enumerate().skip(1) {
            let rows = counts.get(k * CALLS.len()..(k + 1) * CALLS.len());
            let layer = Self::user_layer(rows.unwrap_or(&[]), &format!("user@fd:{kind}"));
            if !layer.ops.is_empty() {
                layers.push(layer);
            }
        }
        layers
    }

    /// The layer `name` of the counts of one kind (one per call, in call-table order).
    pub fn user_layer(counts: &[CallCounts], name: &str) -> Layer {
        let mut layer = Layer::new(name, Resolution::ONE);
        for (spec, c) in CALLS.iter().zip(counts) {
            if c.count == 0 && c.buckets.iter().all(|&b| b == 0) {
                continue;
            }
            let mut op = OpProfile::new(spec.name, abi::BUCKETS, 1);
            op.count = c.count;
            op.total = c.total;
            op.epochs[0].copy_from_slice(&c.buckets);
            layer.ops.push(op);
        }
        // In the order the writer lists them, so the model equals what a reader gets back.
        layer
            .ops
            .sort_by(|a, b| profile_store::ops::listing_order(&a.name, &b.name));
        layer
    }

    /// Writes to the trace file the records left in the buffers of threads whose process has
    /// ended; returns what it did. Threads of processes still running keep theirs (they may
    /// still write them).
    pub fn drain(&self, trace: &Path) -> io::Result<DrainStats> {
        let mut stats = DrainStats {
            chunks_written: self.map.u64(header::CHUNKS),
            write_errors: self.map.u64(header::WRITE_ERRORS),
            untraced_calls: self.map.u64(header::UNTRACED),
            ..DrainStats::default()
        };
        if !self.ready().map_err(io::Error::other)? {
            return Ok(stats);
        }
        let mut file = std::fs::OpenOptions::new().append(true).open(trace)?;
        let buf_off = abi::slot_buffer_offset(ROWS);
        for s in self.claimed_slots() {
            // A thread that died while writing a chunk still has it here (the buffer is
            // emptied only after the write returns): it is written again, and readers take
            // the first complete copy of each (slot, seq).
            let head = self.map.u32(s.offset + slot::HEAD) as usize;
            if head == 0 {
                continue;
            }
            if !sys::process_ended(s.pid) {
                stats.live_slots += 1;
                continue;
            }
            let head = head.min(abi::TRACE_BUFFER);
            let payload = self.map.bytes(s.offset + buf_off, head);
            let h = abi::ChunkHeader {
                kind: abi::CHUNK_RECORDS,
                flags: abi::CHUNK_DRAINED,
                len: head as u32,
                slot: s.index,
                seq: self.map.u32(s.offset + slot::SEQ),
                pid: s.pid,
                tid: self.map.u32(s.offset + slot::TID),
                ppid: self.map.u32(s.offset + slot::PPID),
                origin: self.map.u32(s.offset + slot::ORIGIN) as u8,
                parent_slot: self.map.u32(s.offset + slot::PARENT_SLOT),
                born: self.map.u64(s.offset + slot::BORN),
                base: self.map.u64(s.offset + slot::BASE),
                payload_crc: abi::crc32(0, &payload),
            };
            let mut chunk = h.encode().to_vec();
            chunk.extend_from_slice(&payload);
            file.write_all(&chunk)?;
            stats.chunks_drained += 1;
        }
        Ok(stats)
    }
}

/// What happened to a run's trace chunks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainStats {
    /// Chunks the program's threads wrote themselves.
    pub chunks_written: u64,
    /// Chunks `fsprof run` wrote from the buffers of threads that had ended.
    pub chunks_drained: u64,
    /// Chunks a thread could not write (the trace file could not be opened or was full).
    pub write_errors: u64,
    /// Threads of processes still running when the command ended, whose last records are not
    /// in the trace.
    pub live_slots: u64,
    /// Calls counted in the profile but not traced (made with no slot free, or by a signal
    /// handler that interrupted the library's bookkeeping).
    pub untraced_calls: u64,
}
