//! `-o key[=value],...`: the daemons' options as mount(8), fstab and `mount.fuse3` give them.
//!
//! `mount -t fuse.fsprof-fuse LOWER MNT -o allow_other,cache=exact` makes `mount.fuse3` run
//! `fsprof-fuse LOWER MNT -o rw,allow_other,cache=exact,dev,suid`. [`rewrite`] turns every
//! `-o` list of a command line into the program's own options before clap parses it, so that
//! every long option has a `-o` form without a table to keep: the key is looked up among the
//! long options of the program's clap definition (`_` and `-` alike: `allow_other` is
//! `--allow-other`), a flag takes no value and an option takes `=value`. Options added later
//! get their `-o` form with no change here.
//!
//! Besides the program's own options:
//!
//! * mount(8)'s generic options are applied or ignored, never refused: the kernel flags a FUSE
//!   mount can take ([`APPLIED`]: `ro`, `rw`, `dev`, `nodev`, `suid`, `nosuid`, `exec`,
//!   `noexec`, `atime`, `noatime`, `sync`, `async`, `dirsync`) become hidden `--mount-flag`
//!   options; those that mean nothing to a FUSE daemon, or are mount(8)'s own ([`IGNORED`]:
//!   `defaults`, `auto`, `noauto`, `nofail`, `_netdev`, `user`, the `atime` family beyond
//!   `atime`/`noatime`, `x-*`, `comment=`...), are dropped;
//! * FUSE's own: `allow_other` and `auto_unmount` (long options of the daemons),
//!   `default_permissions` (always on: the kernel checks permissions), `fsname=NAME` and
//!   `subtype=TYPE` (what `/proc/mounts` shows).
//!
//! A value may hold commas when quoted (`inject="op=read,every=2,delay=1ms"`, as fstab keeps
//! it) or escaped (`layers=fuse\,lower`). An unknown key is refused in one line.

use std::ffi::OsString;

use crate::transport::settings::KernelFlags;

/// The generic mount options that are applied, as `--mount-flag KEY`.
pub const APPLIED: [&str; 13] = [
    "ro", "rw", "dev", "nodev", "suid", "nosuid", "exec", "noexec", "atime", "noatime", "sync",
    "async", "dirsync",
];

/// The generic mount options that mean nothing to a FUSE daemon, or are mount(8)'s own: dropped.
/// Any `x-*` option (systemd's, `x-mount.mkdir`...) too.
pub const IGNORED: [&str; 30] = [
    "defaults",
    "auto",
    "noauto",
    "nofail",
    "_netdev",
    "user",
    "users",
    "nouser",
    "owner",
    "group",
    "relatime",
    "norelatime",
    "strictatime",
    "nostrictatime",
    "lazytime",
    "nolazytime",
    "diratime",
    "nodiratime",
    "iversion",
    "noiversion",
    "mand",
    "nomand",
    "silent",
    "loud",
    "nosymfollow",
    "symfollow",
    "comment",
    "context",
    "fscontext",
    "rootcontext",
];

/// FUSE options that are always in effect here: accepted and dropped.
const ALWAYS: [&str; 1] = ["default_permissions"];

/// Every `-o LIST` (and `-oLIST`) of `args` (the program's name first) turned into `cmd`'s long
/// options; the other arguments are kept in their order, and nothing after `--` is looked at.
pub fn rewrite(
    cmd: &clap::Command,
    args: impl IntoIterator<Item = OsString>,
) -> Result<Vec<OsString>, String> {
    let mut out = Vec::new();
    let mut args = args.into_iter();
    if let Some(program) = args.next() {
        out.push(program);
    }
    while let Some(a) = args.next() {
        if a == "--" {
            out.push(a);
            out.extend(args);
            break;
        }
        let list = match a.to_str() {
            Some("-o") => args
                .next()
                .ok_or("-o needs a list of options: -o key[=value],...")?,
            Some(s) if s.starts_with("-o") => OsString::from(&s[2..]),
            _ => {
                out.push(a);
                continue;
            }
        };
        let list = list
            .into_string()
            .map_err(|l| format!("-o {}: not UTF-8", l.to_string_lossy()))?;
        for opt in split(&list)? {
            out.extend(option(cmd, &opt)?);
        }
    }
    Ok(out)
}

/// The options of one `-o` list: split at commas outside double quotes and not escaped with
/// a backslash; the quotes and escapes are removed.
pub fn split(list: &str) -> Result<Vec<String>, String> {
    let mut opts = Vec::new();
    let mut cur = String::new();
    let (mut quoted, mut chars) = (false, list.chars());
    while let Some(c) = chars.next() {
        match c {
            '\\' => cur.push(chars.next().unwrap_or('\\')),
            '"' => quoted = !quoted,
            ',' if !quoted => opts.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    if quoted {
        return Err(format!("-o {list}: a quote is not closed"));
    }
    opts.push(cur);
    Ok(opts.into_iter().filter(|o| !o.is_empty()).collect())
}

/// The arguments one `key[=value]` stands for (none for an ignored option).
fn option(cmd: &clap::Command, opt: &str) -> Result<Vec<OsString>, String> {
    let (key, value) = match opt.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (opt, None),
    };
    let base = key.replace('-', "_");
    if base.starts_with("x_") || IGNORED.contains(&base.as_str()) || ALWAYS.contains(&key) {
        return Ok(Vec::new());
    }
    if APPLIED.contains(&key) {
        if value.is_some() {
            return Err(format!("-o {opt}: {key} takes no value"));
        }
        return Ok(vec![format!("--mount-flag={key}").into()]);
    }
    let long = key.replace('_', "-");
    let Some(arg) = cmd
        .get_arguments()
        .find(|a| a.get_long() == Some(long.as_str()))
    else {
        return Err(format!(
            "-o {opt}: unknown option (every long option has a -o form, e.g. -o cache=exact \
             for --cache exact; see --help)"
        ));
    };
    let takes_value = arg.get_action().takes_values();
    let value_optional = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
    match value {
        None if !takes_value || value_optional => Ok(vec![format!("--{long}").into()]),
        None => Err(format!("-o {key}: needs a value ({key}=VALUE)")),
        Some(_) if !takes_value => Err(format!("-o {opt}: {key} takes no value")),
        Some(v) => Ok(vec![format!("--{long}={v}").into()]),
    }
}

/// The kernel flags of `keys` (each one of [`APPLIED`], from `--mount-flag`), later ones
/// winning, over the defaults ([`KernelFlags::default`]).
pub fn kernel_flags(keys: &[String]) -> Result<KernelFlags, String> {
    let mut f = KernelFlags::default();
    for k in keys {
        match k.as_str() {
            "ro" => f.read_only = true,
            "rw" => f.read_only = false,
            "dev" => f.dev = true,
            "nodev" => f.dev = false,
            "suid" => f.suid = true,
            "nosuid" => f.suid = false,
            "exec" => f.noexec = false,
            "noexec" => f.noexec = true,
            "atime" => f.noatime = false,
            "noatime" => f.noatime = true,
            "sync" => f.sync = true,
            "async" => f.sync = false,
            "dirsync" => f.dirsync = true,
            other => return Err(format!("--mount-flag {other}: not a mount flag")),
        }
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction, Command};

    fn cmd() -> Command {
        Command::new("p")
            .arg(Arg::new("lower"))
            .arg(Arg::new("mnt"))
            .arg(
                Arg::new("allow_other")
                    .long("allow-other")
                    .action(ArgAction::SetTrue),
            )
            .arg(Arg::new("cache").long("cache"))
            .arg(Arg::new("inject").long("inject").action(ArgAction::Append))
            .arg(
                Arg::new("hot_files")
                    .long("hot-files")
                    .num_args(0..=1)
                    .require_equals(true),
            )
            .arg(
                Arg::new("mount_flag")
                    .long("mount-flag")
                    .action(ArgAction::Append),
            )
    }

    fn rw(args: &[&str]) -> Result<Vec<String>, String> {
        let args = std::iter::once("p")
            .chain(args.iter().copied())
            .map(OsString::from);
        rewrite(&cmd(), args).map(|v| {
            v.into_iter()
                .skip(1)
                .map(|a| a.into_string().unwrap())
                .collect()
        })
    }

    #[test]
    fn options_become_long_options_of_the_definition() {
        assert_eq!(
            rw(&["L", "M", "-o", "rw,allow_other,cache=exact,dev,suid"]).unwrap(),
            [
                "L",
                "M",
                "--mount-flag=rw",
                "--allow-other",
                "--cache=exact",
                "--mount-flag=dev",
                "--mount-flag=suid"
            ]
        );
        // -oLIST, dashes, flags with an optional value, several lists.
        assert_eq!(
            rw(&["-ohot-files", "-o", "hot_files=7", "L"]).unwrap(),
            ["--hot-files", "--hot-files=7", "L"]
        );
        // Nothing after `--` is an option list.
        assert_eq!(rw(&["--", "-o", "x"]).unwrap(), ["--", "-o", "x"]);
    }

    #[test]
    fn generic_options_are_applied_or_ignored_never_refused() {
        let all = "defaults,auto,noauto,nofail,_netdev,user,users,nouser,owner,group,relatime,\
                   noatime,lazytime,x-systemd.automount,x-mount.mkdir=0755,comment=x,\
                   default_permissions,nodiratime,iversion,silent,loud,ro";
        assert_eq!(
            rw(&["-o", all]).unwrap(),
            ["--mount-flag=noatime", "--mount-flag=ro"]
        );
    }

    #[test]
    fn quoted_and_escaped_commas_stay_in_their_value() {
        assert_eq!(
            rw(&[
                "-o",
                r#"inject="op=read,every=2",inject=op=write\,every=3,cache=fast"#
            ])
            .unwrap(),
            [
                "--inject=op=read,every=2",
                "--inject=op=write,every=3",
                "--cache=fast"
            ]
        );
        assert!(
            rw(&["-o", r#"inject="op=read"#])
                .unwrap_err()
                .contains("quote")
        );
    }

    #[test]
    fn unknown_keys_and_misused_values_are_refused_in_one_line() {
        assert!(
            rw(&["-o", "bogus"])
                .unwrap_err()
                .contains("-o bogus: unknown option")
        );
        assert!(rw(&["-o", "cache"]).unwrap_err().contains("needs a value"));
        assert!(
            rw(&["-o", "allow_other=1"])
                .unwrap_err()
                .contains("takes no value")
        );
        assert!(rw(&["-o", "ro=1"]).unwrap_err().contains("takes no value"));
        assert!(rw(&["-o"]).unwrap_err().contains("needs a list"));
    }

    #[test]
    fn later_flags_win() {
        let f = kernel_flags(&["ro".into(), "dev".into(), "rw".into(), "noatime".into()]).unwrap();
        assert!(!f.read_only && f.dev && !f.suid && f.noatime);
        assert_eq!(kernel_flags(&[]).unwrap(), KernelFlags::default());
        assert!(kernel_flags(&["bogus".into()]).is_err());
    }
}
