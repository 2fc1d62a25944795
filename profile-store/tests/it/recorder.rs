//! Recorder exactness under concurrency, resets, several recorders, epochs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use profile_store::{Layer, Profiler, Recorder, RecorderConfig, Resolution, ops, views};

fn fuse_recorder() -> Recorder {
    Recorder::new("fuse", ops::STANDARD, &RecorderConfig::default())
}

fn bucket_sum(l: &Layer, op: &str) -> u128 {
    l.op(op).map_or(0, |o| o.bucket_sum())
}

#[test]
fn eight_threads_a_million_records_each_are_exact() {
    let rec = fuse_recorder();
    let read = rec.op_id("OP_READ").unwrap();
    let write = rec.op_id("OP_WRITE").unwrap();
    const N: u64 = 1_000_000;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let rec = &rec;
                s.spawn(move || {
                    for i in 0..N {
                        // Odd threads mix in a second operation to exercise distinct counters.
                        let op = if t % 2 == 1 && i % 4 == 0 {
                            write
                        } else {
                            read
                        };
                        rec.finish(rec.start(op));
                    }
                })
            })
            .collect();
        // An explicit join waits for the OS thread, thread-local destructors included.
        for h in handles {
            h.join().unwrap();
        }
    });
    let l = rec.snapshot();
    let writes = 4 * N / 4;
    assert_eq!(l.count("OP_WRITE"), writes);
    assert_eq!(l.count("OP_READ"), 8 * N - writes);
    assert_eq!(bucket_sum(&l, "OP_READ"), (8 * N - writes) as u128);
    assert_eq!(bucket_sum(&l, "OP_WRITE"), writes as u128);
    // The threads exited: their shards were folded into the retired totals.
    assert_eq!(rec.live_shards(), 0);
}

#[test]
fn eight_threads_a_million_records_each_are_exact_while_the_threads_live() {
    // The same load, but the snapshot is taken while every thread is alive, parked at a
    // barrier after its last record: the counts come from the live shards, not from the
    // totals folded in when threads exit.
    let rec = fuse_recorder();
    let read = rec.op_id("OP_READ").unwrap();
    let write = rec.op_id("OP_WRITE").unwrap();
    const N: u64 = 1_000_000;
    let recorded = Barrier::new(9);
    let released = Barrier::new(9);
    let (l, live) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8u64)
            .map(|t| {
                let (rec, recorded, released) = (&rec, &recorded, &released);
                s.spawn(move || {
                    for i in 0..N {
                        let op = if t % 2 == 1 && i % 4 == 0 {
                            write
                        } else {
                            read
                        };
                        rec.finish(rec.start(op));
                    }
                    recorded.wait();
                    released.wait();
                })
            })
            .collect();
        recorded.wait();
        let l = rec.snapshot();
        let live = rec.live_shards();
        // Release the threads before asserting, so a failure cannot hang the test, and join
        // them explicitly: that waits for their thread-local destructors too, which fold the
        // shards into the retired totals (the scope's own join does not).
        released.wait();
        for h in handles {
            h.join().unwrap();
        }
        (l, live)
    });
    assert_eq!(live, 8, "every thread still held its shard");
    let writes = 4 * N / 4;
    assert_eq!(l.count("OP_WRITE"), writes);
    assert_eq!(l.count("OP_READ"), 8 * N - writes);
    assert_eq!(bucket_sum(&l, "OP_READ"), (8 * N - writes) as u128);
    assert_eq!(bucket_sum(&l, "OP_WRITE"), writes as u128);
    // After they exit, the same numbers from the retired totals.
    let after = rec.snapshot();
    assert_eq!(rec.live_shards(), 0);
    assert_eq!(after.count("OP_WRITE"), writes);
    assert_eq!(after.count("OP_READ"), 8 * N - writes);
    assert_eq!(bucket_sum(&after, "OP_READ"), (8 * N - writes) as u128);
}

#[test]
fn counts_of_exited_threads_survive_and_mix_with_live_ones() {
    let rec = fuse_recorder();
    let lookup = rec.op_id("OP_LOOKUP").unwrap();
    for round in 0..5 {
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        rec.measure(lookup, || ());
                    }
                });
            }
        });
        assert_eq!(rec.snapshot().count("OP_LOOKUP"), (round + 1) * 3000);
    }
    // A live thread adds to the retired totals.
    let stop = Arc::new(Barrier::new(2));
    let done = Arc::new(Barrier::new(2));
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..7 {
                rec.measure(lookup, || ());
            }
            done.wait();
            stop.wait();
        });
        done.wait();
        let l = rec.snapshot();
        // Release the thread before asserting, so a failure cannot hang the test.
        stop.wait();
        assert_eq!(l.count("OP_LOOKUP"), 15_007);
        assert_eq!(bucket_sum(&l, "OP_LOOKUP"), 15_007);
    });
}

#[test]
fn two_recorders_used_from_the_same_threads() {
    let upper = fuse_recorder();
    let lower = Recorder::new("lower", ops::STANDARD, &RecorderConfig::default());
    let read = upper.op_id("OP_READ").unwrap();
    let getattr = upper.op_id("OP_GETATTR").unwrap();
    const N: u64 = 250_000;
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for i in 0..N {
                    // Nested: the lower layer is timed inside the upper one, as in fsprof-fuse.
                    let t = upper.start(read);
                    lower.measure(read, || ());
                    if i % 2 == 0 {
                        lower.measure(read, || ());
                    }
                    upper.finish(t);
                    lower.measure(getattr, || ());
                }
            });
        }
    });
    let profiler = Profiler::new(vec![upper.clone(), lower.clone()]);
    let p = profiler.snapshot();
    assert_eq!(p.layers[0].name, "fuse");
    assert_eq!(p.layers[0].count("OP_READ"), 4 * N);
    assert_eq!(p.layers[0].count("OP_GETATTR"), 0);
    assert_eq!(p.layers[1].count("OP_READ"), 4 * N + 4 * N / 2);
    assert_eq!(p.layers[1].count("OP_GETATTR"), 4 * N);
    assert!(views::check(&p, 0).is_empty());
    // Resetting one recorder leaves the other alone.
    lower.reset();
    assert_eq!(upper.snapshot().count("OP_READ"), 4 * N);
    assert_eq!(lower.snapshot().ops.len(), 0);
}

#[test]
fn recorders_dropped_and_recreated_reuse_slots_without_mixing() {
    let op = 0;
    let mut last = None;
    for i in 1..=20u64 {
        let rec = Recorder::new("fuse", &["OP_READ"], &RecorderConfig::default());
        for _ in 0..i {
            rec.measure(op, || ());
        }
        assert_eq!(rec.snapshot().count("OP_READ"), i);
        last = Some(rec);
    }
    assert_eq!(last.unwrap().snapshot().count("OP_READ"), 20);
}

#[test]
fn reset_while_two_threads_record() {
    let rec = fuse_recorder();
    let write = rec.op_id("OP_WRITE").unwrap();
    let stop = AtomicBool::new(false);
    let running = std::sync::atomic::AtomicUsize::new(0);
    let mut violations = Vec::new();
    let mut snapshots_with_calls = 0;
    let mut resets = 0;
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                running.fetch_add(1, Ordering::Relaxed);
                while !stop.load(Ordering::Relaxed) {
                    let t = rec.start(write);
                    std::hint::spin_loop();
                    rec.finish(t);
                }
            });
        }
        // Both recorders running before the first reset (thread start-up can take longer
        // than the whole loop on a busy machine).
        while running.load(Ordering::Relaxed) < 2 {
            std::thread::yield_now();
        }
        // Deadlines that only a hang reaches (a loaded machine gives these threads little time).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while (resets < 500 || snapshots_with_calls < 200) && std::time::Instant::now() < deadline {
            rec.reset();
            resets += 1;
            // Several snapshots per generation: the first often comes before the recorders
            // have seen the reset; the later ones race with them.
            for _ in 0..8 {
                let l = rec.snapshot();
                let count = l.count("OP_WRITE") as u128;
                let sum = bucket_sum(&l, "OP_WRITE");
                // Never more finished than started, whatever the interleaving. (The count may
                // run ahead of the buckets by the calls that start and finish while the
                // snapshot reads, so the in-flight bound is checked at quiescence below.)
                if sum > count {
                    violations.push((sum, count));
                }
                snapshots_with_calls += usize::from(count > 0);
            }
        }
        // Before stopping, make sure the last generation holds calls (the last reset may
        // have come just before the recorders were stopped): poll, bounded.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while rec.snapshot().count("OP_WRITE") == 0 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        // Stop the recorders before asserting, so a failure cannot leave them spinning.
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        violations.is_empty(),
        "bucket sum above count: {violations:?}"
    );
    assert!(
        snapshots_with_calls >= 200,
        "only {snapshots_with_calls} snapshots saw calls in {resets} resets"
    );
    // Quiescent (threads exited): exact, and not trivially (0 = 0).
    let l = rec.snapshot();
    assert!(l.count("OP_WRITE") > 0, "no call after the last reset");
    assert_eq!(bucket_sum(&l, "OP_WRITE"), l.count("OP_WRITE") as u128);
    rec.reset();
    assert!(rec.snapshot().ops.is_empty());
}

#[test]
fn finish_after_reset_records_nothing() {
    let rec = fuse_recorder();
    let op = rec.op_id("OP_FSYNC").unwrap();
    let t = rec.start(op);
    rec.reset();
    rec.finish(t);
    assert!(rec.snapshot().ops.is_empty());
    let t = rec.start(op);
    rec.finish(t);
    let l = rec.snapshot();
    assert_eq!(l.count("OP_FSYNC"), 1);
    assert_eq!(bucket_sum(&l, "OP_FSYNC"), 1);
}

#[test]
fn latency_lands_in_its_bucket_and_total() {
    for r in [1u32, 2, 4, 8] {
        let res = Resolution::new(r).unwrap();
        let rec = Recorder::new(
            "fuse",
            &["OP_READ"],
            &RecorderConfig {
                resolution: res,
                ..RecorderConfig::default()
            },
        );
        let mut total = 0u64;
        for latency in [0u64, 1, 5, 1000, 123_456, 1 << 40] {
            let t = rec.start(0);
            rec.record(t, t.start_cycles() + latency);
            total += latency;
        }
        // A clock that runs backwards counts as 0.
        let t = rec.start(0);
        rec.record(t, t.start_cycles() - 10);
        let l = rec.snapshot();
        assert_eq!(l.buckets, 64 * r as usize);
        let o = l.op("OP_READ").unwrap();
        assert_eq!(o.count, 7);
        assert_eq!(o.total, total);
        for latency in [0u64, 1, 5, 1000, 123_456, 1 << 40] {
            assert!(
                o.epochs[0][res.bucket(latency)] >= 1,
                "r={r} latency={latency}"
            );
        }
        // 0, 1 and the backward reading.
        assert_eq!(o.epochs[0][0], 3);
    }
}

#[test]
fn epochs_split_time_and_are_bounded() {
    const E: u64 = 1 << 40; // far longer than the test, so wall time stays in epoch 0
    let rec = Recorder::new(
        "fuse",
        &["OP_READ", "OP_WRITE"],
        &RecorderConfig {
            epoch_cycles: E,
            max_epochs: 4,
            ..RecorderConfig::default()
        },
    );
    // Finish calls at chosen times: epoch k is [k·E, (k+1)·E) after the reset.
    for (k, n) in [(0u64, 3u64), (2, 5)] {
        for _ in 0..n {
            let t = rec.start(0);
            rec.record(t, t.start_cycles() + k * E + 7);
        }
    }
    let l = rec.snapshot();
    assert_eq!(l.epoch_cycles, E);
    assert_eq!(l.epochs, 3);
    assert!(!l.max_epochs_reached);
    let o = l.op("OP_READ").unwrap();
    let per_epoch: Vec<u64> = o.epochs.iter().map(|e| e.iter().sum()).collect();
    assert_eq!(per_epoch, [3, 0, 5]);

    // Past the bound: samples go to the last epoch and the layer says so.
    let t = rec.start(1);
    rec.record(t, t.start_cycles() + 10 * E);
    let l = rec.snapshot();
    assert_eq!(l.epochs, 4);
    assert!(l.max_epochs_reached);
    let w = l.op("OP_WRITE").unwrap();
    assert_eq!(w.epochs[3].iter().sum::<u64>(), 1);

    // A reset restarts the epoch clock and clears the flag.
    rec.reset();
    let t = rec.start(1);
    rec.finish(t);
    let l = rec.snapshot();
    assert_eq!(l.epochs, 1);
    assert!(!l.max_epochs_reached);
    assert_eq!(l.count("OP_WRITE"), 1);
}

#[test]
fn time_lapse_with_real_time() {
    // 1 ms epochs, bounded at 8: calls made over real time until one lands past the last epoch
    // fall into several epochs. The calls run until the layer says the bound was reached, not
    // for a fixed time: a thread stalled in a run of 30 ms used to leave it short of 8 epochs.
    // A stall between the reset and the first call can put every call past the last epoch;
    // then the run starts again from a reset (each run takes about 8 ms; the deadline only
    // keeps a broken clock from hanging the test).
    let hz = profile_store::ClockInfo::get().cycles_per_sec;
    let rec = Recorder::new(
        "fuse",
        &["OP_READ"],
        &RecorderConfig {
            epoch_cycles: hz / 1000,
            max_epochs: 8,
            ..RecorderConfig::default()
        },
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        rec.reset();
        let mut n = 0;
        let l = loop {
            rec.measure(0, || ());
            n += 1;
            if n % 64 == 0 {
                let l = rec.snapshot();
                if l.max_epochs_reached {
                    break l;
                }
            }
        };
        assert_eq!(l.epochs, 8);
        let o = l.op("OP_READ").unwrap();
        assert_eq!(o.count, n);
        assert_eq!(o.bucket_sum(), n as u128);
        let with_calls = o.epochs.iter().filter(|e| e.iter().any(|&v| v > 0)).count();
        if with_calls >= 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "calls in {with_calls} epoch(s) only, run after run"
        );
    }
}

#[test]
fn profiler_snapshot_carries_clock_metadata_and_resets_all_layers() {
    let a = fuse_recorder();
    let b = Recorder::new("lower", ops::STANDARD, &RecorderConfig::default());
    let p = Profiler::new(vec![a.clone(), b.clone()]);
    p.set_extra("not_profiled", "OP_READ,OP_WRITE").unwrap();
    a.measure(0, || ());
    b.measure(1, || ());
    let snap = p.snapshot();
    assert_eq!(snap.layers.len(), 2);
    assert!(snap.cycles_per_sec.unwrap() > 0);
    assert_eq!(snap.extra("not_profiled"), Some("OP_READ,OP_WRITE"));
    let started = snap.started_unix_ns.unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2));
    p.reset();
    let snap = p.snapshot();
    assert!(snap.layers.iter().all(|l| l.ops.is_empty()));
    assert!(snap.started_unix_ns.unwrap() > started);
}

#[test]
fn set_extra_refuses_what_the_text_form_cannot_carry() {
    use profile_store::ExtraError;
    let p = Profiler::new(vec![fuse_recorder()]);
    assert_eq!(
        p.set_extra("two words", "x"),
        Err(ExtraError::BadKey("two words".into()))
    );
    assert_eq!(
        p.set_extra("Upper", "x"),
        Err(ExtraError::BadKey("Upper".into()))
    );
    assert_eq!(p.set_extra("", "x"), Err(ExtraError::BadKey("".into())));
    for reserved in [
        "layer",
        "clock",
        "cycles_per_sec",
        "started_unix_ns",
        "invariant_tsc",
    ] {
        assert_eq!(
            p.set_extra(reserved, "x"),
            Err(ExtraError::ReservedKey(reserved.into()))
        );
    }
    for value in ["a b", "a=b", "", "caf\u{e9}", "tab\t"] {
        let e = p.set_extra("note", value).unwrap_err();
        assert!(matches!(e, ExtraError::BadValue { .. }), "{value:?}: {e}");
        assert!(!e.to_string().contains('\n'));
    }
    // Nothing refused was set; what is set round-trips through both formats.
    assert!(p.snapshot().extra.is_empty());
    p.set_extra("note", "a,b;c").unwrap();
    p.set_extra("note", "replaced").unwrap();
    let snap = p.snapshot();
    assert_eq!(snap.extra, [("note".to_string(), "replaced".to_string())]);
    assert_eq!(
        profile_store::text::parse(&profile_store::text::write(&snap)).unwrap(),
        snap
    );
    assert_eq!(
        profile_store::json::parse(&profile_store::json::write(&snap)).unwrap(),
        snap
    );
}

#[test]
#[should_panic(expected = "layer name \"two words\"")]
fn recorder_refuses_a_layer_name_with_a_space() {
    let _ = Recorder::new("two words", &["OP_READ"], &RecorderConfig::default());
}

#[test]
#[should_panic(expected = "layer name \"a=b\"")]
fn recorder_refuses_a_layer_name_with_an_equals_sign() {
    let _ = Recorder::new("a=b", &["OP_READ"], &RecorderConfig::default());
}

#[test]
#[should_panic(expected = "operation name \"OP_read\"")]
fn recorder_refuses_a_bad_operation_name() {
    let _ = Recorder::new("fuse", &["OP_READ", "OP_read"], &RecorderConfig::default());
}

#[test]
#[should_panic(expected = "operation OP_READ given twice")]
fn recorder_refuses_an_operation_given_twice() {
    let _ = Recorder::new(
        "fuse",
        &["OP_READ", "OP_WRITE", "OP_READ"],
        &RecorderConfig::default(),
    );
}
