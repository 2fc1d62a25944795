//! Names that come from outside (paths, command names, per-key layer values, metric labels):
//! how each is written in a profile, in JSON, and on a terminal.
//!
//! A name is bytes: a Linux path or `comm` need not be UTF-8, and may hold control characters
//! or Unicode's bidirectional overrides. Each form below keeps every byte, so two names never
//! become one:
//!
//! * **Text** ([`text`]): in a text profile's sections (`path=` of `hot_files`), every byte
//!   outside `%x21-7E`, and `%`, as `%XX` (upper-case hex): a section line stays printable
//!   ASCII without spaces.
//! * **JSON** ([`json`]): in the slow log and the `slowest` section (`path`, `comm`), the name
//!   as a string where valid UTF-8 is kept as it is (JSON escapes control characters itself)
//!   and `%` and every byte that is not part of valid UTF-8 are `%XX`: `bad\xFF` is
//!   `"bad%FF"`, `100%` is `"100%25"`.
//! * Both are read back with [`unescape`].
//! * **Terminal** ([`printable`]): what the tools print. Valid UTF-8 is kept, except control
//!   characters (`\n`, `\t`, `\r`, `\u{1b}`...), the bidirectional controls and invisible
//!   separators (U+061C, U+200B-U+200F, U+2028-U+202E, U+2066-U+2069, U+FEFF) as Rust writes
//!   them (`\u{202e}`), a byte that is not valid UTF-8 as `\xFF`, and `\` as `\\` (so what is
//!   printed reads back to one name only). Every string from outside reaches a terminal through
//!   it; [`shown`] first reads a name's text or JSON form.

use std::fmt::Write as _;

/// `name` in the text form (see the module documentation).
pub fn text(name: &[u8]) -> String {
    let mut s = String::with_capacity(name.len());
    for &b in name {
        if (0x21..=0x7e).contains(&b) && b != b'%' {
            s.push(b as char);
        } else {
            let _ = write!(s, "%{b:02X}");
        }
    }
    s
}

/// `name` in the JSON form (see the module documentation).
pub fn json(name: &[u8]) -> String {
    let mut s = String::with_capacity(name.len());
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '%' {
                s.push_str("%25");
            } else {
                s.push(c);
            }
        }
        for &b in chunk.invalid() {
            let _ = write!(s, "%{b:02X}");
        }
    }
    s
}

/// The bytes of a name in its text or JSON form: `%XX` (either case of hex digit) is the byte
/// XX; a `%` not followed by two hex digits stands for itself.
pub fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if let Some(v) = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// Whether `c` is printed escaped although it is valid text: a control character, a
/// bidirectional control or an invisible separator.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// `s` (any bytes) made safe for a terminal (see the module documentation).
pub fn printable(s: impl AsRef<[u8]>) -> String {
    let s = s.as_ref();
    let mut out = String::with_capacity(s.len());
    for chunk in s.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else if hidden(c) {
                let _ = write!(out, "{}", c.escape_default());
            } else {
                out.push(c);
            }
        }
        for &b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02X}");
        }
    }
    out
}

/// A name given in its text or JSON form, made safe for a terminal: [`printable`] of its
/// bytes.
pub fn shown(s: &str) -> String {
    printable(unescape(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_keeps_every_byte() {
        let names: [&[u8]; 6] = [
            b"/bad\xff\xfeutf8",
            b"/bad\xfe\xffutf8",
            "/bad\u{fffd}\u{fffd}utf8".as_bytes(),
            b"/100%",
            b"/a b\n",
            "/rtl\u{202e}gnp.exe".as_bytes(),
        ];
        for n in names {
            assert_eq!(unescape(&text(n)), n);
            assert_eq!(unescape(&json(n)), n);
        }
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(unescape(&text(&all)), all);
        assert_eq!(unescape(&json(&all)), all);
        assert_eq!(json(b"/bad\xff\xfeutf8"), "/bad%FF%FEutf8");
        assert_eq!(json("/caf\u{e9} 100%".as_bytes()), "/caf\u{e9} 100%25");
        assert_eq!(text(b"/a b/%c"), "/a%20b/%25c");
        let shown: Vec<String> = names.iter().map(printable).collect();
        for (i, a) in shown.iter().enumerate() {
            for b in &shown[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn a_terminal_sees_no_control_no_override_and_no_invalid_text() {
        assert_eq!(
            printable("\x1b]0;OWNED\x07\x1b[2J"),
            "\\u{1b}]0;OWNED\\u{7}\\u{1b}[2J"
        );
        assert_eq!(printable("a\n# layer=x"), "a\\n# layer=x");
        assert_eq!(printable("rtl\u{202e}gnp.exe"), "rtl\\u{202e}gnp.exe");
        assert_eq!(printable(b"bad\xff\xfeutf8"), "bad\\xFF\\xFEutf8");
        assert_eq!(printable("c\\\"d"), "c\\\\\"d");
        assert_eq!(printable("caf\u{e9} \u{4e2d}"), "caf\u{e9} \u{4e2d}");
        assert_eq!(printable("\u{85}\u{9b}"), "\\u{85}\\u{9b}");
        assert_eq!(shown("/bad%FF%FEutf8"), "/bad\\xFF\\xFEutf8");
        assert_eq!(shown("%1B[2J"), "\\u{1b}[2J");
        for s in [
            printable(b"\x00\x01\x7f\x1b\x9b\r\t\xc2\x9b"),
            shown("%9B%C2%9B"),
        ] {
            assert!(!s.bytes().any(|b| b < 0x20 || b == 0x7f), "{s:?}");
            assert!(!s.contains('\u{9b}'), "{s:?}");
        }
    }
}
