//! The trace file header: written by `fsprof run` before the program starts, it says how to
//! turn the records' clock readings into time, and where and how the program was started.
//!
//! ```text
//! "FSPTRACE" version:u32 header-len:u32 cycles-per-sec:u64 ref-cycles:u64 ref-mono-ns:u64
//! ref-unix-ns:u64 clock:u8 invariant:u8 pad:u16 root-len:u32 root argc:u32
//! *(arg-len:u32 arg) header-crc:u32
//! ```
//!
//! `clock`: 0 tsc, 1 cntvct, 2 ns. `invariant`: 0 no, 1 yes, 2 unknown. `header-len` counts
//! every byte from the magic to the CRC, which covers the bytes before it.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use profile_store::{ClockInfo, ClockKind};

use crate::abi;
use crate::error::Error;

/// Largest header accepted (a sanity bound; a real one is the size of a command line).
const MAX_HEADER: usize = 16 << 20;

/// A trace's file header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceHeader {
    /// Counter ticks per second.
    pub cycles_per_sec: u64,
    /// A counter reading...
    pub ref_cycles: u64,
    /// ...and `CLOCK_MONOTONIC` at the same moment (the program's start).
    pub ref_mono_ns: u64,
    /// ...and the wall clock, nanoseconds since the Unix epoch.
    pub ref_unix_ns: u64,
    /// The counter the records were timed with.
    pub clock: ClockKind,
    /// Whether the TSC was invariant (`None`: unknown or not a TSC).
    pub invariant_tsc: Option<bool>,
    /// The directory the program started in (the default root of a replay).
    pub root: PathBuf,
    /// The command line.
    pub argv: Vec<OsString>,
}

impl TraceHeader {
    /// A header for a program starting now in `root` with `argv`, with this process's clock.
    pub fn now(root: &Path, argv: &[OsString]) -> TraceHeader {
        let info = ClockInfo::get();
        let ref_cycles = profile_store::clock::now();
        let ref_mono_ns = crate::sys::monotonic_ns();
        let ref_unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        TraceHeader {
            cycles_per_sec: info.cycles_per_sec,
            ref_cycles,
            ref_mono_ns,
            ref_unix_ns,
            clock: info.kind,
            invariant_tsc: info.invariant_tsc,
            root: root.to_path_buf(),
            argv: argv.to_vec(),
        }
    }

    /// Nanoseconds from the reference point to clock reading `cycles` (negative before it).
    pub fn ns_since_start(&self, cycles: u64) -> i64 {
        let d = cycles.wrapping_sub(self.ref_cycles) as i64;
        (d as i128 * 1_000_000_000 / self.cycles_per_sec.max(1) as i128) as i64
    }

    /// A number of cycles in nanoseconds.
    pub fn cycles_to_ns(&self, cycles: u64) -> u64 {
        (cycles as u128 * 1_000_000_000 / self.cycles_per_sec.max(1) as u128) as u64
    }

    /// The encoded header.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(128);
        b.extend_from_slice(&abi::TRACE_MAGIC);
        b.extend_from_slice(&abi::TRACE_VERSION.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes()); // length, patched below
        b.extend_from_slice(&self.cycles_per_sec.to_le_bytes());
        b.extend_from_slice(&self.ref_cycles.to_le_bytes());
        b.extend_from_slice(&self.ref_mono_ns.to_le_bytes());
        b.extend_from_slice(&self.ref_unix_ns.to_le_bytes());
        b.push(match self.clock {
            ClockKind::Tsc => 0,
            ClockKind::Cntvct => 1,
            ClockKind::Ns => 2,
        });
        b.push(match self.invariant_tsc {
            Some(false) => 0,
            Some(true) => 1,
            None => 2,
        });
        b.extend_from_slice(&[0, 0]);
        let root = self.root.as_os_str().as_bytes();
        b.extend_from_slice(&(root.len() as u32).to_le_bytes());
        b.extend_from_slice(root);
        b.extend_from_slice(&(self.argv.len() as u32).to_le_bytes());
        for a in &self.argv {
            b.extend_from_slice(&(a.len() as u32).to_le_bytes());
            b.extend_from_slice(a.as_bytes());
        }
        let len = (b.len() + 4) as u32;
        b[12..16].copy_from_slice(&len.to_le_bytes());
        let crc = abi::crc32(0, &b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Reads and checks the header at the start of `r`; returns it with its length. `path`
    /// names the file in errors.
    pub fn read(r: &mut impl Read, path: &Path) -> Result<(TraceHeader, u64), Error> {
        let io = |e: std::io::Error| Error::io(format!("reading {}", path.display()), e);
        let mut start = [0u8; 16];
        let n = read_full(r, &mut start).map_err(io)?;
        if n < 8 || start[..8] != abi::TRACE_MAGIC {
            return Err(Error::NotATrace(path.to_path_buf()));
        }
        let bad = |reason: &str| Error::BadTraceHeader {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        };
        if n < 16 {
            return Err(bad("file ends inside the header"));
        }
        let version = u32::from_le_bytes(start[8..12].try_into().expect("4 bytes"));
        if !(abi::OLDEST_TRACE_VERSION..=abi::TRACE_VERSION).contains(&version) {
            return Err(Error::TraceVersion {
                path: path.to_path_buf(),
                version,
            });
        }
        let len = u32::from_le_bytes(start[12..16].try_into().expect("4 bytes")) as usize;
        if !(16 + 40 + 12..=MAX_HEADER).contains(&len) {
            return Err(bad(&format!("header length {len}")));
        }
        let mut b = start.to_vec();
        b.resize(len, 0);
        if read_full(r, &mut b[16..]).map_err(io)? < len - 16 {
            return Err(bad("file ends inside the header"));
        }
        let crc = u32::from_le_bytes(b[len - 4..].try_into().expect("4 bytes"));
        if abi::crc32(0, &b[..len - 4]) != crc {
            return Err(bad("checksum mismatch"));
        }
        let mut c = Cursor {
            b: &b[..len - 4],
            pos: 16,
        };
        let cycles_per_sec = c.u64().ok_or_else(|| bad("short"))?;
        let ref_cycles = c.u64().ok_or_else(|| bad("short"))?;
        let ref_mono_ns = c.u64().ok_or_else(|| bad("short"))?;
        let ref_unix_ns = c.u64().ok_or_else(|| bad("short"))?;
        let kind = c.take(4).ok_or_else(|| bad("short"))?;
        let clock = match kind[0] {
            0 => ClockKind::Tsc,
            1 => ClockKind::Cntvct,
            2 => ClockKind::Ns,
            k => return Err(bad(&format!("clock kind {k}"))),
        };
        let invariant_tsc = match kind[1] {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        };
        let root_len = c.u32().ok_or_else(|| bad("short"))? as usize;
        let root = c
            .take(root_len)
            .ok_or_else(|| bad("root path runs past the header"))?;
        let root = PathBuf::from(OsString::from_vec(root.to_vec()));
        let argc = c.u32().ok_or_else(|| bad("short"))? as usize;
        let mut argv = Vec::new();
        for _ in 0..argc {
            let n = c.u32().ok_or_else(|| bad("short"))? as usize;
            let a = c
                .take(n)
                .ok_or_else(|| bad("argument runs past the header"))?;
            argv.push(OsString::from_vec(a.to_vec()));
        }
        if cycles_per_sec == 0 {
            return Err(bad("clock rate 0"));
        }
        Ok((
            TraceHeader {
                cycles_per_sec,
                ref_cycles,
                ref_mono_ns,
                ref_unix_ns,
                clock,
                invariant_tsc,
                root,
                argv,
            },
            len as u64,
        ))
    }
}

/// Reads until `buf` is full or the input ends; the bytes read.
pub(crate) fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TraceHeader {
        TraceHeader {
            cycles_per_sec: 2_600_000_000,
            ref_cycles: 123_456_789,
            ref_mono_ns: 42,
            ref_unix_ns: 1_795_000_000_000_000_000,
            clock: ClockKind::Tsc,
            invariant_tsc: Some(true),
            root: PathBuf::from("/srv/data"),
            argv: vec!["postmark".into(), "cfg".into()],
        }
    }

    #[test]
    fn round_trips() {
        let h = sample();
        let b = h.encode();
        let (back, len) = TraceHeader::read(&mut &b[..], Path::new("t")).unwrap();
        assert_eq!(back, h);
        assert_eq!(len as usize, b.len());
    }

    #[test]
    fn refuses_another_version_and_other_files_in_one_line() {
        let mut b = sample().encode();
        b[8] = 4;
        let e = TraceHeader::read(&mut &b[..], Path::new("t")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t: trace format version 4; this fsprof reads versions 1 to 3"
        );
        // Version 1 (before image chunks) still reads.
        b[8] = 1;
        let n = b.len();
        let crc = abi::crc32(0, &b[..n - 4]);
        b[n - 4..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            TraceHeader::read(&mut &b[..], Path::new("t")).unwrap().0,
            sample()
        );
        let e =
            TraceHeader::read(&mut &b"hello world, not a trace"[..], Path::new("x")).unwrap_err();
        assert_eq!(e.to_string(), "x: not an fsprof trace");
        let mut b = sample().encode();
        let n = b.len();
        b[n - 10] ^= 1;
        let e = TraceHeader::read(&mut &b[..], Path::new("t")).unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
        let b = sample().encode();
        let e = TraceHeader::read(&mut &b[..20], Path::new("t")).unwrap_err();
        assert!(e.to_string().contains("ends inside"), "{e}");
    }

    #[test]
    fn converts_clock_readings_to_time() {
        let h = sample();
        assert_eq!(
            h.ns_since_start(h.ref_cycles + 2_600_000_000),
            1_000_000_000
        );
        assert_eq!(h.ns_since_start(h.ref_cycles - 2_600), -1000);
        assert_eq!(h.cycles_to_ns(2_600), 1000);
    }
}
