//! Request records, end to end: fsprof-fuse records, the fsprof tools read.
//!
//! The fidelity experiment (the thesis's validation of a profiler): a known delay is injected
//! into one of every 1000 lower `pread`s under a direct-I/O read workload, and the profile, the
//! breakdown behind `fsprof why` and the slow log must all find it again.

use std::fs;
use std::process::Command;

use profile_store::Profile;
use tests::{Mounted, run};

const READS: u64 = 24_000;
const EVERY: u64 = 1000;

fn profile(m: &Mounted) -> Profile {
    profile_store::parse_any(&fs::read(m.mnt.join(".fsprof")).unwrap()).unwrap()
}

#[test]
fn an_injected_lower_delay_is_found_by_the_profile_why_and_the_slow_log() {
    let Some(m) = Mounted::start(
        "fidelity",
        "fsprof-fuse",
        &[
            "--direct-io",
            "--breakdown",
            "--slow",
            "500us",
            "--inject",
            "lower=pread,every=1000,delay=1ms",
        ],
    ) else {
        return;
    };
    fs::write(m.lower.join("data"), vec![7u8; (READS * 1024) as usize]).unwrap();
    // One reader process, READS reads of 1 KiB that all reach the daemon (direct I/O).
    let mut dd = Command::new("dd")
        .arg(format!("if={}", m.mnt.join("data").display()))
        .args([
            "of=/dev/null",
            "bs=1k",
            &format!("count={READS}"),
            "status=none",
        ])
        .spawn()
        .unwrap();
    let dd_pid = dd.id();
    assert!(dd.wait().unwrap().success());

    let p = profile(&m);
    let injected = READS / EVERY;
    assert_eq!(p.extra("injected"), Some(injected.to_string().as_str()));
    let fuse = p.layer("fuse").unwrap();
    let read = fuse.op("OP_READ").unwrap();
    assert_eq!(read.count, READS, "every read reached the daemon");
    // Every injected read took at least 1 ms: it landed at or above the 1 ms bucket.
    let hz = p.cycles_per_sec.unwrap();
    let one_ms = fuse.resolution.bucket(hz / 1000);
    let merged = read.merged();
    let slow_reads: u64 = merged[one_ms..].iter().sum();
    assert!(
        slow_reads >= injected,
        "{slow_reads} reads at >= 1 ms, {injected} injected"
    );
    eprintln!(
        "fidelity: {slow_reads} reads at >= 1 ms ({} above the {injected} injected)",
        slow_reads - injected
    );

    // fsprof why: the peak holding the 1 ms bucket is explained by pread, >= 95% of its time.
    let (code, out, err) = run(
        "fsprof",
        &[
            "why".as_ref(),
            m.mnt.as_os_str(),
            "read".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let peak = doc["peaks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|pk| {
            let (lo, hi) = (pk["lo"].as_u64().unwrap(), pk["hi"].as_u64().unwrap());
            (lo..=hi).contains(&(one_ms as u64))
        })
        .unwrap_or_else(|| panic!("no peak holds bucket {one_ms}: {out}"));
    assert!(peak["requests"].as_u64().unwrap() >= injected, "{out}");
    let first = &peak["calls"][0];
    assert_eq!(first["call"], "pread", "{out}");
    assert!(first["share"].as_f64().unwrap() >= 0.95, "{out}");
    // The text form names the estimate.
    let (code, text, err) = run(
        "fsprof",
        &["why".as_ref(), m.mnt.as_os_str(), "read".as_ref()],
    );
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("estimated p50"), "{text}");

    // The slow log (threshold 500 us) holds every injected read, with its path and reader.
    let slow = fs::read_to_string(m.mnt.join(".fsprof.slow")).unwrap();
    let delayed: Vec<serde_json::Value> =
        slow.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|r| {
                r["op"] == "OP_READ"
                    && r["inner"].as_array().unwrap().iter().any(|c| {
                        c["call"] == "pread" && c["latency_ns"].as_u64().unwrap() >= 1_000_000
                    })
            })
            .collect();
    assert_eq!(delayed.len() as u64, injected, "{slow}");
    for r in &delayed {
        assert_eq!(r["path"], "/data", "{r}");
        assert_eq!(r["pid"].as_u64(), Some(dd_pid as u64), "{r}");
        assert_eq!(r["comm"], "dd", "{r}");
        assert_eq!(r["size"].as_u64(), Some(1024), "{r}");
    }
    let (code, out, err) = run("fsprof", &["slow".as_ref(), m.mnt.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines().filter(|l| l.contains("/data  [pread")).count() as u64 >= injected,
        "{out}"
    );

    // A reset clears the slow ring and the breakdown with the profile.
    fs::write(m.mnt.join(".fsprof"), b"reset").unwrap();
    assert_eq!(fs::read_to_string(m.mnt.join(".fsprof.slow")).unwrap(), "");
    let p = profile(&m);
    assert_eq!(p.extra("injected"), Some("0"));
    assert!(
        p.section("inner_calls")
            .unwrap()
            .lines
            .iter()
            .all(|l| !l.starts_with("OP_READ"))
    );
}
