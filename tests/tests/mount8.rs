//! fsprof-fuse and raif mounted as an administrator mounts any FUSE file system: with mount(8)
//! (`mount -t fuse.fsprof-fuse`, `mount -t fuse.raif`, which run `mount.fuse3` and it the
//! program, with the options as `-o key[=value],...`), from fstab lines, and unmounted with
//! umount(8). Each test runs in a private mount namespace where the binaries under test are
//! first on mount(8)'s helper path and the fstab is the test's own (`mount -T FILE`): nothing
//! of the machine's `/etc/fstab` or `/usr/local` is used or changed.

use std::path::{Path, PathBuf};

use test_support::namespace::PrivateMounts;

/// A scratch directory others may enter (so that another user can reach the mount point), a
/// LOWER with one file, three branches, two mount points, and the namespace.
struct Scene {
    root: PathBuf,
    ns: PrivateMounts,
    _remove: Remove,
}

impl Scene {
    fn new(name: &str) -> Option<Scene> {
        if !tests::fuse_available() {
            return None;
        }
        use std::os::unix::fs::PermissionsExt as _;
        let root = tests::scratch(name);
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        for d in ["lower", "mnt", "b0", "b1", "b2", "raif"] {
            std::fs::create_dir(root.join(d)).unwrap();
        }
        std::fs::write(root.join("lower/f"), "hello\n").unwrap();
        let fuse = canonical(&tests::bin("fsprof-fuse"));
        let raif = canonical(&tests::bin("raif"));
        let mut ns = PrivateMounts::new(&[("fsprof-fuse", &fuse), ("raif", &raif)], &root);
        ns.unmount_on_drop(&root.join("mnt"));
        ns.unmount_on_drop(&root.join("raif"));
        Some(Scene {
            root: root.clone(),
            ns,
            _remove: Remove(root),
        })
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Runs `cmd` in the namespace, `{}` in it standing for the scene's root.
    fn sh(&self, cmd: &str) -> (i32, String, String) {
        self.ns
            .sh(&cmd.replace("{}", &self.root.display().to_string()))
    }

    /// Runs `cmd`, which must succeed and print nothing.
    fn silent(&self, cmd: &str) {
        let (code, out, err) = self.sh(cmd);
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (0, "", ""),
            "`{cmd}` must succeed and print nothing"
        );
    }

    /// The profile header of the mount at `rel` (read through the namespace).
    fn profile(&self, rel: &str) -> String {
        std::fs::read_to_string(self.ns.path(&self.p(rel)).join(".fsprof")).unwrap()
    }

    /// Unmounts `rel` with umount(8) and waits until no daemon of `program` is left.
    fn umount(&self, rel: &str, program: &str) {
        self.silent(&format!("umount {{}}/{rel}"));
        assert!(self.ns.mount_line(&self.p(rel)).is_none());
        let exe = canonical(&tests::bin(program));
        test_support::wait_until("the daemon's exit after umount", || {
            self.ns.pids_of(&exe).is_empty()
        });
    }
}

/// Removes the scene's files once the namespace (declared before it) has unmounted.
struct Remove(PathBuf);

impl Drop for Remove {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap()
}

/// `mount -t fuse.fsprof-fuse L M -o allow_other,cache=exact` mounts with both options in
/// effect and prints nothing; `umount M` ends the daemon.
#[test]
fn mount_t_fuse_fsprof_fuse_takes_its_options_with_o() {
    let Some(s) = Scene::new("mount8-fuse") else {
        return;
    };
    s.silent("mount -t fuse.fsprof-fuse {}/lower {}/mnt -o allow_other,cache=exact");
    let line = s.ns.mount_line(&s.p("mnt")).expect("mounted");
    assert!(line.contains(" - fuse.fsprof-fuse "), "{line}");
    assert!(line.contains("allow_other"), "{line}");
    // allow_other: another user reads through the mount (without it, only root could).
    let (code, out, err) = s.sh("setpriv --reuid=65534 --regid=65534 --clear-groups cat {}/mnt/f");
    assert_eq!((code, out.as_str()), (0, "hello\n"), "{err}");
    // cache=exact: the profile says so, and every stat reaches the daemon.
    let header = s.profile("mnt");
    assert!(header.contains("cache=exact"), "{header}");
    s.umount("mnt", "fsprof-fuse");

    // Without allow_other, the other user is refused: the option above was in effect.
    s.silent("mount -t fuse.fsprof-fuse {}/lower {}/mnt");
    let (code, ..) = s.sh("setpriv --reuid=65534 --regid=65534 --clear-groups cat {}/mnt/f");
    assert_ne!(code, 0);
    s.umount("mnt", "fsprof-fuse");
}

/// mount(8)'s generic options are applied (ro, noexec...) or ignored, never refused; an
/// option of neither kind is refused in one line, and nothing is mounted.
#[test]
fn generic_options_are_applied_or_ignored_and_unknown_ones_refused() {
    let Some(s) = Scene::new("mount8-generic") else {
        return;
    };
    s.silent(
        "mount -t fuse.fsprof-fuse {}/lower {}/mnt -o ro,noexec,nosuid,nodev,noatime,\
         relatime,lazytime,defaults,nofail,_netdev,x-systemd.automount,comment=x,\
         default_permissions,fsname=profiled,subtype=prof,slow=1ms",
    );
    let line = s.ns.mount_line(&s.p("mnt")).expect("mounted");
    let fields: Vec<&str> = line.split(' ').collect();
    // Mount options (field 6): ro, noexec, nosuid, nodev, noatime; then type and source.
    for flag in ["ro", "noexec", "nosuid", "nodev", "noatime"] {
        assert!(fields[5].split(',').any(|f| f == flag), "{flag}: {line}");
    }
    assert!(line.contains(" - fuse.prof profiled "), "{line}");
    let (code, _, err) = s.sh("touch {}/mnt/new");
    assert_ne!(code, 0);
    assert!(err.contains("Read-only file system"), "{err}");
    assert!(s.profile("mnt").contains("slow_threshold_ns"));
    s.umount("mnt", "fsprof-fuse");

    let (code, out, err) =
        s.sh("mount -t fuse.fsprof-fuse {}/lower {}/mnt -o allow_other,bogus_option=1");
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        err.contains("fsprof-fuse: -o bogus_option=1: unknown option"),
        "{err}"
    );
    assert!(s.ns.mount_line(&s.p("mnt")).is_none());
}

/// An fstab line mounts with `mount M` (here `mount -T FSTAB M`, the test's own fstab), `mount
/// -a` mounts what is not mounted yet and leaves the rest, and `umount` ends both daemons:
/// fsprof-fuse's line and raif's (branches joined by ':').
#[test]
fn fstab_lines_mount_with_mount_m_and_mount_a() {
    let Some(s) = Scene::new("mount8-fstab") else {
        return;
    };
    let root = s.root.display().to_string();
    let fstab = s.p("fstab");
    std::fs::write(
        &fstab,
        format!(
            "# the test's own fstab\n\
             {root}/lower {root}/mnt fuse.fsprof-fuse allow_other,cache=exact,nofail,_netdev,x-systemd.automount 0 0\n\
             {root}/b0:{root}/b1:{root}/b2 {root}/raif fuse.raif level=5,stripe=4K,nofail 0 0\n"
        ),
    )
    .unwrap();
    s.silent("mount -T {}/fstab {}/mnt");
    let line = s.ns.mount_line(&s.p("mnt")).expect("mounted from fstab");
    assert!(line.contains("allow_other"), "{line}");
    assert!(s.profile("mnt").contains("cache=exact"));
    // -a: raif's line is mounted, fsprof-fuse's (mounted already) is left as it is.
    s.silent("mount -T {}/fstab -a");
    assert!(s.ns.mount_line(&s.p("raif")).is_some());
    let raif = std::fs::read_to_string(s.ns.path(&s.p("raif")).join(".raif")).unwrap();
    assert!(raif.contains("default level=5"), "{raif}");
    s.silent("mount -T {}/fstab -a");
    s.umount("raif", "raif");
    s.umount("mnt", "fsprof-fuse");
}

/// `mount -t fuse.raif B0:B1:B2 M -o level=5` makes a RAIF5 volume: a file is striped over
/// the three branches with rotating parity, and reads back whole.
#[test]
fn mount_t_fuse_raif_takes_branches_joined_by_colons() {
    let Some(s) = Scene::new("mount8-raif") else {
        return;
    };
    s.silent("mount -t fuse.raif {}/b0:{}/b1:{}/b2 {}/raif -o level=5,stripe=4K,cache=exact");
    let line = s.ns.mount_line(&s.p("raif")).expect("mounted");
    let r = s.root.display();
    assert!(
        line.contains(&format!(" - fuse.raif {r}/b0:{r}/b1:{r}/b2 ")),
        "{line}"
    );
    let status = std::fs::read_to_string(s.ns.path(&s.p("raif")).join(".raif")).unwrap();
    assert!(status.contains("default level=5"), "{status}");
    assert!(status.contains("branches 3 online 3"), "{status}");
    let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
    let file = s.ns.path(&s.p("raif")).join("striped");
    std::fs::write(&file, &data).unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), data);
    // Each branch holds a part: two data stripes and one parity stripe of every row.
    for b in ["b0", "b1", "b2"] {
        let part = std::fs::metadata(s.p(b).join("striped")).unwrap().len();
        assert!(part > 0 && part < data.len() as u64, "{b}: {part}");
    }
    s.umount("raif", "raif");
}
