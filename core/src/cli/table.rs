//! Aligned text tables for the terminal.

use serde_json::Value;

/// A JSON value as a table cell: strings without quotes, null as "-".
pub fn cell(x: &Value) -> String {
    match x {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// Left-aligned columns separated by two spaces; numbers right-aligned.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, cell) in r.iter().enumerate().take(cols) {
            width[i] = width[i].max(cell.chars().count());
        }
    }
    let numeric: Vec<bool> = (0..cols)
        .map(|i| !rows.is_empty() && rows.iter().all(|r| r.get(i).is_some_and(|c| c.parse::<f64>().is_ok())))
        .collect();
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let pad = width[i] - cell.chars().count();
            let last = i + 1 == cols;
            if numeric[i] {
                out.push_str(&" ".repeat(pad));
                out.push_str(cell);
            } else {
                out.push_str(cell);
                if !last {
                    out.push_str(&" ".repeat(pad));
                }
            }
            if !last {
                out.push_str("  ");
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn aligned() {
        let t = super::render(
            &["ID", "PREFIX", "HANDLED"],
            &[vec!["1".into(), "/tests/http_req/".into(), "1200".into()], vec!["12".into(), "/e/".into(), "3".into()]],
        );
        assert_eq!(t, "ID  PREFIX            HANDLED\n 1  /tests/http_req/     1200\n12  /e/                     3\n");
    }
}
