//! `MNT/.raif`: the volume's health (branch states, failure times and reasons, counts of
//! degraded reads and writes, of blocks that failed their checksum and were repaired). Reading
//! it checks every branch first, so a branch moved or replaced a moment ago shows as failed.
//! Writing a command to it:
//!
//! * `check`: check every branch now;
//! * `fail N`: take branch N out of service (as a failure: it is rebuilt, not trusted);
//!   refused with `EBUSY` while another branch is out of service;
//! * `rebuild N NEWDIR`: rebuild failed (or stale) branch N onto the directory NEWDIR while
//!   the volume serves ([`crate::online`]); progress shows in the `rebuild` line.

use std::fmt::Write as _;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use fsprof_fuse::control::ControlFile;
use profile_store::{Extension, Section};

use crate::branch::BranchSet;
use crate::intent::{Journal, Replayed};
use crate::layout::Level;
use crate::online::Online;
use crate::policy::Settings;

/// The `.raif` control file.
pub struct Status {
    bs: Arc<BranchSet>,
    defaults: Settings,
    parity_branch: Option<usize>,
    /// The mount's write-intent log, and what its replay at mount did.
    intent: Option<(Arc<Journal>, Replayed)>,
    /// Rebuilds while mounted (set once the file system is built).
    online: Arc<OnceLock<Arc<Online>>>,
}

/// Default name of the file at the mount root.
pub const NAME: &str = ".raif";

impl Status {
    /// Status of `bs`, whose new files get `defaults` where no policy rule matches (and RAIF4
    /// files their parity on `parity_branch`, by default the last).
    pub fn new(bs: Arc<BranchSet>, defaults: Settings, parity_branch: Option<usize>) -> Status {
        Status {
            bs,
            defaults,
            parity_branch,
            intent: None,
            online: Arc::default(),
        }
    }

    /// Takes `rebuild` commands through `online` once it is set.
    pub fn with_online(mut self, online: Arc<OnceLock<Arc<Online>>>) -> Status {
        self.online = online;
        self
    }

    /// Also shows the write-intent log's counters and what its replay at mount did.
    pub fn with_intent(mut self, journal: Arc<Journal>, replayed: Replayed) -> Status {
        self.intent = Some((journal, replayed));
        self
    }

    /// The `default ...` line: the level new files get where no policy rule matches, with what
    /// applies to it (stripe unit for striped levels, the parity branch for RAIF4, copies for
    /// RAIF1).
    fn default_line(&self) -> String {
        let n = self.bs.len();
        let level = self.defaults.level.unwrap_or(Level::Raif1);
        let stripe = self.defaults.stripe.unwrap_or(64 << 10);
        match level {
            Level::Raif1 => format!(
                "default level=1 copies={}",
                self.defaults.copies.unwrap_or(n).min(n)
            ),
            Level::Raif4 => format!(
                "default level=4 stripe={stripe} parity={}",
                self.parity_branch.unwrap_or(n - 1)
            ),
            Level::Raif0 | Level::Raif5 => format!("default level={} stripe={stripe}", level.num()),
        }
    }

    /// The text shown.
    pub fn text(&self) -> String {
        let bs = &self.bs;
        let mut s = String::new();
        let _ = writeln!(s, "volume {:032x}", bs.volume());
        let _ = writeln!(s, "{}", self.default_line());
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
        let _ = writeln!(
            s,
            "checksum_errors {} repaired {}",
            bs.checksum_errors.load(Ordering::Relaxed),
            bs.checksum_repairs.load(Ordering::Relaxed)
        );
        let _ = writeln!(s, "unclean_start {}", bs.unclean);
        if let Some((j, r)) = &self.intent {
            let _ = writeln!(
                s,
                "intent_log records {} syncs {}",
                j.records.load(Ordering::Relaxed),
                j.syncs.load(Ordering::Relaxed)
            );
            let _ = writeln!(
                s,
                "intent_replay files {} regions {} parity_rows {} gone {} kept {}",
                r.files, r.regions, r.parity, r.gone, r.deferred
            );
        }
        if let Some(line) = self.online.get().and_then(|o| o.status_line()) {
            let _ = writeln!(s, "{line}");
        }
        let _ = writeln!(
            s,
            "profile fuse: FUSE requests; branch0..branch{}: system calls on each branch, \
             counted under the FUSE operation that made them",
            bs.len() - 1
        );
        s
    }
}

/// `EINVAL`: a command `.raif` does not know.
fn einval() -> io::Error {
    io::Error::from_raw_os_error(libc::EINVAL)
}

impl ControlFile for Status {
    fn contents(&self) -> Vec<u8> {
        self.bs.check_all();
        self.text().into_bytes()
    }

    fn command(&self, data: &[u8]) -> io::Result<()> {
        let text = std::str::from_utf8(data).map_err(|_| einval())?;
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            // The directory is the rest of the line (it may hold spaces).
            if let Some((n, dir)) = line
                .strip_prefix("rebuild ")
                .and_then(|r| r.trim_start().split_once(' '))
            {
                let b: usize = n.parse().map_err(|_| einval())?;
                let online = self.online.get().ok_or_else(einval)?;
                online.start(b, std::path::Path::new(dir.trim()))?;
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["check"] => self.bs.check_all(),
                ["fail", n] => {
                    let b: usize = n.parse().map_err(|_| einval())?;
                    if b >= self.bs.len() {
                        return Err(einval());
                    }
                    // With another branch out of service, a second would leave RAIF4/5 files
                    // unreadable (md will not fail a device of a degraded RAID5 either). Refused
                    // whatever the levels the volume holds: which it holds is not known here.
                    let others_out = crate::layout::all_mask(self.bs.len())
                        & !self.bs.online_mask()
                        & !(1u64 << b);
                    if others_out != 0 && self.bs.online_mask() & (1 << b) != 0 {
                        log::warn!(
                            "{NAME}: fail {b} refused: branch {} is out of service already",
                            others_out.trailing_zeros()
                        );
                        return Err(io::Error::from_raw_os_error(libc::EBUSY));
                    }
                    self.bs.fail(b, "failed by the administrator");
                }
                _ => {
                    log::warn!(
                        "{NAME}: unknown command '{line}' (check, fail N, rebuild N NEWDIR)"
                    );
                    return Err(einval());
                }
            }
        }
        Ok(())
    }
}

/// The volume's health in every live snapshot (the `--metrics` endpoint; `.fsprof` stays
/// version 1): the `raif_branches` section, with
/// `degraded_reads` and `degraded_writes` attributes and one line `branch=N state=STATE
/// path=PATH` per branch (the path escaped as [`Section::escape`] does). `--metrics` exports it
/// as `fsprof_raif_branch_state` and the degraded counters.
pub struct Health(pub Arc<BranchSet>);

/// The section [`Health`] writes.
pub const HEALTH_SECTION: &str = "raif_branches";

impl Extension for Health {
    fn sections(&self) -> Vec<Section> {
        let bs = &self.0;
        let mut s = Section::new(HEALTH_SECTION);
        s.attrs = vec![
            (
                "degraded_reads".into(),
                bs.degraded_reads.load(Ordering::Relaxed).to_string(),
            ),
            (
                "degraded_writes".into(),
                bs.degraded_writes.load(Ordering::Relaxed).to_string(),
            ),
            (
                "checksum_errors".into(),
                bs.checksum_errors.load(Ordering::Relaxed).to_string(),
            ),
            (
                "checksum_repairs".into(),
                bs.checksum_repairs.load(Ordering::Relaxed).to_string(),
            ),
        ];
        for b in bs.iter() {
            s.lines.push(format!(
                "branch={} state={} path={}",
                b.index,
                bs.state(b.index).name(),
                Section::escape(&b.path().to_string_lossy())
            ));
        }
        vec![s]
    }
}
