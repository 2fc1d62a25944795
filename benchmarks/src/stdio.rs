//! A stream buffer that makes the same system calls as glibc's stdio for Postmark's buffered
//! mode (`fwrite`/`fread` of fixed-size blocks, then `fclose`).
//!
//! Rust's `BufWriter`/`BufReader` flush partial buffers at other points than glibc does, which
//! changes the request sizes a file system sees (a 3000-byte write block becomes 3000-byte
//! writes instead of glibc's 4096-byte ones). The rules followed here are glibc's
//! (`libio/fileops.c`, `libio/filedoalloc.c`):
//!
//! * The buffer is allocated at the first non-empty `fread`/`fwrite`, after an `fstat`: its size
//!   is `st_blksize` when that is below `BUFSIZ` (8192), else `BUFSIZ`.
//! * `fwrite`: copy into the free space; if data remains, write out the whole buffer, then write
//!   directly as many whole buffer sizes of the remaining data as there are, and copy the rest.
//! * `fread`: serve from the buffer; when more is wanted and it is less than a buffer size,
//!   refill the buffer with one buffer-size `read`; otherwise `read` directly the wanted length
//!   rounded down to whole buffer sizes. End of file is sticky.
//! * `fclose` writes what is buffered, then closes.

use std::fs::File;
use std::io::{self, Read, Write};

use crate::latency::{Op, Probe};
use crate::sys;

/// glibc's `BUFSIZ`.
pub const BUFSIZ: usize = 8192;

/// Buffer size glibc picks for a file with this `st_blksize`.
pub fn buffer_size(blksize: i64) -> usize {
    if blksize > 0 && (blksize as usize) < BUFSIZ {
        blksize as usize
    } else {
        BUFSIZ
    }
}

/// Which system call failed.
#[derive(Debug)]
pub struct StdioError {
    /// `fstat`, `read` or `write`.
    pub call: &'static str,
    /// The OS error.
    pub error: io::Error,
}

fn err(call: &'static str) -> impl FnOnce(io::Error) -> StdioError {
    move |error| StdioError { call, error }
}

/// A stdio-like stream over an open file; every system call is timed in the probe.
pub struct Stream<'a> {
    file: &'a mut File,
    probe: &'a mut Probe,
    buf: Vec<u8>,
    /// 0 until the buffer is allocated.
    cap: usize,
    /// Read mode: next unread byte of `buf` (bytes `pos..buf.len()` are unread).
    pos: usize,
    eof: bool,
}

impl<'a> Stream<'a> {
    /// A stream over `file`, recording into `probe`.
    pub fn new(file: &'a mut File, probe: &'a mut Probe) -> Stream<'a> {
        Stream {
            file,
            probe,
            buf: Vec::new(),
            cap: 0,
            pos: 0,
            eof: false,
        }
    }

    /// The buffer size, once allocated.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    fn allocate(&mut self) -> Result<(), StdioError> {
        if self.cap == 0 {
            let file = &*self.file;
            let blksize = self
                .probe
                .time(Op::Getattr, || sys::fstat_blksize(file))
                .map_err(err("fstat"))?;
            self.cap = buffer_size(blksize);
            self.buf = Vec::with_capacity(self.cap);
        }
        Ok(())
    }

    /// Writes all of `data` with as many `write` calls as it takes (glibc's `new_do_write`).
    fn write_out(&mut self, data: &[u8]) -> Result<(), StdioError> {
        let mut done = 0;
        while done < data.len() {
            let file = &mut *self.file;
            let chunk = &data[done..];
            match self.probe.time(Op::Write, || file.write(chunk)) {
                Ok(0) => return Err(err("write")(io::ErrorKind::WriteZero.into())),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(err("write")(e)),
            }
        }
        Ok(())
    }

    fn flush_buffer(&mut self) -> Result<(), StdioError> {
        if !self.buf.is_empty() {
            let data = std::mem::take(&mut self.buf);
            let r = self.write_out(&data);
            self.buf = data;
            self.buf.clear();
            r?;
        }
        Ok(())
    }

    /// `fwrite(data, len, 1, fp)`.
    pub fn fwrite(&mut self, data: &[u8]) -> Result<(), StdioError> {
        if data.is_empty() {
            return Ok(());
        }
        let free = if self.cap == 0 {
            0
        } else {
            self.cap - self.buf.len()
        };
        let n = free.min(data.len());
        self.buf.extend_from_slice(&data[..n]);
        let mut rest = &data[n..];
        if rest.is_empty() {
            return Ok(());
        }
        if self.cap == 0 {
            self.allocate()?;
        } else {
            self.flush_buffer()?;
        }
        let direct = rest.len() - rest.len() % self.cap;
        if direct > 0 {
            self.write_out(&rest[..direct])?;
            rest = &rest[direct..];
        }
        self.buf.extend_from_slice(rest);
        Ok(())
    }

    /// `fflush` before `fclose`: writes what is buffered.
    pub fn flush(&mut self) -> Result<(), StdioError> {
        self.flush_buffer()
    }

    fn read_once(&mut self, into: &mut [u8]) -> Result<usize, StdioError> {
        loop {
            let file = &mut *self.file;
            match self.probe.time(Op::Read, || file.read(into)) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(err("read")(e)),
            }
        }
    }

    /// Refills the buffer; false at end of file.
    fn underflow(&mut self) -> Result<bool, StdioError> {
        if self.eof {
            return Ok(false);
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(self.cap, 0);
        let r = self.read_once(&mut buf);
        let n = *r.as_ref().unwrap_or(&0);
        buf.truncate(n);
        self.buf = buf;
        self.pos = 0;
        if r? == 0 {
            self.eof = true;
            return Ok(false);
        }
        Ok(true)
    }

    /// `fread(out, out.len(), 1, fp)`: fills `out` or stops at end of file; returns the bytes
    /// read.
    pub fn fread(&mut self, out: &mut [u8]) -> Result<usize, StdioError> {
        if out.is_empty() {
            return Ok(0);
        }
        self.allocate()?;
        let mut got = 0;
        while got < out.len() {
            let want = out.len() - got;
            let have = self.buf.len() - self.pos;
            if want <= have {
                out[got..].copy_from_slice(&self.buf[self.pos..self.pos + want]);
                self.pos += want;
                got += want;
                break;
            }
            if have > 0 {
                out[got..got + have].copy_from_slice(&self.buf[self.pos..]);
                self.pos += have;
                got += have;
            }
            let want = out.len() - got;
            if want < self.cap {
                if !self.underflow()? {
                    break;
                }
                continue;
            }
            let count = want - want % self.cap;
            let n = self.read_once(&mut out[got..got + count])?;
            if n == 0 {
                self.eof = true;
                break;
            }
            got += n;
        }
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::client_recorder;

    #[test]
    fn buffer_size_like_glibc() {
        assert_eq!(buffer_size(4096), 4096);
        assert_eq!(buffer_size(0), BUFSIZ);
        assert_eq!(buffer_size(1 << 20), BUFSIZ);
        assert_eq!(buffer_size(8192), BUFSIZ);
    }

    /// With 3000-byte blocks into a 4096-byte buffer, glibc writes whole buffers.
    #[test]
    fn writes_whole_buffers_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w");
        let data: Vec<u8> = (0..30_000u32).map(|i| (i % 251) as u8).collect();
        let mut probe = Probe::new(client_recorder());
        let mut f = File::create(&p).unwrap();
        let mut s = Stream::new(&mut f, &mut probe);
        for block in data.chunks(3000) {
            s.fwrite(block).unwrap();
        }
        s.flush().unwrap();
        let cap = s.capacity();
        drop(f);
        let writes = probe.latencies().histogram(Op::Write).len() as usize;
        assert_eq!(writes, data.len().div_ceil(cap));
        assert_eq!(std::fs::read(&p).unwrap(), data);

        let mut probe = Probe::new(client_recorder());
        let mut f = File::open(&p).unwrap();
        let mut s = Stream::new(&mut f, &mut probe);
        let mut out = vec![0u8; 8000];
        let mut all = Vec::new();
        loop {
            let n = s.fread(&mut out).unwrap();
            all.extend_from_slice(&out[..n]);
            if n < out.len() {
                break;
            }
        }
        assert_eq!(all, data);
    }
}
