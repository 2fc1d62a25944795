//! What is negotiated with the kernel at `INIT`: capabilities and request sizes, in the
//! kernel's own numbering (`fuse_kernel.h`: `flags | flags2 << 32`), so that every transport
//! passes them on unchanged.

use std::ops::{BitAnd, BitOr, BitOrAssign, Not};

/// A set of `FUSE_*` capability flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Caps(pub u64);

#[allow(missing_docs)]
impl Caps {
    pub const ASYNC_READ: Caps = Caps(1 << 0);
    pub const POSIX_LOCKS: Caps = Caps(1 << 1);
    pub const ATOMIC_O_TRUNC: Caps = Caps(1 << 3);
    pub const EXPORT_SUPPORT: Caps = Caps(1 << 4);
    pub const BIG_WRITES: Caps = Caps(1 << 5);
    pub const DONT_MASK: Caps = Caps(1 << 6);
    pub const FLOCK_LOCKS: Caps = Caps(1 << 10);
    pub const HAS_IOCTL_DIR: Caps = Caps(1 << 11);
    pub const AUTO_INVAL_DATA: Caps = Caps(1 << 12);
    pub const DO_READDIRPLUS: Caps = Caps(1 << 13);
    pub const READDIRPLUS_AUTO: Caps = Caps(1 << 14);
    pub const ASYNC_DIO: Caps = Caps(1 << 15);
    pub const WRITEBACK_CACHE: Caps = Caps(1 << 16);
    pub const PARALLEL_DIROPS: Caps = Caps(1 << 18);
    pub const HANDLE_KILLPRIV: Caps = Caps(1 << 19);
    pub const POSIX_ACL: Caps = Caps(1 << 20);
    pub const MAX_PAGES: Caps = Caps(1 << 22);
    pub const CACHE_SYMLINKS: Caps = Caps(1 << 23);
    pub const HANDLE_KILLPRIV_V2: Caps = Caps(1 << 28);
    pub const SETXATTR_EXT: Caps = Caps(1 << 29);
    pub const DIRECT_IO_ALLOW_MMAP: Caps = Caps(1 << 36);
    pub const PASSTHROUGH: Caps = Caps(1 << 37);
    pub const NO_EXPORT_SUPPORT: Caps = Caps(1 << 38);
    pub const OVER_IO_URING: Caps = Caps(1 << 41);

    /// No capability.
    pub const fn empty() -> Caps {
        Caps(0)
    }

    /// Both sets (usable in constants).
    pub const fn union(self, o: Caps) -> Caps {
        Caps(self.0 | o.0)
    }

    /// Whether every flag of `o` is in this set.
    pub const fn contains(self, o: Caps) -> bool {
        self.0 & o.0 == o.0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl BitOr for Caps {
    type Output = Caps;
    fn bitor(self, o: Caps) -> Caps {
        Caps(self.0 | o.0)
    }
}

impl BitOrAssign for Caps {
    fn bitor_assign(&mut self, o: Caps) {
        self.0 |= o.0;
    }
}

impl BitAnd for Caps {
    type Output = Caps;
    fn bitand(self, o: Caps) -> Caps {
        Caps(self.0 & o.0)
    }
}

impl Not for Caps {
    type Output = Caps;
    fn not(self) -> Caps {
        Caps(!self.0)
    }
}

/// The `INIT` negotiation as a file system sees it: the transport fills in what the kernel
/// offers, the file system says what it wants, and the transport replies with what both allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Init {
    /// What the kernel supports.
    pub offered: Caps,
    /// What the file system asks for (only flags in `offered` are granted).
    pub want: Caps,
    /// Largest write request (bytes); the transport clamps it to what the protocol allows.
    pub max_write: u32,
    /// Largest readahead (bytes); the kernel's value on entry, never raised above it.
    pub max_readahead: u32,
    /// Background request limit; `None` keeps the kernel's default.
    pub max_background: Option<u16>,
    /// Background requests before the kernel considers the file system congested.
    pub congestion_threshold: Option<u16>,
    /// Stacking depth for kernel passthrough (0: none; 1 to pass reads and writes to files on a
    /// non-stacked file system).
    pub max_stack_depth: u32,
}

impl Init {
    /// What the kernel offers, with the file system wanting nothing yet.
    pub fn offered(offered: Caps, max_readahead: u32) -> Init {
        Init {
            offered,
            want: Caps::empty(),
            max_write: 128 << 10,
            max_readahead,
            max_background: None,
            congestion_threshold: None,
            max_stack_depth: 0,
        }
    }

    /// What will be granted: wanted and offered.
    pub fn granted(&self) -> Caps {
        self.want & self.offered
    }
}
