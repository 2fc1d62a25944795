//! The log's records: their format (see [`crate::intent`]), encoded and decoded.

/// Bytes of a file one entry covers (aligned).
pub const REGION: u64 = 4 << 20;

const MAGIC: &[u8; 4] = b"RIL1";
const HEAD: usize = 4 + 4 + 4;
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
    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(64 + self.path.len());
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&[0; 8]); // length and CRC, below
        v.extend_from_slice(&self.seq.to_le_bytes());
        v.push(match self.body {
            Body::Region { .. } => 1,
            Body::Parity { .. } => 2,
            Body::Zeros { .. } => 3,
        });
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
        let len = v.len() as u32;
        v[4..8].copy_from_slice(&len.to_le_bytes());
        let crc = crc32fast::hash(&v[HEAD..]);
        v[8..12].copy_from_slice(&crc.to_le_bytes());
        v
    }

    /// Decodes the records of a log, up to the first one that does not check out.
    pub fn decode_all(mut b: &[u8]) -> Vec<Record> {
        let mut out = Vec::new();
        while let Some((r, len)) = Record::decode(b) {
            out.push(r);
            b = &b[len..];
        }
        out
    }

    /// One record at the start of `b`, and its length.
    fn decode(b: &[u8]) -> Option<(Record, usize)> {
        if b.len() < HEAD || &b[..4] != MAGIC {
            return None;
        }
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

    #[test]
    fn records_round_trip_and_a_torn_tail_ends_the_log() {
        let a = Record {
            seq: 7,
            id: 0x1234,
            path: b"d/f".to_vec(),
            body: Body::Region {
                start: 0,
                end: REGION,
            },
        };
        let b = Record {
            seq: 8,
            id: 0x99,
            path: b"x".to_vec(),
            body: Body::Parity {
                row: 3,
                col: 1,
                a: 512,
                pp: vec![1, 2, 3, 4, 5],
            },
        };
        let z = Record {
            seq: 9,
            id: 0x99,
            path: b"x".to_vec(),
            body: Body::Zeros { first: 2, end: 40 },
        };
        let mut log = a.encode();
        log.extend_from_slice(&b.encode());
        log.extend_from_slice(&z.encode());
        assert_eq!(
            Record::decode_all(&log),
            vec![a.clone(), b.clone(), z.clone()]
        );
        log.truncate(log.len() - z.encode().len());
        // Cut anywhere inside the second record: the first is all that is read.
        let first = a.encode().len();
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
}
