//! Traces name their processes: each program a process runs (the command, each exec) is
//! recorded with its command name, `fsprof trace stats` and `show` name them, a fork child is
//! named after what it was forked from, and a trace written before names were recorded
//! (version 1) still reads, saying so.

use std::path::{Path, PathBuf};

use user_trace::{RunConfig, run};

use super::compile;

/// Traces `program args` in `dir`; returns the trace.
fn traced(dir: &Path, program: &Path, args: &[&Path], work: Option<PathBuf>) -> PathBuf {
    let trace = dir.join(format!(
        "{}.trace",
        program.file_name().unwrap().to_string_lossy()
    ));
    let mut command = vec![program.as_os_str().to_owned()];
    command.extend(args.iter().map(|a| a.as_os_str().to_owned()));
    let out = run(&RunConfig {
        command,
        trace: Some(trace.clone()),
        dir: work,
        ..RunConfig::default()
    })
    .unwrap();
    assert_eq!(out.exit_code, 0);
    trace
}

/// `trace` rewritten as a version 1 trace: no image chunks, version 1 in its header.
fn as_version_1(trace: &Path) -> PathBuf {
    let b = std::fs::read(trace).unwrap();
    assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), 3);
    let hlen = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
    let mut out = b[..hlen].to_vec();
    out[8..12].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32fast::hash(&out[..hlen - 4]);
    out[hlen - 4..].copy_from_slice(&crc.to_le_bytes());
    let (mut at, mut images) = (hlen, 0);
    while at < b.len() {
        let len = 64 + u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        if b[at + 4] == 3 {
            images += 1;
        } else {
            out.extend_from_slice(&b[at..at + len]);
        }
        at += len;
    }
    assert!(images > 0, "the trace has image chunks to drop");
    let old = trace.with_extension("v1");
    std::fs::write(&old, out).unwrap();
    old
}

#[test]
fn stats_and_show_name_each_process_and_a_trace_without_names_still_reads() {
    let tmp = tempfile::tempdir().unwrap();
    // A vfork child that execs the program again: two images, two pids.
    let vfork = compile(tmp.path(), "vfork", &[]);
    let trace = traced(tmp.path(), &vfork, &[&vfork], None);
    let s = user_trace::stats(&user_trace::StatsConfig {
        trace: trace.clone(),
    })
    .unwrap();
    assert_eq!(s.read.images, 2);
    let names: Vec<String> = s
        .processes
        .iter()
        .map(|(p, _)| s.names.describe(*p))
        .collect();
    let exe = vfork.display();
    // The child exec'd /proc/self/exe: its command name is the name it was exec'd by.
    assert_eq!(names, [format!("vfork ({exe})"), format!("exe ({exe})")]);
    let text = s.to_string();
    let (parent, _) = s.processes[0];
    assert!(
        text.lines()
            .any(|l| l.starts_with(&format!("pid {parent} "))
                && l.ends_with(&format!("  vfork ({exe})"))),
        "{text}"
    );
    assert!(
        text.lines().nth(1).unwrap().ends_with("  program"),
        "{text}"
    );
    let mut out = Vec::new();
    user_trace::show(
        &user_trace::ShowConfig {
            trace: trace.clone(),
            ..Default::default()
        },
        &mut out,
    )
    .unwrap();
    let listing = String::from_utf8(out).unwrap();
    let execs: Vec<&str> = listing
        .lines()
        .filter(|l| l.contains(" +++ exec "))
        .collect();
    assert_eq!(execs.len(), 2, "{listing}");
    assert!(
        execs[1].ends_with(&format!("+++ exec \"{exe}\", comm \"exe\" +++")),
        "{listing}"
    );

    // A fork child without an exec is named after its parent.
    let replay = compile(tmp.path(), "replay", &[]);
    let work = super::replay_workdir(tmp.path());
    let trace = traced(tmp.path(), &replay, &[], Some(work));
    let s = user_trace::stats(&user_trace::StatsConfig {
        trace: trace.clone(),
    })
    .unwrap();
    let (parent, child) = (s.processes[0].0, s.processes[1].0);
    let exe = replay.display();
    assert_eq!(s.names.describe(parent), format!("replay ({exe})"));
    assert_eq!(
        s.names.describe(child),
        format!("replay ({exe}, forked from {parent})")
    );

    // Without image chunks (version 1): everything reads, and says no name was recorded.
    let old = as_version_1(&trace);
    let s1 = user_trace::stats(&user_trace::StatsConfig { trace: old.clone() }).unwrap();
    assert_eq!(s1.read.images, 0);
    assert!(s1.read.problems().is_empty(), "{:?}", s1.read.problems());
    assert_eq!(s1.overall, s.overall);
    assert_eq!(s1.names.describe(parent), "(no name recorded)");
    assert!(
        s1.to_string()
            .lines()
            .any(|l| l.starts_with(&format!("pid {child} ")) && l.ends_with("  (no name recorded)")),
        "{s1}"
    );
    let mut out = Vec::new();
    let shown = user_trace::show(
        &user_trace::ShowConfig {
            trace: old.clone(),
            ..Default::default()
        },
        &mut out,
    )
    .unwrap();
    assert_eq!(shown.printed, s.overall.calls, "calls only, no exec lines");
    let target = tmp.path().join("replayed-v1");
    let r = user_trace::replay(&user_trace::ReplayConfig::new(&old, &target), None).unwrap();
    assert_eq!(r.mismatches, 0, "{r}");
}
