//! Where a daemon's log goes, so that a background daemon never throws it away.
//!
//! In the foreground the log goes to standard error. In the background it goes to
//! `--log-file` if given; else to syslog, where the machine has one (`/dev/log` is a socket:
//! rsyslog, or journald's syslog socket); else to a file of the program's,
//! [`default_log_file`]: `/var/log/fsprof/PROGRAM.log` for root, `$XDG_STATE_HOME/fsprof/` (or
//! `~/.local/state/fsprof/`) for others. Every line names the program, its pid and the mount
//! point, so that the daemons of several mounts can share one file. The mount command prints
//! nothing (as mount(8) expects of a helper); `--help`, the man pages and the guide say where
//! the log goes.

use std::io::{self, Write};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

use crate::daemon::setup::{SetupError, setup_err};

/// The syslog socket of the machine.
pub const SYSLOG_SOCKET: &str = "/dev/log";

/// Where the log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogSink {
    /// Standard error (the foreground, and commands that are not daemons).
    Stderr,
    /// Appended to this file (the daemon's standard error is pointed at it).
    File(PathBuf),
    /// One datagram per line to this syslog socket.
    Syslog(PathBuf),
}

impl LogSink {
    /// The sink of a daemon: standard error in the `foreground`; else `log_file`, else the
    /// syslog socket `syslog` if it is one, else [`default_log_file`] of `program` (whose
    /// directory is made).
    pub fn choose(
        program: &str,
        foreground: bool,
        log_file: Option<PathBuf>,
        syslog: &Path,
    ) -> Result<LogSink, SetupError> {
        use std::os::unix::fs::FileTypeExt as _;
        if foreground {
            return Ok(LogSink::Stderr);
        }
        if let Some(f) = log_file {
            return Ok(LogSink::File(f));
        }
        if std::fs::metadata(syslog).is_ok_and(|m| m.file_type().is_socket()) {
            return Ok(LogSink::Syslog(syslog.to_path_buf()));
        }
        let f = default_log_file(program);
        if let Some(dir) = f.parent() {
            std::fs::create_dir_all(dir).map_err(|e| {
                setup_err(format!(
                    "cannot make the log directory {} ({e}): give --log-file",
                    dir.display()
                ))
            })?;
        }
        Ok(LogSink::File(f))
    }

    /// The log file, if the log goes to one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            LogSink::File(p) => Some(p),
            _ => None,
        }
    }
}

/// The log file of a background daemon without `--log-file` and without syslog.
pub fn default_log_file(program: &str) -> PathBuf {
    let dir = if crate::sys::geteuid() == 0 {
        PathBuf::from("/var/log/fsprof")
    } else if let Some(state) = std::env::var_os("XDG_STATE_HOME").filter(|s| !s.is_empty()) {
        PathBuf::from(state).join("fsprof")
    } else {
        let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
        PathBuf::from(home).join(".local/state/fsprof")
    };
    dir.join(format!("{program}.log"))
}

/// Installs the logger at `level` (`RUST_LOG` overrides) for `program`, serving `mnt` if a
/// daemon, writing to `sink`. Lines: `TIME LEVEL PROGRAM[PID] MNT: MESSAGE`; for a command
/// that serves no mount, on standard error, `PROGRAM: LEVEL: MESSAGE`; to syslog,
/// `<PRI>PROGRAM[PID]: MNT: MESSAGE` (facility daemon). With syslog, a panic is logged too
/// (standard error then goes nowhere).
pub fn init(level: &str, program: &str, mnt: Option<&Path>, sink: &LogSink) {
    let mut logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level));
    if std::env::var_os("RUST_LOG").is_none() {
        // fuser warns when its own unmount-on-drop finds the mount already gone, which is how
        // every clean unmount ends here; its own comment calls this not necessarily an error.
        logger.filter_module("fuser::mnt", log::LevelFilter::Error);
        logger.filter_module("fuser::session", log::LevelFilter::Error);
    }
    let program = program.to_string();
    let pid = std::process::id();
    let at = mnt.map_or_else(String::new, |m| format!(" {}", m.display()));
    match sink {
        LogSink::Syslog(path) => {
            let Ok(w) = SyslogWriter::new(path) else {
                return;
            };
            logger.format(move |buf, r| {
                writeln!(
                    buf,
                    "<{}>{program}[{pid}]:{at}: {}",
                    syslog_priority(r.level()),
                    r.args()
                )
            });
            logger.target(env_logger::Target::Pipe(Box::new(w)));
            let default = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                log::error!("{info}");
                default(info);
            }));
        }
        // A command that serves no mount (`raif scrub`) speaks to the person who ran it:
        // `raif: warning: ...`, as its other messages, not a daemon's log lines.
        LogSink::Stderr if mnt.is_none() => {
            logger.format(move |buf, r| {
                let level = match r.level() {
                    log::Level::Error => "error",
                    log::Level::Warn => "warning",
                    log::Level::Info => "info",
                    log::Level::Debug => "debug",
                    log::Level::Trace => "trace",
                };
                writeln!(buf, "{program}: {level}: {}", r.args())
            });
        }
        LogSink::Stderr | LogSink::File(_) => {
            logger.format(move |buf, r| {
                let ts = utc_millis(std::time::SystemTime::now());
                writeln!(buf, "{ts} {} {program}[{pid}]{at}: {}", r.level(), r.args())
            });
        }
    }
    let _ = logger.try_init();
}

/// `t` as RFC 3339 in UTC to the millisecond, `2026-12-02T01:59:13.830Z` (what env_logger's
/// `humantime` feature wrote; that feature pulled a date-time library into every program's
/// build for this one line).
fn utc_millis(t: std::time::SystemTime) -> String {
    let ms = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis()) as u64;
    let (days, in_day) = ((ms / 86_400_000) as i64, ms % 86_400_000);
    // Days since 1970-01-01 to a civil date (the proleptic Gregorian calendar; H. Hinnant's
    // `civil_from_days`).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// The syslog priority of a record: facility daemon (3), severity from the level.
fn syslog_priority(level: log::Level) -> u8 {
    let severity = match level {
        log::Level::Error => 3,
        log::Level::Warn => 4,
        log::Level::Info => 6,
        log::Level::Debug | log::Level::Trace => 7,
    };
    3 * 8 + severity
}

/// Sends each write (one formatted record) as one datagram; a record that cannot be sent
/// (syslog stopped) is dropped, never retried in a loop.
struct SyslogWriter {
    sock: UnixDatagram,
    path: PathBuf,
}

impl SyslogWriter {
    fn new(path: &Path) -> io::Result<SyslogWriter> {
        Ok(SyslogWriter {
            sock: UnixDatagram::unbound()?,
            path: path.to_path_buf(),
        })
    }
}

impl Write for SyslogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let line = buf.strip_suffix(b"\n").unwrap_or(buf);
        let _ = self.sock.send_to(line, &self.path);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_foreground_and_a_given_file_win() {
        let s = Path::new("/nonexistent/log");
        assert_eq!(
            LogSink::choose("p", true, Some("/x".into()), s).unwrap(),
            LogSink::Stderr
        );
        assert_eq!(
            LogSink::choose("p", false, Some("/x".into()), s).unwrap(),
            LogSink::File("/x".into())
        );
    }

    #[test]
    fn a_syslog_socket_is_used_and_anything_else_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("log");
        let _listener = UnixDatagram::bind(&sock).unwrap();
        assert_eq!(
            LogSink::choose("p", false, None, &sock).unwrap(),
            LogSink::Syslog(sock.clone())
        );
        // A plain file at the socket's path is not syslog.
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "").unwrap();
        assert!(matches!(
            LogSink::choose("p", false, None, &plain).unwrap(),
            LogSink::File(_)
        ));
    }

    #[test]
    fn timestamps_are_utc_to_the_millisecond() {
        let at = |ms: u64| utc_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms));
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(1_796_176_753_830), "2026-12-02T01:59:13.830Z");
        assert_eq!(at(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
    }

    #[test]
    fn priorities_are_facility_daemon() {
        assert_eq!(syslog_priority(log::Level::Error), 27);
        assert_eq!(syslog_priority(log::Level::Warn), 28);
        assert_eq!(syslog_priority(log::Level::Debug), 31);
    }

    #[test]
    fn a_syslog_record_is_one_datagram() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("log");
        let rx = UnixDatagram::bind(&sock).unwrap();
        let mut w = SyslogWriter::new(&sock).unwrap();
        w.write_all(b"<28>p[1]: /m: hello\n").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"<28>p[1]: /m: hello");
    }
}
