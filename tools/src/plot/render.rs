//! PNG and PDF figures from the SVG `fsprof plot` draws.
//!
//! By default they are made by `rsvg-convert` (Debian package `librsvg2-bin`), run with the
//! SVG on its standard input: the font stack a renderer needs (font parsing, shaping,
//! subsetting) was a fifth of fsprof's first build and bought only these two formats. Where
//! it is missing, the error says in one line what to install. Built with `--features
//! native-plot`, fsprof renders them itself instead (resvg for PNG, svg2pdf for PDF, with the
//! system's fonts), for machines that cannot have librsvg.

/// The file formats a figure is written in, by the output's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.svg`, or `-` for standard output.
    Svg,
    /// `.png`: rendered at the figure's size, on white ([`render()`]).
    Png,
    /// `.pdf`: vector text and shapes ([`render()`]).
    Pdf,
}

/// The figure `svg` as PNG (at its size, on white) or PDF bytes.
pub fn render(svg: &str, format: Format) -> Result<Vec<u8>, String> {
    #[cfg(feature = "native-plot")]
    {
        native::render(svg, format)
    }
    #[cfg(not(feature = "native-plot"))]
    {
        converter(svg, format)
    }
}

/// The program that converts, and what to install where it is missing.
pub const CONVERTER: &str = "rsvg-convert";

/// `rsvg-convert -f png|pdf` with `svg` on its standard input.
#[cfg_attr(feature = "native-plot", allow(dead_code))]
fn converter(svg: &str, format: Format) -> Result<Vec<u8>, String> {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let (name, args): (&str, &[&str]) = match format {
        Format::Png => ("PNG", &["-f", "png", "-b", "white"]),
        Format::Pdf => ("PDF", &["-f", "pdf"]),
        Format::Svg => return Ok(svg.as_bytes().to_vec()),
    };
    let mut child = Command::new(CONVERTER)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "{name} figures are made by {CONVERTER}, which is not installed: \
                     `apt-get install librsvg2-bin` (or write .svg, or build fsprof with \
                     `--features native-plot`)"
                )
            } else {
                format!("{CONVERTER}: {e}")
            }
        })?;
    // Written from a thread of its own: the converter may answer (or fail) before it has
    // read everything, and a pipe holds less than a figure.
    let mut stdin = child.stdin.take().expect("piped");
    let input = svg.as_bytes().to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{CONVERTER}: {e}"))?;
    let _ = writer.join();
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        let why = why.lines().next().unwrap_or("").trim();
        return Err(format!("{CONVERTER} failed ({}): {why}", out.status));
    }
    Ok(out.stdout)
}

#[cfg(feature = "native-plot")]
mod native {
    use super::Format;

    /// The SVG as a usvg tree, with the system's fonts for its text.
    fn tree(svg: &str) -> Result<resvg::usvg::Tree, String> {
        let mut opt = resvg::usvg::Options::default();
        opt.fontdb_mut().load_system_fonts();
        resvg::usvg::Tree::from_str(svg, &opt).map_err(|e| format!("the figure did not parse: {e}"))
    }

    pub fn render(svg: &str, format: Format) -> Result<Vec<u8>, String> {
        match format {
            Format::Svg => Ok(svg.as_bytes().to_vec()),
            Format::Png => {
                use resvg::tiny_skia;
                let tree = tree(svg)?;
                let size = tree.size().to_int_size();
                let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
                    .ok_or_else(|| "the figure has no area".to_string())?;
                pixmap.fill(tiny_skia::Color::WHITE);
                resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
                pixmap.encode_png().map_err(|e| e.to_string())
            }
            Format::Pdf => {
                let mut opt = svg2pdf::usvg::Options::default();
                opt.fontdb_mut().load_system_fonts();
                let tree = svg2pdf::usvg::Tree::from_str(svg, &opt)
                    .map_err(|e| format!("the figure did not parse: {e}"))?;
                svg2pdf::to_pdf(
                    &tree,
                    svg2pdf::ConversionOptions::default(),
                    svg2pdf::PageOptions::default(),
                )
                .map_err(|e| e.to_string())
            }
        }
    }
}

/// The renderer built in with `--features native-plot` (CI builds it once, for these tests
/// only: `cargo test --release --workspace --features tools/native-plot --lib --
/// plot::render`); the default, rsvg-convert, is tested through `fsprof plot` in
/// tests/cli/plot.rs.
#[cfg(all(test, feature = "native-plot"))]
mod tests {
    use super::{Format, render};

    const SVG: &str = r#"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20" viewBox="0 0 40 20"><rect x="1" y="1" width="10" height="10" fill="red"/><text x="2" y="18" font-size="8">1 us</text></svg>"#;

    #[test]
    fn png_is_the_figure_at_its_size_and_pdf_a_document() {
        let png = render(SVG, Format::Png).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
        // IHDR: width and height, big-endian, after the signature and the chunk's header.
        let dim = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
        assert_eq!((dim(16), dim(20)), (40, 20));
        let pdf = render(SVG, Format::Pdf).unwrap();
        assert!(pdf.starts_with(b"%PDF-"), "not a PDF");
        assert!(
            pdf.windows(9).any(|w| w == b"/MediaBox"),
            "a PDF with no page"
        );
        assert_eq!(render(SVG, Format::Svg).unwrap(), SVG.as_bytes());
    }

    #[test]
    fn a_figure_that_does_not_parse_is_an_error() {
        for format in [Format::Png, Format::Pdf] {
            let err = render("<svg", format).unwrap_err();
            assert!(err.contains("did not parse"), "{err}");
        }
    }
}
