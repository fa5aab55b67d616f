//! Delimited text: CSV, TSV, semicolon and whitespace separated files (UCI `.data` files too),
//! with header detection, a label column, and scikit-learn's bundled-CSV header
//! (`n_samples,n_features,target names...`).

use super::{Dataset, Header, LabelColumn, LoadOptions, guess_square_image, read_maybe_gz};
use crate::error::{AecmError, Result};
use std::path::Path;

const LABEL_NAMES: [&str; 8] = [
    "label", "labels", "class", "target", "y", "cluster", "category", "species",
];

/// One parsed line: its 1-based line number in the file and its cells.
type Row = (usize, Vec<String>);

fn split_rows(path: &Path, text: &str) -> Result<Vec<Row>> {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let lower = path.to_string_lossy().to_lowercase();
    let delim = if lower.trim_end_matches(".gz").ends_with(".tsv") {
        Some(b'\t')
    } else {
        [b',', b'\t', b';']
            .into_iter()
            .map(|c| (first.bytes().filter(|&b| b == c).count(), c))
            .filter(|(n, _)| *n > 0)
            .max_by_key(|(n, _)| *n)
            .map(|(_, c)| c)
    };
    let mut rows = Vec::new();
    match delim {
        Some(d) => {
            let mut rdr = csv::ReaderBuilder::new()
                .delimiter(d)
                .has_headers(false)
                .flexible(true)
                .trim(csv::Trim::All)
                .from_reader(text.as_bytes());
            for rec in rdr.records() {
                let rec = rec.map_err(|e| {
                    let line = e.position().map(|p| p.line()).unwrap_or(0);
                    AecmError::data(path, format!("line {line}: {e}"))
                })?;
                let line = rec.position().map(|p| p.line() as usize).unwrap_or(0);
                if rec.iter().all(|c| c.is_empty()) {
                    continue;
                }
                rows.push((line, rec.iter().map(str::to_string).collect()));
            }
        }
        None => {
            for (i, l) in text.lines().enumerate() {
                let cells: Vec<String> = l.split_whitespace().map(str::to_string).collect();
                if !cells.is_empty() {
                    rows.push((i + 1, cells));
                }
            }
        }
    }
    Ok(rows)
}

fn is_num(s: &str) -> bool {
    s.parse::<f64>().is_ok()
}

/// Loads delimited text.
pub fn load_text(path: &Path, opts: &LoadOptions) -> Result<Dataset> {
    let bytes = read_maybe_gz(path)?;
    let text = String::from_utf8(bytes)
        .map_err(|e| AecmError::data(path, format!("not UTF-8 text: {e}")))?;
    parse_text(path, &text, opts)
}

/// Parses delimited text already in memory; `path` names it in errors.
pub fn parse_text(path: &Path, text: &str, opts: &LoadOptions) -> Result<Dataset> {
    let mut rows = split_rows(path, text)?;
    if rows.is_empty() {
        return Err(AecmError::data(path, "file is empty (no data rows)"));
    }
    // scikit-learn's bundled CSV: first row = n_samples, n_features, target names.
    let mut header: Option<Vec<String>> = None;
    let mut target_names: Option<Vec<String>> = None;
    if rows.len() >= 2 {
        let r0 = &rows[0].1;
        if r0.len() >= 2
            && let (Ok(n), Ok(d)) = (r0[0].parse::<usize>(), r0[1].parse::<usize>())
        {
            let names = &r0[2..];
            let mut distinct: Vec<&String> = rows[1..].iter().filter_map(|r| r.1.last()).collect();
            distinct.sort();
            distinct.dedup();
            if n == rows.len() - 1
                && d + 1 == rows[1].1.len()
                && !names.is_empty()
                && names.iter().all(|s| !is_num(s))
                && names.len() == distinct.len()
            {
                target_names = Some(r0[2..].to_vec());
                rows.remove(0);
            }
        }
    }
    if target_names.is_none() {
        let has_header = match opts.header {
            Header::Yes => true,
            Header::No => false,
            Header::Auto => {
                let r0 = &rows[0].1;
                match rows.get(1) {
                    Some((_, r1)) => r0.iter().zip(r1).any(|(a, b)| !is_num(a) && is_num(b)),
                    None => !r0.iter().any(|c| is_num(c)),
                }
            }
        };
        if has_header {
            header = Some(rows.remove(0).1);
        }
    }
    if rows.is_empty() {
        return Err(AecmError::data(path, "file has a header but no data rows"));
    }
    let width = rows[0].1.len();
    if let Some(h) = &header
        && h.len() != width
    {
        return Err(AecmError::data(
            path,
            format!(
                "header has {} fields but line {} has {width}",
                h.len(),
                rows[0].0
            ),
        ));
    }
    for (line, cells) in &rows {
        if cells.len() != width {
            return Err(AecmError::data(
                path,
                format!(
                    "line {line}: {} fields, expected {width} like line {}",
                    cells.len(),
                    rows[0].0
                ),
            ));
        }
    }
    let col_name = |c: usize| -> String {
        header
            .as_ref()
            .map(|h| format!(" ('{}')", h[c]))
            .unwrap_or_default()
    };
    // Resolve the label column.
    let label_col: Option<usize> = match &opts.label_column {
        LabelColumn::None => None,
        LabelColumn::Last => Some(width - 1),
        LabelColumn::Index(i) => {
            if *i >= width {
                return Err(AecmError::data(
                    path,
                    format!(
                        "label column {i} does not exist (the file has {width} columns, 0-based)"
                    ),
                ));
            }
            Some(*i)
        }
        LabelColumn::Name(name) => {
            let h = header.as_ref().ok_or_else(|| {
                AecmError::data(
                    path,
                    format!("label column '{name}' named, but the file has no header"),
                )
            })?;
            Some(h.iter().position(|c| c == name).ok_or_else(|| {
                AecmError::data(
                    path,
                    format!("no column named '{name}' in the header ({})", h.join(", ")),
                )
            })?)
        }
        LabelColumn::Auto => {
            let last = width - 1;
            let named = header
                .as_ref()
                .is_some_and(|h| LABEL_NAMES.contains(&h[last].trim().to_lowercase().as_str()));
            let text_col =
                rows.iter().any(|(_, r)| !is_num(&r[last])) && !opts.skip_columns.contains(&last);
            (target_names.is_some() || named || text_col).then_some(last)
        }
    };
    let feat_cols: Vec<usize> = (0..width)
        .filter(|c| Some(*c) != label_col && !opts.skip_columns.contains(c))
        .collect();
    if feat_cols.is_empty() {
        return Err(AecmError::data(path, "no feature columns left"));
    }
    let mut x = Vec::with_capacity(rows.len() * feat_cols.len());
    for (line, cells) in &rows {
        for &c in &feat_cols {
            let cell = &cells[c];
            let v: f64 = cell.parse().map_err(|_| {
                AecmError::data(
                    path,
                    format!(
                        "line {line}, column {}{}: '{cell}' is not a number (expected a numeric feature; use --label-column or --skip-columns for text columns)",
                        c + 1,
                        col_name(c)
                    ),
                )
            })?;
            x.push(v as f32);
        }
    }
    let d = feat_cols.len();
    let n = rows.len();
    let mut ds = Dataset::new(String::new(), n, d, x)?;
    if let Some(lc) = label_col {
        let raw: Vec<String> = rows.iter().map(|(_, r)| r[lc].clone()).collect();
        ds = ds.with_string_labels(&raw);
        if let Some(names) = target_names
            && names.len() == ds.label_names.len()
        {
            ds.label_names = names;
        }
    }
    ds.image_shape = guess_square_image(d);
    Ok(ds)
}
