//! Hot files (`--hot-files N`): the N nodes with the most total latency, and the N with the
//! most requests, found with the space-saving sketch (Metwally et al.): N counters; a node
//! already counted adds to its counter; a new one takes the smallest counter over, and starts
//! from its value, remembered as the node's possible overcount (`error`). Every node whose true
//! total exceeds the smallest counter is in the list, and each count is at most `error` above
//! the truth. Memory is N entries per sketch whatever the number of files.
//!
//! A request counts for the node it is about ([`Request::nodeid`]; the parent directory for
//! name operations); requests no caller waits for (`FORGET`, `RELEASE`, `RELEASEDIR`) do not
//! count. Paths are looked up when the profile is taken. A node the daemon no longer knows by
//! then (the kernel forgot it, as after `drop_caches`; a file deleted since) keeps the last
//! path known for it: its path is looked up when the kernel forgets a node in the lists
//! ([`HotFiles::forgetting`], a `readlink` per forget of a listed node only), and taken from
//! the slowest requests' records ([`HotFiles::remember`]). A path the lower file system no
//! longer has (the file was deleted) is marked `deleted=1`.
//!
//! Written as the `hot_files` section (`docs/format.md#hot-files`), one line per entry, by rank:
//!
//! ```text
//! line = "by=" ("latency" / "calls") SP "rank=" n SP "ino=" n SP "value=" n SP "error=" n SP "path=" path [SP "deleted=1"]
//! ```
//!
//! `value` is cycles (by latency) or requests (by calls); `path` is the path in the mount, byte
//! for byte, with bytes outside `%x21-7E` and `%` written `%XX` (`profile_store::name::text`),
//! or `?` when unknown.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use profile_store::{Extension, Section};

use super::paths::Paths;
use super::sketch::Sketch;
use crate::filesystem::{Ino, Request};

/// Default entries per sketch.
pub const DEFAULT_N: usize = 100;
/// Most entries per sketch (each list is written into every profile, paths included).
pub const MAX_N: usize = 10_000;

/// The section's name.
pub const SECTION: &str = profile_store::HOT_FILES_SECTION;

/// The hot-file sketches of one mount.
pub struct HotFiles {
    n: usize,
    sketches: Mutex<(Sketch, Sketch)>,
    paths: Option<Arc<dyn Paths>>,
    /// The last path known of nodes in the sketches, and whether it was deleted.
    known: Mutex<HashMap<u64, (Vec<u8>, bool)>>,
}

/// What `/proc/self/fd` adds to the path of a deleted file.
const DELETED: &[u8] = b" (deleted)";

/// A path as `/proc/self/fd` shows it: without the mark of a deleted file, and whether it had
/// it.
fn deleted(mut path: Vec<u8>) -> (Vec<u8>, bool) {
    if path.ends_with(DELETED) {
        path.truncate(path.len() - DELETED.len());
        (path, true)
    } else {
        (path, false)
    }
}

impl std::fmt::Debug for HotFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HotFiles").field("n", &self.n).finish()
    }
}

impl HotFiles {
    /// The top `n` (at least 1) by latency and by calls; `paths` names them.
    pub fn new(n: usize, paths: Option<Arc<dyn Paths>>) -> HotFiles {
        HotFiles {
            n: n.max(1),
            sketches: Mutex::new((Sketch::new(n), Sketch::new(n))),
            paths,
            known: Mutex::new(HashMap::new()),
        }
    }

    /// Counts a request `req` that took `cycles` (not one no caller waits for).
    #[inline]
    pub fn record(&self, req: &Request, cycles: u64) {
        if super::slowest::is_background(req.op) {
            return;
        }
        let mut s = self.sketches.lock();
        s.0.add(req.nodeid.0, cycles);
        s.1.add(req.nodeid.0, 1);
    }

    fn listed(&self, ino: Ino) -> bool {
        let s = self.sketches.lock();
        s.0.contains(ino.0) || s.1.contains(ino.0)
    }

    /// The kernel is about to forget node `ino` (a `FORGET`): if it is listed, its path is
    /// looked up while the daemon still knows the node, and kept. A listed node whose path
    /// cannot be found any more had one known before: it is marked deleted.
    pub fn forgetting(&self, ino: Ino) {
        if !self.listed(ino) {
            return;
        }
        match self.paths.as_ref().and_then(|p| p.path(ino)) {
            Some(p) => self.keep(ino.0, deleted(p)),
            None => {
                if let Some(k) = self.known.lock().get_mut(&ino.0) {
                    k.1 = true;
                }
            }
        }
    }

    /// Node `ino`, if listed, was last seen at `path` (a slow request's record).
    pub fn remember(&self, ino: Ino, path: &[u8]) {
        if self.listed(ino) {
            self.keep(ino.0, deleted(path.to_vec()));
        }
    }

    /// Keeps the last path known of node `key`; past four times the lists' size, only the
    /// nodes listed now are kept (memory stays bounded between snapshots).
    fn keep(&self, key: u64, known: (Vec<u8>, bool)) {
        let mut k = self.known.lock();
        k.insert(key, known);
        if k.len() > 4 * self.n {
            let s = self.sketches.lock();
            k.retain(|key, _| s.0.contains(*key) || s.1.contains(*key));
        }
    }

    /// The path of listed node `key` for the section: looked up now, else the last one known
    /// (marked deleted when it was), else `?`.
    fn path_of(&self, key: u64) -> String {
        let live = self.paths.as_ref().and_then(|p| p.path(Ino(key)));
        let mut known = self.known.lock();
        let (path, gone) = match live {
            Some(p) => {
                let (p, gone) = deleted(p);
                known.insert(key, (p.clone(), gone));
                (p, gone)
            }
            None => match known.get(&key) {
                Some((p, gone)) => (p.clone(), *gone),
                None => return "?".into(),
            },
        };
        let mut s = profile_store::name::text(&path);
        if gone {
            s.push_str(" deleted=1");
        }
        s
    }

    /// The section's lines.
    pub fn lines(&self) -> Vec<String> {
        let (lat, calls) = {
            let s = self.sketches.lock();
            (s.0.ranked(), s.1.ranked())
        };
        let mut names: HashMap<u64, String> = HashMap::new();
        let mut out = Vec::with_capacity(lat.len() + calls.len());
        for (by, list) in [("latency", &lat), ("calls", &calls)] {
            for (rank, e) in list.iter().enumerate() {
                let path = names
                    .entry(e.key)
                    .or_insert_with(|| self.path_of(e.key))
                    .clone();
                out.push(format!(
                    "by={by} rank={} ino={} value={} error={} path={path}",
                    rank + 1,
                    e.key,
                    e.value,
                    e.error
                ));
            }
        }
        // Only listed nodes keep a known path: the map stays within the lists' size.
        self.known.lock().retain(|k, _| names.contains_key(k));
        out
    }
}

impl Extension for HotFiles {
    fn sections(&self) -> Vec<Section> {
        let mut s = Section::new(SECTION);
        s.attrs = vec![("n".into(), self.n.to_string())];
        s.lines = self.lines();
        vec![s]
    }

    fn reset(&self) {
        let mut s = self.sketches.lock();
        s.0.clear();
        s.1.clear();
        self.known.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ops::Op;

    fn req(ino: u64) -> Request<'static> {
        Request::new(Op::Read, 1, Ino(ino), 1, 0, 0)
    }

    #[test]
    fn the_heavy_hitters_stay_with_bounded_overcounts() {
        let h = HotFiles::new(3, None);
        for i in 0..1000u64 {
            h.record(&req(10), 100); // hot by latency
            h.record(&req(20), 1);
            h.record(&req(20), 1); // hot by calls
            h.record(&req(1000 + i), 1); // a stream of one-off files
        }
        let lines = h.lines();
        assert_eq!(lines.len(), 6);
        assert!(
            lines[0].starts_with("by=latency rank=1 ino=10 value=100000 error=0 path=?"),
            "{lines:?}"
        );
        assert!(
            lines[3].starts_with("by=calls rank=1 ino=20 value=2000 error=0"),
            "{lines:?}"
        );
        h.reset();
        assert!(h.lines().is_empty());
    }

    #[test]
    fn paths_are_escaped() {
        assert_eq!(Section::escape("/a b/%c"), "/a%20b/%25c");
    }
}
