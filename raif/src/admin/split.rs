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

use fsprof_fuse::mount::{SetupError, plain, setup_err};
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
    fn a_device_of_endless_zeros_is_refused_at_its_first_byte() {
        // Read whole, /dev/zero took all memory; read as a stream it fails at once. The
        // directory is never made: the profile is read first.
        let never = Path::new("/nonexistent/raif-split-never-made");
        let e = split(Path::new("/dev/zero"), never)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "/dev/zero: line 1: unexpected character '\\0': not an fsprof profile"
        );
        assert!(!never.exists());
    }
}
