//! Whether a program can load the preload library: it must be a dynamically linked ELF program
//! of the library's class (it has a program interpreter, `PT_INTERP`), or a script whose
//! interpreter is one.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// What `exec` would run for `program`: the path itself when it has a `/`, else the first
/// executable file of that name in `PATH`.
pub fn resolve(program: &OsStr) -> Result<PathBuf, Error> {
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| Error::NoProgram(program.to_string_lossy().into_owned()))
}

/// Checks that `program` (a path) can load the preload library; follows one `#!`
/// interpreter. Files that are neither ELF nor scripts are left for `exec` to judge.
/// `Ok(Some(why))`: it runs, but the dynamic loader will ignore the library, for the reason
/// given ([`secure_exec`]).
pub fn check_preloadable(program: &Path) -> Result<Option<String>, Error> {
    Ok(check(program, 0)?.and_then(|elf| secure_exec(&elf)))
}

/// Why the dynamic loader would run the ELF program `elf` in secure-execution mode
/// (`AT_SECURE`, see ld.so(8)), where it ignores `LD_PRELOAD` and removes it from the
/// environment of what the program starts; `None` when it would not. That is when `exec`
/// changes this process's ids or gives it capabilities: a set-user-ID program owned by
/// another user than the real one, a set-group-ID one of another group, or (for a user
/// other than root) one with file capabilities; not on a file system mounted `nosuid`.
pub fn secure_exec(elf: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(elf).ok()?;
    if crate::sys::mounted_nosuid(elf).unwrap_or(false) {
        return None;
    }
    let (uid, gid) = crate::sys::real_ids();
    let mode = m.mode();
    if mode & libc::S_ISUID != 0 && m.uid() != uid {
        return Some(format!(
            "is set-user-ID (owner uid {}, you are {uid})",
            m.uid()
        ));
    }
    // Set-group-ID without group execute marks mandatory locking, not a change of group.
    if mode & libc::S_ISGID != 0 && mode & libc::S_IXGRP != 0 && m.gid() != gid {
        return Some(format!(
            "is set-group-ID (group {}, yours is {gid})",
            m.gid()
        ));
    }
    if uid != 0 && crate::sys::has_xattr(elf, c"security.capability") {
        return Some("has file capabilities".to_string());
    }
    None
}

/// The ELF file that `exec` of `program` loads (the interpreter for a script), or `None` for
/// a file that is neither.
fn check(program: &Path, depth: u32) -> Result<Option<PathBuf>, Error> {
    let refuse = |reason: &str| Error::CannotPreload {
        program: program.to_path_buf(),
        reason: reason.to_string(),
    };
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(program)
        .and_then(|f| f.take(4096).read_to_end(&mut head))
        .map_err(|e| Error::io(format!("reading {}", program.display()), e))?;
    if head.starts_with(b"#!") {
        if depth > 0 {
            return Ok(None);
        }
        let line = head[2..].split(|&b| b == b'\n').next().unwrap_or(&[]);
        let interp = line
            .split(|&b| b == b' ' || b == b'\t')
            .find(|w| !w.is_empty())
            .ok_or_else(|| refuse("a script without an interpreter"))?;
        return check(Path::new(OsStr::from_bytes(interp)), depth + 1);
    }
    if !head.starts_with(b"\x7fELF") {
        return Ok(None);
    }
    match elf_kind(&head) {
        ElfKind::Dynamic => Ok(Some(program.to_path_buf())),
        ElfKind::Static => Err(refuse("statically linked")),
        ElfKind::OtherClass => Err(refuse("a 32-bit program (the preload library is 64-bit)")),
        ElfKind::Unreadable => Err(refuse("an ELF file whose program headers cannot be read")),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum ElfKind {
    Dynamic,
    Static,
    OtherClass,
    Unreadable,
}

/// Looks for `PT_INTERP` among the program headers of a 64-bit little-endian ELF file whose
/// first bytes are `head` (program headers follow the ELF header closely in practice; a file
/// whose headers lie past the first 4 KiB is reported unreadable).
fn elf_kind(head: &[u8]) -> ElfKind {
    if head.len() < 64 {
        return ElfKind::Unreadable;
    }
    if head[4] != 2 || head[5] != 1 {
        return ElfKind::OtherClass;
    }
    let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(head[32..40].try_into().expect("8 bytes")) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    if phentsize < 4 {
        return ElfKind::Unreadable;
    }
    let mut dynamic = false;
    for i in 0..phnum {
        let Some(at) = phoff.checked_add(i * phentsize) else {
            return ElfKind::Unreadable;
        };
        let Some(p_type) = head.get(at..at + 4) else {
            return ElfKind::Unreadable;
        };
        // PT_INTERP: the program asks for the dynamic loader, which honours LD_PRELOAD.
        if u32::from_le_bytes(p_type.try_into().expect("4 bytes")) == 3 {
            dynamic = true;
        }
    }
    if dynamic {
        ElfKind::Dynamic
    } else {
        ElfKind::Static
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_programs_are_dynamic_and_the_loader_itself_is_not() {
        let sh = resolve(OsStr::new("sh")).unwrap();
        assert!(check_preloadable(&sh).is_ok());
        let mut head = Vec::new();
        std::fs::File::open(&sh)
            .unwrap()
            .take(4096)
            .read_to_end(&mut head)
            .unwrap();
        assert_eq!(elf_kind(&head), ElfKind::Dynamic);
        // The dynamic loader is an ELF file without an interpreter of its own.
        let ld = Path::new("/lib64/ld-linux-x86-64.so.2");
        if ld.exists() {
            let e = check_preloadable(ld).unwrap_err().to_string();
            assert!(e.contains("statically linked"), "{e}");
            assert_eq!(e.lines().count(), 1);
        }
    }

    #[test]
    fn missing_programs_and_odd_headers() {
        assert!(matches!(
            resolve(OsStr::new("no-such-program-fsprof")),
            Err(Error::NoProgram(_))
        ));
        assert_eq!(elf_kind(b"\x7fELF"), ElfKind::Unreadable);
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 1;
        assert_eq!(elf_kind(&h), ElfKind::OtherClass);
    }
}
