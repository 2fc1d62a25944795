//! Reading a trace as a stream, chunk by chunk, in bounded memory (a window of at most a few
//! chunks, whatever the file's size), checking every chunk and saying what was wrong.
//!
//! * A chunk cut short by the end of the file is a **torn tail** (the program or fsprof was
//!   killed while writing it): reported with its offset; everything before it is read.
//! * A chunk whose header or payload checksum fails, with data after it, is **damaged** (a
//!   write cut short in the middle of the file): skipped, and the reader resynchronizes on the
//!   next valid chunk header.
//! * A chunk seen twice (same slot and sequence number: a thread died while writing it and
//!   `fsprof run` wrote it again from shared memory) is read once.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::abi::{self, CHUNK_HEADER, ChunkHeader};
use crate::error::Error;
use crate::trace::header::TraceHeader;
use crate::trace::names::{Image, MAX_IMAGES};
use crate::trace::record::{Record, Records};

/// Bytes read from the file at a time.
const BLOCK: usize = 256 * 1024;
/// Slots whose sequence numbers are remembered for de-duplication (a bound on memory for
/// crafted files; real traces have one entry per traced thread).
const MAX_TRACKED_SLOTS: usize = 1 << 20;

/// One chunk: one thread's records, in order.
#[derive(Debug, Clone)]
pub struct Chunk {
    /// The chunk header.
    pub header: ChunkHeader,
    /// Offset of the chunk in the file.
    pub offset: u64,
    /// The encoded records.
    pub payload: Vec<u8>,
}

impl Chunk {
    /// The chunk's records.
    pub fn records(&self) -> Records<'_> {
        Records::new(&self.payload, self.header.base)
    }
}

/// What reading found besides the records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadReport {
    /// Chunks read.
    pub chunks: u64,
    /// Records read.
    pub records: u64,
    /// Bytes of the file, header included, up to where reading stopped.
    pub bytes: u64,
    /// Chunks read twice and taken once.
    pub duplicates: u64,
    /// Damaged stretches skipped.
    pub damaged: u64,
    /// Bytes skipped in them.
    pub damaged_bytes: u64,
    /// Offset of the first damaged stretch.
    pub first_damage: Option<u64>,
    /// Chunks whose payload did not decode after a good checksum (a writer of another build).
    pub undecodable: u64,
    /// An incomplete chunk at the end: its offset and the bytes present.
    pub torn_tail: Option<(u64, u64)>,
    /// Process images read (see [`TraceReader::images`]).
    pub images: u64,
}

impl ReadReport {
    /// One line per problem found, empty when the trace was read whole.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some((off, n)) = self.torn_tail {
            out.push(format!(
                "torn tail at offset {off}: {n} bytes of an incomplete chunk (the writer was \
                 interrupted); everything before it was read"
            ));
        }
        if self.damaged > 0 {
            out.push(format!(
                "{} damaged stretch(es), {} bytes skipped, the first at offset {}",
                self.damaged,
                self.damaged_bytes,
                self.first_damage.unwrap_or(0)
            ));
        }
        if self.undecodable > 0 {
            out.push(format!(
                "{} chunk(s) with records this fsprof cannot decode",
                self.undecodable
            ));
        }
        out
    }
}

/// A trace file read as a stream of chunks.
pub struct TraceReader<R: Read = File> {
    path: PathBuf,
    inner: R,
    header: TraceHeader,
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
    /// File offset of `buf[pos]`.
    offset: u64,
    next_seq: HashMap<u32, u32>,
    images: Vec<Image>,
    report: ReadReport,
}

impl TraceReader<File> {
    /// Opens a trace file and checks its header (another version is refused).
    pub fn open(path: &Path) -> Result<TraceReader<File>, Error> {
        let f = profile_store::open::regular(path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        TraceReader::new(f, path)
    }
}

impl<R: Read> TraceReader<R> {
    /// Reads the header from `inner`; `path` names it in errors.
    pub fn new(mut inner: R, path: &Path) -> Result<TraceReader<R>, Error> {
        let (header, len) = TraceHeader::read(&mut inner, path)?;
        Ok(TraceReader {
            path: path.to_path_buf(),
            inner,
            header,
            buf: Vec::with_capacity(BLOCK),
            pos: 0,
            eof: false,
            offset: len,
            next_seq: HashMap::new(),
            images: Vec::new(),
            report: ReadReport {
                bytes: len,
                ..ReadReport::default()
            },
        })
    }

    /// The file header.
    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// What reading found so far.
    pub fn report(&self) -> &ReadReport {
        &self.report
    }

    /// The process images read so far (the first [`MAX_IMAGES`]; none in a version 1 trace).
    pub fn images(&self) -> &[Image] {
        &self.images
    }

    fn avail(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Makes at least `n` bytes available unless the file ends first.
    fn fill(&mut self, n: usize) -> Result<(), Error> {
        while self.avail() < n && !self.eof {
            if self.pos > 0 {
                self.buf.drain(..self.pos);
                self.pos = 0;
            }
            let old = self.buf.len();
            self.buf.resize(old + BLOCK.max(n - old), 0);
            let got = crate::trace::header::read_full(&mut self.inner, &mut self.buf[old..])
                .map_err(|e| Error::io(format!("reading {}", self.path.display()), e))?;
            self.buf.truncate(old + got);
            if got == 0 {
                self.eof = true;
            }
        }
        Ok(())
    }

    fn consume(&mut self, n: usize) {
        self.pos += n;
        self.offset += n as u64;
        self.report.bytes += n as u64;
    }

    /// Skips a damaged stretch starting at the current position, up to the next offset that
    /// holds a valid chunk header (or the end).
    fn resync(&mut self) -> Result<(), Error> {
        let start = self.offset;
        self.consume(1);
        let magic = abi::CHUNK_MAGIC.to_le_bytes();
        loop {
            self.fill(CHUNK_HEADER)?;
            let window = &self.buf[self.pos..];
            match window.windows(4).position(|w| w == magic) {
                Some(i) => {
                    self.consume(i);
                    self.fill(CHUNK_HEADER)?;
                    if self.avail() < CHUNK_HEADER || self.header_at_pos().is_some() {
                        break;
                    }
                    self.consume(1);
                }
                None if self.eof => {
                    let n = self.avail();
                    self.consume(n);
                    break;
                }
                None => {
                    let n = self.avail().saturating_sub(3);
                    self.consume(n);
                }
            }
        }
        self.report.damaged += 1;
        self.report.damaged_bytes += self.offset - start;
        self.report.first_damage.get_or_insert(start);
        Ok(())
    }

    fn header_at_pos(&self) -> Option<ChunkHeader> {
        let b: &[u8; CHUNK_HEADER] = self
            .buf
            .get(self.pos..self.pos + CHUNK_HEADER)?
            .try_into()
            .ok()?;
        ChunkHeader::decode(b).filter(|h| match h.kind {
            abi::CHUNK_RECORDS => h.len as usize <= abi::TRACE_BUFFER,
            abi::CHUNK_IMAGE => h.len as usize <= abi::IMAGE_PAYLOAD,
            _ => false,
        })
    }

    /// The next chunk of records, `None` at the end of the trace (see
    /// [`TraceReader::report`] for a torn tail or damage). Image chunks are kept aside
    /// ([`TraceReader::images`]).
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, Error> {
        loop {
            self.fill(CHUNK_HEADER)?;
            let avail = self.avail();
            if avail == 0 {
                return Ok(None);
            }
            if avail < CHUNK_HEADER {
                self.report.torn_tail = Some((self.offset, avail as u64));
                self.consume(avail);
                return Ok(None);
            }
            let Some(h) = self.header_at_pos() else {
                self.resync()?;
                continue;
            };
            let total = CHUNK_HEADER + h.len as usize;
            self.fill(total)?;
            if self.avail() < total {
                // Only the end of the file can cut a chunk whose header is intact.
                let n = self.avail();
                self.report.torn_tail = Some((self.offset, n as u64));
                self.consume(n);
                return Ok(None);
            }
            let payload = &self.buf[self.pos + CHUNK_HEADER..self.pos + total];
            if abi::crc32(0, payload) != h.payload_crc {
                self.resync()?;
                continue;
            }
            let chunk = Chunk {
                header: h,
                offset: self.offset,
                payload: payload.to_vec(),
            };
            self.consume(total);
            if h.kind == abi::CHUNK_IMAGE {
                match Image::decode(&h, &chunk.payload) {
                    Some(i) => {
                        self.report.images += 1;
                        if self.images.len() < MAX_IMAGES {
                            self.images.push(i);
                        }
                    }
                    None => self.report.undecodable += 1,
                }
                continue;
            }
            let tracked = self.next_seq.len() < MAX_TRACKED_SLOTS;
            match self.next_seq.get_mut(&h.slot) {
                Some(next) if h.seq < *next => {
                    self.report.duplicates += 1;
                    continue;
                }
                Some(next) => *next = h.seq + 1,
                None if tracked => {
                    self.next_seq.insert(h.slot, h.seq + 1);
                }
                None => {}
            }
            self.report.chunks += 1;
            return Ok(Some(chunk));
        }
    }

    /// Calls `f` with every record of the trace, in file order (each thread's records in
    /// order; threads interleaved by chunk), with the header of its chunk.
    pub fn for_each_record(
        &mut self,
        mut f: impl FnMut(&ChunkHeader, &Record),
    ) -> Result<(), Error> {
        let mut rec = Record::default();
        while let Some(chunk) = self.next_chunk()? {
            let mut it = chunk.records();
            loop {
                match it.next_into(&mut rec) {
                    Ok(true) => {
                        self.report.records += 1;
                        f(&chunk.header, &rec);
                    }
                    Ok(false) => break,
                    Err(_) => {
                        self.report.undecodable += 1;
                        break;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{id, put_varint, zigzag};

    fn header() -> Vec<u8> {
        TraceHeader {
            cycles_per_sec: 1_000_000_000,
            ref_cycles: 0,
            ref_mono_ns: 0,
            ref_unix_ns: 0,
            clock: profile_store::ClockKind::Ns,
            invariant_tsc: None,
            root: "/r".into(),
            argv: vec!["x".into()],
        }
        .encode()
    }

    /// A chunk of `n` close(fd) records of slot `slot`, sequence `seq`.
    fn chunk(slot: u32, seq: u32, n: usize) -> Vec<u8> {
        let mut payload = Vec::new();
        for i in 0..n {
            for v in [id::CLOSE as u64, zigzag(10), 5, 0, zigzag(i as i64)] {
                let mut b = [0u8; 10];
                let k = put_varint(&mut b, v);
                payload.extend_from_slice(&b[..k]);
            }
        }
        let h = ChunkHeader {
            kind: abi::CHUNK_RECORDS,
            len: payload.len() as u32,
            slot,
            seq,
            pid: 7,
            tid: 7,
            parent_slot: u32::MAX,
            base: 100,
            payload_crc: abi::crc32(0, &payload),
            ..ChunkHeader::default()
        };
        let mut out = h.encode().to_vec();
        out.extend(payload);
        out
    }

    fn read_all(bytes: &[u8]) -> (u64, ReadReport) {
        let mut r = TraceReader::new(bytes, Path::new("t")).unwrap();
        let mut n = 0;
        r.for_each_record(|_, _| n += 1).unwrap();
        (n, r.report().clone())
    }

    #[test]
    fn reads_every_chunk_and_takes_a_duplicate_once() {
        let mut f = header();
        f.extend(chunk(0, 0, 3));
        f.extend(chunk(1, 0, 2));
        f.extend(chunk(0, 1, 4));
        f.extend(chunk(0, 1, 4));
        let (n, rep) = read_all(&f);
        assert_eq!(n, 9);
        assert_eq!(rep.duplicates, 1);
        assert!(rep.problems().is_empty(), "{:?}", rep.problems());
        assert_eq!(rep.bytes, f.len() as u64);
    }

    #[test]
    fn a_torn_tail_is_reported_and_what_precedes_it_is_read() {
        let mut f = header();
        f.extend(chunk(0, 0, 3));
        let good = f.len();
        f.extend(chunk(0, 1, 50));
        for cut in [good + 1, good + 30, good + 64, good + 100, f.len() - 1] {
            let (n, rep) = read_all(&f[..cut]);
            assert_eq!(n, 3, "cut at {cut}");
            assert_eq!(
                rep.torn_tail,
                Some((good as u64, (cut - good) as u64)),
                "cut at {cut}"
            );
            assert!(rep.problems()[0].starts_with("torn tail at offset"));
        }
    }

    #[test]
    fn a_damaged_chunk_in_the_middle_is_skipped_and_reading_resumes() {
        let mut f = header();
        f.extend(chunk(0, 0, 3));
        let start = f.len();
        // A chunk cut short by an interrupted write, then another thread's chunk after it.
        let torn = chunk(1, 0, 40);
        f.extend_from_slice(&torn[..torn.len() / 2]);
        f.extend(chunk(2, 0, 5));
        f.extend(chunk(0, 1, 1));
        let (n, rep) = read_all(&f);
        assert_eq!(n, 9);
        assert_eq!(rep.damaged, 1);
        assert_eq!(rep.first_damage, Some(start as u64));
        assert_eq!(rep.damaged_bytes, (torn.len() / 2) as u64);
        assert_eq!(rep.torn_tail, None);
    }

    #[test]
    fn memory_stays_bounded_on_a_long_stream() {
        // 200 MB of chunks through the reader without holding them.
        struct Gen {
            header: Vec<u8>,
            chunk: Vec<u8>,
            sent: usize,
            total: usize,
        }
        impl Read for Gen {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                if self.sent >= self.total {
                    return Ok(0);
                }
                let all_h = self.header.len();
                let n = if self.sent < all_h {
                    let n = out.len().min(all_h - self.sent);
                    out[..n].copy_from_slice(&self.header[self.sent..self.sent + n]);
                    n
                } else {
                    let at = (self.sent - all_h) % self.chunk.len();
                    let n = out.len().min(self.chunk.len() - at);
                    out[..n].copy_from_slice(&self.chunk[at..at + n]);
                    n
                };
                self.sent += n;
                Ok(n)
            }
        }
        // Every copy is a duplicate of slot 0 seq 0 except the first: still streamed.
        let c = chunk(0, 0, 4000);
        let copies = 200 * 1024 * 1024 / c.len();
        let h = header();
        let total = h.len() + copies * c.len();
        let mut r = TraceReader::new(
            Gen {
                header: h,
                chunk: c,
                sent: 0,
                total,
            },
            Path::new("big"),
        )
        .unwrap();
        let mut chunks = 0;
        while r.next_chunk().unwrap().is_some() {
            chunks += 1;
        }
        assert_eq!(chunks, 1);
        assert_eq!(r.report().duplicates, copies as u64 - 1);
        assert_eq!(r.report().bytes, total as u64);
        // The window only grows, so its final capacity is the most it ever held.
        assert!(r.buf.capacity() <= 4 * BLOCK, "{}", r.buf.capacity());
    }
}
