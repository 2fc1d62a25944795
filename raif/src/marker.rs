//! Branch identity: the marker file at the root of every branch.
//!
//! The marker names the volume (a random 128-bit id), the branch's index and the number of
//! branches, so that a directory put in a branch's place (even an empty one, which root could
//! read and write like any other) is recognised as not being that branch. It also carries the
//! volume's failure record as this branch last saw it: the *epoch* (raised each time a branch
//! is found failed) and the set of failed branches. Surviving branches get the new record when
//! a branch fails, so after a restart the branch that missed writes is known even when it is
//! back in place. `clean` is false while the volume is mounted: a marker still saying so at the
//! next mount means the daemon stopped without unmounting (see the RAID-5 write hole in the
//! README: run `raif scrub`).
//!
//! Format (ASCII, one `key=value` per line after the first):
//!
//! ```text
//! raif-branch v1
//! volume=8d3c0c7e5b0a4b2f9f1c2d3e4f5a6b7c
//! index=1
//! branches=3
//! epoch=2
//! failed=2
//! clean=true
//! ```

use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};

use fsprof_fuse::sys;

/// File name of the marker at a branch root.
pub const MARKER: &str = ".raif-branch";
const TMP: &str = ".raif-branch.tmp";

/// What a branch's marker says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// Volume id.
    pub volume: u128,
    /// This branch's index.
    pub index: usize,
    /// Number of branches of the volume.
    pub branches: usize,
    /// Failure epoch as this branch last saw it.
    pub epoch: u64,
    /// Failed branches (bit mask) as this branch last saw them.
    pub failed: u64,
    /// Whether the volume was unmounted cleanly.
    pub clean: bool,
}

impl Marker {
    /// The file's text.
    pub fn encode(&self) -> String {
        let failed: Vec<String> = (0..64)
            .filter(|b| self.failed & (1 << b) != 0)
            .map(|b| b.to_string())
            .collect();
        format!(
            "raif-branch v1\nvolume={:032x}\nindex={}\nbranches={}\nepoch={}\nfailed={}\nclean={}\n",
            self.volume,
            self.index,
            self.branches,
            self.epoch,
            failed.join(","),
            self.clean
        )
    }

    /// Parses a marker's text.
    pub fn decode(text: &str) -> Result<Marker, String> {
        let mut lines = text.lines();
        if lines.next() != Some("raif-branch v1") {
            return Err("not a RAIF branch marker".into());
        }
        let (mut volume, mut index, mut branches) = (None, None, None);
        let mut m = Marker {
            volume: 0,
            index: 0,
            branches: 0,
            epoch: 0,
            failed: 0,
            clean: true,
        };
        for l in lines {
            let (k, v) = l.split_once('=').ok_or_else(|| format!("bad line '{l}'"))?;
            let bad = || format!("bad {k} '{v}'");
            match k {
                "volume" => volume = Some(u128::from_str_radix(v, 16).map_err(|_| bad())?),
                "index" => index = Some(v.parse().map_err(|_| bad())?),
                "branches" => branches = Some(v.parse().map_err(|_| bad())?),
                "epoch" => m.epoch = v.parse().map_err(|_| bad())?,
                "clean" => m.clean = v == "true",
                "failed" => {
                    for b in v.split(',').filter(|s| !s.is_empty()) {
                        let b: u32 = b.parse().map_err(|_| bad())?;
                        m.failed |= 1u64.checked_shl(b).ok_or_else(bad)?;
                    }
                }
                _ => {}
            }
        }
        m.volume = volume.ok_or("no volume")?;
        m.index = index.ok_or("no index")?;
        m.branches = branches.ok_or("no branches")?;
        if m.index >= m.branches {
            return Err(format!("index {} of {} branches", m.index, m.branches));
        }
        Ok(m)
    }

    /// Reads the marker of the branch whose root is `root`: `Ok(None)` if there is none,
    /// `InvalidData` if it is not a marker.
    pub fn read(root: BorrowedFd) -> io::Result<Option<Marker>> {
        let fd = match sys::openat(
            root,
            OsStr::new(MARKER),
            libc::O_RDONLY | libc::O_NOFOLLOW,
            0,
        ) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut text = String::new();
        std::fs::File::from(fd)
            .take(4096)
            .read_to_string(&mut text)?;
        Marker::decode(&text)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Writes the marker durably (temporary file, fsync, rename, fsync of the directory).
    pub fn write(&self, root: BorrowedFd) -> io::Result<()> {
        let fd = sys::openat(
            root,
            OsStr::new(TMP),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW,
            0o644,
        )?;
        let mut f = std::fs::File::from(fd);
        f.write_all(self.encode().as_bytes())?;
        sys::fsync(f.as_fd(), false)?;
        drop(f);
        sys::renameat2(root, OsStr::new(TMP), root, OsStr::new(MARKER), 0)?;
        let dir = sys::reopen(root, libc::O_RDONLY | libc::O_DIRECTORY)?;
        sys::fsync(dir.as_fd(), false)
    }
}

/// Whether `name` (at a branch root) is one of the marker's files, hidden from the mount.
pub fn is_marker_name(name: &[u8]) -> bool {
    name == MARKER.as_bytes() || name == TMP.as_bytes()
}

/// 16 random bytes from the kernel.
pub fn random_u128() -> u128 {
    let mut b = [0u8; 16];
    let ok = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if ok.is_err() {
        // Fall back to time and pid: unique enough for a volume id.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        return t ^ ((std::process::id() as u128) << 96);
    }
    u128::from_ne_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip_and_reject_garbage() {
        let m = Marker {
            volume: 0xdead_beef_0123_4567_89ab_cdef_0000_0001,
            index: 2,
            branches: 4,
            epoch: 9,
            failed: 0b1010,
            clean: false,
        };
        let t = m.encode();
        assert!(t.contains("failed=1,3\n"), "{t}");
        assert_eq!(Marker::decode(&t), Ok(m));
        assert!(Marker::decode("hello").is_err());
        assert!(Marker::decode("raif-branch v1\nvolume=1\nindex=3\nbranches=3\n").is_err());
        assert!(Marker::decode("raif-branch v1\nindex=0\nbranches=3\n").is_err());
    }

    #[test]
    fn markers_are_written_and_read_back() {
        let dir = std::env::temp_dir().join(format!("raif-marker-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let root = sys::open_path(&dir, libc::O_PATH | libc::O_DIRECTORY).unwrap();
        assert_eq!(Marker::read(root.as_fd()).unwrap(), None);
        let m = Marker {
            volume: random_u128(),
            index: 0,
            branches: 2,
            epoch: 1,
            failed: 0,
            clean: true,
        };
        m.write(root.as_fd()).unwrap();
        assert_eq!(Marker::read(root.as_fd()).unwrap(), Some(m));
        std::fs::write(dir.join(MARKER), "junk").unwrap();
        assert!(Marker::read(root.as_fd()).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
