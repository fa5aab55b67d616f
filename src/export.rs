//! Writing results: `summary.json`, `assignments.csv`, `centroids.csv` (and
//! `decoded_centroids.csv`), and on request each run's per-step loss terms
//! (`steps-seed-S.csv`), all written atomically (temporary file, then rename).

use crate::data::Dataset;
use crate::error::{AecmError, Result};
use crate::metrics::Scores;
use crate::model::{HostMat, NetKind, term_names};
use crate::train::{CheckedConfig, Event, Init, ModelKind, RunResult, TrainConfig};
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

/// Names of the loss terms of one phase of a model's schedule (`ae-pretrain`: the
/// autoencoder's mean-squared error; `cm-pretrain`: the CM's E1-E4; else the model's own).
pub fn phase_term_names(model: ModelKind, phase: &str) -> Vec<&'static str> {
    match phase {
        "ae-pretrain" => vec!["mse"],
        "cm-pretrain" => term_names(NetKind::Cm).to_vec(),
        _ => history_term_names(model),
    }
}

/// Each mini-batch's loss terms of one run, as `aecm train --step-log` writes them: a CSV
/// with `step,epoch,phase,loss` and one column per loss term of the run's phases (empty where
/// a phase has no such term). `step` counts from 1 over the whole run (the last step of an
/// epoch equals that epoch's `steps` in `summary.json`), `epoch` is the epoch the step belongs
/// to (from 1, as in `summary.json`), `loss` the sum of the batch's terms.
#[derive(Debug, Clone)]
pub struct StepLog {
    model: ModelKind,
    columns: Vec<&'static str>,
    body: String,
    rows: usize,
}

impl StepLog {
    /// An empty log for a run of `cfg` (its columns: the terms of every phase it goes through).
    pub fn new(cfg: &TrainConfig) -> Self {
        let mut phases = Vec::new();
        if cfg.model == ModelKind::Aecm && cfg.init == Init::Pretrained {
            phases.extend(["ae-pretrain", "cm-pretrain"]);
        }
        phases.push("train");
        let mut columns: Vec<&'static str> = Vec::new();
        for p in phases {
            for n in phase_term_names(cfg.model, p) {
                if !columns.contains(&n) {
                    columns.push(n);
                }
            }
        }
        Self {
            model: cfg.model,
            columns,
            body: String::new(),
            rows: 0,
        }
    }

    /// The header line (without its newline).
    pub fn header(&self) -> String {
        let mut h = String::from("step,epoch,phase,loss");
        for c in &self.columns {
            h.push(',');
            h.push_str(c);
        }
        h
    }

    /// Number of steps logged.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// True when no step is logged.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Adds a training event: a [`Event::Step`] becomes a row, other events are ignored.
    pub fn push(&mut self, e: &Event) {
        let Event::Step {
            step,
            epoch,
            phase,
            terms,
        } = e
        else {
            return;
        };
        let names = phase_term_names(self.model, phase);
        let loss: f64 = terms.iter().map(|&t| f64::from(t)).sum();
        let _ = write!(self.body, "{},{},{phase},{loss}", step + 1, epoch + 1);
        for c in &self.columns {
            self.body.push(',');
            if let Some(v) = names.iter().position(|n| n == c).and_then(|j| terms.get(j)) {
                let _ = write!(self.body, "{v}");
            }
        }
        self.body.push('\n');
        self.rows += 1;
    }

    /// The CSV text.
    pub fn to_csv(&self) -> String {
        format!("{}\n{}", self.header(), self.body)
    }

    /// Writes the CSV to `path` (atomically).
    pub fn write(&self, path: &Path) -> Result<()> {
        atomic_write(path, self.to_csv().as_bytes())
    }

    /// The log of a resumed run: the rows of the earlier log at `path` up to step `steps_done`
    /// (the resumed run's checkpoint; later rows were trained again after it). The file must
    /// have this run's header and rows with a step number in the first field.
    pub fn resume(cfg: &TrainConfig, path: &Path, steps_done: usize) -> Result<Self> {
        let mut log = Self::new(cfg);
        let text = std::fs::read_to_string(path).map_err(|e| AecmError::io(path, e))?;
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_default();
        if header != log.header() {
            return Err(AecmError::data(
                path,
                format!(
                    "line 1: header '{header}' is not this run's step log header '{}'",
                    log.header()
                ),
            ));
        }
        for (i, line) in lines.enumerate() {
            let field = line.split(',').next().unwrap_or_default();
            let step: usize = field.parse().map_err(|_| {
                AecmError::data(
                    path,
                    format!("line {}: step '{field}' is not a whole number", i + 2),
                )
            })?;
            if step <= steps_done {
                log.body.push_str(line);
                log.body.push('\n');
                log.rows += 1;
            }
        }
        Ok(log)
    }
}

/// The JSON of one run (without the file-level fields).
pub fn run_json(r: &RunResult, model: ModelKind) -> Value {
    let history: Vec<Value> = r
        .history
        .iter()
        .map(|h| {
            let names = phase_term_names(model, &h.phase);
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

    fn step(step: usize, epoch: usize, phase: &str, terms: &[f32]) -> Event {
        Event::Step {
            step,
            epoch,
            phase: phase.into(),
            terms: terms.to_vec(),
        }
    }

    #[test]
    fn step_log_has_one_column_per_term_of_the_runs_phases() {
        let cfg = TrainConfig {
            model: ModelKind::Aecm,
            init: Init::Pretrained,
            ..TrainConfig::default()
        };
        let mut log = StepLog::new(&cfg);
        assert_eq!(
            log.header(),
            "step,epoch,phase,loss,mse,E1,E2,E3,E4,rec,cm_rec,sparsity,prior,orth"
        );
        log.push(&step(0, 0, "ae-pretrain", &[0.5]));
        log.push(&Event::Phase {
            phase: "cm-pretrain".into(),
            epochs: 1,
        });
        log.push(&step(1, 1, "cm-pretrain", &[1.0, 2.0, -0.5, 0.25]));
        log.push(&step(2, 2, "train", &[1.0, 2.0, 3.0, 4.0, 0.5]));
        assert_eq!(log.len(), 3);
        assert_eq!(
            log.to_csv(),
            "step,epoch,phase,loss,mse,E1,E2,E3,E4,rec,cm_rec,sparsity,prior,orth\n\
             1,1,ae-pretrain,0.5,0.5,,,,,,,,,\n\
             2,2,cm-pretrain,2.75,,1,2,-0.5,0.25,,,,,\n\
             3,3,train,10.5,,,,,,1,2,3,4,0.5\n"
        );
        let cm = StepLog::new(&TrainConfig::default());
        assert_eq!(cm.header(), "step,epoch,phase,loss,E1,E2,E3,E4");
    }

    #[test]
    fn resumed_step_log_keeps_the_steps_up_to_the_checkpoint() {
        let dir = std::env::temp_dir().join(format!("aecm-steplog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("steps-seed-0.csv");
        let cfg = TrainConfig::default();
        let mut log = StepLog::new(&cfg);
        for i in 0..5 {
            log.push(&step(i, i / 2, "train", &[1.0, 0.0, 0.0, 0.0]));
        }
        log.write(&p).unwrap();
        let back = StepLog::resume(&cfg, &p, 4).unwrap();
        assert_eq!(back.len(), 4);
        let mut full = back.clone();
        full.push(&step(4, 2, "train", &[1.0, 0.0, 0.0, 0.0]));
        assert_eq!(full.to_csv(), log.to_csv());

        // another run's log, or a damaged one, is refused with the file and line
        let aecm = TrainConfig {
            model: ModelKind::Aecm,
            ..TrainConfig::default()
        };
        let e = StepLog::resume(&aecm, &p, 4).unwrap_err().to_string();
        assert!(
            e.contains("steps-seed-0.csv") && e.contains("line 1"),
            "{e}"
        );
        std::fs::write(
            &p,
            format!("{}\n1,1,train,1,1,0,0,0\nx,1,train\n", cfg_header(&cfg)),
        )
        .unwrap();
        let e = StepLog::resume(&cfg, &p, 4).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("'x'"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn cfg_header(cfg: &TrainConfig) -> String {
        StepLog::new(cfg).header()
    }
}
