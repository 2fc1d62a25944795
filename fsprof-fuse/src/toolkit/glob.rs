//! Globs that users give (injection rules' `path=`, RAIF policy rules), built into matchers
//! without panicking whatever the pattern.
//!
//! `globset` turns a glob into a regular expression. Its `Glob::compile_matcher` panics when
//! the regex library refuses that expression (too deeply nested, or too large once compiled:
//! `/{a,{a,...` 150 levels deep did), so a hostile pattern took a daemon down. Here a pattern
//! is first held to two bounds, each refused in one line: at most [`MAX_LEN`] bytes, and braces
//! nested at most [`MAX_NESTING`] deep (the regex parser's own nesting limit is 250 groups,
//! and each brace level costs a few); then it is compiled through a one-glob `GlobSet`, whose
//! build returns the regex library's error instead of panicking (a pattern within the bounds
//! whose automaton would still be too large is refused with that error).

use std::ffi::OsStr;

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// The longest pattern taken, in bytes.
pub const MAX_LEN: usize = 4096;
/// The deepest nesting of `{...}` alternatives taken.
pub const MAX_NESTING: usize = 32;

/// A compiled glob.
#[derive(Debug, Clone)]
pub struct Matcher {
    set: GlobSet,
}

impl Matcher {
    /// Whether `path` matches.
    #[inline]
    pub fn is_match(&self, path: &OsStr) -> bool {
        self.set.is_match(path)
    }
}

/// Compiles `pattern` with globset's default options.
pub fn compile(pattern: &str) -> Result<Matcher, String> {
    compile_with(pattern, |p| GlobBuilder::new(p).build())
}

/// Compiles `pattern` with the options `build` sets on a [`GlobBuilder`] (it is given the
/// pattern once the bounds are checked).
pub fn compile_with(
    pattern: &str,
    build: impl FnOnce(&str) -> Result<Glob, globset::Error>,
) -> Result<Matcher, String> {
    check(pattern)?;
    let glob = build(pattern).map_err(|e| e.kind().to_string())?;
    let set = GlobSetBuilder::new()
        .add(glob)
        .build()
        .map_err(|e| format!("too complex to match: {}", first_line(&e.to_string())))?;
    Ok(Matcher { set })
}

/// The first line of `s` (the regex library's errors span several).
fn first_line(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s).trim()
}

/// Checks the bounds of the module's documentation.
pub fn check(pattern: &str) -> Result<(), String> {
    if pattern.len() > MAX_LEN {
        return Err(format!(
            "a glob of {} bytes: at most {MAX_LEN} are taken",
            pattern.len()
        ));
    }
    let depth = nesting(pattern);
    if depth > MAX_NESTING {
        return Err(format!(
            "braces nested {depth} deep: at most {MAX_NESTING} levels are taken"
        ));
    }
    Ok(())
}

/// How deep `{...}` alternatives nest in `pattern` (outside `[...]` classes, not counting
/// escaped braces).
fn nesting(pattern: &str) -> usize {
    let b = pattern.as_bytes();
    let (mut depth, mut deepest, mut i) = (0usize, 0usize, 0usize);
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'[' => {
                // A class: `]` right after `[` or `[!` is a member, not its end.
                let mut j = i + 1;
                if matches!(b.get(j), Some(b'!' | b'^')) {
                    j += 1;
                }
                if b.get(j) == Some(&b']') {
                    j += 1;
                }
                match b[j.min(b.len())..].iter().position(|&c| c == b']') {
                    Some(k) => i = j + k,
                    None => return deepest,
                }
            }
            b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn deep(n: usize) -> String {
        format!("/{}b{}", "{a,".repeat(n), "}".repeat(n))
    }

    #[test]
    fn deep_and_long_patterns_are_refused_in_one_line() {
        let e = compile(&deep(150)).unwrap_err();
        assert_eq!(e, "braces nested 150 deep: at most 32 levels are taken");
        let ok = compile(&deep(32)).unwrap();
        assert!(ok.is_match(OsStr::new("/a")) && ok.is_match(OsStr::new("/b")));
        let e = compile(&"a".repeat(4097)).unwrap_err();
        assert!(e.contains("4097 bytes"), "{e}");
        assert!(compile(&"a".repeat(4096)).is_ok());
        // Braces in classes or escaped do not nest.
        assert_eq!(nesting("[{][{]{a,b}\\{\\{"), 1);
        assert_eq!(nesting("[]{]{x}"), 1);
    }

    #[test]
    fn patterns_at_the_bounds_compile_or_fail_without_panicking() {
        // The largest automata within the bounds: every byte a wildcard or a class.
        for p in [
            "*".repeat(4096),
            "?".repeat(4096),
            "[a-z]".repeat(819),
            "**/".repeat(1365),
            format!("{}{}", "{*,?,[!a]".repeat(32), "}".repeat(32)),
        ] {
            let _ = compile(&p);
            let _ = compile_with(&p, |p| {
                GlobBuilder::new(p)
                    .literal_separator(true)
                    .allow_unclosed_class(true)
                    .build()
            });
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any text of glob characters builds a matcher or an error, never a panic.
        #[test]
        fn any_pattern_compiles_or_is_refused(p in "[{},\\[\\]!^*?/\\\\a-c-]{0,200}") {
            if let Ok(m) = compile(&p) {
                let _ = m.is_match(OsStr::new("/a/b-c"));
            }
        }

        #[test]
        fn nested_braces_beyond_the_bound_are_refused(n in 33usize..400) {
            prop_assert!(compile(&deep(n)).is_err());
        }
    }
}
