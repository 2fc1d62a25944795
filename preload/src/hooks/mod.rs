//! The interposed C-library functions, one module per group.
//!
//! Every hook has the C prototype of the function it replaces and its contract: it is an
//! `unsafe extern "C" fn` whose safety requirements are exactly those of the C function
//! (valid pointers where C requires them). A hook finds the real function with `dlsym`
//! ([`crate::sys::Real`]), calls it through [`crate::record::timed`], and returns its result
//! with `errno` unchanged. Where the C library lacks the function, the hook fails with
//! `ENOSYS` as the missing function would have.
//!
//! Variadic C functions (`open`, `openat`, `fcntl`) are defined with their optional argument as
//! a named one: on the supported targets (x86_64 and aarch64 Linux) variadic integer and
//! pointer arguments travel in the same registers as named ones, so the value is the caller's
//! when it passed one, and is only used (passed on, and traced) when the flags say it was.

mod dirs;
mod files;
mod locks;
mod meta;
mod stdio;
mod xattr;

/// The real function `$name` of type `$ty`, or an `ENOSYS` failure returning `$fail`.
macro_rules! real {
    ($name:literal, $ty:ty, $fail:expr) => {{
        static REAL: $crate::sys::Real = $crate::sys::Real::new($name);
        // SAFETY: `$ty` is the C prototype of `$name` (see the type alias).
        match unsafe { REAL.get::<$ty>() } {
            Some(f) => f,
            None => {
                $crate::sys::set_errno(libc::ENOSYS);
                return $fail;
            }
        }
    }};
}
pub(crate) use real;

/// Whether open flags carry a mode argument.
#[inline(always)]
pub(crate) fn has_mode(flags: libc::c_int) -> bool {
    flags & libc::O_CREAT != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE
}

/// Total length of an iovec array, for the trace (the kernel already validated it when the
/// call succeeded; otherwise 0).
///
/// # Safety
/// When `ok`, `iov` must point to `cnt` readable iovecs.
#[inline]
pub(crate) unsafe fn iov_len(ok: bool, iov: *const libc::iovec, cnt: libc::c_int) -> u64 {
    if !ok || iov.is_null() || !(0..=1024).contains(&cnt) {
        return 0;
    }
    // SAFETY: per the caller, and the kernel read the same array successfully.
    let v = unsafe { std::slice::from_raw_parts(iov, cnt as usize) };
    v.iter().map(|i| i.iov_len as u64).sum()
}
