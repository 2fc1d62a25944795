//! `O_DIRECT` through the mount behaves as on LOWER, in every data mode: on ext4 (which wants
//! aligned buffers) aligned direct reads and writes work, reach LOWER without its page cache,
//! and what LOWER refuses (a length that is not a multiple of the block size) is refused; on
//! tmpfs, whatever tmpfs does.

use std::path::Path;

use crate::fixture::{Fixture, FsDir, Transport, sh};

/// The modes in which the kernel sends data to the daemon.
const MODES: [&[&str]; 3] = [&[], &["--writeback"], &["--direct-io"]];

/// 64 KiB that are not all zeros (a misplaced block shows).
fn pattern() -> Vec<u8> {
    (0..65536u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// Runs `dd ARGS` (status=none); returns whether it succeeded, and its error message.
fn dd(args: &str) -> (bool, String) {
    let (c, _, e) = sh(&format!("dd status=none {args}"));
    (c == 0, e.lines().next().unwrap_or("").to_string())
}

/// Resident pages of `path` in the page cache (`fincore`).
fn resident_pages(path: &Path) -> u64 {
    let (c, out, e) = sh(&format!(
        "fincore --noheadings --raw --output PAGES {}",
        path.display()
    ));
    assert_eq!(c, 0, "fincore: {e}");
    out.trim()
        .parse()
        .unwrap_or_else(|_| panic!("fincore said {out:?}"))
}

/// The same direct reads and writes on `dir` (LOWER itself, or the mount) and on `other`:
/// whether each succeeded.
fn direct_io_outcomes(src: &Path, dir: &Path) -> Vec<(bool, String)> {
    let (s, d) = (src.display(), dir.display());
    vec![
        dd(&format!(
            "if={s} of={d}/aligned bs=4096 count=16 oflag=direct"
        )),
        dd(&format!("if={d}/aligned of=/dev/null bs=4096 iflag=direct")),
        dd(&format!(
            "if={d}/aligned of=/dev/null bs=65536 count=1 iflag=direct"
        )),
        dd(&format!("if={s} of={d}/odd bs=1000 count=1 oflag=direct")),
        dd(&format!(
            "if={d}/aligned of=/dev/null bs=1000 count=1 iflag=direct"
        )),
    ]
}

/// Whether each outcome succeeded (messages name different paths).
fn succeeded(o: &[(bool, String)]) -> Vec<bool> {
    o.iter().map(|(ok, _)| *ok).collect()
}

fn direct_io_on_ext4_works_as_on_lower_in_every_mode(t: Transport) {
    let Some(base) = FsDir::ext4() else {
        return;
    };
    for mode in MODES {
        let Some(mut f) = Fixture::new_in("odirect-ext4", base.path(), t) else {
            return;
        };
        let src = f.root.join("src");
        std::fs::write(&src, pattern()).unwrap();
        f.mount(mode);
        // `dd if=/dev/zero of=MNT/d bs=4096 count=4 oflag=direct`, with data that shows.
        let (ok, err) = dd(&format!(
            "if={} of={} bs=4096 count=16 oflag=direct",
            src.display(),
            f.m("d").display()
        ));
        assert!(
            ok,
            "{mode:?}: O_DIRECT write failed: {err}\n{}",
            f.log_text()
        );
        // Written without LOWER's page cache: O_DIRECT reached LOWER.
        assert_eq!(resident_pages(&f.l("d")), 0, "{mode:?}: LOWER's page cache");
        assert_eq!(std::fs::read(f.l("d")).unwrap(), pattern(), "{mode:?}");
        let out = f.root.join("out");
        let (ok, err) = dd(&format!(
            "if={} of={} bs=4096 iflag=direct",
            f.m("d").display(),
            out.display()
        ));
        assert!(
            ok,
            "{mode:?}: O_DIRECT read failed: {err}\n{}",
            f.log_text()
        );
        assert_eq!(std::fs::read(&out).unwrap(), pattern(), "{mode:?}");
        // The same calls succeed and fail on LOWER and through the mount.
        let lower = direct_io_outcomes(&src, &f.lower);
        assert_eq!(
            succeeded(&lower),
            [true, true, true, false, false],
            "{lower:?}"
        );
        std::fs::remove_file(f.l("aligned")).unwrap();
        let _ = std::fs::remove_file(f.l("odd"));
        let mnt = direct_io_outcomes(&src, &f.mnt);
        assert_eq!(succeeded(&mnt), succeeded(&lower), "{mode:?}: {mnt:?}");
        assert!(mnt[3].1.contains("Invalid argument"), "{mode:?}: {mnt:?}");
        assert_eq!(f.log_text(), "", "{mode:?}");
        f.unmount();
    }
}
transports!(direct_io_on_ext4_works_as_on_lower_in_every_mode);

fn direct_io_on_tmpfs_works_as_on_lower_in_every_mode(t: Transport) {
    let Some(base) = FsDir::tmpfs() else {
        return;
    };
    for mode in MODES {
        let Some(mut f) = Fixture::new_in("odirect-tmpfs", base.path(), t) else {
            return;
        };
        let src = f.root.join("src");
        std::fs::write(&src, pattern()).unwrap();
        f.mount(mode);
        let lower = direct_io_outcomes(&src, &f.lower);
        let _ = std::fs::remove_file(f.l("aligned"));
        let _ = std::fs::remove_file(f.l("odd"));
        let mnt = direct_io_outcomes(&src, &f.mnt);
        assert_eq!(
            succeeded(&mnt),
            succeeded(&lower),
            "{mode:?}: {mnt:?} / {lower:?}"
        );
        if mnt[0].0 {
            assert_eq!(
                std::fs::read(f.l("aligned")).unwrap(),
                pattern(),
                "{mode:?}"
            );
        }
        f.unmount();
    }
}
transports!(direct_io_on_tmpfs_works_as_on_lower_in_every_mode);
