//! Writing results: `summary.json`, `assignments.csv`, `centroids.csv` (and
//! `decoded_centroids.csv`), all written atomically (temporary file, then rename).

use crate::data::Dataset;
use crate::error::{AecmError, Result};
use crate::metrics::Scores;
use crate::model::{HostMat, NetKind, term_names};
use crate::train::{CheckedConfig, ModelKind, RunResult};
use crate::util::atomic_write;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::Path;

/// `index,cluster,label` rows, one per sample in input order (label empty when unknown).
pub fn assignments_csv(ds: &Dataset, assign: &[u32]) -> String {
    let mut s = String::with_capacity(assign.len() * 12);
    s.push_str("index,cluster,label\n");
    for (i, c) in assign.iter().enumerate() {
        let label = ds
            .labels
            .as_ref()
            .map(|l| csv_cell(&ds.label_names[l[i] as usize]))
            .unwrap_or_default();
        let _ = writeln!(s, "{i},{c},{label}");
    }
    s
}

fn csv_cell(v: &str) -> String {
    if v.contains([',', '"', '\n']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}

/// `cluster,x0,x1,...` rows, one per centroid.
pub fn matrix_csv(m: &HostMat, prefix: &str) -> String {
    let mut s = String::from("cluster");
    for j in 0..m.cols {
        let _ = write!(s, ",{prefix}{j}");
    }
    s.push('\n');
    for r in 0..m.rows {
        let _ = write!(s, "{r}");
        for j in 0..m.cols {
            let _ = write!(s, ",{}", m.data[r * m.cols + j]);
        }
        s.push('\n');
    }
    s
}

fn scores_json(s: &Option<Scores>) -> Value {
    match s {
        Some(s) => json!({"ari": s.ari, "nmi": s.nmi, "acc": s.acc, "homogeneity": s.homogeneity}),
        None => Value::Null,
    }
}

/// Names of the loss terms reported in a run's history.
pub fn history_term_names(model: ModelKind) -> Vec<&'static str> {
    match model {
        ModelKind::Cm => term_names(NetKind::Cm).to_vec(),
        ModelKind::Aecm => term_names(NetKind::AeCm).to_vec(),
        ModelKind::AeKm => vec!["mse"],
        _ => vec![],
    }
}

/// The JSON of one run (without the file-level fields).
pub fn run_json(r: &RunResult, model: ModelKind) -> Value {
    let main_names = history_term_names(model);
    let history: Vec<Value> = r
        .history
        .iter()
        .map(|h| {
            let names: Vec<&str> = match h.phase.as_str() {
                "ae-pretrain" => vec!["mse"],
                "cm-pretrain" => term_names(NetKind::Cm).to_vec(),
                _ => main_names.clone(),
            };
            let terms: serde_json::Map<String, Value> = names
                .iter()
                .zip(&h.terms)
                .map(|(n, v)| (n.to_string(), json!(v)))
                .collect();
            let mut e = json!({
                "epoch": h.epoch,
                "phase": h.phase,
                "steps": h.steps,
                "loss": h.loss,
                "terms": terms,
                "metrics": scores_json(&h.scores),
                "l_sp": h.lsp,
                "seconds": h.seconds,
            });
            if let Some(c) = &h.counts {
                e["counts"] = json!(c);
            }
            e
        })
        .collect();
    json!({
        "seed": r.seed,
        "metrics": scores_json(&r.scores),
        "l_sp": r.lsp,
        "km_on_embedding": scores_json(&r.km_on_embedding),
        "epochs": r.epochs,
        "steps": r.steps,
        "interrupted": r.interrupted,
        "wall_s": r.wall_s,
        "history": history,
    })
}

/// Writes one run's files into `dir`.
pub fn write_run_files(dir: &Path, ds: &Dataset, r: &RunResult) -> Result<()> {
    atomic_write(
        &dir.join("assignments.csv"),
        assignments_csv(ds, &r.assignments).as_bytes(),
    )?;
    atomic_write(
        &dir.join("centroids.csv"),
        matrix_csv(&r.centroids, "x").as_bytes(),
    )?;
    if let Some(dec) = &r.decoded_centroids {
        atomic_write(
            &dir.join("decoded_centroids.csv"),
            matrix_csv(dec, "x").as_bytes(),
        )?;
    }
    Ok(())
}

/// Mean, population std, best and the L_sp-selected value of one metric over runs.
fn aggregate(runs: &[RunResult], f: impl Fn(&Scores) -> f64) -> Value {
    let vals: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.scores.as_ref().map(&f))
        .collect();
    if vals.is_empty() {
        return Value::Null;
    }
    let n = vals.len() as f64;
    let mean = vals.iter().sum::<f64>() / n;
    let std = (vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
    let best = vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let sel = lsp_selected(runs).and_then(|i| runs[i].scores.as_ref().map(&f));
    json!({"mean": mean, "std": std, "best": best, "lsp_selected": sel})
}

/// Index of the run with the lowest L_sp, if any run has one.
pub fn lsp_selected(runs: &[RunResult]) -> Option<usize> {
    runs.iter()
        .enumerate()
        .filter_map(|(i, r)| r.lsp.filter(|v| v.is_finite()).map(|v| (i, v)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

/// File-level facts of a summary.
pub struct SummaryMeta<'a> {
    /// Preprocessing applied.
    pub preprocess: &'a str,
    /// Preset used, if any.
    pub preset: Option<&'a str>,
    /// Device description.
    pub device: &'a str,
    /// Wall time of the whole command.
    pub wall_s: f64,
}

/// Writes `summary.json` (and the per-run files) for one or several runs into `out`.
pub fn write_summary(
    out: &Path,
    cfg: &CheckedConfig,
    ds: &Dataset,
    meta: &SummaryMeta,
    runs: &[RunResult],
) -> Result<()> {
    let SummaryMeta {
        preprocess,
        preset,
        device,
        wall_s,
    } = *meta;
    std::fs::create_dir_all(out).map_err(|e| AecmError::io(out, e))?;
    let first = runs
        .first()
        .ok_or_else(|| AecmError::config("runs", "no run finished"))?;
    let sel = lsp_selected(runs).unwrap_or(0);
    let chosen = &runs[sel];
    let mut v = json!({
        "aecm_version": env!("CARGO_PKG_VERSION"),
        "dataset": ds.name,
        "n": ds.n,
        "d": ds.d,
        "k": cfg.clusters,
        "labels": ds.labels.is_some(),
        "preprocess": preprocess,
        "preset": preset,
        "device": device,
        "cpu": crate::device::cpu_of_run(device),
        "config": serde_json::to_value(&**cfg).unwrap_or(Value::Null),
        "seed": first.seed,
        "wall_s": wall_s,
        "run_wall_s": chosen.wall_s,
        "term_names": history_term_names(cfg.model),
        "metrics": scores_json(&chosen.scores),
        "l_sp": chosen.lsp,
        "km_on_embedding": scores_json(&chosen.km_on_embedding),
        "interrupted": runs.iter().any(|r| r.interrupted),
        "history": run_json(chosen, cfg.model)["history"].clone(),
    });
    if runs.len() > 1 {
        v["runs"] = Value::Array(runs.iter().map(|r| run_json(r, cfg.model)).collect());
        v["lsp_selected_seed"] = json!(chosen.seed);
        v["aggregate"] = json!({
            "runs": runs.len(),
            "ari": aggregate(runs, |s| s.ari),
            "nmi": aggregate(runs, |s| s.nmi),
            "acc": aggregate(runs, |s| s.acc),
        });
        for r in runs {
            write_run_files(&out.join(format!("seed-{}", r.seed)), ds, r)?;
        }
    }
    write_run_files(out, ds, chosen)?;
    let text = serde_json::to_string_pretty(&v)
        .map_err(|e| AecmError::data(out, format!("serialising summary: {e}")))?;
    atomic_write(&out.join("summary.json"), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_csv_has_header_and_one_row_per_sample() {
        let ds = Dataset::new("t", 3, 1, vec![0.0, 1.0, 2.0])
            .unwrap()
            .with_string_labels(&["a".into(), "b,c".into(), "a".into()]);
        let s = assignments_csv(&ds, &[1, 0, 1]);
        assert_eq!(s, "index,cluster,label\n0,1,a\n1,0,\"b,c\"\n2,1,a\n");
    }
}
