//! Small configuration files (injection rules, RAIF policies): read with a bound, and their
//! TOML errors said in one line with the line they are on.

/// Largest rules or policy file read (`--inject-file`, raif's `--policy`): such a file is a few
/// lines, and a larger one (or `/dev/zero`) is a mistake, not something to read to the end.
pub const SMALL_FILE_MAX: u64 = 1 << 20;

/// A TOML parse error of `text` as one line, with the line it is on.
pub fn toml_error(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(s) => format!("line {}: {}", line_of(text, s.start), e.message()),
        None => e.message().to_string(),
    }
}

/// The line (from 1) of byte offset `at` of `text`.
pub fn line_of(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The text of a small configuration file, read to at most [`SMALL_FILE_MAX`] bytes.
pub fn read_small_file(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(SMALL_FILE_MAX + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > SMALL_FILE_MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than {} KiB (such a file holds a few rules)",
                SMALL_FILE_MAX >> 10
            ),
        ));
    }
    Ok(text)
}
