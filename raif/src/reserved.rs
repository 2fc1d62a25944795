//! The names RAIF keeps for itself at the root of every branch: the marker ([`crate::marker`]),
//! the write-intent log ([`crate::intent`]) and the sum directory ([`crate::sums`]). They are
//! hidden from the mount and left alone by the admin commands' walks.

/// File name of the marker.
pub const MARKER: &str = ".raif-branch";
/// The marker being written (renamed over [`MARKER`]).
pub const MARKER_TMP: &str = ".raif-branch.tmp";
/// File names of the write-intent log (appended to in turn).
pub const LOGS: [&str; 2] = [".raif-intent", ".raif-intent.1"];
/// Entries of the log a mount could not replay (they need a missing branch), kept for one that
/// can.
pub const LOG_KEPT: &str = ".raif-intent.kept";
/// [`LOG_KEPT`] being written.
pub const LOG_KEPT_TMP: &str = ".raif-intent.tmp";
/// The directory that holds the sum files (and overflow files) of block checksums.
pub const SUM_DIR: &str = ".raif-sums";

/// Whether `name` is one of the marker's files.
pub fn is_marker_name(name: &[u8]) -> bool {
    name == MARKER.as_bytes() || name == MARKER_TMP.as_bytes()
}

/// Whether `name` is one of the write-intent log's files.
pub fn is_log_name(name: &[u8]) -> bool {
    LOGS.iter()
        .chain(&[LOG_KEPT, LOG_KEPT_TMP])
        .any(|l| name == l.as_bytes())
}

/// Whether `name` is the sum directory.
pub fn is_sum_dir(name: &[u8]) -> bool {
    name == SUM_DIR.as_bytes()
}

/// Whether `name` is any of RAIF's own names.
pub fn is_own_name(name: &[u8]) -> bool {
    is_marker_name(name) || is_log_name(name) || is_sum_dir(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_names_are_known_and_others_not() {
        for n in [
            MARKER,
            MARKER_TMP,
            LOGS[0],
            LOGS[1],
            LOG_KEPT,
            LOG_KEPT_TMP,
            SUM_DIR,
        ] {
            assert!(is_own_name(n.as_bytes()), "{n}");
        }
        assert!(is_log_name(LOG_KEPT.as_bytes()) && !is_log_name(SUM_DIR.as_bytes()));
        assert!(!is_own_name(b".raif-branchx") && !is_own_name(b"raif-sums"));
    }
}
