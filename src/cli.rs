//! The command line: no sub-command opens the explorer; `aecm train`, `aecm reproduce`,
//! `aecm bench` and `aecm devices` are headless.

use crate::data::{self, Header, LabelColumn, LoadOptions, Preprocess};
use crate::device::{self, DeviceChoice};
use crate::error::AecmError;
use crate::export;
use crate::train::{
    self, Checkpoint, EpochRecord, Event, Init, ModelKind, RunResult, Seeding, TrainConfig, Trainer,
};
use clap::{Args, Parser, Subcommand};
use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// AE-CM explorer: the clustering module (CM) and AE-CM of Boubekki et al. (2021).
#[derive(Debug, Parser)]
#[command(name = "aecm", version, about, long_about = None)]
pub struct Cli {
    /// What to do (none: open the explorer window).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Explorer options.
    #[command(flatten)]
    pub gui: GuiArgs,
}

/// Options of the explorer window (used when no sub-command is given).
#[derive(Debug, Args)]
pub struct GuiArgs {
    /// Start on the default data, train `--train-steps` steps, save a screenshot of the window
    /// here (PNG) and exit.
    #[arg(long)]
    pub screenshot: Option<PathBuf>,
    /// Steps to train before the screenshot.
    #[arg(long, default_value_t = 200)]
    pub train_steps: usize,
    /// Panel to show: loss, metrics, projection, centroids, confusion.
    #[arg(long, value_parser = parse_tab)]
    pub tab: Option<crate::app::Tab>,
    /// Frame-time benchmark: train the light AE-CM on the MNIST sample with all 10,000 points
    /// shown, write median/p95 frame times (JSON) here and exit.
    #[arg(long)]
    pub frame_bench: Option<PathBuf>,
    /// Seconds of the frame-time benchmark.
    #[arg(long, default_value_t = 30.0)]
    pub bench_seconds: f64,
    /// Ignore the stored settings.
    #[arg(long)]
    pub fresh: bool,
    /// Use the light theme (also for `--screenshot`).
    #[arg(long)]
    pub light: bool,
    /// Frame-time benchmark with one training step only (the cost of drawing alone).
    #[arg(long)]
    pub bench_idle: bool,
    /// Frame-time benchmark on this data (file or folder, pixels /255), e.g. ../shared/data/mnist.
    #[arg(long)]
    pub bench_data: Option<String>,
}

fn parse_tab(s: &str) -> Result<crate::app::Tab, String> {
    use crate::app::Tab;
    Tab::ALL
        .into_iter()
        .find(|t| t.label().eq_ignore_ascii_case(s))
        .ok_or_else(|| format!("'{s}': expected loss, metrics, projection, centroids or confusion"))
}

/// Sub-commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train a model on a data set and write summary.json, assignments.csv and centroids.csv.
    Train(Box<TrainArgs>),
    /// Reproduce one of the paper's experiments (resumable) and write EXPERIMENT.md/.csv/.tex.
    Reproduce(ReproArgs),
    /// Measure training speed (ms per step at the paper's shapes) against this machine's GEMM rate.
    Bench(BenchArgs),
    /// Size and number of distinct colours of a PNG (used by CI to check screenshots).
    #[command(hide = true)]
    PngInfo {
        /// The PNG file.
        file: PathBuf,
    },
    /// List the wgpu adapters and the device `--device auto` would use.
    Devices,
}

fn parse_shape(s: &str) -> Result<[usize; 3], String> {
    let v: Vec<usize> = s
        .split(['x', 'X', ','])
        .map(|p| {
            p.parse()
                .map_err(|_| format!("'{s}': expected HxW or HxWxC"))
        })
        .collect::<Result<_, _>>()?;
    match v.as_slice() {
        [h, w] => Ok([*h, *w, 1]),
        [h, w, c] => Ok([*h, *w, *c]),
        _ => Err(format!("'{s}': expected HxW or HxWxC")),
    }
}

fn parse_terms(s: &str) -> Result<[bool; 4], String> {
    let mut t = [false; 4];
    for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match p.to_uppercase().as_str() {
            "E1" => t[0] = true,
            "E2" => t[1] = true,
            "E3" => t[2] = true,
            "E4" => t[3] = true,
            _ => return Err(format!("'{p}': expected a list of E1, E2, E3, E4")),
        }
    }
    Ok(t)
}

/// Hidden layer widths (possibly none).
#[derive(Debug, Clone, PartialEq)]
pub struct Hidden(pub Vec<usize>);

fn parse_hidden(s: &str) -> Result<Hidden, String> {
    if s.trim().is_empty() || s == "none" {
        return Ok(Hidden(vec![]));
    }
    s.split(',')
        .map(|p| {
            p.trim()
                .parse::<usize>()
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| {
                    format!("'{p}': expected positive layer widths like 500,500,2000, or none")
                })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Hidden)
}

fn parse_header(s: &str) -> Result<Header, String> {
    match s {
        "auto" => Ok(Header::Auto),
        "yes" | "true" => Ok(Header::Yes),
        "no" | "false" => Ok(Header::No),
        _ => Err(format!("'{s}': expected auto, yes or no")),
    }
}

/// Options of `aecm bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// cpu, wgpu or all.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Folder of the benchmark data: adds one full epoch of cm-mnist and aecm-mnist on real MNIST.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Timed repetitions per case (median reported).
    #[arg(long, default_value_t = 7)]
    pub reps: usize,
    /// CPU threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Cases to run (default: all four).
    #[arg(long, value_delimiter = ',')]
    pub cases: Vec<String>,
    /// Differentiate with burn's autodiff instead of the closed-form steps (the CM's gradients;
    /// on the CPU the autoencoder's host step), to compare.
    #[arg(long, alias = "autodiff")]
    pub cm_autodiff: bool,
}

/// Options of `aecm train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Data: a file (CSV/TSV/.data, .npy, .npz, IDX[.gz]), a folder, or builtin:NAME
    /// (gaussians5, moons, circles, blobs, varied, aniso, no-structure).
    #[arg(long)]
    pub data: String,
    /// Labels file for data without labels (.npy or one label per line).
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// Label column of delimited text: N (0-based), NAME, last, none or auto.
    #[arg(long, default_value = "auto")]
    pub label_column: LabelColumn,
    /// Header row of delimited text: auto, yes, no.
    #[arg(long, default_value = "auto", value_parser = parse_header)]
    pub header: Header,
    /// Columns (0-based, comma separated) to ignore in delimited text, e.g. an id column.
    #[arg(long, value_delimiter = ',')]
    pub skip_columns: Option<Vec<usize>>,
    /// Drop samples holding NaN or infinite values instead of failing.
    #[arg(long)]
    pub drop_nonfinite: bool,
    /// Image shape HxW or HxWxC (for decoding centroids as images).
    #[arg(long, value_parser = parse_shape)]
    pub image_shape: Option<[usize; 3]>,
    /// Number of samples for builtin generators.
    #[arg(long)]
    pub n_samples: Option<usize>,
    /// Model: cm, aecm, kmeans, gmm, igmm, ae-km.
    #[arg(long, default_value = "cm")]
    pub model: ModelKind,
    /// The paper's preprocessing and hyper-parameters for a data set: mnist, fashion-mnist, usps,
    /// pendigits, 20news, r10k, 10x73k, cifar10. Explicit flags override it.
    #[arg(long)]
    pub preset: Option<String>,
    /// Preprocessing: none, scale255, max, standardize, minmax.
    #[arg(long)]
    pub preprocess: Option<Preprocess>,
    /// Dirichlet concentration: one value, or K comma-separated values.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub alpha: Option<Vec<f64>>,
    /// Weight of the deep reconstruction (AE-CM).
    #[arg(long)]
    pub beta: Option<f64>,
    /// Weight of the orthonormality term (AE-CM).
    #[arg(long)]
    pub lambda: Option<f64>,
    /// Mini-batch size.
    #[arg(long)]
    pub batch: Option<usize>,
    /// Training epochs (an averaging epoch follows).
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Adam learning rate.
    #[arg(long)]
    pub lr: Option<f64>,
    /// Adam epsilon.
    #[arg(long, default_value_t = 1e-3)]
    pub adam_eps: f64,
    /// Adam epsilon of the autoencoder pre-training (AE-CM pretrained, AE-KM).
    #[arg(long, default_value_t = 1e-7)]
    pub pretrain_adam_eps: f64,
    /// The autoencoder pre-training (AE-CM pretrained, AE-KM) with the authors' optimiser:
    /// SGD with LR,MOMENTUM (e.g. 0.01,0.9) on the per-sample squared error summed over the
    /// batch, instead of Adam; a probe option
    #[arg(long, value_delimiter = ',', value_name = "LR,MOMENTUM")]
    pub pretrain_sgd: Option<Vec<f64>>,
    /// Differentiate with burn's autodiff instead of the closed-form steps (the CM's gradients;
    /// on the CPU the autoencoder's host step): slower, same results up to rounding.
    #[arg(long, alias = "autodiff")]
    pub cm_autodiff: bool,
    /// Seed (initialisation and shuffling).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Number of clusters (default: the number of label values).
    #[arg(long)]
    pub clusters: Option<usize>,
    /// Initialisation: random or pretrained.
    #[arg(long, default_value = "random")]
    pub init: Init,
    /// Encoder hidden widths (the decoder mirrors them), e.g. 500,500,2000; `none` for a single
    /// linear layer to the embedding (the paper's UCI networks, d-2K-d).
    #[arg(long, value_parser = parse_hidden)]
    pub hidden: Option<Hidden>,
    /// Embedding dimension.
    #[arg(long)]
    pub embed: Option<usize>,
    /// AE-CM: start the encoder with the quadratic feature map (1, x_i, x_i x_j), as the paper's
    /// two-circles encoder (with `--hidden none --embed 3`).
    #[arg(long)]
    pub quadratic: bool,
    /// CM loss terms to use (the ablation drops some), e.g. E1,E2,E4.
    #[arg(long, value_parser = parse_terms)]
    pub cm_terms: Option<[bool; 4]>,
    /// Restarts of k-means / GMM / iGMM.
    #[arg(long, default_value_t = 10)]
    pub restarts: usize,
    /// Seeding of k-means / GMM / iGMM: kmeans++, or random (k-means, iGMM: K random samples;
    /// GMM: random responsibilities, one start), the paper's two initialisations of its CM table.
    #[arg(long, default_value = "kmeans++")]
    pub seeding: Seeding,
    /// Autoencoder pre-training epochs (AE-CM with --init pretrained).
    #[arg(long, default_value_t = 100)]
    pub pretrain_epochs: usize,
    /// CM-only epochs on the frozen embedding (AE-CM with --init pretrained).
    #[arg(long, default_value_t = 100)]
    pub cm_pretrain_epochs: usize,
    /// Keep the first encoder kernel at its random value during the autoencoder's pre-training,
    /// as the authors' code does (a bug there; off by default, reported separately)
    #[arg(long)]
    pub freeze_first_kernel: bool,
    /// Alpha of the CM-only pre-training (AE-CM with --init pretrained; default: --alpha), a
    /// probe option
    #[arg(long)]
    pub cm_pretrain_alpha: Option<f64>,
    /// Batch of the CM-only pre-training (AE-CM with --init pretrained; default: --batch), a
    /// probe option
    #[arg(long)]
    pub cm_pretrain_batch: Option<usize>,
    /// Evaluate metrics every N epochs (0: only at the end).
    #[arg(long, default_value_t = 1)]
    pub eval_every: usize,
    /// Space out costly evaluations (over 0.05 s) so that they take at most this fraction of the
    /// time; 0 evaluates every --eval-every epochs whatever it costs.
    #[arg(long, default_value_t = 0.1)]
    pub eval_budget: f64,
    /// Skip the averaging epoch.
    #[arg(long)]
    pub no_averaging: bool,
    /// Skip each epoch's last, partial batch (the paper's code keeps it): a probe of the K
    /// sweep's divergences, not the paper's setting
    #[arg(long)]
    pub drop_last: bool,
    /// Device: auto, cpu, wgpu.
    #[arg(long, default_value = "auto")]
    pub device: DeviceChoice,
    /// Runs with seeds seed..seed+N-1; the summary adds mean, std, best and the L_sp-selected run.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Output folder.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// With --out (CM, AE-CM, AE-KM): save each run's state (parameters, Adam's moments, the
    /// shuffling generator, the history) to OUT/checkpoint-seed-S.safetensors between epochs
    /// at most this many minutes apart, and its final parameters at the end; 0: none.
    #[arg(long, default_value_t = 10.0)]
    pub checkpoint_minutes: f64,
    /// With --out (CM, AE-CM, AE-KM): write each run's mini-batch loss terms to
    /// OUT/steps-seed-S.csv (step, epoch, phase, loss, one column per term), with each
    /// checkpoint and at the end; with --resume it continues from the checkpoint's step.
    #[arg(long)]
    pub step_log: bool,
    /// Continue each run from its checkpoint under --out (same data and settings; the
    /// evaluation settings may change); runs without one start from the beginning.
    #[arg(long)]
    pub resume: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Options of `aecm reproduce`.
#[derive(Debug, Args)]
pub struct ReproArgs {
    /// cm-table, ablation, toy, aecm-table, k-sweep or uci.
    #[arg(long)]
    pub experiment: String,
    /// Folder of the benchmark data (the layout of ../shared/data).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Data sets to use (default: the experiment's own).
    #[arg(long, value_delimiter = ',')]
    pub datasets: Option<Vec<String>>,
    /// Runs per setting (seeds 0..N-1).
    #[arg(long, default_value_t = 20)]
    pub runs: usize,
    /// Override the epochs of every neural run (quick checks; not the paper's setting).
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Run only these groups, named MODEL-INIT as in the tables (e.g. aecm-random,aecm-pretrained,
    /// ae-km-random) or with their variant as the run folders are (ae-km-random-authors-ae of the
    /// aecm-table; aecm-random-K8 of the K sweep, whose aecm-random names every K); the tables
    /// still cover every stored run.
    #[arg(long, value_delimiter = ',')]
    pub only: Option<Vec<String>>,
    /// Device: auto, cpu, wgpu.
    #[arg(long, default_value = "auto")]
    pub device: DeviceChoice,
    /// Output folder (runs are stored there; a rerun continues where it stopped).
    #[arg(long, default_value = "repro")]
    pub out: PathBuf,
    /// Run nothing: write the tables (and figures) from the runs stored under --out, e.g. while
    /// another call is still adding runs there.
    #[arg(long)]
    pub tables_only: bool,
    /// Run only share I of N of the runs (e.g. 0/2 and 1/2 in two processes, each with its own
    /// threads, on the same --out); shares are disjoint and together cover every run.
    #[arg(long)]
    pub shard: Option<crate::reproduce::Shard>,
    /// Run nothing: print every run of the experiment (position, data set, group, seed) and
    /// whether it is done, would run, or is left to --only or another --shard.
    #[arg(long)]
    pub list: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Exit code for an error: 2 for bad input (arguments, data, settings), 1 otherwise.
pub fn exit_code(e: &anyhow::Error) -> i32 {
    match e.downcast_ref::<AecmError>() {
        Some(AecmError::Backend(_)) => 1,
        Some(_) => 2,
        None => 1,
    }
}

/// Runs the command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    let Some(command) = cli.command else {
        let g = cli.gui;
        return crate::app::run_native(crate::app::LaunchOptions {
            screenshot: g.screenshot,
            train_steps: g.train_steps,
            tab: g.tab,
            frame_bench: g.frame_bench,
            bench_seconds: g.bench_seconds,
            fresh: g.fresh,
            light: g.light,
            bench_idle: g.bench_idle,
            bench_data: g.bench_data,
        });
    };
    match command {
        Command::Train(a) => train_cmd(*a),
        Command::Reproduce(a) => {
            if a.runs < 1 {
                return Err(AecmError::config("runs", "must be at least 1").into());
            }
            let o = crate::reproduce::ReproOptions {
                experiment: a.experiment.clone(),
                data_dir: a.data_dir.clone(),
                datasets: a.datasets.clone(),
                runs: a.runs,
                epochs: a.epochs,
                only: a.only.clone(),
                out: a.out.clone(),
                tables_only: a.tables_only,
                shard: a.shard,
            };
            if a.list {
                let planned = crate::reproduce::plan(&o)?;
                let mut out = String::from("position,dataset,group,seed,status\n");
                for p in &planned {
                    out.push_str(&format!(
                        "{},{},{},{},{}\n",
                        p.position,
                        p.dataset,
                        p.group(),
                        p.seed(),
                        p.status.name()
                    ));
                }
                print!("{out}");
                return Ok(());
            }
            let (device, desc) = device::select(a.device)?;
            eprintln!(
                "reproduce {}: {} runs per setting; device: {desc}",
                a.experiment, a.runs
            );
            let runs = crate::reproduce::reproduce(&o, &device, &desc, a.quiet)?;
            eprintln!(
                "{} runs; wrote {}/{}.md, .csv, .tex",
                runs.len(),
                a.out.display(),
                a.experiment
            );
            Ok(())
        }
        Command::Bench(a) => bench_cmd(&a),
        Command::PngInfo { file } => {
            let img = image::open(&file)
                .map_err(|e| AecmError::data(&file, format!("not a readable image: {e}")))?
                .to_rgba8();
            let mut colors: Vec<u32> = img.pixels().map(|p| u32::from_le_bytes(p.0)).collect();
            colors.sort_unstable();
            colors.dedup();
            println!(
                "{}",
                serde_json::json!({"width": img.width(), "height": img.height(), "distinct_colors": colors.len()})
            );
            Ok(())
        }
        Command::Devices => {
            let list = device::adapters();
            if list.is_empty() {
                println!("no wgpu adapter");
            }
            for a in &list {
                println!(
                    "{} ({}){}",
                    a.name,
                    a.backend,
                    if a.is_cpu { " [software]" } else { "" }
                );
            }
            let (_, desc) = device::select(DeviceChoice::Auto)?;
            println!("auto: {desc}");
            Ok(())
        }
    }
}

/// Builds the configuration from the arguments, a preset and the data set.
pub fn build_config(a: &TrainArgs, ds: &data::Dataset) -> anyhow::Result<TrainConfig> {
    let preset = a.preset.as_deref().map(train::preset).transpose()?;
    let mut c = TrainConfig {
        model: a.model,
        ..TrainConfig::default()
    };
    if let Some(p) = preset {
        match a.model {
            ModelKind::Cm => {
                c.alpha = vec![p.cm.0];
                c.batch = p.cm.1;
            }
            ModelKind::Aecm | ModelKind::AeKm => {
                c.embed = p.aecm.0;
                c.beta = p.aecm.1;
                c.alpha = vec![p.aecm.2];
                c.batch = p.aecm.3;
            }
            _ => {}
        }
        c.lambda = 1.0;
    }
    c.clusters = match a.clusters {
        Some(k) => k,
        None => ds.n_classes(),
    };
    if c.clusters == 0 {
        return Err(
            AecmError::config("clusters", "the data has no labels: give --clusters K").into(),
        );
    }
    if let Some(v) = &a.alpha {
        c.alpha = v.clone();
    }
    if let Some(v) = a.beta {
        c.beta = v;
    }
    if let Some(v) = a.lambda {
        c.lambda = v;
    }
    if let Some(v) = a.batch {
        c.batch = v;
    }
    if let Some(v) = a.epochs {
        c.epochs = v;
    }
    if let Some(v) = a.lr {
        c.lr = v;
    }
    if let Some(v) = &a.hidden {
        c.hidden = v.0.clone();
    }
    if let Some(v) = a.embed {
        c.embed = v;
    }
    if let Some(v) = a.cm_terms {
        c.cm_terms = v;
    }
    c.adam_eps = a.adam_eps;
    c.pretrain_adam_eps = a.pretrain_adam_eps;
    c.pretrain_sgd = match a.pretrain_sgd.as_deref() {
        None => None,
        Some(&[lr, mom]) => Some([lr, mom]),
        Some(v) => {
            return Err(AecmError::config(
                "pretrain-sgd",
                format!("{v:?}: expected two numbers LR,MOMENTUM"),
            )
            .into());
        }
    };
    c.cm_autodiff = a.cm_autodiff;
    c.quadratic = a.quadratic;
    c.seed = a.seed;
    c.init = a.init;
    c.restarts = a.restarts;
    c.seeding = a.seeding;
    c.pretrain_epochs = a.pretrain_epochs;
    c.cm_pretrain_epochs = a.cm_pretrain_epochs;
    c.freeze_first_kernel = a.freeze_first_kernel;
    c.cm_pretrain_alpha = a.cm_pretrain_alpha;
    c.cm_pretrain_batch = a.cm_pretrain_batch;
    c.eval_every = a.eval_every;
    c.eval_budget = a.eval_budget;
    c.averaging = !a.no_averaging;
    c.step_events = a.step_log;
    c.drop_last = a.drop_last;
    Ok(c)
}

fn fmt_scores(r: &RunResult) -> String {
    match &r.scores {
        Some(s) => format!("ARI {:.3}  NMI {:.3}  ACC {:.3}", s.ari, s.nmi, s.acc),
        None => "no labels".into(),
    }
}

/// An epoch's log line (a log file, no progress bar): phase and loss, and at an evaluated epoch
/// ARI/NMI/ACC (x100), L_sp and what the clustering did to the classes, so that a long run
/// stopped before its end has left its curve in the log.
fn epoch_line(rec: &EpochRecord, names: &[String]) -> String {
    let mut line = format!("{} loss {:.4e}", rec.phase, rec.loss);
    if let Some(s) = rec.scores {
        line += &format!(
            " ARI {:.1} NMI {:.1} ACC {:.1}",
            100.0 * s.ari,
            100.0 * s.nmi,
            100.0 * s.acc
        );
    }
    if let Some(l) = rec.lsp {
        line += &format!(" L_sp {l:.1}");
    }
    if let Some(c) = &rec.counts {
        line += &format!(" ({})", crate::metrics::majority_summary(c, names));
    }
    line
}

/// Where `train` keeps each seed's checkpoint (`None`: no checkpoints: no --out, not a
/// step-by-step model, or --checkpoint-minutes 0 without --resume). Refuses, before any run
/// starts, to overwrite a checkpoint that --resume would continue.
fn checkpoint_paths(
    a: &TrainArgs,
    model: ModelKind,
) -> anyhow::Result<Option<impl Fn(u64) -> PathBuf + use<>>> {
    if !a.checkpoint_minutes.is_finite() || a.checkpoint_minutes < 0.0 {
        return Err(AecmError::config(
            "checkpoint-minutes",
            "must be a number of minutes >= 0 (0: no checkpoints)",
        )
        .into());
    }
    let Some(out) = a.out.clone() else {
        if a.resume {
            return Err(AecmError::config(
                "resume",
                "continues the checkpoints under --out: give --out",
            )
            .into());
        }
        return Ok(None);
    };
    if !model.is_neural() || (a.checkpoint_minutes == 0.0 && !a.resume) {
        return Ok(None);
    }
    let path = move |seed: u64| out.join(format!("checkpoint-seed-{seed}.safetensors"));
    if !a.resume {
        for seed in (0..a.runs as u64).map(|r| a.seed + r) {
            let p = path(seed);
            if p.exists() {
                return Err(AecmError::data(
                    &p,
                    "a checkpoint of this run exists: give --resume to continue it, or \
                     another --out (or --checkpoint-minutes 0) to start over",
                )
                .into());
            }
        }
    }
    Ok(Some(path))
}

/// The folder of the step logs (`None` without --step-log); refuses --step-log without --out
/// or for a model that does not train in steps.
fn step_log_paths(a: &TrainArgs, model: ModelKind) -> anyhow::Result<Option<PathBuf>> {
    if !a.step_log {
        return Ok(None);
    }
    let Some(out) = a.out.clone() else {
        return Err(
            AecmError::config("step-log", "writes OUT/steps-seed-S.csv: give --out").into(),
        );
    };
    if !model.is_neural() {
        return Err(AecmError::config(
            "step-log",
            format!(
                "model {} does not train in mini-batch steps (only cm, aecm and ae-km do)",
                model.name()
            ),
        )
        .into());
    }
    std::fs::create_dir_all(&out).map_err(|e| AecmError::io(&out, e))?;
    Ok(Some(out))
}

fn train_cmd(a: TrainArgs) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let opts = LoadOptions {
        label_column: a.label_column.clone(),
        header: a.header,
        skip_columns: a.skip_columns.clone().unwrap_or_default(),
        labels: a.labels.clone(),
        drop_nonfinite: a.drop_nonfinite,
        seed: a.seed,
        n_samples: a.n_samples,
        image_shape: a.image_shape,
    };
    let mut ds = data::load(&a.data, &opts)?;
    let preset = a.preset.as_deref().map(train::preset).transpose()?;
    let pre = a
        .preprocess
        .or(preset.map(|p| p.preprocess))
        .unwrap_or_default();
    data::preprocess(&mut ds, pre);
    let cfg = build_config(&a, &ds)?;
    if a.runs < 1 {
        return Err(AecmError::config("runs", "must be at least 1").into());
    }
    let checked = cfg.clone().check(ds.n, ds.d)?;
    let (device, desc) = device::select(a.device)?;
    eprintln!(
        "data: {} (N {}, d {}, K {}, labels: {}), preprocess {pre}; model {}; device: {desc}",
        ds.name,
        ds.n,
        ds.d,
        checked.clusters,
        if ds.labels.is_some() { "yes" } else { "no" },
        checked.model.name()
    );
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        let _ = ctrlc::set_handler(move || {
            if stop.swap(true, Ordering::SeqCst) {
                std::process::exit(130);
            }
            eprintln!("\nstopping after the current step (Ctrl-C again to abort without saving)");
        });
    }
    let checkpoints = checkpoint_paths(&a, cfg.model)?;
    let step_logs = step_log_paths(&a, cfg.model)?;
    let mut results: Vec<RunResult> = Vec::new();
    for run in 0..a.runs {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let seed = a.seed + run as u64;
        let run_cfg = TrainConfig {
            seed,
            ..cfg.clone()
        }
        .check(ds.n, ds.d)?;
        let ck_path = checkpoints.as_ref().map(|f| f(seed));
        let steps_path = step_logs
            .as_ref()
            .map(|out| out.join(format!("steps-seed-{seed}.csv")));
        let r = if run_cfg.model.is_neural() {
            let trainer = match &ck_path {
                Some(p) if a.resume && p.exists() => {
                    let ck = Checkpoint::read(p)?;
                    ck.check_matches(&run_cfg, &ds)
                        .map_err(|m| AecmError::data(p, format!("cannot resume: {m}")))?;
                    eprintln!(
                        "run {}/{} seed {seed}: resuming {} after epoch {}",
                        run + 1,
                        a.runs,
                        p.display(),
                        ck.epochs_done()
                    );
                    Trainer::resume(ck, run_cfg, ds.clone(), device.clone(), &desc)?
                }
                _ => Trainer::new(run_cfg, ds.clone(), device.clone(), &desc)?,
            };
            let step_log = match &steps_path {
                Some(p) if a.resume && p.exists() && trainer.steps() > 0 => {
                    let log = export::StepLog::resume(&cfg, p, trainer.steps())?;
                    if log.len() < trainer.steps() {
                        eprintln!(
                            "warning: {} holds {} of the {} steps before the checkpoint",
                            p.display(),
                            log.len(),
                            trainer.steps()
                        );
                    }
                    Some(log)
                }
                Some(p) => {
                    if trainer.steps() > 0 {
                        eprintln!(
                            "warning: {} is missing: the step log starts at step {}",
                            p.display(),
                            trainer.steps() + 1
                        );
                    }
                    Some(export::StepLog::new(&cfg))
                }
                None => None,
            };
            let step_log = std::cell::RefCell::new(step_log);
            // rows in the file as last written: the end of a run with checkpoints writes once
            let written = std::cell::Cell::new(None::<usize>);
            let write_steps = || -> crate::error::Result<()> {
                match (step_log.borrow().as_ref(), steps_path.as_ref()) {
                    (Some(log), Some(p)) if written.get() != Some(log.len()) => {
                        log.write(p)?;
                        written.set(Some(log.len()));
                        Ok(())
                    }
                    _ => Ok(()),
                }
            };
            let total = trainer.total_epochs() as u64;
            let pb = if a.quiet {
                indicatif::ProgressBar::hidden()
            } else {
                indicatif::ProgressBar::new(total)
            };
            pb.set_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix} [{bar:30}] epoch {pos}/{len} {msg} [{elapsed_precise}, ETA {eta}]",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            let prefix = format!("run {}/{} seed {seed}", run + 1, a.runs);
            pb.set_prefix(prefix.clone());
            pb.set_position(trainer.history().len() as u64);
            // Without a terminal (a log file) the bar is invisible: plain lines instead, for
            // every evaluated epoch and otherwise at most one a minute.
            let lines = !a.quiet && !std::io::stderr().is_terminal();
            let mut last_line = Instant::now();
            let names = ds.label_names.clone();
            let mut sink = |e: &Event| {
                if let Some(log) = step_log.borrow_mut().as_mut() {
                    log.push(e);
                }
                if let Event::Epoch(rec) = e {
                    pb.inc(1);
                    let m = rec
                        .scores
                        .map(|s| format!(" ARI {:.3}", s.ari))
                        .unwrap_or_default();
                    let msg = format!("{} loss {:.4e}{m}", rec.phase, rec.loss);
                    if lines && (rec.scores.is_some() || last_line.elapsed().as_secs() >= 60) {
                        eprintln!(
                            "{prefix}: epoch {}/{total} {}",
                            rec.epoch,
                            epoch_line(rec, &names)
                        );
                        last_line = Instant::now();
                    }
                    pb.set_message(msg);
                }
            };
            let every_s = 60.0 * a.checkpoint_minutes;
            let mut last_saved = Instant::now();
            let mut between = |t: &mut Trainer| -> crate::error::Result<()> {
                let Some(path) = ck_path.as_ref().filter(|_| every_s > 0.0) else {
                    return Ok(());
                };
                if !t.is_done() && last_saved.elapsed().as_secs_f64() < every_s {
                    return Ok(());
                }
                // a checkpoint that cannot be written does not stop the run: say so, go on
                match t.checkpoint().and_then(|c| c.write(path)) {
                    Ok(()) => last_saved = Instant::now(),
                    Err(e) => eprintln!("\nwarning: checkpoint not written: {e}"),
                }
                if let Err(e) = write_steps() {
                    eprintln!("\nwarning: step log not written: {e}");
                }
                Ok(())
            };
            let r = trainer.run_with(&mut sink, &stop, &mut between);
            pb.finish_and_clear();
            // the steps so far are kept even when the run failed
            let steps_written = write_steps();
            let r = r?;
            steps_written?;
            if r.interrupted
                && let Some(p) = ck_path.as_ref().filter(|p| p.exists())
            {
                eprintln!(
                    "{prefix}: stopped; `--resume` continues it from {}",
                    p.display()
                );
            }
            r
        } else {
            train::run_baseline(&run_cfg, &ds, &device, &desc)
        };
        eprintln!(
            "run {}/{} seed {seed}: {}{}  ({:.1} s{})",
            run + 1,
            a.runs,
            fmt_scores(&r),
            r.lsp.map(|l| format!("  L_sp {l:.4}")).unwrap_or_default(),
            r.wall_s,
            if r.interrupted { ", interrupted" } else { "" }
        );
        results.push(r);
    }
    if results.len() > 1 {
        let aris: Vec<f64> = results
            .iter()
            .filter_map(|r| r.scores.map(|s| s.ari))
            .collect();
        if !aris.is_empty() {
            let mean = aris.iter().sum::<f64>() / aris.len() as f64;
            eprintln!("mean ARI over {} runs: {mean:.3}", aris.len());
        }
    }
    if let Some(out) = &a.out {
        let pre_name = pre.to_string();
        let meta = export::SummaryMeta {
            preprocess: &pre_name,
            preset: a.preset.as_deref(),
            device: &desc,
            wall_s: t0.elapsed().as_secs_f64(),
        };
        export::write_summary(out, &checked, &ds, &meta, &results)?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}

fn bench_cmd(a: &BenchArgs) -> anyhow::Result<()> {
    use crate::bench;
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    if threads == 0 {
        return Err(AecmError::config("threads", "must be at least 1").into());
    }
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global();
    let choices: Vec<DeviceChoice> = match a.device.as_str() {
        "cpu" => vec![DeviceChoice::Cpu],
        "wgpu" => vec![DeviceChoice::Wgpu],
        "all" => vec![DeviceChoice::Cpu, DeviceChoice::Wgpu],
        other => {
            return Err(AecmError::config(
                "device",
                format!("'{other}': expected cpu, wgpu or all"),
            )
            .into());
        }
    };
    let cases: Vec<bench::BenchCase> = if a.cases.is_empty() {
        bench::CASES.to_vec()
    } else {
        a.cases
            .iter()
            .map(|n| {
                bench::CASES
                    .iter()
                    .copied()
                    .find(|c| c.name == n.as_str())
                    .ok_or_else(|| {
                        AecmError::config(
                            "cases",
                            format!(
                                "unknown case '{n}' (expected cm-pendigits, cm-mnist, aecm-mnist, aecm-pendigits)"
                            ),
                        )
                    })
            })
            .collect::<Result<_, _>>()?
    };
    let mnist = match &a.data_dir {
        Some(d) => Some(crate::reproduce::load_dataset("mnist", Some(d))?),
        None => None,
    };
    let mut reports = Vec::new();
    for choice in choices {
        let (device, desc) = device::select(choice)?;
        eprintln!("device: {desc}; {threads} CPU threads");
        // a software Vulkan adapter (Mesa lavapipe) takes minutes for 2048^3: measure 512^3 there
        let n = if desc.contains("software adapter") {
            512
        } else {
            2048
        };
        let gemm = bench::gemm_gflops(&device, n, 5);
        println!("GEMM {n}^3: {gemm:.1} GFLOP/s");
        println!(
            "{:<16} {:>10} {:>10} {:>11} {:>9} {:>12}",
            "case", "ms/step", "steps/s", "GFLOP/step", "of GEMM", "CPU ms/step"
        );
        let mut results = Vec::new();
        for c in &cases {
            // timed epochs of this many steps; each ends by reading the parameters and terms
            // back, which on a GPU is worth amortising over more steps
            let steps = match (c.model, choice) {
                (ModelKind::Cm, _) => 50,
                (_, DeviceChoice::Wgpu) => 100,
                _ => 10,
            };
            let r = bench::run_case(c, &device, &desc, gemm, a.reps, steps, a.cm_autodiff)?;
            println!(
                "{:<16} {:>10.3} {:>10.1} {:>11.4} {:>8.1}% {:>12.3}",
                r.name,
                r.ms_per_step,
                r.steps_per_s,
                r.gflop_per_step,
                100.0 * r.fraction_of_gemm,
                r.cpu_ms_per_step
            );
            results.push(r);
        }
        let mut epochs = Vec::new();
        if let Some(ds) = &mnist {
            // the real-data epochs of the MNIST-shaped cases asked for
            for name in ["cm-mnist", "aecm-mnist"] {
                if let Some(c) = cases.iter().find(|c| c.name == name) {
                    // On wgpu the first epoch compiles and autotunes the kernels: time a second.
                    let n_epochs = if choice == DeviceChoice::Wgpu { 2 } else { 1 };
                    let times = bench::real_epochs(c, ds, &device, &desc, n_epochs, a.cm_autodiff)?;
                    let (first, _) = times[0];
                    let (s, ev) = times[times.len() - 1];
                    println!(
                        "{name}: one epoch on MNIST ({} samples, batch {}): {s:.2} s, of which evaluation {ev:.2} s ({:.1}%){}",
                        ds.n,
                        c.batch,
                        100.0 * ev / s.max(1e-12),
                        if times.len() > 1 {
                            format!(" (first epoch, with warm-up: {first:.2} s)")
                        } else {
                            String::new()
                        }
                    );
                    epochs.push(serde_json::json!({"name": name, "samples": ds.n, "batch": c.batch, "seconds": s, "eval_seconds": ev, "first_epoch_seconds": first, "epochs_timed": times.len()}));
                }
            }
        }
        let peak = bench::peak_rss_mib();
        if let Some(p) = peak {
            println!("peak resident memory: {p:.0} MiB");
        }
        reports.push(serde_json::json!({
            "device": desc,
            "threads": threads,
            "gemm_gflops": gemm,
            "cases": results,
            "mnist_epochs": epochs,
            "peak_rss_mib": peak,
        }));
    }
    if let Some(p) = &a.json {
        let v = if reports.len() == 1 {
            reports.remove(0)
        } else {
            serde_json::Value::Array(reports)
        };
        crate::util::atomic_write(p, serde_json::to_string_pretty(&v)?.as_bytes())?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}
