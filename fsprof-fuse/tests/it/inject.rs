//! Injection rules whose path glob has alternatives (`path=/d/*.{a,b}`), from the command line
//! and from a TOML file: the comma inside the braces belongs to the glob.

use std::fs::{self, File};

use crate::fixture::{Fixture, Transport, errno};

/// `d/x.a`, `d/x.b` and `d/x.c` in LOWER.
fn three_files(f: &Fixture) {
    fs::create_dir(f.l("d")).unwrap();
    for n in ["x.a", "x.b", "x.c"] {
        fs::write(f.l("d").join(n), n).unwrap();
    }
}

/// The injection lines of the mount's profile, and its injected count.
fn injections(f: &Fixture) -> (Vec<String>, Option<String>) {
    let p = f.profile();
    let lines = p.section("injections").map(|s| s.lines.clone());
    (
        lines.unwrap_or_default(),
        p.extra("injected").map(String::from),
    )
}

fn a_brace_glob_rule_hits_each_alternative_and_nothing_else(t: Transport) {
    let rule = "op=open,every=1,errno=EACCES,path=/d/*.{a,b}";
    {
        let Some(mut f) = Fixture::new("inject-brace", t) else {
            return;
        };
        three_files(&f);
        f.mount(&["--inject", rule]);
        assert_eq!(errno(File::open(f.m("d/x.a"))), libc::EACCES);
        assert_eq!(errno(File::open(f.m("d/x.b"))), libc::EACCES);
        assert_eq!(fs::read(f.m("d/x.c")).unwrap(), b"x.c");
        let (lines, injected) = injections(&f);
        assert_eq!(lines, [format!("{rule} seen=2 injected=2")]);
        assert_eq!(injected.as_deref(), Some("2"));
    }
    // The same glob from a TOML file, with a delay (counted, not timed).
    let Some(mut f) = Fixture::new("inject-brace-toml", t) else {
        return;
    };
    three_files(&f);
    let rules = f.root.join("rules.toml");
    fs::write(
        &rules,
        "[[rule]]\nop = \"open\"\nevery = 1\ndelay = \"1ms\"\npath = \"/d/*.{a,b}\"\n",
    )
    .unwrap();
    f.mount(&["--inject-file", rules.to_str().unwrap()]);
    for n in ["x.a", "x.b", "x.c"] {
        assert_eq!(fs::read(f.m("d").join(n)).unwrap(), n.as_bytes());
    }
    let (lines, injected) = injections(&f);
    assert_eq!(
        lines,
        ["op=open,every=1,delay=1ms,path=/d/*.{a,b} seen=2 injected=2"]
    );
    assert_eq!(injected.as_deref(), Some("2"));
}
transports!(a_brace_glob_rule_hits_each_alternative_and_nothing_else);
