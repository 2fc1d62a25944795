//! raif with `--kernel`: the `kernel` layer counts the volume's FUSE requests exactly as the
//! `fuse` layer does, and the branches' device has its block layer.

use std::fs;

use test_support::{Transport, transports};

use crate::fixture::Fixture;

transports!(raif_kernel_layer_counts_as_fuse_and_branches_have_their_device);

fn raif_kernel_layer_counts_as_fuse_and_branches_have_their_device(t: Transport) {
    let Some(mut f) = Fixture::new(t, "kernel", 3) else {
        return;
    };
    f.mount(&["--level", "5", "--kernel"]);
    for i in 0..30 {
        fs::create_dir(f.m(&format!("d{i}"))).unwrap();
        fs::write(f.m(&format!("f{i}")), vec![7u8; 70_000]).unwrap();
    }
    let p = test_support::profile_when(&f.mnt, |p| {
        profile_store::views::check(p, 0).is_empty()
            && test_support::op_counts(p, "kernel") == test_support::op_counts(p, "fuse")
    });
    assert_eq!(
        test_support::op_counts(&p, "kernel"),
        test_support::op_counts(&p, "fuse")
    );
    assert_eq!(p.layer("kernel").unwrap().count("OP_MKDIR"), 30);
    // The branches lie in the system's temporary directory: on a block device here, or not.
    let blocks = p.extra("block_layers").expect("block_layers key");
    if blocks.starts_with("none:") {
        eprintln!("no block device under the branches: {blocks}");
    } else {
        for name in blocks.split(',') {
            assert!(p.layer(&format!("block@dev:{name}")).is_some(), "{blocks}");
        }
    }
}

transports!(raif_syscall_layer_counts_the_volumes_calls);

/// raif with `--syscalls`: the volume's own calls in `syscall` (a cached stat never reaches
/// the daemon), its control files (`.raif` among them) not counted, and nothing loaded after
/// the unmount.
fn raif_syscall_layer_counts_the_volumes_calls(t: Transport) {
    let Some(mut f) = Fixture::new(t, "syscalls", 3) else {
        return;
    };
    f.mount(&["--level", "5", "--syscalls"]);
    fs::write(f.m("data"), vec![9u8; 70_000]).unwrap();
    let ids = test_support::bpf_programs_of(f.pid());
    assert_eq!(ids.len(), 5, "{ids:?}");
    // Until the level counts (the mount point exists a moment before its device is known).
    let sys = |p: &profile_store::Profile, op: &str| p.layer("syscall").map_or(0, |l| l.count(op));
    test_support::profile_when(&f.mnt, |p| {
        fs::metadata(&f.mnt).unwrap();
        sys(p, "SYS_STATX") > 0
    });
    fs::write(f.m(".fsprof"), b"").unwrap();
    for _ in 0..200 {
        fs::metadata(f.m("data")).unwrap();
    }
    for _ in 0..5 {
        fs::read(f.m(".raif")).unwrap();
    }
    let p = test_support::profile_when(&f.mnt, |p| sys(p, "SYS_STATX") >= 200);
    assert_eq!(
        sys(&p, "SYS_STATX"),
        200,
        "{:?}",
        test_support::op_counts(&p, "syscall")
    );
    assert_eq!(sys(&p, "SYS_OPENAT"), 0, ".raif's opens are not counted");
    let fuse = p.layer("fuse").unwrap();
    assert!(fuse.count("OP_GETATTR") + fuse.count("OP_LOOKUP") < 20);
    f.unmount();
    assert_eq!(test_support::bpf_programs_gone(&ids), Vec::<u32>::new());
}
