//! The Prometheus text exposition format (version 0.0.4), read by its grammar:
//!
//! ```text
//! line        = comment / sample / blank
//! comment     = "#" *any                      ; HELP and TYPE lines are not needed here
//! sample      = name *ws [ "{" *ws [ label *( *ws "," *ws label ) [ *ws "," ] ] *ws "}" ]
//!               1*ws value [ 1*ws timestamp ] *ws
//! name        = ( ALPHA / "_" / ":" ) *( ALPHA / DIGIT / "_" / ":" )
//! label       = label-name *ws "=" *ws DQUOTE *( char / "\\" / "\"" / "\n" ) DQUOTE
//! label-name  = ( ALPHA / "_" ) *( ALPHA / DIGIT / "_" )
//! value       = a float, "+Inf", "-Inf" or "NaN"
//! ```
//!
//! Inside a label value everything but `"` and `\` stands for itself (commas, braces, `=`),
//! and `\\`, `\"` and `\n` are the only escapes (another backslash is taken as it is, as
//! Prometheus does). The `prometheus-parse` crate used before split label pairs on commas
//! and dropped escapes, so a process named `z,1` or `c\"d` in a `fuse@comm:` layer broke
//! `fsprof summary URL`; the other crates found were under the LGPL (`openmetrics-parser`)
//! or a single unmaintained release, and the grammar is this small.

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric name (`fsprof_operation_latency_seconds_bucket`).
    pub name: String,
    /// Its labels, in order, values unescaped.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
}

impl Sample {
    /// The value of label `k`.
    pub fn label(&self, k: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one line: `Ok(None)` for a comment or a blank line.
pub fn line(l: &str) -> Result<Option<Sample>, String> {
    let mut p = Parser {
        s: l.as_bytes(),
        i: 0,
    };
    p.ws();
    if p.at_end() || p.peek() == Some(b'#') {
        return Ok(None);
    }
    let name = p.name(true).ok_or("expected a metric name")?;
    let mut spaced = p.ws();
    let mut labels = Vec::new();
    if p.peek() == Some(b'{') {
        p.i += 1;
        loop {
            p.ws();
            if p.peek() == Some(b'}') {
                p.i += 1;
                break;
            }
            let k = p.name(false).ok_or("expected a label name or '}'")?;
            p.ws();
            if p.next() != Some(b'=') {
                return Err(format!("label {k}: expected '='"));
            }
            p.ws();
            let v = p.quoted().map_err(|e| format!("label {k}: {e}"))?;
            labels.push((k, v));
            p.ws();
            match p.next() {
                Some(b',') => {}
                Some(b'}') => break,
                _ => return Err("expected ',' or '}' after a label".into()),
            }
        }
        spaced = p.ws();
    }
    if !spaced {
        return Err("expected white space before the value".into());
    }
    let rest = std::str::from_utf8(&p.s[p.i..]).map_err(|_| "not UTF-8")?;
    let mut fields = rest.split_ascii_whitespace();
    let value = fields.next().ok_or("no value")?;
    let value = parse_float(value).ok_or_else(|| format!("value {value:?}: not a number"))?;
    if let Some(ts) = fields.next() {
        ts.parse::<i64>()
            .map_err(|_| format!("timestamp {ts:?}: not a whole number"))?;
    }
    if fields.next().is_some() {
        return Err("more than a value and a timestamp after the labels".into());
    }
    Ok(Some(Sample {
        name,
        labels,
        value,
    }))
}

/// A value as the format writes it (Go's `ParseFloat` forms, `+Inf`, `-Inf`, `NaN`).
fn parse_float(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" | "inf" | "+inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        "NaN" | "nan" => Some(f64::NAN),
        _ => s.parse().ok().filter(|v: &f64| v.is_finite()),
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn at_end(&self) -> bool {
        self.i >= self.s.len()
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    /// Skips spaces and tabs; whether there were any.
    fn ws(&mut self) -> bool {
        let start = self.i;
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
        self.i > start
    }

    /// A metric name (`colon`: `:` allowed) or a label name.
    fn name(&mut self, colon: bool) -> Option<String> {
        let start = self.i;
        while let Some(c) = self.peek() {
            let ok = c.is_ascii_alphabetic()
                || c == b'_'
                || (colon && c == b':')
                || (self.i > start && c.is_ascii_digit());
            if !ok {
                break;
            }
            self.i += 1;
        }
        (self.i > start).then(|| String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    /// A double-quoted label value, unescaped.
    fn quoted(&mut self) -> Result<String, String> {
        if self.next() != Some(b'"') {
            return Err("expected '\"'".into());
        }
        let mut out = Vec::new();
        loop {
            match self.next() {
                None => return Err("a quoted value that does not end".into()),
                Some(b'"') => break,
                Some(b'\\') => match self.next() {
                    Some(b'\\') => out.push(b'\\'),
                    Some(b'"') => out.push(b'"'),
                    Some(b'n') => out.push(b'\n'),
                    Some(c) => {
                        out.push(b'\\');
                        out.push(c);
                    }
                    None => return Err("a quoted value that does not end".into()),
                },
                Some(c) => out.push(c),
            }
        }
        String::from_utf8(out).map_err(|_| "a label value that is not UTF-8".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labels(l: &str) -> Vec<(String, String)> {
        line(l).unwrap().unwrap().labels
    }

    #[test]
    fn quoted_values_hold_anything_the_writer_escapes() {
        let got = labels(r#"m{layer="fuse@comm:z,1",op="OP_READ",le="+Inf"} 3"#);
        assert_eq!(got[0].1, "fuse@comm:z,1");
        assert_eq!(got[2], ("le".into(), "+Inf".into()));
        assert_eq!(labels(r#"m{a="c\\\"d"} 1"#)[0].1, r#"c\"d"#);
        assert_eq!(labels(r#"m{a="x\\"} 1"#)[0].1, r"x\");
        assert_eq!(labels(r#"m{a="}"} 1"#)[0].1, "}");
        assert_eq!(labels(r#"m{a="\"}evil{x=\""} 1"#)[0].1, r#""}evil{x=""#);
        assert_eq!(labels(r#"m{a="a,op=\"OP_X"} 1"#)[0].1, r#"a,op="OP_X"#);
        assert_eq!(labels("m{a=\"l1\\nl2\"} 1")[0].1, "l1\nl2");
        assert_eq!(labels(r#"m{a="b",} 1"#).len(), 1);
        assert_eq!(
            labels("m { a = \"b\" , c=\"d\" }\t2 1700000000000").len(),
            2
        );
        let s = line("m_total 1e3").unwrap().unwrap();
        assert_eq!((s.name.as_str(), s.value), ("m_total", 1000.0));
        assert!(line("  # HELP x y").unwrap().is_none());
        assert!(line("").unwrap().is_none());
        assert!(line("m{a=\"b} 1").is_err());
        assert!(line("m{a=b} 1").is_err());
        assert!(line("m 1 2 3").is_err());
        assert!(line("m x").is_err());
        assert!(line("1m 1").is_err());
    }

    /// The writer's escape (`profile_store::prometheus`).
    fn escape(s: &str) -> String {
        s.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    }

    proptest! {
        #[test]
        fn any_value_written_reads_back(v in "\\PC*", w in "[ -~]*") {
            let l = format!("m{{a=\"{}\",b=\"{}\"}} 1", escape(&v), escape(&w));
            let s = line(&l).unwrap().unwrap();
            prop_assert_eq!(s.label("a"), Some(v.as_str()));
            prop_assert_eq!(s.label("b"), Some(w.as_str()));
        }

        #[test]
        fn any_line_parses_or_is_refused(l in "[ -~\t]{0,120}") {
            let _ = line(&l);
        }
    }
}
