//! Cost of one start+finish record, next to the cost of the two clock reads it contains.
//!
//! `cargo bench -p profile-store --bench record`

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use profile_store::{Recorder, RecorderConfig, Resolution, clock, ops};

fn recorder(resolution: u32) -> Recorder {
    let config = RecorderConfig {
        resolution: Resolution::new(resolution).unwrap(),
        ..RecorderConfig::default()
    };
    Recorder::new("fuse", ops::STANDARD, &config)
}

/// Runs `per_thread` on `threads` threads at once, `iters` times each; returns wall time
/// divided by `iters`, i.e. the cost per call seen by each thread.
fn parallel(threads: usize, iters: u64, per_thread: impl Fn(u64) + Sync) -> Duration {
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                barrier.wait();
                per_thread(iters);
                barrier.wait();
            });
        }
        barrier.wait();
        let t = Instant::now();
        barrier.wait();
        t.elapsed()
    })
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("record");
    g.bench_function("two clock reads", |b| {
        b.iter(|| {
            let a = clock::now();
            black_box(a);
            black_box(clock::now())
        })
    });
    for r in [1, 8] {
        let rec = recorder(r);
        let op = rec.op_id("OP_READ").unwrap();
        g.bench_function(format!("start+finish r={r} 1 thread"), |b| {
            b.iter(|| rec.finish(rec.start(black_box(op))))
        });
    }
    g.bench_function("two clock reads 2 threads", |b| {
        b.iter_custom(|iters| {
            parallel(2, iters, |n| {
                for _ in 0..n {
                    let a = clock::now();
                    black_box(a);
                    black_box(clock::now());
                }
            })
        })
    });
    let rec = recorder(1);
    let op = rec.op_id("OP_READ").unwrap();
    g.bench_function("start+finish r=1 2 threads", |b| {
        b.iter_custom(|iters| {
            parallel(2, iters, |n| {
                for _ in 0..n {
                    rec.finish(rec.start(black_box(op)));
                }
            })
        })
    });
    let time_lapse = Recorder::new(
        "fuse",
        ops::STANDARD,
        &RecorderConfig {
            epoch_cycles: 1 << 32,
            ..RecorderConfig::default()
        },
    );
    g.bench_function("start+finish r=1 time-lapse 1 thread", |b| {
        b.iter(|| time_lapse.finish(time_lapse.start(black_box(op))))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
