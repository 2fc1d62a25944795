//! `raif split PROFILE DIR`: one file per layer, so two branch layers can be compared.
//!
//! `fsprof compare A B` compares the layers of the same name in two profiles, or, when they
//! share no name, their primary layers; a RAIF profile has its branch layers side by side in
//! one. Each layer is written to `DIR/NAME.fsprof` as a profile of that layer alone, under its
//! own name, so `fsprof compare DIR/branch0.fsprof DIR/branch1.fsprof --method totops` scores
//! how evenly two branches were loaded (thesis §9.3), and every report names the layer it
//! shows.
//!
//! A branch layer (and fsprof-fuse's `lower` layer) counts system calls made on the branch,
//! each under the FUSE operation that issued it, not FUSE requests: a create through the mount
//! is two calls on each branch (the file and its record). The split files say so in the layer's
//! metadata, `counts=system_calls`.

use std::path::{Path, PathBuf};

use fsprof_fuse::daemon::mount::{SetupError, plain, setup_err};
use profile_store::Profile;

/// The layer key saying what a layer counts, and its value for system-call layers.
pub const COUNTS: (&str, &str) = ("counts", "system_calls");

/// Whether the layer called `name` counts system calls (a RAIF branch layer, or the lower
/// layer of fsprof-fuse) rather than FUSE requests.
pub fn counts_system_calls(name: &str) -> bool {
    name == "lower"
        || name
            .strip_prefix("branch")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Splits `input` (a profile file, or a mount point: its `.fsprof`) into `dir`; returns the
/// files written.
pub fn split(input: &Path, dir: &Path) -> Result<Vec<PathBuf>, SetupError> {
    let src = if input.is_dir() {
        input.join(".fsprof")
    } else {
        input.to_path_buf()
    };
    // Read as a stream under the parsers' limits: memory stays bounded whatever the file
    // holds, and a file that is no profile fails within its first line.
    let file = std::fs::File::open(&src)
        .map_err(|e| setup_err(format!("{}: {}", src.display(), plain(&e))))?;
    let p =
        profile_store::read_any(file).map_err(|e| setup_err(format!("{}: {e}", src.display())))?;
    // Each name becomes a file name in `dir`, and nothing else: a layer called `../x` or
    // `/etc/x` (the formats allow any name without spaces) must not write outside it.
    if let Some(bad) = p
        .layers
        .iter()
        .find(|l| l.name.contains('/') || l.name.is_empty() || l.name == "." || l.name == "..")
    {
        return Err(setup_err(format!(
            "{}: layer name {:?} cannot be a file name in {}",
            src.display(),
            bad.name,
            dir.display()
        )));
    }
    if dir.exists() && !dir.is_dir() {
        return Err(setup_err(format!("{}: not a directory", dir.display())));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| setup_err(format!("{}: {}", dir.display(), plain(&e))))?;
    let mut written = Vec::new();
    for layer in &p.layers {
        let mut one = Profile {
            layers: vec![layer.clone()],
            ..p.clone()
        };
        let l = &mut one.layers[0];
        if counts_system_calls(&l.name) && !l.extra.iter().any(|(k, _)| k == COUNTS.0) {
            l.extra.push((COUNTS.0.to_string(), COUNTS.1.to_string()));
        }
        let out = dir.join(format!("{}.fsprof", layer.name));
        std::fs::write(&out, profile_store::text::write(&one))
            .map_err(|e| setup_err(format!("{}: {}", out.display(), plain(&e))))?;
        written.push(out);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_call_layers_are_known_by_name() {
        for n in ["branch0", "branch12", "lower"] {
            assert!(counts_system_calls(n), "{n}");
        }
        for n in ["fuse", "branch", "branchx", "user", "fuse@uid:0"] {
            assert!(!counts_system_calls(n), "{n}");
        }
    }

    #[test]
    fn layer_names_that_are_no_file_names_are_refused_before_anything_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        // A profile file of one layer called `name`.
        let profile = |file: &str, name: &str| {
            let src = tmp.path().join(file);
            std::fs::write(
                &src,
                format!(
                    "# fsprof-profile v1\n# clock=tsc cycles_per_sec=1000000000\n# layer={name} \
                     resolution=1 buckets=64 epoch_cycles=0 epochs=1 max_epochs_reached=false\n\
                     OP_READ 1 100\n 1{}\n",
                    " 0".repeat(63)
                ),
            )
            .unwrap();
            src
        };
        for name in ["../../escaped", "/abs/x", "..", "a/b"] {
            let src = profile("evil.fsprof", name);
            let out = tmp.path().join("out").join("d");
            let e = split(&src, &out).unwrap_err().to_string();
            assert!(
                e.contains(&format!("layer name {name:?} cannot be a file name")),
                "{e}"
            );
            assert!(!out.exists(), "{name}");
            assert!(!tmp.path().join("escaped.fsprof").exists());
        }
        // A file where the directory should be: said so.
        let file = tmp.path().join("afile");
        std::fs::write(&file, b"").unwrap();
        let src = profile("ok.fsprof", "fuse");
        let e = split(&src, &file).unwrap_err().to_string();
        assert!(e.ends_with("afile: not a directory"), "{e}");
        assert_eq!(split(&src, &tmp.path().join("good")).unwrap().len(), 1);
    }

    #[test]
    fn a_device_of_endless_zeros_is_refused_at_its_first_byte() {
        // Read whole, /dev/zero took all memory; read as a stream it fails at once. The
        // directory is never made: the profile is read first.
        let never = Path::new("/nonexistent/raif-split-never-made");
        let e = split(Path::new("/dev/zero"), never)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "/dev/zero: line 1: unexpected control character 0x00: not an fsprof profile"
        );
        assert!(!never.exists());
    }
}
