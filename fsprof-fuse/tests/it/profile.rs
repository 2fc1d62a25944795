//! The profile: exact counts in the default mode, reset, epochs, layers, control files.

use std::fs::{self, File};
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use profile_store::views;

use crate::fixture::{Fixture, Transport, errno, sh};

/// 100 mkdir and 50 creates with 3 writes each.
fn known_workload(f: &Fixture) {
    for i in 0..100 {
        fs::create_dir(f.m(&format!("dir{i}"))).unwrap();
    }
    for i in 0..50 {
        let mut w = File::create(f.m(&format!("dir{i}/file"))).unwrap();
        for _ in 0..3 {
            w.write_all(b"0123456789").unwrap();
        }
    }
}

fn a_known_workload_gives_exact_counts(t: Transport) {
    // Pinned to the preset that caches nothing, so that no default of the kernel's caches
    // changes what is counted.
    let args = ["--layers", "fuse,lower", "--cache", "exact"];
    let Some(f) = Fixture::mounted("exact", t, &args) else {
        return;
    };
    f.reset();
    known_workload(&f);
    // The kernel sends RELEASE after close(2) returns: wait for the 50 (bounded), and for every
    // call's latency to be recorded.
    let p = f.profile_when(|p| {
        p.layer("fuse").unwrap().count("OP_RELEASE") >= 50 && views::check(p, 0).is_empty()
    });
    // The profile says which transport carried the requests.
    assert_eq!(p.extra("transport"), Some(t.name()));
    let fuse = p.layer("fuse").unwrap();
    assert_eq!(fuse.count("OP_MKDIR"), 100);
    assert_eq!(fuse.count("OP_CREATE"), 50);
    assert_eq!(fuse.count("OP_WRITE"), 150);
    // LOWER is local: closes are not forwarded (FOPEN_NOFLUSH, --flush auto).
    assert_eq!(fuse.count("OP_FLUSH"), 0);
    assert_eq!(fuse.count("OP_RELEASE"), 50);
    // Each write(2) is one pwrite(2) below; mkdir is mkdirat, then the O_PATH openat, statx
    // and name_to_handle_at of the new entry (every lower call is counted).
    let lower = p.layer("lower").unwrap();
    assert_eq!(lower.count("OP_WRITE"), 150);
    assert_eq!(lower.count("OP_MKDIR"), 400);
    // Consistent at quiescence: every bucket sum equals its count.
    let problems = views::check(&p, 0);
    assert!(problems.is_empty(), "{problems:?}");
    for o in &fuse.ops {
        assert_eq!(o.bucket_sum(), o.count as u128, "{}", o.name);
    }
    // The JSON file holds the same snapshot content.
    let j = profile_store::json::parse(&fs::read_to_string(f.m(".fsprof.json")).unwrap()).unwrap();
    assert_eq!(j.layer("fuse").unwrap().count("OP_WRITE"), 150);
}
transports!(a_known_workload_gives_exact_counts);

fn writes_and_truncates_reset_the_profile(t: Transport) {
    let Some(f) = Fixture::mounted("reset", t, &[]) else {
        return;
    };
    fs::create_dir(f.m("a")).unwrap();
    assert_eq!(f.profile().layers[0].count("OP_MKDIR"), 1);
    f.reset();
    let p = f.profile();
    assert_eq!(p.layers[0].count("OP_MKDIR"), 0);
    assert!(p.layers[0].ops.iter().all(|o| o.name != "OP_MKDIR"));
    fs::create_dir(f.m("b")).unwrap();
    assert_eq!(f.profile().layers[0].count("OP_MKDIR"), 1);
    // `: > MNT/.fsprof` (open with O_TRUNC) resets too, and so does the JSON file.
    let (c, _, e) = sh(&format!(": > '{}'", f.m(".fsprof").display()));
    assert_eq!(c, 0, "{e}");
    assert_eq!(f.profile().layers[0].count("OP_MKDIR"), 0);
    fs::create_dir(f.m("c")).unwrap();
    fs::write(f.m(".fsprof.json"), b"x").unwrap();
    assert_eq!(f.profile().layers[0].count("OP_MKDIR"), 0);
    // Reading the control files is not counted.
    for _ in 0..5 {
        let _ = f.profile();
    }
    let p = f.profile();
    assert_eq!(p.layers[0].count("OP_READ"), 0);
    assert_eq!(p.layers[0].count("OP_OPEN"), 0);
}
transports!(writes_and_truncates_reset_the_profile);

fn epochs_appear_with_time_lapse(t: Transport) {
    let Some(f) = Fixture::mounted("epochs", t, &["--epoch", "100ms", "--max-epochs", "64"]) else {
        return;
    };
    f.reset();
    fs::create_dir(f.m("early")).unwrap();
    std::thread::sleep(Duration::from_millis(350));
    fs::create_dir(f.m("late")).unwrap();
    // mkdir(2) returns when the reply is sent, before the daemon records the call's latency.
    let p = f.quiescent_profile();
    let l = &p.layers[0];
    assert!(l.epoch_cycles > 0);
    assert!(l.epochs >= 4, "{} epochs", l.epochs);
    let mkdir = l.op("OP_MKDIR").unwrap();
    let per_epoch: Vec<u64> = mkdir.epochs.iter().map(|e| e.iter().sum()).collect();
    assert_eq!(per_epoch.iter().sum::<u64>(), 2);
    let first = per_epoch.iter().position(|&n| n > 0).unwrap();
    let last = per_epoch.iter().rposition(|&n| n > 0).unwrap();
    assert!(last >= first + 3, "{per_epoch:?}");
}
transports!(epochs_appear_with_time_lapse);

fn control_files_are_hidden_and_protected(t: Transport) {
    let Some(f) = Fixture::mounted("control", t, &[]) else {
        return;
    };
    fs::write(f.m("data"), b"fsprof-profile appears only in this file\n").unwrap();
    let (c, out, _) = sh(&format!("ls -a '{}'", f.mnt.display()));
    assert_eq!(c, 0);
    assert!(!out.contains(".fsprof"), "{out}");
    // grep -r sees only the regular file.
    let (c, out, _) = sh(&format!("grep -rl 'fsprof-profile' '{}'", f.mnt.display()));
    assert_eq!(c, 0);
    assert_eq!(out.trim(), f.m("data").display().to_string());
    // But they answer lookup/getattr/open.
    let m = fs::metadata(f.m(".fsprof")).unwrap();
    assert_eq!((m.mode() & 0o7777, m.uid(), m.gid()), (0o644, 0, 0));
    assert!(m.is_file());
    assert!(
        fs::read_to_string(f.m(".fsprof"))
            .unwrap()
            .starts_with("# fsprof-profile v2\n")
    );
    assert!(
        fs::read_to_string(f.m(".fsprof.json"))
            .unwrap()
            .starts_with("{\"format\":\"fsprof-profile\"")
    );
    // Creating, removing, renaming them: EPERM.
    assert_eq!(errno(fs::remove_file(f.m(".fsprof"))), libc::EPERM);
    assert_eq!(errno(fs::rename(f.m(".fsprof"), f.m("x"))), libc::EPERM);
    assert_eq!(
        errno(fs::rename(f.m("data"), f.m(".fsprof.json"))),
        libc::EPERM
    );
    assert_eq!(errno(fs::create_dir(f.m(".fsprof"))), libc::EEXIST);
    assert_eq!(errno(fs::hard_link(f.m(".fsprof"), f.m("l"))), libc::EPERM);
    // Only at the root: deeper names are ordinary.
    fs::create_dir(f.m("sub")).unwrap();
    fs::write(f.m("sub/.fsprof"), b"plain").unwrap();
    assert_eq!(fs::read(f.l("sub/.fsprof")).unwrap(), b"plain");
}
transports!(control_files_are_hidden_and_protected);

fn a_lower_entry_of_the_same_name_is_hidden_and_control_files_can_be_renamed(t: Transport) {
    let Some(mut f) = Fixture::new("control-clash", t) else {
        return;
    };
    fs::write(f.l(".fsprof"), b"lower's own file").unwrap();
    f.mount(&[]);
    assert!(
        fs::read_to_string(f.m(".fsprof"))
            .unwrap()
            .starts_with("# fsprof-profile v2")
    );
    assert!(f.log_text().contains("hidden"), "{}", f.log_text());
    f.unmount();
    f.mount(&["--control-name", ".prof"]);
    assert_eq!(fs::read(f.m(".fsprof")).unwrap(), b"lower's own file");
    assert!(
        fs::read_to_string(f.m(".prof"))
            .unwrap()
            .starts_with("# fsprof-profile v2")
    );
    assert!(f.m(".prof.json").exists());
}
transports!(a_lower_entry_of_the_same_name_is_hidden_and_control_files_can_be_renamed);

fn no_profile_serves_no_control_files(t: Transport) {
    let Some(f) = Fixture::mounted("noprofile", t, &["--no-profile"]) else {
        return;
    };
    fs::create_dir(f.m("a")).unwrap();
    assert_eq!(errno(fs::metadata(f.m(".fsprof"))), libc::ENOENT);
}
transports!(no_profile_serves_no_control_files);

fn flush_always_forwards_every_close(t: Transport) {
    let Some(f) = Fixture::mounted("flush", t, &["--flush", "always"]) else {
        return;
    };
    f.reset();
    // The files are opened in a process of their own (this test binary running only
    // `flush_workload`): a process that another test's thread forks would inherit this one's
    // descriptors and close them at its exec, each close one more FLUSH.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "profile::flush_workload", "--ignored"])
        .args(["--test-threads", "1", "--nocapture"])
        .env(FLUSH_WORKLOAD, &f.mnt)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("1 passed"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = f.profile_when(|p| p.layers[0].count("OP_RELEASE") >= 11);
    // One FLUSH per close(2): ten writes, then the two closes of the duplicated descriptor.
    assert_eq!(p.layers[0].count("OP_FLUSH"), 12);
    assert_eq!(p.layers[0].count("OP_RELEASE"), 11);
}
transports!(flush_always_forwards_every_close);

const FLUSH_WORKLOAD: &str = "FSPROF_TEST_FLUSH_WORKLOAD";

/// [`flush_always_forwards_every_close`]'s closes: ten files written, then one opened and
/// duplicated, and both descriptors closed, in the mount `$FSPROF_TEST_FLUSH_WORKLOAD`.
#[test]
#[ignore = "run by flush_always_forwards_every_close, in a process of its own"]
fn flush_workload() {
    let mnt = std::path::PathBuf::from(std::env::var_os(FLUSH_WORKLOAD).expect(FLUSH_WORKLOAD));
    for i in 0..10 {
        fs::write(mnt.join(format!("f{i}")), b"x").unwrap();
    }
    let h = File::open(mnt.join("f0")).unwrap();
    let dup = h.try_clone().unwrap();
    drop(h);
    drop(dup);
}

fn kernel_passthrough_serves_data_without_the_daemon_and_says_so(t: Transport) {
    let Some(f) = Fixture::mounted("kpassthrough", t, &["--passthrough"]) else {
        return;
    };
    f.reset();
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 + i / 3) as u8).collect();
    fs::write(f.m("big"), &data).unwrap();
    assert_eq!(fs::read(f.m("big")).unwrap(), data);
    assert_eq!(fs::read(f.l("big")).unwrap(), data);
    let p = f.profile();
    assert_eq!(p.extra("not_profiled"), Some("OP_READ,OP_WRITE"));
    if p.layers[0].count("OP_WRITE") > 0 {
        // A kernel without FUSE passthrough: the daemon served the data and said why.
        assert!(
            f.log_text().contains("kernel passthrough not available"),
            "{}",
            f.log_text()
        );
        return;
    }
    assert_eq!(p.layers[0].count("OP_READ"), 0);
    assert!(p.layers[0].count("OP_CREATE") >= 1);
}
transports!(kernel_passthrough_serves_data_without_the_daemon_and_says_so);

fn requests_on_control_files_are_not_counted(t: Transport) {
    let Some(f) = Fixture::mounted("control-uncounted", t, &["--layers", "fuse,lower"]) else {
        return;
    };
    let ctl = File::open(f.m(".fsprof")).unwrap();
    f.reset();
    // statfs of a control file answers for the mount and counts nothing, in either layer.
    let (c, out, e) = sh(&format!("stat -f -c %b '{}'", f.m(".fsprof").display()));
    assert_eq!(c, 0, "{e}");
    let (c, root, e) = sh(&format!("stat -f -c %b '{}'", f.mnt.display()));
    assert_eq!(c, 0, "{e}");
    assert_eq!(out, root);
    // poll of a control file: ready, not counted.
    let ready = fsprof_fuse::sys::poll(ctl.as_fd(), libc::POLLIN, 1000).unwrap();
    assert!(ready & libc::POLLIN != 0, "{ready:#x}");
    // The same requests on the root and a regular file are counted (the kernel stops asking
    // for POLL after the passthrough's ENOSYS, which is why the control file came first).
    fs::write(f.m("plain"), b"x").unwrap();
    let plain = File::open(f.m("plain")).unwrap();
    fsprof_fuse::sys::poll(plain.as_fd(), libc::POLLIN, 1000).unwrap();
    let p = f.profile_when(|p| views::check(p, 0).is_empty() && p.layers[0].count("OP_POLL") > 0);
    let (fuse, lower) = (p.layer("fuse").unwrap(), p.layer("lower").unwrap());
    assert_eq!(fuse.count("OP_STATFS"), 1, "only the root's statfs");
    assert_eq!(lower.count("OP_STATFS"), 1, "only the root's statfs");
    assert_eq!(fuse.count("OP_POLL"), 1, "only the regular file's poll");
    drop((ctl, plain));
}
transports!(requests_on_control_files_are_not_counted);

fn list_control_shows_the_control_files_in_the_root_listing(t: Transport) {
    let Some(mut f) = Fixture::new("list-control", t) else {
        return;
    };
    fs::write(f.l(".fsprof"), b"lower's own, hidden").unwrap();
    fs::create_dir(f.l("sub")).unwrap();
    // Enough entries that a listing of the root takes several requests.
    for i in 0..3000 {
        fs::write(f.l(&format!("entry-with-a-longish-name-{i:05}")), b"").unwrap();
    }
    f.mount(&["--list-control"]);
    let names = |dir: &std::path::Path| -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    let listed = names(&f.mnt);
    assert_eq!(listed.len(), 3000 + 3, "{:?}", &listed[..5]);
    assert_eq!(&listed[..2], [".fsprof", ".fsprof.json"]);
    assert_eq!(listed.last().map(String::as_str), Some("sub"));
    // Listed with attributes (readdirplus and stat): owned by root, mode 0644.
    let (c, out, e) = sh(&format!(
        "ls -la '{}' | grep -c ' \\.fsprof'",
        f.mnt.display()
    ));
    assert_eq!((c, out.trim()), (0, "2"), "{e}");
    let (c, out, e) = sh(&format!(
        "ls -lna '{}' | grep ' \\.fsprof$'",
        f.mnt.display()
    ));
    assert_eq!(c, 0, "{e}");
    assert!(out.starts_with("-rw-r--r-- 1 0 0 "), "{out}");
    // The LOWER file of the same name stays hidden.
    assert!(
        fs::read_to_string(f.m(".fsprof"))
            .unwrap()
            .starts_with("# fsprof-profile v2")
    );
    // The listing of the control files is not counted: listing the root costs as many
    // requests as listing a plain directory with entries of the same sizes (plain READDIR only
    // here, so the kernel's choice of READDIRPLUS cannot make the two differ).
    f.unmount();
    fs::remove_dir(f.l("sub")).unwrap();
    fs::remove_file(f.l(".fsprof")).unwrap();
    let twin = "entry-with-a-longish-name-twin0";
    fs::create_dir(f.l(twin)).unwrap();
    for i in 0..3001 {
        fs::write(
            f.l(&format!("{twin}/entry-with-a-longish-name-{i:05}")),
            b"",
        )
        .unwrap();
    }
    f.mount(&["--list-control", "--caps-off", "readdirplus"]);
    let listings = |dir: &std::path::Path| {
        f.reset();
        let (c, _, e) = sh(&format!("ls -a '{}' > /dev/null", dir.display()));
        assert_eq!(c, 0, "{e}");
        let p = f.quiescent_profile();
        (
            p.layers[0].count("OP_READDIR"),
            p.layers[0].count("OP_READDIRPLUS"),
        )
    };
    let (root, twin) = (listings(&f.mnt), listings(&f.m(twin)));
    assert!(root.0 > 2, "{root:?}");
    assert_eq!(root, twin);
}
transports!(list_control_shows_the_control_files_in_the_root_listing);

fn only_root_or_the_mounting_user_may_reset_with_allow_other(t: Transport) {
    let Some(f) = Fixture::mounted("reset-others", t, &["--allow-other"]) else {
        return;
    };
    fs::create_dir(f.m("a")).unwrap();
    let prof = f.m(".fsprof").display().to_string();
    for cmd in [format!("echo reset > {prof}"), format!(": > {prof}")] {
        let (c, _, e) = sh(&format!(
            "setpriv --reuid=65534 --regid=65534 --clear-groups sh -c '{cmd}'"
        ));
        assert_ne!(c, 0, "{cmd}: another user reset the profile");
        assert!(e.contains("Permission denied"), "{e}");
        assert_eq!(f.profile().layers[0].count("OP_MKDIR"), 1, "{cmd}");
    }
    // Others may still read it.
    let (c, out, e) = sh(&format!(
        "setpriv --reuid=65534 --regid=65534 --clear-groups cat {prof}"
    ));
    assert_eq!(c, 0, "{e}");
    assert!(out.starts_with("# fsprof-profile v2"));
    // Root (here also the mounting user) may.
    f.reset();
    assert_eq!(f.profile().layers[0].count("OP_MKDIR"), 0);
}
transports!(only_root_or_the_mounting_user_may_reset_with_allow_other);
