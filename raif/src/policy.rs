//! Per-file storage policy: which level, stripe unit and number of copies a new file gets.
//!
//! A policy file is TOML: an optional `[default]` table and ordered `[[rule]]` tables, each
//! with a `glob` and any of `level`, `stripe` (bytes, or a string with a `K`, `M` or `G`
//! suffix) and `copies`:
//!
//! ```toml
//! [default]
//! level = 5
//!
//! [[rule]]
//! glob = "*.log"
//! level = 1
//!
//! [[rule]]
//! glob = "media/**"
//! level = 0
//! stripe = "256K"
//! ```
//!
//! For a new file the first rule whose glob matches decides; a setting the rule leaves out
//! comes from `[default]`, then from the command line (`--level`, `--stripe`, `--copies`). A
//! glob without `/` matches the file name; with `/` it matches the path from the mount root.
//! `*` matches any bytes but `/`, `?` one byte but `/`; `**` as a whole path component matches
//! any number of directories (`**/x`, `a/**/x`, `a/**`), and alone, anything; `[abc]`, `[a-z]`,
//! `[!x]` (or `[^x]`) match one byte (a negated class may match a `/` of a path); `{a,b}`
//! matches either; `\` makes the next character literal; a `[` without its `]` is literal.
//! `**` next to other characters (`a**b`) is a `*`. A glob that cannot be read (`{a,b`) is
//! refused with its line.
//!
//! Globs are compiled once, when the policy is read, into automata ([`globset`]) that match in
//! time linear in the name, whatever the pattern: a create is never slowed down by a glob
//! such as `*-*-*-*-*-*.log` (a backtracking matcher takes exponential time on a name full of
//! dashes).
//!
//! The policy applies to files created from then on: an existing file keeps the layout it was
//! created with (it is stored with the file).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use fsprof_fuse::toolkit::glob::Matcher;
use globset::GlobBuilder;
use serde::Deserialize;

use crate::layout::{Level, STRIPE_RANGE};

/// Settings a rule or the default may give.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settings {
    /// RAID level.
    pub level: Option<Level>,
    /// Stripe unit in bytes.
    pub stripe: Option<u32>,
    /// RAIF1 copies.
    pub copies: Option<usize>,
}

impl Settings {
    /// `self`, with what it leaves out taken from `other`.
    pub fn or(self, other: Settings) -> Settings {
        Settings {
            level: self.level.or(other.level),
            stripe: self.stripe.or(other.stripe),
            copies: self.copies.or(other.copies),
        }
    }
}

/// One rule: files matching `glob` get `settings`.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The pattern as written.
    pub glob: String,
    /// What matching files get.
    pub settings: Settings,
    /// The compiled pattern.
    matcher: Matcher,
    /// It has a `/`: it matches the path from the mount root, not the name.
    path: bool,
}

impl PartialEq for Rule {
    fn eq(&self, other: &Rule) -> bool {
        self.glob == other.glob && self.settings == other.settings
    }
}

impl Eq for Rule {}

impl Rule {
    /// A rule for `glob` (see the module docs for its syntax).
    pub fn new(glob: &str, settings: Settings) -> Result<Rule, String> {
        Ok(Rule {
            glob: glob.to_string(),
            settings,
            matcher: compile(glob)?,
            path: glob.contains('/'),
        })
    }

    /// Whether the rule applies to a file called `name` at `path` (see
    /// [`Policy::settings_for`]).
    #[inline]
    fn applies(&self, name: &[u8], path: Option<&[u8]>) -> bool {
        if self.path {
            path.is_some_and(|p| self.matcher.is_match(OsStr::from_bytes(p)))
        } else {
            self.matcher.is_match(OsStr::from_bytes(name))
        }
    }
}

/// Compiles `glob` (see the module docs).
fn compile(glob: &str) -> Result<Matcher, String> {
    fsprof_fuse::toolkit::glob::compile_with(glob, |g| {
        GlobBuilder::new(g)
            .literal_separator(true)
            .allow_unclosed_class(true)
            .build()
    })
}

/// A checked policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Rules, first match wins.
    pub rules: Vec<Rule>,
    /// What files get where no rule says (before the command-line flags).
    pub default: Settings,
    /// Whether some rule needs the whole path (its glob has a `/`).
    pub needs_path: bool,
    /// SHA-256 of the file's text (hex), for a policy read from a file: the volume keeps it,
    /// so a mount with another policy says so.
    pub digest: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    default: Option<toml::Spanned<RawSettings>>,
    #[serde(default)]
    rule: Vec<toml::Spanned<RawRule>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    level: Option<u32>,
    stripe: Option<Stripe>,
    copies: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    glob: String,
    level: Option<u32>,
    stripe: Option<Stripe>,
    copies: Option<usize>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Stripe {
    Bytes(u64),
    Text(String),
}

/// Parses a size such as `65536`, `64K`, `1M` (powers of 1024; `KiB`, `k`, `KB` also accepted).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num.parse().map_err(|_| format!("'{s}' is not a size"))?;
    let shift = match unit
        .trim()
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        _ => return Err(format!("'{s}': unknown unit (use K, M or G)")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("'{s}' is too large"))
}

/// Checks a stripe unit: a power of two from 512 B to 64 MiB.
pub fn check_stripe(bytes: u64) -> Result<u32, String> {
    let (lo, hi) = STRIPE_RANGE;
    if bytes.is_power_of_two() && (lo as u64..=hi as u64).contains(&bytes) {
        Ok(bytes as u32)
    } else {
        Err(format!(
            "stripe {bytes}: must be a power of two from {lo} to {hi} bytes"
        ))
    }
}

fn settings(
    level: Option<u32>,
    stripe: Option<Stripe>,
    copies: Option<usize>,
) -> Result<Settings, String> {
    let level = level
        .map(|l| Level::from_num(l).ok_or_else(|| format!("level {l}: must be 0, 1, 4 or 5")))
        .transpose()?;
    let stripe = stripe
        .map(|s| match s {
            Stripe::Bytes(b) => check_stripe(b),
            Stripe::Text(t) => check_stripe(parse_size(&t)?),
        })
        .transpose()?;
    if copies == Some(0) {
        return Err("copies must be at least 1".into());
    }
    Ok(Settings {
        level,
        stripe,
        copies,
    })
}

/// The SHA-256 of `bytes`, in hex.
pub fn digest(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A digest as said in messages: `sha256:` and its first 12 hex digits.
pub fn short_digest(d: &str) -> String {
    format!("sha256:{}", &d[..d.len().min(12)])
}

impl Policy {
    /// Parses a policy file's text.
    pub fn parse(text: &str) -> Result<Policy, String> {
        let line = |at: usize| fsprof_fuse::toolkit::config_file::line_of(text, at);
        let raw: RawPolicy = toml::from_str(text)
            .map_err(|e| fsprof_fuse::toolkit::config_file::toml_error(text, &e))?;
        let default = match raw.default {
            Some(d) => {
                let at = line(d.span().start);
                let d = d.into_inner();
                settings(d.level, d.stripe, d.copies)
                    .map_err(|e| format!("line {at}: [default]: {e}"))?
            }
            None => Settings::default(),
        };
        let mut rules = Vec::with_capacity(raw.rule.len());
        for (i, r) in raw.rule.into_iter().enumerate() {
            let at = line(r.span().start);
            let r = r.into_inner();
            let what = format!("line {at}: rule {} ('{}')", i + 1, r.glob);
            if r.glob.is_empty() {
                return Err(format!("{what}: empty glob"));
            }
            let s = settings(r.level, r.stripe, r.copies).map_err(|e| format!("{what}: {e}"))?;
            rules.push(Rule::new(&r.glob, s).map_err(|e| format!("{what}: {e}"))?);
        }
        let needs_path = rules.iter().any(|r| r.path);
        Ok(Policy {
            rules,
            default,
            needs_path,
            digest: None,
        })
    }

    /// Reads and parses a policy file.
    pub fn load(path: &Path) -> Result<Policy, String> {
        let text = fsprof_fuse::toolkit::config_file::read_small_file(path)
            .map_err(|e| format!("policy {}: {e}", path.display()))?;
        let mut p = Policy::parse(&text).map_err(|e| format!("policy {}: {e}", path.display()))?;
        p.digest = Some(digest(text.as_bytes()));
        Ok(p)
    }

    /// The settings for a new file called `name` at `path` (from the mount root, no leading
    /// `/`; only needed when [`Policy::needs_path`]).
    pub fn settings_for(&self, name: &[u8], path: Option<&[u8]>) -> Settings {
        let hit = self.rules.iter().find(|r| r.applies(name, path));
        hit.map_or(self.default, |r| r.settings.or(self.default))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, n: &str) -> bool {
        let r = Rule::new(p, Settings::default()).unwrap();
        if p.contains('/') {
            r.applies(b"", Some(n.as_bytes()))
        } else {
            r.applies(n.as_bytes(), None)
        }
    }

    #[test]
    fn globs() {
        assert!(m("*.log", "a.log"));
        assert!(m("*.log", ".log"));
        assert!(!m("*.log", "a.log.1"));
        assert!(!m("*.log", "d/a.log"));
        assert!(m("d/*.log", "d/a.log"));
        assert!(m("**/*.log", "a.log"));
        assert!(m("**/*.log", "x/y/a.log"));
        assert!(!m("**/a.log", "xa.log"));
        assert!(m("media/**", "media/a/b"));
        assert!(!m("media/**", "other/a"));
        assert!(m("f?.bin", "f1.bin"));
        assert!(!m("f?.bin", "f12.bin"));
        assert!(m("[abc]x", "bx"));
        assert!(!m("[!abc]x", "bx"));
        assert!(m("[a-c][0-9]", "c7"));
        assert!(!m("[a-c]", "d"));
        assert!(m("*", ""));
        assert!(m("[^abc]x", "dx") && !m("[^abc]x", "ax"));
        assert!(m("a[bc", "a[bc"), "an unclosed class is literal");
        assert!(m("*.{jpg,png}", "x.png") && !m("*.{jpg,png}", "x.gif"));
        assert!(m("\\*x", "*x") && !m("\\*x", "ax"));
        assert!(m("**", "a/b") && m("**", "a"));
        assert!(m("a/**/b", "a/b") && m("a/**/b", "a/x/y/b") && !m("a/**/b", "a/xb"));
        // One byte, not one character.
        assert!(m("*", "caf\u{e9}") && !m("caf?", "caf\u{e9}") && m("caf??", "caf\u{e9}"));
        // Names need not be UTF-8.
        let r = Rule::new("*.bin", Settings::default()).unwrap();
        assert!(r.applies(b"\xff\xfe.bin", None));
    }

    #[test]
    fn bad_globs_are_refused_with_their_line() {
        let e = Policy::parse("[default]\nlevel = 1\n[[rule]]\nglob = \"{a,b\"\n").unwrap_err();
        assert!(e.starts_with("line 3: rule 1 ('{a,b'): "), "{e}");
        assert!(
            m("a**b", "axyb") && !m("d/a**b", "d/a/b"),
            "** within a name is a *"
        );
    }

    /// Matching is linear in the name's length, whatever the pattern: a thousand matches of
    /// a 255-byte name full of dashes against many-star patterns (a backtracking matcher
    /// needs about C(255, 9) steps for one of them) end at once. The bound is the number of
    /// matches; the timeout only keeps a regression from hanging the test run.
    #[test]
    fn hostile_patterns_match_in_linear_time() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let pats = [
                "*-*-*-*-*-*.log",
                "*-*-*-*-*-*-*-*-*-*.log",
                "*a*a*a*a*a*a*a*a*a*b",
                "**/*-*-*-*-*-*-*-*.log",
            ];
            let rules: Vec<Rule> = pats
                .iter()
                .map(|p| Rule::new(p, Settings::default()).unwrap())
                .collect();
            let dashes = vec![b'-'; 255];
            let mut a = vec![b'a'; 255];
            a[254] = b'c';
            let mut hits = 0;
            for _ in 0..1000 {
                for r in &rules {
                    for name in [&dashes, &a] {
                        hits += r.applies(name, Some(name)) as u32;
                    }
                }
            }
            tx.send(hits).unwrap();
        });
        let hits = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("4,000 matches of 255-byte names did not end: not linear");
        assert_eq!(hits, 0);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("K").is_err());
        assert!(check_stripe(3000).is_err());
        assert!(check_stripe(256).is_err());
        assert_eq!(check_stripe(4096), Ok(4096));
    }

    #[test]
    fn first_rule_then_default_then_flags() {
        let p = Policy::parse(
            r#"
            [default]
            level = 5
            stripe = "16K"

            [[rule]]
            glob = "*.log"
            level = 1
            copies = 2

            [[rule]]
            glob = "*.bin"
            level = 0
            stripe = 4096

            [[rule]]
            glob = "*.log"
            level = 0
            "#,
        )
        .unwrap();
        let log = p.settings_for(b"x.log", None);
        assert_eq!(log.level, Some(Level::Raif1));
        assert_eq!(log.stripe, Some(16384));
        assert_eq!(log.copies, Some(2));
        let bin = p.settings_for(b"x.bin", None);
        assert_eq!((bin.level, bin.stripe), (Some(Level::Raif0), Some(4096)));
        let other = p.settings_for(b"x.txt", None);
        assert_eq!(other.level, Some(Level::Raif5));
        assert!(!p.needs_path);
        assert_eq!(
            Policy::parse("").unwrap().settings_for(b"a", None),
            Settings::default()
        );
    }

    #[test]
    fn bad_policies_say_where() {
        let e = Policy::parse("[[rule]]\nglob = \"*.x\"\nlevel = 3\n").unwrap_err();
        assert!(e.contains("rule 1") && e.contains("level 3"), "{e}");
        let e = Policy::parse("[default]\nstripe = \"3K\"\n").unwrap_err();
        assert!(e.contains("[default]") && e.contains("power of two"), "{e}");
        assert!(e.starts_with("line 1: "), "{e}");
        let e = Policy::parse("[[rule]]\nglob = \"a\"\nspeed = 1\n").unwrap_err();
        assert!(e.contains("speed") && e.starts_with("line 3: "), "{e}");
        let e = Policy::parse("[default]\nlevel = 1\n\n[[rule]]\nglob = \"*.x\"\nlevel = 3\n")
            .unwrap_err();
        assert!(e.starts_with("line 4: rule 1"), "{e}");
        let e = Policy::parse("[default]\nlevel = = 1\n").unwrap_err();
        assert!(e.starts_with("line 2: "), "{e}");
        assert!(Policy::parse("[[rule]]\nlevel = 1\n").is_err());
    }

    #[test]
    fn a_deep_or_long_glob_is_refused_in_one_line() {
        let deep = format!("{}b{}", "{a,".repeat(150), "}".repeat(150));
        let e = Policy::parse(&format!("[[rule]]\nglob = \"{deep}\"\nlevel = 1\n")).unwrap_err();
        assert!(
            e.ends_with("braces nested 150 deep: at most 32 levels are taken"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        let long = "a".repeat(5000);
        let e = Policy::parse(&format!("[[rule]]\nglob = \"{long}\"\nlevel = 1\n")).unwrap_err();
        assert!(e.contains("5000 bytes"), "{e}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any policy text, and any glob in a rule, gives a policy or a one-line error.
        #[test]
        fn any_policy_parses_or_is_refused(
            text in "(\\[\\[rule\\]\\]\n|\\[default\\]\n|glob = \"[{},*?\\[\\]!a/]{0,80}\"\n|level = [0-9]\n|stripe = \"[0-9KMG]{0,6}\"\n|copies = [0-9]\n|[ -~]{0,20}\n){0,12}",
        ) {
            match Policy::parse(&text) {
                Ok(p) => {
                    for r in &p.rules {
                        let _ = r.applies(b"a", Some(b"a/b"));
                    }
                }
                Err(e) => proptest::prop_assert!(!e.contains('\n'), "{}", e),
            }
        }
    }
}
