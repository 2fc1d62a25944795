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
