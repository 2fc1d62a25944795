//! The kernel's process events (the netlink process connector, `NETLINK_CONNECTOR` with
//! `CN_IDX_PROC`): a socket that receives a message each time a process forks, execs or
//! changes its name. Root only (`CAP_NET_ADMIN`). The socket is wrapped here; the messages are
//! parsed by safe code ([`parse`]).

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::cvt;

/// `CN_IDX_PROC` and `CN_VAL_PROC` (linux/connector.h).
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
/// `PROC_CN_MCAST_LISTEN` (linux/cn_proc.h).
const PROC_CN_MCAST_LISTEN: u32 = 1;
/// Header sizes: `nlmsghdr` (16), `cn_msg` (20), `proc_event` up to its union (16).
const NLMSG_HDR: usize = 16;
const CN_MSG: usize = 20;
const EVENT_HDR: usize = 16;
/// `proc_event.what` values (linux/cn_proc.h).
const PROC_EVENT_FORK: u32 = 0x1;
const PROC_EVENT_EXEC: u32 = 0x2;
const PROC_EVENT_COMM: u32 = 0x200;

/// A process event that can change what a pid's command name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A new thread or process `pid` (its name is its parent's until it execs).
    Fork(u32),
    /// Thread `pid` ran `execve`: its name is the new program's.
    Exec(u32),
    /// Thread `pid` set its name (`prctl(PR_SET_NAME)`).
    Comm(u32),
}

/// A socket subscribed to the process connector.
#[derive(Debug)]
pub struct ProcEvents(OwnedFd);

impl ProcEvents {
    /// Subscribes; fails without `CAP_NET_ADMIN` (`EPERM`) or without the connector.
    pub fn open() -> io::Result<ProcEvents> {
        // SAFETY: plain socket(2); the returned descriptor is owned below.
        let fd = cvt(unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                libc::NETLINK_CONNECTOR,
            )
        })?;
        // SAFETY: a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: an all-zero sockaddr_nl is valid; family and groups set below.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups = CN_IDX_PROC;
        // SAFETY: addr is a sockaddr_nl of the length given.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        })?;
        let mut msg = [0u8; NLMSG_HDR + CN_MSG + 4];
        let len = msg.len() as u32;
        msg[0..4].copy_from_slice(&len.to_ne_bytes());
        msg[4..6].copy_from_slice(&(libc::NLMSG_DONE as u16).to_ne_bytes());
        let cn = NLMSG_HDR;
        msg[cn..cn + 4].copy_from_slice(&CN_IDX_PROC.to_ne_bytes());
        msg[cn + 4..cn + 8].copy_from_slice(&CN_VAL_PROC.to_ne_bytes());
        msg[cn + 16..cn + 18].copy_from_slice(&4u16.to_ne_bytes());
        msg[cn + CN_MSG..].copy_from_slice(&PROC_CN_MCAST_LISTEN.to_ne_bytes());
        // SAFETY: msg is a readable buffer of msg.len() bytes; the socket is bound to the
        // kernel (nl_pid 0 is the destination by default).
        let sent = unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        cvt(sent as i32)?;
        Ok(ProcEvents(fd))
    }

    /// Makes [`ProcEvents::recv`] fail with `EAGAIN` after waiting `d` (0: wait forever).
    pub fn set_read_timeout(&self, d: std::time::Duration) -> io::Result<()> {
        let tv = libc::timeval {
            tv_sec: d.as_secs() as libc::time_t,
            tv_usec: d.subsec_micros() as libc::suseconds_t,
        };
        // SAFETY: tv is a timeval of the length given.
        cvt(unsafe {
            libc::setsockopt(
                self.0.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                size_of::<libc::timeval>() as libc::socklen_t,
            )
        })
        .map(drop)
    }

    /// Waits for the next message and returns its bytes' count in `buf`.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: buf is writable for buf.len() bytes.
            let n =
                unsafe { libc::recv(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The events in one received datagram `msg` (netlink messages, each a `cn_msg` holding a
/// `proc_event`); others are skipped.
pub fn parse(msg: &[u8]) -> Vec<Event> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(len) = u32_at(msg, at) {
        let len = len as usize;
        if len < NLMSG_HDR || at + len > msg.len() {
            break;
        }
        let ev = at + NLMSG_HDR + CN_MSG;
        let data = ev + EVENT_HDR;
        match u32_at(msg, ev) {
            // fork: parent_pid, parent_tgid, child_pid, child_tgid
            Some(PROC_EVENT_FORK) => out.extend(u32_at(msg, data + 8).map(Event::Fork)),
            // exec and comm: process_pid, process_tgid, ...
            Some(PROC_EVENT_EXEC) => out.extend(u32_at(msg, data).map(Event::Exec)),
            Some(PROC_EVENT_COMM) => out.extend(u32_at(msg, data).map(Event::Comm)),
            _ => {}
        }
        // Messages are 4-byte aligned.
        at += (len + 3) & !3;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(what: u32, data: &[u32]) -> Vec<u8> {
        let mut m = vec![0u8; NLMSG_HDR + CN_MSG + EVENT_HDR];
        m[NLMSG_HDR + CN_MSG..NLMSG_HDR + CN_MSG + 4].copy_from_slice(&what.to_ne_bytes());
        for d in data {
            m.extend_from_slice(&d.to_ne_bytes());
        }
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m
    }

    #[test]
    fn fork_exec_and_comm_events_name_their_pid() {
        let mut m = message(PROC_EVENT_FORK, &[10, 10, 11, 11]);
        m.extend(message(PROC_EVENT_EXEC, &[11, 11]));
        m.extend(message(PROC_EVENT_COMM, &[12, 12, 0, 0, 0, 0]));
        m.extend(message(0x8000_0000, &[13, 13])); // exit: not wanted
        assert_eq!(
            parse(&m),
            [Event::Fork(11), Event::Exec(11), Event::Comm(12)]
        );
        // A cut message ends the parse without a panic.
        assert_eq!(parse(&m[..30]), []);
    }

    #[test]
    fn an_exec_is_seen_as_root() {
        let Ok(ev) = ProcEvents::open() else {
            return; // not root: the callers fall back to a short cache life
        };
        ev.set_read_timeout(std::time::Duration::from_secs(30))
            .unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let mut buf = vec![0u8; 4096];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let n = ev.recv(&mut buf).unwrap();
            if parse(&buf[..n]).contains(&Event::Exec(pid)) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no exec event");
        }
        child.wait().unwrap();
    }
}
