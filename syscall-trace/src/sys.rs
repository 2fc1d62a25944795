//! The one system call made here rather than through aya: `bpf(BPF_OBJ_GET_INFO_BY_FD)` for a
//! program's `recursion_misses`, which aya's program info does not give.

use std::io;
use std::os::fd::RawFd;

/// `BPF_OBJ_GET_INFO_BY_FD`.
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
/// Bytes of `struct bpf_prog_info` read (up to and with `recursion_misses`).
const INFO_LEN: usize = 216;
/// Offset of `recursion_misses` in `struct bpf_prog_info` (include/uapi/linux/bpf.h).
const RECURSION_MISSES: usize = 208;

#[repr(C)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// How many times the kernel skipped program `fd` because it was already running on that CPU.
pub fn recursion_misses(fd: RawFd) -> io::Result<u64> {
    let mut info = [0u64; INFO_LEN / 8];
    let mut attr = InfoAttr {
        bpf_fd: fd as u32,
        info_len: INFO_LEN as u32,
        info: info.as_mut_ptr() as u64,
    };
    // SAFETY: `attr` is a valid bpf_attr prefix for BPF_OBJ_GET_INFO_BY_FD whose `info` points
    // to `info_len` writable bytes that outlive the call; the kernel writes at most that many
    // (and may lower `info_len`), and reads nothing else.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            &mut attr as *mut InfoAttr,
            std::mem::size_of::<InfoAttr>(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if (attr.info_len as usize) < RECURSION_MISSES + 8 {
        return Ok(0);
    }
    Ok(info[RECURSION_MISSES / 8])
}

/// `CLOCK_MONOTONIC` now, into `ts`; false if the clock cannot be read.
pub fn clock_monotonic(ts: &mut libc::timespec) -> bool {
    // SAFETY: `ts` is a valid, exclusive timespec for the call to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, ts) == 0 }
}

/// Waits until `fd` is readable, at most `timeout` (an interrupted or failed wait returns too).
pub fn poll_in(fd: RawFd, timeout: std::time::Duration) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the call to read and write.
    unsafe {
        libc::poll(&mut p, 1, timeout.as_millis().min(i32::MAX as u128) as i32);
    }
}
