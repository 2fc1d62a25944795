//! # profile-store
//!
//! Latency profiles in log2 buckets, after the FSprof/OSprof method: every operation's latency
//! is measured with the CPU cycle counter and counted in bucket `floor(r · log2(cycles))`, so the
//! different execution paths of a system show up as separate peaks. This crate is the Rust
//! counterpart of the thesis's `aggregate_stats` library, exact under concurrency:
//!
//! * [`clock`]: the cycle counter and its calibration against `CLOCK_MONOTONIC`.
//! * [`duration`]: durations on command lines (`2s`, `500ms`, `4096c`).
//! * [`bucket`]: integer-only bucket math for resolutions 1, 2, 4 and 8.
//! * [`recorder`]: per-thread shards with no lock and no shared read-modify-write on the hot
//!   path, snapshots, resets with generations, time-lapse epochs with a memory bound.
//! * [`Profiler`]: several layers (recorders) snapshotted and reset together.
//! * [`Profile`], [`text`] and [`json`]: the profile model and its two formats
//!   (`docs/format.md`).
//! * [`keyed`]: per-key layer names (`fuse@uid:1000`).
//! * [`merge`]: sums of profiles (of many machines), converting clock rates.
//! * [`inner`]: the inner-call breakdown section behind `fsprof why`.
//! * [`save`]: profiles written to a file whole or not at all.
//! * [`views`]: summary table, bucket ranges, estimated latency, consistency check.
//!
//! ```
//! use profile_store::{Profiler, Recorder, RecorderConfig, text};
//!
//! let fuse = Recorder::new("fuse", &["OP_LOOKUP", "OP_READ"], &RecorderConfig::default());
//! let profiler = Profiler::new(vec![fuse.clone()]);
//! let read = fuse.op_id("OP_READ").unwrap();
//! fuse.measure(read, || std::hint::black_box(40 + 2));
//! let profile = profiler.snapshot();
//! assert_eq!(profile.layers[0].count("OP_READ"), 1);
//! let written = text::write(&profile);
//! assert_eq!(text::parse(&written).unwrap(), profile);
//! ```
//!
//! Limitations: counters are 64-bit and wrap (after 2^64 calls or cycles); the clock is not
//! serializing, so latencies of a few cycles are approximate; a recorder's operation table is
//! fixed at creation.
//!
//! The modules depend on each other in one direction only, from the bottom up: [`bucket`],
//! [`duration`], [`errno`], [`ops`], [`keyed`], [`limits`], [`merge`], [`name`], [`open`];
//! [`clock`]; [`profile`]; [`inner`], [`text`], [`views`]; [`json`], [`recorder`], [`prometheus`];
//! [`profiler`], [`save`].

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod bucket;
pub mod clock;
pub mod duration;
pub mod errno;
pub mod inner;
pub mod json;
pub mod keyed;
pub mod limits;
pub mod merge;
pub mod name;
pub mod open;
pub mod ops;
mod profile;
mod profiler;
pub mod prometheus;
pub mod recorder;
pub mod save;
pub mod text;
pub mod views;

pub use bucket::Resolution;
pub use clock::{ClockInfo, ClockKind};
pub use profile::{HOT_FILES_SECTION, Layer, OpProfile, Profile, SLOWEST_SECTION, Section};
pub use profiler::{Extension, ExtraError, Profiler};
pub use recorder::{OpId, Recorder, RecorderConfig, Timer, Token};

/// Reads a profile in either format: JSON when the first non-blank byte is `{`, text otherwise.
pub fn parse_any(input: &[u8]) -> Result<Profile, String> {
    read_any(input)
}

/// Most blank bytes (spaces, tabs, line ends) [`read_any`] skips looking for a JSON profile's
/// `{` before it takes the input as text (where leading blanks are an error).
const MAX_LEADING_BLANKS: usize = 4 << 10;

/// Reads a profile in either format from a stream: JSON when the first non-blank byte is `{`,
/// text otherwise. Both are read as streams with their limits applied while reading
/// ([`text::parse_reader`], [`json::parse_reader`]), so memory stays bounded whatever `r`
/// yields, and an input that is neither fails within its first line. A read error is reported
/// in the message; callers that need its kind can wrap `r` and keep it.
pub fn read_any(r: impl std::io::Read) -> Result<Profile, String> {
    use std::io::Read as _;
    let mut r = std::io::BufReader::with_capacity(8 << 10, r);
    let mut head = Vec::new();
    let first = loop {
        let mut byte = [0u8; 1];
        match r.read(&mut byte) {
            Ok(0) => break None,
            Ok(_) => {
                head.push(byte[0]);
                if !byte[0].is_ascii_whitespace() || head.len() > MAX_LEADING_BLANKS {
                    break Some(byte[0]);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("read error: {e}")),
        }
    };
    let whole = std::io::Cursor::new(head).chain(r);
    if first == Some(b'{') {
        json::parse_reader(whole).map_err(|e| e.to_string())
    } else {
        text::parse_reader(whole).map_err(|e| e.to_string())
    }
}
