//! The control-files layer over a fake file system (and, for the hiding of lower entries of
//! the same names, over the passthrough on a temporary directory): what it answers itself, what
//! it passes on, and that nothing it answers reaches the layers below or the profile.

use std::sync::Arc;

use parking_lot::Mutex;
use profile_store::{Profile, Profiler, Recorder, RecorderConfig};

use super::*;
use crate::filesystem::fake::{FAKE_FH, FAKE_NAMES, Fake, Listing};
use crate::filesystem::{Key, SetTime};
use crate::layers::control_files::{ControlFile, DEFAULT_NAME, EXTRA_INO, JSON_INO, TEXT_INO};
use crate::layers::profiled::{Profiled, profiled};
use crate::protocol::ops::{NAMES, Op};

/// The mount's stack over the fake: control files over profiling.
type Stack = Control<Profiled<Fake>>;

/// The stack with control files named `name` (listed or not), owned by uid 1000 with resets
/// restricted to root and the owner; and the `fuse` layer's recorder.
fn stack_with(name: &str, listed: bool, extra: Option<Arc<dyn ControlFile>>) -> (Stack, Recorder) {
    let rec = Recorder::new("fuse", &NAMES, &RecorderConfig::default());
    let p = Arc::new(Profiler::new(vec![rec.clone()]));
    let mut files = ControlFiles::new(name, p.clone(), 1000, true).listed(listed);
    if let Some(f) = extra {
        files = files.with_file(".extra", f);
    }
    let fs = Control::new(
        profiled(Fake::new(), Some(rec.clone()), Some(&p), Default::default()),
        Some(files),
    );
    (fs, rec)
}

fn stack(listed: bool) -> (Stack, Recorder) {
    stack_with(DEFAULT_NAME, listed, None)
}

/// A request of `op` from uid `uid`.
fn req_as(op: Op, uid: u32) -> Request<'static> {
    Request::new(op, 1, Ino::ROOT, 77, uid, uid)
}

/// A request of `op` from the owner.
fn req(op: Op) -> Request<'static> {
    req_as(op, 1000)
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

fn errno<T: std::fmt::Debug>(r: io::Result<T>) -> i32 {
    r.expect_err("an error").raw_os_error().unwrap_or(0)
}

/// What reached the fake below the stack.
fn below(fs: &Stack) -> Vec<String> {
    fs.inner().inner().seen()
}

/// Requests counted in the profile.
fn counted(rec: &Recorder) -> u64 {
    rec.snapshot().total_count()
}

/// Serves `count` getattrs of node 5 (counted by the profile).
fn getattrs(fs: &Stack, count: usize) {
    for _ in 0..count {
        fs.getattr(&req(Op::Getattr), Ino(5), None).unwrap();
    }
}

/// The whole file behind `fh`, read in small pieces.
fn read_all(fs: &Stack, ino: u64, fh: &CtlFile<Key>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 100];
    loop {
        let n = fs
            .read(&req(Op::Read), Ino(ino), fh, out.len() as u64, &mut buf)
            .unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// The text profile of an open `.fsprof`.
fn profile_of(fs: &Stack, fh: &CtlFile<Key>) -> Profile {
    let text = read_all(fs, TEXT_INO, fh);
    profile_store::text::parse_bytes(&text).expect("the control file holds a profile")
}

fn open_own(fs: &Stack, ino: u64, flags: i32) -> CtlFile<Key> {
    let o = fs.open(&req(Op::Open), Ino(ino), flags).unwrap();
    assert!(o.flags.contains(FopenFlags::DIRECT_IO));
    assert!(matches!(o.fh, Layered::Own(_)));
    o.fh
}

#[test]
fn control_files_are_answered_by_the_layer_and_never_reach_below() {
    let (fs, rec) = stack(false);
    for (name, ino) in [(".fsprof", TEXT_INO), (".fsprof.json", JSON_INO)] {
        let e = fs.lookup(&req(Op::Lookup), Ino::ROOT, os(name)).unwrap();
        assert_eq!(e.attr.ino, ino);
        assert_eq!((e.attr.mode, e.attr.uid), (libc::S_IFREG | 0o644, 1000));
        let a = fs.getattr(&req(Op::Getattr), Ino(ino), None).unwrap();
        assert_eq!((a.attr.ino, a.attr.size), (ino, 0));
        let fh = open_own(&fs, ino, libc::O_RDONLY);
        assert!(!read_all(&fs, ino, &fh).is_empty());
        fs.flush(&req(Op::Flush), Ino(ino), &fh).unwrap();
        fs.fsync(&req(Op::Fsync), Ino(ino), &fh, false).unwrap();
        fs.access(&req(Op::Access), Ino(ino), libc::R_OK).unwrap();
        fs.release(&req(Op::Release), Ino(ino), fh).unwrap();
        fs.forget(&req(Op::Forget), Ino(ino), 1);
    }
    assert!(below(&fs).is_empty(), "{:?}", below(&fs));
    assert_eq!(counted(&rec), 0);
    // Any other name at the root, and these names elsewhere, go below (and are counted).
    fs.lookup(&req(Op::Lookup), Ino::ROOT, os(".fsprofx"))
        .unwrap();
    fs.lookup(&req(Op::Lookup), Ino(5), os(".fsprof")).unwrap();
    assert_eq!(
        below(&fs),
        [
            "lookup parent=1 name=\".fsprofx\"",
            "lookup parent=5 name=\".fsprof\""
        ]
    );
    assert_eq!(counted(&rec), 2);
}

#[test]
fn the_snapshot_is_taken_at_open() {
    let (fs, _rec) = stack(false);
    getattrs(&fs, 2);
    let first = open_own(&fs, TEXT_INO, libc::O_RDONLY);
    getattrs(&fs, 3);
    let before = read_all(&fs, TEXT_INO, &first);
    assert_eq!(profile_of(&fs, &first).layers[0].count("OP_GETATTR"), 2);
    let second = open_own(&fs, TEXT_INO, libc::O_RDONLY);
    assert_eq!(profile_of(&fs, &second).layers[0].count("OP_GETATTR"), 5);
    let json = open_own(&fs, JSON_INO, libc::O_RDONLY);
    let text = String::from_utf8(read_all(&fs, JSON_INO, &json)).unwrap();
    let p = profile_store::json::parse(&text).expect("the JSON control file holds a profile");
    assert_eq!(p.layers[0].count("OP_GETATTR"), 5);
    // Reading the first again gives the same bytes: the snapshot does not move.
    getattrs(&fs, 1);
    assert_eq!(read_all(&fs, TEXT_INO, &first), before);
    // Once released, a snapshot is gone (a late read finds nothing).
    let n = match &first {
        Layered::Own(n) => *n,
        Layered::Inner(_) => unreachable!(),
    };
    fs.release(&req(Op::Release), Ino(TEXT_INO), first).unwrap();
    assert!(read_all(&fs, TEXT_INO, &Layered::Own(n)).is_empty());
    // A read far past the end answers nothing.
    let mut buf = [0u8; 10];
    let r = fs.read(&req(Op::Read), Ino(TEXT_INO), &second, u64::MAX, &mut buf);
    assert_eq!(r.unwrap(), 0);
}

#[test]
fn a_write_or_a_truncation_resets_the_profile() {
    let (fs, rec) = stack(false);
    let w = WriteFlags::default();
    getattrs(&fs, 3);
    let fh = open_own(&fs, TEXT_INO, libc::O_WRONLY);
    let n = fs.write(&req(Op::Write), Ino(TEXT_INO), &fh, 0, b"x\n", w);
    assert_eq!(n.unwrap(), 2);
    assert_eq!(counted(&rec), 0);
    getattrs(&fs, 3);
    let cut = SetAttr {
        size: Some(0),
        ..SetAttr::default()
    };
    fs.setattr(&req(Op::Setattr), Ino(JSON_INO), &cut, None)
        .unwrap();
    assert_eq!(counted(&rec), 0);
    getattrs(&fs, 3);
    open_own(&fs, TEXT_INO, libc::O_WRONLY | libc::O_TRUNC);
    assert_eq!(counted(&rec), 0);
    // Touching the times resets nothing; changing the mode or owner is refused.
    getattrs(&fs, 3);
    let touch = SetAttr {
        mtime: Some(SetTime::Now),
        ..SetAttr::default()
    };
    fs.setattr(&req(Op::Setattr), Ino(TEXT_INO), &touch, None)
        .unwrap();
    let chmod = SetAttr {
        mode: Some(0o600),
        ..SetAttr::default()
    };
    let r = fs.setattr(&req(Op::Setattr), Ino(TEXT_INO), &chmod, None);
    assert_eq!(errno(r), libc::EPERM);
    assert_eq!(counted(&rec), 3);
    // Another user may not reset a mount that restricts resets.
    let other = req_as(Op::Write, 1001);
    let r = fs.write(&other, Ino(TEXT_INO), &fh, 0, b"x", w);
    assert_eq!(errno(r), libc::EACCES);
    let r = fs.setattr(&req_as(Op::Setattr, 1001), Ino(TEXT_INO), &cut, None);
    assert_eq!(errno(r), libc::EACCES);
    let r = fs.open(&req_as(Op::Open, 1001), Ino(TEXT_INO), libc::O_TRUNC);
    assert_eq!(errno(r), libc::EACCES);
    assert_eq!(counted(&rec), 3);
    // Root may.
    let root = req_as(Op::Write, 0);
    fs.write(&root, Ino(TEXT_INO), &fh, 0, b"x", w).unwrap();
    assert_eq!(counted(&rec), 0);
    assert_eq!(below(&fs).len(), 12, "only the getattrs went below");
}

#[test]
fn control_names_cannot_be_created_removed_or_renamed() {
    let (fs, rec) = stack(false);
    let r = &req(Op::Create);
    for name in [".fsprof", ".fsprof.json"] {
        let n = os(name);
        assert_eq!(errno(fs.create(r, Ino::ROOT, n, 0o644, 0)), libc::EPERM);
        assert_eq!(errno(fs.mknod(r, Ino::ROOT, n, 0o644, 0)), libc::EPERM);
        assert_eq!(errno(fs.mkdir(r, Ino::ROOT, n, 0o755)), libc::EPERM);
        let t = Path::new("t");
        assert_eq!(errno(fs.symlink(r, Ino::ROOT, n, t)), libc::EPERM);
        assert_eq!(errno(fs.unlink(r, Ino::ROOT, n)), libc::EPERM);
        assert_eq!(errno(fs.rmdir(r, Ino::ROOT, n)), libc::EPERM);
        let from = fs.rename(r, Ino::ROOT, n, Ino(5), os("x"), 0);
        assert_eq!(errno(from), libc::EPERM);
        let onto = fs.rename(r, Ino(5), os("x"), Ino::ROOT, n, 0);
        assert_eq!(errno(onto), libc::EPERM);
        assert_eq!(errno(fs.link(r, Ino(5), Ino::ROOT, n)), libc::EPERM);
    }
    assert_eq!(
        errno(fs.link(r, Ino(TEXT_INO), Ino(5), os("l"))),
        libc::EPERM
    );
    assert!(below(&fs).is_empty());
    assert_eq!(counted(&rec), 0);
    // The same names in another directory are anyone's.
    let (e, o) = fs.create(r, Ino(5), os(".fsprof"), 0o644, 0).unwrap();
    assert!(matches!(o.fh, Layered::Inner(ref k) if k.get() == FAKE_FH));
    assert_eq!(e.attr.ino, crate::filesystem::fake::FAKE_INO);
    fs.rename(r, Ino(5), os(".fsprof"), Ino(6), os(".fsprof.json"), 0)
        .unwrap();
    assert_eq!(below(&fs).len(), 2);
}

#[test]
fn other_requests_on_control_files_get_fixed_answers_and_go_nowhere() {
    let (fs, rec) = stack(false);
    let r = &req(Op::Getattr);
    let ino = Ino(TEXT_INO);
    let fh = open_own(&fs, TEXT_INO, libc::O_RDONLY);
    let lock = Lock {
        start: 0,
        end: u64::MAX,
        typ: libc::F_RDLCK,
        pid: 1,
    };
    assert_eq!(errno(fs.readlink(r, ino, &mut [0; 16])), libc::EINVAL);
    assert_eq!(errno(fs.opendir(r, ino, 0)), libc::ENOTDIR);
    assert_eq!(
        errno(fs.setxattr(r, ino, os("user.a"), b"v", 0, 0)),
        libc::EPERM
    );
    assert_eq!(
        errno(fs.getxattr(r, ino, os("user.a"), &mut [])),
        libc::ENODATA
    );
    assert_eq!(fs.listxattr(r, ino, &mut []).unwrap(), 0);
    assert_eq!(errno(fs.removexattr(r, ino, os("user.a"))), libc::EPERM);
    assert_eq!(errno(fs.getlk(r, ino, &fh, 1, &lock)), libc::ENOLCK);
    assert_eq!(errno(fs.setlk(r, ino, &fh, 1, &lock, false)), libc::ENOLCK);
    assert_eq!(errno(fs.bmap(r, ino, 512, 0)), libc::EINVAL);
    assert_eq!(errno(fs.ioctl(r, ino, &fh, 0, 1, &[], 0)), libc::ENOTTY);
    let ready = fs.poll(r, ino, &fh, libc::POLLIN as u32, 0).unwrap();
    assert_ne!(ready & libc::POLLIN as u32, 0);
    assert_eq!(errno(fs.fallocate(r, ino, &fh, 0, 10, 0)), libc::EPERM);
    assert_eq!(
        errno(fs.lseek(r, ino, &fh, 0, libc::SEEK_DATA)),
        libc::ESPIPE
    );
    let inner = Layered::Inner(Key::new(FAKE_FH));
    let copy = fs.copy_file_range(r, Ino(5), &inner, 0, ino, &fh, 0, 10, 0);
    assert_eq!(errno(copy), libc::EXDEV);
    let copy = fs.copy_file_range(r, ino, &fh, 0, Ino(5), &inner, 0, 10, 0);
    assert_eq!(errno(copy), libc::EXDEV);
    assert!(below(&fs).is_empty());
    // statfs is the file system's, as for the root, and recorded nowhere.
    let s = fs.statfs(&req(Op::Statfs), ino).unwrap();
    assert_eq!(s.namelen, 255);
    let calls = fs.inner().inner().calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].what.as_str(), calls[0].recorded),
        ("statfs ino=1", false)
    );
    assert_eq!(counted(&rec), 0);
}

#[test]
fn a_control_handle_on_another_node_is_refused_and_inner_handles_pass() {
    let (fs, _rec) = stack(false);
    let own: CtlFile<Key> = Layered::Own(1);
    let mut buf = [0u8; 8];
    let w = WriteFlags::default();
    assert_eq!(
        errno(fs.read(&req(Op::Read), Ino(5), &own, 0, &mut buf)),
        libc::EBADF
    );
    assert_eq!(
        errno(fs.write(&req(Op::Write), Ino(5), &own, 0, b"x", w)),
        libc::EBADF
    );
    assert_eq!(
        errno(fs.getattr(&req(Op::Getattr), Ino(5), Some(&own))),
        libc::EBADF
    );
    assert!(below(&fs).is_empty());
    let o = fs.open(&req(Op::Open), Ino(5), libc::O_RDWR).unwrap();
    let n = fs.read(&req(Op::Read), Ino(5), &o.fh, 0, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"fake fil");
    fs.getattr(&req(Op::Getattr), Ino(5), Some(&o.fh)).unwrap();
    fs.release(&req(Op::Release), Ino(5), o.fh).unwrap();
    assert_eq!(
        below(&fs),
        [
            "open ino=5 flags=2",
            "read ino=5 fh=7 offset=0 size=8",
            "getattr ino=5 fh=Some(7)",
            "release ino=5 fh=7"
        ]
    );
}

#[test]
fn control_name_renames_the_files() {
    let (fs, _rec) = stack_with("ctl", false, None);
    let r = &req(Op::Lookup);
    assert_eq!(
        fs.lookup(r, Ino::ROOT, os("ctl")).unwrap().attr.ino,
        TEXT_INO
    );
    let json = fs.lookup(r, Ino::ROOT, os("ctl.json")).unwrap();
    assert_eq!(json.attr.ino, JSON_INO);
    assert_eq!(
        errno(fs.create(r, Ino::ROOT, os("ctl"), 0o644, 0)),
        libc::EPERM
    );
    assert!(below(&fs).is_empty());
    // The default names are ordinary ones now.
    fs.lookup(r, Ino::ROOT, os(".fsprof")).unwrap();
    fs.create(r, Ino::ROOT, os(".fsprof.json"), 0o644, 0)
        .unwrap();
    assert_eq!(
        below(&fs),
        [
            "lookup parent=1 name=\".fsprof\"",
            "create parent=1 name=\".fsprof.json\" mode=644 flags=0"
        ]
    );
}

#[test]
fn without_control_files_every_request_passes() {
    let fs = Control::new(Fake::new(), None);
    let r = &req(Op::Lookup);
    fs.lookup(r, Ino::ROOT, os(".fsprof")).unwrap();
    fs.getattr(r, Ino(TEXT_INO), None).unwrap();
    let mut out = Listing::new(10);
    fs.readdir(r, Ino::ROOT, &Key::new(FAKE_FH), 0, &mut out)
        .unwrap();
    assert_eq!(out.names(), FAKE_NAMES);
    assert_eq!(fs.inner().calls().len(), 3);
}

#[test]
fn a_listed_root_starts_with_the_control_files_from_any_offset() {
    let dh = Key::new(FAKE_FH);
    let (hidden, _) = stack(false);
    for plus in [false, true] {
        assert_eq!(list(&hidden, Ino::ROOT, &dh, 10, plus).names(), FAKE_NAMES);
    }
    let (listed, rec) = stack(true);
    let all = [".fsprof", ".fsprof.json", "a", "b", "c"];
    for room in [1, 2, 10] {
        for plus in [false, true] {
            let got = list(&listed, Ino::ROOT, &dh, room, plus);
            assert_eq!(got.names(), all, "room {room}, plus {plus}");
            let first: Vec<_> = got.entries[..2].iter().map(|e| (e.0, e.1)).collect();
            assert_eq!(
                first,
                [(TEXT_INO, LISTED_BASE + 1), (JSON_INO, LISTED_BASE + 2)]
            );
        }
    }
    // From the control files' second offset on: the rest of them, then the directory.
    let mut out = Listing::new(10);
    let r = &req(Op::Readdir);
    listed
        .readdir(r, Ino::ROOT, &dh, LISTED_BASE + 1, &mut out)
        .unwrap();
    assert_eq!(out.names(), [".fsprof.json"]);
    // Other directories list only what they hold.
    assert_eq!(list(&listed, Ino(5), &dh, 10, false).names(), FAKE_NAMES);
    // Only the directory's own part of a listing is counted.
    let below = listed.inner().inner().calls();
    assert!(below.iter().all(|c| c.what.starts_with("readdir")));
    assert_eq!(counted(&rec), below.len() as u64);
}

/// An extra control file (as RAIF's `.raif`): its contents at open, and the commands written.
#[derive(Default)]
struct Extra {
    commands: Mutex<Vec<Vec<u8>>>,
}

impl ControlFile for Extra {
    fn contents(&self) -> Vec<u8> {
        format!("{} commands\n", self.commands.lock().len()).into_bytes()
    }

    fn command(&self, data: &[u8]) -> io::Result<()> {
        if data == b"bad" {
            return Err(err(libc::EINVAL));
        }
        self.commands.lock().push(data.to_vec());
        Ok(())
    }
}

#[test]
fn a_write_to_an_extra_control_file_is_its_command_and_no_reset() {
    let extra = Arc::new(Extra::default());
    let (fs, rec) = stack_with(
        DEFAULT_NAME,
        true,
        Some(extra.clone() as Arc<dyn ControlFile>),
    );
    let e = fs
        .lookup(&req(Op::Lookup), Ino::ROOT, os(".extra"))
        .unwrap();
    assert_eq!(e.attr.ino, EXTRA_INO);
    getattrs(&fs, 2);
    let fh = open_own(&fs, EXTRA_INO, libc::O_RDWR | libc::O_TRUNC);
    let w = WriteFlags::default();
    fs.write(&req(Op::Write), Ino(EXTRA_INO), &fh, 0, b"fail 1", w)
        .unwrap();
    let r = fs.write(&req(Op::Write), Ino(EXTRA_INO), &fh, 0, b"bad", w);
    assert_eq!(errno(r), libc::EINVAL);
    assert_eq!(*extra.commands.lock(), [b"fail 1".to_vec()]);
    assert_eq!(
        read_all(&fs, EXTRA_INO, &fh),
        b"0 commands\n",
        "taken at open"
    );
    let again = open_own(&fs, EXTRA_INO, libc::O_RDONLY);
    assert_eq!(read_all(&fs, EXTRA_INO, &again), b"1 commands\n");
    assert_eq!(
        counted(&rec),
        2,
        "neither the truncating open nor a command resets"
    );
    let dh = Key::new(FAKE_FH);
    let names = list(&fs, Ino::ROOT, &dh, 10, false).names();
    assert_eq!(names[..3], [".fsprof", ".fsprof.json", ".extra"]);
}

#[test]
fn a_lower_entry_named_as_a_control_file_is_hidden_at_the_root_only() {
    use crate::passthrough::{Passthrough, PassthroughConfig};
    use crate::sys::fuse::Device;
    use crate::toolkit::lower::Lower;

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".fsprof"), b"lower").unwrap();
    std::fs::write(dir.path().join("x"), b"x").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/.fsprof"), b"lower").unwrap();
    let rec = Recorder::new("fuse", &NAMES, &RecorderConfig::default());
    let p = Arc::new(Profiler::new(vec![rec]));
    for listed in [false, true] {
        let files = ControlFiles::new(DEFAULT_NAME, p.clone(), 0, false).listed(listed);
        let cfg = PassthroughConfig {
            hidden_root_names: files.hidden_names(&[dir.path()]),
            ..PassthroughConfig::default()
        };
        let pt = Passthrough::new(dir.path(), cfg, Lower::new(None), Device::new()).unwrap();
        let fs = Control::new(pt, Some(files));
        let r = &req_as(Op::Lookup, 0);
        let e = fs.lookup(r, Ino::ROOT, os(".fsprof")).unwrap();
        assert_eq!(e.attr.ino, TEXT_INO);
        // The file system below does not know the name at its root.
        let hidden = fs.inner().lookup(r, Ino::ROOT, os(".fsprof"));
        assert_eq!(errno(hidden), libc::ENOENT);
        let root = fs.opendir(r, Ino::ROOT, libc::O_RDONLY).unwrap().fh;
        for plus in [false, true] {
            let got = list(&fs, Ino::ROOT, &root, 2, plus);
            let mut names = got.names();
            names.sort();
            let want: &[&str] = if listed {
                &[".", "..", ".fsprof", ".fsprof.json", "sub", "x"]
            } else {
                &[".", "..", "sub", "x"]
            };
            assert_eq!(names, want, "listed {listed}, plus {plus}");
            let controls = got.entries.iter().filter(|e| e.2 == ".fsprof");
            assert!(controls.map(|e| e.0).all(|i| i == TEXT_INO));
        }
        // Below the root, the name is an ordinary one.
        let sub = fs.lookup(r, Ino::ROOT, os("sub")).unwrap().attr.ino;
        let lower = fs.lookup(r, Ino(sub), os(".fsprof")).unwrap();
        assert_eq!(lower.attr.size, 5);
        let dh = fs.opendir(r, Ino(sub), libc::O_RDONLY).unwrap().fh;
        let mut names = list(&fs, Ino(sub), &dh, 10, false).names();
        names.sort();
        assert_eq!(names, [".", "..", ".fsprof"]);
    }
}

/// [`fake::list`](crate::filesystem::fake::list) by an owner's request.
fn list<F: FileSystem>(fs: &F, ino: Ino, dh: &F::Dir, room: usize, plus: bool) -> Listing {
    crate::filesystem::fake::list(fs, &req(Op::Readdir), ino, dh, room, plus)
}
