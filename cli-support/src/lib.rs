//! # cli-support
//!
//! What every fsprof program (`fsprof`, `fsprof-fuse`, `raif`, `fsprof-postmark`,
//! `fsprof-bench`) does the same way at its command line:
//!
//! * [`usage_error`]: a clap error as one line on standard error, exit code 2;
//! * [`docs_request`] and [`write_docs`]: `PROGRAM --generate-docs DIR` writes the program's man
//!   pages (one per subcommand too) and its bash, zsh and fish completions into DIR, for
//!   `install.sh` (a hidden option, checked before the arguments are parsed, since the
//!   program's own required arguments would otherwise be asked for).
//!
//! ```no_run
//! use clap::{CommandFactory, Parser};
//!
//! #[derive(Parser)]
//! struct Args {
//!     dir: std::path::PathBuf,
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     if let Some(dir) = cli_support::docs_request() {
//!         return cli_support::docs_main(Args::command(), &dir);
//!     }
//!     match Args::try_parse() {
//!         Ok(_) => std::process::ExitCode::SUCCESS,
//!         Err(e) => cli_support::usage_error("example", e),
//!     }
//! }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap_complete::Shell;

/// The hidden option that asks for the documentation files.
pub const DOCS_OPTION: &str = "--generate-docs";

/// A clap error as one line on stderr, `PROGRAM: MESSAGE (see --help)`, exit code 2 (`--help`
/// and `--version` print as usual).
pub fn usage_error(program: &str, e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        e.exit();
    }
    eprintln!(
        "{program}: {} (see --help)",
        one_line(&e.render().to_string())
    );
    ExitCode::from(2)
}

/// The message part of a rendered clap error, joined into one line.
pub fn one_line(rendered: &str) -> String {
    rendered
        .lines()
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
        .map(|l| l.trim().trim_start_matches("error: "))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The directory of `PROGRAM --generate-docs DIR`, if that is how the program was started (the
/// option alone, with its directory).
pub fn docs_request() -> Option<PathBuf> {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    match args.as_slice() {
        [opt, dir] if opt == DOCS_OPTION => Some(PathBuf::from(dir)),
        _ => None,
    }
}

/// Writes `cmd`'s documentation into `dir` (created if missing): `man1/NAME.1`, one
/// `man1/NAME-SUB.1` per visible subcommand (and theirs), and the completions
/// `bash/NAME`, `zsh/_NAME` and `fish/NAME.fish`. Returns the files written, sorted.
pub fn write_docs(mut cmd: clap::Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    let name = cmd.get_name().to_string();
    let man = dir.join("man1");
    std::fs::create_dir_all(&man)?;
    clap_mangen::generate_to(cmd.clone(), &man)?;
    let mut written: Vec<PathBuf> = std::fs::read_dir(&man)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&name) && n.ends_with(".1"))
        })
        .collect();
    written.sort();
    for (shell, sub, file) in [
        (Shell::Bash, "bash", name.clone()),
        (Shell::Zsh, "zsh", format!("_{name}")),
        (Shell::Fish, "fish", format!("{name}.fish")),
    ] {
        let d = dir.join(sub);
        std::fs::create_dir_all(&d)?;
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut cmd, name.clone(), &mut buf);
        let path = d.join(file);
        std::fs::write(&path, buf)?;
        written.push(path);
    }
    Ok(written)
}

/// [`write_docs`] for a program's `main`: lists the files written on standard output, or says
/// in one line why they could not be (exit code 2).
pub fn docs_main(cmd: clap::Command, dir: &Path) -> ExitCode {
    let name = cmd.get_name().to_string();
    match write_docs(cmd, dir) {
        Ok(files) => {
            let mut out = io::stdout().lock();
            for f in files {
                let _ = writeln!(out, "{}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{name}: {DOCS_OPTION} {}: {e}", dir.display());
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_become_one_line() {
        let r = "error: unexpected argument '--bogus' found\n\n  tip: x\n\nUsage: p\n";
        assert_eq!(one_line(r), "unexpected argument '--bogus' found");
    }

    #[test]
    fn docs_hold_a_page_per_subcommand_and_three_completions() {
        let cmd = clap::Command::new("demo")
            .about("A demo.")
            .arg(clap::Arg::new("flag").long("flag").help("A flag."))
            .subcommand(clap::Command::new("one").about("The first."))
            .subcommand(clap::Command::new("two").about("The second.").hide(true));
        let dir = tempfile::tempdir().unwrap();
        let files = write_docs(cmd, dir.path()).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|f| f.strip_prefix(dir.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "man1/demo-one.1",
                "man1/demo.1",
                "bash/demo",
                "zsh/_demo",
                "fish/demo.fish"
            ]
        );
        let page = std::fs::read_to_string(dir.path().join("man1/demo.1")).unwrap();
        assert!(page.contains(".TH demo 1"), "{page}");
        assert!(page.contains("A flag."), "{page}");
        let bash = std::fs::read_to_string(dir.path().join("bash/demo")).unwrap();
        assert!(bash.contains("--flag"), "{bash}");
    }

    /// A directory that cannot be made is an error, not a panic.
    #[test]
    fn an_unwritable_directory_is_an_error() {
        let f = tempfile::NamedTempFile::new().unwrap();
        let cmd = clap::Command::new("demo");
        assert!(write_docs(cmd, &f.path().join("sub")).is_err());
    }
}
