//! The request records, applied by the profiling layer, over the fake file system: injected errors and delays (and their
//! counts), the slow log with the inner calls of each request, the trace carried only when a
//! record needs it, the breakdown, hot files and per-key profiles. Counts only: nothing here
//! depends on how long a request took, but that an injected delay is at least its length.

use std::sync::Arc;

use profile_store::{ClockInfo, Extension, RecorderConfig};

use super::*;
use crate::filesystem::FileSystem;
use crate::filesystem::fake::{FAKE_DATA, Fake};
use crate::filesystem::trace::MAX_CALLS;
use crate::filesystem::{Ino, Key};
use crate::layers::profiled::{Profiled, profiled};
use crate::protocol::ops::{Op, Sys};
use crate::records::breakdown::Breakdown;
use crate::records::by::{ByKey, KeyKind};
use crate::records::hot::HotFiles;
use crate::records::inject::{Injector, Rule};
use crate::records::slow::SlowLog;
use crate::toolkit::lower::Lower;

/// `inner` with the records of `set` (and no `fuse` layer).
fn recorded<F: FileSystem>(inner: F, set: RecordSet) -> Profiled<F> {
    profiled(inner, None, None, set)
}

fn req(op: Op, ino: u64) -> Request<'static> {
    // A caller that lives (this process): an injected delay ends when its caller is gone.
    Request::new(op, 1, Ino(ino), std::process::id(), 1000, 1000)
}

fn injector(rules: &[&str]) -> Arc<Injector> {
    let rules = rules.iter().map(|r| Rule::parse(r).unwrap()).collect();
    Arc::new(Injector::new(rules, None))
}

/// A slow log of requests of at least `threshold_cycles`.
fn slow_log(threshold_cycles: u64) -> Arc<SlowLog> {
    Arc::new(SlowLog::new(threshold_cycles, 100, None, None).unwrap())
}

/// The slow log's records.
fn records(log: &SlowLog) -> Vec<serde_json::Value> {
    let text = String::from_utf8(log.contents()).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A fake file system whose every request makes `calls` lower `pread`s (through a lower
/// layer, as the passthrough's calls are made).
fn preading(calls: usize) -> Fake {
    let lower = Lower::new(None);
    Fake::during(move |req| {
        for _ in 0..calls {
            lower.call(req, Sys::Pread, || ());
        }
    })
}

fn errno<T: std::fmt::Debug>(r: io::Result<T>) -> Option<i32> {
    r.expect_err("an error").raw_os_error()
}

fn read(fs: &Profiled<Fake>, offset: u64, size: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; size];
    let n = fs.read(&req(Op::Read, 5), Ino(5), &Key::new(7), offset, &mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

#[test]
fn with_nothing_on_requests_pass_untouched() {
    let fs = recorded(Fake::new(), RecordSet::default());
    assert!(fs.hook().records().set().is_none());
    assert_eq!(read(&fs, 0, 4).unwrap(), &FAKE_DATA[..4]);
    let calls = fs.inner().calls();
    assert_eq!(calls.len(), 1);
    assert!(!calls[0].traced);
}

#[test]
fn an_injected_errno_fails_the_request_before_the_file_system() {
    let inject = injector(&["op=getattr,every=2,errno=EIO"]);
    let set = RecordSet {
        inject: Some(inject.clone()),
        ..RecordSet::default()
    };
    let fs = recorded(Fake::new(), set);
    let answers: Vec<_> = (0..4)
        .map(|_| {
            let r = fs.getattr(&req(Op::Getattr, 5), Ino(5), None);
            r.err().and_then(|e| e.raw_os_error())
        })
        .collect();
    assert_eq!(answers, [None, Some(libc::EIO), None, Some(libc::EIO)]);
    // Other operations are not the rule's; unrecorded requests are not seen by any rule.
    fs.lookup(&req(Op::Lookup, 1), Ino(1), "x".as_ref())
        .unwrap();
    let quiet = req(Op::Getattr, 5).unrecorded(Ino(5));
    fs.getattr(&quiet, Ino(5), None).unwrap();
    fs.getattr(&quiet, Ino(5), None).unwrap();
    let calls = fs.inner().calls();
    assert_eq!(
        calls.len(),
        5,
        "2 getattrs, a lookup, 2 unrecorded getattrs"
    );
    assert!(
        calls.iter().all(|c| !c.traced),
        "an injection needs no trace"
    );
    assert_eq!(inject.injected(), 2);
    assert_eq!(
        inject.sections()[0].lines,
        ["op=getattr,every=2,errno=EIO seen=4 injected=2"]
    );
}

#[test]
fn an_injected_delay_is_served_after_it_and_found_by_the_slow_log() {
    let inject = injector(&["op=read,every=2,delay=2ms"]);
    // Half the delay: the delayed request is over it, whatever the machine does.
    let threshold = ClockInfo::get().secs_to_cycles(0.001);
    let slow = slow_log(threshold);
    let set = RecordSet {
        inject: Some(inject.clone()),
        slow: Some(slow.clone()),
        ..RecordSet::default()
    };
    let fs = recorded(preading(1), set);
    for offset in [0, 1] {
        let t = std::time::Instant::now();
        assert_eq!(
            read(&fs, offset, 3).unwrap(),
            &FAKE_DATA[offset as usize..][..3]
        );
        if offset == 1 {
            assert!(t.elapsed() >= std::time::Duration::from_millis(2));
        }
    }
    assert_eq!(
        fs.inner().calls().len(),
        2,
        "a delayed request is still served"
    );
    assert_eq!(inject.injected(), 1);
    assert_eq!(
        inject.sections()[0].lines,
        ["op=read,every=2,delay=2ms seen=2 injected=1"]
    );
    // The delayed read (at offset 1) is in the slow log; the other only if the machine
    // stalled it.
    let delayed: Vec<_> = records(&slow)
        .into_iter()
        .filter(|r| r["offset"] == 1)
        .collect();
    assert_eq!(delayed.len(), 1);
    assert_eq!(delayed[0]["op"], "OP_READ");
    assert_eq!(delayed[0]["size"], 3);
    assert_eq!(delayed[0]["inner"][0]["call"], "pread");
}

#[test]
fn the_slow_log_gets_each_request_over_its_threshold_with_its_inner_calls() {
    let slow = slow_log(0);
    let set = RecordSet {
        slow: Some(slow.clone()),
        ..RecordSet::default()
    };
    let fs = recorded(preading(MAX_CALLS + 4), set);
    read(&fs, 4096, 100).unwrap();
    fs.inner().fail_with(libc::ENOENT);
    let r = fs.lookup(&req(Op::Lookup, 1), Ino(1), "gone".as_ref());
    assert_eq!(errno(r), Some(libc::ENOENT));
    let quiet = req(Op::Getattr, 5).unrecorded(Ino(5));
    assert!(fs.getattr(&quiet, Ino(5), None).is_err());
    let got = records(&slow);
    assert_eq!(
        got.len(),
        2,
        "the unrecorded request is not logged: {got:?}"
    );
    let r = &got[0];
    assert_eq!(
        (r["op"].as_str(), r["errno"].as_i64()),
        (Some("OP_READ"), Some(0))
    );
    assert_eq!(
        (r["ino"].as_u64(), r["pid"].as_u64()),
        (Some(5), Some(std::process::id() as u64))
    );
    assert_eq!(
        (r["offset"].as_u64(), r["size"].as_u64()),
        (Some(4096), Some(100))
    );
    let inner = r["inner"].as_array().unwrap();
    assert_eq!(inner.len(), MAX_CALLS);
    assert!(inner.iter().all(|c| c["call"] == "pread"));
    assert_eq!(r["inner_dropped"], 4);
    let l = &got[1];
    assert_eq!(
        (l["op"].as_str(), l["errno"].as_i64()),
        (Some("OP_LOOKUP"), Some(2))
    );
    assert_eq!(l["offset"], serde_json::Value::Null);
    // Over no threshold, nothing is logged (but the trace is still carried).
    let never = slow_log(u64::MAX);
    let set = RecordSet {
        slow: Some(never.clone()),
        ..RecordSet::default()
    };
    let fs = recorded(preading(1), set);
    for _ in 0..10 {
        read(&fs, 0, 1).unwrap();
    }
    assert!(never.is_empty());
    assert!(fs.inner().calls().iter().all(|c| c.traced));
}

/// Whether the requests of a records layer with `set` carry a trace down.
fn traced(set: RecordSet) -> bool {
    let fs = recorded(Fake::new(), set);
    fs.getattr(&req(Op::Getattr, 5), Ino(5), None).unwrap();
    fs.inner().calls()[0].traced
}

#[test]
fn the_trace_is_carried_only_when_a_record_needs_it() {
    let res = RecorderConfig::default().resolution;
    let none = RecordSet::default;
    assert!(!traced(none()));
    assert!(!traced(RecordSet {
        inject: Some(injector(&["lower=pread,every=1,errno=EIO"])),
        ..none()
    }));
    assert!(!traced(RecordSet {
        by: Some(Arc::new(ByKey::new(
            KeyKind::Uid,
            4,
            &RecorderConfig::default()
        ))),
        ..none()
    }));
    assert!(traced(RecordSet {
        breakdown: Some(Arc::new(Breakdown::new(res))),
        ..none()
    }));
    assert!(traced(RecordSet {
        slow: Some(slow_log(u64::MAX)),
        ..none()
    }));
    assert!(traced(RecordSet {
        hot: Some(Arc::new(HotFiles::new(4, None))),
        ..none()
    }));
}

#[test]
fn the_breakdown_gets_each_request_with_its_inner_calls() {
    let breakdown = Arc::new(Breakdown::new(RecorderConfig::default().resolution));
    let set = RecordSet {
        breakdown: Some(breakdown.clone()),
        ..RecordSet::default()
    };
    let fs = recorded(preading(2), set);
    for _ in 0..3 {
        read(&fs, 0, 1).unwrap();
    }
    fs.getattr(&req(Op::Getattr, 5).unrecorded(Ino(5)), Ino(5), None)
        .unwrap();
    let rows = breakdown.snapshot().rows;
    assert!(rows.iter().all(|r| r.op == "OP_READ"), "{rows:?}");
    assert_eq!(rows.iter().map(|r| r.count).sum::<u64>(), 3);
    for r in &rows {
        assert_eq!(r.calls.len(), 1);
        assert_eq!(
            (r.calls[0].call.as_str(), r.calls[0].count),
            ("pread", 2 * r.count)
        );
    }
}

#[test]
fn hot_files_count_each_recorded_request_for_its_node() {
    let hot = Arc::new(HotFiles::new(4, None));
    let set = RecordSet {
        hot: Some(hot.clone()),
        ..RecordSet::default()
    };
    let fs = recorded(Fake::new(), set);
    for (ino, n) in [(5, 3), (6, 1)] {
        for _ in 0..n {
            fs.getattr(&req(Op::Getattr, ino), Ino(ino), None).unwrap();
        }
    }
    for _ in 0..5 {
        let quiet = req(Op::Getattr, 7).unrecorded(Ino(7));
        fs.getattr(&quiet, Ino(7), None).unwrap();
    }
    let by_calls: Vec<_> = hot
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("by=calls"))
        .collect();
    assert_eq!(by_calls.len(), 2, "{by_calls:?}");
    assert!(by_calls[0].starts_with("by=calls rank=1 ino=5 value=3 error=0"));
    assert!(by_calls[1].starts_with("by=calls rank=2 ino=6 value=1 error=0"));
}

#[test]
fn per_key_profiles_count_each_request_once_in_its_key() {
    let by = Arc::new(ByKey::new(KeyKind::Uid, 4, &RecorderConfig::default()));
    let set = RecordSet {
        by: Some(by.clone()),
        ..RecordSet::default()
    };
    let fs = recorded(Fake::new(), set);
    for (uid, n) in [(1000, 2), (1001, 1)] {
        for _ in 0..n {
            let r = Request::new(Op::Getattr, 1, Ino(5), 1, uid, uid);
            fs.getattr(&r, Ino(5), None).unwrap();
        }
    }
    let layers = by.layers();
    let count = |name: &str| {
        layers
            .iter()
            .find(|l| l.name == name)
            .map_or(0, |l| l.count("OP_GETATTR"))
    };
    assert_eq!(count("fuse@uid:1000"), 2);
    assert_eq!(count("fuse@uid:1001"), 1);
    assert_eq!(layers.iter().map(|l| l.total_count()).sum::<u64>(), 3);
}

/// Names node 1 `/` and node 5 `/d`.
struct TwoPaths;

impl crate::records::Paths for TwoPaths {
    fn path(&self, ino: Ino) -> Option<Vec<u8>> {
        match ino.0 {
            1 => Some(b"/".to_vec()),
            5 => Some(b"/d".to_vec()),
            _ => None,
        }
    }
}

#[test]
fn a_slow_record_names_the_node_or_the_name_in_its_directory() {
    let slow = Arc::new(SlowLog::new(0, 100, None, Some(Arc::new(TwoPaths))).unwrap());
    let set = RecordSet {
        slow: Some(slow.clone()),
        ..RecordSet::default()
    };
    let fs = recorded(Fake::new(), set);
    let r = |op, ino| Request::new(op, 1, Ino(ino), 0, 0, 0);
    fs.lookup(&r(Op::Lookup, 1), Ino(1), "top".as_ref())
        .unwrap();
    fs.mkdir(&r(Op::Mkdir, 5), Ino(5), "sub".as_ref(), 0o755)
        .unwrap();
    fs.getattr(&r(Op::Getattr, 5), Ino(5), None).unwrap();
    fs.getattr(&r(Op::Getattr, 9), Ino(9), None).unwrap();
    let paths: Vec<_> = records(&slow).iter().map(|r| r["path"].clone()).collect();
    assert_eq!(
        paths,
        [
            serde_json::json!("/top"),
            serde_json::json!("/d/sub"),
            serde_json::json!("/d"),
            serde_json::Value::Null
        ]
    );
}

#[test]
fn a_request_that_panics_is_timed_into_its_key_and_the_layer_serves_on() {
    let by = Arc::new(ByKey::new(KeyKind::Uid, 4, &RecorderConfig::default()));
    let slow = slow_log(0);
    let set = RecordSet {
        by: Some(by.clone()),
        slow: Some(slow.clone()),
        ..RecordSet::default()
    };
    let inner = Fake::during(|req| {
        if req.op == Op::Read {
            panic!("deliberate panic in the file system");
        }
    });
    let fs = recorded(inner, set);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(&fs, 0, 1)));
    assert!(r.is_err(), "the panic goes on to the transport");
    fs.getattr(&req(Op::Getattr, 5), Ino(5), None).unwrap();
    let layers = by.layers();
    let mine = layers.iter().find(|l| l.name == "fuse@uid:1000").unwrap();
    for op in ["OP_READ", "OP_GETATTR"] {
        let o = mine.op(op).unwrap();
        assert_eq!((o.count, o.bucket_sum()), (1, 1), "{op}");
    }
    // The slow log records answers: the panicked request has none.
    let ops: Vec<_> = records(&slow).iter().map(|r| r["op"].clone()).collect();
    assert_eq!(ops, ["OP_GETATTR"]);
}
