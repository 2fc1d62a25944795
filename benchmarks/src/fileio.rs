//! The file operations of a Postmark run, with Postmark's system-call pattern in both modes.
//!
//! *Unbuffered* (`set buffering false`): `open(O_RDWR|O_CREAT, 0644)` to create,
//! `open(O_RDWR|O_APPEND)` to append, `open(O_RDONLY)` to read; then one `write` or `read` per
//! block and one for the remainder (even when it is empty, as Postmark does); `close`.
//!
//! *Buffered* (the default; Postmark uses `fopen`/`fwrite`/`fread`): `open` with the flags of
//! `fopen` mode `w`, `a` or `r`, an `lseek` to the end for `a`, then glibc's stdio calls as
//! [`crate::stdio`] reproduces them (an `fstat` to size the buffer, buffer-sized requests), and
//! `close`.
//!
//! Every system call is timed in the [`Probe`] under its FUSE name. A failure is returned as a
//! [`FileError`] naming the call, the path and the OS error; Postmark would print a line and
//! carry on, which hides broken file systems.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::latency::{Op, Probe};
use crate::stdio::{StdioError, Stream};
use crate::sys;

/// A failed file operation: which call, on which path, and the OS error.
#[derive(Debug)]
pub struct FileError {
    /// The system call (`open`, `write`, `unlink`, ...).
    pub call: &'static str,
    /// The path it was made on.
    pub path: PathBuf,
    /// The error, with its errno.
    pub error: io::Error,
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} '{}': {}", self.call, self.path.display(), self.error)?;
        if let Some(errno) = self.error.raw_os_error() {
            write!(f, " [errno {errno}]")?;
        }
        Ok(())
    }
}

fn stdio_fail(path: &Path) -> impl FnOnce(StdioError) -> FileError + '_ {
    move |e| FileError {
        call: e.call,
        path: path.to_path_buf(),
        error: e.error,
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

fn fail<'a>(call: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> FileError + 'a {
    move |error| FileError {
        call,
        path: path.to_path_buf(),
        error,
    }
}

/// Performs Postmark's file operations.
#[derive(Debug)]
pub struct FileOps {
    buffered: bool,
    read_block: usize,
    write_block: usize,
    read_buf: Vec<u8>,
}

impl FileOps {
    /// File operations with these settings.
    pub fn new(buffered: bool, read_block: u32, write_block: u32) -> FileOps {
        FileOps {
            buffered,
            read_block: read_block as usize,
            write_block: write_block as usize,
            read_buf: vec![0; read_block as usize],
        }
    }

    fn open(
        &self,
        probe: &mut Probe,
        op: Op,
        path: &Path,
        opts: &OpenOptions,
    ) -> Result<File, FileError> {
        probe
            .time(op, || opts.open(path))
            .map_err(fail("open", path))
    }

    fn close(probe: &mut Probe, file: File, path: &Path) -> Result<(), FileError> {
        probe
            .time(Op::Release, || sys::close(file))
            .map_err(fail("close", path))
    }

    /// Writes `data` the way Postmark's `write_blocks`/`fwrite_blocks` do, then closes.
    fn write_data(
        &self,
        probe: &mut Probe,
        mut file: File,
        path: &Path,
        data: &[u8],
    ) -> Result<(), FileError> {
        let wb = self.write_block;
        let full = data.len() / wb;
        let rest = &data[full * wb..];
        if self.buffered {
            let mut stream = Stream::new(&mut file, probe);
            for block in data[..full * wb].chunks(wb).chain([rest]) {
                stream.fwrite(block).map_err(stdio_fail(path))?;
            }
            // fclose: write out what is buffered, then close.
            stream.flush().map_err(stdio_fail(path))?;
            return Self::close(probe, file, path);
        }
        for block in data[..full * wb].chunks(wb).chain([rest]) {
            // One system call per block, like Postmark (which ignores short writes; a short
            // write to a regular file means the disk is full, so it is reported).
            let n = probe
                .time(Op::Write, || file.write(block))
                .map_err(fail("write", path))?;
            if n != block.len() {
                return Err(fail("write", path)(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("short write: {n} of {} bytes", block.len()),
                )));
            }
        }
        Self::close(probe, file, path)
    }

    /// Creates `path` and fills it with `data`.
    pub fn create(&self, probe: &mut Probe, path: &Path, data: &[u8]) -> Result<(), FileError> {
        let mut opts = OpenOptions::new();
        if self.buffered {
            // fopen(path, "w")
            opts.write(true).create(true).truncate(true).mode(0o666);
        } else {
            opts.read(true).write(true).create(true).mode(0o644);
        }
        let file = self.open(probe, Op::Create, path, &opts)?;
        self.write_data(probe, file, path, data)
    }

    /// Appends `data` to `path`.
    pub fn append(&self, probe: &mut Probe, path: &Path, data: &[u8]) -> Result<(), FileError> {
        let mut opts = OpenOptions::new();
        if self.buffered {
            // fopen(path, "a"): stdio then seeks to the end.
            opts.append(true).create(true).mode(0o666);
            let mut file = self.open(probe, Op::Open, path, &opts)?;
            probe
                .time(Op::Lseek, || file.seek(SeekFrom::End(0)))
                .map_err(fail("lseek", path))?;
            self.write_data(probe, file, path, data)
        } else {
            opts.read(true).append(true);
            let file = self.open(probe, Op::Open, path, &opts)?;
            self.write_data(probe, file, path, data)
        }
    }

    /// Reads `size` bytes of `path` in read blocks (Postmark ignores short reads, and so does
    /// this), then closes it.
    pub fn read(&mut self, probe: &mut Probe, path: &Path, size: u32) -> Result<(), FileError> {
        let mut opts = OpenOptions::new();
        opts.read(true);
        let mut file = self.open(probe, Op::Open, path, &opts)?;
        let rb = self.read_block;
        let size = size as usize;
        let blocks = size / rb;
        let rest = size - blocks * rb;
        let lens = std::iter::repeat_n(rb, blocks).chain([rest]);
        if self.buffered {
            let mut stream = Stream::new(&mut file, probe);
            for len in lens {
                stream
                    .fread(&mut self.read_buf[..len])
                    .map_err(stdio_fail(path))?;
            }
            return Self::close(probe, file, path);
        }
        for len in lens {
            let buf = &mut self.read_buf[..len];
            probe
                .time(Op::Read, || file.read(buf))
                .map_err(fail("read", path))?;
        }
        Self::close(probe, file, path)
    }

    /// Removes `path`.
    pub fn unlink(&self, probe: &mut Probe, path: &Path) -> Result<(), FileError> {
        probe
            .time(Op::Unlink, || std::fs::remove_file(path))
            .map_err(fail("unlink", path))
    }
}

/// Creates directory `path` (mode 0700, as Postmark); an existing directory is fine.
pub fn mkdir(probe: &mut Probe, path: &Path) -> Result<(), FileError> {
    use std::os::unix::fs::DirBuilderExt;
    let r = probe.time(Op::Mkdir, || {
        std::fs::DirBuilder::new().mode(0o700).create(path)
    });
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) => Err(fail("mkdir", path)(e)),
    }
}

/// Removes directory `path`.
pub fn rmdir(probe: &mut Probe, path: &Path) -> Result<(), FileError> {
    probe
        .time(Op::Rmdir, || std::fs::remove_dir(path))
        .map_err(fail("rmdir", path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::client_recorder;

    #[test]
    fn both_modes_write_append_read_unlink() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let data: Vec<u8> = (0..3000u32).map(|i| b' ' + (i % 95) as u8).collect();
        for buffered in [false, true] {
            let mut probe = Probe::new(client_recorder());
            let mut ops = FileOps::new(buffered, 512, 512);
            let p = dir.join(format!("f{buffered}"));
            ops.create(&mut probe, &p, &data[..1024]).unwrap();
            ops.append(&mut probe, &p, &data[..700]).unwrap();
            let content = std::fs::read(&p).unwrap();
            assert_eq!(content.len(), 1724);
            assert_eq!(&content[..1024], &data[..1024]);
            assert_eq!(&content[1024..], &data[..700]);
            ops.read(&mut probe, &p, 1724).unwrap();
            ops.unlink(&mut probe, &p).unwrap();
            assert!(!p.exists());
            let l = probe.latencies();
            assert_eq!(l.histogram(Op::Create).len(), 1);
            assert_eq!(l.histogram(Op::Open).len(), 2);
            assert_eq!(l.histogram(Op::Release).len(), 3);
            if buffered {
                assert_eq!(l.histogram(Op::Getattr).len(), 3);
                assert_eq!(l.histogram(Op::Lseek).len(), 1);
            } else {
                // 1024 = 2 blocks + empty remainder; 700 = 1 block + 188; reads 3 + 188.
                assert_eq!(l.histogram(Op::Write).len(), 5);
                assert_eq!(l.histogram(Op::Read).len(), 4);
            }
        }
    }

    #[test]
    fn errors_name_call_path_and_errno() {
        let mut probe = Probe::new(client_recorder());
        let ops = FileOps::new(false, 512, 512);
        let p = Path::new("/nonexistent-fsprof-dir/1");
        let e = ops.create(&mut probe, p, b"x").unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("open '/nonexistent-fsprof-dir/1': "), "{s}");
        assert!(s.ends_with("[errno 2]"), "{s}");
    }
}
