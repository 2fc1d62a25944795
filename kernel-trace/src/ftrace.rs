//! The block tracepoints recorded through a private ftrace instance, which writes every hit
//! (docs/format.md, "Lost records": perf, on this project's VM, counts some of the block
//! completions taken in interrupts of idle CPUs and never writes them; an ftrace instance
//! wrote every one of them in the same runs).
//!
//! The instance is `tracefs/instances/fsprof-PID-N`, made by [`BlockRings::open`] and removed
//! when the [`BlockRings`] is dropped; instances of processes that no longer exist (a crash,
//! a `kill -9`) are removed by the next [`BlockRings::open`] ([`remove_stale`]). It records
//! `block:block_rq_issue` and `block:block_rq_complete`, filtered in the kernel to the
//! devices traced (`dev == N || ...`), stamped with `trace_clock` `mono` (`CLOCK_MONOTONIC`,
//! the clock the perf records use, so both convert to cycles alike), in a buffer of
//! [`BUFFER_KB`] a CPU that drops new events when full (`options/overwrite` 0), so that an
//! issue waiting for its completion is never overwritten. The reader reads each CPU's
//! `per_cpu/cpuN/trace_pipe_raw` without blocking, one page a read ([`crate::ringbuf`]), and
//! the kernel's count of what the instance dropped or overwrote from `per_cpu/cpuN/stats`.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::events::BlockFormats;
use crate::ringbuf::{PageLayout, parse_page};

/// Kilobytes of each CPU's buffer (the instance's `buffer_size_kb`): about 25,000 block
/// records, a quarter of a million a second at the tracer's 100 ms drain interval.
pub const BUFFER_KB: usize = 2048;
/// The instances' name prefix: `fsprof-PID-N`.
const PREFIX: &str = "fsprof-";

/// Instances made by this process so far (the `N` of their names).
static MADE: AtomicU64 = AtomicU64::new(0);

/// A directory under `instances/`, removed when dropped.
struct Instance {
    dir: PathBuf,
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            log::warn!(
                "kernel trace: cannot remove ftrace instance {}: {e}",
                self.dir.display()
            );
        }
    }
}

struct Cpu {
    cpu: u32,
    pipe: File,
    stats: PathBuf,
}

/// The block tracepoints' private ftrace instance and its per-CPU readers (see the module's
/// documentation).
pub struct BlockRings {
    // Dropped in order: the readers close before the instance is removed (a directory with
    // an open file is busy).
    cpus: Vec<Cpu>,
    instance: Instance,
    layout: PageLayout,
    page: Vec<u8>,
    text: String,
    /// Reads a drain makes at most per CPU (a full buffer, and room for the writer).
    max_pages: usize,
    malformed: u64,
    missed_noted: bool,
}

/// `s` written to file `p` (a tracefs control file), with the file named in the error.
fn write(p: &Path, s: &str) -> Result<(), String> {
    std::fs::write(p, s).map_err(|e| format!("{}: {e}", p.display()))
}

/// The text of `events/header_page` or `header_event`, in one read: the kernel makes it
/// anew for each read and gives nothing to a read that does not start at 0 (so
/// `read_to_string`, which first reads 32 bytes, would get a truncated text).
fn read_header(p: &Path) -> std::io::Result<String> {
    let mut buf = vec![0u8; 16 << 10];
    let n = File::open(p)?.read(&mut buf)?;
    buf.truncate(n);
    String::from_utf8(buf).map_err(|_| std::io::Error::from(ErrorKind::InvalidData))
}

/// The value of `key: N` in a `per_cpu/cpuN/stats` text.
fn stat(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':')?.trim().parse().ok())
        .unwrap_or(0)
}

/// Records the instance dropped or overwrote, from a `per_cpu/cpuN/stats` text.
fn lost_in(stats: &str) -> u64 {
    stat(stats, "overrun") + stat(stats, "commit overrun") + stat(stats, "dropped events")
}

/// Removes the instances `fsprof-PID-N` under `instances` whose process `PID` is gone.
pub fn remove_stale(instances: &Path) {
    let Ok(dir) = std::fs::read_dir(instances) else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|r| r.split_once('-'))
            .and_then(|(pid, n)| n.parse::<u64>().ok().and(pid.parse::<u32>().ok()))
        else {
            continue;
        };
        if Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        match std::fs::remove_dir(e.path()) {
            Ok(()) => log::info!("kernel trace: removed ftrace instance {name} of a process gone"),
            Err(err) => {
                log::warn!("kernel trace: cannot remove stale ftrace instance {name}: {err}")
            }
        }
    }
}

impl BlockRings {
    /// Makes a private instance under tracefs at `root` recording the block tracepoints of
    /// `formats` for the kernel-encoded devices `devs`, with `buffer_kb` a CPU, on `cpus`.
    /// An error says what could not be done (the instance is removed again).
    pub fn open(
        root: &Path,
        formats: &BlockFormats,
        devs: &[u32],
        buffer_kb: usize,
        cpus: &[u32],
    ) -> Result<BlockRings, String> {
        let read = |p: &str| {
            read_header(&root.join(p)).map_err(|e| format!("{}: {e}", root.join(p).display()))
        };
        let layout =
            PageLayout::parse(&read("events/header_page")?, &read("events/header_event")?)?;
        let instances = root.join("instances");
        remove_stale(&instances);
        let name = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed)
        );
        let dir = instances.join(&name);
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let instance = Instance { dir };
        let d = &instance.dir;
        write(&d.join("trace_clock"), "mono")?;
        write(&d.join("buffer_size_kb"), &buffer_kb.to_string())?;
        write(&d.join("options/overwrite"), "0")?;
        let filter = devs
            .iter()
            .map(|n| format!("dev == {n}"))
            .collect::<Vec<_>>()
            .join(" || ");
        for f in [&formats.issue, &formats.complete] {
            let (group, event) = f.name.split_once(':').unwrap_or(("block", &f.name));
            let e = d.join("events").join(group).join(event);
            write(&e.join("filter"), &filter)?;
            write(&e.join("enable"), "1")?;
        }
        write(&d.join("tracing_on"), "1")?;
        let subbuf = std::fs::read_to_string(d.join("buffer_subbuf_size_kb"))
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .map_or_else(crate::sys::page_size, |kb| kb * 1024);
        let mut readers = Vec::new();
        for &cpu in cpus {
            let c = d.join("per_cpu").join(format!("cpu{cpu}"));
            let p = c.join("trace_pipe_raw");
            let pipe = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&p)
                .map_err(|e| format!("{}: {e}", p.display()))?;
            readers.push(Cpu {
                cpu,
                pipe,
                stats: c.join("stats"),
            });
        }
        Ok(BlockRings {
            cpus: readers,
            instance,
            layout,
            page: vec![0; subbuf],
            text: String::new(),
            max_pages: buffer_kb * 1024 / subbuf + 4,
            malformed: 0,
            missed_noted: false,
        })
    }

    /// The instance's directory.
    pub fn dir(&self) -> &Path {
        &self.instance.dir
    }

    /// Reads every page written so far on every CPU, handing each record's time (ns of
    /// `CLOCK_MONOTONIC`) and bytes to `f`; returns the records the instance has dropped or
    /// overwritten since it was made (read after the pages, so that a record is either read
    /// by now or by the next drain, or counted here).
    pub fn drain(&mut self, mut f: impl FnMut(u64, &[u8])) -> u64 {
        let mut lost = 0;
        for c in &mut self.cpus {
            for _ in 0..self.max_pages {
                match c.pipe.read(&mut self.page) {
                    Ok(0) => break,
                    Ok(n) => {
                        let info = parse_page(&self.page[..n], &self.layout, &mut f);
                        if info.malformed {
                            if self.malformed == 0 {
                                log::warn!(
                                    "kernel trace: a malformed page in CPU {}'s ftrace buffer; the rest of the page skipped",
                                    c.cpu
                                );
                            }
                            self.malformed += 1;
                        }
                        if info.missed.is_some() && !self.missed_noted {
                            // Counted by the stats below.
                            log::warn!("kernel trace: CPU {}'s ftrace buffer lost events", c.cpu);
                            self.missed_noted = true;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => {
                        log::error!("kernel trace: reading CPU {}'s ftrace buffer: {e}", c.cpu);
                        break;
                    }
                }
            }
            self.text.clear();
            match File::open(&c.stats).and_then(|mut s| s.read_to_string(&mut self.text)) {
                Ok(_) => lost += lost_in(&self.text),
                Err(e) => log::error!("kernel trace: {}: {e}", c.stats.display()),
            }
        }
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses_are_read_from_the_stats() {
        let s = "entries: 12\noverrun: 3\ncommit overrun: 1\nbytes: 400\n\
                 oldest event ts:   895.255467\nnow ts: 12789.506168\ndropped events: 7\nread events: 9\n";
        assert_eq!(lost_in(s), 11);
        assert_eq!(stat(s, "entries"), 12);
        assert_eq!(lost_in(""), 0);
    }

    #[test]
    fn only_instances_of_processes_gone_are_stale() {
        let d = tempfile::tempdir().unwrap();
        let me = std::process::id();
        for n in [
            format!("fsprof-{me}-0"),
            "fsprof-4000000000-1".into(),
            "fsprof-x-1".into(),
            "other".into(),
        ] {
            std::fs::create_dir(d.path().join(n)).unwrap();
        }
        remove_stale(d.path());
        let mut left: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                format!("fsprof-{me}-0"),
                "fsprof-x-1".into(),
                "other".into()
            ]
        );
    }
}
