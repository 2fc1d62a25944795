//! Per-key layer names (`docs/format.md#per-key-layers`): a layer split by a key appends
//! `@KEY:VALUE` to the layer it splits (`fuse@uid:1000`, `fuse@pid:4242`, `fuse@comm:tar`), and
//! `@other` for the keys beyond the bound (`fuse@other`). In a value, bytes outside `%x21-7E` and
//! the bytes `%`, `=`, `@` and `:` are written `%XX` (upper-case hex), so a layer name always
//! matches the text format's `name` rule.
//!
//! ```
//! use profile_store::keyed::{self, Keyed};
//!
//! assert_eq!(keyed::name("fuse", "comm", b"my tool"), "fuse@comm:my%20tool");
//! assert_eq!(keyed::parse("fuse@uid:1000"), Some(Keyed::Key { base: "fuse", key: "uid", value: b"1000".to_vec() }));
//! assert_eq!(keyed::parse("fuse@other"), Some(Keyed::Other { base: "fuse" }));
//! assert_eq!(keyed::parse("fuse"), None);
//! ```

use std::fmt::Write as _;

/// The name of the layer for the keys beyond the bound: `BASE@other`.
pub fn other(base: &str) -> String {
    format!("{base}@other")
}

/// The layer name of key `key` (lower-case letters) with `value` in layer `base`.
pub fn name(base: &str, key: &str, value: &[u8]) -> String {
    let mut s = String::with_capacity(base.len() + key.len() + value.len() + 2);
    s.push_str(base);
    s.push('@');
    s.push_str(key);
    s.push(':');
    for &b in value {
        if (0x21..=0x7e).contains(&b) && !matches!(b, b'%' | b'=' | b'@' | b':') {
            s.push(b as char);
        } else {
            let _ = write!(s, "%{b:02X}");
        }
    }
    s
}

/// A per-key layer name taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keyed<'a> {
    /// `BASE@KEY:VALUE`, with the value unescaped.
    Key {
        /// The layer split.
        base: &'a str,
        /// The key (`uid`, `pid`, `comm`...).
        key: &'a str,
        /// The value's bytes.
        value: Vec<u8>,
    },
    /// `BASE@other`: every key beyond the bound.
    Other {
        /// The layer split.
        base: &'a str,
    },
}

/// Whether `name` is a per-key layer's name.
pub fn is_keyed(name: &str) -> bool {
    name.contains('@')
}

/// Whether `name` is a per-caller layer: one layer split by its callers (`--by`'s
/// `fuse@comm:tar`, `fuse@uid:1000`, `fuse@pid:42` and `fuse@other`; `fsprof trace stats`'s
/// `user@pid:N`). A device's layer (`block@dev:vda`) is keyed too, but a level of its own.
pub fn is_per_caller(name: &str) -> bool {
    match parse(name) {
        Some(Keyed::Other { .. }) => true,
        Some(Keyed::Key { key, .. }) => matches!(key, "pid" | "uid" | "comm"),
        None => false,
    }
}

/// Takes a per-key layer name apart; `None` for a plain layer name or a malformed one.
pub fn parse(name: &str) -> Option<Keyed<'_>> {
    let (base, rest) = name.split_once('@')?;
    if base.is_empty() {
        return None;
    }
    if rest == "other" {
        return Some(Keyed::Other { base });
    }
    let (key, esc) = rest.split_once(':')?;
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    let b = esc.as_bytes();
    let mut value = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                if !hex
                    .bytes()
                    .all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(&c))
                {
                    return None;
                }
                value.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'@' | b':' | b'=' => return None,
            c => {
                value.push(c);
                i += 1;
            }
        }
    }
    Some(Keyed::Key { base, key, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_round_trips_and_names_stay_valid() {
        let all: Vec<u8> = (0..=255u8).collect();
        let n = name("fuse", "comm", &all);
        assert!(crate::text::is_valid_value(&n), "{n}");
        assert_eq!(
            parse(&n),
            Some(Keyed::Key {
                base: "fuse",
                key: "comm",
                value: all
            })
        );
        assert_eq!(name("fuse", "uid", b"1000"), "fuse@uid:1000");
        assert_eq!(
            name("fuse", "comm", b"a:b@c=d%e"),
            "fuse@comm:a%3Ab%40c%3Dd%25e"
        );
    }

    #[test]
    fn callers_layers_are_per_caller_and_a_devices_is_not() {
        for n in [
            "fuse@comm:tar",
            "fuse@uid:0",
            "fuse@pid:42",
            "fuse@other",
            "user@pid:7",
        ] {
            assert!(is_per_caller(n), "{n}");
        }
        for n in ["block@dev:vda", "fuse", "lower", "branch0"] {
            assert!(!is_per_caller(n), "{n}");
        }
    }

    #[test]
    fn malformed_names_are_not_keyed() {
        for n in [
            "fuse",
            "@uid:1",
            "fuse@uid",
            "fuse@UID:1",
            "fuse@uid:%4",
            "fuse@uid:%zz",
            "fuse@uid:a@b",
            "fuse@:1",
        ] {
            assert_eq!(parse(n), None, "{n}");
        }
        assert_eq!(
            parse("branch1@other"),
            Some(Keyed::Other { base: "branch1" })
        );
    }
}
