//! A minimal SVG writer: rectangles, lines and text with CSS classes, enough for the figures of
//! [`crate::plot`]. Coordinates are in pixels with one decimal.

use std::fmt::Write as _;

/// An SVG document being drawn.
#[derive(Debug)]
pub struct Svg {
    width: f64,
    height: f64,
    body: String,
}

/// Horizontal text anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// Text starts at x.
    Start,
    /// Text is centred on x.
    Middle,
    /// Text ends at x.
    End,
}

impl Anchor {
    fn as_str(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// Escapes text for XML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

impl Svg {
    /// An empty drawing of this size.
    pub fn new(width: f64, height: f64) -> Svg {
        Svg {
            width,
            height,
            body: String::new(),
        }
    }

    /// The drawing's height.
    pub fn height(&self) -> f64 {
        self.height
    }

    /// Changes the drawing's height (figures that grow as they are drawn).
    pub fn set_height(&mut self, h: f64) {
        self.height = h;
    }

    /// A rectangle with a class, an optional explicit fill and an optional tooltip.
    #[allow(clippy::too_many_arguments)]
    pub fn rect(
        &mut self,
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        class: &str,
        fill: Option<&str>,
        tooltip: Option<&str>,
    ) {
        let _ = write!(
            self.body,
            r#"<rect class="{}" x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}""#,
            escape(class),
            w.max(0.0),
            h.max(0.0)
        );
        if let Some(f) = fill {
            let _ = write!(self.body, r#" fill="{}""#, escape(f));
        }
        match tooltip {
            Some(t) => {
                let _ = writeln!(self.body, "><title>{}</title></rect>", escape(t));
            }
            None => self.body.push_str("/>\n"),
        }
    }

    /// A line with a class.
    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, class: &str) {
        let _ = writeln!(
            self.body,
            r#"<line class="{}" x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}"/>"#,
            escape(class)
        );
    }

    /// Text at (x, y) (y is the baseline).
    pub fn text(&mut self, x: f64, y: f64, anchor: Anchor, class: &str, s: &str) {
        let _ = writeln!(
            self.body,
            r#"<text class="{}" x="{x:.1}" y="{y:.1}" text-anchor="{}">{}</text>"#,
            escape(class),
            anchor.as_str(),
            escape(s)
        );
    }

    /// Text turned 90° counter-clockwise, centred on (x, y): a vertical axis title.
    pub fn vertical_text(&mut self, x: f64, y: f64, class: &str, s: &str) {
        let _ = writeln!(
            self.body,
            r#"<text class="{}" x="{x:.1}" y="{y:.1}" text-anchor="middle" transform="rotate(-90 {x:.1} {y:.1})">{}</text>"#,
            escape(class),
            escape(s)
        );
    }

    /// A linear gradient definition `id` through `stops` (offset 0..1, colour).
    pub fn gradient(&mut self, id: &str, stops: &[(f64, &str)]) {
        let _ = writeln!(
            self.body,
            r#"<defs><linearGradient id="{}" x1="0" y1="0" x2="1" y2="0">"#,
            escape(id)
        );
        for (o, c) in stops {
            let _ = writeln!(
                self.body,
                r#"<stop offset="{o:.3}" stop-color="{}"/>"#,
                escape(c)
            );
        }
        self.body.push_str("</linearGradient></defs>\n");
    }

    /// The finished document, with `css` in a `<style>` element.
    pub fn finish(self, title: &str, css: &str) -> String {
        let mut out = String::with_capacity(self.body.len() + 1024);
        let _ = writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0}" height="{h:.0}" viewBox="0 0 {w:.0} {h:.0}">"#,
            w = self.width,
            h = self.height
        );
        let _ = writeln!(out, "<title>{}</title>", escape(title));
        let _ = writeln!(out, "<style>{css}</style>");
        let _ = writeln!(
            out,
            r#"<rect class="background" x="0" y="0" width="{:.0}" height="{:.0}" fill="white"/>"#,
            self.width, self.height
        );
        out.push_str(&self.body);
        out.push_str("</svg>\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_structure() {
        let mut s = Svg::new(100.0, 50.0);
        s.rect(1.0, 2.0, 3.0, 4.0, "bar", None, Some("a < b & c"));
        s.text(5.0, 6.0, Anchor::Middle, "t", "\"x\"");
        let out = s.finish("T", "rect{}");
        assert!(out.contains("<title>a &lt; b &amp; c</title>"));
        assert!(out.contains("&quot;x&quot;"));
        assert!(out.ends_with("</svg>\n"));
    }
}
