//! raif's `--metrics` endpoint: the exposition passes `promtool check metrics`, counts the
//! requests exactly, per layer (a branch layer counts the system calls made on it), and says
//! which branch is online and which failed, as `.raif` does; and hostile clients of the endpoint
//! ([`test_support::attack`]) hurt neither the volume nor the endpoint.

use std::fs;

use test_support::attack::{self, Scale};
use test_support::prometheus::{assert_promtool_passes, free_port, get};
use test_support::{Transport, transports};

use crate::fixture::Fixture;

/// The value of the series whose line starts with `series` (name and labels) in `text`.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

transports!(raif_metrics_count_exactly_and_show_branch_health);

fn raif_metrics_count_exactly_and_show_branch_health(t: Transport) {
    let Some(mut f) = Fixture::new(t, "metrics", 3) else {
        return;
    };
    let addr = format!("127.0.0.1:{}", free_port());
    f.mount(&["--level", "5", "--metrics", &addr]);
    for i in 0..23 {
        fs::create_dir(f.m(&format!("d{i}"))).unwrap();
    }
    fs::write(f.m(".raif"), b"fail 2\n").unwrap();
    fs::write(f.m("after"), vec![5u8; 100_000]).unwrap();
    let text = get(&format!("http://{addr}/metrics"));
    assert_promtool_passes(&text);
    let calls = |layer: &str, op: &str| {
        value(
            &text,
            &format!(r#"fsprof_operation_calls_total{{layer="{layer}",op="{op}"}}"#),
        )
    };
    assert_eq!(calls("fuse", "OP_MKDIR"), Some(23.0), "{text}");
    // Each mkdir made a directory on each branch (before the failure).
    for b in 0..3 {
        let made = calls(&format!("branch{b}"), "OP_MKDIR");
        assert!(
            made.is_some_and(|n| n >= 23.0),
            "branch{b}: {made:?}\n{text}"
        );
    }
    let state = |b: usize, s: &str| {
        text.lines()
            .find(|l| {
                l.starts_with("fsprof_raif_branch_state{")
                    && l.contains(&format!(r#"branch="{b}""#))
                    && l.contains(&format!(r#"state="{s}""#))
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    assert_eq!(state(0, "online"), Some(1.0), "{text}");
    assert_eq!(state(1, "online"), Some(1.0), "{text}");
    assert_eq!(state(2, "online"), Some(0.0), "{text}");
    assert_eq!(state(2, "failed"), Some(1.0), "{text}");
    let degraded = value(&text, "fsprof_raif_degraded_writes_total");
    assert!(degraded.is_some_and(|n| n >= 1.0), "{text}");
    assert_eq!(f.unmount(), Some(0));
}

transports!(every_attack_in_small_leaves_the_volume_serving);

/// Each attack on the endpoint, smaller (fsprof-fuse's tests run the full set; the endpoint
/// code is shared), while a workload runs on a RAIF5 volume: no error on the volume, and a
/// normal scrape after each attack. Afterwards every branch is online and scrub is clean.
fn every_attack_in_small_leaves_the_volume_serving(t: Transport) {
    let Some(mut f) = Fixture::new(t, "attack", 3) else {
        return;
    };
    let addr = format!("127.0.0.1:{}", free_port());
    f.mount(&["--level", "5", "--metrics", &addr]);
    let target = attack::Target {
        addr: addr.parse().unwrap(),
        pid: f.pid(),
        dir: f.m("work"),
    };
    for a in attack::ALL {
        attack::run(&target, a, Scale::Smoke);
    }
    let status = f.status();
    assert!(status.contains("branches 3 online 3"), "{status}");
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
    f.scrub_is_clean();
}
