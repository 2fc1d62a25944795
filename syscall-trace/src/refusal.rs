//! Why the syscall level cannot be had, as one line: a missing permission, kernel feature or
//! BTF, a verifier that refuses the program.

use std::error::Error;
use std::io;

pub use kernel_trace::Refusal;

/// The one-line refusal for `what` failing with `e` (aya's error, whose chain holds the
/// system call's errno or the verifier's log).
pub fn refusal(what: &str, e: &(dyn Error + 'static)) -> Refusal {
    let mut cur: Option<&(dyn Error + 'static)> = Some(e);
    let mut errno = None;
    let mut verifier = None;
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            errno = errno.or(io.raw_os_error());
        }
        if let Some(aya::programs::ProgramError::LoadError {
            io_error,
            verifier_log,
        }) = err.downcast_ref::<aya::programs::ProgramError>()
        {
            errno = errno.or(io_error.raw_os_error());
            verifier = verifier_log
                .to_string()
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty() && !l.starts_with("verification time"))
                .map(str::to_string);
        }
        cur = err.source();
    }
    let why = match errno {
        Some(libc::EPERM) | Some(libc::EACCES)
            if verifier.is_none() || errno == Some(libc::EPERM) =>
        {
            "permission denied: it needs root, or CAP_BPF and CAP_PERFMON".to_string()
        }
        Some(libc::ENOENT) if what.starts_with("raw tracepoint") => {
            "this kernel does not have it (it needs CONFIG_FTRACE_SYSCALLS)".to_string()
        }
        Some(libc::ENOSYS) => "this kernel has no bpf(2)".to_string(),
        Some(libc::EMFILE) | Some(libc::ENFILE) => "out of file descriptors".to_string(),
        Some(libc::ENOMEM) | Some(libc::E2BIG) => {
            format!(
                "the kernel refused the memory it needs ({})",
                io::Error::from_raw_os_error(errno.unwrap_or(libc::ENOMEM))
            )
        }
        _ => match &verifier {
            Some(v) => format!("the kernel's verifier refused it: {}", v.trim()),
            None => one_line(e),
        },
    };
    Refusal::new(format!("{what}: {why}"))
}

/// `e` and its causes on one line.
fn one_line(e: &(dyn Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let s = c.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cur = c.source();
    }
    out.replace('\n', " ")
}

/// The program is written for x86_64's system calls (their numbers and registers).
pub fn check_platform() -> Result<(), Refusal> {
    if cfg!(target_arch = "x86_64") {
        Ok(())
    } else {
        Err(Refusal::new(format!(
            "the syscall level is built for x86_64 only (this is {})",
            std::env::consts::ARCH
        )))
    }
}

/// What can be checked without loading the program, before anything is mounted or formatted:
/// the platform, the kernel's BTF, and the capabilities loading it needs (CAP_BPF and
/// CAP_PERFMON, or CAP_SYS_ADMIN). Loading may still be refused (a verifier, a kernel without
/// the tracepoints), in one line too.
pub fn preflight() -> Result<(), Refusal> {
    check_platform()?;
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err(Refusal::new(
            "no kernel BTF at /sys/kernel/btf/vmlinux (the kernel needs CONFIG_DEBUG_INFO_BTF)",
        ));
    }
    let caps = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(u64::MAX);
    let has = |bit: u32| caps >> bit & 1 == 1;
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        Ok(())
    } else {
        Err(Refusal::new(
            "permission denied: loading the BPF program needs root, or CAP_BPF and CAP_PERFMON",
        ))
    }
}
