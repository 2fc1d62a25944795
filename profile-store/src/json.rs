//! The JSON form of profiles (`docs/format.md#json`), as served by `.fsprof.json`.
//!
//! ```json
//! {"format":"fsprof-profile","version":1,"started_unix_ns":1795000000000000000,"clock":"tsc",
//!  "cycles_per_sec":2893421000,"invariant_tsc":true,
//!  "layers":[{"name":"fuse","resolution":1,"buckets":64,"epoch_cycles":0,"epochs":1,
//!             "max_epochs_reached":false,"ops":[{"name":"OP_LOOKUP","count":3,"total":1800,
//!             "epochs":[[0,0,...]]}]}]}
//! ```
//!
//! Version 2 (`docs/format.md#version-2`) adds `"sections": [{"name", "attrs": {...}, "lines":
//! [...]}]` after the layers, and allows `SYS_` operations and per-key layers; `"version"` is 2
//! exactly when a profile uses any of them, as in the text form.
//!
//! Unknown keys of the text form are kept in an `"extra"` object (global and per layer). Numbers
//! are u64 JSON numbers; JavaScript readers lose precision above 2^53. Operations are written in
//! listing order, only those with a non-zero count, as in the text form.

use serde::{Deserialize, Serialize};

use crate::bucket::Resolution;
use crate::clock::ClockKind;
use crate::limits::{Budget, MAX_BUCKETS, MAX_EPOCHS};
use crate::ops;
use crate::profile::{Layer, OpProfile, Profile, Section};
use crate::text;

/// The `"format"` value of a JSON profile.
pub const FORMAT: &str = "fsprof-profile";

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonProfile {
    format: String,
    version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    started_unix_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    clock: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cycles_per_sec: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    invariant_tsc: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "pairs")]
    extra: Vec<(String, String)>,
    layers: Vec<JsonLayer>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    sections: Vec<JsonSection>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonSection {
    name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "pairs")]
    attrs: Vec<(String, String)>,
    lines: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonLayer {
    name: String,
    resolution: u32,
    buckets: usize,
    #[serde(default)]
    epoch_cycles: u64,
    #[serde(default)]
    epochs: Option<usize>,
    #[serde(default)]
    max_epochs_reached: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "pairs")]
    extra: Vec<(String, String)>,
    ops: Vec<JsonOp>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonOp {
    name: String,
    count: u64,
    total: u64,
    epochs: Vec<Vec<u64>>,
}

/// Ordered string pairs as a JSON object.
mod pairs {
    use serde::de::{MapAccess, Visitor};
    use serde::ser::SerializeMap;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(v.len()))?;
        for (k, val) in v {
            m.serialize_entry(k, val)?;
        }
        m.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Vec<(String, String)>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some((k, val)) = a.next_entry::<String, String>()? {
                    v.push((k, val));
                }
                Ok(v)
            }
        }
        d.deserialize_map(V)
    }
}

/// A JSON profile that could not be read: a syntax error (with line and column) or content that
/// breaks the profile rules (with the place it was found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError(pub String);

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for JsonError {}

/// `json` with every character outside printable ASCII written as a `\uXXXX` escape (two for
/// one beyond the basic plane): the same JSON value, and a valid section line. Outside strings,
/// JSON from serde is ASCII already; inside them, serde escapes the control characters.
pub fn ascii(json: String) -> String {
    if json.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if (' '..='~').contains(&c) {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// Writes `p` as compact JSON on one line, ended by a newline.
pub fn write(p: &Profile) -> String {
    let j = JsonProfile {
        format: FORMAT.into(),
        version: p.version(),
        started_unix_ns: p.started_unix_ns,
        clock: p.clock.map(|c| c.as_str().to_string()),
        cycles_per_sec: p.cycles_per_sec,
        invariant_tsc: p.invariant_tsc,
        extra: p.extra.clone(),
        layers: p
            .layers
            .iter()
            .map(|l| JsonLayer {
                name: l.name.clone(),
                resolution: l.resolution.get(),
                buckets: l.buckets,
                epoch_cycles: l.epoch_cycles,
                epochs: Some(l.epochs),
                max_epochs_reached: l.max_epochs_reached,
                extra: l.extra.clone(),
                ops: l
                    .ops_in_listing_order()
                    .into_iter()
                    .filter(|o| o.count > 0)
                    .map(|o| JsonOp {
                        name: o.name.clone(),
                        count: o.count,
                        total: o.total,
                        epochs: (0..l.epochs)
                            .map(|e| {
                                let mut v = o.epochs.get(e).cloned().unwrap_or_default();
                                v.resize(l.buckets, 0);
                                v
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect(),
        sections: p
            .sections
            .iter()
            .map(|s| JsonSection {
                name: s.name.clone(),
                attrs: s.attrs.clone(),
                lines: s.lines.clone(),
            })
            .collect(),
    };
    let mut s = serde_json::to_string(&j).expect("profile serializes");
    s.push('\n');
    s
}

/// Most bytes of a JSON profile the readers take: 64 MiB. JSON is parsed into its document
/// before the limits of the text parser ([`text::MAX_CELLS`]) can be checked, and that
/// document takes several times the bytes it was read from (a `0,` of two bytes becomes an
/// eight-byte count), so the input itself is bounded, before anything is parsed. A profile
/// larger than that is read as text, which streams under the cell limit:
/// `fsprof export --format text`. (Profiles of a live mount at the default settings, 38
/// operations × 256 epochs × 64 buckets, take under 2 MB as JSON.)
pub const MAX_JSON_BYTES: u64 = 64 << 20;

/// Parses a JSON profile and checks it against the same rules as the text parser.
pub fn parse(input: &str) -> Result<Profile, JsonError> {
    parse_reader(input.as_bytes())
}

/// Reads a JSON profile from `r` as a stream, refusing it once it passes [`MAX_JSON_BYTES`]
/// (so memory stays bounded whatever `r` yields), and checks it as [`parse`] does. Syntax
/// errors are found as the bytes arrive: a stream that is not JSON fails at its first bad
/// byte.
pub fn parse_reader(r: impl std::io::Read) -> Result<Profile, JsonError> {
    let capped = Capped {
        r: std::io::BufReader::with_capacity(8 << 10, r),
        left: MAX_JSON_BYTES,
    };
    let j: JsonProfile = serde_json::from_reader(capped).map_err(|e| {
        JsonError(match e.io_error_kind() {
            Some(std::io::ErrorKind::FileTooLarge) => format!(
                "JSON profile larger than {} MiB, the most this reader takes (a larger profile \
                 is read as text: fsprof export --format text)",
                MAX_JSON_BYTES >> 20
            ),
            Some(_) => format!("read error: {e}"),
            None => format!("JSON: {e}"),
        })
    })?;
    let bad = |m: String| Err(JsonError(m));
    if j.format != FORMAT {
        return bad(format!(
            "\"format\" must be \"{FORMAT}\", found \"{}\"",
            j.format
        ));
    }
    if j.version != 1 && j.version != 2 {
        return bad(format!(
            "unsupported profile version {} (this tool reads 1 and 2)",
            j.version
        ));
    }
    let clock = match j.clock.as_deref() {
        None => None,
        Some(c) => match ClockKind::parse(c) {
            Some(k) => Some(k),
            None => return bad(format!("clock must be tsc, cntvct or ns, found \"{c}\"")),
        },
    };
    if j.cycles_per_sec == Some(0) {
        return bad("cycles_per_sec must not be 0".into());
    }
    if j.layers.is_empty() {
        return bad("a profile needs at least one layer".into());
    }
    let mut p = Profile {
        started_unix_ns: j.started_unix_ns,
        clock,
        cycles_per_sec: j.cycles_per_sec,
        invariant_tsc: j.invariant_tsc,
        extra: j.extra,
        layers: Vec::new(),
        sections: Vec::new(),
    };
    check_pairs(&p.extra, "global", GLOBAL_KEYS)?;
    let mut budget = Budget::default();
    // Names seen, so duplicates are found in linear time.
    let mut layer_names = std::collections::HashSet::new();
    for (li, jl) in j.layers.into_iter().enumerate() {
        p.layers.push(layer(li, jl, &mut layer_names, &mut budget)?);
    }
    for (si, js) in j.sections.into_iter().enumerate() {
        let at = format!("sections[{si}] ({})", js.name);
        if !text::is_valid_value(&js.name) {
            return bad(format!("{at}: bad section name"));
        }
        check_pairs(&js.attrs, &at, &["section"])?;
        if let Some(l) = js.lines.iter().find(|l| !Section::is_valid_line(l)) {
            return bad(format!("{at}: bad line \"{l}\""));
        }
        let cost = js.name.len() + js.lines.iter().map(|l| l.len() + 8).sum::<usize>();
        if let Err(m) = budget.charge_text(cost) {
            return bad(format!("{at}: {m}"));
        }
        p.sections.push(Section {
            name: js.name,
            attrs: js.attrs,
            lines: js.lines,
        });
    }
    if p.version() != j.version {
        return bad(format!(
            "\"version\" is {} but the content is version {} (sections, SYS_ operations and \
             per-key layers need 2; nothing else does)",
            j.version,
            p.version()
        ));
    }
    Ok(p)
}

/// Layer `li` of a JSON profile, checked as the text parser checks it; `names` holds the layer
/// names seen so far.
fn layer(
    li: usize,
    jl: JsonLayer,
    names: &mut std::collections::HashSet<String>,
    budget: &mut Budget,
) -> Result<Layer, JsonError> {
    let bad = |m: String| Err(JsonError(m));
    let at = format!("layers[{li}] ({})", jl.name);
    if !text::is_valid_value(&jl.name) {
        return bad(format!("{at}: bad layer name"));
    }
    if !names.insert(jl.name.clone()) {
        return bad(format!("{at}: layer given twice"));
    }
    let Some(resolution) = Resolution::new(jl.resolution) else {
        return bad(format!("{at}: resolution must be 1, 2, 4 or 8"));
    };
    if jl.buckets == 0 || jl.buckets > MAX_BUCKETS {
        return bad(format!("{at}: buckets must be 1..={MAX_BUCKETS}"));
    }
    let epochs = jl
        .epochs
        .unwrap_or_else(|| jl.ops.first().map_or(1, |o| o.epochs.len()));
    if epochs == 0 || epochs > MAX_EPOCHS {
        return bad(format!("{at}: epochs must be 1..={MAX_EPOCHS}"));
    }
    check_pairs(&jl.extra, &at, LAYER_KEYS)?;
    let mut layer = Layer {
        name: jl.name,
        resolution,
        buckets: jl.buckets,
        epoch_cycles: jl.epoch_cycles,
        epochs,
        max_epochs_reached: jl.max_epochs_reached,
        extra: jl.extra,
        ops: Vec::with_capacity(jl.ops.len()),
    };
    let mut op_names = std::collections::HashSet::new();
    for jo in jl.ops {
        if !ops::is_valid_name(&jo.name) {
            return bad(format!("{at}: bad operation name \"{}\"", jo.name));
        }
        if !op_names.insert(jo.name.clone()) {
            return bad(format!("{at}: {} appears twice", jo.name));
        }
        if let Err(m) = budget.charge(epochs as u64, layer.buckets) {
            return bad(format!("{at}: {}: {m}", jo.name));
        }
        if jo.epochs.len() != epochs {
            return bad(format!(
                "{at}: {} has {} epochs, expected {epochs}",
                jo.name,
                jo.epochs.len()
            ));
        }
        if let Some(e) = jo.epochs.iter().position(|e| e.len() != layer.buckets) {
            return bad(format!(
                "{at}: {} epoch {e} has {} buckets, expected {}",
                jo.name,
                jo.epochs[e].len(),
                layer.buckets
            ));
        }
        layer.ops.push(OpProfile {
            name: jo.name,
            count: jo.count,
            total: jo.total,
            epochs: jo.epochs,
        });
    }
    Ok(layer)
}

/// Keys an extra pair may not use: the standard ones (written from their own fields), and
/// `layer`, which starts a layer line and so cannot begin a global one.
const GLOBAL_KEYS: &[&str] = &[
    "layer",
    "section",
    "started_unix_ns",
    "clock",
    "cycles_per_sec",
    "invariant_tsc",
];
const LAYER_KEYS: &[&str] = &[
    "layer",
    "resolution",
    "buckets",
    "epoch_cycles",
    "epochs",
    "max_epochs_reached",
];

/// Extra keys must survive a trip through the text form: valid characters, not a known key,
/// each key once.
fn check_pairs(pairs: &[(String, String)], at: &str, known: &[&str]) -> Result<(), JsonError> {
    for (i, (k, v)) in pairs.iter().enumerate() {
        if known.contains(&k.as_str()) {
            return Err(JsonError(format!(
                "{at}: extra key '{k}' is a standard key"
            )));
        }
        if pairs[..i].iter().any(|(pk, _)| pk == k) {
            return Err(JsonError(format!("{at}: extra key '{k}' given twice")));
        }
        if !text::is_valid_key(k) || !text::is_valid_value(v) {
            return Err(JsonError(format!("{at}: bad extra key or value '{k}={v}'")));
        }
    }
    Ok(())
}

/// A reader that fails with `FileTooLarge` once more than `left` bytes were asked of it.
struct Capped<R> {
    r: R,
    left: u64,
}

impl<R: std::io::Read> std::io::Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            // One byte more would pass the limit: is there one?
            let mut probe = [0u8; 1];
            return match self.r.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(std::io::ErrorKind::FileTooLarge.into()),
            };
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.r.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}
