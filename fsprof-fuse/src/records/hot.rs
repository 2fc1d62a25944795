//! Hot files (`--hot-files N`): the N nodes with the most total latency, and the N with the
//! most requests, found with the space-saving sketch (Metwally et al.): N counters; a node
//! already counted adds to its counter; a new one takes the smallest counter over, and starts
//! from its value, remembered as the node's possible overcount (`error`). Every node whose true
//! total exceeds the smallest counter is in the list, and each count is at most `error` above
//! the truth. Memory is N entries per sketch whatever the number of files.
//!
//! A request counts for the node it is about ([`Request::nodeid`]; the parent directory for
//! name operations). Paths are looked up when the profile is taken, best effort.
//!
//! Written as the `hot_files` section (`docs/format.md#hot-files`), one line per entry, by rank:
//!
//! ```text
//! line = "by=" ("latency" / "calls") SP "rank=" n SP "ino=" n SP "value=" n SP "error=" n SP "path=" path
//! ```
//!
//! `value` is cycles (by latency) or requests (by calls); `path` is the path in the mount with
//! bytes outside `%x21-7E` and `%` written `%XX`, or `?` when unknown.

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
pub const SECTION: &str = "hot_files";

/// The hot-file sketches of one mount.
pub struct HotFiles {
    n: usize,
    sketches: Mutex<(Sketch, Sketch)>,
    paths: Option<Arc<dyn Paths>>,
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
        }
    }

    /// Counts a request `req` that took `cycles`.
    #[inline]
    pub fn record(&self, req: &Request, cycles: u64) {
        let mut s = self.sketches.lock();
        s.0.add(req.nodeid.0, cycles);
        s.1.add(req.nodeid.0, 1);
    }

    /// The section's lines.
    pub fn lines(&self) -> Vec<String> {
        let (lat, calls) = {
            let s = self.sketches.lock();
            (s.0.ranked(), s.1.ranked())
        };
        let mut names: HashMap<u64, String> = HashMap::new();
        let mut out = Vec::with_capacity(lat.len() + calls.len());
        for (by, list) in [("latency", lat), ("calls", calls)] {
            for (rank, e) in list.iter().enumerate() {
                let path = names
                    .entry(e.key)
                    .or_insert_with(|| {
                        self.paths
                            .as_ref()
                            .and_then(|p| p.path(Ino(e.key)))
                            .map_or_else(|| "?".into(), |p| Section::escape(&p))
                    })
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;

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
