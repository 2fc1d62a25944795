//! Benchmark targets: a plain directory, fsprof-fuse with and without profiling, RAIF, and peer
//! FUSE file systems, each mounted over a fresh lower directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::mounts::{self, MountGuard};
use super::procfs;

/// What a target is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// The lower directory itself, no FUSE.
    Native,
    /// `fsprof-fuse LOWER MNT`, with `--no-profile` when `profile` is false.
    FsprofFuse {
        /// Whether profiling is on.
        profile: bool,
    },
    /// `raif --branches B0,B1,... --level LEVEL MNT`.
    Raif {
        /// RAIF level (0, 1, 4, 5).
        level: u32,
        /// Number of branches.
        branches: u32,
    },
    /// `bindfs LOWER MNT`.
    Bindfs,
    /// `unionfs LOWER=RW MNT` (unionfs-fuse, one branch).
    UnionfsFuse,
    /// `mergerfs LOWER MNT` (one branch).
    Mergerfs,
    /// `loggedfs -l LOG MNT` (LoggedFS mounts over the directory it logs).
    Loggedfs,
}

/// A named target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// As written on the command line (`raif:5:4`).
    pub name: String,
    /// What it is.
    pub kind: Kind,
}

/// Target names accepted besides `raif:LEVEL:N`.
pub const NAMES: &[&str] = &[
    "native",
    "fsprof-fuse-noprofile",
    "fsprof-fuse",
    "bindfs",
    "unionfs-fuse",
    "mergerfs",
    "loggedfs",
];

/// Where the fsprof binaries are.
#[derive(Debug, Clone, Default)]
pub struct Binaries {
    /// `fsprof-fuse`.
    pub fsprof_fuse: Option<PathBuf>,
    /// `raif`.
    pub raif: Option<PathBuf>,
}

/// Finds `name` in `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A binary next to this executable (the same cargo target directory).
pub fn sibling(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.join(name);
    p.is_file().then_some(p)
}

impl Target {
    /// Parses a target name.
    pub fn parse(s: &str) -> Result<Target, String> {
        let kind = match s {
            "native" => Kind::Native,
            "fsprof-fuse-noprofile" | "fsprof-fuse:noprofile" => {
                Kind::FsprofFuse { profile: false }
            }
            "fsprof-fuse" => Kind::FsprofFuse { profile: true },
            "bindfs" => Kind::Bindfs,
            "unionfs-fuse" | "unionfs" => Kind::UnionfsFuse,
            "mergerfs" => Kind::Mergerfs,
            "loggedfs" => Kind::Loggedfs,
            _ => {
                let parts: Vec<&str> = s.split(':').collect();
                match parts.as_slice() {
                    ["raif", level, n] => {
                        let level: u32 = level
                            .parse()
                            .ok()
                            .filter(|l| [0, 1, 4, 5].contains(l))
                            .ok_or_else(|| format!("bad RAIF level in '{s}': 0, 1, 4 or 5"))?;
                        let branches: u32 = n
                            .parse()
                            .ok()
                            .filter(|n| (2..=64).contains(n))
                            .ok_or_else(|| format!("bad branch count in '{s}': 2 to 64"))?;
                        if level >= 4 && branches < 3 {
                            return Err(format!("'{s}': RAIF{level} needs at least 3 branches"));
                        }
                        Kind::Raif { level, branches }
                    }
                    _ => {
                        return Err(format!(
                            "unknown target '{s}': expected one of {} or raif:LEVEL:N",
                            NAMES.join(", ")
                        ));
                    }
                }
            }
        };
        Ok(Target {
            name: s.to_string(),
            kind,
        })
    }

    /// The program that mounts this target, or why it is unavailable. `Ok(None)` for native.
    pub fn program(&self, bins: &Binaries) -> Result<Option<PathBuf>, String> {
        let (name, found) = match self.kind {
            Kind::Native => return Ok(None),
            Kind::FsprofFuse { .. } => ("fsprof-fuse", bins.fsprof_fuse.clone()),
            Kind::Raif { .. } => ("raif", bins.raif.clone()),
            Kind::Bindfs => ("bindfs", which("bindfs")),
            Kind::UnionfsFuse => ("unionfs", which("unionfs")),
            Kind::Mergerfs => ("mergerfs", which("mergerfs")),
            Kind::Loggedfs => ("loggedfs", which("loggedfs")),
        };
        match found {
            Some(p) if p.is_file() => Ok(Some(p)),
            Some(p) => Err(format!("{name} not found at '{}'", p.display())),
            None => Err(format!("{name} not found")),
        }
    }

    /// Mounts this target in the fresh directory `dir` (which must exist and be empty).
    /// Returns the directory the workload runs in and the guard of the mount.
    pub fn mount(&self, program: Option<&Path>, dir: &Path) -> Result<Mounted, String> {
        let mk = |name: &str| -> Result<PathBuf, String> {
            let p = dir.join(name);
            std::fs::create_dir_all(&p)
                .map_err(|e| format!("cannot create '{}': {e}", p.display()))?;
            Ok(p)
        };
        let Some(program) = program else {
            return Ok(Mounted {
                path: mk("lower")?,
                guard: None,
            });
        };
        let mnt = mk("mnt")?;
        let mut cmd = Command::new(program);
        match &self.kind {
            Kind::Native => unreachable!("native has no program"),
            Kind::FsprofFuse { profile } => {
                cmd.arg(mk("lower")?).arg(&mnt);
                if !profile {
                    cmd.arg("--no-profile");
                }
            }
            Kind::Raif { level, branches } => {
                let list: Vec<String> = (0..*branches)
                    .map(|i| mk(&format!("branch{i}")).map(|p| p.display().to_string()))
                    .collect::<Result<_, _>>()?;
                cmd.arg("--branches")
                    .arg(list.join(","))
                    .arg("--level")
                    .arg(level.to_string())
                    .arg(&mnt);
            }
            Kind::Bindfs => {
                cmd.arg(mk("lower")?).arg(&mnt);
            }
            Kind::UnionfsFuse => {
                let lower = mk("lower")?;
                cmd.arg(format!("{}=RW", lower.display())).arg(&mnt);
            }
            Kind::Mergerfs => {
                cmd.arg(mk("lower")?).arg(&mnt);
            }
            Kind::Loggedfs => {
                cmd.arg("-l").arg(dir.join("loggedfs.log")).arg(&mnt);
            }
        }
        log::info!("mounting {}: {:?}", self.name, cmd);
        let out = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("cannot run '{}': {e}", program.display()))?;
        // Whatever happened, from here on a mount may exist: guard it before judging.
        let program_name = program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !mounts::is_mounted(&mnt) && Instant::now() < deadline && out.status.success() {
            std::thread::sleep(Duration::from_millis(20));
        }
        let daemon = procfs::find_daemon(&mnt, program_name.as_deref());
        let guard = MountGuard::new(mnt.clone(), daemon);
        if !out.status.success() || !mounts::is_mounted(&mnt) {
            let err = String::from_utf8_lossy(&out.stderr);
            let err = err.trim();
            return Err(format!(
                "mounting {} failed ({}){}{}",
                self.name,
                out.status,
                if err.is_empty() { "" } else { ": " },
                err.lines().last().unwrap_or("")
            ));
        }
        if daemon.is_none() {
            log::warn!("daemon of {} not found: no CPU time", self.name);
        }
        Ok(Mounted {
            path: mnt,
            guard: Some(guard),
        })
    }
}

/// A mounted (or native) target.
#[derive(Debug)]
pub struct Mounted {
    /// Where the workload runs.
    pub path: PathBuf,
    /// The mount, unmounted when this drops.
    pub guard: Option<MountGuard>,
}

impl Mounted {
    /// CPU seconds the daemon has used so far (None for native or an unknown daemon).
    pub fn daemon_cpu(&self) -> Option<f64> {
        procfs::cpu_seconds(self.guard.as_ref()?.daemon()?)
    }

    /// Unmounts now; false if it could not.
    pub fn unmount(&mut self) -> bool {
        self.guard.as_mut().is_none_or(MountGuard::unmount)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names() {
        assert_eq!(Target::parse("native").unwrap().kind, Kind::Native);
        assert_eq!(
            Target::parse("fsprof-fuse-noprofile").unwrap().kind,
            Kind::FsprofFuse { profile: false }
        );
        assert_eq!(
            Target::parse("raif:5:4").unwrap().kind,
            Kind::Raif {
                level: 5,
                branches: 4
            }
        );
        assert!(Target::parse("raif:3:4").is_err());
        assert!(Target::parse("raif:5:2").is_err());
        assert!(Target::parse("ext9").is_err());
    }
}
