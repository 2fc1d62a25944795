//! Which block devices get the requests of a directory's file system, found through
//! `/sys/dev/block`: a partition counts as its disk; dm and md devices (bio-based: no
//! `block_rq_*` events of their own) as their member disks, recursively; a loop device as
//! itself (never its backing file). A file system without a block device (tmpfs, FUSE, NFS)
//! has none, and says why.
//!
//! Device numbers: the tracepoints' `dev` and `connection` fields hold the kernel's internal
//! `MAJOR << 20 | MINOR` ([`kernel_dev`]), while `st_dev` holds the user-space encoding (minor
//! bits 0-7 at 0-7, major at 8-19, minor bits 8-19 at 20-31): the two differ for every major
//! above 0 and every minor of 256 or more, so they are always converted through major and
//! minor.

use std::path::{Path, PathBuf};

/// A device number as major and minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dev {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
}

impl Dev {
    /// From a `st_dev` or `st_rdev` value.
    pub fn from_stat(d: u64) -> Dev {
        Dev {
            major: libc::major(d as libc::dev_t),
            minor: libc::minor(d as libc::dev_t),
        }
    }

    /// The kernel's internal encoding, as tracepoints record it: `MAJOR << 20 | MINOR`.
    pub fn kernel(self) -> u32 {
        kernel_dev(self.major, self.minor)
    }

    /// Parses `MAJ:MIN` (sysfs `dev` files, mountinfo).
    pub fn parse(s: &str) -> Option<Dev> {
        let (a, b) = s.trim().split_once(':')?;
        Some(Dev {
            major: a.parse().ok()?,
            minor: b.parse().ok()?,
        })
    }
}

impl std::fmt::Display for Dev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// The kernel's internal device number (`MKDEV`): `major << 20 | minor` (minors below 2^20).
pub fn kernel_dev(major: u32, minor: u32) -> u32 {
    (major << 20) | (minor & 0xf_ffff)
}

/// A block device whose request queue gets requests: `NAME` as in `/sys/block`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct BlockDevice {
    /// Its name (`vda`, `loop0`, `nvme0n1`).
    pub name: String,
    /// Its number.
    pub dev: Dev,
}

/// The block devices under a directory, or why there are none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Devices {
    /// The devices, sorted by name, each once.
    Found(Vec<BlockDevice>),
    /// No block device: the reason, as one line.
    None(String),
}

/// The block devices that get the requests of the file system holding `dir`.
pub fn under(dir: &Path) -> Devices {
    under_in(dir, Path::new("/sys"), Path::new("/proc/self/mountinfo"))
}

/// [`under`] with the sysfs root and mountinfo file given (for tests).
pub fn under_in(dir: &Path, sys: &Path, mountinfo: &Path) -> Devices {
    use std::os::unix::fs::MetadataExt;
    let st = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) => return Devices::None(format!("{}: {e}", dir.display())),
    };
    let mut dev = Dev::from_stat(st.dev());
    if dev.major == 0 {
        // An anonymous device (tmpfs, FUSE, NFS, overlay, btrfs): the mount's source may
        // still be a block device (btrfs).
        let info = std::fs::read_to_string(mountinfo).unwrap_or_default();
        match mount_source(&info, dev) {
            Some((_, src)) if is_block_device(&src).is_some() => {
                dev = is_block_device(&src).expect("checked just above");
            }
            Some((fstype, _)) => {
                return Devices::None(format!(
                    "{} is on {fstype}, which has no block device",
                    dir.display()
                ));
            }
            None => {
                return Devices::None(format!(
                    "{} is on device {dev}, which is not a block device",
                    dir.display()
                ));
            }
        }
    }
    let mut out = Vec::new();
    let mut reasons = Vec::new();
    match std::fs::canonicalize(sys.join("dev/block").join(dev.to_string())) {
        Ok(p) => resolve(&p, &mut out, &mut reasons, 0),
        Err(e) => reasons.push(format!("/sys/dev/block/{dev}: {e}")),
    }
    out.sort();
    out.dedup();
    if out.is_empty() {
        let why = if reasons.is_empty() {
            format!("device {dev} has no request queue")
        } else {
            reasons.join("; ")
        };
        return Devices::None(format!("{}: {why}", dir.display()));
    }
    Devices::Found(out)
}

/// The device number of `p` if it is a block device.
fn is_block_device(p: &str) -> Option<Dev> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(p).ok()?;
    m.file_type()
        .is_block_device()
        .then(|| Dev::from_stat(m.rdev()))
}

/// The file-system type and source of the mount of device `dev` in `mountinfo`.
fn mount_source(mountinfo: &str, dev: Dev) -> Option<(String, String)> {
    crate::mountinfo::parse(mountinfo)
        .rev()
        .find(|m| Dev::parse(m.dev) == Some(dev))
        .map(|m| {
            (
                m.fstype.to_string(),
                m.source.to_string_lossy().into_owned(),
            )
        })
}

/// Adds the request-queue devices behind the sysfs block directory `p` to `out`.
fn resolve(p: &Path, out: &mut Vec<BlockDevice>, reasons: &mut Vec<String>, depth: usize) {
    if depth > 16 {
        reasons.push(format!("{}: devices nested too deep", p.display()));
        return;
    }
    // A partition's directory sits in its disk's.
    let disk: PathBuf = if p.join("partition").exists() {
        match p.parent() {
            Some(d) => d.to_path_buf(),
            None => return,
        }
    } else {
        p.to_path_buf()
    };
    let name = disk
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let slaves: Vec<PathBuf> = std::fs::read_dir(disk.join("slaves"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    if !slaves.is_empty() {
        for s in slaves {
            match std::fs::canonicalize(&s) {
                Ok(s) => resolve(&s, out, reasons, depth + 1),
                Err(e) => reasons.push(format!("{}: {e}", s.display())),
            }
        }
        return;
    }
    if !disk.join("mq").is_dir() {
        reasons.push(format!(
            "{name} is bio-based (no request queue, so no block_rq events)"
        ));
        return;
    }
    match std::fs::read_to_string(disk.join("dev"))
        .ok()
        .as_deref()
        .and_then(Dev::parse)
    {
        Some(dev) => out.push(BlockDevice { name, dev }),
        None => reasons.push(format!("{}: no dev file", disk.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_encoding_differs_from_st_dev_past_minor_255() {
        // st_dev of major 0, minor 300 (as glibc's makedev makes it).
        let st = libc::makedev(0, 300) as u64;
        assert_eq!(st, (300 & 0xff) | ((300 & !0xff) << 12));
        let d = Dev::from_stat(st);
        assert_eq!((d.major, d.minor), (0, 300));
        assert_eq!(d.kernel(), 300);
        assert_ne!(d.kernel() as u64, st);
        let loop7 = Dev::from_stat(libc::makedev(7, 3) as u64);
        assert_eq!(loop7.kernel(), (7 << 20) | 3);
        assert_eq!(
            Dev::parse("259:1"),
            Some(Dev {
                major: 259,
                minor: 1
            })
        );
        assert_eq!(Dev::parse("x"), None);
    }

    fn touch(p: &Path, body: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }

    #[test]
    fn partitions_dm_and_loops_resolve_to_request_queue_disks() {
        let t = tempfile::tempdir().unwrap();
        let s = t.path();
        // vda with partition vda1; dm-0 over vda2 and sdb; loop0.
        let vda = s.join("devices/pci/block/vda");
        touch(&vda.join("dev"), "253:0\n");
        std::fs::create_dir_all(vda.join("mq")).unwrap();
        touch(&vda.join("vda1/partition"), "1\n");
        touch(&vda.join("vda2/partition"), "2\n");
        let sdb = s.join("devices/scsi/block/sdb");
        touch(&sdb.join("dev"), "8:16\n");
        std::fs::create_dir_all(sdb.join("mq")).unwrap();
        let dm = s.join("devices/virtual/block/dm-0");
        touch(&dm.join("dev"), "252:0\n");
        std::fs::create_dir_all(dm.join("slaves")).unwrap();
        std::os::unix::fs::symlink(vda.join("vda2"), dm.join("slaves/vda2")).unwrap();
        std::os::unix::fs::symlink(&sdb, dm.join("slaves/sdb")).unwrap();
        let zram = s.join("devices/virtual/block/zram0");
        touch(&zram.join("dev"), "251:0\n");
        std::fs::create_dir_all(s.join("dev/block")).unwrap();
        for (d, target) in [
            ("253:1", vda.join("vda1")),
            ("252:0", dm.clone()),
            ("251:0", zram.clone()),
        ] {
            std::os::unix::fs::symlink(target, s.join("dev/block").join(d)).unwrap();
        }
        let mut out = Vec::new();
        let mut why = Vec::new();
        resolve(
            &s.join("dev/block/253:1").canonicalize().unwrap(),
            &mut out,
            &mut why,
            0,
        );
        assert_eq!(
            out.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
            ["vda"]
        );
        out.clear();
        resolve(
            &s.join("dev/block/252:0").canonicalize().unwrap(),
            &mut out,
            &mut why,
            0,
        );
        out.sort();
        assert_eq!(
            out,
            [
                BlockDevice {
                    name: "sdb".into(),
                    dev: Dev {
                        major: 8,
                        minor: 16
                    }
                },
                BlockDevice {
                    name: "vda".into(),
                    dev: Dev {
                        major: 253,
                        minor: 0
                    }
                }
            ]
        );
        out.clear();
        resolve(
            &s.join("dev/block/251:0").canonicalize().unwrap(),
            &mut out,
            &mut why,
            0,
        );
        assert!(out.is_empty());
        assert!(
            why.iter().any(|w| w.contains("zram0 is bio-based")),
            "{why:?}"
        );
    }

    #[test]
    fn tmpfs_has_no_block_device_and_says_so() {
        let info = "24 1 0:21 / /dev/shm rw - tmpfs tmpfs rw\n";
        assert_eq!(
            mount_source(
                info,
                Dev {
                    major: 0,
                    minor: 21
                }
            ),
            Some(("tmpfs".to_string(), "tmpfs".to_string()))
        );
        assert_eq!(
            mount_source(
                info,
                Dev {
                    major: 0,
                    minor: 22
                }
            ),
            None
        );
    }
}
