//! ioctls through the mount: answered as LOWER answers those that do not apply to a file
//! (`ENOTTY`), terminal ones without a word, any other logged once however often it comes.

use std::fs::{self, File};
use std::os::fd::AsFd;

use fsprof_fuse::sys;

use crate::fixture::{Fixture, Transport, errno, sh};

fn ioctls_answer_enotty_as_on_lower_and_are_logged_once(t: Transport) {
    let Some(mut f) = Fixture::mounted("ioctl", t, &[]) else {
        return;
    };
    fs::write(f.l("f"), b"x").unwrap();
    // What isatty(3), so every Python open(), asks: a file answers ENOTTY.
    let on_lower = errno(sys::tcgets(File::open(f.l("f")).unwrap().as_fd()));
    assert_eq!(on_lower, libc::ENOTTY);
    for _ in 0..20 {
        let through = File::open(f.m("f")).unwrap();
        assert_eq!(errno(sys::tcgets(through.as_fd())), on_lower);
    }
    // lsattr asks for the file's flags (FS_IOC_GETFLAGS), which is not passed on: refused
    // every time, logged the first time only.
    let lsattr = format!("lsattr {}", f.m("f").display());
    for _ in 0..5 {
        let (code, _, err) = sh(&lsattr);
        assert_ne!(code, 0, "lsattr through the mount: {err}");
    }
    f.unmount();
    let log = f.log_text();
    let ioctl_lines: Vec<&str> = log.lines().filter(|l| l.contains("ioctl 0x")).collect();
    assert_eq!(ioctl_lines.len(), 1, "{log}");
    assert!(ioctl_lines[0].contains("answered ENOTTY"), "{log}");
    assert!(!log.contains("21505"), "TCGETS was logged:\n{log}");
}
transports!(ioctls_answer_enotty_as_on_lower_and_are_logged_once);
