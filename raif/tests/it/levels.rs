//! Every level with 2, 3 and 4 branches where it allows: random-offset writes, truncates,
//! appends and reads checked byte for byte against a reference file on a plain directory;
//! a large (≥ 8 stripes) and a tiny (< 1 stripe) file; a remount serves the same bytes; every
//! part has the length its layout says.

use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use test_support::{Transport, transports};

use crate::fixture::{Fixture, Rng};
use crate::records::record;

const SU: u64 = 4096;

/// Reads all of `p` through a fresh open (the daemon, not a cached page).
fn read(p: &Path) -> Vec<u8> {
    fs::read(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// One change, applied alike to the file under test and to the reference.
enum Change {
    Write(u64, Vec<u8>),
    Append(Vec<u8>),
    Truncate(u64),
}

fn apply(p: &Path, c: &Change) {
    match c {
        Change::Write(off, data) => {
            let mut f = OpenOptions::new().write(true).open(p).unwrap();
            f.seek(SeekFrom::Start(*off)).unwrap();
            f.write_all(data).unwrap();
        }
        Change::Append(data) => {
            let mut f = OpenOptions::new().append(true).open(p).unwrap();
            f.write_all(data).unwrap();
        }
        Change::Truncate(len) => {
            OpenOptions::new()
                .write(true)
                .open(p)
                .unwrap()
                .set_len(*len)
                .unwrap();
        }
    }
}

fn same(f: &Fixture, refdir: &Path, name: &str, when: &str) {
    let want = read(&refdir.join(name));
    let got = read(&f.m(name));
    assert_eq!(got.len(), want.len(), "{name}: size {when}");
    if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b) {
        panic!("{name}: first difference at offset {i} {when}");
    }
}

fn check_level(t: Transport, level: u32, n: usize) {
    let name = format!("level{level}-{n}");
    let lv = level.to_string();
    let Some(mut f) = Fixture::mounted(t, &name, n, &["--level", &lv, "--stripe", "4K"]) else {
        return;
    };
    let refdir = f.root.join("ref");
    fs::create_dir(&refdir).unwrap();
    let mut rng = Rng::new(level as u64 * 16 + n as u64);
    let tiny = rng.bytes(1000);
    let large = rng.bytes((8 * n as u64 * SU + 1234) as usize);
    for (file, data) in [("tiny", &tiny), ("large", &large)] {
        fs::write(f.m(file), data).unwrap();
        fs::write(refdir.join(file), data).unwrap();
    }
    File::create(f.m("work")).unwrap();
    File::create(refdir.join("work")).unwrap();
    for step in 0..80 {
        let c = match rng.below(6) {
            0 => Change::Truncate(rng.below(12 * SU)),
            1 => {
                let len = 1 + rng.below(2 * SU) as usize;
                Change::Append(rng.bytes(len))
            }
            2..=4 => {
                let off = rng.below(12 * SU);
                let len = 1 + rng.below(3 * SU) as usize;
                Change::Write(off, rng.bytes(len))
            }
            _ => {
                // A random range read back.
                let want = read(&refdir.join("work"));
                let off = rng.below(want.len() as u64 + 100);
                let len = rng.below(3 * SU) as usize;
                let mut got = vec![0u8; len];
                let k = File::open(f.m("work"))
                    .unwrap()
                    .read_at(&mut got, off)
                    .unwrap();
                let lo = (off as usize).min(want.len());
                let hi = (off as usize + len).min(want.len());
                assert_eq!(&got[..k], &want[lo..hi], "step {step}: read {off}+{len}");
                continue;
            }
        };
        apply(&f.m("work"), &c);
        apply(&refdir.join("work"), &c);
        if step % 10 == 9 {
            same(&f, &refdir, "work", &format!("after step {step}"));
        }
    }
    for file in ["tiny", "large", "work"] {
        same(&f, &refdir, file, "before remount");
    }
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
    // Every part is as long as the layout says (the large file was written in order).
    let size = large.len() as u64;
    let meta = record(&f.b(0, "large")).expect("record");
    assert_eq!(meta.layout.level.num(), level);
    for i in 0..n {
        let len = fs::metadata(f.b(i, "large")).unwrap().len();
        assert_eq!(
            len,
            meta.layout.part_size(i, size),
            "branch {i}'s part of large"
        );
        assert_eq!(record(&f.b(i, "large")), Some(meta), "branch {i}'s record");
    }
    f.mount(&["--level", &lv, "--stripe", "4K"]);
    for file in ["tiny", "large", "work"] {
        same(&f, &refdir, file, "after remount");
    }
    let scrub_out = {
        assert_eq!(f.unmount(), Some(0));
        f.scrub(false)
    };
    assert_eq!(
        scrub_out.code, 0,
        "{}{}",
        scrub_out.stdout, scrub_out.stderr
    );
    assert!(
        scrub_out.stdout.contains(" 0 mismatches"),
        "{}",
        scrub_out.stdout
    );
}

macro_rules! level_tests {
    ($($name:ident: $level:expr, $n:expr;)*) => {
        $(
            fn $name(t: Transport) {
                check_level(t, $level, $n);
            }
            transports!($name);
        )*
    };
}

level_tests! {
    raif0_over_2: 0, 2;
    raif0_over_3: 0, 3;
    raif0_over_4: 0, 4;
    raif1_over_2: 1, 2;
    raif1_over_3: 1, 3;
    raif1_over_4: 1, 4;
    raif4_over_3: 4, 3;
    raif4_over_4: 4, 4;
    raif5_over_3: 5, 3;
    raif5_over_4: 5, 4;
}

transports!(shared_mmap_of_a_striped_file);

/// Stores into a shared mapping of a RAIF5 file reach its stripes and parity: after `msync`
/// and a remount the file reads back as written, and scrub finds nothing to repair.
fn shared_mmap_of_a_striped_file(t: Transport) {
    let Some(mut f) = Fixture::mounted(t, "mmap5", 3, &["--level", "5", "--stripe", "4K"]) else {
        return;
    };
    let len = 9 * SU as usize + 123;
    let mut rng = Rng::new(17);
    let before = rng.bytes(len);
    fs::write(f.m("mapped"), &before).unwrap();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(f.m("mapped"))
        .unwrap();
    let mut map = test_support::SharedMapping::new(&file, len).unwrap();
    assert!(map.read() == before, "mapping differs from the file");
    let after = rng.bytes(len);
    map.write(&after);
    map.sync().unwrap();
    drop(map);
    drop(file);
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
    f.mount(&["--level", "5", "--stripe", "4K"]);
    assert!(
        read(&f.m("mapped")) == after,
        "bytes stored through the mapping"
    );
    assert_eq!(f.unmount(), Some(0));
    let out = f.scrub(false);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains(" 0 mismatches"), "{}", out.stdout);
}
