//! Safe wrappers around the system calls this crate needs: an anonymous shared-memory file,
//! a read-only shared mapping, signal dispositions and forwarding, process checks. This is the
//! only module (with its submodules) with `unsafe`.

#![allow(unsafe_code)]

pub mod at;
pub mod calls;
pub mod streams;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// A memory file (`memfd_create`, close-on-exec) of `len` zero bytes.
pub fn memfd(name: &std::ffi::CStr, len: u64) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated; the call creates a new descriptor.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    std::fs::File::from(fd.try_clone()?).set_len(len)?;
    Ok(fd)
}

/// A read-only shared mapping of a whole file; unmapped on drop.
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is only read through the methods below, which use atomic loads for
// every field another process may write.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` for reading.
    pub fn new(fd: &OwnedFd, len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping chosen by the kernel; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr: p.cast(), len })
    }

    /// The mapping's length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// A u32 field at `off` (acquire load); 0 past the end or misaligned.
    pub fn u32(&self, off: usize) -> u32 {
        if off % 4 != 0 || off + 4 > self.len {
            return 0;
        }
        // SAFETY: in bounds and aligned; the memory is only ever accessed atomically or by
        // plain stores of the owning process (a single aligned u32 store is atomic on the
        // supported targets).
        let a = unsafe { &*(self.ptr.add(off) as *const std::sync::atomic::AtomicU32) };
        a.load(Ordering::Acquire)
    }

    /// A u64 field at `off` (acquire load); 0 past the end or misaligned.
    pub fn u64(&self, off: usize) -> u64 {
        if off % 8 != 0 || off + 8 > self.len {
            return 0;
        }
        // SAFETY: as in `u32`, for aligned u64 fields.
        let a = unsafe { &*(self.ptr.add(off) as *const std::sync::atomic::AtomicU64) };
        a.load(Ordering::Acquire)
    }

    /// A copy of `len` bytes at `off` (empty past the end).
    pub fn bytes(&self, off: usize, len: usize) -> Vec<u8> {
        if off.checked_add(len).is_none_or(|end| end > self.len) {
            return Vec::new();
        }
        std::sync::atomic::fence(Ordering::Acquire);
        // SAFETY: in bounds; the bytes are the trace buffer of a thread that has ended, or the
        // magic written once before the header's state was released.
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) }.to_vec()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, not used after this.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Whether process `pid` has ended (no such process, or a zombie).
pub fn process_ended(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return true;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid as i32, 0) };
    if r != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return true;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

fn c_path(path: &std::path::Path) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `statvfs(3)` of the file system holding `path`.
fn statvfs(path: &std::path::Path) -> io::Result<libc::statvfs> {
    let c = c_path(path)?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a NUL-terminated path and `st` points to writable space for a statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs succeeded and filled `st`.
    Ok(unsafe { st.assume_init() })
}

/// The bytes an unprivileged user may still write on the file system holding `path`
/// (`statvfs(3)`: free blocks for users times the block size).
pub fn available_bytes(path: &std::path::Path) -> io::Result<u64> {
    let st = statvfs(path)?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Whether the file system holding `path` is mounted `nosuid` (set-ID bits and file
/// capabilities have no effect there).
pub fn mounted_nosuid(path: &std::path::Path) -> io::Result<bool> {
    Ok(statvfs(path)?.f_flag & libc::ST_NOSUID != 0)
}

/// Whether `path` (followed if a symbolic link) has the extended attribute `name`.
pub fn has_xattr(path: &std::path::Path, name: &std::ffi::CStr) -> bool {
    let Ok(c) = c_path(path) else {
        return false;
    };
    // SAFETY: both are NUL-terminated strings; a null buffer of size 0 asks only for the size.
    unsafe { libc::getxattr(c.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) >= 0 }
}

/// This process's real user and group ids.
pub fn real_ids() -> (u32, u32) {
    // SAFETY: getuid and getgid cannot fail and touch no memory.
    unsafe { (libc::getuid(), libc::getgid()) }
}

/// This process's effective user id.
pub fn geteuid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The signals `fsprof run` forwards to the program when another process sends them to it.
pub const FORWARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Children currently running under [`Forwarding`] (0 = free entry).
static CHILDREN: [AtomicI32; 64] = [const { AtomicI32::new(0) }; 64];

/// The dispositions found before the first [`Forwarding`], and how many are active.
struct Saved {
    users: usize,
    old: Vec<(libc::c_int, libc::sigaction)>,
}

static SAVED: std::sync::Mutex<Saved> = std::sync::Mutex::new(Saved {
    users: 0,
    old: Vec::new(),
});

/// While alive, SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to this process by another process
/// (`kill`) are passed on to the registered children; the same signals from the terminal
/// (which reaches the child itself, in the same process group) are not passed twice, and do
/// not end this process before the child. Signals this process ignored when the first
/// forwarding started stay ignored, and are not forwarded.
pub struct Forwarding {
    entry: Option<usize>,
}

impl Forwarding {
    /// Installs the handlers (once for all concurrent users).
    pub fn start() -> io::Result<Forwarding> {
        let mut saved = SAVED.lock().unwrap_or_else(|e| e.into_inner());
        if saved.users == 0 {
            saved.old.clear();
            for sig in FORWARDED {
                let old = current(sig)?;
                if old.sa_sigaction == libc::SIG_IGN {
                    continue;
                }
                // SAFETY: a zeroed sigaction is a valid starting point; the handler only calls
                // async-signal-safe functions (kill) and reads atomics.
                let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
                sa.sa_sigaction = forward as *const () as usize;
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                // SAFETY: valid sigaction structures; `old` receives nothing (already read).
                if unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                saved.old.push((sig, old));
            }
        }
        saved.users += 1;
        Ok(Forwarding { entry: None })
    }

    /// Registers a running child to forward to.
    pub fn register(&mut self, pid: u32) {
        for (i, c) in CHILDREN.iter().enumerate() {
            if c.compare_exchange(0, pid as i32, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.entry = Some(i);
                return;
            }
        }
        log::warn!(
            "more than {} programs at once: signals reach only the first",
            CHILDREN.len()
        );
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        if let Some(i) = self.entry {
            CHILDREN[i].store(0, Ordering::Release);
        }
        let mut saved = SAVED.lock().unwrap_or_else(|e| e.into_inner());
        saved.users -= 1;
        if saved.users == 0 {
            for (sig, old) in saved.old.drain(..) {
                // SAFETY: restoring the disposition read earlier.
                unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) };
            }
        }
    }
}

fn current(sig: libc::c_int) -> io::Result<libc::sigaction> {
    // SAFETY: a zeroed sigaction is valid as an output buffer.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the current one.
    if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old)
}

/// Passes a signal sent by another process on to the children.
extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to SA_SIGINFO handlers.
    let code = if info.is_null() {
        libc::SI_USER
    } else {
        unsafe { (*info).si_code }
    };
    // SI_USER (kill), SI_QUEUE (sigqueue), SI_TKILL (tkill/tgkill): sent by a process. Others
    // (SI_KERNEL: the terminal) reached the child's process group already.
    if code != libc::SI_USER && code != libc::SI_QUEUE && code != libc::SI_TKILL {
        return;
    }
    for c in &CHILDREN {
        let pid = c.load(Ordering::Acquire);
        if pid > 0 {
            // SAFETY: kill is async-signal-safe.
            unsafe { libc::kill(pid, sig) };
        }
    }
}

/// The calling thread's blocked-signal mask, for [`give_mask`].
pub fn current_mask() -> io::Result<libc::sigset_t> {
    // SAFETY: a zeroed sigset_t is a valid output buffer; a null new set only reads.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers; reads this thread's mask.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(set)
}

/// Makes `cmd`'s child exec with `mask` blocked (the standard library empties the mask in
/// children; a program run by fsprof gets the mask fsprof itself was given).
pub fn give_mask(cmd: &mut std::process::Command, mask: libc::sigset_t) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and only calls
    // pthread_sigmask, which is async-signal-safe; it captures a plain sigset_t.
    unsafe {
        cmd.pre_exec(move || {
            let r = libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
            Ok(())
        });
    }
}
