//! The lower handles of objects the kernel forgot, by node id (see [`super::export`]): a
//! bounded table, with nothing in it but what was kept of each object.

use std::collections::HashMap;

use parking_lot::Mutex;

/// Most forgotten objects whose lower handles are kept: at least the last half of that many
/// (about 6 MiB in all).
pub const FORGOTTEN: usize = 50_000;

/// What is kept of a forgotten object.
pub(super) struct Gone {
    pub(super) handle_type: i32,
    pub(super) handle: Box<[u8]>,
    pub(super) mount_id: i32,
    pub(super) dev: u64,
    pub(super) ino: u64,
    /// Birth time in ns (64 bits reach the year 2262).
    pub(super) btime_ns: i64,
    pub(super) kind: u32,
    pub(super) generation: u64,
}

/// Lower handles of forgotten objects by node id, in two generations: the newer fills up to
/// half of [`FORGOTTEN`], then becomes the older and the older is dropped whole. (No queue of
/// ages to keep: an object forgotten, found and forgotten again simply lands in the newer.)
#[derive(Default)]
pub(super) struct Forgotten {
    inner: Mutex<[HashMap<u64, Gone>; 2]>,
}

impl Forgotten {
    /// Keeps what is known of the object of `nodeid`, which the kernel just forgot.
    pub(super) fn remember(&self, nodeid: u64, gone: Gone) {
        let mut g = self.inner.lock();
        let [newer, older] = &mut *g;
        newer.insert(nodeid, gone);
        if newer.len() >= FORGOTTEN / 2 {
            *older = std::mem::take(newer);
        }
    }

    /// What is kept of `nodeid` (the newer generation first).
    pub(super) fn with<T>(&self, nodeid: u64, f: impl FnOnce(&Gone) -> T) -> Option<T> {
        let g = self.inner.lock();
        g[0].get(&nodeid).or_else(|| g[1].get(&nodeid)).map(f)
    }

    /// Entries kept (an object kept in both generations counts twice).
    pub(super) fn len(&self) -> usize {
        let g = self.inner.lock();
        g[0].len() + g[1].len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gone(id: u64, generation: u64) -> Gone {
        Gone {
            handle_type: 1,
            handle: id.to_ne_bytes().into(),
            mount_id: 7,
            dev: 1,
            ino: id,
            btime_ns: 5,
            kind: libc::S_IFREG,
            generation,
        }
    }

    #[test]
    fn the_table_keeps_the_latest_forgotten_handles_within_its_bound() {
        let t = Forgotten::default();
        let kept = |id: u64| t.with(id, |g| (g.handle.to_vec(), g.mount_id, g.generation));
        let n = FORGOTTEN as u64 * 3;
        for id in 2..2 + n {
            t.remember(id, gone(id, 9));
            assert!(t.len() <= FORGOTTEN);
        }
        // At least the last half is kept, and the oldest are gone.
        assert!(t.len() >= FORGOTTEN / 2);
        for id in [n + 1, n + 2 - FORGOTTEN as u64 / 2] {
            assert_eq!(kept(id), Some((id.to_ne_bytes().to_vec(), 7, 9)), "{id}");
        }
        assert_eq!(kept(2), None);
        assert_eq!(kept(n + 2 - FORGOTTEN as u64), None);
        // Forgotten again later: the newer entry answers.
        t.remember(n, gone(n, 10));
        assert_eq!(kept(n).unwrap().2, 10);
    }
}
