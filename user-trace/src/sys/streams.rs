//! Standard I/O streams and directory streams for a replay, as owned values that close on
//! drop. Results are what a trace records (see the preload library's call table).

use std::ffi::{CStr, c_int};
use std::ptr::NonNull;

fn errno() -> i64 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO) as i64
}

/// An open `FILE *`.
#[derive(Debug)]
pub struct Stream(NonNull<libc::FILE>);

// SAFETY: a stream is used by one replay thread at a time (the descriptor table's lock), and
// stdio streams carry their own lock anyway.
unsafe impl Send for Stream {}

impl Stream {
    /// `fdopen(fd, mode)`, taking ownership of `fd` on success.
    pub fn fdopen(fd: c_int, mode: &CStr) -> Result<Stream, i64> {
        // SAFETY: a valid C string; the descriptor belongs to the caller.
        NonNull::new(unsafe { libc::fdopen(fd, mode.as_ptr()) })
            .map(Stream)
            .ok_or_else(|| -errno())
    }

    /// The stream's descriptor.
    pub fn fd(&self) -> c_int {
        // SAFETY: an open stream.
        unsafe { libc::fileno(self.0.as_ptr()) }
    }

    /// `fread(buf, 1, len)`: bytes read.
    pub fn read(&mut self, buf: &mut [u8]) -> i64 {
        // SAFETY: an open stream and a writable buffer.
        unsafe { libc::fread(buf.as_mut_ptr().cast(), 1, buf.len(), self.0.as_ptr()) as i64 }
    }

    /// `fwrite(buf, 1, len)`: bytes written.
    pub fn write(&mut self, buf: &[u8]) -> i64 {
        // SAFETY: an open stream and a readable buffer.
        unsafe { libc::fwrite(buf.as_ptr().cast(), 1, buf.len(), self.0.as_ptr()) as i64 }
    }

    /// `fgets(buf, len)`: the line's length, 0 at the end, `-errno` on error.
    pub fn gets(&mut self, buf: &mut [u8]) -> i64 {
        if buf.is_empty() {
            return 0;
        }
        let n = buf.len().min(c_int::MAX as usize) as c_int;
        // SAFETY: an open stream and a writable buffer of at least `n` bytes.
        let p = unsafe { libc::fgets(buf.as_mut_ptr().cast(), n, self.0.as_ptr()) };
        if p.is_null() {
            // SAFETY: an open stream.
            if unsafe { libc::ferror(self.0.as_ptr()) } != 0 {
                -errno()
            } else {
                0
            }
        } else {
            buf.iter().position(|&b| b == 0).unwrap_or(buf.len()) as i64
        }
    }

    /// `fputs(s)`: 0 or `-errno`.
    pub fn puts(&mut self, s: &CStr) -> i64 {
        // SAFETY: an open stream and a valid C string.
        if unsafe { libc::fputs(s.as_ptr(), self.0.as_ptr()) } >= 0 {
            0
        } else {
            -errno()
        }
    }

    /// `fflush`: 0 or `-errno`.
    pub fn flush(&mut self) -> i64 {
        // SAFETY: an open stream.
        if unsafe { libc::fflush(self.0.as_ptr()) } == 0 {
            0
        } else {
            -errno()
        }
    }

    /// `fseeko(off, whence)`: 0 or `-errno`.
    pub fn seek(&mut self, off: i64, whence: c_int) -> i64 {
        // SAFETY: an open stream.
        if unsafe { libc::fseeko(self.0.as_ptr(), off, whence) } == 0 {
            0
        } else {
            -errno()
        }
    }

    /// `ftello`: the position or `-errno`.
    pub fn tell(&mut self) -> i64 {
        // SAFETY: an open stream.
        let v = unsafe { libc::ftello(self.0.as_ptr()) };
        if v < 0 { -errno() } else { v }
    }

    /// `fclose`: 0 or `-errno`.
    pub fn close(self) -> i64 {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        // SAFETY: an open stream, closed once (drop is skipped).
        if unsafe { libc::fclose(p) } == 0 {
            0
        } else {
            -errno()
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: an open stream, closed once.
        unsafe { libc::fclose(self.0.as_ptr()) };
    }
}

/// An open `DIR *`.
#[derive(Debug)]
pub struct Dir(NonNull<libc::DIR>);

// SAFETY: used by one replay thread at a time (the descriptor table's lock).
unsafe impl Send for Dir {}

impl Dir {
    /// `fdopendir(fd)`, taking ownership of `fd` on success.
    pub fn fdopen(fd: c_int) -> Result<Dir, i64> {
        // SAFETY: the descriptor belongs to the caller.
        NonNull::new(unsafe { libc::fdopendir(fd) })
            .map(Dir)
            .ok_or_else(|| -errno())
    }

    /// The stream's descriptor.
    pub fn fd(&self) -> c_int {
        // SAFETY: an open stream.
        unsafe { libc::dirfd(self.0.as_ptr()) }
    }

    /// `readdir`: 1 for an entry, 0 at the end, `-errno`.
    pub fn read(&mut self) -> i64 {
        // SAFETY: errno is thread-local; the stream is open.
        unsafe {
            *libc::__errno_location() = 0;
            if !libc::readdir(self.0.as_ptr()).is_null() {
                1
            } else {
                -(*libc::__errno_location() as i64)
            }
        }
    }

    /// `closedir`: 0 or `-errno`.
    pub fn close(self) -> i64 {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        // SAFETY: an open stream, closed once (drop is skipped).
        if unsafe { libc::closedir(p) } == 0 {
            0
        } else {
            -errno()
        }
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: an open stream, closed once.
        unsafe { libc::closedir(self.0.as_ptr()) };
    }
}
