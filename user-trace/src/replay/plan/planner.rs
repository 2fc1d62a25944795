//! Planning one traced call: its paths resolved (against the process's working directory and
//! descriptors, as the program saw them) and mapped into the replay directory (as paths
//! relative to it, which the replay resolves beneath it), the objects it names (the order
//! between threads is kept on them), and what it teaches about the tree at the start
//! ([`learn`](super::learn)).

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::calls::{changes_dir, is_at_call, makes_fd, normalize, path_role};
use super::learn::{Call, learn};
use super::sim::ProcSim;
use super::tree::Tree;
use crate::abi::id::{SYMLINK, SYMLINKAT};
use crate::trace::{Arg, Record};

/// An object calls are ordered on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Key {
    Path(PathBuf),
    /// A descriptor number of a process.
    Fd(u32, i64),
}

/// What planning made of a call.
pub(super) struct Planned {
    /// Its path items relative to the replay directory.
    pub(super) paths: Vec<Option<CString>>,
    /// A path lies outside the traced root.
    pub(super) outside: bool,
    /// The objects it names.
    pub(super) keys: Vec<Key>,
}

/// Plans calls, learning the tree at the start into `tree`.
pub(super) struct Planner<'a> {
    pub(super) tree: &'a mut Tree,
}

/// The call's path items resolved: mapped into the replay directory, and as absolute traced
/// paths (`None` for an item that is not a path).
struct Resolved {
    mapped: Vec<Option<CString>>,
    abs: Vec<Option<PathBuf>>,
    outside: bool,
}

impl Planner<'_> {
    /// The traced path `p` (normalized) relative to the root, when it lies under it: `.` for
    /// the root itself.
    fn map(&self, p: &Path) -> Option<CString> {
        let rel = p.strip_prefix(self.tree.root()).ok()?;
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        CString::new(rel.as_os_str().as_bytes()).ok()
    }

    /// Resolves, maps and learns from one record of process `pid`.
    pub(super) fn visit(&mut self, pid: u32, proc: &mut ProcSim, rec: &Record) -> Planned {
        let ok = rec.result >= 0;
        let fds: Vec<i64> = (0..4).map_while(|k| rec.fd(k)).collect();
        let r = self.resolve(proc, rec, &fds);
        let keys = keys(pid, proc, rec, &fds, &r.abs);
        // What the call says about the tree at the start, and its effect on descriptors.
        let call = Call {
            rec,
            ok,
            errno: if ok { 0 } else { (-rec.result) as i32 },
            fds: &fds,
            p0: r.abs.first().cloned().flatten(),
            p1: r.abs.get(1).cloned().flatten(),
        };
        learn(self.tree, proc, &call);
        Planned {
            paths: r.mapped,
            outside: r.outside,
            keys,
        }
    }

    /// Resolves the string items of `rec` that are paths.
    fn resolve(&self, proc: &ProcSim, rec: &Record, fds: &[i64]) -> Resolved {
        let call = rec.call;
        let mut out = Resolved {
            mapped: Vec::new(),
            abs: Vec::new(),
            outside: false,
        };
        let strings = rec.args.iter().filter_map(|a| match a {
            Arg::Path(p) => Some(p.as_deref()),
            _ => None,
        });
        for (k, raw) in strings.enumerate() {
            let resolved = match (path_role(call, k), raw) {
                (Some(dirfd), Some(raw)) => {
                    let raw = Path::new(OsStr::from_bytes(raw));
                    let base = match dirfd.and_then(|d| fds.get(d).copied()) {
                        Some(fd) if fd != libc::AT_FDCWD as i64 => proc.fd_path(fd),
                        _ => Some(proc.cwd.clone()),
                    };
                    if raw.is_absolute() {
                        Some(normalize(raw))
                    } else if raw.as_os_str().is_empty() {
                        base
                    } else {
                        base.map(|b| normalize(&b.join(raw)))
                    }
                }
                // A null path (utimensat, freopen): the descriptor or stream itself.
                (Some(Some(d)), None) => fds.get(d).and_then(|&fd| proc.fd_path(fd)),
                _ => None,
            };
            let is_path = path_role(call, k).is_some() && raw.is_some();
            match &resolved {
                Some(p) => match self.map(p) {
                    Some(m) => out.mapped.push(Some(m)),
                    None => {
                        out.outside = true;
                        out.mapped.push(None);
                    }
                },
                None => {
                    if is_path {
                        out.outside = true;
                    }
                    // Not a path (a symlink's target is mapped below); executors read the
                    // record's strings.
                    out.mapped.push(None);
                }
            }
            out.abs.push(if is_path { resolved } else { None });
        }
        if matches!(call, SYMLINK | SYMLINKAT) {
            if let (Some(Some(target)), Some(Some(link))) = (
                rec.args.iter().find_map(|a| match a {
                    Arg::Path(p) => Some(p.as_deref()),
                    _ => None,
                }),
                out.abs.get(1),
            ) {
                if let Some(t) = self.link_target(Path::new(OsStr::from_bytes(target)), link) {
                    out.mapped[0] = Some(t);
                }
            }
        }
        out
    }

    /// The target to recreate the traced link `link` with, for the absolute traced `target`
    /// under the root: the same place, relative to the link's directory (the replay resolves
    /// beneath its directory, and refuses to follow an absolute link). `None` (kept as
    /// traced) for a relative target or one outside the root.
    fn link_target(&self, target: &Path, link: &Path) -> Option<CString> {
        if !target.is_absolute() {
            return None;
        }
        let root = self.tree.root();
        let to = normalize(target);
        let to = to.strip_prefix(root).ok()?;
        let from = link.parent()?.strip_prefix(root).ok()?;
        let ups = from.components().count();
        let mut rel = PathBuf::new();
        for _ in 0..ups {
            rel.push("..");
        }
        rel.push(to);
        if rel.as_os_str().is_empty() {
            rel.push(".");
        }
        CString::new(rel.as_os_str().as_bytes()).ok()
    }
}

/// The objects `rec` (of process `pid`, whose resolved paths are `abs`) names: its paths, the
/// files behind its descriptors, the descriptor numbers it uses or makes, and the directories
/// of names it creates or removes.
fn keys(pid: u32, proc: &ProcSim, rec: &Record, fds: &[i64], abs: &[Option<PathBuf>]) -> Vec<Key> {
    let mut keys = Vec::new();
    for p in abs.iter().flatten() {
        keys.push(Key::Path(p.clone()));
    }
    // The descriptors of the *at calls name directories, not the objects acted on.
    if !is_at_call(rec.call) || abs.iter().all(Option::is_none) {
        for &fd in fds.iter().filter(|&&f| f >= 0) {
            if let Some(p) = proc.fd_path(fd) {
                keys.push(Key::Path(p));
            }
        }
    }
    // Descriptor numbers are shared by a process's threads: calls that use, make or
    // close the same number stay in order.
    for &fd in fds.iter().filter(|&&f| f >= 0) {
        keys.push(Key::Fd(pid, fd));
    }
    if makes_fd(rec) && rec.result >= 0 {
        keys.push(Key::Fd(pid, rec.result));
    }
    // Names created or removed change their directory.
    if changes_dir(rec) {
        for p in abs.iter().flatten() {
            if let Some(d) = p.parent() {
                keys.push(Key::Path(d.to_path_buf()));
            }
        }
    }
    keys
}
