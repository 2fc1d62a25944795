//! Branch identity: the marker file at the root of every branch.
//!
//! The marker names the volume (a random 128-bit id), the branch's index and the number of
//! branches, so that a directory put in a branch's place (even an empty one, which root could
//! read and write like any other) is recognised as not being that branch. It also carries the
//! volume's failure record as this branch last saw it: the *epoch* (raised each time a branch
//! is found failed) and the set of failed branches, each with the last mount it took part in.
//! Surviving branches get the new record when a branch fails, so after a restart the branch
//! that missed writes is known even when it is back in place.
//!
//! `mount` counts the volume's mounts: every mount raises it on all online branches before it
//! serves anything, so a branch whose marker is behind the others' (an old copy put back in its
//! place, say from a backup) is known to have missed whole mounts. Raising it is done in two
//! steps (`starting=true` on every branch, then `starting=false`), so that a crash between two
//! branches' writes is told apart from an old copy: while the highest marker still says
//! `starting`, nothing was served at that number. `clean` is false while the volume is
//! mounted: a marker still saying so at the next mount means the daemon stopped without
//! unmounting. `log=true` says the volume keeps a write-intent log ([`crate::intent`]): the
//! rows being written at such a stop are known and resynchronised at the next mount. On a
//! volume without one, `crashed` stays true after such a stop until a `raif scrub --repair`
//! has found the volume consistent; scrub reports it, but it is no evidence of which part of a
//! mismatch is wrong. (Older versions of RAIF ignore the `log` line.)
//!
//! Format (ASCII, one `key=value` per line after the first):
//!
//! ```text
//! raif-branch v1
//! volume=8d3c0c7e5b0a4b2f9f1c2d3e4f5a6b7c
//! index=1
//! branches=3
//! epoch=2
//! failed=2@7
//! mount=9
//! starting=false
//! clean=true
//! crashed=false
//! log=true
//! generations=0,1,0
//! level=5
//! stripe=65536
//! copies=
//! parity=
//! policy=
//! ```
//!
//! `failed=2@7`: branch 2 is failed (or stale) and last took part in mount 7. Markers written
//! before mounts were counted say `failed=2` (mount not known) and have no `mount` (0).
//!
//! # Members and their generations
//!
//! `generations=0,2,0` counts, for every member (branch index), the directories that have been
//! that member: it is raised when a member is rebuilt, onto a new directory or in place (at
//! the start of a rebuild while mounted, at the end of an offline one), and every branch
//! records every member's. A branch's own entry says which generation of its member it is.
//! The failure record (`failed=`) says which member is out of service and since which mount;
//! the generation says which directory is the member: without it, the directory a member was
//! rebuilt away from carried the same marker as the new one, and the failure record, cleared
//! by the rebuild, no longer named it (the replacement happened within one mount, so the
//! mount count did not tell them apart either). A directory whose own generation is behind
//! the volume's for its member is an old copy, replaced at the generation after its own.
//!
//! # The volume's settings
//!
//! `level=5`, `stripe=65536`, `copies=3`, `parity=2` and `policy=SHA256` are what new files
//! get where no policy rule matches, and the digest of the policy file the volume was last
//! mounted with (empty: none); a mount that gives none of them uses these. Markers written
//! before settings were kept have none of these lines.

use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};

use fsprof_fuse::sys;

use crate::layout::MAX_BRANCHES;
use crate::part_io::no_room;
use crate::reserved::{MARKER, MARKER_TMP as TMP};

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
    /// For each failed branch, the last mount it took part in (0: not known).
    pub failed_mount: [u64; MAX_BRANCHES],
    /// The last mount this branch took part in.
    pub mount: u64,
    /// `mount` was being raised on the branches and nothing had been served yet.
    pub starting: bool,
    /// Whether the volume was unmounted cleanly.
    pub clean: bool,
    /// The volume stopped uncleanly since its last complete `raif scrub --repair`.
    pub crashed: bool,
    /// The volume keeps a write-intent log ([`crate::intent`]): after an unclean stop, the
    /// rows being written are known.
    pub logged: bool,
    /// Each member's generation (see the module docs); the entry at `index` is this
    /// directory's own.
    pub gens: [u64; MAX_BRANCHES],
    /// The volume's settings for new files, if the marker records them.
    pub settings: Option<Stored>,
}

/// The settings a volume keeps for new files: the defaults its last mount gave them, and the
/// digest of its policy file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stored {
    /// Default level (0, 1, 4 or 5).
    pub level: u32,
    /// Default stripe unit (bytes).
    pub stripe: u32,
    /// RAIF1 copies (`None`: one per branch).
    pub copies: Option<usize>,
    /// RAIF4's parity branch (`None`: the last).
    pub parity: Option<usize>,
    /// SHA-256 of the policy file (hex), `None` without one.
    pub policy: Option<String>,
}

impl Stored {
    /// The lines of a marker that say it.
    fn encode(&self, s: &mut String) {
        let opt = |o: Option<usize>| o.map_or(String::new(), |v| v.to_string());
        s.push_str(&format!(
            "level={}\nstripe={}\ncopies={}\nparity={}\npolicy={}\n",
            self.level,
            self.stripe,
            opt(self.copies),
            opt(self.parity),
            self.policy.as_deref().unwrap_or("")
        ));
    }
}

impl Marker {
    /// A marker with no failure record, mount 0, clean.
    pub fn new(volume: u128, index: usize, branches: usize) -> Marker {
        Marker {
            volume,
            index,
            branches,
            epoch: 1,
            failed: 0,
            failed_mount: [0; MAX_BRANCHES],
            mount: 0,
            starting: false,
            clean: true,
            crashed: false,
            logged: false,
            gens: [0; MAX_BRANCHES],
            settings: None,
        }
    }

    /// This directory's generation of its member.
    pub fn own_gen(&self) -> u64 {
        self.gens[self.index]
    }

    /// The file's text.
    pub fn encode(&self) -> String {
        let failed: Vec<String> = (0..MAX_BRANCHES)
            .filter(|&b| self.failed & (1 << b) != 0)
            .map(|b| match self.failed_mount[b] {
                0 => b.to_string(),
                m => format!("{b}@{m}"),
            })
            .collect();
        let mut s = format!(
            "raif-branch v1\nvolume={:032x}\nindex={}\nbranches={}\nepoch={}\nfailed={}\n\
             mount={}\nstarting={}\nclean={}\ncrashed={}\n",
            self.volume,
            self.index,
            self.branches,
            self.epoch,
            failed.join(","),
            self.mount,
            self.starting,
            self.clean,
            self.crashed
        );
        if self.logged {
            s.push_str("log=true\n");
        }
        let gens: Vec<String> = self.gens[..self.branches.min(MAX_BRANCHES)]
            .iter()
            .map(u64::to_string)
            .collect();
        s.push_str(&format!("generations={}\n", gens.join(",")));
        if let Some(st) = &self.settings {
            st.encode(&mut s);
        }
        s
    }

    /// Parses a marker's text.
    pub fn decode(text: &str) -> Result<Marker, String> {
        let mut lines = text.lines();
        if lines.next() != Some("raif-branch v1") {
            return Err("not a RAIF branch marker".into());
        }
        let (mut volume, mut index, mut branches) = (None, None, None);
        let mut m = Marker::new(0, 0, 0);
        m.epoch = 0;
        // Blank lines: the padding of a marker overwritten in place.
        for l in lines.filter(|l| !l.is_empty()) {
            let (k, v) = l.split_once('=').ok_or_else(|| format!("bad line '{l}'"))?;
            let bad = || format!("bad {k} '{v}'");
            match k {
                "volume" => volume = Some(u128::from_str_radix(v, 16).map_err(|_| bad())?),
                "index" => index = Some(v.parse().map_err(|_| bad())?),
                "branches" => branches = Some(v.parse().map_err(|_| bad())?),
                "epoch" => m.epoch = v.parse().map_err(|_| bad())?,
                "mount" => m.mount = v.parse().map_err(|_| bad())?,
                "starting" => m.starting = v == "true",
                "clean" => m.clean = v == "true",
                "crashed" => m.crashed = v == "true",
                "log" => m.logged = v == "true",
                "generations" => {
                    for (i, g) in v.split(',').filter(|s| !s.is_empty()).enumerate() {
                        if i >= MAX_BRANCHES {
                            return Err(bad());
                        }
                        m.gens[i] = g.parse().map_err(|_| bad())?;
                    }
                }
                "level" | "stripe" | "copies" | "parity" | "policy" => {
                    let st = m.settings.get_or_insert_with(Stored::default);
                    let opt = |v: &str| -> Result<Option<usize>, String> {
                        if v.is_empty() {
                            Ok(None)
                        } else {
                            v.parse().map(Some).map_err(|_| bad())
                        }
                    };
                    match k {
                        "level" => st.level = v.parse().map_err(|_| bad())?,
                        "stripe" => st.stripe = v.parse().map_err(|_| bad())?,
                        "copies" => st.copies = opt(v)?,
                        "parity" => st.parity = opt(v)?,
                        _ => st.policy = (!v.is_empty()).then(|| v.to_string()),
                    }
                }
                "failed" => {
                    for item in v.split(',').filter(|s| !s.is_empty()) {
                        let (b, at) = item.split_once('@').unwrap_or((item, "0"));
                        let b: usize = b.parse().map_err(|_| bad())?;
                        if b >= MAX_BRANCHES {
                            return Err(bad());
                        }
                        m.failed |= 1 << b;
                        m.failed_mount[b] = at.parse().map_err(|_| bad())?;
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

    /// Writes the marker durably (temporary file, fsync, rename, fsync of the directory). On a
    /// branch without room for the temporary file (`ENOSPC`, `EDQUOT`) the marker is
    /// overwritten in place instead: its text fits in the block it already has, and a full
    /// branch is not a failed one.
    pub fn write(&self, root: BorrowedFd) -> io::Result<()> {
        let text = self.encode();
        match Self::write_new(root, text.as_bytes()) {
            Err(e) if no_room(&e) => {
                let _ = sys::unlinkat(root, OsStr::new(TMP), false);
                Self::overwrite(root, text.as_bytes()).map_err(|_| e)
            }
            r => r,
        }
    }

    fn write_new(root: BorrowedFd, text: &[u8]) -> io::Result<()> {
        let fd = sys::openat(
            root,
            OsStr::new(TMP),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW,
            0o644,
        )?;
        let mut f = std::fs::File::from(fd);
        f.write_all(text)?;
        sys::fsync(f.as_fd(), false)?;
        drop(f);
        sys::renameat2(root, OsStr::new(TMP), root, OsStr::new(MARKER), 0)?;
        let dir = sys::reopen(root, libc::O_RDONLY | libc::O_DIRECTORY)?;
        sys::fsync(dir.as_fd(), false)
    }

    /// Overwrites the existing marker with `text` (no new file, no new block), padded with
    /// newlines to the old length so that the file reads as a whole marker at every moment (a
    /// shorter text would leave the old one's tail until the truncation).
    fn overwrite(root: BorrowedFd, text: &[u8]) -> io::Result<()> {
        let fd = sys::openat(
            root,
            OsStr::new(MARKER),
            libc::O_WRONLY | libc::O_NOFOLLOW,
            0,
        )?;
        let old = sys::fstat(fd.as_fd())?.size as usize;
        let mut padded = text.to_vec();
        padded.resize(old.max(text.len()), b'\n');
        let text = &padded[..];
        let mut done = 0;
        while done < text.len() {
            match sys::pwrite(fd.as_fd(), &text[done..], done as u64) {
                Ok(0) => return Err(io::Error::from_raw_os_error(libc::ENOSPC)),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        sys::fsync(fd.as_fd(), false)
    }
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
        let mut m = Marker::new(0xdead_beef_0123_4567_89ab_cdef_0000_0001, 2, 4);
        m.epoch = 9;
        m.failed = 0b1010;
        m.failed_mount[3] = 17;
        m.mount = 20;
        m.starting = true;
        m.clean = false;
        m.crashed = true;
        m.logged = true;
        m.gens[1] = 3;
        m.settings = Some(Stored {
            level: 5,
            stripe: 4096,
            copies: None,
            parity: Some(2),
            policy: Some("ab12".into()),
        });
        let t = m.encode();
        assert!(t.contains("failed=1,3@17\n"), "{t}");
        assert!(t.contains("generations=0,3,0,0\n"), "{t}");
        assert_eq!(Marker::decode(&t), Ok(m));
        assert!(Marker::decode("hello").is_err());
        assert!(Marker::decode("raif-branch v1\nvolume=1\nindex=3\nbranches=3\n").is_err());
        assert!(Marker::decode("raif-branch v1\nindex=0\nbranches=3\n").is_err());
        assert!(
            Marker::decode("raif-branch v1\nvolume=1\nindex=0\nbranches=3\nfailed=64\n").is_err()
        );
        // A marker from before mounts were counted: mount 0, failure mounts unknown.
        let old = Marker::decode(
            "raif-branch v1\nvolume=1\nindex=0\nbranches=3\nepoch=2\nfailed=2\nclean=true\n",
        )
        .unwrap();
        assert_eq!((old.mount, old.failed, old.failed_mount[2]), (0, 4, 0));
        assert!(!old.starting && !old.crashed);
        // Nor generations nor settings: every member at generation 0, settings unknown.
        assert_eq!((old.own_gen(), old.settings), (0, None));
    }

    #[test]
    fn markers_are_written_and_read_back() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let root = sys::open_path(dir, libc::O_PATH | libc::O_DIRECTORY).unwrap();
        assert_eq!(Marker::read(root.as_fd()).unwrap(), None);
        let m = Marker::new(random_u128(), 0, 2);
        m.write(root.as_fd()).unwrap();
        assert_eq!(Marker::read(root.as_fd()).unwrap(), Some(m.clone()));
        // Overwritten in place (a branch without room for a new file) by a shorter marker.
        let mut long = m.clone();
        long.failed = 0b1110;
        long.failed_mount[1..4].copy_from_slice(&[123_456_789; 3]);
        long.write(root.as_fd()).unwrap();
        Marker::overwrite(root.as_fd(), m.encode().as_bytes()).unwrap();
        assert_eq!(Marker::read(root.as_fd()).unwrap(), Some(m));
        std::fs::write(dir.join(MARKER), "junk").unwrap();
        assert!(Marker::read(root.as_fd()).is_err());
    }
}
