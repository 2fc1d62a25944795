//! Reading profiles: a text or JSON profile file, a mount point (its `.fsprof`), or `-` for
//! standard input; and choosing a layer and operations from what was read.

use std::io::{self, Read};
use std::path::Path;

use profile_store::{Layer, OpProfile, Profile};

use crate::background::Shares;
use crate::error::Error;
use crate::units::Clock;

/// The control file read when an input is a directory (a live `fsprof-fuse` or `raif` mount):
/// the text profile, which is read as a stream under the text parser's limits.
pub const MOUNT_PROFILE: &str = ".fsprof";

/// A profile read from one input, with the name it was given by.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The input as given (`-` for standard input).
    pub name: String,
    /// The profile, with `--cycles-per-sec` applied.
    pub profile: Profile,
}

impl Loaded {
    /// The clock rate to show latencies with.
    pub fn clock(&self) -> Clock {
        Clock(self.profile.cycles_per_sec)
    }

    /// The layer called `name`, or the primary (first) layer when `name` is `None`.
    pub fn layer(&self, name: Option<&str>) -> Result<&Layer, Error> {
        select_layer(&self.profile, name).map_err(|cause| match name {
            Some(n) => Error::usage(format!("--layer {n}"), format!("{}: {cause}", self.name)),
            None => Error::input(&self.name, cause),
        })
    }
}

/// Reads and parses one input as a stream (the parsers' limits apply while reading, so memory
/// stays bounded whatever the input holds, and a non-profile fails within its first line).
/// `cycles_per_sec`, when given, sets the profile's clock rate (a different recorded rate is
/// replaced, with a warning in the log).
pub fn load(spec: &str, cycles_per_sec: Option<u64>) -> Result<Loaded, Error> {
    let mut profile = read_input(spec)?;
    if let Some(hz) = cycles_per_sec {
        match profile.cycles_per_sec {
            Some(recorded) if recorded != hz => {
                log::warn!("{spec}: using --cycles-per-sec {hz} instead of the recorded {recorded}")
            }
            _ => {}
        }
        profile.cycles_per_sec = Some(hz);
    }
    log::debug!(
        "{spec}: {} layer(s), clock rate {:?}",
        profile.layers.len(),
        profile.cycles_per_sec
    );
    Ok(Loaded {
        name: spec.to_string(),
        profile,
    })
}

/// A reader that keeps the first error it returned, so the cause of a failed parse can be told
/// apart: the input (a read error, say of a dead mount) or its content.
struct Keeping<R> {
    r: R,
    error: Option<io::Error>,
}

impl<R: Read> Read for Keeping<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.r.read(buf).inspect_err(|e| {
            if self.error.is_none() && e.kind() != io::ErrorKind::Interrupted {
                self.error = Some(clone_error(e));
            }
        })
    }
}

fn clone_error(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// Parses the profile `r` yields; `spec` names the input, `what` the file read (for a mount
/// point, its control file).
fn parse_stream(spec: &str, what: Option<&Path>, r: impl Read) -> Result<Profile, Error> {
    let mut keeping = Keeping { r, error: None };
    let parsed = profile_store::read_any(&mut keeping);
    match (parsed, keeping.error) {
        (Ok(p), _) => Ok(p),
        (Err(_), Some(e)) => Err(read_error(spec, what, &e)),
        (Err(cause), None) => Err(Error::input(spec, cause)),
    }
}

/// A read or open error of an input, with what it means where the OS error alone says little:
/// `ENOTCONN` on a FUSE mount is a daemon that died.
fn read_error(spec: &str, file: Option<&Path>, e: &io::Error) -> Error {
    if e.raw_os_error() == Some(ENOTCONN) {
        let mnt = match file {
            Some(f) => f.parent().unwrap_or(f),
            None => Path::new(spec),
        };
        return Error::input(spec, fsprof_fuse::daemon::mount::explain_not_connected(mnt));
    }
    let cause = fsprof_fuse::daemon::mount::plain(e);
    match file {
        // The file inside the directory given: named once, as the path that failed.
        Some(f) => Error::input(f.display().to_string(), cause),
        None => Error::input(spec, cause),
    }
}

/// The error of a directory given as a mount of fsprof-fuse or raif whose control file
/// `name` could not be opened (`e`): not such a mount (it has no `.fsprof`), a mount whose
/// daemon has died, or another reason.
pub fn not_a_mount(spec: &str, dir: &Path, name: &str, e: &io::Error) -> Error {
    if e.raw_os_error() == Some(ENOTCONN) {
        return read_error(spec, Some(&dir.join(name)), e);
    }
    if e.kind() == io::ErrorKind::NotFound && !dir.join(MOUNT_PROFILE).exists() {
        return Error::input(
            spec,
            format!(
                "a directory, but not an fsprof-fuse or raif mount (it has no {MOUNT_PROFILE})"
            ),
        );
    }
    Error::input(
        dir.join(name).display().to_string(),
        fsprof_fuse::daemon::mount::plain(e),
    )
}

/// `ENOTCONN`: what reading a FUSE mount whose daemon has gone fails with.
const ENOTCONN: i32 = libc::ENOTCONN;

/// Reads and parses an input: standard input for `-`, `DIR/.fsprof` for a directory (a mount
/// point of fsprof-fuse or raif), a URL's body for `http://...` (a `--metrics` endpoint or a
/// served profile: [`crate::remote`]), the file otherwise.
fn read_input(spec: &str) -> Result<Profile, Error> {
    if crate::remote::is_url(spec) {
        return crate::remote::load(spec);
    }
    if spec == "-" {
        return parse_stream(spec, None, io::stdin().lock());
    }
    let path = Path::new(spec);
    let meta = std::fs::metadata(path).map_err(|e| read_error(spec, None, &e))?;
    if meta.is_dir() {
        let control = path.join(MOUNT_PROFILE);
        let file = profile_store::open::regular(&control)
            .map_err(|e| not_a_mount(spec, path, MOUNT_PROFILE, &e))?;
        return parse_stream(spec, Some(&control), file);
    }
    let file = profile_store::open::regular(path).map_err(|e| read_error(spec, None, &e))?;
    parse_stream(spec, None, file)
}

/// Section `name` about layer `layer`: the one that says `layer=LAYER`, or, for a layer the
/// daemon records into (anything but the syscall level, whose sections always say so), the
/// first that names no layer.
pub fn section_for<'p>(
    p: &'p Profile,
    name: &str,
    layer: &str,
) -> Option<&'p profile_store::Section> {
    let mine = |s: &&profile_store::Section| s.name == name;
    p.sections
        .iter()
        .filter(mine)
        .find(|s| s.attr("layer") == Some(layer))
        .or_else(|| {
            (layer != syscall_trace::LAYER)
                .then(|| {
                    p.sections
                        .iter()
                        .filter(mine)
                        .find(|s| s.attr("layer").is_none())
                })
                .flatten()
        })
}

/// The layer called `name`, or the primary one.
pub fn select_layer<'p>(p: &'p Profile, name: Option<&str>) -> Result<&'p Layer, String> {
    match name {
        None => p
            .primary()
            .ok_or_else(|| "the profile has no layer".to_string()),
        Some(n) => p.layer(n).ok_or_else(|| {
            let names: Vec<&str> = p.layers.iter().map(|l| l.name.as_str()).collect();
            format!("no layer {n} (layers: {})", names.join(", "))
        }),
    }
}

/// The operations of `layer` to show, largest total latency first (ties in listing order):
/// the ones named in `wanted` (an unknown name is an error), or all of them; then the first
/// `top`. Operations no caller waits for come after all the others unless `shares` counts
/// them ([`crate::background`]): they never take one of the `top` places from one a caller
/// waited for.
pub fn select_ops<'l>(
    layer: &'l Layer,
    wanted: &[String],
    top: Option<usize>,
    shares: Shares,
) -> Result<Vec<&'l OpProfile>, Error> {
    for w in wanted {
        if layer.op(w).is_none() {
            let names: Vec<&str> = layer
                .ops_in_listing_order()
                .iter()
                .map(|o| o.name.as_str())
                .collect();
            return Err(Error::usage(
                format!("--op {w}"),
                format!(
                    "no such operation in layer {} (it has: {})",
                    layer.name,
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(" ")
                    }
                ),
            ));
        }
    }
    let mut ops: Vec<&OpProfile> = layer
        .ops
        .iter()
        .filter(|o| wanted.is_empty() || wanted.contains(&o.name))
        .collect();
    sort_by_latency(&mut ops);
    // A stable sort: each group keeps its order by latency.
    ops.sort_by_key(|o| !shares.counts(&o.name));
    if let Some(n) = top {
        ops.truncate(n);
    }
    Ok(ops)
}

/// Sorts operations by total latency, largest first; ties in listing order.
pub fn sort_by_latency(ops: &mut [&OpProfile]) {
    ops.sort_by(|a, b| {
        b.total
            .cmp(&a.total)
            .then_with(|| profile_store::ops::listing_order(&a.name, &b.name))
    });
}

/// Normalizes an operation name given on the command line: `read` and `op_read` mean `OP_READ`;
/// `sys_pread` means the user-level call `SYS_PREAD`.
pub fn op_name(s: &str) -> String {
    let up = s.to_ascii_uppercase();
    if up.starts_with("OP_") || up.starts_with("SYS_") {
        up
    } else {
        format!("OP_{up}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::Resolution;

    #[test]
    fn op_names_are_normalized() {
        assert_eq!(op_name("read"), "OP_READ");
        assert_eq!(op_name("OP_READ"), "OP_READ");
        assert_eq!(op_name("op_write_super"), "OP_WRITE_SUPER");
        assert_eq!(op_name("sys_pread"), "SYS_PREAD");
        assert_eq!(op_name("SYS_OPENAT"), "SYS_OPENAT");
    }

    #[test]
    fn ops_sorted_and_unknown_rejected() {
        let mut l = Layer::new("fuse", Resolution::ONE);
        for (n, t) in [("OP_READ", 10), ("OP_LOOKUP", 30), ("OP_WRITE", 30)] {
            let mut o = OpProfile::new(n, 64, 1);
            o.total = t;
            l.ops.push(o);
        }
        let d = Shares::default();
        let names: Vec<&str> = select_ops(&l, &[], None, d)
            .unwrap()
            .iter()
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(names, ["OP_LOOKUP", "OP_WRITE", "OP_READ"]);
        assert_eq!(select_ops(&l, &[], Some(1), d).unwrap().len(), 1);
        let e = select_ops(&l, &["OP_FOO".into()], None, d).unwrap_err();
        assert!(e.to_string().starts_with("--op OP_FOO: no such operation"));
    }

    #[test]
    fn background_operations_take_no_top_place_unless_counted() {
        let mut l = Layer::new("fuse", Resolution::ONE);
        for (n, t) in [("OP_READ", 10), ("OP_FORGET", 50), ("OP_LOOKUP", 30)] {
            let mut o = OpProfile::new(n, 64, 1);
            o.total = t;
            l.ops.push(o);
        }
        let names = |s: Shares, top| -> Vec<String> {
            select_ops(&l, &[], top, s)
                .unwrap()
                .iter()
                .map(|o| o.name.clone())
                .collect()
        };
        assert_eq!(names(Shares::default(), Some(2)), ["OP_LOOKUP", "OP_READ"]);
        assert_eq!(
            names(Shares::default(), None),
            ["OP_LOOKUP", "OP_READ", "OP_FORGET"]
        );
        let with = Shares {
            with_background: true,
        };
        assert_eq!(names(with, Some(1)), ["OP_FORGET"]);
    }
}
