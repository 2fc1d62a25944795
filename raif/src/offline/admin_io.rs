//! I/O on a file's parts as an admin command or the replay does it ([`AdminParts`]): opened
//! by name from a walk's directories, checksums included, a branch that errs left out.

use std::cell::Cell;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use fsprof_fuse::daemon::mount::plain;
use fsprof_fuse::sys;

use crate::layout::{ATTR_MAX, XATTR};
use crate::part_io::{OutOfDate, Parts};

/// A file's parts opened by an admin command; a branch that errs is just left out.
pub struct AdminParts {
    /// The parts, by branch (`None`: not opened there).
    pub fds: Vec<Option<OwnedFd>>,
    /// Branches not to use: failed during the command, or out of date for the file.
    pub down: Cell<u64>,
    /// The file's parity is out of date (its record says so): nothing is reconstructed from it.
    pub stale: Cell<bool>,
    /// Where each part's checksums live (its home branch).
    pub homes: Vec<Option<usize>>,
    /// The parts that keep checksums (in the record attribute of their home part).
    pub xsums: u64,
    /// Their overflow files, where opened or made ([`crate::sums`]).
    over: Vec<std::cell::RefCell<Option<OwnedFd>>>,
    /// The home branches' sum directories, where overflow files are made (with `write`).
    over_dirs: Vec<Option<OwnedFd>>,
    /// The file's record id.
    id: u64,
    /// Reads go to the data of the parts only ([`AdminParts::counting`]).
    counting: bool,
    /// Bytes read from the parts' data since opened.
    pub read: Cell<u64>,
    /// Each part's data extent last found (`[start, end)`).
    extents: Vec<Cell<(u64, u64)>>,
}

impl AdminParts {
    /// Opens `name` in `dirs` on the branches of `mask` with `flags`.
    pub fn open(dirs: &[Option<OwnedFd>], name: &OsStr, mask: u64, flags: i32) -> AdminParts {
        let fds = dirs
            .iter()
            .enumerate()
            .map(|(b, d)| {
                let d = d.as_ref().filter(|_| mask & (1 << b) != 0)?;
                sys::openat(d.as_fd(), name, flags | libc::O_NOFOLLOW, 0).ok()
            })
            .collect();
        AdminParts {
            fds,
            down: Cell::new(0),
            stale: Cell::new(false),
            homes: Vec::new(),
            xsums: 0,
            over: Vec::new(),
            over_dirs: Vec::new(),
            id: 0,
            counting: false,
            read: Cell::new(0),
            extents: Vec::new(),
        }
    }

    /// Reads skip the holes of the parts (read as zeros without a system call, found with
    /// `SEEK_DATA` and `SEEK_HOLE`), and the bytes read from their data are counted in
    /// [`AdminParts::read`]: scrub, which reads each stored byte once, says so.
    pub fn counting(mut self) -> AdminParts {
        self.counting = true;
        self.extents = self.fds.iter().map(|_| Cell::new((0, 0))).collect();
        self
    }

    /// The bytes of data branch `b`'s part holds (its holes left out).
    pub fn stored(&self, b: usize) -> io::Result<u64> {
        let Ok(fd) = self.fd(b) else { return Ok(0) };
        let len = sys::fstat(fd)?.size;
        let (mut off, mut total) = (0u64, 0u64);
        while off < len {
            let Some((start, end)) = data_extent(fd, off)? else {
                break;
            };
            total += end.min(len).saturating_sub(start);
            off = end;
        }
        Ok(total)
    }

    /// `pread` of only the data of `b`'s part: zeros for its holes (not read); short only
    /// at its end, as `pread(2)` on a regular file.
    fn pread_data(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.pread_extent(b, &mut buf[done..], off + done as u64)? {
                0 => break,
                n => done += n,
            }
        }
        Ok(done)
    }

    /// One step of [`AdminParts::pread_data`]: zeros up to the next data, or data up to the
    /// next hole; `0` at the end.
    fn pread_extent(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let fd = self.fd(b)?;
        let cached = self.extents[b].get();
        let (start, end) = if cached.0 <= off && off < cached.1 {
            cached
        } else {
            match data_extent(fd, off)? {
                Some(x) => {
                    self.extents[b].set(x);
                    x
                }
                // A hole up to the end, if not past it.
                None => {
                    let len = sys::fstat(fd)?.size;
                    let n = (len.saturating_sub(off) as usize).min(buf.len());
                    buf[..n].fill(0);
                    return Ok(n);
                }
            }
        };
        if start > off {
            let n = ((start - off) as usize).min(buf.len());
            buf[..n].fill(0);
            return Ok(n);
        }
        let n = ((end - off) as usize).min(buf.len());
        let got = sys::pread(fd, &mut buf[..n], off)?;
        self.read.set(self.read.get() + got as u64);
        Ok(got)
    }

    /// Also finds where the parts of file `id` of layout `l` keep their checksums, in the sum
    /// directories `dirs` (by branch) and the attributes of the home parts (see
    /// [`crate::sums`]); read-write with `write`; with `create`, a part that keeps none gains
    /// them (in the attribute).
    pub fn with_sums(
        mut self,
        dirs: &[Option<OwnedFd>],
        id: u64,
        l: &crate::layout::Layout,
        write: bool,
        create: bool,
    ) -> AdminParts {
        let n = self.fds.len();
        if !crate::sums::covered(l) {
            return self;
        }
        self.id = id;
        self.homes = (0..n)
            .map(|b| crate::sums::home(b, l.width as usize).filter(|_| l.holds(b)))
            .collect();
        let fl = if write { libc::O_RDWR } else { libc::O_RDONLY } | libc::O_NOFOLLOW;
        let open = |h: usize, b: usize| {
            let d = dirs.get(h)?.as_ref()?;
            let name = crate::sums::name(id, b);
            sys::openat(d.as_fd(), OsStr::new(&name), fl, 0).ok()
        };
        self.over = (0..n).map(|_| Default::default()).collect();
        self.over_dirs = (0..n).map(|_| None).collect();
        for b in 0..n {
            let Some(h) = self.homes[b] else { continue };
            let home = self.fds.get(h).and_then(Option::as_ref);
            let held =
                home.is_some_and(|f| crate::sums::held_by(f.as_fd(), |g| g()).unwrap_or(false));
            if held || (create && home.is_some()) {
                self.xsums |= 1 << b;
                *self.over[b].get_mut() = open(h, b);
                if write {
                    self.over_dirs[b] = dirs
                        .get(h)
                        .and_then(Option::as_ref)
                        .and_then(|d| d.try_clone().ok());
                }
            }
        }
        self
    }

    /// Whether branch `b`'s part keeps checksums, whatever the state of its home branch.
    pub fn keeps_sums(&self, b: usize) -> bool {
        self.xsums & (1 << b) != 0
    }

    fn fd(&self, b: usize) -> io::Result<BorrowedFd<'_>> {
        self.fds[b]
            .as_ref()
            .map(|f| f.as_fd())
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))
    }
}

/// The calls on branch `b`'s checksum attribute and overflow file, for
/// [`crate::sums::Xattr`] (one thread per file: nothing to lock).
struct AdminXattr<'p>(&'p AdminParts, usize);

impl AdminXattr<'_> {
    fn home(&self) -> io::Result<BorrowedFd<'_>> {
        let h = self.0.homes.get(self.1).copied().flatten();
        self.0
            .fd(h.ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))?)
    }
}

impl crate::sums::XattrIo for AdminXattr<'_> {
    fn get(&self, buf: &mut [u8]) -> io::Result<usize> {
        use crate::sums::{absent_is_empty, entries_in};
        let mut v = [0u8; ATTR_MAX];
        let n = absent_is_empty(sys::fgetxattr(self.home()?, OsStr::new(XATTR), &mut v))?;
        let e = entries_in(&v[..n], self.0.id);
        buf[..e.len()].copy_from_slice(e);
        Ok(e.len())
    }
    fn set(&self, entries: &[u8]) -> io::Result<()> {
        let fd = self.home()?;
        crate::sums::with_entries(
            |buf| sys::fgetxattr(fd, OsStr::new(XATTR), buf),
            |v| sys::fsetxattr(fd, OsStr::new(XATTR), v, 0),
            entries,
        )
    }
    fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        f()
    }
    fn over_pread(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        match &*self.0.over[self.1].borrow() {
            Some(fd) => sys::pread(fd.as_fd(), buf, off),
            None => Ok(0),
        }
    }
    fn over_pwrite(&self, buf: &[u8], off: u64) -> io::Result<usize> {
        let mut over = self.0.over[self.1].borrow_mut();
        if over.is_none() {
            let dir = self.0.over_dirs[self.1]
                .as_ref()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EROFS))?;
            let name = crate::sums::name(self.0.id, self.1);
            let fl = libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW;
            *over = Some(sys::openat(dir.as_fd(), OsStr::new(&name), fl, 0o600)?);
        }
        sys::pwrite(over.as_ref().expect("opened").as_fd(), buf, off)
    }
    fn over_truncate(&self, len: u64) -> io::Result<()> {
        match &*self.0.over[self.1].borrow() {
            Some(fd) => sys::ftruncate(fd.as_fd(), len),
            None => Ok(()),
        }
    }
}

impl Parts for AdminParts {
    fn usable(&self, b: usize) -> bool {
        self.fds[b].is_some() && self.down.get() & (1 << b) == 0
    }
    fn pread(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
        if self.counting {
            return self.pread_data(b, buf, off);
        }
        sys::pread(self.fd(b)?, buf, off)
    }
    fn pwrite(&self, b: usize, buf: &[u8], off: u64) -> io::Result<usize> {
        sys::pwrite(self.fd(b)?, buf, off)
    }
    fn truncate(&self, b: usize, len: u64) -> io::Result<()> {
        sys::ftruncate(self.fd(b)?, len)
    }
    fn failed(&self, b: usize, e: &io::Error, _missed: bool) -> bool {
        log::warn!("branch {b}: {}", plain(e));
        self.down.set(self.down.get() | 1 << b);
        true
    }
    fn out_of_date(&self, what: OutOfDate) {
        log::warn!("{what:?}: left out of date (no room to put it back)");
        match what {
            OutOfDate::Copy(b) => self.down.set(self.down.get() | 1 << b),
            OutOfDate::Parity => self.stale.set(true),
        }
    }
    fn parity_stale(&self) -> bool {
        self.stale.get()
    }
    fn has_sums(&self, b: usize) -> bool {
        self.keeps_sums(b)
            && self
                .homes
                .get(b)
                .copied()
                .flatten()
                .is_some_and(|h| self.down.get() & (1 << h) == 0)
    }
    fn sums_pread(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
        if self.xsums & (1 << b) != 0 {
            return crate::sums::Xattr(&AdminXattr(self, b)).pread(buf, off);
        }
        Err(io::Error::from_raw_os_error(libc::EIO))
    }
    fn sums_pwrite(&self, b: usize, buf: &[u8], off: u64) -> io::Result<usize> {
        if self.xsums & (1 << b) != 0 {
            return crate::sums::Xattr(&AdminXattr(self, b)).pwrite(buf, off);
        }
        Err(io::Error::from_raw_os_error(libc::EIO))
    }
    fn sums_truncate(&self, b: usize, len: u64) -> io::Result<()> {
        if self.xsums & (1 << b) != 0 {
            return crate::sums::Xattr(&AdminXattr(self, b)).truncate(len);
        }
        Err(io::Error::from_raw_os_error(libc::EIO))
    }
    fn next_data(&self, b: usize, off: u64) -> Option<u64> {
        let Ok(fd) = self.fd(b) else {
            return Some(off);
        };
        match sys::lseek(fd, off as i64, libc::SEEK_DATA) {
            Ok(d) => Some(d as u64),
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => None,
            Err(_) => Some(off), // no hole information: data may be anywhere
        }
    }
}

/// The data extent of `fd` at or after `off` (`[start, end)`), `None` past its last data. A
/// file system without hole information has all its bytes as data.
fn data_extent(fd: BorrowedFd, off: u64) -> io::Result<Option<(u64, u64)>> {
    let start = match sys::lseek(fd, off as i64, libc::SEEK_DATA) {
        Ok(d) => d as u64,
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(Some((off, u64::MAX))),
        Err(e) => return Err(e),
    };
    let end = match sys::lseek(fd, start as i64, libc::SEEK_HOLE) {
        Ok(h) => h as u64,
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => start,
        Err(e) => return Err(e),
    };
    Ok((end > start).then_some((start, end)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// Reads that skip holes return what plain reads do, and count only the data's bytes.
    #[test]
    fn counting_reads_skip_holes_and_count_data() {
        let tmp = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(tmp.path().join("p")).unwrap();
        f.set_len(3 << 20).unwrap();
        f.write_all_at(&[7u8; 5000], (1 << 20) + 1365).unwrap();
        f.write_all_at(&[9u8; 100], (3 << 20) - 100).unwrap();
        f.set_len((3 << 20) + 8192).unwrap();
        let want = std::fs::read(tmp.path().join("p")).unwrap();
        let dir = sys::open_path(tmp.path(), libc::O_PATH | libc::O_DIRECTORY).unwrap();
        let p = AdminParts::open(&[Some(dir)], OsStr::new("p"), 1, libc::O_RDONLY).counting();
        for step in [4096usize, 65536, 1 << 20, 5000] {
            let mut got = vec![0u8; want.len()];
            let mut off = 0;
            while off < got.len() {
                let n = step.min(got.len() - off);
                // One call, as the checksum layer makes: short only at the end.
                let r = p.pread(0, &mut got[off..off + n], off as u64).unwrap();
                assert_eq!(r, n, "step {step} at {off}");
                off += n;
            }
            assert!(got == want, "step {step}");
        }
        assert_eq!(p.stored(0).unwrap() * 4, p.read.get());
        assert!(p.stored(0).unwrap() < 64 << 10, "{}", p.stored(0).unwrap());
    }
}
