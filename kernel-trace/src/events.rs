//! The tracepoints this crate records, their fields (offsets read from tracefs), and the
//! decoding of one perf ring record into an [`Event`].

use std::path::Path;

use crate::error::Refusal;
use crate::tracefs::{Field, Format, read_uint};

/// One decoded tracepoint hit, timed in nanoseconds of [`crate::sys::CLOCK`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// `fuse:fuse_request_send`.
    FuseSend {
        /// Time.
        t: u64,
        /// The connection (kernel-encoded device number).
        conn: u32,
        /// The request's id.
        unique: u64,
        /// Its FUSE opcode.
        opcode: u32,
    },
    /// `fuse:fuse_request_end`.
    FuseEnd {
        /// Time.
        t: u64,
        /// The connection (kernel-encoded device number).
        conn: u32,
        /// The request's id.
        unique: u64,
        /// The answer's error (negative errno, 0 for success).
        error: i32,
    },
    /// `block:block_rq_issue`.
    Issue {
        /// Time.
        t: u64,
        /// Kernel-encoded device.
        dev: u32,
        /// Start sector.
        sector: u64,
        /// Sectors.
        sectors: u32,
        /// Operation-table index ([`crate::block::op_of`]).
        op: usize,
    },
    /// `block:block_rq_complete`.
    Complete {
        /// Time.
        t: u64,
        /// Kernel-encoded device.
        dev: u32,
        /// Start sector of what completed.
        sector: u64,
        /// Sectors completed.
        sectors: u32,
        /// Negative errno, 0 for success.
        error: i32,
    },
}

impl Event {
    /// When it happened.
    pub fn time(&self) -> u64 {
        match *self {
            Event::FuseSend { t, .. }
            | Event::FuseEnd { t, .. }
            | Event::Issue { t, .. }
            | Event::Complete { t, .. } => t,
        }
    }
}

/// The fields of `fuse:fuse_request_send` and `fuse:fuse_request_end` used here.
#[derive(Debug, Clone)]
pub struct FuseFormats {
    /// The send tracepoint.
    pub send: Format,
    /// The end tracepoint.
    pub end: Format,
    send_conn: Field,
    send_unique: Field,
    send_opcode: Field,
    end_conn: Field,
    end_unique: Field,
    end_error: Field,
}

/// The fields of `block:block_rq_issue` and `block:block_rq_complete` used here.
#[derive(Debug, Clone)]
pub struct BlockFormats {
    /// The issue tracepoint.
    pub issue: Format,
    /// The completion tracepoint.
    pub complete: Format,
    issue_dev: Field,
    issue_sector: Field,
    issue_sectors: Field,
    issue_rwbs: Field,
    complete_dev: Field,
    complete_sector: Field,
    complete_sectors: Field,
    complete_error: Field,
}

impl FuseFormats {
    /// Reads both tracepoints' formats from tracefs at `root`.
    pub fn read(root: &Path) -> Result<FuseFormats, Refusal> {
        let send = Format::read(root, "fuse", "fuse_request_send")?;
        let end = Format::read(root, "fuse", "fuse_request_end")?;
        Ok(FuseFormats {
            send_conn: send.field("connection", &[4])?,
            end_conn: end.field("connection", &[4])?,
            send_unique: send.field("unique", &[8])?,
            send_opcode: send.field("opcode", &[4])?,
            end_unique: end.field("unique", &[8])?,
            end_error: end.field("error", &[4])?,
            send,
            end,
        })
    }
}

impl BlockFormats {
    /// Reads both tracepoints' formats from tracefs at `root`.
    pub fn read(root: &Path) -> Result<BlockFormats, Refusal> {
        let issue = Format::read(root, "block", "block_rq_issue")?;
        let complete = Format::read(root, "block", "block_rq_complete")?;
        Ok(BlockFormats {
            issue_dev: issue.field("dev", &[4])?,
            issue_sector: issue.field("sector", &[8])?,
            issue_sectors: issue.field("nr_sector", &[4])?,
            issue_rwbs: issue.field("rwbs", &[8, 10, 16])?,
            complete_dev: complete.field("dev", &[4])?,
            complete_sector: complete.field("sector", &[8])?,
            complete_sectors: complete.field("nr_sector", &[4])?,
            complete_error: complete.field("error", &[4])?,
            issue,
            complete,
        })
    }
}

/// Decodes raw tracepoint records by their `common_type` (the tracepoint id in their first
/// two bytes).
#[derive(Debug, Clone)]
pub struct Decoder {
    fuse: Option<FuseFormats>,
    block: Option<BlockFormats>,
}

impl Decoder {
    /// A decoder for the tracepoints given.
    pub fn new(fuse: Option<FuseFormats>, block: Option<BlockFormats>) -> Decoder {
        Decoder { fuse, block }
    }

    /// The event in `raw` (a sample's raw data) taken at `t`; `None` for a record of another
    /// tracepoint or one too short for its fields.
    pub fn decode(&self, t: u64, raw: &[u8]) -> Option<Event> {
        let id = u16::from_ne_bytes([*raw.first()?, *raw.get(1)?]) as u64;
        if let Some(f) = &self.fuse {
            if id == f.send.id {
                return Some(Event::FuseSend {
                    t,
                    conn: read_uint(raw, f.send_conn)? as u32,
                    unique: read_uint(raw, f.send_unique)?,
                    opcode: read_uint(raw, f.send_opcode)? as u32,
                });
            }
            if id == f.end.id {
                return Some(Event::FuseEnd {
                    t,
                    conn: read_uint(raw, f.end_conn)? as u32,
                    unique: read_uint(raw, f.end_unique)?,
                    error: read_uint(raw, f.end_error)? as u32 as i32,
                });
            }
        }
        if let Some(b) = &self.block {
            if id == b.issue.id {
                let rwbs = raw.get(b.issue_rwbs.offset..b.issue_rwbs.offset + b.issue_rwbs.size)?;
                return Some(Event::Issue {
                    t,
                    dev: read_uint(raw, b.issue_dev)? as u32,
                    sector: read_uint(raw, b.issue_sector)?,
                    sectors: read_uint(raw, b.issue_sectors)? as u32,
                    op: crate::block::op_of(rwbs),
                });
            }
            if id == b.complete.id {
                return Some(Event::Complete {
                    t,
                    dev: read_uint(raw, b.complete_dev)? as u32,
                    sector: read_uint(raw, b.complete_sector)?,
                    sectors: read_uint(raw, b.complete_sectors)? as u32,
                    error: read_uint(raw, b.complete_error)? as u32 as i32,
                });
            }
        }
        None
    }
}

/// One record of a perf ring, as [`read_records`] hands it out.
#[derive(Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// A sample (`PERF_SAMPLE_TIME | PERF_SAMPLE_RAW`): its time and raw tracepoint data.
    Sample {
        /// Time.
        t: u64,
        /// The tracepoint's record.
        raw: &'a [u8],
    },
    /// `PERF_RECORD_LOST`: this many records did not fit in the ring.
    Lost(u64),
    /// Any other record type.
    Other,
}

/// Parses one whole record (`perf_event_header` first).
pub fn parse_record(rec: &[u8]) -> Record<'_> {
    let u32_at = |o: usize| {
        rec.get(o..o + 4)
            .map(|b| u32::from_ne_bytes(b.try_into().unwrap()))
    };
    let u64_at = |o: usize| {
        rec.get(o..o + 8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
    };
    let Some(kind) = u32_at(0) else {
        return Record::Other;
    };
    match kind {
        perf_event_open_sys::bindings::PERF_RECORD_SAMPLE => {
            let (Some(t), Some(n)) = (u64_at(8), u32_at(16)) else {
                return Record::Other;
            };
            match rec.get(20..20 + n as usize) {
                Some(raw) => Record::Sample { t, raw },
                None => Record::Other,
            }
        }
        perf_event_open_sys::bindings::PERF_RECORD_LOST => Record::Lost(u64_at(16).unwrap_or(0)),
        _ => Record::Other,
    }
}

/// Reads every record published in `ring` (from its tail to its head), hands each to `f`,
/// and gives the space back to the kernel. `buf` is scratch space, kept between calls.
pub fn read_records(ring: &mut crate::sys::Ring, buf: &mut Vec<u8>, mut f: impl FnMut(Record<'_>)) {
    let head = ring.head();
    let mut tail = ring.tail();
    let mut hdr = [0u8; 8];
    while head.wrapping_sub(tail) >= 8 {
        ring.copy(tail, &mut hdr);
        let size = u16::from_ne_bytes([hdr[6], hdr[7]]) as u64;
        if size < 8 || head.wrapping_sub(tail) < size {
            // A torn or impossible header: skip what is published rather than loop.
            log::warn!("kernel trace: bad record header (size {size}); skipped to the head");
            tail = head;
            break;
        }
        buf.resize(size as usize, 0);
        ring.copy(tail, buf);
        f(parse_record(buf));
        tail = tail.wrapping_add(size);
    }
    ring.set_tail(tail);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: u64, raw: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        let size = (8 + 8 + 4 + raw.len()).next_multiple_of(8);
        r.extend_from_slice(&perf_event_open_sys::bindings::PERF_RECORD_SAMPLE.to_ne_bytes());
        r.extend_from_slice(&0u16.to_ne_bytes());
        r.extend_from_slice(&(size as u16).to_ne_bytes());
        r.extend_from_slice(&t.to_ne_bytes());
        r.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
        r.extend_from_slice(raw);
        r.resize(size, 0);
        r
    }

    #[test]
    fn samples_and_lost_records_parse() {
        let raw = [1u8, 2, 3, 4, 5];
        let r = sample(77, &raw);
        assert_eq!(parse_record(&r), Record::Sample { t: 77, raw: &raw });
        let mut lost = vec![0u8; 24];
        lost[0..4].copy_from_slice(&perf_event_open_sys::bindings::PERF_RECORD_LOST.to_ne_bytes());
        lost[16..24].copy_from_slice(&9u64.to_ne_bytes());
        assert_eq!(parse_record(&lost), Record::Lost(9));
        assert_eq!(parse_record(&r[..12]), Record::Other);
        assert_eq!(parse_record(&[]), Record::Other);
    }

    const SEND: &str = "ID: 1293\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:dev_t connection;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:uint64_t unique;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:enum fuse_opcode opcode;\toffset:24;\tsize:4;\tsigned:0;\n";
    const END: &str = "ID: 1292\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:dev_t connection;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:uint64_t unique;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:uint32_t len;\toffset:24;\tsize:4;\tsigned:0;\n\tfield:int32_t error;\toffset:28;\tsize:4;\tsigned:1;\n";

    #[test]
    fn fuse_records_decode_by_their_type() {
        let send = Format::parse("fuse:fuse_request_send", SEND).unwrap();
        let end = Format::parse("fuse:fuse_request_end", END).unwrap();
        let f = FuseFormats {
            send_conn: send.field("connection", &[4]).unwrap(),
            end_conn: end.field("connection", &[4]).unwrap(),
            send_unique: send.field("unique", &[8]).unwrap(),
            send_opcode: send.field("opcode", &[4]).unwrap(),
            end_unique: end.field("unique", &[8]).unwrap(),
            end_error: end.field("error", &[4]).unwrap(),
            send,
            end,
        };
        let d = Decoder::new(Some(f), None);
        let mut raw = vec![0u8; 36];
        raw[0..2].copy_from_slice(&1293u16.to_ne_bytes());
        raw[8..12].copy_from_slice(&300u32.to_ne_bytes());
        raw[16..24].copy_from_slice(&42u64.to_ne_bytes());
        raw[24..28].copy_from_slice(&15u32.to_ne_bytes());
        assert_eq!(
            d.decode(5, &raw),
            Some(Event::FuseSend {
                t: 5,
                conn: 300,
                unique: 42,
                opcode: 15
            })
        );
        raw[0..2].copy_from_slice(&1292u16.to_ne_bytes());
        raw[28..32].copy_from_slice(&(-2i32).to_ne_bytes());
        assert_eq!(
            d.decode(6, &raw),
            Some(Event::FuseEnd {
                t: 6,
                conn: 300,
                unique: 42,
                error: -2
            })
        );
        raw[0..2].copy_from_slice(&1u16.to_ne_bytes());
        assert_eq!(d.decode(6, &raw), None);
        assert_eq!(d.decode(6, &raw[..1]), None);
    }
}
