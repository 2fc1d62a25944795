//! What `raif status` shows of a volume: its id, settings, members (state, directory,
//! generation, why out of service), any rebuild under way and its progress, the counts of
//! degraded and repaired reads, and the last errors. It is read from a mount's `.raif`
//! ([`Report::parse`], the lines [`crate::status`] writes) or from the branches of a volume
//! that is not mounted ([`Report::offline`]), and printed for a person ([`Report::render`]) or
//! as JSON (its fields, serialized).

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::branch::BranchSet;
use crate::marker::Stored;
use crate::policy::short_digest;

/// A volume's status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The volume id (hex).
    pub volume: String,
    /// Where it is mounted (`None`: read from its branches, not mounted).
    pub mounted_at: Option<String>,
    /// The volume's settings for new files.
    pub settings: Option<Settings>,
    /// The failure epoch.
    pub epoch: u64,
    /// The mount count.
    pub mount: u64,
    /// Members online, of all.
    pub online: usize,
    /// Every member, in index order.
    pub members: Vec<Member>,
    /// The rebuild of this mount, if one ran.
    pub rebuild: Option<Rebuild>,
    /// Reads served by reconstruction, writes that missed a branch.
    pub degraded_reads: u64,
    /// Writes that could not reach every branch holding a part.
    pub degraded_writes: u64,
    /// Blocks that failed their checksum, and those rewritten from redundancy.
    pub checksum_errors: u64,
    /// Of those, the blocks rewritten.
    pub checksum_repairs: u64,
    /// The last mount did not end cleanly.
    pub unclean_start: bool,
    /// The last errors, oldest first.
    pub errors: Vec<Note>,
    /// The last command refused through `.raif`, and why.
    pub refused: Option<String>,
}

/// The settings new files get where no policy rule matches.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Level (0, 1, 4 or 5).
    pub level: u32,
    /// Stripe unit (bytes).
    pub stripe: u32,
    /// RAIF1 copies (`None`: one per branch).
    pub copies: Option<usize>,
    /// RAIF4's parity branch (`None`: the last).
    pub parity: Option<usize>,
    /// SHA-256 of the policy file (`None`: no policy).
    pub policy: Option<String>,
}

/// One member of the volume.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Member {
    /// Its index.
    pub index: usize,
    /// `online`, `failed`, `stale` or `rebuilding`.
    pub state: String,
    /// Its directory.
    pub path: String,
    /// Its generation ([`crate::marker`]).
    pub generation: u64,
    /// Since when it is out of service (seconds since 1970).
    pub since_unix: Option<u64>,
    /// Why.
    pub reason: Option<String>,
}

/// A rebuild while mounted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Rebuild {
    /// The member rebuilt.
    pub branch: usize,
    /// The directory it is rebuilt onto.
    pub dir: String,
    /// `running`, `done` or `failed`.
    pub state: String,
    /// The pass (they repeat until one finds nothing to do).
    pub pass: u64,
    /// Files done, of those of the pass.
    pub files: (u64, u64),
    /// Bytes done, of those of every pass so far.
    pub bytes: (u64, u64),
    /// Why it failed.
    pub reason: Option<String>,
    /// What it did, once done.
    pub summary: Option<String>,
}

/// An error, and when.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Note {
    /// Seconds since 1970.
    pub unix: u64,
    /// What happened.
    pub what: String,
}

/// Seconds since 1970 of `t`.
pub fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl From<&Stored> for Settings {
    fn from(s: &Stored) -> Settings {
        Settings {
            level: s.level,
            stripe: s.stripe,
            copies: s.copies,
            parity: s.parity,
            policy: s.policy.clone(),
        }
    }
}

impl Settings {
    /// The `settings ...` line of `.raif`.
    pub fn line(&self) -> String {
        let opt = |o: Option<usize>| o.map_or("-".to_string(), |v| v.to_string());
        format!(
            "settings level={} stripe={} copies={} parity={} policy={}",
            self.level,
            self.stripe,
            opt(self.copies),
            opt(self.parity),
            self.policy.as_deref().unwrap_or("-")
        )
    }

    fn parse(rest: &str) -> Option<Settings> {
        let mut s = Settings::default();
        for kv in rest.split(' ') {
            let (k, v) = kv.split_once('=')?;
            let opt = |v: &str| (v != "-").then(|| v.parse().ok()).flatten();
            match k {
                "level" => s.level = v.parse().ok()?,
                "stripe" => s.stripe = v.parse().ok()?,
                "copies" => s.copies = opt(v),
                "parity" => s.parity = opt(v),
                "policy" => s.policy = (v != "-").then(|| v.to_string()),
                _ => {}
            }
        }
        Some(s)
    }
}

/// The value of ` KEY=...` in `line`: up to the next space, or a quoted string.
pub fn field(line: &str, k: &str) -> Option<String> {
    let at = line.find(&format!(" {k}="))? + k.len() + 2;
    let rest = &line[at..];
    Some(match rest.strip_prefix('"') {
        Some(q) => q.split('"').next().unwrap_or("").to_string(),
        None => rest.split(' ').next().unwrap_or("").to_string(),
    })
}

impl Rebuild {
    /// The `rebuild branch N ...` line of `.raif` ([`crate::online::Online::status_line`]).
    pub fn parse(line: &str) -> Option<Rebuild> {
        let rest = line.strip_prefix("rebuild branch ")?;
        let branch = rest.split(' ').next()?.parse().ok()?;
        let pair = |k: &str| {
            let v = field(line, k)?;
            let (a, b) = v.split_once('/')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        };
        let dir = line.find(" dir=")? + 5;
        let end = line.find(" state=")?;
        Some(Rebuild {
            branch,
            dir: line.get(dir..end)?.to_string(),
            state: field(line, "state")?,
            pass: field(line, "pass")?.parse().ok()?,
            files: pair("files")?,
            bytes: pair("bytes")?,
            reason: field(line, "reason"),
            summary: field(line, "summary"),
        })
    }
}

impl Member {
    /// A `branch I STATE PATH [since_unix=T] [reason="..."]` line.
    fn parse(line: &str) -> Option<Member> {
        let rest = line.strip_prefix("branch ")?;
        let (index, rest) = rest.split_once(' ')?;
        let (state, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let end = [" since_unix=", " reason=\""]
            .iter()
            .filter_map(|k| rest.find(k))
            .min()
            .unwrap_or(rest.len());
        Some(Member {
            index: index.parse().ok()?,
            state: state.to_string(),
            path: rest[..end].to_string(),
            generation: 0,
            since_unix: field(line, "since_unix").and_then(|v| v.parse().ok()),
            reason: field(line, "reason"),
        })
    }
}

impl Report {
    /// The report of a mount at `mnt` from its `.raif` text.
    pub fn parse(text: &str, mnt: &str) -> Result<Report, String> {
        let mut r = Report {
            mounted_at: Some(mnt.to_string()),
            ..Report::default()
        };
        let num = |v: &str| v.split(' ').next().and_then(|x| x.parse::<u64>().ok());
        for l in text.lines() {
            let (k, v) = l.split_once(' ').unwrap_or((l, ""));
            match k {
                "volume" => r.volume = v.to_string(),
                "epoch" => r.epoch = num(v).unwrap_or(0),
                "mount" => r.mount = num(v).unwrap_or(0),
                "branches" => {
                    r.online = v
                        .split_once(" online ")
                        .and_then(|(_, x)| x.parse().ok())
                        .unwrap_or(0)
                }
                "branch" => r.members.extend(Member::parse(l)),
                "generations" => {
                    for (m, g) in r.members.iter_mut().zip(v.split(' ')) {
                        m.generation = g.parse().unwrap_or(0);
                    }
                }
                "settings" => r.settings = Settings::parse(v),
                "rebuild" => r.rebuild = Rebuild::parse(l),
                "degraded_reads" => r.degraded_reads = num(v).unwrap_or(0),
                "degraded_writes" => r.degraded_writes = num(v).unwrap_or(0),
                "checksum_errors" => {
                    r.checksum_errors = num(v).unwrap_or(0);
                    r.checksum_repairs = v
                        .split_once(" repaired ")
                        .and_then(|(_, x)| x.parse().ok())
                        .unwrap_or(0);
                }
                "unclean_start" => r.unclean_start = v == "true",
                "error" => {
                    let (t, what) = v.split_once(' ').unwrap_or((v, ""));
                    r.errors.push(Note {
                        unix: t.parse().unwrap_or(0),
                        what: what.trim_matches('"').to_string(),
                    });
                }
                "refused" => r.refused = Some(v.trim_matches('"').to_string()),
                _ => {}
            }
        }
        if r.volume.is_empty() || r.members.is_empty() {
            return Err("not a raif status file".into());
        }
        Ok(r)
    }

    /// The report of the volume `bs`, opened from its branches (not mounted).
    pub fn offline(bs: &BranchSet) -> Report {
        let members = (0..bs.len())
            .map(|i| {
                let mut m = Member::parse(&bs.describe(i)).unwrap_or_default();
                m.generation = bs.generation(i);
                m
            })
            .collect();
        Report {
            volume: format!("{:032x}", bs.volume()),
            mounted_at: None,
            settings: bs.stored().as_ref().map(Settings::from),
            epoch: bs.epoch(),
            mount: bs.mount(),
            online: bs.online_mask().count_ones() as usize,
            members,
            unclean_start: bs.unclean,
            errors: bs
                .errors()
                .into_iter()
                .map(|(t, what)| Note {
                    unix: unix(t),
                    what,
                })
                .collect(),
            ..Report::default()
        }
    }

    /// The report for a person, with times relative to `now`.
    pub fn render(&self, now: SystemTime) -> String {
        let mut s = format!(
            "volume {} {}: {} members, {} online; mount {}, epoch {}\n",
            self.volume,
            self.mounted_at
                .as_deref()
                .map_or("(not mounted)".to_string(), |m| format!("mounted at {m}")),
            self.members.len(),
            self.online,
            self.mount,
            self.epoch
        );
        s += &match &self.settings {
            Some(st) => format!(
                "new files: RAIF{}, stripe {} bytes{}{}; {}\n",
                st.level,
                st.stripe,
                match (st.level, st.copies) {
                    (1, Some(c)) => format!(", {c} copies"),
                    (1, None) => ", a copy on every branch".to_string(),
                    _ => String::new(),
                },
                match (st.level, st.parity) {
                    (4, Some(p)) => format!(", parity on branch {p}"),
                    _ => String::new(),
                },
                st.policy
                    .as_deref()
                    .map_or("no policy file".to_string(), |d| format!(
                        "policy file {}",
                        short_digest(d)
                    ))
            ),
            None => "new files: settings not kept by this volume yet\n".to_string(),
        };
        let now = unix(now);
        for m in &self.members {
            s += &format!(
                "member {} {:<10} generation {}  {}",
                m.index, m.state, m.generation, m.path
            );
            if let Some(t) = m.since_unix {
                s += &format!("  since {} s ago", now.saturating_sub(t));
            }
            if let Some(r) = &m.reason {
                s += &format!(": {r}");
            }
            s.push('\n');
        }
        if let Some(r) = &self.rebuild {
            s += &format!(
                "rebuild of member {} onto {}: {}, pass {}, {}/{} files, {}/{} bytes{}\n",
                r.branch,
                r.dir,
                r.state,
                r.pass,
                r.files.0,
                r.files.1,
                r.bytes.0,
                r.bytes.1,
                r.reason
                    .as_deref()
                    .or(r.summary.as_deref())
                    .map_or(String::new(), |x| format!(": {x}"))
            );
        }
        // The counters are the mount's (none from the branches alone).
        s += &if self.mounted_at.is_none() {
            String::new()
        } else {
            format!(
                "degraded reads {}, degraded writes {}; checksum errors {} ({} repaired){}\n",
                self.degraded_reads,
                self.degraded_writes,
                self.checksum_errors,
                self.checksum_repairs,
                if self.unclean_start {
                    "; the last mount did not end cleanly"
                } else {
                    ""
                }
            ) + if self.online < self.members.len() {
                PAGE_CACHE_NOTE
            } else {
                ""
            }
        };
        if let Some(r) = &self.refused {
            s += &format!("last command refused: {r}\n");
        }
        if self.errors.is_empty() {
            s += "no errors\n";
        } else {
            s += "last errors:\n";
            for e in &self.errors {
                s += &format!("  {} s ago: {}\n", now.saturating_sub(e.unix), e.what);
            }
        }
        s
    }
}

/// Said under the counters of a volume with a member out of service: a read the kernel's page
/// cache answers never reaches RAIF, so "degraded reads 0" after reading everything back may
/// only mean the data was cached (a volume whose files were just read showed 0, and 337 once
/// the caches were dropped).
pub const PAGE_CACHE_NOTE: &str = "  (reads the page cache answers never reach RAIF and are \
     not counted: data read before the failure is served from memory; \
     `echo 3 > /proc/sys/vm/drop_caches`, or reading with O_DIRECT, makes every read reach the \
     branches)\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_file_is_read_back() {
        let text = "volume 00ff\ndefault level=5 stripe=4096\nepoch 3\nmount 7\n\
                    branches 3 online 2\nbranch 0 online /a b\n\
                    branch 1 failed /c since_unix=100 reason=\"failed by the administrator\"\n\
                    branch 2 online /d\ngenerations 0 2 0\n\
                    settings level=5 stripe=4096 copies=- parity=- policy=abcdef\n\
                    error 100 \"branch 1 failed: failed by the administrator\"\n\
                    refused \"branch 1 is failed already\"\n\
                    degraded_reads 4\ndegraded_writes 5\nchecksum_errors 6 repaired 1\n\
                    unclean_start false\n\
                    rebuild branch 1 dir=/n 1 state=running pass=2 files=3/9 bytes=10/90 \
                    elapsed=1.0s\nprofile fuse: ...\n";
        let r = Report::parse(text, "/m").unwrap();
        assert_eq!(r.volume, "00ff");
        assert_eq!((r.epoch, r.mount, r.online), (3, 7, 2));
        assert_eq!(r.members.len(), 3);
        assert_eq!(r.members[0].path, "/a b");
        assert_eq!(r.members[1].state, "failed");
        assert_eq!(r.members[1].generation, 2);
        assert_eq!(r.members[1].since_unix, Some(100));
        assert_eq!(
            r.members[1].reason.as_deref(),
            Some("failed by the administrator")
        );
        let st = r.settings.as_ref().unwrap();
        assert_eq!((st.level, st.stripe, st.copies), (5, 4096, None));
        assert_eq!(st.policy.as_deref(), Some("abcdef"));
        assert_eq!(r.errors.len(), 1);
        assert_eq!(r.refused.as_deref(), Some("branch 1 is failed already"));
        assert_eq!((r.degraded_reads, r.degraded_writes), (4, 5));
        assert_eq!((r.checksum_errors, r.checksum_repairs), (6, 1));
        let rb = r.rebuild.as_ref().unwrap();
        assert_eq!((rb.branch, rb.dir.as_str(), rb.pass), (1, "/n 1", 2));
        assert_eq!((rb.files, rb.bytes), ((3, 9), (10, 90)));
        let shown = r.render(UNIX_EPOCH + std::time::Duration::from_secs(160));
        assert!(
            shown.contains("since 60 s ago: failed by the administrator"),
            "{shown}"
        );
        // A member is out of service: the counters come with the page cache's note.
        assert!(
            shown.contains("degraded reads 4, degraded writes 5;")
                && shown.contains("reads the page cache answers never reach RAIF"),
            "{shown}"
        );
        let healthy = Report {
            online: 3,
            ..r.clone()
        };
        assert!(!healthy.render(UNIX_EPOCH).contains("page cache"));
        assert!(Report::parse("hello\n", "/m").is_err());
    }
}
