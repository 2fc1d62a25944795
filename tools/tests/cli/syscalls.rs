//! `fsprof profile --syscalls`: the syscall level above the mount's layers; `fsprof stack`
//! reads it between `user` and `fuse` and says what the kernel's caches served.

use std::process::{Command, Stdio};

#[test]
fn stack_says_what_the_kernels_caches_served() {
    if !test_support::fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), vec![b'x'; 8192]).unwrap();
    let save = dir.path().join("s.fsprof");
    let o = Command::new(env!("CARGO_BIN_EXE_fsprof"))
        .args(["profile", "--syscalls", "--findings-only", "--save"])
        .arg(&save)
        .arg(dir.path())
        .args([
            "--",
            "sh",
            "-c",
            "for i in 1 2 3 4 5 6 7 8 9 10; do cat f; done",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p = profile_store::text::parse(&std::fs::read_to_string(&save).unwrap()).unwrap();
    assert!(
        p.layer("syscall")
            .is_some_and(|l| l.count("SYS_READ") >= 20)
    );
    let o = Command::new(env!("CARGO_BIN_EXE_fsprof"))
        .args(["stack", save.to_str().unwrap(), "read", "--format", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let levels: Vec<&str> = v["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["level"].as_str().unwrap())
        .collect();
    assert_eq!(levels[..2], ["syscall", "fuse"], "{levels:?}");
    let c = &v["served_from_caches"];
    // Ten cats of one file: reads past the first come from the page cache.
    assert!(c["share"].as_f64().unwrap() > 0.5, "{c}");
    assert!(
        c["syscall_calls"].as_u64() > c["fuse_requests"].as_u64(),
        "{c}"
    );
}
