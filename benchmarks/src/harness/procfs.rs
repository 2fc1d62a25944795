//! Reading `/proc`: which process serves a mount, and how much CPU time it used.

use std::path::Path;

/// The fields of `/proc/PID/stat` after the command name (field 3 onwards).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces or parentheses itself.
    let rest = &text[text.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The process state letter (`R`, `S`, `Z`, ...).
pub fn state(pid: u32) -> Option<char> {
    stat_fields(pid)?.first()?.chars().next()
}

/// User plus system CPU time of process `pid` (all its threads), in seconds.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let f = stat_fields(pid)?;
    // Fields 14 (utime) and 15 (stime) of proc(5); index 0 here is field 3.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / crate::sys::clock_ticks_per_sec() as f64)
}

fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The daemon serving the mount at `mount`: a live process other than this one whose command
/// line names the mount point (every FUSE daemon is started with it) and, when `program` is
/// given, whose executable has that file name. The oldest such process wins (a helper such as
/// `fusermount3` is younger).
pub fn find_daemon(mount: &Path, program: Option<&str>) -> Option<u32> {
    let me = std::process::id();
    let target = mount.to_string_lossy();
    let mut found: Vec<(u64, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me || state(pid) == Some('Z') {
            continue;
        }
        let args = cmdline(pid);
        if !args.iter().any(|a| a == &*target) {
            continue;
        }
        if let Some(p) = program {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
            let name = exe
                .as_deref()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned());
            let arg0 = args
                .first()
                .and_then(|a| Path::new(a).file_name())
                .map(|n| n.to_string_lossy().into_owned());
            if name.as_deref() != Some(p) && arg0.as_deref() != Some(p) {
                continue;
            }
        }
        // Field 22 (starttime) orders processes by age.
        let start = stat_fields(pid)
            .and_then(|f| f.get(19).and_then(|s| s.parse().ok()))
            .unwrap_or(u64::MAX);
        found.push((start, pid));
    }
    found.sort();
    found.first().map(|(_, pid)| *pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_cpu_time_and_state() {
        let me = std::process::id();
        assert!(cpu_seconds(me).unwrap() >= 0.0);
        assert!(matches!(state(me), Some('R' | 'S')));
    }
}
