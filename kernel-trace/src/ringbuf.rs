//! The pages of the kernel's ftrace ring buffer, as `per_cpu/cpuN/trace_pipe_raw` hands them
//! out: one read gives one page (a sub-buffer), a header, then events.
//!
//! The page header is described by tracefs's `events/header_page` (a `timestamp`, the absolute
//! time of the page's first event in the instance's `trace_clock`; `commit`, the bytes of
//! event data, whose two top flag bits say that events were lost before the page and whether
//! their count is stored after the data; then `data`). The event header by
//! `events/header_event`: 32 bits, `type_len` in the low 5 and `time_delta` (from the
//! previous event) in the high 27, then:
//!
//! | type_len | what | size |
//! | --- | --- | --- |
//! | 1..=28 | data of `type_len × 4` bytes | 4 + data |
//! | 0 | data whose length (with this word) is in the next 32 bits | 4 + that |
//! | 29 | padding: with `time_delta` 0, the rest of the page; else a discarded event of 4 + the next 32 bits | |
//! | 30 | time extend: `time_delta + (next 32 bits << 27)` added to the time | 8 |
//! | 31 | time stamp: `time_delta + (next 32 bits << 27)` is the absolute time | 8 |
//!
//! [`parse_page`] walks one page with no allocation; it never reads past the page, and a
//! malformed page ends its walk (counted by the caller), never a panic.

use crate::tracefs::{Field, read_uint};

/// `type_len` of padding.
const PADDING: u32 = 29;
/// `type_len` of a time extend.
const TIME_EXTEND: u32 = 30;
/// `type_len` of an absolute time stamp.
const TIME_STAMP: u32 = 31;
/// Bits of `time_delta` (`TS_SHIFT`): extends and stamps hold the bits above.
const TS_SHIFT: u32 = 27;
/// `commit`'s flag: events were lost between this page and the one before.
const MISSED_EVENTS: u64 = 1 << 31;
/// `commit`'s flag: their count is stored after the data (an `unsigned long`).
const MISSED_STORED: u64 = 1 << 30;
/// `commit`'s length bits (below the flags, as libtraceevent's `kbuffer` reads them).
const COMMIT_MASK: u64 = (1 << 27) - 1;
/// The top 5 bits of a time, which a time stamp's 59 bits do not hold (`TS_MSB`).
const TS_MSB: u64 = 0xf8 << 56;

/// Where a page's header fields are, from `events/header_page`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    timestamp: Field,
    commit: Field,
    /// Offset of the first event.
    data: usize,
}

impl PageLayout {
    /// Parses the text of `events/header_page`; checks `events/header_event` (its text) says
    /// what [`parse_page`] reads.
    pub fn parse(header_page: &str, header_event: &str) -> Result<PageLayout, String> {
        let mut timestamp = None;
        let mut commit = None;
        let mut data = None;
        for l in header_page.lines() {
            let Some(rest) = l.trim().strip_prefix("field:") else {
                continue;
            };
            match crate::tracefs::parse_field(rest) {
                Some((n, f)) if n == "timestamp" && f.size == 8 => timestamp = Some(f),
                Some((n, f)) if n == "commit" && (f.size == 8 || f.size == 4) => commit = Some(f),
                Some((n, f)) if n == "data" => data = Some(f.offset),
                _ => {}
            }
        }
        let words: Vec<&str> = header_event.split_whitespace().collect();
        let says = |seq: &[&str]| words.windows(seq.len()).any(|w| w == seq);
        let expected = [
            &["type_len", ":", "5", "bits"][..],
            &["time_delta", ":", "27", "bits"],
            &["padding", ":", "type", "==", "29"],
            &["time_extend", ":", "type", "==", "30"],
            &["time_stamp", ":", "type", "==", "31"],
            &["data", "max", "type_len", "==", "28"],
        ];
        if let Some(e) = expected.iter().find(|e| !says(e)) {
            return Err(format!(
                "events/header_event does not say {:?}: an event header this reader does not know",
                e.join(" ")
            ));
        }
        match (timestamp, commit, data) {
            (Some(timestamp), Some(commit), Some(data)) => Ok(PageLayout {
                timestamp,
                commit,
                data,
            }),
            _ => Err("events/header_page lacks timestamp, commit or data".into()),
        }
    }
}

/// What one page held besides its events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageInfo {
    /// Data events handed out.
    pub events: u64,
    /// The kernel says events were lost before this page (overwritten or dropped); their
    /// count where it stored one.
    pub missed: Option<Option<u64>>,
    /// The walk stopped at an event that does not fit the page or makes no sense.
    pub malformed: bool,
}

fn u32_at(page: &[u8], o: usize) -> Option<u32> {
    page.get(o..o + 4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

/// `type_len` and `time_delta` of an event header word, as the kernel's bit-fields lay them
/// out on this machine.
fn split(word: u32) -> (u32, u64) {
    if cfg!(target_endian = "little") {
        (word & 0x1f, (word >> 5) as u64)
    } else {
        (word >> 27, (word & 0x07ff_ffff) as u64)
    }
}

/// The absolute time of a time stamp (`abs`, 59 bits) given the time before it
/// (the kernel's `rb_fix_abs_ts`).
fn fix_abs(abs: u64, before: u64) -> u64 {
    if before & TS_MSB == 0 {
        return abs;
    }
    let t = abs | (before & TS_MSB);
    if t < before {
        t.wrapping_add(1 << 59)
    } else {
        t
    }
}

/// Walks one page read from `trace_pipe_raw` (`page`, as many bytes as the read gave), handing
/// each data event's time and record (the tracepoint's bytes, `common_type` first) to `f`.
pub fn parse_page(page: &[u8], layout: &PageLayout, mut f: impl FnMut(u64, &[u8])) -> PageInfo {
    let mut info = PageInfo::default();
    let (Some(mut t), Some(commit)) = (
        read_uint(page, layout.timestamp),
        read_uint(page, layout.commit),
    ) else {
        info.malformed = true;
        return info;
    };
    let len = (commit & COMMIT_MASK) as usize;
    let Some(end) = layout.data.checked_add(len).filter(|&e| e <= page.len()) else {
        info.malformed = true;
        return info;
    };
    if commit & MISSED_EVENTS != 0 {
        let stored = (commit & MISSED_STORED != 0)
            .then(|| {
                read_uint(
                    page,
                    Field {
                        offset: end,
                        size: 8,
                    },
                )
            })
            .flatten();
        info.missed = Some(stored);
    }
    let mut o = layout.data;
    while o + 4 <= end {
        let (type_len, delta) = split(u32_at(page, o).unwrap_or(0));
        let next = |extra: u32| -> Option<usize> { Some(o + 4 + extra as usize) };
        let size = match type_len {
            PADDING if delta == 0 => break,
            PADDING => {
                // A discarded event: its time still counts, as the next event's delta
                // follows it.
                t = t.wrapping_add(delta);
                u32_at(page, o + 4).and_then(next)
            }
            TIME_EXTEND | TIME_STAMP => match u32_at(page, o + 4) {
                Some(hi) => {
                    let v = ((hi as u64) << TS_SHIFT) + delta;
                    t = if type_len == TIME_EXTEND {
                        t.wrapping_add(v)
                    } else {
                        fix_abs(v, t)
                    };
                    Some(o + 8)
                }
                None => None,
            },
            0 => match u32_at(page, o + 4) {
                Some(n) if n >= 4 => {
                    t = t.wrapping_add(delta);
                    let data = o + 8..o + 4 + n as usize;
                    match page.get(data).filter(|_| o + 4 + n as usize <= end) {
                        Some(rec) => {
                            f(t, rec);
                            info.events += 1;
                            Some(o + 4 + (n as usize).next_multiple_of(4))
                        }
                        None => None,
                    }
                }
                _ => None,
            },
            n => {
                t = t.wrapping_add(delta);
                let stop = o + 4 + n as usize * 4;
                match page.get(o + 4..stop).filter(|_| stop <= end) {
                    Some(rec) => {
                        f(t, rec);
                        info.events += 1;
                        Some(stop)
                    }
                    None => None,
                }
            }
        };
        match size {
            Some(s) if s > o && s <= end => o = s,
            _ => {
                info.malformed = true;
                break;
            }
        }
    }
    if o < end && o + 4 > end {
        // Committed bytes too few for an event header.
        info.malformed = true;
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
        \tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
        \tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
        \tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
    const HEADER_EVENT: &str = "# compressed entry header\n\ttype_len    :    5 bits\n\
        \ttime_delta  :   27 bits\n\tarray       :   32 bits\n\n\tpadding     : type == 29\n\
        \ttime_extend : type == 30\n\ttime_stamp : type == 31\n\tdata max type_len  == 28\n";

    fn layout() -> PageLayout {
        PageLayout::parse(HEADER_PAGE, HEADER_EVENT).unwrap()
    }

    /// A page as the kernel lays one out: header, then `events`, committed up to their end,
    /// the rest of 4096 bytes zero.
    fn page(ts: u64, flags: u64, events: &[u8], after: &[u8]) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&ts.to_ne_bytes());
        p.extend_from_slice(&(events.len() as u64 | flags).to_ne_bytes());
        p.extend_from_slice(events);
        p.extend_from_slice(after);
        p.resize(4096, 0);
        p
    }

    fn header(type_len: u32, delta: u32) -> [u8; 4] {
        (type_len | (delta << 5)).to_ne_bytes()
    }

    /// A small data event: `type_len` words of data.
    fn small(delta: u32, data: &[u8]) -> Vec<u8> {
        assert_eq!(data.len() % 4, 0);
        let mut e = header(data.len() as u32 / 4, delta).to_vec();
        e.extend_from_slice(data);
        e
    }

    fn collect(p: &[u8]) -> (Vec<(u64, Vec<u8>)>, PageInfo) {
        let mut out = Vec::new();
        let info = parse_page(p, &layout(), |t, rec| out.push((t, rec.to_vec())));
        (out, info)
    }

    #[test]
    fn the_layout_is_read_from_tracefs_headers() {
        let l = layout();
        assert_eq!(l.data, 16);
        assert_eq!(l.commit, Field { offset: 8, size: 8 });
        let odd = HEADER_EVENT.replace("type == 30", "type == 7");
        let e = PageLayout::parse(HEADER_PAGE, &odd).unwrap_err();
        assert!(e.contains("time_extend"), "{e}");
        assert!(PageLayout::parse("", HEADER_EVENT).is_err());
    }

    #[test]
    fn deltas_add_up_from_the_page_time() {
        let mut ev = small(0, &[1, 0, 0, 0]);
        ev.extend(small(10, &[2, 0, 0, 0, 9, 9, 9, 9]));
        ev.extend(small(5, &[3, 0, 0, 0]));
        let (out, info) = collect(&page(1_000, 0, &ev, &[]));
        assert_eq!(
            out,
            [
                (1_000, vec![1, 0, 0, 0]),
                (1_010, vec![2, 0, 0, 0, 9, 9, 9, 9]),
                (1_015, vec![3, 0, 0, 0])
            ]
        );
        assert_eq!(info.events, 3);
        assert_eq!((info.missed, info.malformed), (None, false));
    }

    #[test]
    fn long_events_carry_their_length() {
        // type_len 0: the next word is the length with itself; the data is 4 bytes shorter
        // than it, and the event is aligned to 4 bytes.
        let data: Vec<u8> = (0..120u8).collect();
        let mut ev = header(0, 7).to_vec();
        ev.extend_from_slice(&(data.len() as u32 + 4).to_ne_bytes());
        ev.extend_from_slice(&data);
        ev.extend(small(1, &[4, 4, 4, 4]));
        let (out, info) = collect(&page(50, 0, &ev, &[]));
        assert_eq!(out, [(57, data), (58, vec![4, 4, 4, 4])]);
        assert!(!info.malformed);
    }

    #[test]
    fn time_extends_and_time_stamps() {
        // An extend adds delta + (array[0] << 27); a stamp sets the absolute time.
        let mut ev = header(TIME_EXTEND, 3).to_vec();
        ev.extend_from_slice(&2u32.to_ne_bytes());
        ev.extend(small(0, &[1, 1, 1, 1]));
        ev.extend_from_slice(&header(TIME_STAMP, 5));
        ev.extend_from_slice(&1u32.to_ne_bytes());
        ev.extend(small(4, &[2, 2, 2, 2]));
        let (out, _) = collect(&page(100, 0, &ev, &[]));
        let extended = 100 + (2u64 << 27) + 3;
        assert_eq!(out[0].0, extended);
        assert_eq!(out[1].0, (1u64 << 27) + 5 + 4);
        // A stamp's 59 bits take the top bits of the time before it.
        assert_eq!(fix_abs(10, 0), 10);
        assert_eq!(fix_abs(10, TS_MSB | 5), TS_MSB | 10);
        assert_eq!(fix_abs(3, TS_MSB | 5), (TS_MSB | 3).wrapping_add(1 << 59));
    }

    #[test]
    fn padding_ends_the_page_or_skips_a_discarded_event() {
        let mut ev = small(0, &[1, 0, 0, 0]);
        // A discarded event of 8 bytes of data: skipped, its delta kept. Its length word
        // counts itself (the kernel's `rb_event_discard` writes the data's length over the
        // first data word).
        ev.extend_from_slice(&header(PADDING, 6));
        ev.extend_from_slice(&12u32.to_ne_bytes());
        ev.extend_from_slice(&[0xee; 8]);
        ev.extend(small(1, &[2, 0, 0, 0]));
        // Padding with no delta: the rest of the committed data is nothing.
        ev.extend_from_slice(&header(PADDING, 0));
        ev.extend(small(1, &[3, 0, 0, 0]));
        let (out, info) = collect(&page(0, 0, &ev, &[]));
        assert_eq!(out, [(0, vec![1, 0, 0, 0]), (7, vec![2, 0, 0, 0])]);
        assert!(!info.malformed);
    }

    #[test]
    fn a_page_is_read_only_up_to_its_commit() {
        // A page the reader took while the writer was on it: commit covers one event; what
        // lies after (stale bytes of an older use of the page) is not read.
        let ev = small(0, &[1, 0, 0, 0]);
        let stale = small(1, &[9, 9, 9, 9]);
        let (out, info) = collect(&page(40, 0, &ev, &stale));
        assert_eq!(out, [(40, vec![1, 0, 0, 0])]);
        assert_eq!(info.events, 1);
        // An empty page.
        let (out, info) = collect(&page(40, 0, &[], &stale));
        assert!(out.is_empty() && !info.malformed);
    }

    #[test]
    fn missed_events_are_reported_with_their_count() {
        let ev = small(0, &[1, 0, 0, 0]);
        let (_, info) = collect(&page(
            1,
            MISSED_EVENTS | MISSED_STORED,
            &ev,
            &17u64.to_ne_bytes(),
        ));
        assert_eq!(info.missed, Some(Some(17)));
        let (_, info) = collect(&page(1, MISSED_EVENTS, &ev, &[]));
        assert_eq!(info.missed, Some(None));
    }

    #[test]
    fn malformed_pages_stop_without_panic() {
        // An event longer than the commit.
        let ev = small(0, &[1, 0, 0, 0]);
        let mut p = page(1, 0, &ev, &[]);
        p[8..16].copy_from_slice(&2u64.to_ne_bytes());
        let (out, info) = collect(&p);
        assert!(out.is_empty() && info.malformed);
        // A commit beyond the page.
        let mut p = page(1, 0, &ev, &[]);
        p[8..16].copy_from_slice(&5000u64.to_ne_bytes());
        assert!(collect(&p).1.malformed);
        // A long event whose length is below its own word.
        let mut ev = header(0, 0).to_vec();
        ev.extend_from_slice(&2u32.to_ne_bytes());
        assert!(collect(&page(1, 0, &ev, &[])).1.malformed);
        // A page shorter than its header.
        assert!(collect(&[0u8; 10]).1.malformed);
    }

    #[test]
    fn any_bytes_end_in_events_or_a_stop_never_a_panic() {
        // 20,000 pages of pseudo-random bytes (xorshift), with a commit that fits the page
        // half of the time: every walk ends, within the page.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..20_000 {
            let len = 16 + (next() % 4096) as usize;
            let mut p: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if i % 2 == 0 {
                let commit = next() % (len as u64 - 15);
                p[8..16].copy_from_slice(&commit.to_ne_bytes());
            }
            let mut n = 0usize;
            parse_page(&p, &layout(), |_, data| {
                assert!(data.len() <= len);
                n += 1;
            });
            assert!(n <= len / 4);
        }
    }
}
