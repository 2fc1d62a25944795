//! Finding tracefs (mounting it where it is missing) and reading a tracepoint's id and the
//! offsets of its fields from `events/GROUP/NAME/format`, so that no record layout is
//! hard-coded.

use std::path::{Path, PathBuf};

use crate::error::Refusal;
use crate::mountinfo;

/// Where tracefs is mounted when the system mounts it, and where this crate mounts it.
pub const DEFAULT: &str = "/sys/kernel/tracing";

/// A tracefs mount: where it is, and whether this process mounted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracefs {
    /// Its root.
    pub root: PathBuf,
    /// This process mounted it (it was not mounted).
    pub mounted_here: bool,
}

/// The tracefs mount points in `mountinfo` (the text of `/proc/self/mountinfo`).
fn mounted_in(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo::parse(mountinfo)
        .filter(|m| m.fstype == "tracefs")
        .map(|m| m.point)
        .collect()
}

/// Finds tracefs, mounting it at [`DEFAULT`] when it is not mounted anywhere.
pub fn find_or_mount() -> Result<Tracefs, Refusal> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| Refusal::new(format!("cannot read /proc/self/mountinfo: {e}")))?;
    let found = mounted_in(&info);
    if let Some(root) = found
        .iter()
        .find(|p| p.as_path() == Path::new(DEFAULT))
        .or_else(|| found.first())
    {
        return Ok(Tracefs {
            root: root.clone(),
            mounted_here: false,
        });
    }
    let at = Path::new(DEFAULT);
    crate::sys::mount_tracefs(at).map_err(|e| {
        let why = match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => "mounting it needs CAP_SYS_ADMIN".to_string(),
            Some(libc::ENODEV) => "this kernel has no tracefs".to_string(),
            Some(libc::ENOENT) => format!("{DEFAULT} does not exist"),
            _ => e.to_string(),
        };
        Refusal::new(format!(
            "tracefs is not mounted and cannot be mounted at {DEFAULT}: {why}"
        ))
    })?;
    log::warn!("tracefs was not mounted: mounted it at {DEFAULT}");
    Ok(Tracefs {
        root: at.to_path_buf(),
        mounted_here: true,
    })
}

/// One field of a tracepoint record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Byte offset in the record.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
}

/// A tracepoint's id and fields, from its `format` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    /// `GROUP:NAME`.
    pub name: String,
    /// The id perf_event_open takes as `config`.
    pub id: u64,
    fields: Vec<(String, Field)>,
}

impl Format {
    /// Parses the text of a `format` file of tracepoint `name`.
    pub fn parse(name: &str, text: &str) -> Result<Format, Refusal> {
        let mut id = None;
        let mut fields = Vec::new();
        for l in text.lines() {
            let l = l.trim();
            if let Some(v) = l.strip_prefix("ID:") {
                id = v.trim().parse::<u64>().ok();
            } else if let Some(rest) = l.strip_prefix("field:") {
                if let Some(f) = parse_field(rest) {
                    fields.push(f);
                }
            }
        }
        let id =
            id.ok_or_else(|| Refusal::new(format!("tracepoint {name}: no ID in its format")))?;
        Ok(Format {
            name: name.to_string(),
            id,
            fields,
        })
    }

    /// Reads tracepoint `group:event` from tracefs at `root`.
    pub fn read(root: &Path, group: &str, event: &str) -> Result<Format, Refusal> {
        let name = format!("{group}:{event}");
        let p = root.join("events").join(group).join(event).join("format");
        let text = std::fs::read_to_string(&p).map_err(|e| {
            let why = match e.raw_os_error() {
                Some(libc::ENOENT) => "this kernel does not have it".to_string(),
                Some(libc::EACCES) | Some(libc::EPERM) => {
                    format!("{} is not readable (needs root)", p.display())
                }
                _ => format!("{}: {e}", p.display()),
            };
            Refusal::new(format!("tracepoint {name}: {why}"))
        })?;
        Format::parse(&name, &text)
    }

    /// The field `field`, which must exist with one of the `sizes`.
    pub fn field(&self, field: &str, sizes: &[usize]) -> Result<Field, Refusal> {
        match self.fields.iter().find(|(n, _)| n == field) {
            Some((_, f)) if sizes.contains(&f.size) => Ok(*f),
            Some((_, f)) => Err(Refusal::new(format!(
                "tracepoint {}: field {field} has {} bytes, expected {sizes:?}",
                self.name, f.size
            ))),
            None => Err(Refusal::new(format!(
                "tracepoint {}: no field {field} (its format changed)",
                self.name
            ))),
        }
    }
}

/// `TYPE NAME;\toffset:O;\tsize:S;\tsigned:X;` (after `field:`) as the name and its place.
pub(crate) fn parse_field(rest: &str) -> Option<(String, Field)> {
    let mut parts = rest.split(';').map(str::trim);
    let decl = parts.next()?;
    let mut offset = None;
    let mut size = None;
    for p in parts {
        if let Some(v) = p.strip_prefix("offset:") {
            offset = v.parse().ok();
        } else if let Some(v) = p.strip_prefix("size:") {
            size = v.parse().ok();
        }
    }
    let last = decl.split_whitespace().last()?;
    let name = last.split('[').next()?.to_string();
    Some((
        name,
        Field {
            offset: offset?,
            size: size?,
        },
    ))
}

/// Reads a little-endian unsigned field of `size` bytes (1, 2, 4 or 8) at `f` in `rec`; `None`
/// when the record is too short.
#[inline]
pub fn read_uint(rec: &[u8], f: Field) -> Option<u64> {
    let b = rec.get(f.offset..f.offset + f.size)?;
    Some(match f.size {
        1 => b[0] as u64,
        2 => u16::from_ne_bytes([b[0], b[1]]) as u64,
        4 => u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as u64,
        8 => u64::from_ne_bytes(b.try_into().ok()?),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEND: &str = "name: fuse_request_send
ID: 1293
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:dev_t connection;\toffset:8;\tsize:4;\tsigned:0;
\tfield:uint64_t unique;\toffset:16;\tsize:8;\tsigned:0;
\tfield:enum fuse_opcode opcode;\toffset:24;\tsize:4;\tsigned:0;
\tfield:char rwbs[10];\toffset:34;\tsize:10;\tsigned:0;

print fmt: \"connection %u req %llu\", REC->connection
";

    #[test]
    fn fields_and_id_are_read_from_the_format() {
        let f = Format::parse("fuse:fuse_request_send", SEND).unwrap();
        assert_eq!(f.id, 1293);
        assert_eq!(
            f.field("unique", &[8]).unwrap(),
            Field {
                offset: 16,
                size: 8
            }
        );
        assert_eq!(f.field("opcode", &[4]).unwrap().offset, 24);
        assert_eq!(f.field("rwbs", &[10]).unwrap().offset, 34);
        let e = f.field("nothere", &[4]).unwrap_err().to_string();
        assert!(e.contains("no field nothere"), "{e}");
        let e = f.field("unique", &[4]).unwrap_err().to_string();
        assert!(e.contains("8 bytes"), "{e}");
        assert!(Format::parse("x:y", "format:\n").is_err());
    }

    #[test]
    fn tracefs_mounts_are_found_in_mountinfo() {
        let info = "36 35 0:12 / /sys/kernel/tracing rw,nosuid - tracefs nodev rw\n\
                    37 35 0:13 / /tmp/with\\040space rw - tracefs nodev rw\n\
                    38 35 0:14 / /proc rw - proc proc rw\n";
        assert_eq!(
            mounted_in(info),
            [
                PathBuf::from("/sys/kernel/tracing"),
                PathBuf::from("/tmp/with space")
            ]
        );
    }

    #[test]
    fn uints_are_read_at_their_offsets() {
        let mut rec = vec![0u8; 32];
        rec[8..12].copy_from_slice(&0x1234_5678u32.to_ne_bytes());
        rec[16..24].copy_from_slice(&u64::MAX.to_ne_bytes());
        let f4 = Field { offset: 8, size: 4 };
        let f8 = Field {
            offset: 16,
            size: 8,
        };
        assert_eq!(read_uint(&rec, f4), Some(0x1234_5678));
        assert_eq!(read_uint(&rec, f8), Some(u64::MAX));
        assert_eq!(read_uint(&rec[..20], f8), None);
    }
}
