//! Credentials of the calling thread: umask, fs uid and gid, supplementary groups.

#![allow(unsafe_code)]

use std::io;

use super::cvt;

/// Sets the calling thread's umask to `mask`. The first call gives the thread its own
/// file-system context (cwd, root, umask; `unshare(CLONE_FS)`), so the rest of the process is
/// not touched; the mask is remembered per thread and `umask(2)` runs only when it changes
/// (callers nearly always pass the same one).
pub fn set_thread_umask(mask: u32) -> io::Result<()> {
    thread_local! {
        /// This thread's umask once its context is private; `u32::MAX` before.
        static UMASK: std::cell::Cell<u32> = const { std::cell::Cell::new(u32::MAX) };
    }
    let current = UMASK.with(|u| u.get());
    if current == mask {
        return Ok(());
    }
    if current == u32::MAX {
        // SAFETY: unshare with CLONE_FS only copies this thread's fs_struct; no memory arguments.
        cvt(unsafe { libc::unshare(libc::CLONE_FS) })?;
    }
    umask(mask);
    UMASK.with(|u| u.set(mask));
    Ok(())
}

/// The supplementary groups of process `pid` (from `/proc/PID/status`).
pub fn process_groups(pid: u32) -> io::Result<Vec<u32>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
    Ok(line
        .split_whitespace()
        .filter_map(|g| g.parse().ok())
        .collect())
}

/// This thread's supplementary groups replaced for as long as the guard lives (the raw
/// `setgroups` system call is per-thread; glibc's wrapper would change every thread).
pub struct ThreadGroups {
    old: Vec<libc::gid_t>,
}

impl ThreadGroups {
    /// Sets `groups` on this thread; needs `CAP_SETGID`.
    pub fn set(groups: &[u32]) -> io::Result<ThreadGroups> {
        let mut old = vec![0 as libc::gid_t; 1024];
        // SAFETY: valid buffer of the stated length.
        let n = cvt(unsafe { libc::getgroups(old.len() as libc::c_int, old.as_mut_ptr()) })?;
        old.truncate(n as usize);
        // SAFETY: raw per-thread setgroups with a valid array of the stated length.
        let r = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ThreadGroups { old })
    }
}

impl Drop for ThreadGroups {
    fn drop(&mut self) {
        // SAFETY: as in `set`, restoring the list read then.
        unsafe { libc::syscall(libc::SYS_setgroups, self.old.len(), self.old.as_ptr()) };
    }
}

/// This thread's file-system uid and gid switched to a caller's for as long as the guard lives
/// (`setfsuid`/`setfsgid` are per-thread system calls). Used while creating objects so they
/// belong to the caller, as on a local file system.
pub struct FsCreds {
    uid: u32,
    gid: u32,
}

impl FsCreds {
    /// Switches to `uid`/`gid` (no-op when they are already ours).
    pub fn switch(uid: u32, gid: u32) -> FsCreds {
        // SAFETY: raw per-thread syscalls without memory arguments. The gid goes first: after
        // the uid changes, changing the gid may no longer be allowed.
        unsafe {
            let old_gid = libc::syscall(libc::SYS_setfsgid, gid) as u32;
            let old_uid = libc::syscall(libc::SYS_setfsuid, uid) as u32;
            FsCreds {
                uid: old_uid,
                gid: old_gid,
            }
        }
    }
}

impl Drop for FsCreds {
    fn drop(&mut self) {
        // SAFETY: as in `switch`; the uid goes back first so the gid change is allowed again.
        unsafe {
            libc::syscall(libc::SYS_setfsuid, self.uid);
            libc::syscall(libc::SYS_setfsgid, self.gid);
        }
    }
}

/// Effective uid of the process.
pub fn geteuid() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::geteuid() }
}

/// Effective gid of the process.
pub fn getegid() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::getegid() }
}

/// Sets the process umask; returns the old one.
pub fn umask(mask: u32) -> u32 {
    // SAFETY: cannot fail.
    unsafe { libc::umask(mask) }
}
