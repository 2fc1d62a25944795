//! The library's own system interface: the real C-library functions behind the hooks, and the
//! raw system calls the library makes for itself.
//!
//! Everything the library does on its own behalf (mapping the region, writing trace chunks)
//! goes through raw `syscall(2)`, never through a hooked C-library function, so it can never
//! be recorded or recurse into a hook (`readlink` of `/proc/self/exe` and `PR_GET_NAME` for the
//! trace's image chunks included). The only C-library functions called are ones that are
//! not hooked (`dlsym`, `getenv`, `mmap`, `getpid`, `fileno`, `dirfd`, `strnlen`).

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

/// A C-library function found with `dlsym(RTLD_NEXT, name)` on first use, so hooks work when
/// called before the library's constructor (from other constructors).
pub struct Real {
    name: &'static CStr,
    ptr: AtomicPtr<c_void>,
}

impl Real {
    /// The function called `name` in the libraries loaded after this one.
    pub const fn new(name: &'static CStr) -> Real {
        Real {
            name,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The function as a pointer of type `F`; `None` when the C library lacks it.
    ///
    /// # Safety
    /// `F` must be an `extern "C"` function pointer type matching the C prototype of `name`.
    #[inline(always)]
    pub unsafe fn get<F: Copy>(&self) -> Option<F> {
        debug_assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
        let mut p = self.ptr.load(Ordering::Relaxed);
        if p.is_null() {
            p = self.resolve();
            if p.is_null() {
                return None;
            }
        }
        // SAFETY: `p` is the non-null address of the C function `name`, and the caller
        // guarantees that `F` is a function pointer type of its prototype (same size as a
        // data pointer on the supported targets).
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }

    #[cold]
    fn resolve(&self) -> *mut c_void {
        // SAFETY: `name` is NUL-terminated; RTLD_NEXT asks for the next definition after this
        // library in the lookup order, which is the C library's. A race with another thread
        // stores the same address twice.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
        self.ptr.store(p, Ordering::Relaxed);
        p
    }
}

/// The calling thread's `errno`.
#[inline(always)]
pub fn errno() -> c_int {
    // SAFETY: `__errno_location` returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's `errno`.
#[inline(always)]
pub fn set_errno(e: c_int) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = e }
}

/// The value of an environment variable, without allocating; `None` when unset or empty.
pub fn getenv(name: &CStr) -> Option<&'static CStr> {
    // SAFETY: `name` is NUL-terminated. `getenv` returns null or a pointer into the
    // environment, which stays valid unless the program changes that variable (it does not
    // know ours); the library copies what it keeps.
    let p = unsafe { libc::getenv(name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: a non-null `getenv` result is a NUL-terminated string.
    let s = unsafe { CStr::from_ptr(p) };
    (!s.is_empty()).then_some(s)
}

/// `openat(AT_FDCWD, path, flags, mode)` as a raw system call; `Err(errno)` on failure.
pub fn open(path: &CStr, flags: c_int, mode: libc::mode_t) -> Result<c_int, c_int> {
    // SAFETY: the path is NUL-terminated; the kernel reads nothing else.
    let r = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            mode as libc::c_uint,
        )
    };
    if r < 0 { Err(errno()) } else { Ok(r as c_int) }
}

/// `close(fd)` as a raw system call (the library closes only descriptors it opened).
pub fn close(fd: c_int) {
    // SAFETY: closing a descriptor the library owns.
    unsafe { libc::syscall(libc::SYS_close, fd) };
}

/// The size of the file behind `fd`.
pub fn file_size(fd: c_int) -> Result<u64, c_int> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: `st` is a valid, writable `struct stat`.
    let r = unsafe { libc::syscall(libc::SYS_fstat, fd, st.as_mut_ptr()) };
    if r < 0 {
        return Err(errno());
    }
    // SAFETY: fstat succeeded and filled `st`.
    Ok(unsafe { st.assume_init() }.st_size as u64)
}

/// The file type and permission bits (`st_mode`) of what `fd` is open on; `errno` is left as
/// it was.
pub fn file_mode(fd: c_int) -> Option<u32> {
    let saved = errno();
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: `st` is a valid, writable `struct stat`.
    let r = unsafe { libc::syscall(libc::SYS_fstat, fd, st.as_mut_ptr()) };
    set_errno(saved);
    // SAFETY: when fstat succeeded it filled `st`.
    (r >= 0).then(|| unsafe { st.assume_init() }.st_mode)
}

/// Maps `len` bytes of `fd` shared and writable.
pub fn map_shared(fd: c_int, len: usize) -> Result<*mut u8, c_int> {
    // SAFETY: a fresh mapping chosen by the kernel; no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        Err(errno())
    } else {
        Ok(p.cast())
    }
}

/// `writev(fd, [a, b])` as a raw system call: the bytes written, or `Err(errno)`.
pub fn write2(fd: c_int, a: &[u8], b: &[u8]) -> Result<usize, c_int> {
    let iov = [
        libc::iovec {
            iov_base: a.as_ptr() as *mut c_void,
            iov_len: a.len(),
        },
        libc::iovec {
            iov_base: b.as_ptr() as *mut c_void,
            iov_len: b.len(),
        },
    ];
    // SAFETY: both iovecs describe readable memory that lives across the call.
    let r = unsafe { libc::syscall(libc::SYS_writev, fd, iov.as_ptr(), 2) };
    if r < 0 { Err(errno()) } else { Ok(r as usize) }
}

/// Appends `a` then `b` to the file at `path` with one `writev` (`O_APPEND`: writers of
/// different processes never interleave), opening and closing it around the write (the
/// library keeps no descriptor in the program); whether all of it was written.
pub fn append(path: &CStr, a: &[u8], b: &[u8]) -> bool {
    match open(path, libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC, 0) {
        Ok(fd) => {
            let r = write2(fd, a, b);
            close(fd);
            r == Ok(a.len() + b.len())
        }
        Err(_) => false,
    }
}

/// The calling thread's command name (`prctl(PR_GET_NAME)`) into `buf`; its length.
pub fn comm(buf: &mut [u8; 16]) -> usize {
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included, into `buf`.
    let r = unsafe { libc::syscall(libc::SYS_prctl, libc::PR_GET_NAME, buf.as_mut_ptr()) };
    if r < 0 {
        return 0;
    }
    buf.iter().position(|&b| b == 0).unwrap_or(buf.len())
}

/// `readlinkat(AT_FDCWD, path)` into `buf` as a raw system call; the length read (0 on
/// failure).
pub fn readlink(path: &CStr, buf: &mut [u8]) -> usize {
    // SAFETY: a NUL-terminated path and a writable buffer of its length.
    let r = unsafe {
        libc::syscall(
            libc::SYS_readlinkat,
            libc::AT_FDCWD,
            path.as_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    usize::try_from(r).unwrap_or(0)
}

/// The calling process's id.
pub fn getpid() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::getpid() as u32 }
}

/// The calling process's parent's id.
pub fn getppid() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::getppid() as u32 }
}

/// The calling thread's id.
pub fn gettid() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Registers `child` to run in the child after every `fork`.
pub fn at_fork_child(child: unsafe extern "C" fn()) {
    // SAFETY: a handler that stays valid for the life of the process (the library is never
    // unloaded: it is preloaded).
    unsafe { libc::pthread_atfork(None, None, Some(child)) };
}

/// The length of a C string, at most `max`.
///
/// # Safety
/// `p` must be null or point to a NUL-terminated string or at least `max` readable bytes.
#[inline]
pub unsafe fn strnlen(p: *const c_char, max: usize) -> usize {
    // SAFETY: per the caller's contract.
    unsafe { libc::strnlen(p, max) }
}

/// The descriptor of a stream, or -1 for a null one.
///
/// # Safety
/// `fp` must be null or an open stream.
#[inline]
pub unsafe fn stream_fd(fp: *mut libc::FILE) -> c_int {
    if fp.is_null() {
        -1
    } else {
        // SAFETY: an open stream, per the caller.
        unsafe { libc::fileno(fp) }
    }
}

/// The descriptor of a directory stream, or -1 for a null one.
///
/// # Safety
/// `d` must be null or an open directory stream.
#[inline]
pub unsafe fn dir_fd(d: *mut libc::DIR) -> c_int {
    if d.is_null() {
        -1
    } else {
        // SAFETY: an open directory stream, per the caller.
        unsafe { libc::dirfd(d) }
    }
}
