//! The control files at the mount root (`docs/format.md#control-files`): `.fsprof` (text
//! profile) and `.fsprof.json`.
//!
//! Opening one takes a snapshot of every layer; reads are served from it (direct I/O, so `cat`
//! sees the whole text although `stat` says size 0). Any write, an open with `O_TRUNC` or a
//! truncate resets every counter and restarts the epoch clock. Nothing done to them is counted.
//!
//! A file system may add one more control file of its own ([`ControlFile`], e.g. RAIF's
//! `.raif`): its contents are taken at open, and a write to it is a command.
//!
//! This module is what the files hold; [`crate::layers::control`] serves them.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use profile_store::{Profiler, json, text};

use crate::filesystem::{Attr, Timespec};
use crate::handles::HandleTable;

/// Node id of the text control file (above every id the inode store hands out).
pub const TEXT_INO: u64 = u64::MAX - 1;
/// Node id of the JSON control file.
pub const JSON_INO: u64 = u64::MAX - 2;
/// Node id of the extra control file ([`ControlFiles::with_file`]).
pub const EXTRA_INO: u64 = u64::MAX - 3;
/// Node id of the slow-operation log (`.fsprof.slow`, [`ControlFiles::with_slow_log`]).
pub const SLOW_INO: u64 = u64::MAX - 4;
/// Node ids at or above this are reserved for control files.
pub const RESERVED_BASE: u64 = u64::MAX - 15;

/// Directory offsets of the control files' entries when the root listing shows them
/// ([`ControlFiles::listed`]): entry `k` (from 0) is followed by offset `LISTED_BASE + k + 1`. Just
/// below `i64::MAX` (ext4's end-of-directory cookie), far above the offsets file systems give.
pub const LISTED_BASE: u64 = i64::MAX as u64 - 1024;

/// Default base name of the control files.
pub const DEFAULT_NAME: &str = ".fsprof";

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
    snapshots: HandleTable<Vec<u8>>,
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
        ControlFiles {
            text_name: OsString::from(base),
            json_name: OsString::from(format!("{base}.json")),
            profiler,
            snapshots: HandleTable::default(),
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
    /// the mode: `default_permissions`); others may read.
    pub fn attr(&self, ino: u64) -> Attr {
        Attr {
            ino,
            size: 0,
            blocks: 0,
            atime: self.created,
            mtime: self.created,
            ctime: self.created,
            mode: libc::S_IFREG | 0o644,
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

    /// Takes a snapshot for a new open of `ino`; returns its handle.
    pub fn open(&self, ino: u64) -> u64 {
        let bytes = match (&self.extra, &self.slow) {
            (Some((_, f)), _) if ino == EXTRA_INO => f.contents(),
            (_, Some((_, f))) if ino == SLOW_INO => f.contents(),
            _ => {
                let p = self.profiler.snapshot();
                if ino == JSON_INO {
                    json::write(&p)
                } else {
                    text::write(&p)
                }
                .into_bytes()
            }
        };
        self.snapshots.insert(bytes)
    }

    /// Copies the snapshot `fh` from `offset` into `buf`; returns the bytes copied.
    pub fn read(&self, fh: u64, offset: u64, buf: &mut [u8]) -> usize {
        let snap = self.snapshots.get(fh);
        let data = snap.as_deref().map_or(&[][..], |v| v.as_slice());
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(data.len());
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        n
    }

    /// Drops the snapshot `fh`.
    pub fn release(&self, fh: u64) {
        self.snapshots.remove(fh);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::{Recorder, RecorderConfig};

    fn control(restrict: bool) -> ControlFiles {
        let rec = Recorder::new("fuse", &crate::ops::NAMES, &RecorderConfig::default());
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
