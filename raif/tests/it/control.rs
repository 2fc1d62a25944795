//! The control files at the root (`.fsprof`, `.fsprof.json`, `.raif`): listed on request, and
//! nothing done to them counted in any layer.

use std::fs;
use std::path::Path;

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

#[test]
fn list_control_shows_the_control_files_in_the_root_listing() {
    let Some(mut f) = Fixture::mounted("list-control", 2, &[]) else {
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
            .starts_with("# fsprof-profile v1")
    );
    // Other directories are listed as before.
    assert!(names(&f.m("sub")).is_empty());
}

/// Regression: a statfs of a control file was counted in every branch layer (the fuse layer
/// left it out, the branches' calls were recorded).
#[test]
fn statfs_of_a_control_file_is_counted_in_no_layer() {
    let Some(f) = Fixture::mounted("control-statfs", 2, &[]) else {
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
