//! Who the traced processes were: the image chunks of a trace (version 2; see
//! [`crate::abi`]), each a process image's command name and program, and what they say of a
//! process: its images in order, and for a fork child, the image it was forked from.

use std::collections::{BTreeMap, HashMap};

use crate::abi::{self, ChunkHeader, Origin};
use crate::trace::record::escape;

/// Images a reader keeps (one per program a process ran; beyond this, a crafted trace's are
/// counted and dropped).
pub const MAX_IMAGES: usize = 1 << 16;

/// Depth of fork ancestry followed to name a fork child.
const MAX_FORK_DEPTH: usize = 64;

/// A process image: the command, or a program after an exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Process id.
    pub pid: u32,
    /// Thread that attached it.
    pub tid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Clock when it attached (at its start).
    pub born: u64,
    /// Its command name (at most 15 bytes).
    pub comm: Vec<u8>,
    /// The program (`/proc/self/exe`).
    pub exe: Vec<u8>,
}

impl Image {
    /// The image of a chunk of kind [`abi::CHUNK_IMAGE`]; `None` if its payload is not one.
    pub fn decode(h: &ChunkHeader, payload: &[u8]) -> Option<Image> {
        let (comm, exe) = abi::decode_image(payload)?;
        Some(Image {
            pid: h.pid,
            tid: h.tid,
            ppid: h.ppid,
            born: h.born,
            comm: comm.to_vec(),
            exe: exe.to_vec(),
        })
    }

    /// `comm (exe)`, escaped.
    fn text(&self, out: &mut String, note: &str) {
        escape(out, &self.comm);
        out.push_str(" (");
        escape(out, &self.exe);
        out.push_str(note);
        out.push(')');
    }
}

/// The names of a trace's processes.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// Each process's images, by the time they attached.
    images: BTreeMap<u32, Vec<Image>>,
    /// Fork children: parent pid and the clock at the fork.
    forks: HashMap<u32, (u32, u64)>,
}

impl Names {
    /// The names `images` give.
    pub fn new(images: &[Image]) -> Names {
        let mut n = Names::default();
        n.add_images(images);
        n
    }

    /// Adds `images` (as [`crate::trace::TraceReader::images`] gives them).
    pub fn add_images(&mut self, images: &[Image]) {
        for i in images {
            self.images.entry(i.pid).or_default().push(i.clone());
        }
        for v in self.images.values_mut() {
            v.sort_by_key(|i| i.born);
        }
    }

    /// Notes what a record chunk's header says of its process (a fork child's parent).
    #[inline]
    pub fn saw(&mut self, h: &ChunkHeader) {
        if h.origin == Origin::Fork.code() && self.forks.len() < MAX_IMAGES {
            self.forks.entry(h.pid).or_insert((h.ppid, h.born));
        }
    }

    /// The image process `pid` was running at clock `at`.
    fn image_at(&self, pid: u32, at: u64, depth: usize) -> Option<&Image> {
        let own = self
            .images
            .get(&pid)
            .and_then(|v| v.iter().rev().find(|i| i.born <= at));
        own.or_else(|| {
            let &(parent, forked) = self.forks.get(&pid)?;
            (depth < MAX_FORK_DEPTH && forked <= at)
                .then(|| self.image_at(parent, forked, depth + 1))
                .flatten()
        })
    }

    /// What process `pid` ran: `tar (/usr/bin/tar)`; a fork child's first image is its
    /// parent's (`sh (/bin/sh, forked from 12), then ls (/bin/ls)`); `(no name recorded)`
    /// for a trace without image chunks (version 1) or a process whose program was not traced.
    pub fn describe(&self, pid: u32) -> String {
        let mut out = String::new();
        if let Some(&(parent, at)) = self.forks.get(&pid) {
            if let Some(i) = self.image_at(parent, at, 1) {
                i.text(&mut out, &format!(", forked from {parent}"));
            }
        }
        for i in self.images.get(&pid).into_iter().flatten() {
            if !out.is_empty() {
                out.push_str(", then ");
            }
            i.text(&mut out, "");
        }
        if out.is_empty() {
            out.push_str("(no name recorded)");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(pid: u32, born: u64, comm: &str, exe: &str) -> Image {
        Image {
            pid,
            tid: pid,
            ppid: 1,
            born,
            comm: comm.into(),
            exe: exe.into(),
        }
    }

    fn fork(pid: u32, ppid: u32, born: u64) -> ChunkHeader {
        ChunkHeader {
            kind: abi::CHUNK_RECORDS,
            flags: 0,
            len: 0,
            slot: 0,
            seq: 0,
            pid,
            tid: pid,
            ppid,
            origin: Origin::Fork.code(),
            parent_slot: 0,
            born,
            base: 0,
            payload_crc: 0,
        }
    }

    #[test]
    fn a_process_is_named_by_its_images_and_a_fork_child_by_its_parents() {
        let mut n = Names::new(&[
            image(10, 5, "sh", "/bin/sh"),
            image(11, 30, "ls", "/bin/ls"),
            image(10, 50, "tar", "/bin/tar"),
        ]);
        n.saw(&fork(11, 10, 20));
        n.saw(&fork(12, 11, 25));
        assert_eq!(n.describe(10), "sh (/bin/sh), then tar (/bin/tar)");
        assert_eq!(
            n.describe(11),
            "sh (/bin/sh, forked from 10), then ls (/bin/ls)"
        );
        // Forked from 11 before 11's exec: still sh.
        assert_eq!(n.describe(12), "sh (/bin/sh, forked from 11)");
        assert_eq!(n.describe(13), "(no name recorded)");
        let odd = Names::new(&[image(14, 1, "a\nb", "/x\u{1b}")]);
        assert_eq!(odd.describe(14), "a\\nb (/x\\x1b)");
    }
}
