//! `MNT/.raif`: the volume's health (branch states, failure times and reasons, counts of
//! degraded reads and writes). Reading it checks every branch first, so a branch moved or
//! replaced a moment ago shows as failed. Writing a command to it:
//!
//! * `check`: check every branch now;
//! * `fail N`: take branch N out of service (as a failure: it is rebuilt, not trusted).

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use fsprof_fuse::control::ControlFile;
use fuser::Errno;

use crate::branch::BranchSet;
use crate::policy::Settings;

/// The `.raif` control file.
pub struct Status {
    bs: Arc<BranchSet>,
    defaults: Settings,
}

/// Default name of the file at the mount root.
pub const NAME: &str = ".raif";

impl Status {
    /// Status of `bs`, whose new files get `defaults` where no policy rule matches.
    pub fn new(bs: Arc<BranchSet>, defaults: Settings) -> Status {
        Status { bs, defaults }
    }

    /// The text shown.
    pub fn text(&self) -> String {
        let bs = &self.bs;
        let mut s = String::new();
        let _ = writeln!(s, "volume {:032x}", bs.volume());
        let _ = writeln!(
            s,
            "default level={} stripe={} copies={}",
            self.defaults.level.map_or(1, |l| l.num()),
            self.defaults.stripe.unwrap_or(0),
            self.defaults.copies.unwrap_or(bs.len())
        );
        let _ = writeln!(s, "epoch {}", bs.epoch());
        let _ = writeln!(s, "mount {}", bs.mount());
        let online = (0..bs.len())
            .filter(|&b| bs.online_mask() & (1 << b) != 0)
            .count();
        let _ = writeln!(s, "branches {} online {online}", bs.len());
        for b in 0..bs.len() {
            let _ = writeln!(s, "{}", bs.describe(b));
        }
        let _ = writeln!(
            s,
            "degraded_reads {}",
            bs.degraded_reads.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            s,
            "degraded_writes {}",
            bs.degraded_writes.load(Ordering::Relaxed)
        );
        let _ = writeln!(s, "unclean_start {}", bs.unclean);
        s
    }
}

impl ControlFile for Status {
    fn contents(&self) -> Vec<u8> {
        self.bs.check_all();
        self.text().into_bytes()
    }

    fn command(&self, data: &[u8]) -> Result<(), Errno> {
        let text = std::str::from_utf8(data).map_err(|_| Errno::EINVAL)?;
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["check"] => self.bs.check_all(),
                ["fail", n] => {
                    let b: usize = n.parse().map_err(|_| Errno::EINVAL)?;
                    if b >= self.bs.len() {
                        return Err(Errno::EINVAL);
                    }
                    self.bs.fail(b, "failed by the administrator");
                }
                _ => {
                    log::warn!("{NAME}: unknown command '{line}' (check, fail N)");
                    return Err(Errno::EINVAL);
                }
            }
        }
        Ok(())
    }
}
