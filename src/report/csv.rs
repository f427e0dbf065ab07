//! CSV: one file per table, numbers at full precision, with a key column beside every column
//! whose numbers came from a run-database record.

use super::tables::Table;

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub fn render(t: &Table) -> String {
    let sourced: Vec<bool> = (0..t.columns.len())
        .map(|i| {
            t.rows
                .iter()
                .any(|r| r.get(i).is_some_and(|c| c.key.is_some()))
        })
        .collect();
    let mut header = Vec::new();
    for (i, c) in t.columns.iter().enumerate() {
        header.push(field(c));
        if sourced[i] {
            header.push(field(&format!("{c} key")));
        }
    }
    let mut out = header.join(",");
    out.push('\n');
    for row in &t.rows {
        let mut fields = Vec::new();
        for (i, c) in row.iter().enumerate() {
            fields.push(field(c.csv_value()));
            if sourced.get(i).copied().unwrap_or(false) {
                fields.push(field(c.key.as_deref().unwrap_or("")));
            }
        }
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}
