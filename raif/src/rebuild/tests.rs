//! The rebuild engine over branch directories in temporary directories, with no mount: a
//! volume is written through a [`Raif`] that is not mounted, a branch is lost, and
//! [`offline`] makes it again from the others.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use fsprof_fuse::filesystem::{FileSystem, Ino, Request, WriteFlags};
use fsprof_fuse::passthrough::inode_store::ROOT_ID;
use fsprof_fuse::protocol::ops::Op;
use fsprof_fuse::toolkit::lower::Lower;

use super::{Meter, Tally, offline};
use crate::branch::{Admit, BranchSet, State};
use crate::fs::{FsConfig, Raif};
use crate::layout::{Level, Meta};
use crate::policy::Settings;

const ROOT: Ino = Ino(ROOT_ID);
const UNIT: u32 = 4096;

/// A volume over `n` temporary branch directories whose new files are at `level` (stripe
/// unit [`UNIT`]), with the files `files` (name, content) written through an unmounted
/// [`Raif`] and closed.
struct Volume {
    dirs: Vec<tempfile::TempDir>,
}

impl Volume {
    fn new(n: usize, level: Level, files: &[(&str, Vec<u8>)]) -> Volume {
        let dirs: Vec<tempfile::TempDir> = (0..n).map(|_| tempfile::tempdir().unwrap()).collect();
        let paths: Vec<PathBuf> = dirs.iter().map(|d| d.path().to_path_buf()).collect();
        let lowers = paths.iter().map(|_| Lower::default()).collect();
        let bs = Arc::new(BranchSet::open(&paths, lowers, true, Admit::Refuse).unwrap());
        let cfg = FsConfig {
            defaults: Settings {
                level: Some(level),
                stripe: Some(UNIT),
                copies: None,
            },
            ..FsConfig::default()
        };
        bs.begin_mount();
        let raif = Raif::new(cfg, bs.clone()).unwrap();
        let req = |op| Request::internal(op, ROOT);
        raif.mkdir(&req(Op::Mkdir), ROOT, OsStr::new("d"), 0o755)
            .unwrap();
        for (name, data) in files {
            let (_, o) = raif
                .create(
                    &req(Op::Create),
                    ROOT,
                    OsStr::new(name),
                    0o640,
                    libc::O_RDWR,
                )
                .unwrap();
            let w = raif
                .write(&req(Op::Write), ROOT, &o.fh, 0, data, WriteFlags::default())
                .unwrap();
            assert_eq!(w as usize, data.len());
            raif.release(&req(Op::Release), ROOT, o.fh).unwrap();
        }
        raif.destroy();
        drop(raif);
        bs.end_mount();
        Volume { dirs }
    }

    fn branch(&self, b: usize) -> &Path {
        self.dirs[b].path()
    }

    /// The volume opened as `raif rebuild` opens it, with `newdir` as branch `n`.
    fn open_with(&self, n: usize, newdir: &Path) -> BranchSet {
        let mut paths: Vec<PathBuf> = (0..self.dirs.len())
            .map(|b| self.branch(b).to_path_buf())
            .collect();
        paths[n] = newdir.to_path_buf();
        let lowers = paths.iter().map(|_| Lower::default()).collect();
        BranchSet::open(&paths, lowers, false, Admit::AsFailed).unwrap()
    }
}

/// Branch `b`'s part of `name` (its bytes), or `None`.
fn part(dir: &Path, name: &str) -> Option<Vec<u8>> {
    std::fs::read(dir.join(name)).ok()
}

/// The file's record on the part in `dir`.
fn record(dir: &Path, name: &str) -> Option<Meta> {
    let root = fsprof_fuse::sys::open_path(dir, libc::O_PATH | libc::O_DIRECTORY).unwrap();
    use std::os::fd::AsFd;
    crate::offline::record(root.as_fd(), OsStr::new(name))
}

/// Content that differs block by block, `len` bytes.
fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i / 7) as u8 ^ seed.wrapping_mul(31) ^ (i % 251) as u8)
        .collect()
}

/// Files of every shape a part can take: empty, shorter than a unit, rows and a half.
fn files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("empty", vec![]),
        ("small", data(100, 1)),
        ("rows", data(5 * UNIT as usize + 123, 2)),
        ("big", data(20 * UNIT as usize, 3)),
    ]
}

/// Loses branch `n` of a volume at `level` over `width` branches (its directory removed) and
/// rebuilds it onto a new empty directory: each part is what it was.
fn rebuilt_parts_equal_the_lost_ones(level: Level, width: usize, n: usize) {
    let files = files();
    let v = Volume::new(width, level, &files);
    let before: Vec<Option<Vec<u8>>> = files.iter().map(|(f, _)| part(v.branch(n), f)).collect();
    let records: Vec<Option<Meta>> = files.iter().map(|(f, _)| record(v.branch(n), f)).collect();
    assert!(
        before.iter().all(Option::is_some),
        "branch {n} held a part of every file"
    );
    std::fs::remove_dir_all(v.branch(n)).unwrap();
    let newdir = tempfile::tempdir().unwrap();
    let bs = v.open_with(n, newdir.path());
    assert_eq!(
        bs.state(n),
        State::Failed,
        "the empty directory is not yet branch {n}"
    );
    let t = offline(&bs, n, newdir.path(), None).unwrap();
    assert_eq!(
        (t.files, t.kept, t.dirs),
        (files.len() as u64, 0, 1),
        "{t:?}"
    );
    assert!(t.lost.is_empty(), "{t:?}");
    for (i, (f, _)) in files.iter().enumerate() {
        assert_eq!(
            part(newdir.path(), f),
            before[i],
            "{level:?} part {n} of {f} rebuilt as it was"
        );
        assert_eq!(record(newdir.path(), f), records[i], "{f}'s record");
    }
    assert!(newdir.path().join("d").is_dir());
    // The volume opens with the new directory as branch n, every branch online.
    drop(bs);
    let again = v.open_with(n, newdir.path());
    assert_eq!(again.online_mask(), (1 << width) - 1);
}

#[test]
fn a_raif1_copy_is_rebuilt_as_it_was() {
    rebuilt_parts_equal_the_lost_ones(Level::Raif1, 2, 0);
    rebuilt_parts_equal_the_lost_ones(Level::Raif1, 3, 2);
}

#[test]
fn a_raif4_data_or_parity_part_is_rebuilt_as_it_was() {
    rebuilt_parts_equal_the_lost_ones(Level::Raif4, 3, 0);
    rebuilt_parts_equal_the_lost_ones(Level::Raif4, 3, 2);
}

#[test]
fn a_raif5_part_is_rebuilt_as_it_was_on_every_branch() {
    for n in 0..4 {
        rebuilt_parts_equal_the_lost_ones(Level::Raif5, 4, n);
    }
}

#[test]
fn a_raif0_part_cannot_be_rebuilt_and_is_marked_lost() {
    let files = vec![("s", data(3 * UNIT as usize, 9))];
    let v = Volume::new(2, Level::Raif0, &files);
    std::fs::remove_dir_all(v.branch(1)).unwrap();
    let newdir = tempfile::tempdir().unwrap();
    let bs = v.open_with(1, newdir.path());
    let t = offline(&bs, 1, newdir.path(), None).unwrap();
    assert_eq!(t.lost.len(), 1, "{t:?}");
    assert!(t.lost[0].contains("RAIF0 part on branch 1"), "{t:?}");
    let Some(Meta::File(m)) = record(v.branch(0), "s") else {
        panic!("a record")
    };
    assert_eq!(
        m.lost,
        1 << 1,
        "the part is marked lost on the other branch"
    );
    assert_eq!(part(newdir.path(), "s").map(|p| p.len()), Some(0));
}

#[test]
fn with_a_second_branch_missing_nothing_is_made_up() {
    // RAIF5 over 3 branches loses two: the parts of branch 1 cannot be computed.
    let files = vec![("f", data(4 * UNIT as usize, 5))];
    let v = Volume::new(3, Level::Raif5, &files);
    std::fs::remove_dir_all(v.branch(1)).unwrap();
    std::fs::remove_dir_all(v.branch(2)).unwrap();
    let newdir = tempfile::tempdir().unwrap();
    let mut paths: Vec<PathBuf> = vec![v.branch(0).into(), newdir.path().into()];
    let gone = tempfile::tempdir().unwrap();
    paths.push(gone.path().join("missing"));
    let lowers = paths.iter().map(|_| Lower::default()).collect();
    let bs = BranchSet::open(&paths, lowers, false, Admit::AsFailed).unwrap();
    assert_eq!(bs.online_mask(), 1, "only branch 0 is online");
    let t = offline(&bs, 1, newdir.path(), None).unwrap();
    assert_eq!(t.lost.len(), 1, "{t:?}");
    assert_eq!(part(newdir.path(), "f").map(|p| p.len()), Some(0));
}

#[test]
fn a_stale_branch_keeps_its_current_parts_and_loses_what_went_away() {
    let files = files();
    let v = Volume::new(3, Level::Raif5, &files);
    // Branch 2 comes back as it was, with an entry the volume no longer has.
    std::fs::write(v.branch(2).join("gone"), b"x").unwrap();
    let bs = v.open_with(2, v.branch(2));
    let t = offline(&bs, 2, v.branch(2), None).unwrap();
    assert_eq!(t.kept, files.len() as u64, "{t:?}");
    assert_eq!((t.files, t.bytes, t.removed), (0, 0, 1), "{t:?}");
    assert!(!v.branch(2).join("gone").exists());
}

#[test]
fn progress_counts_every_file_and_byte_it_writes() {
    let files = files();
    let v = Volume::new(3, Level::Raif5, &files);
    let lost: u64 = files
        .iter()
        .map(|(f, _)| part(v.branch(1), f).unwrap().len() as u64)
        .sum();
    std::fs::remove_dir_all(v.branch(1)).unwrap();
    let newdir = tempfile::tempdir().unwrap();
    let bs = v.open_with(1, newdir.path());
    let meter = Arc::new(Meter::default());
    let t: Tally = offline(&bs, 1, newdir.path(), Some(meter.clone())).unwrap();
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    assert_eq!(get(&meter.pass), 1);
    assert_eq!(get(&meter.files_total), files.len() as u64);
    assert_eq!(get(&meter.files_done), files.len() as u64);
    assert_eq!(
        get(&meter.bytes_total),
        lost,
        "counted before: the parts' sizes"
    );
    assert_eq!(get(&meter.bytes_done), lost, "went through every byte");
    assert_eq!(t.bytes, lost, "no holes in these parts: every byte written");
}

#[test]
fn a_directory_that_holds_other_things_is_refused() {
    let v = Volume::new(3, Level::Raif5, &files());
    std::fs::remove_dir_all(v.branch(2)).unwrap();
    let newdir = tempfile::tempdir().unwrap();
    std::fs::write(newdir.path().join("mine"), b"keep me").unwrap();
    let bs = v.open_with(2, newdir.path());
    assert_eq!(bs.state(2), State::Failed);
    let e = offline(&bs, 2, newdir.path(), None).unwrap_err();
    assert!(e.to_string().contains("not empty and not branch 2"), "{e}");
    assert_eq!(
        std::fs::read(newdir.path().join("mine")).unwrap(),
        b"keep me"
    );
    assert!(
        !newdir.path().join("rows").exists(),
        "nothing was made there"
    );
}

#[test]
fn a_generation_raised_on_one_source_only_is_the_rebuilt_records_and_every_sources() {
    // Branch 1 failed; a write raised the file's generation on branch 2 and was killed before
    // it reached branch 0 (the parts' records are written one after the other).
    let files = vec![("f", data(5 * UNIT as usize, 4))];
    let v = Volume::new(3, Level::Raif5, &files);
    let Some(Meta::File(mut m)) = record(v.branch(2), "f") else {
        panic!("a record")
    };
    m.generation += 1;
    let part2 = std::fs::File::open(v.branch(2).join("f")).unwrap();
    use std::os::fd::AsFd;
    crate::offline::write_record(part2.as_fd(), &Meta::File(m)).unwrap();
    std::fs::remove_dir_all(v.branch(1)).unwrap();
    let newdir = tempfile::tempdir().unwrap();
    let bs = v.open_with(1, newdir.path());
    offline(&bs, 1, newdir.path(), None).unwrap();
    for dir in [v.branch(0), newdir.path(), v.branch(2)] {
        assert_eq!(
            record(dir, "f"),
            Some(Meta::File(m)),
            "{}: the raised generation",
            dir.display()
        );
    }
}
