//! A replay stays beneath its directory: a traced program that acts outside its work
//! directory through symbolic links it makes (`escape.c`) is replayed, twice, in another
//! directory; nothing outside that directory changes, the links are recreated inside it, and
//! the calls that would have gone out are refused and reported.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use user_trace::{Refusal, RunConfig, run};

/// The sentinel tree the program acts on: victim/gone, victim/moveme and file.
fn sentinel(at: &Path) {
    if at.exists() {
        std::fs::remove_dir_all(at).unwrap();
    }
    std::fs::create_dir_all(at.join("victim")).unwrap();
    std::fs::write(at.join("victim/gone"), "gone\n").unwrap();
    std::fs::write(at.join("victim/moveme"), "moveme\n").unwrap();
    std::fs::write(at.join("file"), "precious\n").unwrap();
    std::fs::set_permissions(at.join("file"), std::fs::Permissions::from_mode(0o644)).unwrap();
}

/// Everything about a tree that a write, a removal, a rename or a chmod changes: each entry's
/// path, type, mode, size, modification time and content (or link target), in order.
fn checksum(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let what = if m.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else if m.file_type().is_symlink() {
                format!("link {:?}", std::fs::read_link(&p).unwrap())
            } else {
                format!("{:?}", String::from_utf8_lossy(&std::fs::read(&p).unwrap()))
            };
            out.push(format!(
                "{} mode {:o} size {} mtime {}.{} {what}",
                p.strip_prefix(dir).unwrap().display(),
                m.mode(),
                m.len(),
                m.mtime(),
                m.mtime_nsec()
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn a_replay_through_links_out_of_its_directory_changes_nothing_outside_and_reports_it() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = super::compile(tmp.path(), "escape", &[]);
    let outside = tmp.path().join("sentinel");
    sentinel(&outside);
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let trace = tmp.path().join("escape.trace");
    let out = run(&RunConfig {
        command: vec![prog.into(), outside.clone().into()],
        trace: Some(trace.clone()),
        dir: Some(work.clone()),
        ..RunConfig::default()
    })
    .unwrap();
    assert_eq!(out.exit_code, 0);
    // The traced run did act outside its directory.
    assert_eq!(std::fs::read(outside.join("file")).unwrap(), b"pwned\n");
    assert!(outside.join("victim/owned").exists() && outside.join("dotdot").exists());

    sentinel(&outside);
    let before = checksum(&outside);
    // The replay directory sits beside the sentinel as the work directory did, so that "up"
    // (-> "..") leads to it.
    let target = tmp.path().join("replay");
    for round in 0..2 {
        let report =
            user_trace::replay(&user_trace::ReplayConfig::new(&trace, &target), None).unwrap();
        let text = report.to_string();
        assert_eq!(checksum(&outside), before, "round {round}: {text}");
        // The 3 opens, the chmod, the unlink, the mkdir and the 2 renames.
        assert_eq!(report.refused, 8, "round {round}: {text}");
        assert_eq!(report.refusals.len(), 5, "{text}");
        assert!(
            report.refusals.iter().all(|r| r.why == Refusal::Escapes),
            "{text}"
        );
        assert!(
            report.refusals[0]
                .call
                .starts_with("open(\"esc/owned\", O_WRONLY|O_CREAT|O_TRUNC, 0644) = "),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "refused 8 calls that would have reached outside {} (through a symbolic link \
                 or ..) or replaced it; the first 5:\n  refused: ",
                target.display()
            )),
            "{text}"
        );
        // The writes and closes on what the refused opens would have opened.
        assert_eq!(report.skipped_descriptor, 5, "{text}");
        if round == 0 {
            assert_eq!(report.mismatches, 0, "{text}");
        }
    }
    // The links themselves are recreated inside, as traced; the one to a place inside the
    // work directory points to the same place inside the replay directory, and was followed.
    let link = |n: &str| std::fs::read_link(target.join(n)).unwrap();
    assert_eq!(link("esc"), outside.join("victim"));
    assert_eq!(link("abs"), outside.join("file"));
    assert_eq!(link("up"), PathBuf::from(".."));
    assert_eq!(link("good"), PathBuf::from("inside"));
    assert!(
        std::fs::symlink_metadata(target.join("inside"))
            .unwrap()
            .is_file()
    );
    assert!(target.join("local").exists() && !target.join("stolen").exists());
}
