//! A plain-text table with aligned columns for terminal output.

use std::fmt;

/// Rows of cells printed with each column padded to its widest cell.
#[derive(Debug, Clone)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with the given header.
    pub fn new<const N: usize>(header: [&str; N]) -> Self {
        Self {
            rows: vec![header.iter().map(|s| (*s).to_owned()).collect()],
        }
    }

    /// Appends a row.
    pub fn row<const N: usize>(&mut self, cells: [&str; N]) {
        self.rows
            .push(cells.iter().map(|s| (*s).to_owned()).collect());
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..cols)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for row in &self.rows {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                let last = c + 1 == row.len();
                line.push_str(cell);
                if !last {
                    let pad = widths.get(c).copied().unwrap_or(0) - cell.chars().count();
                    line.push_str(&" ".repeat(pad + 2));
                }
            }
            writeln!(f, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align() {
        let mut t = Table::new(["NAME", "RISK"]);
        t.row(["calculator", "safe"]);
        t.row(["ls", "sensitive"]);
        assert_eq!(
            t.to_string(),
            "NAME        RISK\ncalculator  safe\nls          sensitive\n"
        );
    }
}
