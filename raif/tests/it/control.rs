//! The control files at the root (`.fsprof`, `.fsprof.json`, `.raif`): listed on request, and
//! nothing done to them counted in any layer.

use std::fs;
use std::path::Path;
use test_support::{Transport, transports};

use profile_store::views;
use test_support::sh;

use crate::fixture::Fixture;

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

transports!(list_control_shows_the_control_files_in_the_root_listing);

fn list_control_shows_the_control_files_in_the_root_listing(t: Transport) {
    let Some(mut f) = Fixture::mounted(t, "list-control", 2, &[]) else {
        return;
    };
    // Enough entries that a listing of the root takes several requests.
    let files: Vec<String> = (0..600)
        .map(|i| format!("entry-with-a-longish-name-{i:05}"))
        .collect();
    for name in &files {
        fs::write(f.m(name), b"").unwrap();
    }
    fs::create_dir(f.m("sub")).unwrap();
    let mut plain = files.clone();
    plain.push("sub".into());
    plain.sort();
    // Hidden by default (and the branch markers always).
    assert_eq!(names(&f.mnt), plain);
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());

    f.mount(&["--list-control"]);
    let mut want = plain.clone();
    want.extend([".fsprof", ".fsprof.json", ".raif"].map(String::from));
    want.sort();
    assert_eq!(names(&f.mnt), want);
    // Listed with their attributes: owned by root, mode 0644.
    for name in [".fsprof", ".fsprof.json", ".raif"] {
        let (c, out, e) = sh(&format!("ls -lna '{}' | grep ' {name}$'", f.mnt.display()));
        assert_eq!(c, 0, "{e}");
        assert!(out.starts_with("-rw-r--r-- 1 0 0 "), "{out}");
    }
    assert!(
        fs::read_to_string(f.m(".fsprof"))
            .unwrap()
            .starts_with("# fsprof-profile v2")
    );
    // Other directories are listed as before.
    assert!(names(&f.m("sub")).is_empty());
}

transports!(statfs_of_a_control_file_is_counted_in_no_layer);

/// Regression: a statfs of a control file was counted in every branch layer (the fuse layer
/// left it out, the branches' calls were recorded).
fn statfs_of_a_control_file_is_counted_in_no_layer(t: Transport) {
    let Some(f) = Fixture::mounted(t, "control-statfs", 2, &[]) else {
        return;
    };
    let blocks = |p: &Path| {
        let (c, out, e) = sh(&format!("stat -f -c %b '{}'", p.display()));
        assert_eq!(c, 0, "{e}");
        out
    };
    f.reset();
    // Answered as for the mount.
    let of_control = [blocks(&f.m(".fsprof")), blocks(&f.m(".raif"))];
    let p = f.profile_when(|p| views::check(p, 0).is_empty());
    for l in &p.layers {
        assert_eq!(l.count("OP_STATFS"), 0, "layer {}", l.name);
    }
    // The mount's own statfs is counted, once in each layer.
    let of_root = blocks(&f.mnt);
    assert_eq!(of_control, [of_root.clone(), of_root]);
    let p = f.profile_when(|p| views::check(p, 0).is_empty());
    let names: Vec<&str> = p.layers.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["fuse", "branch0", "branch1"]);
    for l in &p.layers {
        assert_eq!(l.count("OP_STATFS"), 1, "layer {}", l.name);
    }
}

transports!(raif_status_shows_what_applies_to_the_default_level);

/// `.raif` printed `copies=3` for a RAIF5 volume: the `default` line names only what applies
/// to the default level. Its first lines stay in their order (scripts read them), and it says
/// what the profile's branch layers count.
fn raif_status_shows_what_applies_to_the_default_level(t: Transport) {
    let cases: [(&[&str], &str); 4] = [
        (&["--level", "5"], "default level=5 stripe=65536"),
        (
            &["--level", "0", "--stripe", "4K"],
            "default level=0 stripe=4096",
        ),
        (
            &["--level", "1", "--copies", "2"],
            "default level=1 copies=2",
        ),
        (
            &["--level", "4", "--stripe", "16K", "--parity-branch", "1"],
            "default level=4 stripe=16384 parity=1",
        ),
    ];
    for (args, want) in cases {
        let Some(f) = Fixture::mounted(t, "status", 3, args) else {
            return;
        };
        let s = f.status();
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].starts_with("volume "), "{s}");
        assert_eq!(lines[1], want, "{args:?}");
        assert!(lines[2].starts_with("epoch "), "{s}");
        assert!(lines[3].starts_with("mount "), "{s}");
        assert_eq!(lines[4], "branches 3 online 3", "{s}");
        for i in 0..3 {
            assert!(
                lines[5 + i].starts_with(&format!("branch {i} online ")),
                "{s}"
            );
        }
        assert!(
            s.contains("\nprofile fuse: FUSE requests; branch0..branch2: system calls"),
            "{s}"
        );
    }
}
