//! Reading profiles as streams: whatever a reader yields (a device of endless zeros, a file
//! with a line that never ends, endless JSON), the readers fail with one line, having read
//! little of it and held bounded memory.

use std::io::Read;

use profile_store::json::MAX_JSON_BYTES;
use profile_store::text::MAX_LINE;
use profile_store::{read_any, text};

use crate::sys;

/// An endless stream: `head` once, then `body` over and over, counting the bytes handed out.
struct Endless {
    head: Vec<u8>,
    body: Vec<u8>,
    pos: usize,
    read: u64,
}

impl Endless {
    fn new(head: &str, body: &str) -> Endless {
        Endless {
            head: head.as_bytes().to_vec(),
            body: body.as_bytes().to_vec(),
            pos: 0,
            read: 0,
        }
    }
}

impl Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        for b in buf.iter_mut() {
            *b = if self.pos < self.head.len() {
                self.head[self.pos]
            } else {
                self.body[(self.pos - self.head.len()) % self.body.len()]
            };
            self.pos += 1;
        }
        self.read += buf.len() as u64;
        Ok(buf.len())
    }
}

/// Reads `r` with [`read_any`]; returns the error, the bytes read and the most bytes held.
fn read_measured(r: &mut Endless) -> (String, u64, usize) {
    let start = sys::live();
    sys::reset_peak();
    let e = read_any(&mut *r).expect_err("an endless stream is no profile");
    (e, r.read, sys::peak_since(start))
}

#[test]
fn endless_zeros_fail_at_the_first_byte() {
    let mut zeros = Endless::new("", "\0");
    let (e, read, peak) = read_measured(&mut zeros);
    assert_eq!(
        e,
        "line 1: unexpected control character 0x00: not an fsprof profile"
    );
    assert!(read <= 16 << 10, "read {read} bytes");
    assert!(peak < 64 << 10, "held {peak} bytes");
}

#[test]
fn endless_text_that_is_no_profile_fails_at_once() {
    for body in ["a", "hello world\n", "#!/bin/sh\n", "OP_read 1 2\n"] {
        let mut r = Endless::new("", body);
        let (e, read, peak) = read_measured(&mut r);
        assert!(e.starts_with("line 1: "), "{body:?}: {e}");
        assert!(read <= 16 << 10, "{body:?}: read {read} bytes");
        assert!(peak < 64 << 10, "{body:?}: held {peak} bytes");
    }
}

#[test]
fn a_line_that_never_ends_fails_at_the_line_limit() {
    for (head, body) in [
        ("", "A"),
        ("OP_READ 1 5\n", "9"),
        (
            "# fsprof-profile v1\n# clock=tsc\n# layer=fuse resolution=1 buckets=64 epochs=1\nOP_READ 1 5\n",
            " 1",
        ),
    ] {
        let mut r = Endless::new(&format!("{head}OP_"), body);
        let (e, read, peak) = read_measured(&mut r);
        assert!(
            e.contains(&format!("longer than {MAX_LINE} bytes"))
                || e.contains("more than 512 buckets")
                || e.contains("bad operation name")
                || e.contains("expected"),
            "{e}"
        );
        assert!(read <= (MAX_LINE as u64) + (32 << 10), "read {read} bytes");
        assert!(peak < 512 << 10, "held {peak} bytes");
    }
    // A huge first line of an operation: the limit is what stops it.
    let mut r = Endless::new("OP_", "A");
    let (e, _, _) = read_measured(&mut r);
    assert_eq!(
        e,
        format!("line 1: line longer than {MAX_LINE} bytes: not an fsprof profile")
    );
}

#[test]
fn endless_metadata_and_layers_are_bounded_by_the_cell_limit() {
    // Endless distinct global keys, then endless empty layers: each kept name costs.
    let mut keys = Endless::new("# fsprof-profile v1\n", "# k=v\n");
    let (e, _, _) = read_measured(&mut keys);
    assert!(e.contains("given twice"), "{e}");
    let mut n = 0u64;
    let mut layers = String::from("# fsprof-profile v1\n# clock=tsc\n");
    // Distinct names cannot be made by repetition; build 200,000 layer lines by hand and check
    // the memory held stays near what they take (and that duplicates are found in linear time:
    // this took minutes with a quadratic search).
    while n < 200_000 {
        layers.push_str(&format!("# layer=l{n} resolution=1 buckets=1 epochs=1\n"));
        n += 1;
    }
    let start = sys::live();
    sys::reset_peak();
    let p = text::parse_reader(layers.as_bytes()).unwrap();
    assert_eq!(p.layers.len(), 200_000);
    let peak = sys::peak_since(start);
    assert!(peak < 200 << 20, "held {peak} bytes");
}

#[test]
fn endless_epoch_lines_stop_at_the_epoch_limit() {
    let mut r = Endless::new("OP_READ 1 5\n", "-\n");
    let (e, read, peak) = read_measured(&mut r);
    assert!(e.contains("more than 65536 epoch lines"), "{e}");
    assert!(read < 1 << 20, "read {read} bytes");
    assert!(peak < 16 << 20, "held {peak} bytes");
}

#[test]
fn endless_json_stops_at_the_json_limit_with_bounded_memory() {
    let head = "{\"format\":\"fsprof-profile\",\"version\":1,\"layers\":[{\"name\":\"fuse\",\
                \"resolution\":1,\"buckets\":64,\"ops\":[{\"name\":\"OP_READ\",\"count\":1,\
                \"total\":1,\"epochs\":[[";
    let mut r = Endless::new(head, "0,");
    let (e, read, peak) = read_measured(&mut r);
    assert!(e.contains("larger than 64 MiB"), "{e}");
    assert!(read <= MAX_JSON_BYTES + (64 << 10), "read {read} bytes");
    // 32 Mi counts of 8 bytes, in a vector that doubles: at most twice that.
    assert!(
        peak <= 2 * 8 * (MAX_JSON_BYTES as usize / 2) + (1 << 20),
        "held {peak} bytes"
    );
    // Not JSON after the brace: fails at once.
    let mut r = Endless::new("{", "x");
    let (e, read, _) = read_measured(&mut r);
    assert!(e.starts_with("JSON: "), "{e}");
    assert!(read <= 16 << 10, "read {read} bytes");
}

#[test]
fn endless_blanks_are_no_profile() {
    let mut r = Endless::new("", " ");
    let (e, read, _) = read_measured(&mut r);
    assert!(e.starts_with("line 1: "), "{e}");
    assert!(read <= 16 << 10, "read {read} bytes");
}
