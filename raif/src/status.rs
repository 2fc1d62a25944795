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
//!
//! A refused command answers an errno, and says why in words in the `refused "..."` line and
//! the log (`raif fail` and `raif replace` print it).
//!
//! The first lines are stable (SPEC §10): `volume`, `default`, `epoch`, `mount`, `branches N
//! online M`, one `branch I STATE PATH` line per branch. Lines added since come after them:
//! `generations G0 G1 ...` (each member's generation, [`crate::marker`]), `settings ...` (what
//! the volume keeps for new files), `error UNIX "..."` (the last errors), `refused "..."`.

use parking_lot::Mutex;
use std::fmt::Write as _;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use fsprof_fuse::layers::control_files::ControlFile;
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
    /// The last command refused, and why.
    refused: Mutex<Option<String>>,
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
            refused: Mutex::new(None),
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
        let gens: Vec<String> = (0..bs.len())
            .map(|b| bs.generation(b).to_string())
            .collect();
        let _ = writeln!(s, "generations {}", gens.join(" "));
        if let Some(st) = bs.stored() {
            let _ = writeln!(s, "{}", crate::report::Settings::from(&st).line());
        }
        for (t, what) in bs.errors() {
            let _ = writeln!(
                s,
                "error {} \"{}\"",
                crate::report::unix(t),
                what.replace('"', "'")
            );
        }
        if let Some(r) = self.refused.lock().as_deref() {
            let _ = writeln!(s, "refused \"{}\"", r.replace('"', "'"));
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
            self.one(line).map_err(|(e, why)| {
                log::warn!("{NAME}: '{line}' refused: {why}");
                self.bs.note_error(&format!("'{line}' refused: {why}"));
                *self.refused.lock() = Some(format!("{line}: {why}"));
                e
            })?;
        }
        Ok(())
    }
}

impl Status {
    /// Runs one command line; a refusal is its errno and why.
    fn one(&self, line: &str) -> Result<(), (io::Error, String)> {
        let bad = |why: String| (einval(), why);
        let number = |n: &str| {
            n.parse::<usize>()
                .map_err(|_| bad(format!("'{n}' is not a branch number")))
        };
        // The directory is the rest of the line (it may hold spaces).
        if let Some((n, dir)) = line
            .strip_prefix("rebuild ")
            .and_then(|r| r.trim_start().split_once(' '))
        {
            let b = number(n)?;
            let online = self
                .online
                .get()
                .ok_or_else(|| bad("the mount is not ready".into()))?;
            return online
                .start(b, std::path::Path::new(dir.trim()))
                .map_err(|e| {
                    let why = online
                        .progress()
                        .and_then(|r| r.reason)
                        .filter(|_| e.raw_os_error() != Some(libc::EBUSY))
                        .unwrap_or_else(|| "a rebuild is under way".into());
                    (e, why)
                });
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["check"] => self.bs.check_all(),
            ["fail", n] => {
                let b = number(n)?;
                self.bs.fail_by_hand(b).map_err(|why| {
                    let errno = if b < self.bs.len() {
                        libc::EBUSY
                    } else {
                        libc::EINVAL
                    };
                    (io::Error::from_raw_os_error(errno), why)
                })?;
            }
            _ => {
                return Err(bad(
                    "unknown command (check, fail N, rebuild N NEWDIR)".to_string()
                ));
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
