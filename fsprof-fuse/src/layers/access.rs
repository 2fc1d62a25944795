//! Who may read what from a mount's control files and its `--metrics` endpoint
//! (`docs/guide.md#other-users-of-a-mount`).
//!
//! * **Root and the mounting user** (the daemon's effective uid), and a scrape that gives the
//!   `--metrics-token-file` token, read everything ([`View::Full`]).
//! * **Any other user** (an `--allow-other` mount), and a scrape without the token, reads the
//!   histograms of the mount as a whole ([`View::Plain`]): every layer that is not split by a
//!   key (`fuse`, `lower`, `kernel`, `branchN`...) with the profile's metadata, the inner-call
//!   breakdown, the injection rules and the errors. Withheld, and named in the profile's
//!   `withheld=` key: the per-caller layers (`fuse@pid:`, `fuse@uid:`, `fuse@comm:`,
//!   `fuse@other`), the device-wide block layers (`block@dev:`, `blkq@dev:`: every request of
//!   the device, from anyone) and the sections that name files or processes (`hot_files`,
//!   `slowest`); `.fsprof.slow` cannot be opened at all (mode 0600, and `EACCES`).
//! * **With `--share-records`** such a user reads the records too, filtered for them
//!   ([`View::Shared`]): a path only when they may search every directory above it, from the
//!   mount's root (checked as them: [`Caller::may_search`]); another user's pid, tgid, comm and
//!   uid only where `/proc` shows them to everyone ([`ProcRule`]: `hidepid` off, or the
//!   reader in its `gid=` group). A record whose path is hidden keeps its operation and
//!   latency with `path` and `ino` null (a hot file is left out); a hidden process leaves
//!   `pid`, `tgid`, `comm` and `uid` null. The block layers are shown (they name no one).
//!
//! The filters run on a snapshot when it is opened, never on a request's path.

use std::collections::HashMap;
use std::sync::Arc;

use profile_store::{Layer, Profile, Section, keyed};

use crate::records::Paths;

/// What a reader is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Everything.
    Full,
    /// The histograms of the mount as a whole (see the module documentation).
    Plain,
    /// The records too, filtered for the reader (`--share-records`).
    Shared,
}

/// The profile's key that lists what a reader was not shown.
pub const WITHHELD_KEY: &str = "withheld";

pub use crate::toolkit::caller::Caller;

/// How `/proc` shows other users' processes here (its `hidepid=` and `gid=` options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcRule {
    /// `hidepid` off: every process's pid, comm and owner are shown to everyone.
    All,
    /// Only a reader's own processes, unless it is in group `gid` (when set).
    Own {
        /// The group that sees every process (`gid=`).
        gid: Option<u32>,
    },
}

impl ProcRule {
    /// The rule of the `/proc` this process sees (`/proc/self/mountinfo`); `Own` when it
    /// cannot be read.
    pub fn current() -> ProcRule {
        std::fs::read_to_string("/proc/self/mountinfo")
            .ok()
            .and_then(|m| ProcRule::parse(&m))
            .unwrap_or(ProcRule::Own { gid: None })
    }

    /// The rule of the mount at `/proc` in the text of a `mountinfo` file.
    pub fn parse(mountinfo: &str) -> Option<ProcRule> {
        // The last mount at /proc is the one seen.
        let line = mountinfo
            .lines()
            .rfind(|l| l.split(' ').nth(4) == Some("/proc"))?;
        let (_, after) = line.split_once(" - ")?;
        let mut f = after.split(' ');
        if f.next()? != "proc" {
            return None;
        }
        let options = f.nth(1).unwrap_or("");
        let mut hide = false;
        let mut gid = None;
        for o in options.split(',') {
            match o.split_once('=') {
                Some(("hidepid", v)) => hide = !matches!(v, "0" | "off"),
                Some(("gid", v)) => gid = v.parse().ok(),
                _ => {}
            }
        }
        Some(if hide {
            ProcRule::Own { gid }
        } else {
            ProcRule::All
        })
    }

    /// Whether `who` (none: a reader with no identity, an anonymous scrape) sees the process
    /// of user `owner`.
    pub fn shows(&self, who: Option<&Caller>, owner: u32) -> bool {
        match (self, who) {
            (ProcRule::All, _) => true,
            (ProcRule::Own { .. }, None) => false,
            (ProcRule::Own { gid }, Some(c)) => {
                c.uid == owner || gid.is_some_and(|g| c.in_group(g))
            }
        }
    }
}

/// One reader's filter of the records ([`View::Shared`]).
pub struct Filter<'a> {
    /// The reader (none: an anonymous scrape, which sees no path and only what `/proc`
    /// shows everyone).
    pub who: Option<&'a Caller>,
    /// How `/proc` shows processes.
    pub procs: ProcRule,
    /// Answers whether the reader may search a directory.
    policy: &'a Policy,
    /// Answers already given, by directory.
    seen: HashMap<Vec<u8>, bool>,
}

impl<'a> Filter<'a> {
    /// A filter for `who` under `policy`.
    pub fn new(who: Option<&'a Caller>, procs: ProcRule, policy: &'a Policy) -> Filter<'a> {
        Filter {
            who,
            procs,
            policy,
            seen: HashMap::new(),
        }
    }

    /// Whether the reader may see the path `path` (bytes, from the mount's root): it may
    /// search every directory above it.
    pub fn shows_path(&mut self, path: &[u8]) -> bool {
        let Some(who) = self.who else {
            return false;
        };
        let dir = match path.iter().rposition(|&b| b == b'/') {
            Some(i) => &path[..i],
            None => return false,
        };
        let dir = dir.strip_prefix(b"/").unwrap_or(dir);
        if let Some(&v) = self.seen.get(dir) {
            return v;
        }
        let v = !dir.split(|&b| b == b'/').any(|c| c == b"..") && self.policy.may_search(who, dir);
        self.seen.insert(dir.to_vec(), v);
        v
    }

    /// Whether the reader may see a process of user `uid`.
    pub fn shows_process(&self, uid: u32) -> bool {
        self.procs.shows(self.who, uid)
    }
}

/// Whether layer `name` is withheld from a [`View::Plain`] reader: a per-key layer, a
/// device's among them (`block@dev:NAME`).
fn withheld_plain(name: &str) -> bool {
    keyed::is_keyed(name)
}

/// Whether layer `name` is a block device's (`block@dev:NAME`, `blkq@dev:NAME`).
fn is_device(name: &str) -> bool {
    name.starts_with("block@") || name.starts_with("blkq@")
}

/// Sections that name files or processes.
const RECORD_SECTIONS: [&str; 2] = [
    crate::records::hot::SECTION,
    crate::records::slowest::SECTION,
];

/// `p` as a reader with `view` sees it; `filter` is needed for [`View::Shared`].
pub fn profile(mut p: Profile, view: View, filter: Option<&mut Filter<'_>>) -> Profile {
    match (view, filter) {
        (View::Full, _) => p,
        (View::Shared, Some(f)) => {
            p.layers.retain(|l| layer_shown(l, f));
            for s in &mut p.sections {
                if s.name == crate::records::hot::SECTION {
                    s.lines = hot_files(&s.lines, f);
                } else if s.name == crate::records::slowest::SECTION {
                    s.lines = s
                        .lines
                        .iter()
                        .filter_map(|l| {
                            let l = record_line(l, f)?;
                            Some(crate::records::slowest::ascii(l))
                        })
                        .collect();
                }
            }
            p
        }
        _ => {
            let mut withheld = Vec::new();
            let before = p.layers.len();
            p.layers.retain(|l| !withheld_plain(&l.name));
            if p.layers.len() < before {
                withheld.push("layers");
            }
            let dropped: Vec<String> = p
                .sections
                .iter()
                .filter(|s| {
                    RECORD_SECTIONS.contains(&s.name.as_str())
                        || s.attr("layer").is_some_and(withheld_plain)
                })
                .map(|s| s.name.clone())
                .collect();
            if !dropped.is_empty() {
                withheld.push("records");
            }
            p.sections.retain(|s: &Section| {
                !(RECORD_SECTIONS.contains(&s.name.as_str())
                    || s.attr("layer").is_some_and(withheld_plain))
            });
            if !withheld.is_empty() {
                p.extra.push((WITHHELD_KEY.into(), withheld.join(",")));
            }
            p
        }
    }
}

/// Whether a [`View::Shared`] reader sees layer `l`: a per-uid layer of a user whose
/// processes it sees, a per-pid layer of such a process (as `/proc/PID` says now), a
/// per-comm layer only where `/proc` shows every process, every other layer.
fn layer_shown(l: &Layer, f: &Filter<'_>) -> bool {
    if is_device(&l.name) {
        return true;
    }
    match keyed::parse(&l.name) {
        Some(keyed::Keyed::Key {
            key: "uid", value, ..
        }) => std::str::from_utf8(&value)
            .ok()
            .and_then(|v| v.parse().ok())
            .is_some_and(|uid| f.shows_process(uid)),
        Some(keyed::Keyed::Key {
            key: "pid", value, ..
        }) => std::str::from_utf8(&value)
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .and_then(pid_owner)
            .is_some_and(|uid| f.shows_process(uid)),
        Some(keyed::Keyed::Key { .. }) => f.procs == ProcRule::All,
        _ => true,
    }
}

/// The owner of process `pid`, from `/proc`.
fn pid_owner(pid: u32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(format!("/proc/{pid}"))
        .ok()
        .map(|m| m.uid())
}

/// The slow log's `contents` (JSON lines) as a [`View::Shared`] reader sees them.
pub fn slow_log(contents: &[u8], f: &mut Filter<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(contents.len());
    for line in contents.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        if let Some(l) = record_line(line, f) {
            out.extend_from_slice(l.as_bytes());
            out.push(b'\n');
        }
    }
    out
}

/// A slow record (a JSON line of the slow log or of the `slowest` section) as a
/// [`View::Shared`] reader sees it: `path` and `ino` null unless it may see the path,
/// `pid`, `tgid`, `comm` and `uid` null unless it may see the process. `None` for a line that
/// is not a record.
pub fn record_line(line: &str, f: &mut Filter<'_>) -> Option<String> {
    use serde_json::Value;
    let mut v: Value = serde_json::from_str(line).ok()?;
    let o = v.as_object_mut()?;
    if let Some(path) = o.get("path").and_then(Value::as_str) {
        if !f.shows_path(&profile_store::name::unescape(path)) {
            o.insert("path".into(), Value::Null);
            o.insert("ino".into(), Value::Null);
        }
    }
    let uid = o
        .get("uid")
        .and_then(Value::as_u64)
        .and_then(|u| u32::try_from(u).ok());
    if !uid.is_some_and(|u| f.shows_process(u)) {
        for k in ["pid", "tgid", "comm", "uid"] {
            o.insert(k.into(), Value::Null);
        }
    }
    serde_json::to_string(&v).ok()
}

/// The lines of a `hot_files` section as a [`View::Shared`] reader sees them: only the files
/// whose path it may see (not those of an unknown path), ranked again.
fn hot_files(lines: &[String], f: &mut Filter<'_>) -> Vec<String> {
    let mut ranks: HashMap<String, u64> = HashMap::new();
    let mut out = Vec::new();
    for l in lines {
        let field = |k: &str| {
            l.split(' ')
                .find_map(|x| x.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
        };
        let (Some(by), Some(path)) = (field("by"), field("path")) else {
            continue;
        };
        if path == "?" || !f.shows_path(&profile_store::name::unescape(path)) {
            continue;
        }
        let rank = ranks.entry(by.to_string()).or_insert(0);
        *rank += 1;
        let rest: Vec<&str> = l.split(' ').filter(|x| !x.starts_with("rank=")).collect();
        let mut line = rest[0].to_string();
        line.push_str(&format!(" rank={rank}"));
        for x in &rest[1..] {
            line.push(' ');
            line.push_str(x);
        }
        out.push(line);
    }
    out
}

/// The rules of one mount, for the control files and the metrics endpoint.
#[derive(Clone)]
pub struct Policy {
    /// The mounting user (the daemon's effective uid).
    pub owner: u32,
    /// `--share-records`.
    pub share: bool,
    /// Names nodes, and answers whether a user may search a directory of the mount.
    pub paths: Option<Arc<dyn Paths>>,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("owner", &self.owner)
            .field("share", &self.share)
            .finish()
    }
}

impl Policy {
    /// Root and `owner` see everything, other users the histograms only.
    pub fn owner_only(owner: u32) -> Policy {
        Policy {
            owner,
            share: false,
            paths: None,
        }
    }

    /// What user `uid` is shown.
    pub fn view(&self, uid: u32) -> View {
        if uid == 0 || uid == self.owner {
            View::Full
        } else if self.share {
            View::Shared
        } else {
            View::Plain
        }
    }

    /// Whether `who` may search the directory `dir` of the mount (from its root, no leading
    /// `/`).
    pub fn may_search(&self, who: &Caller, dir: &[u8]) -> bool {
        self.paths.as_ref().is_some_and(|p| p.may_search(who, dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd as _;
    use std::os::unix::fs::PermissionsExt as _;

    fn nobody() -> Caller {
        Caller {
            uid: 65534,
            gid: 65534,
            groups: Vec::new(),
        }
    }

    #[test]
    fn hidepid_is_read_from_mountinfo() {
        let line = |opts: &str| format!("22 28 0:20 / /proc rw,nosuid - proc proc rw,{opts}\n");
        assert_eq!(ProcRule::parse(&line("relatime")), Some(ProcRule::All));
        assert_eq!(ProcRule::parse(&line("hidepid=0")), Some(ProcRule::All));
        assert_eq!(
            ProcRule::parse(&line("hidepid=invisible,gid=27")),
            Some(ProcRule::Own { gid: Some(27) })
        );
        assert_eq!(
            ProcRule::parse(&line("hidepid=2")),
            Some(ProcRule::Own { gid: None })
        );
        let own = ProcRule::Own { gid: Some(27) };
        let mut staff = nobody();
        assert!(own.shows(Some(&staff), 65534) && !own.shows(Some(&staff), 0));
        staff.groups.push(27);
        assert!(own.shows(Some(&staff), 0));
        assert!(!own.shows(None, 0) && ProcRule::All.shows(None, 0));
    }

    #[test]
    fn without_privileges_the_modes_decide_and_an_acl_leaves_only_the_owner() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        for (d, mode) in [("open", 0o755), ("shut", 0o700), ("open/inner", 0o711)] {
            std::fs::create_dir(p.join(d)).unwrap();
            std::fs::set_permissions(p.join(d), std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let root = std::fs::File::open(p).unwrap();
        let who = nobody();
        let me = crate::sys::geteuid();
        let owner = Caller {
            uid: me,
            gid: crate::sys::getegid(),
            groups: Vec::new(),
        };
        assert!(who.may_search(root.as_fd(), b"", false));
        assert!(who.may_search(root.as_fd(), b"open", false));
        assert!(who.may_search(root.as_fd(), b"open/inner", false));
        assert!(!who.may_search(root.as_fd(), b"shut", false));
        assert!(!who.may_search(root.as_fd(), b"shut/x", false));
        assert!(!who.may_search(root.as_fd(), b"missing", false));
        assert!(owner.may_search(root.as_fd(), b"shut", false));
        // An ACL: only the owner, whatever the mode says.
        let acl = std::process::Command::new("setfacl")
            .args(["-m", "u:65534:---"])
            .arg(p.join("open"))
            .status();
        if acl.is_ok_and(|s| s.success()) {
            assert!(!who.may_search(root.as_fd(), b"open", false));
            assert!(owner.may_search(root.as_fd(), b"open", false));
        }
        if me == 0 {
            // As the kernel sees it: the ACL denies uid 65534; the 0700 directory too.
            assert!(!who.may_search(root.as_fd(), b"open", true));
            assert!(!who.may_search(root.as_fd(), b"shut", true));
            std::fs::create_dir(p.join("plain")).unwrap();
            std::fs::set_permissions(p.join("plain"), std::fs::Permissions::from_mode(0o755))
                .unwrap();
            assert!(who.may_search(root.as_fd(), b"plain", true));
        }
    }

    struct Only(&'static [u8]);

    impl Paths for Only {
        fn path(&self, _: crate::filesystem::Ino) -> Option<Vec<u8>> {
            None
        }
        fn may_search(&self, _: &Caller, dir: &[u8]) -> bool {
            dir.is_empty() || dir == self.0
        }
    }

    #[test]
    fn records_are_filtered_for_the_reader() {
        let policy = Policy {
            owner: 0,
            share: true,
            paths: Some(Arc::new(Only(b"pub"))),
        };
        let who = nobody();
        let mut f = Filter::new(Some(&who), ProcRule::Own { gid: None }, &policy);
        let lines: Vec<String> = [
            "by=latency rank=1 ino=2 value=9 error=0 path=/private/secret",
            "by=latency rank=2 ino=3 value=8 error=0 path=/pub/f%20g",
            "by=calls rank=1 ino=4 value=7 error=0 path=/top",
            "by=calls rank=2 ino=5 value=6 error=0 path=?",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            hot_files(&lines, &mut f),
            [
                "by=latency rank=1 ino=3 value=8 error=0 path=/pub/f%20g",
                "by=calls rank=1 ino=4 value=7 error=0 path=/top"
            ]
        );
        let rec = r#"{"seq":1,"op":"OP_READ","ino":9,"path":"/private/s","pid":5,"tgid":5,"comm":"cat","uid":0}"#;
        let v: serde_json::Value =
            serde_json::from_str(&record_line(rec, &mut f).unwrap()).unwrap();
        assert!(v["path"].is_null() && v["ino"].is_null());
        assert!(v["pid"].is_null() && v["comm"].is_null() && v["uid"].is_null());
        assert_eq!(v["op"], "OP_READ");
        let mine = r#"{"seq":2,"ino":9,"path":"/pub/x","pid":5,"tgid":5,"comm":"cat","uid":65534}"#;
        let v: serde_json::Value =
            serde_json::from_str(&record_line(mine, &mut f).unwrap()).unwrap();
        assert_eq!(
            (v["path"].as_str(), v["pid"].as_u64()),
            (Some("/pub/x"), Some(5))
        );
        // An anonymous reader sees no path.
        let mut anon = Filter::new(None, ProcRule::All, &policy);
        assert!(!anon.shows_path(b"/top"));
    }

    #[test]
    fn a_plain_reader_gets_the_histograms_and_is_told_what_was_withheld() {
        let res = profile_store::Resolution::new(1).unwrap();
        let mut p = Profile::default();
        for n in [
            "fuse",
            "lower",
            "fuse@comm:cat",
            "fuse@other",
            "block@dev:vda",
        ] {
            p.layers.push(Layer::new(n, res));
        }
        p.sections.push(Section::new("hot_files"));
        p.sections.push(Section::new("inner_calls"));
        let plain = profile(p.clone(), View::Plain, None);
        let names: Vec<&str> = plain.layers.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["fuse", "lower"]);
        assert_eq!(plain.sections.len(), 1);
        assert_eq!(plain.extra(WITHHELD_KEY), Some("layers,records"));
        assert_eq!(profile(p.clone(), View::Full, None), p);
        let policy = Policy::owner_only(0);
        let mut f = Filter::new(None, ProcRule::Own { gid: None }, &policy);
        let shared = profile(p, View::Shared, Some(&mut f));
        let names: Vec<&str> = shared.layers.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["fuse", "lower", "fuse@other", "block@dev:vda"]);
    }
}
