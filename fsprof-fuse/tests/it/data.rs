//! Data integrity: random offsets and sizes, a concurrent reader, large transfers.

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use fsprof_fuse::sys;

use crate::fixture::{Fixture, Transport};

use test_support::exerciser::Rng;

/// The byte every writer puts at absolute offset `o` (never 0, so unwritten bytes are told apart).
fn byte_at(o: u64) -> u8 {
    ((o.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8) | 1
}

const SIZE: u64 = 8 << 20;

fn random_offsets_and_sizes_with_a_concurrent_reader(t: Transport) {
    random_offsets_and_sizes(t, &[]);
}
transports!(random_offsets_and_sizes_with_a_concurrent_reader);

fn random_offsets_and_sizes_with_a_concurrent_reader_direct_io(t: Transport) {
    random_offsets_and_sizes(t, &["--direct-io"]);
}
transports!(random_offsets_and_sizes_with_a_concurrent_reader_direct_io);

/// Random writes checked against a reference while another thread reads, mounted with `args`.
fn random_offsets_and_sizes(t: Transport, args: &[&str]) {
    let Some(f) = Fixture::mounted(&format!("integrity{}", args.concat()), t, args) else {
        return;
    };
    let path = f.m("data");
    File::create(&path).unwrap().set_len(SIZE).unwrap();
    let mut reference = vec![0u8; SIZE as usize];
    let done = AtomicBool::new(false);
    let checked = AtomicU64::new(0);
    std::thread::scope(|s| {
        // Reader: every byte it sees is either still 0 or what the writer puts there.
        s.spawn(|| {
            let r = File::open(&path).unwrap();
            let mut rng = Rng(99);
            let mut buf = vec![0u8; 300_000];
            while !done.load(Ordering::Relaxed) {
                let off = rng.below(SIZE);
                let len = (1 + rng.below(buf.len() as u64)).min(SIZE - off) as usize;
                let n = sys::pread(r.as_fd(), &mut buf[..len], off).unwrap();
                assert_eq!(n, len);
                for (i, &b) in buf[..n].iter().enumerate() {
                    let o = off + i as u64;
                    assert!(
                        b == 0 || b == byte_at(o),
                        "offset {o}: read {b}, expected 0 or {}",
                        byte_at(o)
                    );
                }
                checked.fetch_add(1, Ordering::Relaxed);
            }
        });
        // However the writer ends (a failed assertion included), the reader stops.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = StopOnDrop(&done);
        let w = OpenOptions::new().write(true).open(&path).unwrap();
        let mut rng = Rng(7);
        let mut chunk = Vec::new();
        for _ in 0..1500 {
            let off = rng.below(SIZE);
            // Sizes from 1 byte to 2 MiB (past the 1 MiB request size), unaligned.
            let max = if rng.below(10) == 0 { 2 << 20 } else { 70_000 };
            let len = (1 + rng.below(max)).min(SIZE - off) as usize;
            chunk.clear();
            chunk.extend((0..len as u64).map(|i| byte_at(off + i)));
            let n = sys::pwrite(w.as_fd(), &chunk, off).unwrap();
            assert_eq!(n, len);
            reference[off as usize..off as usize + len].copy_from_slice(&chunk);
        }
        done.store(true, Ordering::Relaxed);
    });
    assert!(checked.load(Ordering::Relaxed) > 0);
    assert!(
        fs::read(&path).unwrap() == reference,
        "contents through the mount differ"
    );
    assert!(
        fs::read(f.l("data")).unwrap() == reference,
        "contents on LOWER differ"
    );
}

fn appends_and_truncates_match_a_reference(t: Transport) {
    let Some(f) = Fixture::mounted("appends", t, &[]) else {
        return;
    };
    let mut reference: Vec<u8> = Vec::new();
    let mut rng = Rng(3);
    for round in 0..300 {
        match rng.below(3) {
            0 => {
                let n = rng.below(10_000) as usize;
                let data: Vec<u8> = (0..n).map(|i| (i + round) as u8).collect();
                let mut a = OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(f.m("log"))
                    .unwrap();
                std::io::Write::write_all(&mut a, &data).unwrap();
                reference.extend_from_slice(&data);
            }
            1 => {
                let len = rng.below(reference.len() as u64 + 5000);
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(f.m("log"))
                    .unwrap()
                    .set_len(len)
                    .unwrap();
                reference.resize(len as usize, 0);
            }
            _ => {
                assert_eq!(
                    fs::read(f.m("log")).unwrap_or_default(),
                    reference,
                    "round {round}"
                );
            }
        }
    }
    assert_eq!(fs::read(f.l("log")).unwrap(), reference);
}
transports!(appends_and_truncates_match_a_reference);

fn shared_mmap_writes_reach_lower(t: Transport) {
    shared_mmap(t, &[]);
}
transports!(shared_mmap_writes_reach_lower);

fn shared_mmap_writes_reach_lower_direct_io(t: Transport) {
    shared_mmap(t, &["--direct-io"]);
}
transports!(shared_mmap_writes_reach_lower_direct_io);

/// A file mapped `MAP_SHARED` through the mount (mounted with `args`): bytes written on LOWER
/// are seen in the mapping, and bytes stored into the mapping reach LOWER by `msync`, while
/// the file is still mapped and open.
fn shared_mmap(t: Transport, args: &[&str]) {
    let Some(f) = Fixture::mounted(&format!("mmap{}", args.concat()), t, args) else {
        return;
    };
    const LEN: usize = 3 * 4096 + 100;
    let before: Vec<u8> = (0..LEN as u64).map(byte_at).collect();
    fs::write(f.l("mapped"), &before).unwrap();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(f.m("mapped"))
        .unwrap();
    let mut map = match test_support::SharedMapping::new(&file, LEN) {
        Ok(m) => m,
        // Direct-I/O files can be mapped shared from Linux 6.6 (FUSE_DIRECT_IO_ALLOW_MMAP).
        Err(e) if e.raw_os_error() == Some(libc::ENODEV) && !kernel_at_least(6, 6) => {
            eprintln!("skipped: shared mmap of direct-I/O files needs Linux 6.6+");
            return;
        }
        Err(e) => panic!("mmap {args:?}: {e}"),
    };
    assert!(map.read() == before, "mapping differs from LOWER");
    let after: Vec<u8> = before.iter().map(|b| b ^ 0xff).collect();
    map.write(&after);
    map.sync().unwrap();
    assert!(
        fs::read(f.l("mapped")).unwrap() == after,
        "stores into the mapping did not reach LOWER by msync"
    );
    drop(map);
    drop(file);
}

/// Whether the running kernel is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}
