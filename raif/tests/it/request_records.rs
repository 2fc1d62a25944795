//! Request records on RAIF: branch calls are named `branchN:call` in the breakdown and the
//! slow log, paths come from the inode table, and `branch=` rules inject into one branch.

use std::fs;
use test_support::{Transport, transports};

use crate::fixture::Fixture;

transports!(branch_calls_are_named_by_branch_with_paths_and_branch_injections_counted);

fn branch_calls_are_named_by_branch_with_paths_and_branch_injections_counted(t: Transport) {
    let Some(f) = Fixture::mounted(
        t,
        "reqrec",
        2,
        &[
            "--level",
            "1",
            "--breakdown",
            "--slow",
            "0s",
            "--inject",
            "branch=1:pwrite,every=1,errno=EIO",
        ],
    ) else {
        return;
    };
    fs::create_dir(f.m("d")).unwrap();
    fs::write(f.m("d/file"), vec![5u8; 8192]).unwrap();
    let p = f.profile();
    let injected: u64 = p.extra("injected").unwrap().parse().unwrap();
    assert!(injected >= 1, "the branch-1 writes were injected");
    let lines = &p.section("inner_calls").unwrap().lines;
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("OP_WRITE ") && l.contains(" call=branch0:pwrite ")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("OP_WRITE ") && l.contains(" call=branch1:pwrite ")),
        "{lines:?}"
    );
    let slow = fs::read_to_string(f.m(".fsprof.slow")).unwrap();
    let write = slow
        .lines()
        .find(|l| l.contains("\"op\":\"OP_WRITE\""))
        .expect("a slow write record");
    assert!(write.contains("\"path\":\"/d/file\""), "{write}");
    assert!(write.contains("\"call\":\"branch0:pwrite\""), "{write}");
    assert!(write.contains("\"call\":\"branch1:pwrite\""), "{write}");
}
