//! Injection: delays and errors put into chosen requests or lower calls on purpose, for chaos
//! testing and to check that the profiler finds a known delay again (the thesis's fidelity
//! check).
//!
//! A rule is a comma-separated list of `key=value` (`--inject`; a comma inside `{...}` or
//! `[...]` belongs to the glob, as in `path=/d/*.{a,b}`), or a `[[rule]]` table with the same
//! keys in a TOML file (`--inject-file`):
//!
//! ```text
//! target   op=read | lower=pread | branch=1 | branch=1:pwrite
//! how      every=N (the Nth, 2Nth... matching call) | prob=P (0 < P <= 1; a fixed pseudo-random
//!          sequence, so runs repeat)
//! what     delay=1ms (any duration with its unit, at most 60m) | errno=EIO (a name, or a
//!          number from 1 to 511: a FUSE reply carries no other)
//! where    path=/db/** (optional: a glob over the path in the mount, for the request's node)
//! ```
//!
//! An `op` rule acts in the records layer before the request reaches the file system (a delay
//! there is the daemon's own time: no inner call explains it). A `lower` or `branch` rule acts
//! inside the timed lower call (a delay there is that call's). Every injection is counted: the
//! profile says `injected=N` on its global line and lists the rules with their counts in the
//! `injections` section (one line per rule: the rule as written back, then `seen=N
//! injected=N`, and `cut=N` once delays were cut short), so a profile with injected faults is
//! never mistaken for a clean one.
//!
//! A delay waits on the mount's [`Waits`]: when the kernel interrupts its request (the caller
//! got a signal: `FUSE_INTERRUPT`), it ends at once and the request fails with `EINTR`, so a
//! killed caller is gone at once and the mount can be unmounted; when the connection ends,
//! every delay ends. Such a delay counts as `cut`.

use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use profile_store::{Extension, Section, duration};

use super::paths::Paths;
use super::waits::Waits;
use crate::filesystem::Request;
use crate::filesystem::trace::CallId;
use crate::protocol::errno::MAX_REPLY;
use crate::protocol::ops::{NAMES, Op, Sys};

/// What a rule targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Every request of a FUSE operation.
    Op(Op),
    /// A system call on the lower directory.
    Lower(Sys),
    /// The calls on a branch: any call (`None`) or one.
    Branch(u16, Option<Sys>),
}

/// How often a rule fires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Every {
    /// Every Nth matching call.
    Nth(u64),
    /// With this probability.
    Prob(f64),
}

/// What an injection does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Sleep this long, then go on.
    Delay(Duration),
    /// Fail with this errno without running the call.
    Errno(i32),
}

/// One injection rule (see the module documentation).
#[derive(Debug)]
pub struct Rule {
    /// What it targets.
    pub target: Target,
    /// How often.
    pub every: Every,
    /// What it does.
    pub action: Action,
    path: Option<(String, crate::toolkit::glob::Matcher)>,
    seen: AtomicU64,
    injected: AtomicU64,
    /// Delays cut short (an interrupt, the connection's end).
    cut: AtomicU64,
}

/// The longest `delay=`: an hour. A longer one is a mistake, and holds a serving thread (and
/// any caller that cannot be interrupted) all that time.
pub const MAX_DELAY: Duration = Duration::from_secs(3600);

fn op_by_name(name: &str) -> Option<Op> {
    let want = format!("OP_{}", name.to_ascii_uppercase());
    let i = NAMES.iter().position(|n| *n == want)?;
    Op::ALL.get(i).copied()
}

/// The fields of one rule as given, before they are checked (from `--inject` or a TOML
/// table): what a configuration keeps, so that a rule is never turned back into text to be
/// read again.
#[derive(Debug, Default, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    op: Option<String>,
    lower: Option<String>,
    branch: Option<toml::Value>,
    every: Option<u64>,
    prob: Option<f64>,
    delay: Option<String>,
    errno: Option<toml::Value>,
    path: Option<String>,
}

/// The `key=value` parts of an `--inject` rule: split at commas, except those inside braces
/// or brackets (a glob's alternatives and classes).
fn parts(s: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0usize;
    let mut start = 0;
    let mut cuts = Vec::new();
    for (i, b) in s.bytes().enumerate() {
        match b {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                cuts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    cuts.push(&s[start..]);
    cuts.into_iter()
}

impl RawRule {
    /// Reads one `--inject` rule (`lower=pread,every=1000,delay=1ms`), unchecked.
    pub fn parse(s: &str) -> Result<RawRule, String> {
        let mut raw = RawRule::default();
        for part in parts(s) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("'{part}': expected key=value"))?;
            let dup = |k: &str| format!("'{k}' given twice");
            match k {
                "op" => raw.op.replace(v.into()).map_or(Ok(()), |_| Err(dup(k)))?,
                "lower" => raw
                    .lower
                    .replace(v.into())
                    .map_or(Ok(()), |_| Err(dup(k)))?,
                "branch" => raw
                    .branch
                    .replace(toml::Value::String(v.into()))
                    .map_or(Ok(()), |_| Err(dup(k)))?,
                "every" => {
                    let n = v
                        .parse()
                        .map_err(|_| format!("every={v}: not a whole number"))?;
                    raw.every.replace(n).map_or(Ok(()), |_| Err(dup(k)))?
                }
                "prob" => {
                    let p = v
                        .parse()
                        .map_err(|_| format!("prob={v}: not a number between 0 and 1"))?;
                    raw.prob.replace(p).map_or(Ok(()), |_| Err(dup(k)))?
                }
                "delay" => raw
                    .delay
                    .replace(v.into())
                    .map_or(Ok(()), |_| Err(dup(k)))?,
                "errno" => raw
                    .errno
                    .replace(toml::Value::String(v.into()))
                    .map_or(Ok(()), |_| Err(dup(k)))?,
                "path" => raw.path.replace(v.into()).map_or(Ok(()), |_| Err(dup(k)))?,
                _ => {
                    return Err(format!(
                        "unknown key '{k}' (op, lower, branch, every, prob, delay, errno, path)"
                    ));
                }
            }
        }
        Ok(raw)
    }

    /// Reads a TOML file of `[[rule]]` tables with the keys of `--inject`, unchecked.
    pub fn parse_toml(text: &str) -> Result<Vec<RawRule>, String> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            #[serde(default)]
            rule: Vec<RawRule>,
        }
        let f: File =
            toml::from_str(text).map_err(|e| crate::toolkit::config_file::toml_error(text, &e))?;
        Ok(f.rule)
    }
}

impl Rule {
    /// Parses one `--inject` rule (`lower=pread,every=1000,delay=1ms`).
    pub fn parse(s: &str) -> Result<Rule, String> {
        Rule::from_raw(RawRule::parse(s)?)
    }

    /// Parses a TOML file of `[[rule]]` tables with the keys of `--inject`.
    pub fn parse_toml(text: &str) -> Result<Vec<Rule>, String> {
        RawRule::parse_toml(text)?
            .into_iter()
            .enumerate()
            .map(|(i, r)| Rule::from_raw(r).map_err(|e| format!("rule {}: {e}", i + 1)))
            .collect()
    }

    /// Checks a rule as given.
    pub fn from_raw(raw: RawRule) -> Result<Rule, String> {
        let branch = match raw.branch {
            None => None,
            Some(toml::Value::Integer(b)) => Some(b.to_string()),
            Some(toml::Value::String(s)) => Some(s),
            Some(v) => return Err(format!("branch={v}: expected N or N:call")),
        };
        let target = match (raw.op, raw.lower, branch) {
            (Some(o), None, None) => Target::Op(
                op_by_name(&o)
                    .ok_or_else(|| format!("op={o}: not a FUSE operation (read, open, ...)"))?,
            ),
            (None, Some(l), None) => Target::Lower(Sys::from_name(&l).ok_or_else(|| {
                format!("lower={l}: not a lower system call (pread, openat, ...)")
            })?),
            (None, None, Some(b)) => {
                let (n, call) = match b.split_once(':') {
                    Some((n, c)) => (
                        n,
                        Some(Sys::from_name(c).ok_or_else(|| {
                            format!("branch={b}: '{c}' is not a system call (pread, pwrite, ...)")
                        })?),
                    ),
                    None => (b.as_str(), None),
                };
                let n: u16 = n
                    .parse()
                    .ok()
                    .filter(|n| *n <= crate::filesystem::trace::MAX_BRANCHES)
                    .ok_or_else(|| format!("branch={b}: not a branch number"))?;
                Target::Branch(n, call)
            }
            (None, None, None) => return Err("no target: give op=, lower= or branch=".into()),
            _ => return Err("more than one target: give one of op=, lower=, branch=".into()),
        };
        let every = match (raw.every, raw.prob) {
            (Some(0), _) => return Err("every=0: give 1 or more".into()),
            (Some(n), None) => Every::Nth(n),
            (None, Some(p)) if p > 0.0 && p <= 1.0 => Every::Prob(p),
            (None, Some(p)) => return Err(format!("prob={p}: give a number in (0, 1]")),
            (None, None) => return Err("no frequency: give every=N or prob=P".into()),
            (Some(_), Some(_)) => return Err("give one of every= and prob=".into()),
        };
        let action = match (raw.delay, raw.errno) {
            (Some(d), None) => {
                let t = duration::parse_time(&d).map_err(|e| format!("delay={d}: {e}"))?;
                if t > MAX_DELAY {
                    return Err(format!("delay={d}: at most 60m"));
                }
                Action::Delay(t)
            }
            (None, Some(e)) => {
                let e = match e {
                    toml::Value::Integer(n) => n.to_string(),
                    toml::Value::String(s) => s,
                    v => return Err(format!("errno={v}: a name (EIO) or a number")),
                };
                Action::Errno(errno_of(&e)?)
            }
            (None, None) => return Err("no action: give delay=TIME or errno=NAME".into()),
            (Some(_), Some(_)) => return Err("give one of delay= and errno=".into()),
        };
        let path = match raw.path {
            None => None,
            Some(p) => {
                if !p.starts_with('/') {
                    return Err(format!(
                        "path={p}: give a path from the mount root (/dir/**)"
                    ));
                }
                let m = crate::toolkit::glob::compile(&p).map_err(|e| format!("path={p}: {e}"))?;
                Some((p, m))
            }
        };
        Ok(Rule {
            target,
            every,
            action,
            path,
            seen: AtomicU64::new(0),
            injected: AtomicU64::new(0),
            cut: AtomicU64::new(0),
        })
    }

    /// The rule written back in `--inject` form.
    pub fn text(&self) -> String {
        let mut s = match self.target {
            Target::Op(o) => format!("op={}", o.name()[3..].to_ascii_lowercase()),
            Target::Lower(c) => format!("lower={}", c.name()),
            Target::Branch(b, None) => format!("branch={b}"),
            Target::Branch(b, Some(c)) => format!("branch={b}:{}", c.name()),
        };
        match self.every {
            Every::Nth(n) => write!(s, ",every={n}"),
            Every::Prob(p) => write!(s, ",prob={p}"),
        }
        .expect("writing to a String");
        match self.action {
            Action::Delay(d) => write!(s, ",delay={}", fmt_duration(d)),
            Action::Errno(e) => write!(s, ",errno={}", profile_store::errno::label(e)),
        }
        .expect("writing to a String");
        if let Some((p, _)) = &self.path {
            s.push_str(",path=");
            for b in p.bytes() {
                if (0x21..=0x7e).contains(&b) && b != b'%' {
                    s.push(b as char);
                } else {
                    let _ = write!(s, "%{b:02X}");
                }
            }
        }
        s
    }

    /// Whether the rule fires for this matching call (counts it).
    #[inline]
    fn fires(&self) -> bool {
        let n = self.seen.fetch_add(1, Ordering::Relaxed) + 1;
        let fire = match self.every {
            Every::Nth(k) => n % k == 0,
            Every::Prob(p) => {
                // splitmix64 of the call number: a fixed sequence, so runs repeat.
                let mut z = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                (z >> 11) as f64 / (1u64 << 53) as f64 <= p
            }
        };
        if fire {
            self.injected.fetch_add(1, Ordering::Relaxed);
        }
        fire
    }
}

/// The errno of `errno=E`: a name, or a number a FUSE reply can carry (1 to
/// [`MAX_REPLY`]; the kernel refuses any other, and its caller would wait for good).
fn errno_of(e: &str) -> Result<i32, String> {
    if let Some(code) = profile_store::errno::by_name(e) {
        return Ok(code);
    }
    match e.parse::<i64>() {
        Ok(n) if (1..=i64::from(MAX_REPLY)).contains(&n) => Ok(n as i32),
        Ok(_) => Err(format!(
            "errno={e}: give 1 to {MAX_REPLY} (a FUSE reply carries no other errno)"
        )),
        Err(_) => Err(format!(
            "errno={e}: not an errno name (EIO, ENOSPC...) or number"
        )),
    }
}

fn fmt_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0s".into()
    } else if ns % 1_000_000_000 == 0 {
        format!("{}s", ns / 1_000_000_000)
    } else if ns % 1_000_000 == 0 {
        format!("{}ms", ns / 1_000_000)
    } else if ns % 1_000 == 0 {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// The rules of one mount, with their counts; an [`Extension`] of the profile.
pub struct Injector {
    rules: Vec<Rule>,
    ops: bool,
    calls: bool,
    paths: Option<Arc<dyn Paths>>,
    waits: Waits,
}

impl std::fmt::Debug for Injector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Injector")
            .field("rules", &self.rules)
            .finish()
    }
}

impl Injector {
    /// Injects by `rules`; `paths` names nodes for rules with `path=` (without it they never
    /// match).
    pub fn new(rules: Vec<Rule>, paths: Option<Arc<dyn Paths>>) -> Injector {
        Injector {
            ops: rules.iter().any(|r| matches!(r.target, Target::Op(_))),
            calls: rules.iter().any(|r| !matches!(r.target, Target::Op(_))),
            rules,
            paths,
            waits: Waits::new(),
        }
    }

    /// Sets the path names for `path=` rules (known once the file system is built).
    pub fn set_paths(&mut self, paths: Arc<dyn Paths>) {
        self.paths = Some(paths);
    }

    /// The rules.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Whether any rule targets lower or branch calls.
    pub fn targets_calls(&self) -> bool {
        self.calls
    }

    /// The injection for request `req` (an `op` rule), if one fires.
    #[inline]
    pub fn for_request(&self, req: &Request) -> Option<Action> {
        self.request_rule(req).map(|r| r.action)
    }

    /// The injection for the inner call `call` of `req` (a `lower` or `branch` rule).
    #[inline]
    pub fn for_call(&self, req: &Request, call: CallId) -> Option<Action> {
        self.call_rule(req, call).map(|r| r.action)
    }

    /// Carries out the injection for request `req`, if one fires: waits out a delay (`None`
    /// after it, `EINTR` if it was cut short), or returns the errno to fail with.
    #[inline]
    pub fn on_request(&self, req: &Request) -> Option<i32> {
        self.request_rule(req).and_then(|r| self.act(req, r))
    }

    /// Carries out the injection for the inner call `call` of `req`, as [`Injector::on_request`].
    #[inline]
    pub fn on_call(&self, req: &Request, call: CallId) -> Option<i32> {
        self.call_rule(req, call).and_then(|r| self.act(req, r))
    }

    /// The kernel interrupted request `unique`: its delay ends now (or its next one at once).
    pub fn interrupt(&self, unique: u64) {
        self.waits.interrupt(unique);
    }

    /// The connection has ended: every delay ends now, and later ones at once.
    pub fn disconnect(&self) {
        self.waits.disconnect();
    }

    /// Delays under way.
    pub fn delaying(&self) -> usize {
        self.waits.waiting()
    }

    fn request_rule(&self, req: &Request) -> Option<&Rule> {
        if !self.ops {
            return None;
        }
        self.first(req, |t| t == Target::Op(req.op))
    }

    fn call_rule(&self, req: &Request, call: CallId) -> Option<&Rule> {
        if !self.calls {
            return None;
        }
        let (branch, sys) = (call.branch(), call.sys());
        self.first(req, |t| match (t, branch) {
            (Target::Lower(s), None) => s == sys,
            (Target::Branch(b, s), Some(cb)) => b == cb && s.is_none_or(|s| s == sys),
            _ => false,
        })
    }

    /// Carries out rule `r`'s action for `req`: the errno to fail with, if any.
    fn act(&self, req: &Request, r: &Rule) -> Option<i32> {
        match r.action {
            Action::Delay(d) => match self.waits.sleep_for(req.unique, d, req.pid) {
                Ok(()) => None,
                Err(_) => {
                    r.cut.fetch_add(1, Ordering::Relaxed);
                    Some(libc::EINTR)
                }
            },
            Action::Errno(e) => Some(e),
        }
    }

    /// The first rule for `targets` that matches `req` and fires. The node's path (a
    /// `readlink` of its descriptor) is looked up once, and only for a rule with `path=` whose
    /// target matches.
    fn first(&self, req: &Request, targets: impl Fn(Target) -> bool) -> Option<&Rule> {
        let mut path: Option<Option<Vec<u8>>> = None;
        for r in &self.rules {
            if !targets(r.target) {
                continue;
            }
            if let Some((_, m)) = &r.path {
                let p = path
                    .get_or_insert_with(|| self.paths.as_ref().and_then(|p| p.path(req.nodeid)));
                if !p
                    .as_deref()
                    .is_some_and(|p| m.is_match(std::ffi::OsStr::from_bytes(p)))
                {
                    continue;
                }
            }
            if r.fires() {
                return Some(r);
            }
        }
        None
    }

    /// Injections made since the last reset.
    pub fn injected(&self) -> u64 {
        self.rules
            .iter()
            .map(|r| r.injected.load(Ordering::Relaxed))
            .sum()
    }
}

impl Extension for Injector {
    fn sections(&self) -> Vec<Section> {
        let mut s = Section::new("injections");
        s.lines = self
            .rules
            .iter()
            .map(|r| {
                let mut line = format!(
                    "{} seen={} injected={}",
                    r.text(),
                    r.seen.load(Ordering::Relaxed),
                    r.injected.load(Ordering::Relaxed)
                );
                match r.cut.load(Ordering::Relaxed) {
                    0 => {}
                    n => write!(line, " cut={n}").expect("writing to a String"),
                }
                line
            })
            .collect();
        vec![s]
    }

    fn extra(&self) -> Vec<(String, String)> {
        vec![("injected".into(), self.injected().to_string())]
    }

    fn reset(&self) {
        for r in &self.rules {
            r.seen.store(0, Ordering::Relaxed);
            r.injected.store(0, Ordering::Relaxed);
            r.cut.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filesystem::Ino;

    #[test]
    fn rules_parse_and_write_back() {
        for s in [
            "lower=pread,every=1000,delay=1ms",
            "op=read,prob=0.5,errno=EIO",
            "branch=1,every=3,errno=ENOSPC",
            "branch=2:pwrite,every=1,delay=250us,path=/db/**",
        ] {
            assert_eq!(Rule::parse(s).unwrap().text(), s);
        }
        assert_eq!(
            Rule::parse("op=open,every=2,errno=5").unwrap().text(),
            "op=open,every=2,errno=EIO"
        );
        assert_eq!(
            Rule::parse("op=open,every=2,errno=511").unwrap().action,
            Action::Errno(511)
        );
    }

    #[test]
    fn bad_rules_say_why() {
        for (s, why) in [
            ("lower=pread,every=10", "no action"),
            ("lower=pread,delay=1ms", "no frequency"),
            ("lower=nope,every=1,delay=1ms", "not a lower system call"),
            (
                "op=read,lower=pread,every=1,delay=1ms",
                "more than one target",
            ),
            ("op=read,every=1,delay=1", "unit"),
            ("op=read,every=1,delay=61m", "at most 60m"),
            ("op=read,every=1,delay=3601s", "at most 60m"),
            ("op=read,every=0,delay=1ms", "every=0"),
            ("op=read,prob=2,delay=1ms", "prob=2"),
            ("op=read,every=1,errno=EWHAT", "errno=EWHAT"),
            ("op=read,every=1,errno=0", "give 1 to 511"),
            ("op=read,every=1,errno=512", "give 1 to 511"),
            ("op=read,every=1,errno=4095", "give 1 to 511"),
            ("op=read,every=1,errno=-5", "give 1 to 511"),
            ("op=read,every=1,delay=1ms,path=db", "from the mount root"),
            ("op=read,every", "key=value"),
            ("colour=red", "unknown key"),
        ] {
            let e = Rule::parse(s).unwrap_err();
            assert!(e.contains(why), "{s}: {e}");
        }
    }

    #[test]
    fn toml_rules_take_the_same_keys() {
        let rules = Rule::parse_toml(
            "[[rule]]\nlower = \"pread\"\nevery = 10\ndelay = \"1ms\"\n\n[[rule]]\nbranch = 1\nprob = 0.25\nerrno = \"EIO\"\n",
        )
        .unwrap();
        assert_eq!(rules[0].text(), "lower=pread,every=10,delay=1ms");
        assert_eq!(rules[1].text(), "branch=1,prob=0.25,errno=EIO");
        assert!(
            Rule::parse_toml("[[rule]]\nlower = \"pread\"\n")
                .unwrap_err()
                .contains("rule 1")
        );
        // A TOML integer is checked as the command line's number is.
        let e = Rule::parse_toml("[[rule]]\nop = \"read\"\nevery = 1\nerrno = 4095\n").unwrap_err();
        assert!(e.contains("give 1 to 511"), "{e}");
    }

    #[test]
    fn a_brace_glob_is_one_rule_from_the_command_line_and_from_toml() {
        struct Named(std::sync::Mutex<String>);
        impl Paths for Named {
            fn path(&self, _: Ino) -> Option<Vec<u8>> {
                Some(self.0.lock().unwrap().clone().into_bytes())
            }
        }
        let line = "op=read,every=1,errno=EIO,path=/d/*.{a,b}";
        let toml = "[[rule]]\nop = \"read\"\nevery = 1\nerrno = \"EIO\"\npath = \"/d/*.{a,b}\"\n";
        let mut from_toml = Rule::parse_toml(toml).unwrap();
        for rule in [Rule::parse(line).unwrap(), from_toml.remove(0)] {
            assert_eq!(rule.text(), line);
            let paths = Arc::new(Named(Default::default()));
            let inj = Injector::new(vec![rule], Some(paths.clone() as Arc<dyn Paths>));
            for (p, hit) in [("/d/x.a", true), ("/d/x.b", true), ("/d/x.c", false)] {
                *paths.0.lock().unwrap() = p.into();
                let got = inj.for_request(&Request::internal(Op::Read, Ino(5)));
                assert_eq!(got.is_some(), hit, "{p}");
            }
        }
        // Commas in classes stay too; outside braces and brackets they still split.
        assert_eq!(
            RawRule::parse("op=read,every=1,delay=1ms,path=/[a,b]/**")
                .unwrap()
                .path
                .as_deref(),
            Some("/[a,b]/**")
        );
        assert!(
            Rule::parse("op=read,every=1,delay=1ms,path=/a,b")
                .unwrap_err()
                .contains("'b': expected key=value")
        );
        // A TOML path is kept as written: a space and a comma outside braces included.
        let raw = RawRule::parse_toml(
            "[[rule]]\nop = \"read\"\nevery = 1\ndelay = \"1ms\"\npath = \"/my dir/a,b\"\n",
        )
        .unwrap();
        assert_eq!(raw[0].path.as_deref(), Some("/my dir/a,b"));
        assert!(Rule::from_raw(raw[0].clone()).is_ok());
    }

    #[test]
    fn every_nth_matching_call_is_injected_and_counted() {
        let inj = Injector::new(
            vec![Rule::parse("lower=pread,every=10,delay=0s").unwrap()],
            None,
        );
        let req = Request::internal(Op::Read, Ino(5));
        let pread = CallId::new(None, Sys::Pread);
        let fired = (0..100)
            .filter(|_| inj.for_call(&req, pread).is_some())
            .count();
        assert_eq!(fired, 10);
        assert_eq!(inj.for_call(&req, CallId::new(None, Sys::Pwrite)), None);
        assert_eq!(inj.for_call(&req, CallId::new(Some(0), Sys::Pread)), None);
        assert_eq!(inj.for_request(&req), None);
        assert_eq!(inj.injected(), 10);
        assert_eq!(inj.extra(), [("injected".to_string(), "10".to_string())]);
        assert_eq!(
            inj.sections()[0].lines,
            ["lower=pread,every=10,delay=0s seen=100 injected=10"]
        );
        inj.reset();
        assert_eq!(inj.injected(), 0);
    }

    #[test]
    fn the_path_is_looked_up_once_for_all_path_rules() {
        struct Counting(std::sync::atomic::AtomicU64);
        impl Paths for Counting {
            fn path(&self, _: Ino) -> Option<Vec<u8>> {
                self.0.fetch_add(1, Ordering::Relaxed);
                Some(b"/db/t".to_vec())
            }
        }
        let paths = Arc::new(Counting(Default::default()));
        let rules = ["/x/**", "/y/**", "/db/**"]
            .iter()
            .map(|g| Rule::parse(&format!("op=read,every=1,errno=EIO,path={g}")).unwrap())
            .collect();
        let inj = Injector::new(rules, Some(paths.clone() as Arc<dyn Paths>));
        let req = Request::internal(Op::Read, Ino(5));
        assert_eq!(inj.for_request(&req), Some(Action::Errno(libc::EIO)));
        assert_eq!(paths.0.load(Ordering::Relaxed), 1);
        // No rule for the operation: no lookup at all.
        assert_eq!(inj.for_request(&Request::internal(Op::Open, Ino(5))), None);
        assert_eq!(paths.0.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_probability_fires_about_that_often() {
        let inj = Injector::new(
            vec![Rule::parse("op=read,prob=0.1,errno=EIO").unwrap()],
            None,
        );
        let req = Request::internal(Op::Read, Ino(5));
        let fired = (0..10_000)
            .filter(|_| inj.for_request(&req).is_some())
            .count();
        assert!((800..1200).contains(&fired), "{fired}");
    }

    #[test]
    fn a_deep_glob_is_refused_in_one_line() {
        let deep = format!("/{}b{}", "{a,".repeat(150), "}".repeat(150));
        let e = Rule::parse(&format!("op=read,every=1,errno=EIO,path={deep}")).unwrap_err();
        assert!(
            e.ends_with("braces nested 150 deep: at most 32 levels are taken"),
            "{e}"
        );
        let e = Rule::parse(&format!(
            "op=read,every=1,errno=EIO,path=/{}",
            "a".repeat(5000)
        ));
        assert!(e.unwrap_err().contains("5001 bytes"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Any rule text gives a rule or a one-line error, never a panic.
        #[test]
        fn any_rule_parses_or_is_refused(
            s in "((op|lower|branch|every|prob|delay|errno|path|x)=[{},*?\\[\\]!a-z0-9./:-]{0,40},?){0,8}",
        ) {
            match Rule::parse(&s) {
                Ok(r) => {
                    let _ = r.text();
                }
                Err(e) => proptest::prop_assert!(!e.contains('\n'), "{}", e),
            }
        }
    }
}
