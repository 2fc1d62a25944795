//! Records N start+finish pairs: run under `valgrind --tool=callgrind` to count the instructions
//! of one record (steady regardless of machine load).
//!
//! `cargo build --release -p profile-store --example record_loop &&
//!  valgrind --tool=callgrind target/release/examples/record_loop 1000000`

use profile_store::{Recorder, RecorderConfig, ops};

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rec = Recorder::new("fuse", ops::STANDARD, &RecorderConfig::default());
    let op = rec.op_id("OP_READ").unwrap();
    for _ in 0..n {
        rec.finish(std::hint::black_box(rec.start(std::hint::black_box(op))));
    }
    let l = rec.snapshot();
    assert_eq!(l.count("OP_READ"), n);
    println!("{n} records");
}
