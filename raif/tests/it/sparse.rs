//! Sparse files: a file of terabytes that holds a few kilobytes costs nothing to make, so it
//! must cost next to nothing to scrub and rebuild (both used to read every hole, and rebuild
//! wrote the zeros, filling the new branch).

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use test_support::{Transport, transports};

use crate::fixture::{Fixture, Output, bin, hash, level_policy};
use crate::records::record;

/// Runs `raif ARGS`; fails the test if it does not end within `limit` (a guard against a
/// command that reads terabytes of holes, not a measure of speed).
fn raif_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run raif");
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("raif {args:?} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().expect("output");
    Output {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

transports!(scrub_and_rebuild_skip_the_holes_of_sparse_files);

fn scrub_and_rebuild_skip_the_holes_of_sparse_files(t: Transport) {
    let Some(mut f) = Fixture::new(t, "sparse", 3) else {
        return;
    };
    // tmpfs: files of up to 8 EiB, and holes reported by SEEK_DATA.
    if !f.tmpfs(&["64m", "64m", "64m"]) {
        return;
    }
    let pol = level_policy(&f, Some(5));
    let args = ["--policy", &pol];
    f.mount(&args);
    let size = 16u64 << 40;
    let mut want = Vec::new();
    for name in ["r5-big", "r1-big", "r0-big"] {
        let h = File::create(f.m(name)).unwrap();
        h.set_len(size).unwrap();
        let mut pieces = Vec::new();
        for (i, at) in [0, size / 3, size - 5000].into_iter().enumerate() {
            let data = vec![i as u8 + 1; 5000];
            h.write_all_at(&data, at).unwrap();
            pieces.push((at, data));
        }
        want.push((name, pieces));
    }
    assert_eq!(f.unmount(), Some(0));
    let list = f.branch_list();
    let limit = Duration::from_secs(60);
    let out = raif_within(&["scrub", "--branches", &list], limit);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains(" 0 mismatches"), "{}", out.stdout);
    // The data between the holes is still compared.
    let l = record(&f.b(0, "r5-big")).unwrap().layout;
    let (row, col, a) = l.locate(size / 3 + 10);
    let part = f.b(l.data_branch(row, col), "r5-big");
    let h = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&part)
        .unwrap();
    let mut b = [0u8; 1];
    let at = row * l.stripe as u64 + a;
    h.read_exact_at(&mut b, at).unwrap();
    h.write_all_at(&[b[0] ^ 1], at).unwrap();
    let out = raif_within(&["scrub", "--branches", &list], limit);
    assert_eq!(out.code, 1, "{}", out.stdout);
    // Found by its block checksum: the branch and the block are named.
    let db = l.data_branch(row, col);
    assert!(
        out.stdout.contains(&format!(
            "mismatch r5-big: block on branch {db} at part offset {} ",
            at / 4096 * 4096
        )),
        "{}",
        out.stdout
    );
    h.write_all_at(&b, at).unwrap();
    drop(h);

    // Branch 1 replaced by an empty file system: the rebuilt parts are as sparse as the
    // others (a few kilobytes each, not terabytes of zeros).
    for name in ["r5-big", "r1-big", "r0-big"] {
        fs::remove_file(f.b(1, name)).unwrap();
    }
    fs::remove_file(f.b(1, ".raif-branch")).unwrap();
    let b1 = f.branches[1].display().to_string();
    let out = raif_within(
        &["rebuild", "--branches", &list, "--replace", "1", &b1],
        limit,
    );
    assert_eq!(out.code, 1, "RAIF0 is lost: {}{}", out.stdout, out.stderr);
    for name in ["r5-big", "r1-big"] {
        let m = fs::metadata(f.b(1, name)).unwrap();
        assert!(
            m.blocks() * 512 < 1 << 20,
            "{name}: {} bytes allocated",
            m.blocks() * 512
        );
        assert_eq!(
            m.len(),
            l.part_size(1, size)
                .max(if name == "r1-big" { size } else { 0 })
        );
    }
    let out = raif_within(&["scrub", "--branches", &list], limit);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    f.mount(&args);
    for (name, pieces) in want.iter().filter(|(n, _)| *n != "r0-big") {
        let h = File::open(f.m(name)).unwrap();
        assert_eq!(h.metadata().unwrap().len(), size);
        for (at, data) in pieces {
            let mut got = vec![0u8; data.len() + 10];
            let n = h.read_at(&mut got, *at).unwrap();
            assert_eq!(hash(&got[..data.len()]), hash(data), "{name} at {at}");
            assert!(n >= data.len());
        }
        let mut hole = vec![1u8; 4096];
        h.read_exact_at(&mut hole, size / 2).unwrap();
        assert!(hole.iter().all(|&x| x == 0), "{name}: a hole reads zeros");
    }
}

transports!(st_blocks_counts_what_the_parts_hold);

/// `st_blocks` counted a file as if its parts held every byte: a sparse file of 1 GiB showed
/// 2 Mi blocks. It counts what the parts hold, as `df` counts space: one copy of a RAIF1 file,
/// a striped file's parts less the parity's share. Through `stat` of a path and of an open
/// file.
fn st_blocks_counts_what_the_parts_hold(t: Transport) {
    let Some(mut f) = Fixture::new(t, "blocks", 3) else {
        return;
    };
    let pol = level_policy(&f, Some(5));
    f.mount(&["--policy", &pol, "--stripe", "4K"]);
    for name in ["r0-s", "r1-s", "r4-s", "r5-s"] {
        let h = File::create(f.m(name)).unwrap();
        h.set_len(1 << 30).unwrap();
        h.write_all_at(&[1u8; 64 << 10], 512 << 20).unwrap();
        h.sync_all().unwrap();
        // 64 KiB of data: 128 blocks, and some for the partial rows' edges at most.
        for blocks in [
            fs::metadata(f.m(name)).unwrap().blocks(),
            h.metadata().unwrap().blocks(),
        ] {
            assert!((128..=160).contains(&blocks), "{name}: {blocks} blocks");
        }
        // A file with no holes: its size's worth.
        let full = format!("{name}-full");
        fs::write(f.m(&full), vec![2u8; 96 << 10]).unwrap();
        let blocks = fs::metadata(f.m(&full)).unwrap().blocks();
        assert!((192..=224).contains(&blocks), "{full}: {blocks} blocks");
    }
}
