//! The settings a volume remembers: the level, stripe unit, copies and parity branch new files
//! get where no policy rule matches, and the digest of its policy file (kept in every branch's
//! marker, [`crate::marker::Stored`]).
//!
//! A mount takes from the volume what its command line does not give: a RAIF5 volume mounted
//! again without `--level` goes on making RAIF5 files. What the command line gives and the
//! volume says otherwise becomes the volume's new default, said in one line; existing files
//! keep their layout (it is in their records). A different policy file (or none, after one)
//! is taken, with a line naming both digests: a policy decides only new files' levels.

use fsprof_fuse::daemon::mount::{SetupError, setup_err};

use crate::fs::FsConfig;
use crate::layout::Level;
use crate::marker::Stored;
use crate::policy::{Settings, short_digest};

/// The default stripe unit of a new volume.
pub const STRIPE: u32 = 64 << 10;

/// Settles `fs`'s defaults (the command line's, `None` where it gave none) against `stored`
/// (the volume's, `None` for a new volume or one made before settings were kept): fills in
/// what the command line left out, and returns the settings the volume keeps from now on
/// and the one-line notes of what changed.
pub fn settle(fs: &mut FsConfig, stored: Option<&Stored>) -> (Stored, Vec<String>) {
    let given = fs.defaults;
    let mut notes = Vec::new();
    let old = stored.cloned().unwrap_or(Stored {
        level: 1,
        stripe: STRIPE,
        copies: None,
        parity: None,
        policy: None,
    });
    let level = given.level.map_or(old.level, Level::num);
    let stripe = given.stripe.unwrap_or(old.stripe);
    let copies = given.copies.or(old.copies);
    let parity = fs.parity_branch.or(old.parity);
    if let Some(st) = stored {
        if level != st.level {
            notes.push(format!(
                "the default level of new files changes from RAIF{} to RAIF{level} (existing \
                 files keep theirs)",
                st.level
            ));
        }
        if stripe != st.stripe {
            notes.push(format!(
                "the default stripe unit of new files changes from {} to {stripe} bytes \
                 (existing files keep theirs)",
                st.stripe
            ));
        }
        if copies != st.copies && given.copies.is_some() {
            notes.push(format!(
                "RAIF1 copies of new files change from {} to {} (existing files keep theirs)",
                st.copies.map_or("one per branch".into(), |c| c.to_string()),
                copies.map_or("one per branch".into(), |c| c.to_string())
            ));
        }
        if parity != st.parity && fs.parity_branch.is_some() {
            notes.push(format!(
                "the parity branch of new RAIF4 files changes from {} to {} (existing files \
                 keep theirs)",
                st.parity.map_or("the last".into(), |p| p.to_string()),
                parity.map_or("the last".into(), |p| p.to_string())
            ));
        }
        let policy = fs.policy.digest.as_deref();
        match (st.policy.as_deref(), policy) {
            (Some(a), Some(b)) if a != b => notes.push(format!(
                "another policy file: {} before, {} now (it decides new files' levels only)",
                short_digest(a),
                short_digest(b)
            )),
            (None, Some(b)) => notes.push(format!(
                "a policy file is taken ({}); the volume had none (it decides new files' \
                 levels only)",
                short_digest(b)
            )),
            (Some(a), None) => notes.push(format!(
                "the volume was last mounted with a policy file ({}), this mount has none: new \
                 files get the default level",
                short_digest(a)
            )),
            _ => {}
        }
    }
    fs.defaults = Settings {
        level: Level::from_num(level),
        stripe: Some(stripe),
        copies,
    };
    fs.parity_branch = parity;
    let now = Stored {
        level,
        stripe,
        copies,
        parity,
        policy: fs.policy.digest.clone(),
    };
    (now, notes)
}

/// Settles the settings of a mount of the volume `bs` (see [`settle`]), checks that every
/// level new files can get fits its branches, logs the notes, and keeps the settings for the
/// markers.
pub fn apply(fs: &mut FsConfig, bs: &crate::branch::BranchSet) -> Result<(), SetupError> {
    let (now, notes) = settle(fs, bs.stored().as_ref());
    check_levels(fs, bs.len())?;
    for n in notes {
        log::warn!("{n}");
    }
    bs.set_stored(now);
    Ok(())
}

/// Checks that every level new files can get fits `n` branches.
pub fn check_levels(s: &FsConfig, n: usize) -> Result<(), SetupError> {
    let mut all: Vec<(String, Settings)> = vec![("the command line".into(), s.defaults)];
    all.push((
        "the policy's default".into(),
        s.policy.default.or(s.defaults),
    ));
    for (i, r) in s.policy.rules.iter().enumerate() {
        all.push((
            format!("policy rule {} ('{}')", i + 1, r.glob),
            r.settings.or(s.policy.default).or(s.defaults),
        ));
    }
    for (what, st) in all {
        let level = st.level.unwrap_or(Level::Raif1);
        if n < level.min_branches() {
            return Err(setup_err(format!(
                "{what}: RAIF{} needs at least {} branches, {n} given",
                level.num(),
                level.min_branches()
            )));
        }
        if let Some(c) = st.copies.filter(|&c| c == 0 || c > n) {
            return Err(setup_err(format!("{what}: {c} copies with {n} branches")));
        }
    }
    if let Some(p) = s.parity_branch.filter(|&p| p >= n) {
        return Err(setup_err(format!(
            "--parity-branch {p}: there are {n} branches"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(level: u32, policy: Option<&str>) -> Stored {
        Stored {
            level,
            stripe: 4096,
            copies: None,
            parity: None,
            policy: policy.map(str::to_string),
        }
    }

    #[test]
    fn what_the_command_line_leaves_out_comes_from_the_volume() {
        let mut fs = FsConfig {
            defaults: Settings::default(),
            ..FsConfig::default()
        };
        let (now, notes) = settle(&mut fs, Some(&stored(5, None)));
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(fs.defaults.level, Some(Level::Raif5));
        assert_eq!(fs.defaults.stripe, Some(4096));
        assert_eq!(now, stored(5, None));
    }

    #[test]
    fn a_new_level_or_policy_is_taken_with_one_line_each() {
        let mut fs = FsConfig {
            defaults: Settings {
                level: Some(Level::Raif1),
                ..Settings::default()
            },
            ..FsConfig::default()
        };
        fs.policy.digest = Some("bbbbbbbbbbbbbbbbbbbb".into());
        let (now, notes) = settle(&mut fs, Some(&stored(5, Some("aaaaaaaaaaaaaaaaaaaa"))));
        assert_eq!(now.level, 1);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("from RAIF5 to RAIF1"), "{}", notes[0]);
        assert!(
            notes[1].contains("sha256:aaaaaaaaaaaa") && notes[1].contains("sha256:bbbbbbbbbbbb"),
            "{}",
            notes[1]
        );
        // A new volume: the command line's, or the defaults, and nothing to say.
        let mut fs = FsConfig {
            defaults: Settings::default(),
            ..FsConfig::default()
        };
        let (now, notes) = settle(&mut fs, None);
        assert!(notes.is_empty());
        assert_eq!((now.level, now.stripe), (1, STRIPE));
    }
}
