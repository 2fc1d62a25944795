//! `fsprof report PROFILE|MNT|URL -o report.html`, and `fsprof profile --report FILE`: one
//! self-contained HTML page a person can open in any browser, keep or send: no network, no
//! external script, style sheet or font; every figure is inline SVG ([`crate::plot`]).
//!
//! In order: the findings ([`crate::findings`]); the layers side by side (each operation's
//! calls and time in every layer: `user`, `kernel`, `fuse`, `lower` or the branches, the block
//! devices'); every layer's histograms, each drawn once, with their peaks marked (found as
//! every view finds them, [`crate::peaks::of`]); the time-lapse heat maps of the heaviest
//! operations (when the profile has epochs, or a note that the run was shorter than one); the
//! slowest requests, the hottest files and the callers as tables that sort by the column whose
//! header is clicked, within that table (a few lines of inline script; without script they
//! stay in their order: slowest or hottest first). The page takes the window's width; a table
//! wider than it scrolls within its box.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use profile_store::{Layer, keyed, name};

use crate::background::Shares;
use crate::error::{Error, printable};
use crate::files;
use crate::findings::{self, Findings};
use crate::input::{self, Loaded};
use crate::plot::figures;
use crate::slow::Record;
use crate::svg::escape;
use crate::units::{Clock, fmt_pct, fmt_secs};

/// `fsprof report`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportConfig {
    /// The profile, mount point or URL.
    pub input: String,
    /// The HTML file to write.
    pub output: PathBuf,
}

/// Operations whose heat map the report draws at most.
const HEATMAPS: usize = 3;

const STYLE: &str = "body{font-family:'DejaVu Sans',Verdana,Arial,sans-serif;margin:1.5em;\
color:#222}div.wide{overflow-x:auto;max-width:100%}.figure svg{max-width:100%;height:auto}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.8em;\
border-bottom:1px solid #ccc}pre.findings{background:#f6f6f0;border:1px solid #ddd;\
padding:.8em;white-space:pre-wrap}table{border-collapse:collapse;font-size:.85em;margin:.5em 0}\
th,td{border:1px solid #ddd;padding:.2em .5em;text-align:left}td.n{text-align:right}\
table.sortable th{cursor:pointer;background:#eef}table.sortable th:hover{background:#dde}\
.row{display:flex;flex-wrap:wrap;gap:8px}.row svg{max-width:100%;height:auto}\
p.note{color:#555;font-size:.9em}";

/// Sorts a table by the column whose header is clicked, within that table (the header's own
/// column index, `cellIndex`; numbers by their `data-v`, text otherwise; a stable sort), the
/// other way on a second click; notes on the body how many sortable tables and SVG bars the
/// browser found (the tests read them from the rendered page).
const SCRIPT: &str = "document.querySelectorAll('table.sortable').forEach(function(t){\
Array.from(t.tHead.rows[0].cells).forEach(function(th){th.addEventListener('click',function(){\
var i=th.cellIndex,b=t.tBodies[0],up=th.dataset.up!=='1';th.dataset.up=up?'1':'0';\
var r=Array.from(b.rows).map(function(x,k){return [x,k];});\
function v(x){var c=x.cells[i];if(!c)return '';var n=c.dataset.v;\
return n!==undefined&&n!==''&&!isNaN(parseFloat(n))?parseFloat(n):c.textContent;}\
r.sort(function(x,y){var a=v(x[0]),c=v(y[0]);var d=(typeof a==='number'&&typeof c==='number')?\
a-c:String(a).localeCompare(String(c));return (up?d:-d)||x[1]-y[1];});\
r.forEach(function(x){b.appendChild(x[0]);});});});});\
document.body.setAttribute('data-sortable',document.querySelectorAll('table.sortable').length);\
document.body.setAttribute('data-bars',document.querySelectorAll('svg rect.bar').length);";

/// `fsprof report`: writes the page for `p` to `c.output` and says so in `out`.
pub fn run(p: &Loaded, c: &ReportConfig, out: &mut String) -> Result<(), Error> {
    let slow = crate::slow::slowest_of(&p.profile)
        .map_err(|e| Error::input(&p.name, e))?
        .unwrap_or_default();
    let found = findings::find(&p.profile, &slow, findings::Limits::default());
    let page = html(p, &found, &slow);
    write(&c.output, &page)?;
    let _ = writeln!(
        out,
        "report written to {} ({} bytes)",
        c.output.display(),
        page.len()
    );
    Ok(())
}

/// Writes `page` to `path`.
pub fn write(path: &Path, page: &str) -> Result<(), Error> {
    std::fs::write(path, page).map_err(|e| Error::output(path.display().to_string(), e))
}

/// An SVG figure to put inside HTML: without its XML declaration.
fn inline(svg: &str) -> &str {
    match svg.strip_prefix("<?xml") {
        Some(rest) => rest.split_once('\n').map_or("", |(_, body)| body),
        None => svg,
    }
}

/// The layers a person compares: not the per-caller ones.
fn plain_layers(p: &Loaded) -> Vec<&Layer> {
    p.profile
        .layers
        .iter()
        .filter(|l| !keyed::is_per_caller(&l.name))
        .collect()
}

/// The whole page.
pub fn html(p: &Loaded, f: &Findings, slow: &[Record]) -> String {
    let clock = p.clock();
    let mut h = String::with_capacity(1 << 16);
    let title = format!("fsprof report: {}", p.name);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    meta(&mut h, p);
    let _ = write!(
        h,
        "<h2 id=\"findings\">Findings</h2>\n<pre class=\"findings\">{}</pre>\n",
        escape(&findings::render(f))
    );
    side_by_side(&mut h, p, f);
    for l in plain_layers(p) {
        let ops = input::select_ops(l, &[], None, Shares::default()).unwrap_or_default();
        let ops: Vec<_> = ops.into_iter().filter(|o| o.count > 0).collect();
        let _ = writeln!(
            h,
            "<h2 id=\"layer-{0}\">Layer {0}: histograms, peaks marked</h2>",
            escape(&l.name)
        );
        let svg = figures::histogram_with_peaks(
            l,
            &ops,
            clock,
            &format!("layer {}", l.name),
            Shares::default(),
        );
        let _ = writeln!(h, "<div class=\"figure\">{}</div>", inline(&svg));
    }
    heatmaps(&mut h, p, f);
    slow_table(&mut h, slow);
    files_table(&mut h, p, &f.layer, clock);
    callers_table(&mut h, f, clock);
    let _ = write!(h, "<script>{SCRIPT}</script>\n</body></html>\n");
    h
}

fn meta(h: &mut String, p: &Loaded) {
    let clock = match p.profile.cycles_per_sec {
        Some(hz) => format!("{:.3} GHz", hz as f64 / 1e9),
        None => "unknown (latencies in cycles)".into(),
    };
    let layers: Vec<String> = plain_layers(p).iter().map(|l| l.name.clone()).collect();
    let _ = writeln!(
        h,
        "<p class=\"note\">Clock {}; layers {}. Latencies are counted in log2 buckets of \
         clock cycles; a bucket is labelled by its lower bound. Percentiles and a peak's share \
         of time are estimates (marked ~).</p>",
        escape(&clock),
        escape(&layers.join(", "))
    );
}

/// The layers side by side: each operation of the analysed layer with its calls and time in
/// every layer that has it (the `lower` layer and the branches time their calls under the
/// request's operation; the `user` layer has calls of its own, listed after).
fn side_by_side(h: &mut String, p: &Loaded, f: &Findings) {
    let clock = p.clock();
    let layers = plain_layers(p);
    let Some(main) = layers.iter().find(|l| l.name == f.layer) else {
        return;
    };
    let _ = writeln!(
        h,
        "<h2 id=\"layers\">Layers side by side</h2>\n<div class=\"wide\">\
         <table class=\"sortable\" id=\"layers-table\"><thead><tr><th>operation</th>"
    );
    for l in &layers {
        let _ = write!(
            h,
            "<th>{0} calls</th><th>{0} time</th><th>{0} mean</th>",
            escape(&l.name)
        );
    }
    h.push_str("</tr></thead><tbody>\n");
    let mut names: Vec<&profile_store::OpProfile> = main.ops.iter().collect();
    crate::input::sort_by_latency(&mut names);
    let user: Vec<&Layer> = layers
        .iter()
        .copied()
        .filter(|l| l.name != main.name && !l.ops.iter().any(|o| main.op(&o.name).is_some()))
        .collect();
    let rows = names.iter().map(|o| o.name.as_str()).chain(
        user.iter()
            .flat_map(|l| l.ops.iter().map(|o| o.name.as_str())),
    );
    for name in rows {
        let _ = write!(h, "<tr><td>{}</td>", escape(name));
        for l in &layers {
            match l.op(name) {
                Some(o) => {
                    let _ = write!(
                        h,
                        "<td class=\"n\" data-v=\"{0}\">{0}</td><td class=\"n\" data-v=\"{1}\">{2}</td>\
                         <td class=\"n\" data-v=\"{3}\">{4}</td>",
                        o.count,
                        o.total,
                        escape(&clock.latency(o.total as f64)),
                        o.mean(),
                        escape(&clock.latency(o.mean()))
                    );
                }
                None => h.push_str(
                    "<td class=\"n\" data-v=\"0\"></td><td class=\"n\" data-v=\"0\"></td>\
                     <td class=\"n\" data-v=\"0\"></td>",
                ),
            }
        }
        h.push_str("</tr>\n");
    }
    // The histograms follow, each once, layer by layer.
    h.push_str("</tbody></table></div>\n");
}

fn heatmaps(h: &mut String, p: &Loaded, f: &Findings) {
    let _ = writeln!(h, "<h2 id=\"timelapse\">Time-lapse</h2>");
    let layer = p.profile.layer(&f.layer);
    if let Some(l) = layer.filter(|l| l.epoch_cycles > 0 && l.epochs <= 1) {
        let _ = writeln!(
            h,
            "<p class=\"note\" id=\"one-epoch\">The run was shorter than one epoch ({}): \
             it is all in the first, so there is no time-lapse to show (a shorter --epoch \
             cuts it finer).</p>",
            escape(&p.clock().latency(l.epoch_cycles as f64))
        );
        return;
    }
    let Some(l) = layer.filter(|l| l.epochs > 1) else {
        let _ = writeln!(
            h,
            "<p class=\"note\">No time-lapse in this profile (record one with --epoch 1s).</p>"
        );
        return;
    };
    if let Some(w) = crate::show::epochs_filled(l) {
        let _ = writeln!(h, "<p class=\"note\"><b>{}</b></p>", escape(&w));
    }
    for o in f.ops.iter().take(HEATMAPS) {
        if let Some(op) = l.op(&o.op) {
            let svg = figures::heatmap(
                l,
                op,
                p.clock(),
                &format!("{}: time-lapse (layer {})", o.op, l.name),
                Shares::default(),
            );
            let _ = writeln!(h, "<div class=\"figure\">{}</div>", inline(&svg));
        }
    }
}

fn slow_table(h: &mut String, slow: &[Record]) {
    let _ = writeln!(h, "<h2 id=\"slowest\">Slowest requests</h2>");
    if slow.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"note\">None recorded (record them with --slowest).</p>"
        );
        return;
    }
    h.push_str(
        "<div class=\"wide\"><table class=\"sortable\" id=\"slowest-table\"><thead><tr>\
         <th>latency</th><th>operation</th><th>path</th><th>process</th><th>pid</th>\
         <th>errno</th><th>inner calls</th></tr></thead><tbody>\n",
    );
    for r in slow {
        let inner = crate::slow::inner_summary(r);
        let _ = writeln!(
            h,
            "<tr><td class=\"n\" data-v=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td><td>{}</td></tr>",
            r.latency_ns,
            escape(&fmt_secs(r.latency_ns as f64 / 1e9)),
            escape(&printable(&r.op)),
            escape(
                &r.path
                    .as_deref()
                    .map_or_else(|| "(unknown)".into(), name::shown)
            ),
            escape(&r.comm.as_deref().map_or_else(|| "?".into(), name::shown)),
            r.pid.unwrap_or(0),
            crate::slow::unknown(r.pid),
            r.errno,
            r.errno,
            escape(&inner.join(", "))
        );
    }
    h.push_str("</tbody></table></div>\n");
}

fn files_table(h: &mut String, p: &Loaded, layer: &str, clock: Clock) {
    let _ = writeln!(h, "<h2 id=\"files\">Hottest files</h2>");
    let entries =
        match crate::input::section_for(&p.profile, files::SECTION, layer).map(files::entries) {
            Some(Ok(e)) => e,
            Some(Err(e)) => {
                let _ = writeln!(h, "<p class=\"note\">Unreadable: {}</p>", escape(&e));
                return;
            }
            None => {
                let _ = writeln!(
                    h,
                    "<p class=\"note\">None recorded (record them with --hot-files).</p>"
                );
                return;
            }
        };
    h.push_str(
        "<div class=\"wide\"><table class=\"sortable\" id=\"files-table\"><thead><tr>\
         <th>path</th><th>time</th><th>time at least</th><th>time overcount &lt;=</th>\
         <th>requests</th></tr></thead><tbody>\n",
    );
    let lat = entries.iter().filter(|e| e.by == "latency");
    for e in lat {
        let calls = entries
            .iter()
            .find(|c| c.by == "calls" && c.path == e.path)
            .map(|c| c.value);
        let certain = e.value.saturating_sub(e.error);
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td>\
             <td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td></tr>",
            escape(&name::shown(&e.shown())),
            e.value,
            escape(&files::shown_value(e.value, e.error, |v| clock.latency(v as f64))),
            certain,
            escape(&clock.latency(certain as f64)),
            e.error,
            escape(&clock.latency(e.error as f64)),
            calls.unwrap_or(0),
            calls.map_or_else(|| "-".to_string(), |c| c.to_string())
        );
    }
    let _ = writeln!(
        h,
        "</tbody></table></div>\n<p class=\"note\">A request counts for the node it is about \
        (the directory, for lookups and creates). A file's time is at most its value and at \
        least its value less its overcount. {}</p>",
        escape(files::BOUND_NOTE)
    );
}

fn callers_table(h: &mut String, f: &Findings, clock: Clock) {
    let _ = writeln!(h, "<h2 id=\"callers\">Callers</h2>");
    if f.callers.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"note\">None recorded (record them with --by comm).</p>"
        );
        return;
    }
    h.push_str(
        "<div class=\"wide\"><table class=\"sortable\" id=\"callers-table\"><thead><tr>\
         <th>caller</th><th>requests</th><th>time</th><th>share</th></tr></thead><tbody>\n",
    );
    for c in &f.callers {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td>\
             <td class=\"n\" data-v=\"{}\">{}</td></tr>",
            escape(&name::shown(&c.caller)),
            c.calls,
            c.calls,
            c.cycles,
            escape(&clock.latency(c.cycles as f64)),
            c.share,
            fmt_pct(c.share)
        );
    }
    h.push_str("</tbody></table></div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::{OpProfile, Profile, Resolution};

    #[test]
    fn the_page_holds_every_part_and_nothing_from_outside() {
        let mut p = Profile {
            cycles_per_sec: Some(1_000_000_000),
            ..Profile::default()
        };
        for name in ["fuse", "lower"] {
            let mut l = Layer::new(name, Resolution::ONE);
            let mut o = OpProfile::new("OP_READ", 64, 2);
            o.epochs[0][10] = 100;
            o.epochs[1][20] = 5;
            o.count = 105;
            o.total = 100 * 1536 + 5 * 1_572_864;
            l.ops.push(o);
            l.epochs = 2;
            l.epoch_cycles = 1 << 30;
            p.layers.push(l);
        }
        let mut hot = profile_store::Section::new(files::SECTION);
        hot.lines = vec!["by=latency rank=1 ino=5 value=7864320 error=0 path=/a%3Cb".into()];
        p.sections.push(hot);
        let loaded = Loaded {
            name: "t<1>".into(),
            profile: p,
        };
        let f = findings::find(&loaded.profile, &[], findings::Limits::default());
        let page = html(&loaded, &f, &[]);
        for part in [
            "id=\"findings\"",
            "id=\"layers-table\"",
            "Layer fuse: histograms",
            "Layer lower: histograms",
            "class=\"peak\"",
            "class=\"cell\"",
            "id=\"files-table\"",
            "/a&lt;b",
            "t&lt;1&gt;",
            "<script>",
        ] {
            assert!(page.contains(part), "{part}");
        }
        // Self-contained: nothing is fetched (the SVG namespace is a name, not a fetch; a
        // url() may only point inside the page).
        let page_ns = page.replace("http://www.w3.org/2000/svg", "");
        for outside in [
            "http://", "https://", "src=", "@import", "url(h", "url('", "url(\"",
        ] {
            assert!(!page_ns.contains(outside), "{outside}");
        }
        assert!(!page.contains("<?xml"));
    }

    /// A layer `name` with `op` of `n` calls in bucket 12, in `epochs` epochs of 1 s.
    fn layer(name: &str, op: &str, n: u64, epochs: usize) -> Layer {
        let mut l = Layer::new(name, Resolution::ONE);
        let mut o = OpProfile::new(op, 64, epochs);
        o.epochs[0][12] = n;
        o.count = n;
        o.total = n * 6144;
        l.ops.push(o);
        l.epochs = epochs;
        l.epoch_cycles = 1_000_000_000;
        l
    }

    #[test]
    fn every_layer_but_the_callers_appears_each_histogram_once_and_a_short_run_says_so() {
        let p = Profile {
            cycles_per_sec: Some(1_000_000_000),
            layers: vec![
                layer("fuse", "OP_READ", 10, 1),
                layer("lower", "OP_READ", 10, 1),
                layer("block@dev:vda", "BLK_READ", 4, 1),
                layer("fuse@comm:cat", "OP_READ", 10, 1),
            ],
            ..Profile::default()
        };
        let loaded = Loaded {
            name: "p".into(),
            profile: p,
        };
        let f = findings::find(&loaded.profile, &[], findings::Limits::default());
        let page = html(&loaded, &f, &[]);
        assert!(
            page.contains("Layer block@dev:vda: histograms"),
            "a device's layer"
        );
        assert!(page.contains("<th>block@dev:vda calls</th>"));
        assert!(
            !page.contains("Layer fuse@comm:cat"),
            "a caller's layer is in Callers"
        );
        // Each layer's histogram once: one figure per layer, none per operation besides.
        for l in ["fuse", "lower", "block@dev:vda"] {
            let title = format!("<title>layer {l}</title>");
            assert_eq!(page.matches(&title).count(), 1, "{l}");
        }
        assert_eq!(page.matches("<svg ").count(), 3);
        // Epochs of 1 s, the run shorter: said, not "record one with --epoch".
        assert!(page.contains("shorter than one epoch (1.0s)"), "{page}");
        assert!(!page.contains("record one with --epoch"));
    }
}
