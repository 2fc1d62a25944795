//! Aligned text tables: the first column (and any marked text column) left-aligned, the others
//! right-aligned, two spaces between columns, no trailing spaces.

use std::fmt::Write as _;

/// A table being filled.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
    left: Vec<usize>,
}

impl Table {
    /// A table with this header row.
    pub fn new(header: &[&str]) -> Table {
        Table {
            rows: vec![header.iter().map(|s| s.to_string()).collect()],
            left: vec![0],
        }
    }

    /// Left-aligns column `col` (a text column).
    pub fn align_left(&mut self, col: usize) {
        self.left.push(col);
    }

    /// Adds a row (missing cells are empty).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Renders the table with the first line indented by `indent` spaces, each line ending in
    /// `\n`.
    pub fn render(&self, indent: usize, out: &mut String) {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0; cols];
        for r in &self.rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        for r in &self.rows {
            let mut line = " ".repeat(indent);
            for (i, w) in widths.iter().enumerate() {
                let c = r.get(i).map_or("", String::as_str);
                let sep = if i == 0 { "" } else { "  " };
                if self.left.contains(&i) {
                    let _ = write!(line, "{sep}{c:<w$}");
                } else {
                    let _ = write!(line, "{sep}{c:>w$}");
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns() {
        let mut t = Table::new(&["op", "n"]);
        t.row(vec!["OP_READ".into(), "12".into()]);
        t.row(vec!["OP_X".into(), "3".into()]);
        let mut s = String::new();
        t.render(1, &mut s);
        assert_eq!(s, " op        n\n OP_READ  12\n OP_X      3\n");
        let mut t = Table::new(&["op", "n", "why"]);
        t.align_left(2);
        t.row(vec!["a".into(), "1".into(), "x".into()]);
        let mut s = String::new();
        t.render(0, &mut s);
        assert_eq!(s, "op  n  why\na   1  x\n");
    }
}
