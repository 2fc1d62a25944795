//! The log's records: their format (see [`crate::intent`]), encoded and decoded.

/// Bytes of a file one entry covers (aligned).
pub const REGION: u64 = 4 << 20;

const MAGIC: &[u8; 4] = b"RIL2";
/// Records written before appends were marked: each stands alone.
const MAGIC_UNMARKED: &[u8; 4] = b"RIL1";
const HEAD: usize = 4 + 4 + 4;
/// Set in `KIND` on the last record of one append.
const CLOSES: u8 = 0x80;
/// Largest record read back (a partial parity of the largest stripe unit, and a path).
const MAX_RECORD: usize = (64 << 20) + 8192;

/// A record of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Order of writing.
    pub seq: u64,
    /// The file's identity.
    pub id: u64,
    /// Its path from the volume root when the record was made.
    pub path: Vec<u8>,
    /// What is logged.
    pub body: Body,
}

/// What a record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// Bytes `[start, end)` of the file may be torn.
    Region {
        /// First byte.
        start: u64,
        /// Past the last byte.
        end: u64,
    },
    /// Partial parity of a row (see [`crate::part_io::How::Parity`]).
    Parity {
        /// Row.
        row: u64,
        /// The column being written.
        col: u32,
        /// Offset in the unit.
        a: u64,
        /// The XOR of the row's other units over the range.
        pp: Vec<u8>,
    },
    /// Rows being zeroed (see [`crate::part_io::How::Zeros`]).
    Zeros {
        /// First row.
        first: u64,
        /// Past the last row.
        end: u64,
    },
}

impl Record {
    /// The bytes of one append of `records`: the last is marked as closing it, so that an
    /// append cut short (a kill between two of its pages) is read as none of it.
    pub fn append(records: &[Record]) -> Vec<u8> {
        let mut v = Vec::new();
        for (i, r) in records.iter().enumerate() {
            r.encode_into(&mut v, i + 1 == records.len());
        }
        v
    }

    /// Appends the record's bytes to `v`; `closes` marks it as the last of its append.
    fn encode_into(&self, v: &mut Vec<u8>, closes: bool) {
        let at = v.len();
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&[0; 8]); // length and CRC, below
        v.extend_from_slice(&self.seq.to_le_bytes());
        let kind = match self.body {
            Body::Region { .. } => 1,
            Body::Parity { .. } => 2,
            Body::Zeros { .. } => 3,
        };
        v.push(if closes { kind | CLOSES } else { kind });
        v.extend_from_slice(&self.id.to_le_bytes());
        v.extend_from_slice(&(self.path.len() as u16).to_le_bytes());
        v.extend_from_slice(&self.path);
        match &self.body {
            Body::Region { start, end } | Body::Zeros { first: start, end } => {
                v.extend_from_slice(&start.to_le_bytes());
                v.extend_from_slice(&end.to_le_bytes());
            }
            Body::Parity { row, col, a, pp } => {
                v.extend_from_slice(&row.to_le_bytes());
                v.extend_from_slice(&col.to_le_bytes());
                v.extend_from_slice(&a.to_le_bytes());
                v.extend_from_slice(&(pp.len() as u32).to_le_bytes());
                v.extend_from_slice(pp);
            }
        }
        let len = (v.len() - at) as u32;
        v[at + 4..at + 8].copy_from_slice(&len.to_le_bytes());
        let crc = crc32fast::hash(&v[at + HEAD..]);
        v[at + 8..at + 12].copy_from_slice(&crc.to_le_bytes());
    }

    /// Decodes the records of a log, up to the first one that does not check out, less the
    /// records of an append whose last record is not there: that append was cut short, so the
    /// write it announced never started. (A record written before appends were marked,
    /// `RIL1`, stands alone.)
    pub fn decode_all(mut b: &[u8]) -> Vec<Record> {
        let mut out = Vec::new();
        let mut whole = 0;
        while let Some((r, len, closes)) = Record::decode(b) {
            out.push(r);
            if closes {
                whole = out.len();
            }
            b = &b[len..];
        }
        out.truncate(whole);
        out
    }

    /// One record at the start of `b`, its length, and whether it closes its append.
    fn decode(b: &[u8]) -> Option<(Record, usize, bool)> {
        if b.len() < HEAD {
            return None;
        }
        let marked = match &b[..4] {
            m if m == MAGIC => true,
            m if m == MAGIC_UNMARKED => false,
            _ => return None,
        };
        let len = u32::from_le_bytes(b[4..8].try_into().ok()?) as usize;
        if len < HEAD || len > b.len() || len > MAX_RECORD {
            return None;
        }
        let crc = u32::from_le_bytes(b[8..12].try_into().ok()?);
        if crc32fast::hash(&b[HEAD..len]) != crc {
            return None;
        }
        let mut r = Reader(&b[HEAD..len]);
        let seq = r.u64()?;
        let kind = r.bytes(1)?[0];
        let (kind, closes) = (kind & !CLOSES, !marked || kind & CLOSES != 0);
        let id = r.u64()?;
        let plen = u16::from_le_bytes(r.bytes(2)?.try_into().ok()?) as usize;
        let path = r.bytes(plen)?.to_vec();
        let body = match kind {
            1 => Body::Region {
                start: r.u64()?,
                end: r.u64()?,
            },
            2 => {
                let row = r.u64()?;
                let col = u32::from_le_bytes(r.bytes(4)?.try_into().ok()?);
                let a = r.u64()?;
                let n = u32::from_le_bytes(r.bytes(4)?.try_into().ok()?) as usize;
                Body::Parity {
                    row,
                    col,
                    a,
                    pp: r.bytes(n)?.to_vec(),
                }
            }
            3 => Body::Zeros {
                first: r.u64()?,
                end: r.u64()?,
            },
            _ => return None,
        };
        Some((
            Record {
                seq,
                id,
                path,
                body,
            },
            len,
            closes,
        ))
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let (a, b) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = b;
        Some(a)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes(8)?.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(seq: u64) -> Record {
        Record {
            seq,
            id: 0x1234,
            path: b"d/f".to_vec(),
            body: Body::Region {
                start: 0,
                end: REGION,
            },
        }
    }

    fn parity(seq: u64) -> Record {
        Record {
            seq,
            id: 0x99,
            path: b"x".to_vec(),
            body: Body::Parity {
                row: 3,
                col: 1,
                a: 512,
                pp: vec![1, 2, 3, 4, 5],
            },
        }
    }

    #[test]
    fn records_round_trip_and_a_torn_tail_ends_the_log() {
        let (a, b) = (region(7), parity(8));
        let z = Record {
            seq: 9,
            id: 0x99,
            path: b"x".to_vec(),
            body: Body::Zeros { first: 2, end: 40 },
        };
        let mut log = Record::append(std::slice::from_ref(&a));
        log.extend_from_slice(&Record::append(std::slice::from_ref(&b)));
        let two = log.len();
        log.extend_from_slice(&Record::append(std::slice::from_ref(&z)));
        assert_eq!(
            Record::decode_all(&log),
            vec![a.clone(), b.clone(), z.clone()]
        );
        log.truncate(two);
        // Cut anywhere inside the second record: the first is all that is read.
        let first = Record::append(std::slice::from_ref(&a)).len();
        for cut in first..log.len() {
            assert_eq!(
                Record::decode_all(&log[..cut]),
                vec![a.clone()],
                "cut {cut}"
            );
        }
        // A flipped byte fails the CRC.
        let mut bad = log.clone();
        bad[first + 20] ^= 1;
        assert_eq!(Record::decode_all(&bad), vec![a]);
        assert!(Record::decode_all(b"garbage").is_empty());
    }

    /// A region and its partial parity go in one append; a kill that cuts it after the
    /// region (a write of two pages stops between them) leaves none of it, where the region
    /// alone used to be kept by a degraded replay that had nothing to rebuild its rows with.
    #[test]
    fn an_append_cut_short_is_read_as_none_of_it() {
        let a = region(1);
        let mut log = Record::append(std::slice::from_ref(&a));
        let first = log.len();
        let pair = Record::append(&[region(2), parity(3)]);
        log.extend_from_slice(&pair);
        assert_eq!(
            Record::decode_all(&log),
            vec![a.clone(), region(2), parity(3)]
        );
        for cut in first..log.len() {
            assert_eq!(
                Record::decode_all(&log[..cut]),
                vec![a.clone()],
                "cut {cut}"
            );
        }
    }

    /// A log written before appends were marked (no record closes one) is read up to its
    /// first bad record, as it was.
    #[test]
    fn a_log_without_marks_is_read_up_to_its_first_bad_record() {
        let mut log = Vec::new();
        for r in [region(1), region(2), parity(3)] {
            let at = log.len();
            r.encode_into(&mut log, false);
            log[at..at + 4].copy_from_slice(MAGIC_UNMARKED);
        }
        assert_eq!(
            Record::decode_all(&log),
            vec![region(1), region(2), parity(3)]
        );
        let cut = log.len() - 3;
        assert_eq!(Record::decode_all(&log[..cut]), vec![region(1), region(2)]);
    }
}
