//! The control files at the mount root (`docs/format.md#control-files`): `.fsprof` (text
//! profile) and `.fsprof.json`.
//!
//! Opening one takes a snapshot of every layer; reads are served from it (direct I/O, so `cat`
//! sees the whole text although `stat` says size 0). Any write, an open with `O_TRUNC` or a
//! truncate resets every counter and restarts the epoch clock. Nothing done to them is counted.
//!
//! What a reader is shown depends on who it is ([`crate::layers::access`]). The memory the snapshots
//! take is bounded whatever users do: opens made while nothing has changed share one snapshot
//! (the new one is compared with the last, and the bytes of the last are kept while a handle
//! holds them), a user who is neither root nor the mounting user may hold at most
//! [`MAX_OPEN_PER_USER`] handles of the control files and [`MAX_BYTES_PER_USER`] of their
//! snapshots (one more open fails with `EMFILE`, counted as `control_refused=N` in the
//! profile), and when a snapshot's last handle closes its
//! memory is given back to the system (`malloc_trim`).
//!
//! A file system may add one more control file of its own ([`ControlFile`], e.g. RAIF's
//! `.raif`): its contents are taken at open, and a write to it is a command.
//!
//! This module is what the files hold; [`crate::layers::control`] serves them.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use profile_store::{Extension, Profile, Profiler, json, text};

use crate::layers::access::{self, Caller, Policy, ProcRule, View};

use crate::filesystem::{Attr, Timespec};
use crate::toolkit::handle_table::HandleTable;

/// Node id of the text control file (above every id the inode store hands out).
pub const TEXT_INO: u64 = u64::MAX - 1;
/// Node id of the JSON control file.
pub const JSON_INO: u64 = u64::MAX - 2;
/// Node id of the extra control file ([`ControlFiles::with_file`]).
pub const EXTRA_INO: u64 = u64::MAX - 3;
/// Node id of the slow-operation log (`.fsprof.slow`, [`ControlFiles::with_slow_log`]).
pub const SLOW_INO: u64 = u64::MAX - 4;

/// Directory offsets of the control files' entries when the root listing shows them
/// ([`ControlFiles::listed`]): entry `k` (from 0) is followed by offset `LISTED_BASE + k + 1`. Just
/// below `i64::MAX` (ext4's end-of-directory cookie), far above the offsets file systems give.
pub const LISTED_BASE: u64 = i64::MAX as u64 - 1024;

/// Default base name of the control files.
pub const DEFAULT_NAME: &str = ".fsprof";

/// Most handles of the control files one user who is neither root nor the mounting user may
/// hold open at once.
pub const MAX_OPEN_PER_USER: usize = 64;

/// Most bytes of snapshots such a user may hold at once, counted per handle (a snapshot shared
/// by two handles counts twice). Its first handle is always allowed, however large. Each open
/// of a user changes the profile (the lookup that led to it is counted), so its snapshots need
/// not be shared: without this, 64 handles of a 2 MB profile held 284 MiB of the daemon.
pub const MAX_BYTES_PER_USER: usize = 32 << 20;

/// One open control file: the bytes it reads (shared with other opens of the same
/// snapshot), and whose handle it is.
struct Snapshot {
    bytes: Arc<Vec<u8>>,
    /// The user it counts against ([`MAX_OPEN_PER_USER`]), if any.
    limited: Option<u32>,
}

/// The last snapshot of each kind, shared by the opens made while it is still the same.
#[derive(Default)]
struct Shared {
    /// Profiles: (JSON, view) → a keyed hash of the profile, and its bytes while some
    /// handle holds them. (Not the profile itself: a time-lapse profile's buckets take tens of
    /// MB in memory, for a text of one.)
    profiles: [Option<(u64, Weak<Vec<u8>>)>; 6],
    /// The slow log's and the extra file's last bytes.
    files: [Weak<Vec<u8>>; 2],
}

/// Open handles and refusals, by user.
#[derive(Default)]
struct Opens {
    /// Handles and snapshot bytes held by each limited user, and the size of its last
    /// snapshot.
    by_user: HashMap<u32, (usize, usize, usize)>,
    /// Handles open in all.
    total: usize,
    /// Bytes given back since the last `malloc_trim`.
    freed: usize,
}

/// Refused opens, in the profile as `control_refused=N`.
#[derive(Default)]
struct Refused(AtomicU64);

impl Extension for Refused {
    fn extra(&self) -> Vec<(String, String)> {
        match self.0.load(Ordering::Relaxed) {
            0 => Vec::new(),
            n => vec![("control_refused".into(), n.to_string())],
        }
    }
}

/// The names of the control files of base name `base` (`.fsprof`, `.fsprof.json`,
/// `.fsprof.slow`) and of a file system's own (`.raif`), for what must know them without
/// serving them (the syscall level, which does not count calls on them).
pub fn names(base: &str, extra: Option<&str>) -> Vec<String> {
    let mut v = vec![
        base.to_string(),
        format!("{base}.json"),
        format!("{base}.slow"),
    ];
    v.extend(extra.map(str::to_string));
    v
}

/// An extra control file served beside the profile files.
pub trait ControlFile: Send + Sync {
    /// The contents, taken when the file is opened.
    fn contents(&self) -> Vec<u8>;
    /// Runs the command `data` written to the file; an error is the write's errno.
    fn command(&self, data: &[u8]) -> io::Result<()>;
}

/// The control files of one mount (served by [`crate::layers::control::Control`]).
pub struct ControlFiles {
    text_name: OsString,
    json_name: OsString,
    profiler: Arc<Profiler>,
    snapshots: HandleTable<Snapshot>,
    shared: Mutex<Shared>,
    /// Held while a profile snapshot is taken and written: one at a time, so that the memory
    /// of the profiles being written stays that of one whatever the opens at once.
    taking: Mutex<()>,
    /// Keys the snapshots' hashes (an attacker cannot make two profiles collide).
    hasher: std::hash::RandomState,
    opens: Mutex<Opens>,
    refused: Arc<Refused>,
    policy: Policy,
    owner_uid: u32,
    owner_gid: u32,
    restrict_reset: bool,
    listed: bool,
    created: Timespec,
    extra: Option<(OsString, Arc<dyn ControlFile>)>,
    slow: Option<(OsString, Arc<dyn ControlFile>)>,
    /// The requests answered here, for the `kernel` layer to leave out (`--kernel`).
    excluded: Option<Arc<kernel_trace::Excluded>>,
}

impl ControlFiles {
    /// Control files named `base` and `base.json` over `profiler`. With `restrict_reset` (the
    /// mount allows other users), only root and `owner_uid` may reset.
    pub fn new(
        base: &str,
        profiler: Arc<Profiler>,
        owner_uid: u32,
        restrict_reset: bool,
    ) -> ControlFiles {
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let refused = Arc::new(Refused::default());
        profiler.extend(refused.clone());
        ControlFiles {
            text_name: OsString::from(base),
            json_name: OsString::from(format!("{base}.json")),
            profiler,
            snapshots: HandleTable::default(),
            shared: Mutex::new(Shared::default()),
            taking: Mutex::new(()),
            hasher: std::hash::RandomState::new(),
            opens: Mutex::new(Opens::default()),
            refused,
            policy: Policy {
                owner: owner_uid,
                share: false,
                paths: None,
            },
            owner_uid,
            owner_gid: crate::sys::getegid(),
            restrict_reset,
            listed: false,
            created: Timespec {
                sec: created.as_secs() as i64,
                nsec: created.subsec_nanos(),
            },
            extra: None,
            slow: None,
            excluded: None,
        }
    }

    /// Notes the `unique` of every request answered by the control files in `excluded`, so
    /// that the kernel's layer leaves them out as the profile's own layers do.
    pub fn excluding(mut self, excluded: Arc<kernel_trace::Excluded>) -> ControlFiles {
        self.excluded = Some(excluded);
        self
    }

    /// `req` is answered by the control files (not by the file system below).
    #[inline]
    pub fn answered_here(&self, req: &crate::filesystem::Request) {
        if let Some(x) = &self.excluded {
            x.note(req.unique);
        }
    }

    /// Shows the request records to users other than root and the mounting user, filtered
    /// for each (`--share-records`; [`crate::layers::access`]); `paths` names nodes and answers whether
    /// a user may search a directory.
    pub fn sharing(
        mut self,
        share: bool,
        paths: Option<Arc<dyn crate::records::Paths>>,
    ) -> ControlFiles {
        self.policy.share = share;
        self.policy.paths = paths;
        self
    }

    /// Who may read what.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Adds the slow-operation log `BASE.slow` served by `file` (read-only; cleared by a reset
    /// of the profile, which resets the log with it).
    pub fn with_slow_log(mut self, file: Arc<dyn ControlFile>) -> ControlFiles {
        let name = format!("{}.slow", self.text_name.to_string_lossy());
        self.slow = Some((OsString::from(name), file));
        self
    }

    /// Adds the control file `name` served by `file`.
    pub fn with_file(mut self, name: &str, file: Arc<dyn ControlFile>) -> ControlFiles {
        self.extra = Some((OsString::from(name), file));
        self
    }

    /// With `on`, the control files are listed by `readdir` of the mount root (by default they
    /// are hidden; `--list-control` lists them).
    pub fn listed(mut self, on: bool) -> ControlFiles {
        self.listed = on;
        self
    }

    /// Whether the control files are listed at the root.
    pub fn is_listed(&self) -> bool {
        self.listed
    }

    /// The names of every control file, for the file system to hide its own entries of the
    /// same names at the root; each such entry found in one of `dirs` (LOWER, or the
    /// branches) is logged as hidden.
    pub fn hidden_names(&self, dirs: &[&Path]) -> Vec<OsString> {
        self.entries()
            .map(|(_, name)| {
                for d in dirs {
                    if d.join(name).symlink_metadata().is_ok() {
                        log::warn!(
                            "{} exists in {}; it is hidden by the control file of the same name (see --control-name)",
                            name.to_string_lossy(),
                            d.display()
                        );
                    }
                }
                name.to_os_string()
            })
            .collect()
    }

    /// Node id and name of every control file, in listing order.
    pub fn entries(&self) -> impl Iterator<Item = (u64, &OsStr)> {
        [
            (TEXT_INO, self.text_name.as_os_str()),
            (JSON_INO, self.json_name.as_os_str()),
        ]
        .into_iter()
        .chain(self.slow.as_ref().map(|(n, _)| (SLOW_INO, n.as_os_str())))
        .chain(self.extra.as_ref().map(|(n, _)| (EXTRA_INO, n.as_os_str())))
    }

    /// The control node id of `name` at the root.
    pub fn ino_of(&self, name: &OsStr) -> Option<u64> {
        if name == self.text_name {
            Some(TEXT_INO)
        } else if name == self.json_name {
            Some(JSON_INO)
        } else if self.extra.as_ref().is_some_and(|(n, _)| n == name) {
            Some(EXTRA_INO)
        } else if self.slow.as_ref().is_some_and(|(n, _)| n == name) {
            Some(SLOW_INO)
        } else {
            None
        }
    }

    /// Whether `ino` is a control file.
    #[inline]
    pub fn is_control(ino: u64) -> bool {
        ino == TEXT_INO || ino == JSON_INO || ino == EXTRA_INO || ino == SLOW_INO
    }

    /// Attributes: a regular file, mode 0644, owned by root when the daemon runs as root, else
    /// by the mounting user, who must be able to write it to reset (the kernel checks
    /// the mode: `default_permissions`); others may read, except the slow log, 0600 unless
    /// records are shared ([`ControlFiles::sharing`]).
    pub fn attr(&self, ino: u64) -> Attr {
        let perm = if ino == SLOW_INO && !self.policy.share {
            0o600
        } else {
            0o644
        };
        Attr {
            ino,
            size: 0,
            blocks: 0,
            atime: self.created,
            mtime: self.created,
            ctime: self.created,
            mode: libc::S_IFREG | perm,
            nlink: 1,
            uid: self.owner_uid,
            gid: self.owner_gid,
            rdev: 0,
            blksize: 4096,
        }
    }

    /// How long the kernel may cache control-file attributes and names.
    pub fn ttl(&self) -> Duration {
        Duration::from_secs(1)
    }

    /// Whether `uid` may reset the profile.
    pub fn may_reset(&self, uid: u32) -> bool {
        !self.restrict_reset || uid == 0 || uid == self.owner_uid
    }

    /// Resets every layer.
    pub fn reset(&self) {
        log::debug!("profile reset");
        self.profiler.reset();
    }

    /// A write of `data` to `ino`: a reset for the profile files, a command for the extra one.
    pub fn write(&self, ino: u64, data: &[u8]) -> io::Result<()> {
        match (&self.extra, &self.slow) {
            (Some((_, f)), _) if ino == EXTRA_INO => f.command(data),
            (_, Some((_, f))) if ino == SLOW_INO => f.command(data),
            _ => {
                self.reset();
                Ok(())
            }
        }
    }

    /// A truncation of `ino` (`O_TRUNC` or a size change): resets, except for the extra file.
    pub fn truncate(&self, ino: u64) {
        if ino != EXTRA_INO && ino != SLOW_INO {
            self.reset();
        }
    }

    /// Takes a snapshot (or shares the last one, if nothing changed) for a new open of `ino` by
    /// thread `pid` as `uid`/`gid`, as that user may see it ([`crate::layers::access`]); returns its
    /// handle. `EACCES`: the slow log, for a user it is not shared with; `EMFILE`: that user
    /// holds [`MAX_OPEN_PER_USER`] handles or [`MAX_BYTES_PER_USER`] of snapshots already.
    pub fn open(&self, ino: u64, uid: u32, gid: u32, pid: u32) -> io::Result<u64> {
        let view = self.policy.view(uid);
        if ino == SLOW_INO && view == View::Plain {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        let limited = (view != View::Full).then_some(uid);
        if let Some(u) = limited {
            let mut o = self.opens.lock();
            // Refused before a snapshot is taken when the last one would not fit: a refusal
            // costs no snapshot.
            let (n, held, last) = o.by_user.entry(u).or_insert((0, 0, 0));
            if *n >= MAX_OPEN_PER_USER || (*n > 0 && *held + *last > MAX_BYTES_PER_USER) {
                drop(o);
                return Err(self.refuse(u));
            }
            *n += 1;
        }
        let caller = (view == View::Shared).then(|| Caller::of(uid, gid, pid));
        let bytes = self.snapshot(ino, view, caller.as_ref());
        let mut o = self.opens.lock();
        if let Some(u) = limited {
            let (n, held, last) = o.by_user.entry(u).or_insert((1, 0, 0));
            *last = bytes.len();
            if *n > 1 && *held + bytes.len() > MAX_BYTES_PER_USER {
                *n -= 1;
                drop(o);
                drop(bytes);
                self.release_bytes();
                return Err(self.refuse(u));
            }
            *held += bytes.len();
        }
        o.total += 1;
        drop(o);
        Ok(self.snapshots.insert(Snapshot { bytes, limited }))
    }

    /// Counts a refused open of user `u`; the error to answer it with.
    fn refuse(&self, u: u32) -> io::Error {
        if self.refused.0.fetch_add(1, Ordering::Relaxed) == 0 {
            log::warn!(
                "uid {u} holds {MAX_OPEN_PER_USER} open control files or {} MiB of their \
                 snapshots: more opens are refused with EMFILE (counted as control_refused=N in \
                 the profile)",
                MAX_BYTES_PER_USER >> 20
            );
        }
        io::Error::from_raw_os_error(libc::EMFILE)
    }

    /// Forgets snapshots no handle holds any more (after bytes were dropped).
    fn release_bytes(&self) {
        let mut shared = self.shared.lock();
        for s in &mut shared.profiles {
            if s.as_ref().is_some_and(|(_, b)| b.strong_count() == 0) {
                *s = None;
            }
        }
    }

    /// The bytes of `ino` as a reader with `view` sees them (`caller`, for [`View::Shared`]).
    fn snapshot(&self, ino: u64, view: View, caller: Option<&Caller>) -> Arc<Vec<u8>> {
        let file = match (&self.extra, &self.slow) {
            (Some((_, f)), _) if ino == EXTRA_INO => Some((1, f)),
            (_, Some((_, f))) if ino == SLOW_INO => Some((0, f)),
            _ => None,
        };
        if let Some((slot, f)) = file {
            let mut bytes = f.contents();
            if let (View::Shared, true) = (view, ino == SLOW_INO) {
                bytes = access::slow_log(&bytes, &mut self.filter(caller));
            }
            let mut shared = self.shared.lock();
            if let Some(last) = shared.files[slot].upgrade().filter(|l| **l == bytes) {
                return last;
            }
            let bytes = Arc::new(bytes);
            shared.files[slot] = Arc::downgrade(&bytes);
            return bytes;
        }
        let _taking = self.taking.lock();
        let p = match view {
            View::Shared => access::profile(
                self.profiler.snapshot(),
                view,
                Some(&mut self.filter(caller)),
            ),
            _ => access::profile(self.profiler.snapshot(), view, None),
        };
        self.profile_bytes(ino, view, p)
    }

    /// The bytes of profile `p` for `ino` and `view`: those of the last snapshot, if it is the
    /// same and still held. A large profile's memory is given back once written.
    fn profile_bytes(&self, ino: u64, view: View, p: Profile) -> Arc<Vec<u8>> {
        use std::hash::BuildHasher as _;
        let cells: usize = p
            .layers
            .iter()
            .map(|l| l.ops.len() * l.epochs * l.buckets)
            .sum();
        let done = |bytes: Arc<Vec<u8>>, p: Profile| {
            drop(p);
            if cells >= 1 << 19 {
                crate::sys::trim_heap();
            }
            bytes
        };
        let write = |p: &Profile| {
            Arc::new(
                if ino == JSON_INO {
                    json::write(p)
                } else {
                    text::write(p)
                }
                .into_bytes(),
            )
        };
        // A filtered profile (View::Shared) is hashed as filtered: one reader opening it again
        // and again shares its bytes too.
        let hash = self.hasher.hash_one(&p);
        let slot = usize::from(ino == JSON_INO) * 3
            + match view {
                View::Full => 0,
                View::Plain => 1,
                View::Shared => 2,
            };
        let last = self.shared.lock().profiles[slot]
            .as_ref()
            .filter(|(h, _)| *h == hash)
            .and_then(|(_, b)| b.upgrade());
        if let Some(b) = last {
            return done(b, p);
        }
        let bytes = write(&p);
        self.shared.lock().profiles[slot] = Some((hash, Arc::downgrade(&bytes)));
        done(bytes, p)
    }

    /// A filter of the records for `caller` (the `/proc` rule read now).
    fn filter<'a>(&'a self, caller: Option<&'a Caller>) -> access::Filter<'a> {
        access::Filter::new(caller, ProcRule::current(), &self.policy)
    }

    /// Copies the snapshot `fh` from `offset` into `buf`; returns the bytes copied.
    pub fn read(&self, fh: u64, offset: u64, buf: &mut [u8]) -> usize {
        let snap = self.snapshots.get(fh);
        let data = snap.as_deref().map_or(&[][..], |v| v.bytes.as_slice());
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(data.len());
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        n
    }

    /// Drops the snapshot `fh`; once no handle holds a snapshot, its memory is given back to
    /// the system (`malloc_trim`, when a MiB or more was freed since the last, or no control
    /// file is open any more).
    pub fn release(&self, fh: u64) {
        let Some(snap) = self.snapshots.remove(fh) else {
            return;
        };
        // A read still running holds the handle's entry a moment longer: the user's count
        // goes down all the same, and the bytes go when that read ends.
        let (limited, len) = (snap.limited, snap.bytes.len());
        let last = match Arc::try_unwrap(snap) {
            Ok(s) => Arc::strong_count(&s.bytes) == 1,
            Err(_) => false,
        };
        if last {
            self.release_bytes();
        }
        let mut o = self.opens.lock();
        if let Some(u) = limited {
            if let Some((n, held, _)) = o.by_user.get_mut(&u) {
                *n -= 1;
                *held = held.saturating_sub(len);
                if *n == 0 {
                    o.by_user.remove(&u);
                }
            }
        }
        o.total = o.total.saturating_sub(1);
        if last {
            o.freed += len;
        }
        if o.freed > 0 && (o.freed >= 1 << 20 || o.total == 0) {
            o.freed = 0;
            drop(o);
            crate::sys::trim_heap();
        }
    }
}

/// `.fsprof.slow`: the ring, read-only (a write is refused with `EINVAL`; reset through
/// `.fsprof`).
impl ControlFile for crate::records::slow::SlowLog {
    fn contents(&self) -> Vec<u8> {
        crate::records::slow::SlowLog::contents(self)
    }

    fn command(&self, _data: &[u8]) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(libc::EINVAL))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::{Recorder, RecorderConfig};

    fn control(restrict: bool) -> ControlFiles {
        let rec = Recorder::new(
            "fuse",
            &crate::protocol::ops::NAMES,
            &RecorderConfig::default(),
        );
        ControlFiles::new(
            DEFAULT_NAME,
            Arc::new(Profiler::new(vec![rec])),
            1000,
            restrict,
        )
    }

    #[test]
    fn with_allow_other_only_root_and_the_owner_may_reset() {
        let c = control(true);
        assert!(c.may_reset(0) && c.may_reset(1000));
        assert!(!c.may_reset(1001) && !c.may_reset(65534));
        let open = control(false);
        assert!(open.may_reset(65534));
    }

    #[test]
    fn entries_list_every_control_file_once() {
        let c = control(false);
        assert!(!c.is_listed());
        let names: Vec<_> = c.entries().collect();
        assert_eq!(
            names,
            [
                (TEXT_INO, OsStr::new(".fsprof")),
                (JSON_INO, OsStr::new(".fsprof.json"))
            ]
        );
        assert!(names.iter().all(|(i, _)| ControlFiles::is_control(*i)));
        assert!(c.listed(true).is_listed());
    }

    struct Extra;

    impl ControlFile for Extra {
        fn contents(&self) -> Vec<u8> {
            Vec::new()
        }
        fn command(&self, _: &[u8]) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_control_file_name_is_hidden_the_extra_one_too() {
        assert_eq!(
            control(false).hidden_names(&[]),
            [".fsprof", ".fsprof.json"]
        );
        let c = control(false).with_file(".raif", Arc::new(Extra));
        assert_eq!(c.hidden_names(&[]), [".fsprof", ".fsprof.json", ".raif"]);
        assert_eq!(c.entries().last(), Some((EXTRA_INO, OsStr::new(".raif"))));
    }
}
