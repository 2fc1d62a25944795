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
/// divided by `iters`, i.e. the cost per call seen by each thread. Thread `i` is pinned to the
/// `i`-th CPU the process may use, so "two threads" means two cores, not two threads taking
/// turns on one.
fn parallel(threads: usize, iters: u64, per_thread: impl Fn(u64) + Sync) -> Duration {
    let cpus = sys::allowed_cpus();
    if cpus.len() < threads {
        eprintln!(
            "only {} CPU(s) allowed for {threads} threads: they share cores",
            cpus.len()
        );
    }
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for i in 0..threads {
            let (cpus, barrier, per_thread) = (&cpus, &barrier, &per_thread);
            s.spawn(move || {
                if let Some(&cpu) = cpus.get(i) {
                    if let Err(e) = sys::pin_to_cpu(cpu) {
                        eprintln!("thread {i} not pinned to CPU {cpu}: {e}");
                    }
                }
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

/// CPU affinity, the benchmark's only system calls.
mod sys {
    use std::io;
    use std::mem::{size_of, zeroed};

    /// The CPUs this process may run on, in order.
    pub fn allowed_cpus() -> Vec<usize> {
        // SAFETY: `cpu_set_t` is a plain bit array; all zeros is a valid, empty set.
        let mut set: libc::cpu_set_t = unsafe { zeroed() };
        // SAFETY: pid 0 is the calling thread; the pointer and size describe `set`, which the
        // call fills and nothing else.
        if unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `cpu` is below CPU_SETSIZE, so the bit read lies inside `set`.
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
            .collect()
    }

    /// Pins the calling thread to `cpu`.
    pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: as above, all zeros is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { zeroed() };
        // SAFETY: `cpu` is below CPU_SETSIZE, so the bit written lies inside `set`.
        unsafe { libc::CPU_SET(cpu, &mut set) };
        // SAFETY: pid 0 is the calling thread; the pointer and size describe `set`, which the
        // call only reads.
        if unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
