//! Trace records: decoding a chunk's payload, and printing a record like strace does.

use std::fmt::Write as _;

use crate::abi::{self, CALLS, get_varint, is_lock_cmd, unzigzag};

/// One item of a record's arguments (see [`crate::abi`] for the letters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// `d`: a descriptor (`AT_FDCWD` is -100).
    Fd(i64),
    /// `p`: a path or string (`None`: a null pointer), cut at 4096 bytes.
    Path(Option<Vec<u8>>),
    /// `x`: flags.
    Flags(u64),
    /// `m`: a mode or mask.
    Mode(u64),
    /// `n`: a size.
    Size(u64),
    /// `o`: an offset or length (-1 for a null offset pointer).
    Off(i64),
    /// `i`: a small integer.
    Int(i64),
    /// `t`: file type and permissions, and size, of a successful stat.
    Stat(Option<(u64, u64)>),
    /// `F` for a lock command: type, whence, start, length.
    Lock([i64; 4]),
    /// `F` for other commands: the integer argument.
    FcntlArg(i64),
}

/// One traced call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    /// Index into [`CALLS`].
    pub call: u8,
    /// What the call's descriptor was ([`abi::KINDS`]: 0 a file, or no descriptor; trace
    /// version 3).
    pub kind: u8,
    /// Clock reading when the call started.
    pub start: u64,
    /// Cycles the call took.
    pub latency: u64,
    /// Return value, or `-errno`.
    pub result: i64,
    /// Arguments, one per signature letter.
    pub args: Vec<Arg>,
}

impl Record {
    /// The profile name, e.g. `SYS_OPENAT`.
    pub fn name(&self) -> &'static str {
        CALLS
            .get(self.call as usize)
            .map_or("SYS_UNKNOWN", |c| c.name)
    }

    /// The C function name, e.g. `openat`.
    pub fn function(&self) -> String {
        self.name()
            .strip_prefix("SYS_")
            .unwrap_or("?")
            .to_ascii_lowercase()
    }

    /// Clock reading when the call returned.
    pub fn end(&self) -> u64 {
        self.start.wrapping_add(self.latency)
    }

    /// The `i`-th descriptor argument.
    pub fn fd(&self, i: usize) -> Option<i64> {
        self.args
            .iter()
            .filter_map(|a| match a {
                Arg::Fd(f) => Some(*f),
                _ => None,
            })
            .nth(i)
    }

    /// The `i`-th string argument (`None` when absent or a null pointer).
    pub fn path(&self, i: usize) -> Option<&[u8]> {
        self.args
            .iter()
            .filter_map(|a| match a {
                Arg::Path(p) => Some(p.as_deref()),
                _ => None,
            })
            .nth(i)
            .flatten()
    }

    /// The first flags argument, 0 when none.
    pub fn flags(&self) -> u64 {
        self.args
            .iter()
            .find_map(|a| match a {
                Arg::Flags(f) => Some(*f),
                _ => None,
            })
            .unwrap_or(0)
    }

    /// The first mode argument, 0 when none.
    pub fn mode(&self) -> u64 {
        self.args
            .iter()
            .find_map(|a| match a {
                Arg::Mode(m) => Some(*m),
                _ => None,
            })
            .unwrap_or(0)
    }

    /// The first size argument.
    pub fn size(&self) -> Option<u64> {
        self.args.iter().find_map(|a| match a {
            Arg::Size(n) => Some(*n),
            _ => None,
        })
    }

    /// The `i`-th offset argument.
    pub fn off(&self, i: usize) -> Option<i64> {
        self.args
            .iter()
            .filter_map(|a| match a {
                Arg::Off(o) => Some(*o),
                _ => None,
            })
            .nth(i)
    }

    /// The `i`-th integer argument.
    pub fn int(&self, i: usize) -> Option<i64> {
        self.args
            .iter()
            .filter_map(|a| match a {
                Arg::Int(v) => Some(*v),
                _ => None,
            })
            .nth(i)
    }

    /// The stat result (type and permission bits, size) of a successful stat call.
    pub fn stat(&self) -> Option<(u64, u64)> {
        self.args.iter().find_map(|a| match a {
            Arg::Stat(s) => *s,
            _ => None,
        })
    }
}

/// Decodes the records of one chunk payload in order; `base` is the chunk's clock base.
pub struct Records<'a> {
    payload: &'a [u8],
    pos: usize,
    prev: u64,
}

impl<'a> Records<'a> {
    /// The records of `payload`.
    pub fn new(payload: &'a [u8], base: u64) -> Records<'a> {
        Records {
            payload,
            pos: 0,
            prev: base,
        }
    }

    /// Decodes the next record into `rec` (reusing its argument vector). `Ok(false)` at the
    /// end; `Err(offset)` where the payload does not decode.
    pub fn next_into(&mut self, rec: &mut Record) -> Result<bool, usize> {
        if self.pos >= self.payload.len() {
            return Ok(false);
        }
        let at = self.pos;
        self.decode(rec).ok_or(at).map(|()| true)
    }

    fn var(&mut self) -> Option<u64> {
        let (v, n) = get_varint(self.payload.get(self.pos..)?)?;
        self.pos += n;
        Some(v)
    }

    fn svar(&mut self) -> Option<i64> {
        self.var().map(unzigzag)
    }

    fn decode(&mut self, rec: &mut Record) -> Option<()> {
        let field = self.var()?;
        let (call, kind) = (
            field & ((1 << abi::KIND_SHIFT) - 1),
            field >> abi::KIND_SHIFT,
        );
        let spec = CALLS.get(usize::try_from(call).ok()?)?;
        if kind as usize >= abi::KINDS.len() {
            return None;
        }
        let delta = self.svar()?;
        rec.call = call as u8;
        rec.kind = kind as u8;
        rec.start = self.prev.wrapping_add(delta as u64);
        self.prev = rec.start;
        rec.latency = self.var()?;
        rec.result = self.svar()?;
        rec.args.clear();
        let mut last_int = 0i64;
        for letter in spec.sig.bytes() {
            let a = match letter {
                b'd' => Arg::Fd(self.svar()?),
                b'p' => {
                    let n = self.var()?;
                    if n == 0 {
                        Arg::Path(None)
                    } else {
                        let n = usize::try_from(n - 1).ok()?;
                        if n > abi::MAX_STRING {
                            return None;
                        }
                        let s = self.payload.get(self.pos..self.pos + n)?.to_vec();
                        self.pos += n;
                        Arg::Path(Some(s))
                    }
                }
                b'x' => Arg::Flags(self.var()?),
                b'm' => Arg::Mode(self.var()?),
                b'n' => Arg::Size(self.var()?),
                b'o' => Arg::Off(self.svar()?),
                b'i' => {
                    last_int = self.svar()?;
                    Arg::Int(last_int)
                }
                b't' => {
                    if rec.result >= 0 {
                        let mode = self.var()?;
                        let size = self.var()?;
                        Arg::Stat(Some((mode, size)))
                    } else {
                        Arg::Stat(None)
                    }
                }
                b'F' => {
                    if is_lock_cmd(last_int) {
                        Arg::Lock([self.svar()?, self.svar()?, self.svar()?, self.svar()?])
                    } else {
                        Arg::FcntlArg(self.svar()?)
                    }
                }
                _ => return None,
            };
            rec.args.push(a);
        }
        Some(())
    }
}

/// Errno names for printing results.
fn errno_name(e: i64) -> Option<&'static str> {
    i32::try_from(e).ok().and_then(profile_store::errno::name)
}

/// A result as strace prints it: `3`, or `-1 ENOENT`.
pub fn format_result(rec: &Record) -> String {
    if rec.result < 0 && rec.result > -4096 {
        match errno_name(-rec.result) {
            Some(n) => format!("-1 {n}"),
            None => format!("-1 errno {}", -rec.result),
        }
    } else {
        rec.result.to_string()
    }
}

const OPEN_FLAGS: &[(i32, &str)] = &[
    (libc::O_CREAT, "O_CREAT"),
    (libc::O_EXCL, "O_EXCL"),
    (libc::O_NOCTTY, "O_NOCTTY"),
    (libc::O_TRUNC, "O_TRUNC"),
    (libc::O_APPEND, "O_APPEND"),
    (libc::O_NONBLOCK, "O_NONBLOCK"),
    (libc::O_DSYNC, "O_DSYNC"),
    (libc::O_DIRECT, "O_DIRECT"),
    (libc::O_LARGEFILE, "O_LARGEFILE"),
    (libc::O_DIRECTORY, "O_DIRECTORY"),
    (libc::O_NOFOLLOW, "O_NOFOLLOW"),
    (libc::O_NOATIME, "O_NOATIME"),
    (libc::O_CLOEXEC, "O_CLOEXEC"),
    (libc::O_PATH, "O_PATH"),
];

/// Open flags as `O_WRONLY|O_CREAT|O_TRUNC`.
pub fn open_flags(f: u64) -> String {
    let f = f as i32;
    let mut s = String::from(match f & libc::O_ACCMODE {
        libc::O_RDONLY => "O_RDONLY",
        libc::O_WRONLY => "O_WRONLY",
        libc::O_RDWR => "O_RDWR",
        _ => "O_ACCMODE",
    });
    let mut rest = f & !libc::O_ACCMODE;
    if rest & libc::O_TMPFILE == libc::O_TMPFILE {
        s.push_str("|O_TMPFILE");
        rest &= !libc::O_TMPFILE;
    }
    if rest & libc::O_SYNC == libc::O_SYNC {
        s.push_str("|O_SYNC");
        rest &= !libc::O_SYNC;
    }
    for &(bit, name) in OPEN_FLAGS {
        if bit != 0 && rest & bit == bit {
            s.push('|');
            s.push_str(name);
            rest &= !bit;
        }
    }
    if rest != 0 {
        let _ = write!(s, "|0{rest:o}");
    }
    s
}

/// `p` quoted as strace quotes a string (`NULL` for none), control characters escaped.
pub fn quote(out: &mut String, p: Option<&[u8]>) {
    let Some(p) = p else {
        out.push_str("NULL");
        return;
    };
    out.push('"');
    escape(out, p);
    out.push('"');
}

/// `p` with quotes, backslashes and bytes outside printable ASCII escaped.
pub fn escape(out: &mut String, p: &[u8]) {
    for &b in p {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
}

fn fd_text(out: &mut String, fd: i64) {
    if fd == libc::AT_FDCWD as i64 {
        out.push_str("AT_FDCWD");
    } else {
        let _ = write!(out, "{fd}");
    }
}

/// A record's call and arguments as strace prints them: `openat(AT_FDCWD, "/x", O_RDONLY)`.
pub fn format_call(rec: &Record) -> String {
    format_call_naming(rec, &|_| None)
}

/// [`format_call`], each descriptor followed by what it is, as `strace -y` does: its path where
/// `name` knows it (`read(3</srv/f>, 4096)`), else the kind of the call's descriptor when it is
/// not a file (`read(0<pipe>, 4096)`).
pub fn format_call_naming(rec: &Record, name: &dyn Fn(i64) -> Option<Vec<u8>>) -> String {
    let mut s = rec.function();
    s.push('(');
    let opens = matches!(rec.call, abi::id::OPEN | abi::id::OPENAT);
    // strace leaves out the mode of an open that creates nothing.
    let creates = rec.flags() as i32 & libc::O_CREAT != 0
        || rec.flags() as i32 & libc::O_TMPFILE == libc::O_TMPFILE;
    let mut first = true;
    let mut fds = 0;
    for a in &rec.args {
        if matches!(a, Arg::Stat(_)) || opens && !creates && matches!(a, Arg::Mode(_)) {
            continue;
        }
        if !first {
            s.push_str(", ");
        }
        first = false;
        match a {
            Arg::Fd(f) => {
                fd_text(&mut s, *f);
                // The kind is the first descriptor's (the one the call is counted under).
                let kind = (fds == 0 && rec.kind != 0).then(|| abi::KINDS[rec.kind as usize]);
                match name(*f) {
                    Some(n) => {
                        s.push('<');
                        escape(&mut s, &n);
                        s.push('>');
                    }
                    None => {
                        if let Some(k) = kind {
                            let _ = write!(s, "<{k}>");
                        }
                    }
                }
                fds += 1;
            }
            Arg::Path(p) => quote(&mut s, p.as_deref()),
            Arg::Flags(f) if opens => s.push_str(&open_flags(*f)),
            Arg::Flags(f) => {
                let _ = write!(s, "{f:#x}");
            }
            Arg::Mode(m) => {
                let _ = write!(s, "0{m:o}");
            }
            Arg::Size(n) => {
                let _ = write!(s, "{n}");
            }
            Arg::Off(o) | Arg::Int(o) | Arg::FcntlArg(o) => {
                let _ = write!(s, "{o}");
            }
            Arg::Lock([t, w, st, l]) => {
                let _ = write!(s, "{{type={t}, whence={w}, start={st}, len={l}}}");
            }
            Arg::Stat(_) => {}
        }
    }
    s.push(')');
    if let Some((mode, size)) = rec.stat() {
        let _ = write!(s, " {{mode=0{mode:o}, size={size}}}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{id, put_varint, zigzag};

    fn enc(items: &[u64]) -> Vec<u8> {
        let mut out = Vec::new();
        for &v in items {
            let mut b = [0u8; 10];
            let n = put_varint(&mut b, v);
            out.extend_from_slice(&b[..n]);
        }
        out
    }

    #[test]
    fn decodes_and_prints_an_openat_and_a_failed_stat() {
        let mut p = enc(&[
            id::OPENAT as u64,
            zigzag(5),
            700,
            zigzag(3),
            zigzag(-100),
            3,
        ]);
        p.extend_from_slice(b"/x");
        p.extend(enc(&[(libc::O_WRONLY | libc::O_CREAT) as u64, 0o644]));
        p.extend(enc(&[id::STAT as u64, zigzag(10), 50, zigzag(-2), 2]));
        p.push(b'y');
        let mut r = Records::new(&p, 1000);
        let mut rec = Record::default();
        assert_eq!(r.next_into(&mut rec), Ok(true));
        assert_eq!(rec.start, 1005);
        assert_eq!(rec.end(), 1705);
        assert_eq!(
            format_call(&rec),
            "openat(AT_FDCWD, \"/x\", O_WRONLY|O_CREAT, 0644)"
        );
        assert_eq!(format_result(&rec), "3");
        assert_eq!(r.next_into(&mut rec), Ok(true));
        assert_eq!(rec.start, 1015);
        assert_eq!(format_call(&rec), "stat(\"y\")");
        assert_eq!(format_result(&rec), "-1 ENOENT");
        assert_eq!(r.next_into(&mut rec), Ok(false));
    }

    #[test]
    fn reports_where_a_payload_stops_decoding() {
        let p = enc(&[id::PREAD as u64, 0, 1, 0, 0]);
        let mut r = Records::new(&p, 0);
        assert_eq!(r.next_into(&mut Record::default()), Err(0));
        let p = enc(&[200, 0, 0, 0]);
        assert_eq!(
            Records::new(&p, 0).next_into(&mut Record::default()),
            Err(0)
        );
    }
}
