//! The kernel-cache presets (`--cache exact|normal|fast`) and what each sets: how long the
//! kernel may keep names, attributes and the absence of a name, whether it lists directories
//! with `READDIRPLUS`, and whether it gathers writes (writeback cache). A leaf: the options
//! (`cli`), the mount settings (for the transports and the profile's header) and the programs
//! read it. docs/cache.md says what each preset hides from the profile, with the measurements
//! behind the default.

use std::time::Duration;

/// A named set of kernel-cache settings. Each knob given on its own overrides the preset's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum CachePreset {
    /// Nothing cached: every path lookup and every `stat` of the application reaches the
    /// daemon (time-outs 0 s, no `READDIRPLUS`, no writeback).
    Exact,
    /// Names, attributes and absent names cached for 60 s, as a native file system keeps them
    /// in its dentry and inode caches; listings carry attributes (`READDIRPLUS`); each
    /// `write(2)` still reaches the daemon.
    #[default]
    Normal,
    /// Names, attributes and absent names cached for a day, listings with attributes, and the
    /// kernel's writeback cache (where the file system has one): writes are gathered, the
    /// daemon sees fewer, larger ones, later.
    Fast,
}

impl CachePreset {
    /// The name recorded in profiles (`cache=...`) and given to `--cache`.
    pub fn name(self) -> &'static str {
        match self {
            CachePreset::Exact => "exact",
            CachePreset::Normal => "normal",
            CachePreset::Fast => "fast",
        }
    }

    /// What the preset sets, before any knob given on its own.
    pub fn policy(self) -> CachePolicy {
        let (ttl, readdirplus, writeback) = match self {
            CachePreset::Exact => (Duration::ZERO, Readdirplus::Off, false),
            CachePreset::Normal => (Duration::from_secs(60), Readdirplus::On, false),
            CachePreset::Fast => (Duration::from_secs(86_400), Readdirplus::On, true),
        };
        CachePolicy {
            preset: self,
            entry_ttl: ttl,
            attr_ttl: ttl,
            negative_ttl: ttl,
            readdirplus,
            writeback,
        }
    }
}

/// When the kernel lists a directory with `READDIRPLUS` (names with their attributes, so that
/// a `stat` of each name needs no `LOOKUP`) rather than `READDIR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Readdirplus {
    /// Always (`FUSE_DO_READDIRPLUS`).
    On,
    /// Never: names only, each one looked up on its own when the application asks for it.
    Off,
    /// When the kernel has seen the names of the directory looked up after a listing
    /// (`FUSE_DO_READDIRPLUS` with `FUSE_READDIRPLUS_AUTO`).
    Auto,
}

/// The kernel-cache settings of one mount: a preset and the knobs given over it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachePolicy {
    /// The preset the settings started from (`cache=` in the profile's header).
    pub preset: CachePreset,
    /// How long the kernel may cache a name (entry time-out).
    pub entry_ttl: Duration,
    /// How long the kernel may cache attributes.
    pub attr_ttl: Duration,
    /// How long the kernel may remember that a name does not exist (a negative entry: the
    /// transports answer a `LOOKUP` that fails with `ENOENT` so; the profile still counts the
    /// failed `LOOKUP`). Zero: not at all.
    pub negative_ttl: Duration,
    /// When directories are listed with `READDIRPLUS`.
    pub readdirplus: Readdirplus,
    /// The kernel's writeback cache, where the file system has one.
    pub writeback: bool,
}

impl Default for CachePolicy {
    fn default() -> CachePolicy {
        CachePreset::default().policy()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_caches_nothing_and_fast_gathers_writes() {
        let e = CachePreset::Exact.policy();
        assert_eq!((e.entry_ttl, e.attr_ttl), (Duration::ZERO, Duration::ZERO));
        assert_eq!(e.negative_ttl, Duration::ZERO);
        assert_eq!(e.readdirplus, Readdirplus::Off);
        assert!(!e.writeback && !CachePreset::Normal.policy().writeback);
        assert!(CachePreset::Fast.policy().writeback);
        assert_eq!(CachePolicy::default().preset, CachePreset::Normal);
    }
}
