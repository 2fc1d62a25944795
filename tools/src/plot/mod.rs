//! `fsprof plot`: which figure to draw from which profiles, and writing it out. The figures
//! themselves are drawn in [`figures`].

use std::fmt::Write as _;
use std::path::Path;
use std::path::PathBuf;

use profile_store::{Layer, OpProfile};

use crate::background::Shares;
use crate::error::Error;
use crate::input::{self, Loaded};
use crate::pairs::{layer_pairs, union_ops};
use crate::select::Selection;

pub mod figures;
pub mod render;

pub use render::Format;

pub use figures::PlotKind;

/// `fsprof plot`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlotConfig {
    /// One profile, or two for an overlay.
    pub inputs: Vec<String>,
    /// The figure; `None` for a histogram of one profile or an overlay of two.
    pub kind: Option<PlotKind>,
    /// Layer and operations.
    pub select: Selection,
    /// Output file: `.svg`, `.png` or `.pdf` (by its extension), or `-` for SVG on standard
    /// output.
    pub output: PathBuf,
    /// Figure title; a default names the input and layer.
    pub title: Option<String>,
    /// `--from`, `--to`, `--trim` (for one profile).
    pub window: crate::window::Window,
    /// What the shares of a layer's latency are taken of (`--with-background`), and whether
    /// background operations may take a `--top` place.
    pub shares: Shares,
}

/// `fsprof plot`: reads nothing itself; draws the figure from `loaded` and writes it, then says
/// what it wrote (unless the figure went to standard output) and warns where a time-lapse it
/// draws from filled its epochs.
pub fn run(loaded: &[Loaded], c: &PlotConfig, out: &mut String) -> Result<(), Error> {
    // A name that is no figure format is refused before anything is drawn.
    format_of(&c.output)?;
    let svg = plot_svg(loaded, c)?;
    let bytes = write_figure(&c.output, &svg, out)?;
    for l in loaded {
        if let Some(w) = l
            .layer(c.select.layer.as_deref())
            .ok()
            .and_then(crate::show::epochs_filled)
        {
            log::warn!("{}: {w}", l.name);
        }
    }
    if let Some(n) = bytes {
        let kind = kind_name(c.kind.unwrap_or(if loaded.len() == 2 {
            PlotKind::Overlay
        } else {
            PlotKind::Histogram
        }));
        let _ = writeln!(
            out,
            "wrote {} ({kind} figure, {n} bytes)",
            c.output.display()
        );
    }
    Ok(())
}

/// The operation a single-operation figure shows: the first `--op`, or the one with the
/// largest total latency.
fn single_op<'l>(
    layer: &'l Layer,
    select: &Selection,
    shares: Shares,
) -> Result<Option<&'l OpProfile>, Error> {
    let ops = input::select_ops(layer, &select.ops, Some(1), shares)?;
    Ok(match select.ops.first() {
        Some(name) => layer.op(name),
        None => ops.first().copied(),
    })
}

/// Draws the figure `c` asks for.
pub fn plot_svg(loaded: &[Loaded], c: &PlotConfig) -> Result<String, Error> {
    let kind = c.kind.unwrap_or(if loaded.len() == 2 {
        PlotKind::Overlay
    } else {
        PlotKind::Histogram
    });
    match (kind, loaded.len()) {
        (PlotKind::Overlay, 2) => {}
        (PlotKind::Overlay, _) => {
            return Err(Error::usage("plot --kind overlay", "needs two profiles"));
        }
        (_, 1) => {}
        (k, _) => {
            return Err(Error::usage(
                format!("plot --kind {}", kind_name(k)),
                "takes one profile (two make an overlay)",
            ));
        }
    }
    // A heat map, an overlay and a stack show one operation; more would be dropped without a
    // word.
    if matches!(
        kind,
        PlotKind::Heatmap | PlotKind::Overlay | PlotKind::Stack
    ) && c.select.ops.len() > 1
    {
        return Err(Error::usage(
            format!("plot --kind {}", kind_name(kind)),
            format!(
                "draws one operation, {} given with --op: draw one figure per operation",
                c.select.ops.len()
            ),
        ));
    }
    let a = &loaded[0];
    if kind == PlotKind::Stack {
        return stack(a, c);
    }
    let windowed = crate::window::apply(a.layer(c.select.layer.as_deref())?, a.clock(), &c.window)?;
    let layer = &windowed;
    let clock = a.clock();
    let default_title = format!("{} (layer {})", shorten(file_name(&a.name), 60), layer.name);
    Ok(match kind {
        PlotKind::Histogram | PlotKind::Latency => {
            let ops = input::select_ops(layer, &c.select.ops, c.select.top, c.shares)?;
            let title = c.title.clone().unwrap_or(default_title);
            if kind == PlotKind::Histogram {
                figures::histogram(layer, &ops, clock, &title, c.shares)
            } else {
                figures::latency(layer, &ops, clock, &title, c.shares)
            }
        }
        PlotKind::Heatmap => {
            let op = single_op(layer, &c.select, c.shares)?.ok_or_else(|| {
                Error::usage(
                    "plot --kind heatmap",
                    format!("{}: layer {} has no operation", a.name, layer.name),
                )
            })?;
            let title = c
                .title
                .clone()
                .unwrap_or(format!("{default_title}: time-lapse"));
            figures::heatmap(layer, op, clock, &title, c.shares)
        }
        PlotKind::Stack => unreachable!("drawn above"),
        PlotKind::Overlay => {
            let b = &loaded[1];
            let (la, lb) = layer_pairs(a, b, c.select.layer.as_deref())?[0];
            let name = match c.select.ops.first() {
                Some(n) => {
                    if la.op(n).is_none() && lb.op(n).is_none() {
                        return Err(Error::usage(
                            format!("--op {n}"),
                            "no such operation in either profile",
                        ));
                    }
                    n.clone()
                }
                None => union_ops(la, lb, &[])?.into_iter().next().ok_or_else(|| {
                    Error::usage("plot --kind overlay", "neither profile has an operation")
                })?,
            };
            let clock = if clock.known() { clock } else { b.clock() };
            let (name_a, name_b) = plot_names(&a.name, &b.name);
            let title = c
                .title
                .clone()
                .unwrap_or(format!("{name}: {name_a} vs {name_b}"));
            figures::overlay(
                la,
                la.op(&name),
                &name_a,
                lb,
                lb.op(&name),
                &name_b,
                clock,
                &title,
            )
        }
    })
}

/// One operation (`--op`, or the one with the most time in `fuse`) at every level of the
/// stack ([`crate::stack::levels`]), overlaid: one colour per level, top level first.
fn stack(a: &Loaded, c: &PlotConfig) -> Result<String, Error> {
    let op = match c.select.ops.first() {
        Some(o) => o.clone(),
        None => crate::stack::default_op(&a.profile)
            .ok_or_else(|| Error::usage(&a.name, "the profile has no operation"))?,
    };
    let levels = crate::stack::levels(&a.profile, &op);
    let Some(first) = levels.first() else {
        return Err(Error::usage(
            format!("plot --kind stack {op}"),
            "no level of the profile has this operation",
        ));
    };
    let geo = first.buckets;
    if let Some(l) = levels
        .iter()
        .find(|l| l.buckets.resolution != geo.resolution)
    {
        return Err(Error::usage(
            "plot --kind stack",
            format!(
                "layer {} has another resolution than {}",
                l.layer, first.layer
            ),
        ));
    }
    let geo = crate::units::Buckets {
        len: levels
            .iter()
            .map(|l| l.buckets.len)
            .max()
            .unwrap_or(geo.len),
        ..geo
    };
    let hists: Vec<(&str, crate::hist::Histogram)> = levels
        .iter()
        .map(|l| (l.layer.as_str(), crate::hist::Histogram::of(&l.op, geo)))
        .collect();
    let title = c.title.clone().unwrap_or(format!(
        "{op} down the stack: {}",
        shorten(file_name(&a.name), 50)
    ));
    Ok(figures::series(&hists, geo, a.clock(), &title))
}

/// The last component of a profile's name (a path, a mount point or `-`).
fn file_name(name: &str) -> &str {
    std::path::Path::new(name)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(name)
}

/// At most `max` characters of `s`, the middle replaced by `…` when it is longer.
fn shorten(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let keep = max.saturating_sub(1);
    let head: String = s.chars().take(keep / 2).collect();
    let tail: String = s.chars().skip(n - (keep - keep / 2)).collect();
    format!("{head}…{tail}")
}

/// How a figure names two profiles: by file name, unless both have the same one; at most 40
/// characters each, so the title and legend stay inside the figure.
fn plot_names(a: &str, b: &str) -> (String, String) {
    let (fa, fb) = (file_name(a), file_name(b));
    let (a, b) = if fa != fb { (fa, fb) } else { (a, b) };
    (shorten(a, 40), shorten(b, 40))
}

fn kind_name(k: PlotKind) -> &'static str {
    match k {
        PlotKind::Histogram => "histogram",
        PlotKind::Latency => "latency",
        PlotKind::Heatmap => "heatmap",
        PlotKind::Overlay => "overlay",
        PlotKind::Stack => "stack",
    }
}

/// The format `path` asks for by its extension; any other is refused (writing SVG into
/// `x.pdf` would make a file no PDF reader opens).
pub fn format_of(path: &Path) -> Result<Format, Error> {
    if path == Path::new("-") {
        return Ok(Format::Svg);
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("svg") => Ok(Format::Svg),
        Some("png") => Ok(Format::Png),
        Some("pdf") => Ok(Format::Pdf),
        _ => Err(Error::usage(
            format!("-o {}", path.display()),
            "a figure is written as .svg, .png or .pdf (or '-' for SVG on standard output)",
        )),
    }
}

/// Writes the figure to `path` in the format its extension names (`-` appends the SVG to
/// `out`); returns the bytes written to the file, `None` for standard output.
fn write_figure(path: &Path, svg: &str, out: &mut String) -> Result<Option<usize>, Error> {
    let shown = path.display().to_string();
    if path == Path::new("-") {
        out.push_str(svg);
        return Ok(None);
    }
    let bytes = match format_of(path)? {
        Format::Svg => svg.as_bytes().to_vec(),
        f @ (Format::Png | Format::Pdf) => {
            render::render(svg, f).map_err(|e| Error::output(&shown, e))?
        }
    };
    std::fs::write(path, &bytes).map_err(|e| Error::output(shown, e))?;
    Ok(Some(bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_name_profiles_by_file_and_keep_names_short() {
        assert_eq!(
            plot_names("/srv/a/before.fsprof", "/srv/b/after.fsprof"),
            ("before.fsprof".to_string(), "after.fsprof".to_string())
        );
        // Same file name: the paths tell them apart.
        assert_eq!(
            plot_names("/x/p.fsprof", "/y/p.fsprof"),
            ("/x/p.fsprof".to_string(), "/y/p.fsprof".to_string())
        );
        let long = format!("/{}/p.fsprof", "d".repeat(100));
        let (a, _) = plot_names(&long, "/y/p.fsprof");
        assert_eq!(a.chars().count(), 40);
        assert!(a.starts_with("/ddd") && a.ends_with("p.fsprof") && a.contains('…'));
        assert_eq!(shorten("short", 40), "short");
        assert_eq!(file_name("-"), "-");
    }
}
