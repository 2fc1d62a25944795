//! Setuid and setgid bits through a mount, compared with LOWER's own behaviour: the same
//! change, by the same caller, to a file made the same way in the mount and in a reference
//! directory on LOWER's file system (outside the mount), must leave the same mode in both; and
//! the kernel of the mount must show it at once, to a `statx` that asks for the mode alone
//! (which the kernel answers from its cache while its attributes are not stale).
//!
//! The changes are made by programs every Debian system has or the CI installs: `sh`,
//! `truncate`, `fallocate` and `setpriv` (util-linux), `xfs_io` (xfsprogs: `copy_range`,
//! mapped writes), `chgrp`, and `perl` (perl-base: `chown(-1, -1)`, and objects created with
//! a setgid mode, which no shell command does without a `chmod` after).

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::sh;

/// A caller without privileges, in no group but its own.
pub const NOBODY: &str = "setpriv --reuid=65534 --regid=65534 --clear-groups --";
/// The same caller, in group 4242 through a supplementary group.
pub const MEMBER: &str = "setpriv --reuid=65534 --regid=65534 --groups=4242 --";
/// The same caller with 4242 as its own group.
pub const PRIMARY: &str = "setpriv --reuid=65534 --regid=4242 --clear-groups --";
/// Root without `CAP_FSETID`.
pub const ROOT_WITHOUT_FSETID: &str =
    "setpriv --inh-caps=-fsetid --bounding-set=-fsetid --clear-groups --";
/// Root.
pub const ROOT: &str = "";

/// A file made with `mode`, owner `uid` and group `gid`, then changed by `cmd` (`{f}` stands
/// for the file, `{src}` for a readable file beside it) run by `caller`; `expect`: the mode
/// LOWER leaves (checked, so that the comparison is known to be about something).
pub struct Change {
    /// The case (and the file's name).
    pub name: &'static str,
    /// Permission bits made.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Who changes it (a `setpriv` prefix).
    pub caller: &'static str,
    /// The change.
    pub cmd: &'static str,
    /// The mode LOWER leaves.
    pub expect: u32,
}

const fn change(
    name: &'static str,
    mode: u32,
    (uid, gid): (u32, u32),
    caller: &'static str,
    cmd: &'static str,
    expect: u32,
) -> Change {
    Change {
        name,
        mode,
        uid,
        gid,
        caller,
        cmd,
        expect,
    }
}

/// Every change of issue 42 (and what LOWER does; Linux 6.x on ext4 or tmpfs).
pub const CHANGES: &[Change] = &[
    change(
        "append",
        0o4777,
        (0, 0),
        NOBODY,
        "sh -c 'echo x >> {f}'",
        0o777,
    ),
    change(
        "sgid-append",
        0o2777,
        (0, 0),
        NOBODY,
        "sh -c 'echo x >> {f}'",
        0o777,
    ),
    change(
        "both-owner",
        0o6775,
        (65534, 0),
        NOBODY,
        "sh -c 'echo x >> {f}'",
        0o775,
    ),
    // Setgid without group execute: cleared for a caller outside the group, kept for one in it.
    change(
        "nogx-outsider",
        0o2767,
        (0, 0),
        NOBODY,
        "sh -c 'echo x >> {f}'",
        0o767,
    ),
    change(
        "nogx-member",
        0o2767,
        (0, 4242),
        MEMBER,
        "sh -c 'echo x >> {f}'",
        0o2767,
    ),
    change(
        "nogx-primary",
        0o2767,
        (0, 4242),
        PRIMARY,
        "truncate -s 1 {f}",
        0o2767,
    ),
    change(
        "fallocate",
        0o4777,
        (0, 0),
        NOBODY,
        "fallocate -l 8192 {f}",
        0o777,
    ),
    change(
        "keep-size",
        0o4777,
        (0, 0),
        NOBODY,
        "fallocate -n -l 65536 {f}",
        0o777,
    ),
    change(
        "punch",
        0o6777,
        (0, 0),
        NOBODY,
        "fallocate -p -o 0 -l 2 {f}",
        0o777,
    ),
    change(
        "zero",
        0o4777,
        (0, 0),
        NOBODY,
        "fallocate -z -o 0 -l 2 {f}",
        0o777,
    ),
    change(
        "truncate",
        0o4777,
        (0, 0),
        NOBODY,
        "truncate -s 1 {f}",
        0o777,
    ),
    change(
        "open-trunc",
        0o4777,
        (0, 0),
        NOBODY,
        "sh -c ': > {f}'",
        0o777,
    ),
    change(
        "copy-range",
        0o6777,
        (0, 0),
        NOBODY,
        "xfs_io -c 'copy_range -l 4 {src}' {f}",
        0o777,
    ),
    change(
        "chgrp-outsider",
        0o2745,
        (65534, 0),
        MEMBER,
        "chgrp 4242 {f}",
        0o745,
    ),
    change(
        "chown-nothing",
        0o6755,
        (0, 0),
        ROOT,
        "perl -e 'chown(-1, -1, $ARGV[0]) or die \"$!\"' {f}",
        0o755,
    ),
    change("chown-root", 0o6745, (0, 0), ROOT, "chown 1:1 {f}", 0o2745),
    change(
        "no-fsetid",
        0o6777,
        (0, 0),
        ROOT_WITHOUT_FSETID,
        "sh -c 'echo x >> {f}'",
        0o777,
    ),
    // What keeps the bits.
    change(
        "root-write",
        0o6777,
        (0, 0),
        ROOT,
        "sh -c 'echo x >> {f}'",
        0o6777,
    ),
    change(
        "mapped-write",
        0o4777,
        (0, 0),
        NOBODY,
        "xfs_io -c 'mmap -rw 0 4' -c 'mwrite -S 0x41 0 2' -c 'msync -s 0 4' {f}",
        0o4777,
    ),
    change("read", 0o4777, (0, 0), NOBODY, "cat {f}", 0o4777),
];

/// The permission bits of `path` by `statx` asking for the mode alone (through a mount, the
/// kernel's cached mode while it holds the attributes fresh).
pub fn mode_only(path: &Path) -> u32 {
    let c = CString::new(path.as_os_str().as_bytes()).expect("path");
    // SAFETY: zeroed `statx` is a valid value to fill.
    let mut sx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a valid buffer.
    let r = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_MODE,
            &mut sx,
        )
    };
    assert_eq!(r, 0, "statx {}", path.display());
    sx.stx_mode as u32 & 0o7777
}

/// The permission bits of `path` (a full `stat`).
pub fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path).expect("stat").mode() & 0o7777
}

/// Runs `cmd` as `caller` with `{f}` and `{src}` filled in for `dir`; its exit code and
/// messages.
fn run_as(caller: &str, cmd: &str, dir: &Path, name: &str) -> (i32, String) {
    let cmd = cmd
        .replace("{f}", &dir.join(name).display().to_string())
        .replace("{src}", &dir.join("src").display().to_string());
    let (c, _, e) = sh(&format!("{caller} {cmd}"));
    (c, e)
}

/// Makes the file of `c` in `dir`.
fn make(dir: &Path, c: &Change) {
    let p = dir.join(c.name);
    let _ = fs::remove_file(&p);
    fs::write(&p, b"data\n").unwrap();
    std::os::unix::fs::chown(&p, Some(c.uid), Some(c.gid)).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(c.mode)).unwrap();
}

/// Runs every change of [`CHANGES`] in the mount's directory `mnt` and in `reference` (on
/// LOWER's file system, outside the mount); `lower(name)` gives the modes of the file's lower
/// copies (LOWER's, or each branch's part). Returns the differences, one line each.
pub fn compare_changes(
    mnt: &Path,
    reference: &Path,
    lower: &dyn Fn(&str) -> Vec<u32>,
) -> Vec<String> {
    for dir in [mnt, reference] {
        fs::write(dir.join("src"), b"0123456789").unwrap();
        fs::set_permissions(dir.join("src"), fs::Permissions::from_mode(0o644)).unwrap();
    }
    let mut bad = Vec::new();
    for c in CHANGES {
        make(mnt, c);
        make(reference, c);
        // The kernel holds the file's attributes before the change (a stale mode would show).
        assert_eq!(mode_only(&mnt.join(c.name)), c.mode, "{}", c.name);
        let (code, err) = run_as(c.caller, c.cmd, mnt, c.name);
        let (ref_code, ref_err) = run_as(c.caller, c.cmd, reference, c.name);
        assert_eq!(ref_code, 0, "{} on LOWER: {ref_err}", c.name);
        let want = mode_of(&reference.join(c.name));
        assert_eq!(want, c.expect, "{}: LOWER left {want:o}", c.name);
        if code != 0 {
            bad.push(format!("{}: failed through the mount: {err}", c.name));
            continue;
        }
        let shown = mode_only(&mnt.join(c.name));
        let lower = lower(c.name);
        if shown != want || lower.iter().any(|&m| m != want) || lower.is_empty() {
            let copies: Vec<String> = lower.iter().map(|m| format!("{m:o}")).collect();
            bad.push(format!(
                "{}: mode {:o} made, {want:o} on LOWER; the mount shows {shown:o}, its lower \
                 copies have [{}]",
                c.name,
                c.mode,
                copies.join(" ")
            ));
        }
    }
    bad
}

/// Callers that create objects in a setgid directory of group 4242, and who they are.
pub const CREATORS: &[(&str, &str)] = &[
    ("outsider", NOBODY),
    ("member", MEMBER),
    ("primary", PRIMARY),
    ("no-fsetid", ROOT_WITHOUT_FSETID),
    ("root", ROOT),
];

/// Makes, in `dir/sgid` (a setgid directory of group 4242 made here), as each of
/// [`CREATORS`], a file, a FIFO and a directory, all asked for mode 2777 with umask 0; the
/// names made (`CALLER-file`, `CALLER-fifo`, `CALLER-dir`) and the error of each caller that
/// failed.
fn create_all(dir: &Path) -> Result<Vec<String>, String> {
    let sg = dir.join("sgid");
    fs::create_dir(&sg).unwrap();
    std::os::unix::fs::chown(&sg, Some(0), Some(4242)).unwrap();
    fs::set_permissions(&sg, fs::Permissions::from_mode(0o2777)).unwrap();
    let mut names = Vec::new();
    for (who, caller) in CREATORS {
        let script = "use Fcntl; use POSIX; umask 0; my $d = $ARGV[0]; \
             sysopen(my $f, \"$d-file\", O_CREAT|O_EXCL|O_WRONLY, 02777) or die \"file: $!\"; \
             POSIX::mkfifo(\"$d-fifo\", 02777) or die \"fifo: $!\"; \
             mkdir(\"$d-dir\", 02777) or die \"dir: $!\"";
        let (c, _, e) = sh(&format!(
            "{caller} perl -e '{script}' {}",
            sg.join(who).display()
        ));
        if c != 0 {
            return Err(format!("{who}: {e}"));
        }
        for kind in ["file", "fifo", "dir"] {
            names.push(format!("sgid/{who}-{kind}"));
        }
    }
    Ok(names)
}

/// Permission bits, owner and group.
pub type Owned = (u32, u32, u32);

/// Mode, owner and group of `path`.
pub fn owned_mode(path: &Path) -> Owned {
    let m = fs::symlink_metadata(path).expect("stat");
    (m.mode() & 0o7777, m.uid(), m.gid())
}

/// Objects created in a setgid directory through the mount at `mnt` and in `reference` (see
/// [`create_all`]); `lower(name)` gives mode, owner and group of each lower copy. Returns the
/// differences, one line each.
pub fn compare_creations(
    mnt: &Path,
    reference: &Path,
    lower: &dyn Fn(&str) -> Vec<Owned>,
) -> Vec<String> {
    let names = create_all(reference).expect("created on LOWER");
    // The rule shows: a caller outside the group loses the bit of the file, one in it keeps it.
    assert_eq!(owned_mode(&reference.join("sgid/outsider-file")).0, 0o777);
    assert_eq!(owned_mode(&reference.join("sgid/member-file")).0, 0o2777);
    if let Err(e) = create_all(mnt) {
        return vec![format!("failed through the mount: {e}")];
    }
    let mut bad = Vec::new();
    for n in names {
        let want = owned_mode(&reference.join(&n));
        let shown = owned_mode(&mnt.join(&n));
        let lower = lower(&n);
        if shown != want || lower.iter().any(|&l| l != want) || lower.is_empty() {
            let show = |(m, u, g): Owned| format!("{m:o} {u}:{g}");
            let copies: Vec<String> = lower.iter().map(|&l| show(l)).collect();
            bad.push(format!(
                "{n}: {} on LOWER; the mount shows {}, its lower copies have [{}]",
                show(want),
                show(shown),
                copies.join(", ")
            ));
        }
    }
    bad
}
