//! The tree the trace needed at its start, as the plan learns it: what the trace first says
//! about each path under the root, the sizes its reads, stats and seeks reveal, and at the end
//! the entries to create ([`Tree::initial`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a path was at the start of the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file of this size.
    File(u64),
    /// A directory.
    Dir,
    /// A symbolic link whose target has this length.
    Symlink(u64),
}

/// What the trace says a path was at its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Initial {
    Exists(Seen),
    Absent,
    /// Created by the program without saying whether it existed (`O_CREAT`, rename target):
    /// it existed if the program read from it before changing it.
    Maybe,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Seen {
    File,
    Dir,
    Symlink,
    Unknown,
}

#[derive(Debug, Default)]
pub(super) struct PathState {
    initial: Option<Initial>,
    modified: bool,
    min_size: u64,
    exact: Option<u64>,
    link_len: u64,
}

/// The paths under the traced root that the trace named, and what it said about them.
#[derive(Debug)]
pub(super) struct Tree {
    root: PathBuf,
    paths: BTreeMap<PathBuf, PathState>,
}

impl Tree {
    /// An empty tree of the traced root `root`.
    pub(super) fn new(root: PathBuf) -> Tree {
        Tree {
            root,
            paths: BTreeMap::new(),
        }
    }

    /// The traced root.
    pub(super) fn root(&self) -> &Path {
        &self.root
    }

    fn state(&mut self, p: &Path) -> Option<&mut PathState> {
        if p.starts_with(&self.root) {
            Some(self.paths.entry(p.to_path_buf()).or_default())
        } else {
            None
        }
    }

    /// Records what the trace first says about `p` (later statements are about what the
    /// program did, not about the start).
    pub(super) fn first(&mut self, p: &Path, i: Initial) {
        if let Some(s) = self.state(p) {
            if s.initial.is_none() {
                s.initial = Some(i);
            }
        }
    }

    /// The program changed `p`: what the trace says about it afterwards is not about the
    /// start.
    pub(super) fn modified(&mut self, p: &Path) {
        if let Some(s) = self.state(p) {
            if s.initial.is_none() {
                s.initial = Some(Initial::Maybe);
            }
            s.modified = true;
        }
    }

    /// A read from the unchanged file `p` reached `end`; `eof` when it stopped there.
    pub(super) fn extent(&mut self, p: &Path, end: u64, eof: bool) {
        if let Some(s) = self.state(p) {
            if s.modified {
                return;
            }
            if s.initial.is_none() || s.initial == Some(Initial::Maybe) && end > 0 {
                s.initial = Some(Initial::Exists(Seen::File));
            }
            s.min_size = s.min_size.max(end);
            if eof && s.exact.is_none() {
                s.exact = Some(end);
            }
        }
    }

    /// The unchanged file `p` had `size` bytes (a stat, a seek to the end said so).
    pub(super) fn exact_size(&mut self, p: &Path, size: u64) {
        if let Some(s) = self.state(p) {
            if !s.modified && s.exact.is_none() {
                s.exact = Some(size);
            }
        }
    }

    /// The symbolic link `p`'s target has at least `len` bytes.
    pub(super) fn link_len(&mut self, p: &Path, len: u64) {
        if let Some(s) = self.state(p) {
            s.link_len = s.link_len.max(len);
        }
    }

    /// A name in `p`'s directory was used successfully: its directories existed (unless the
    /// program made them).
    pub(super) fn parent_used(&mut self, p: &Path) {
        let mut d = p.parent();
        while let Some(dir) = d {
            if !dir.starts_with(&self.root) || dir == self.root {
                break;
            }
            match self.state(dir) {
                Some(s) if s.initial.is_none() => s.initial = Some(Initial::Exists(Seen::Dir)),
                _ => break,
            }
            d = dir.parent();
        }
    }

    /// Whether a directory above `p` (under the root) did not exist at the start: then `p`
    /// did not either, whatever the trace said of it, which it reached through a symbolic
    /// link the program made there (the plan resolves paths lexically).
    fn below_absent(&self, p: &Path) -> bool {
        p.ancestors()
            .skip(1)
            .take_while(|d| d.starts_with(&self.root) && *d != self.root)
            .any(|d| {
                self.paths
                    .get(d)
                    .is_some_and(|s| s.initial == Some(Initial::Absent))
            })
    }

    /// The entries to create, parents first, relative to the replay directory.
    pub(super) fn initial(&self) -> Vec<(PathBuf, Kind)> {
        let (states, root) = (&self.paths, self.root.as_path());
        let mut out: BTreeMap<PathBuf, Kind> = BTreeMap::new();
        let existed = |s: &PathState| matches!(s.initial, Some(Initial::Exists(_)));
        for (p, s) in states {
            if !existed(s) || p == root || self.below_absent(p) {
                continue;
            }
            let has_children = states
                .range(p.clone()..)
                .skip(1)
                .take_while(|(q, _)| q.starts_with(p))
                .any(|(_, c)| existed(c));
            let size = s.exact.unwrap_or(s.min_size);
            let kind = match s.initial {
                Some(Initial::Exists(Seen::Dir)) => Kind::Dir,
                Some(Initial::Exists(Seen::Symlink)) => Kind::Symlink(s.link_len.max(1)),
                _ if has_children => Kind::Dir,
                _ => Kind::File(size),
            };
            out.insert(p.clone(), kind);
        }
        // Parents of everything created are directories.
        let paths: Vec<PathBuf> = out.keys().cloned().collect();
        for p in paths {
            let mut d = p.parent();
            while let Some(dir) = d {
                if dir == root || !dir.starts_with(root) {
                    break;
                }
                out.insert(dir.to_path_buf(), Kind::Dir);
                d = dir.parent();
            }
        }
        out.into_iter()
            .map(|(p, k)| {
                let rel = p.strip_prefix(root).expect("under the root");
                (rel.to_path_buf(), k)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_existed_below_a_name_the_program_made() {
        let mut t = Tree::new(PathBuf::from("/w"));
        // symlink("..", "up"); open("up/s/f") (through the link); stat("d/e").
        t.first(Path::new("/w/up"), Initial::Absent);
        t.first(Path::new("/w/up/s/f"), Initial::Exists(Seen::File));
        t.parent_used(Path::new("/w/up/s/f"));
        t.first(Path::new("/w/d/e"), Initial::Exists(Seen::File));
        t.parent_used(Path::new("/w/d/e"));
        assert_eq!(
            t.initial(),
            vec![
                (PathBuf::from("d"), Kind::Dir),
                (PathBuf::from("d/e"), Kind::File(0)),
            ]
        );
    }
}
