//! Profiles from other machines by URL: a daemon's `--metrics` endpoint
//! (`http://host:9817/metrics`), read back from the Prometheus text exposition format, or a saved
//! profile served over HTTP (text or JSON).
//!
//! The exposition is read by its grammar ([`crate::exposition`]), and the profile rebuilt from what
//! [`profile_store::prometheus`] writes: the clock rate (`fsprof_clock_cycles_per_second`), each
//! layer's resolution (`fsprof_layer_buckets_per_octave`), and per operation the cumulative
//! `_bucket` series, `_sum` and `fsprof_operation_calls_total`. The bucket `b` of a bound `le`
//! is `r · log2(le · hz) − 1`, rounded; a difference between two series whose buckets are not
//! neighbours (an exporter that leaves out more than fsprof's leading zeros) is put in the upper
//! one. Totals come back within the float precision of `_sum` (its seconds times the rate).

use std::collections::HashMap;
use std::io::Read;
use std::time::Duration;

use profile_store::{ClockKind, Layer, OpProfile, Profile, Resolution};

use crate::error::Error;
use crate::exposition::{self, Sample};

/// The most read from one URL.
const MAX_BODY: u64 = 256 << 20;

/// The most histograms (and layers) read from one exposition: each becomes 64 to 512 bucket
/// counts in memory.
const MAX_HISTOGRAMS: usize = 16_384;

/// Whether `spec` names a URL rather than a path.
pub fn is_url(spec: &str) -> bool {
    spec.starts_with("http://") || spec.starts_with("https://")
}

/// The variable that names a file holding the bearer token to send (a daemon's
/// `--metrics-token-file`).
pub const TOKEN_FILE_VAR: &str = "FSPROF_METRICS_TOKEN_FILE";

/// The token of [`TOKEN_FILE_VAR`]'s file (its first line, trimmed), if the variable is set.
fn token() -> Result<Option<String>, Error> {
    let Some(path) = std::env::var_os(TOKEN_FILE_VAR) else {
        return Ok(None);
    };
    let what = format!("{TOKEN_FILE_VAR}={}", std::path::Path::new(&path).display());
    let mut text = String::new();
    profile_store::open::regular(std::path::Path::new(&path))
        .and_then(|f| f.take(8192).read_to_string(&mut text))
        .map_err(|e| Error::input(&what, e))?;
    let t = text.lines().next().unwrap_or("").trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::input(&what, "no token on its first line"));
    }
    Ok(Some(t.to_string()))
}

/// Fetches `url` (plain HTTP, 5 s to connect, 30 s in all) and reads the profile it serves,
/// sending the token of [`TOKEN_FILE_VAR`] if set.
pub fn load(url: &str) -> Result<Profile, Error> {
    if url.starts_with("https://") {
        return Err(Error::input(
            url,
            "https is not supported: the daemons' endpoints serve plain http://",
        ));
    }
    // No redirects: an endpoint answers where it is asked, and ureq would follow one to a
    // URL of another scheme (https, or one without a host) that this reader refuses.
    let agent = ureq::AgentBuilder::new()
        .timeout_connect(Duration::from_secs(5))
        .timeout(Duration::from_secs(30))
        .redirects(0)
        .build();
    let mut req = agent.get(url);
    if let Some(token) = token()? {
        req = req.set("Authorization", &format!("Bearer {token}"));
    }
    let resp = req.call().map_err(|e| match e {
        ureq::Error::Status(401, r) => Error::input(
            url,
            format!(
                "HTTP 401 {}: the endpoint wants its token (set {TOKEN_FILE_VAR} to the file \
                 of its --metrics-token-file)",
                r.status_text()
            ),
        ),
        ureq::Error::Status(code, r) => {
            Error::input(url, format!("HTTP {code} {}", r.status_text()))
        }
        ureq::Error::Transport(t) => {
            let cause = match std::error::Error::source(&t) {
                Some(src) => format!("{}: {src}", t.kind()),
                None => t
                    .message()
                    .map_or_else(|| t.kind().to_string(), str::to_string),
            };
            Error::input(url, cause)
        }
    })?;
    if resp.status() != 200 {
        let to = resp
            .header("location")
            .map(|l| format!(" to {}", crate::error::printable(l)))
            .unwrap_or_default();
        return Err(Error::input(
            url,
            format!(
                "HTTP {} {}{to}: give the URL that serves the profile itself",
                resp.status(),
                resp.status_text()
            ),
        ));
    }
    let mut body = Vec::new();
    resp.into_reader()
        .take(MAX_BODY + 1)
        .read_to_end(&mut body)
        .map_err(|e| Error::input(url, e))?;
    if body.len() as u64 > MAX_BODY {
        return Err(Error::input(
            url,
            format!("more than {} MiB: not a profile", MAX_BODY >> 20),
        ));
    }
    parse(&body).map_err(|e| Error::input(url, e))
}

/// A profile from `body`: the text exposition of an fsprof endpoint, or a saved profile.
pub fn parse(body: &[u8]) -> Result<Profile, String> {
    let text = std::str::from_utf8(body).map_err(|_| "not UTF-8: not a profile".to_string())?;
    if text.contains("# TYPE fsprof_operation_latency_seconds histogram") {
        from_exposition(text)
    } else {
        profile_store::parse_any(body)
    }
}

/// The metric families a profile is rebuilt from; other lines of an exposition are skipped.
const FAMILIES: [&str; 6] = [
    "fsprof_clock_cycles_per_second",
    "fsprof_clock_info",
    "fsprof_build_info",
    "fsprof_layer_buckets_per_octave",
    "fsprof_operation_latency_seconds",
    "fsprof_operation_calls_total",
];

/// The most samples read from one exposition: far more than a profile at its bound of
/// histograms has buckets (zero runs are written compactly), and the parser's memory stays
/// bounded whatever the body holds.
const MAX_SAMPLES: usize = 1 << 18;

/// Whether `line` of an exposition (a sample, or a `# TYPE`/`# HELP` comment) is of one of the
/// [`FAMILIES`].
fn wanted(line: &str) -> bool {
    let name = match line.strip_prefix('#') {
        Some(c) => {
            let mut w = c.split_whitespace();
            match w.next() {
                Some("TYPE" | "HELP") => w.next().unwrap_or(""),
                _ => return false,
            }
        }
        None => line.split(['{', ' ']).next().unwrap_or(""),
    };
    FAMILIES.iter().any(|f| {
        name.strip_prefix(f)
            .is_some_and(|rest| matches!(rest, "" | "_bucket" | "_sum" | "_count"))
    })
}

/// Whether `v` (seconds or a count, times `scale`) fits a profile's 64-bit counters.
fn in_range(v: f64, scale: f64) -> bool {
    v.is_finite() && v >= 0.0 && v * scale < 1.8e19
}

/// The profile an exposition of [`profile_store::prometheus::exposition`] describes.
pub fn from_exposition(text: &str) -> Result<Profile, String> {
    let mut samples = Vec::new();
    for (n, l) in text.lines().enumerate() {
        if l.starts_with('#') || !wanted(l) {
            continue;
        }
        let Some(s) = exposition::line(l)
            .map_err(|e| format!("not the Prometheus text format: line {}: {e}", n + 1))?
        else {
            continue;
        };
        samples.push(s);
        if samples.len() > MAX_SAMPLES {
            return Err(format!(
                "more than {MAX_SAMPLES} samples of fsprof's metrics: more than a profile \
                 holds"
            ));
        }
    }
    let gauge = |name: &str| samples.iter().find(|s| s.name == name).map(|s| s.value);
    let hz = gauge("fsprof_clock_cycles_per_second")
        .filter(|v| v.is_finite() && *v >= 1.0 && *v < 1e15)
        .ok_or("no fsprof_clock_cycles_per_second: not an fsprof endpoint")?;
    let mut p = Profile {
        cycles_per_sec: Some(hz.round() as u64),
        ..Profile::default()
    };
    metadata(&samples, &mut p);
    layers(&samples, &mut p)?;
    type Key<'a> = (&'a str, &'a str);
    let mut sums: HashMap<Key, f64> = HashMap::new();
    let mut calls: HashMap<Key, f64> = HashMap::new();
    let mut buckets: HashMap<Key, Vec<(f64, f64)>> = HashMap::new();
    let mut order: Vec<Key> = Vec::new();
    for s in &samples {
        let (Some(l), Some(o)) = (s.label("layer"), s.label("op")) else {
            continue;
        };
        let v = s.value;
        match s.name.as_str() {
            "fsprof_operation_latency_seconds_sum" => {
                if !in_range(v, hz) {
                    return Err(format!("{l} {o}: {} of {v}: out of range", s.name));
                }
                sums.insert((l, o), v);
            }
            "fsprof_operation_calls_total" => {
                if !in_range(v, 1.0) {
                    return Err(format!("{l} {o}: {} of {v}: out of range", s.name));
                }
                calls.insert((l, o), v);
            }
            "fsprof_operation_latency_seconds_bucket" => {
                let le = s.label("le").and_then(|le| match le {
                    "+Inf" => Some(f64::INFINITY),
                    le => le.parse::<f64>().ok(),
                });
                let Some(le) = le else {
                    return Err(format!("{l} {o}: a bucket without a numeric le"));
                };
                let list = buckets.entry((l, o)).or_insert_with(|| {
                    order.push((l, o));
                    Vec::new()
                });
                list.push((le, v));
            }
            _ => {}
        }
    }
    if order.len() > MAX_HISTOGRAMS || p.layers.len() > MAX_HISTOGRAMS {
        return Err(format!(
            "{} histograms in {} layers: more than the {MAX_HISTOGRAMS} a profile may have",
            order.len(),
            p.layers.len()
        ));
    }
    for (lname, op) in order {
        if !valid_name(op) {
            return Err(format!("operation name {op:?}: not a valid operation name"));
        }
        let layer = p
            .layers
            .iter_mut()
            .find(|l| l.name == lname)
            .ok_or_else(|| format!("layer {lname}: no fsprof_layer_buckets_per_octave"))?;
        let (r, n) = (layer.resolution.get() as f64, layer.buckets);
        let mut o = OpProfile::new(op, n, 1);
        let mut sorted = buckets.remove(&(lname, op)).unwrap_or_default();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut below = 0.0f64;
        for (le, cum) in sorted {
            if !in_range(cum, 1.0) || cum < below || le.is_nan() {
                return Err(format!("{lname} {op}: bucket counts that do not add up"));
            }
            let b = if le.is_infinite() {
                n - 1
            } else if le <= 0.0 {
                0
            } else {
                ((r * (le * hz).log2()).round() - 1.0).clamp(0.0, n as f64 - 1.0) as usize
            };
            o.epochs[0][b] = o.epochs[0][b].saturating_add((cum - below) as u64);
            below = cum;
        }
        let finished: u64 = o.epochs[0].iter().sum();
        o.count = calls
            .get(&(lname, op))
            .map_or(finished, |&c| (c as u64).max(finished));
        o.total = sums
            .get(&(lname, op))
            .map_or(0, |&secs| (secs * hz).round().max(0.0) as u64);
        if layer.op(op).is_none() {
            layer.ops.push(o);
        }
    }
    if p.layers.is_empty() {
        return Err("no fsprof_layer_buckets_per_octave: not an fsprof endpoint".into());
    }
    Ok(p)
}

/// The clock and transport an exposition names, into `p`.
fn metadata(samples: &[Sample], p: &mut Profile) {
    if let Some(s) = samples.iter().find(|s| s.name == "fsprof_clock_info") {
        p.clock = s.label("clock").and_then(ClockKind::parse);
        p.invariant_tsc = match s.label("invariant_tsc") {
            Some("true") => Some(true),
            Some("false") => Some(false),
            _ => None,
        };
    }
    if let Some(t) = samples
        .iter()
        .find(|s| s.name == "fsprof_build_info")
        .and_then(|s| s.label("transport"))
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_alphanumeric()))
    {
        p.extra.push(("transport".into(), t.to_string()));
    }
}

/// The layers an exposition declares (`fsprof_layer_buckets_per_octave`), into `p`.
fn layers(samples: &[Sample], p: &mut Profile) -> Result<(), String> {
    for s in samples {
        if s.name != "fsprof_layer_buckets_per_octave" {
            continue;
        }
        let (Some(name), r) = (s.label("layer"), s.value) else {
            continue;
        };
        let res = Resolution::new(r as u32)
            .filter(|_| r.fract() == 0.0)
            .ok_or_else(|| format!("layer {name}: {r} buckets per octave (1, 2, 4 or 8)"))?;
        if !valid_name(name) {
            return Err(format!("layer name {name:?}: not a valid layer name"));
        }
        if p.layer(name).is_none() {
            p.layers.push(Layer::new(name, res));
        }
    }
    Ok(())
}

/// Whether `s` may name a layer or an operation in a profile (printable ASCII, no space or `=`).
fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 256 && s.bytes().all(|b| b.is_ascii_graphic() && b != b'=')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(hz: u64, r: u32) -> Profile {
        let res = Resolution::new(r).unwrap();
        let mut l = Layer::new("fuse", res);
        let mut o = OpProfile::new("OP_READ", l.buckets, 1);
        for (b, n) in [(3, 2), (10, 5), (11, 1), (40, 7)] {
            o.epochs[0][b * r as usize / 2] += n;
            o.count += n;
        }
        o.count += 2; // in flight
        o.total = 123_456_789;
        l.ops.push(o);
        let mut empty = OpProfile::new("OP_OPEN", l.buckets, 1);
        empty.count = 0;
        l.ops.push(empty);
        Profile {
            cycles_per_sec: Some(hz),
            clock: Some(ClockKind::Tsc),
            invariant_tsc: Some(true),
            layers: vec![l, Layer::new("lower", res)],
            ..Profile::default()
        }
    }

    #[test]
    fn an_exposition_reads_back_as_the_profile() {
        for r in [1, 2, 4, 8] {
            for hz in [1_000_000_000, 2_596_149_906, 3] {
                let p = sample(hz, r);
                let text = profile_store::prometheus::exposition(&p, hz);
                let back = from_exposition(&text).unwrap();
                assert_eq!(back.cycles_per_sec, Some(hz));
                assert_eq!(back.clock, Some(ClockKind::Tsc));
                let (a, b) = (&p.layers[0], back.layer("fuse").unwrap());
                assert_eq!(a.resolution, b.resolution);
                let (x, y) = (a.op("OP_READ").unwrap(), b.op("OP_READ").unwrap());
                assert_eq!(x.epochs, y.epochs, "r {r} hz {hz}");
                assert_eq!(x.count, y.count);
                assert!((x.total as f64 - y.total as f64).abs() <= 1.0);
                assert!(back.layer("lower").is_some());
            }
        }
    }

    #[test]
    fn other_text_is_refused_with_a_reason() {
        assert!(parse(b"\xff\xfe").unwrap_err().contains("UTF-8"));
        let e = from_exposition("# TYPE x counter\nx 1\n").unwrap_err();
        assert!(e.contains("not an fsprof endpoint"), "{e}");
        let bad = "# TYPE fsprof_operation_latency_seconds histogram\n\
                   fsprof_clock_cycles_per_second 1000\n\
                   fsprof_layer_buckets_per_octave{layer=\"fuse\"} 3\n";
        assert!(
            from_exposition(bad)
                .unwrap_err()
                .contains("buckets per octave")
        );
        let shrinking = "# TYPE fsprof_clock_cycles_per_second gauge\n\
                   fsprof_clock_cycles_per_second 1000\n\
                   # TYPE fsprof_layer_buckets_per_octave gauge\n\
                   fsprof_layer_buckets_per_octave{layer=\"fuse\"} 1\n\
                   # TYPE fsprof_operation_latency_seconds histogram\n\
                   fsprof_operation_latency_seconds_bucket{layer=\"fuse\",op=\"OP_READ\",le=\"0.004\"} 5\n\
                   fsprof_operation_latency_seconds_bucket{layer=\"fuse\",op=\"OP_READ\",le=\"0.008\"} 2\n";
        assert!(
            from_exposition(shrinking)
                .unwrap_err()
                .contains("do not add up")
        );
    }

    /// A real exposition with one line changed by `edit`.
    fn edited(edit: impl Fn(&str) -> String) -> String {
        let text = profile_store::prometheus::exposition(&sample(2_000_000_000, 2), 2e9 as u64);
        text.lines().map(|l| edit(l) + "\n").collect()
    }

    #[test]
    fn numbers_a_profile_cannot_hold_are_refused() {
        let sum = "fsprof_operation_latency_seconds_sum{";
        for v in ["1e300", "+Inf", "-5", "NaN"] {
            let text = edited(|l| {
                if l.starts_with(sum) && l.contains("OP_READ") {
                    format!("{} {v}", l.rsplit_once(' ').unwrap().0)
                } else {
                    l.to_string()
                }
            });
            let e = from_exposition(&text).unwrap_err();
            assert!(e.contains("out of range"), "{v}: {e}");
        }
        let text = edited(|l| {
            if l.contains("le=\"+Inf\"") && l.contains("OP_READ") {
                format!("{} 1e300", l.rsplit_once(' ').unwrap().0)
            } else {
                l.to_string()
            }
        });
        assert!(
            from_exposition(&text)
                .unwrap_err()
                .contains("do not add up")
        );
    }

    #[test]
    fn other_metrics_are_skipped_and_too_many_samples_refused() {
        // Lines of other families are not parsed (nor held).
        let text = edited(|l| format!("other_metric{{x=\"{l}\"}} 1\n{l}"));
        let back = from_exposition(&text).unwrap();
        assert_eq!(back.layer("fuse").unwrap().count("OP_READ"), 17);
        // A page of a million bucket lines is refused before it is parsed.
        let mut big = edited(|l| l.to_string());
        for i in 0..MAX_SAMPLES {
            big.push_str(&format!(
                "fsprof_operation_latency_seconds_bucket{{layer=\"fuse\",op=\"OP_{i}\",le=\"+Inf\"}} 1\n"
            ));
        }
        let e = from_exposition(&big).unwrap_err();
        assert!(e.contains("more than 262144 samples"), "{e}");
    }

    #[test]
    fn a_redirect_is_an_error_not_followed() {
        use std::io::Write as _;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/metrics", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            let mut req = [0u8; 4096];
            let _ = c.read(&mut req);
            c.write_all(
                b"HTTP/1.1 302 Found\r\nLocation: file:///etc/passwd\r\nContent-Length: 0\r\n\r\n",
            )
            .unwrap();
        });
        let e = load(&url).unwrap_err().to_string();
        server.join().unwrap();
        assert!(e.contains("HTTP 302 Found to file:///etc/passwd"), "{e}");
    }
}
