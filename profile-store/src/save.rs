//! Saving a profile to a file, whole or not at all.
//!
//! A profile is written to a temporary file in the destination's directory and renamed over
//! the destination, so a reader (a `fsprof watch`, a script polling the file) never sees half a
//! profile, and a full disk or a crash leaves the previous file as it was.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use crate::{Profile, json, text};

/// The bytes of `p` as [`save`] writes them to `path`: JSON when the file name ends in
/// `.json`, else the text format.
pub fn encode(path: &Path, p: &Profile) -> String {
    if path.extension().is_some_and(|e| e == "json") {
        json::write(p)
    } else {
        text::write(p)
    }
}

/// Writes `p` to `path` (see [`encode`]) atomically: a temporary file beside it, synced,
/// then renamed over it. The file gets mode 0666 less the umask's bits (the kernel applies
/// the umask at the temporary file's `open`), as `std::fs::write` would give it.
pub fn save(path: &Path, p: &Profile) -> std::io::Result<()> {
    write_atomic(path, encode(path, p).as_bytes())
}

/// Writes `bytes` to `path` atomically (a temporary file in the same directory, renamed).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".fsprof-save-")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Layer, Resolution};

    fn profile() -> Profile {
        Profile {
            extra: vec![("source".into(), "test".into())],
            layers: vec![Layer::new("fuse", Resolution::ONE)],
            ..Profile::default()
        }
    }

    #[test]
    fn a_saved_profile_replaces_the_old_file_whole_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.txt");
        std::fs::write(&path, "old").unwrap();
        save(&path, &profile()).unwrap();
        let back = text::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back, profile());
        // Created as `open(2)` creates a file: 0666 less the umask (not tempfile's 0600 alone).
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o600, 0o600, "{mode:o}");
        assert_eq!(mode & 0o111, 0, "{mode:o}");
        let json_path = dir.path().join("p.json");
        save(&json_path, &profile()).unwrap();
        assert!(
            std::fs::read_to_string(&json_path)
                .unwrap()
                .starts_with('{')
        );
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn a_failed_save_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone").join("p.txt");
        assert!(save(&path, &profile()).is_err());
        let file = dir.path().join("p.txt");
        std::fs::write(&file, "old").unwrap();
        // A directory cannot be renamed over: the save fails, the old file stays.
        std::fs::create_dir(dir.path().join("d")).unwrap();
        assert!(save(&dir.path().join("d"), &profile()).is_err());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "old");
    }
}
