//! The explorer: an eframe app that trains CM / AE-CM on a worker thread and shows what happens.
//!
//! State lives in [`ExplorerApp`]; `*_ui` functions draw and return [`Action`]s, which
//! [`ExplorerApp::apply`] carries out after the frame's UI. Worker events are drained in
//! `logic` with a time budget. The app reads plain data only (snapshots, records).

mod panels;
pub mod scatter;
mod views;
pub mod worker;

use crate::data::{self, Dataset, Header, LabelColumn, LoadOptions, Preprocess};
use crate::device::DeviceChoice;
use crate::figures::{self, Figure, Series, category_color};
use crate::metrics::{Scores, cluster_class_counts, majority_summary, match_clusters};
use crate::model::HostMat;
use crate::projection::{self, UmapSettings};
use crate::train::{EpochRecord, Event, Init, ModelKind, Seeding, TrainConfig};
use crate::util::atomic_write;
use eframe::egui;
use egui::{Color32, RichText};
use scatter::{ScatterData, ScatterView};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
pub use worker::{Command, Snapshot, WorkerEvent, WorkerHandle};

/// Where the data comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DataSource {
    /// The 10,000 MNIST digits compiled into the binary.
    Embedded,
    /// A generator (`builtin:NAME`).
    Builtin(String),
    /// A file or folder.
    Path(String),
}

/// Model presets offered in the UI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AppPreset {
    /// CM with the paper's alpha and batch for this data set.
    CmPaper,
    /// A small AE-CM (hidden 256-64) that shows clusters within a minute on a CPU.
    AecmLight,
    /// The paper's AE-CM network (500-500-2000) and settings: slow on a CPU.
    AecmPaper,
    /// k-means baseline.
    Kmeans,
    /// GMM baseline.
    Gmm,
    /// Whatever the controls say.
    Custom,
}

impl AppPreset {
    /// All, in menu order.
    pub const ALL: [AppPreset; 6] = [
        Self::CmPaper,
        Self::AecmLight,
        Self::AecmPaper,
        Self::Kmeans,
        Self::Gmm,
        Self::Custom,
    ];
    /// Menu label.
    pub fn label(self) -> &'static str {
        match self {
            Self::CmPaper => "CM (paper settings)",
            Self::AecmLight => "AE-CM light (256-64, ~1 min)",
            Self::AecmPaper => "AE-CM (paper network)",
            Self::Kmeans => "k-means baseline",
            Self::Gmm => "GMM baseline",
            Self::Custom => "custom",
        }
    }
}

/// The panels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Tab {
    /// Loss terms.
    Loss,
    /// ARI/NMI/ACC and L_sp.
    Metrics,
    /// 2-D projection.
    Projection,
    /// Decoded centroids and interpolation.
    Centroids,
    /// Confusion matrix and cluster sizes.
    Confusion,
}

impl Tab {
    /// All tabs.
    pub const ALL: [Tab; 5] = [
        Self::Loss,
        Self::Metrics,
        Self::Projection,
        Self::Centroids,
        Self::Confusion,
    ];
    /// Tab label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Loss => "Loss",
            Self::Metrics => "Metrics",
            Self::Projection => "Projection",
            Self::Centroids => "Centroids",
            Self::Confusion => "Confusion",
        }
    }
    fn file_stem(self) -> &'static str {
        match self {
            Self::Loss => "loss",
            Self::Metrics => "metrics",
            Self::Projection => "projection",
            Self::Centroids => "centroids",
            Self::Confusion => "confusion",
        }
    }
}

/// User settings, persisted between launches (eframe storage).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Data source.
    pub source: DataSource,
    /// Preprocessing applied after loading.
    pub preprocess: Preprocess,
    /// CSV label column (`auto`, `last`, `none`, an index or a header name).
    pub csv_label: String,
    /// CSV header (`auto`, `yes`, `no`).
    pub csv_header: String,
    /// Preset.
    pub preset: AppPreset,
    /// Model.
    pub model: ModelKind,
    /// K.
    pub k: usize,
    /// Initialisation.
    pub init: Init,
    /// Seed.
    pub seed: u64,
    /// Batch size.
    pub batch: usize,
    /// Learning rate.
    pub lr: f64,
    /// Training epochs.
    pub epochs: usize,
    /// alpha.
    pub alpha: f64,
    /// beta.
    pub beta: f64,
    /// lambda.
    pub lambda: f64,
    /// Encoder hidden widths, comma-separated.
    pub hidden: String,
    /// Embedding dimension.
    pub embed: usize,
    /// Autoencoder pre-training epochs.
    pub pretrain_epochs: usize,
    /// CM pre-training epochs.
    pub cm_pretrain_epochs: usize,
    /// Device.
    pub device: DeviceChoice,
    /// Max steps per second (0: unlimited).
    pub speed: f64,
    /// Evaluate every this many epochs.
    pub eval_every: usize,
    /// Most of the time costly evaluations may take (a fraction; 0: no limit).
    pub eval_budget: f64,
    /// Dark theme.
    pub dark: bool,
    /// Active tab.
    pub tab: Tab,
    /// Log-scale loss plot.
    pub log_y: bool,
    /// Per-step (true) or per-epoch loss curve.
    pub loss_per_step: bool,
    /// Colour the projection by true label instead of cluster.
    pub color_by_label: bool,
    /// Draw centroid trajectories.
    pub trajectories: bool,
    /// Use UMAP instead of PCA in the projection panel.
    pub umap: bool,
    /// Export width in pixels.
    pub export_w: u32,
    /// Export height in pixels.
    pub export_h: u32,
    /// Export folder.
    pub export_dir: String,
}

impl Default for Settings {
    fn default() -> Self {
        let mut s = Self {
            source: DataSource::Embedded,
            preprocess: Preprocess::Scale255,
            csv_label: "auto".into(),
            csv_header: "auto".into(),
            preset: AppPreset::CmPaper,
            model: ModelKind::Cm,
            k: 10,
            init: Init::Random,
            seed: 0,
            batch: 111,
            lr: 1e-3,
            epochs: 150,
            alpha: 177.0,
            beta: 1.0,
            lambda: 1.0,
            hidden: "500,500,2000".into(),
            embed: 10,
            pretrain_epochs: 100,
            cm_pretrain_epochs: 100,
            device: DeviceChoice::Auto,
            speed: 0.0,
            eval_every: 1,
            eval_budget: 0.1,
            dark: true,
            tab: Tab::Projection,
            log_y: false,
            loss_per_step: true,
            color_by_label: false,
            trajectories: true,
            umap: false,
            export_w: 1200,
            export_h: 800,
            export_dir: "aecm-export".into(),
        };
        s.apply_preset(AppPreset::CmPaper, "mnist10k", 10);
        s
    }
}

/// The paper's preset for a data set name (the embedded MNIST sample uses MNIST's).
fn paper_preset_for(name: &str) -> Option<crate::train::Preset> {
    let key = if name.starts_with("mnist") {
        "mnist"
    } else if name.starts_with("usps") {
        "usps"
    } else if name.starts_with("pendigits") {
        "pendigits"
    } else {
        name
    };
    crate::train::preset(key).ok()
}

impl Settings {
    /// Sets the controls from a preset for data set `name` with `classes` classes (0: unknown).
    pub fn apply_preset(&mut self, p: AppPreset, name: &str, classes: usize) {
        self.preset = p;
        if classes >= 2 {
            self.k = classes;
        }
        let paper = paper_preset_for(name);
        let two_d = name.starts_with("builtin:") || !name.contains("mnist") && paper.is_none();
        match p {
            AppPreset::CmPaper => {
                self.model = ModelKind::Cm;
                self.init = Init::Random;
                self.epochs = 150;
                self.lr = 1e-3;
                let (a, b) = paper.map_or(if two_d { (5.0, 20) } else { (10.0, 64) }, |p| p.cm);
                self.alpha = a;
                self.batch = b;
            }
            AppPreset::AecmLight => {
                // measured on the 10,000 MNIST digits, 2 cores: ARI 20.6 after 10 epochs (8 s),
                // 33 after 50 (40 s); AE-CM+KM 44 at the end (100 epochs, 74 s)
                self.model = ModelKind::Aecm;
                self.init = Init::Random;
                self.hidden = "256,64".into();
                self.embed = 10;
                self.epochs = 100;
                self.batch = 256;
                self.lr = 1e-3;
                let (_, beta, alpha, _) = paper.map_or((10, 1.0, 10.0, 256), |p| p.aecm);
                self.alpha = alpha;
                self.beta = beta;
                self.lambda = 1.0;
            }
            AppPreset::AecmPaper => {
                self.model = ModelKind::Aecm;
                self.init = Init::Random;
                self.hidden = "500,500,2000".into();
                self.epochs = 150;
                self.lr = 1e-3;
                let (p_, beta, alpha, batch) = paper.map_or((10, 1.0, 10.0, 256), |p| p.aecm);
                self.embed = p_;
                self.alpha = alpha;
                self.beta = beta;
                self.batch = batch;
                self.lambda = 1.0;
            }
            AppPreset::Kmeans => {
                self.model = ModelKind::Kmeans;
                self.init = Init::Pretrained;
            }
            AppPreset::Gmm => {
                self.model = ModelKind::Gmm;
                self.init = Init::Pretrained;
            }
            AppPreset::Custom => {}
        }
    }

    /// The engine configuration these settings describe.
    pub fn train_config(&self) -> Result<TrainConfig, String> {
        let hidden: Vec<usize> = self
            .hidden
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<usize>()
                    .map_err(|_| format!("hidden layers: '{s}' is not a positive integer"))
            })
            .collect::<Result<_, _>>()?;
        Ok(TrainConfig {
            model: self.model,
            clusters: self.k,
            alpha: vec![self.alpha],
            beta: self.beta,
            lambda: self.lambda,
            batch: self.batch,
            epochs: self.epochs,
            lr: self.lr,
            seed: self.seed,
            init: self.init,
            hidden,
            embed: self.embed,
            pretrain_epochs: self.pretrain_epochs,
            cm_pretrain_epochs: self.cm_pretrain_epochs,
            eval_every: self.eval_every,
            eval_budget: self.eval_budget,
            restarts: 3,
            // the baselines read the init choice as their seeding (k-means++ = "pretrained")
            seeding: match self.init {
                Init::Pretrained => Seeding::KmeansPP,
                Init::Random => Seeding::Random,
            },
            ..TrainConfig::default()
        })
    }

    fn load_options(&self) -> Result<LoadOptions, String> {
        let label_column: LabelColumn = self.csv_label.parse()?;
        let header = match self.csv_header.as_str() {
            "yes" => Header::Yes,
            "no" => Header::No,
            _ => Header::Auto,
        };
        Ok(LoadOptions {
            label_column,
            header,
            seed: self.seed,
            ..LoadOptions::default()
        })
    }
}

/// How the app was started.
#[derive(Debug, Clone, Default)]
pub struct LaunchOptions {
    /// Train this many steps, save a screenshot here, and exit.
    pub screenshot: Option<PathBuf>,
    /// Steps before the screenshot.
    pub train_steps: usize,
    /// Tab to show in the screenshot.
    pub tab: Option<Tab>,
    /// Frame-time benchmark: write a JSON report here and exit.
    pub frame_bench: Option<PathBuf>,
    /// Seconds of the frame benchmark.
    pub bench_seconds: f64,
    /// Ignore stored settings (start from the defaults).
    pub fresh: bool,
    /// Light theme (overrides the stored setting).
    pub light: bool,
    /// Frame benchmark without training (rendering cost alone).
    pub bench_idle: bool,
    /// Frame benchmark on this data set (file or folder) instead of the embedded sample.
    pub bench_data: Option<String>,
}

/// Something the UI asked for; carried out after the frame's UI.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Start or resume training.
    Train,
    /// Pause.
    Pause,
    /// One mini-batch.
    StepBatch,
    /// One epoch.
    StepEpoch,
    /// Restart the run with the same seed.
    Reset,
    /// Restart with the next seed.
    Reseed,
    /// Send the slider weights to the engine.
    SendWeights,
    /// Send the speed to the engine.
    SendSpeed,
    /// Load the embedded MNIST sample.
    LoadEmbedded,
    /// Load a generator.
    LoadBuiltin(String),
    /// Load a file or folder.
    LoadPath(String),
    /// Open a file dialog for data.
    OpenDataDialog,
    /// Open a folder dialog for data.
    OpenFolderDialog,
    /// Apply a preset to the controls.
    ApplyPreset(AppPreset),
    /// Export the tab's figure.
    ExportFigure(Tab, &'static str),
    /// Export the run's data as CSV.
    ExportData,
    /// Save the run (asks the worker for the weights first).
    SaveRun,
    /// Open a saved run.
    OpenRun(String),
    /// Refit the PCA basis.
    RefitBasis,
    /// Compute UMAP.
    ComputeUmap,
    /// Cancel a background job (UMAP or loading).
    CancelJob,
    /// Interpolate between two centroids.
    Interpolate(usize, usize),
}

/// A background job's message.
enum JobMsg {
    Progress(f32),
    Data(Box<Result<Dataset, String>>),
    Umap(Result<Vec<[f32; 2]>, String>),
    Written(Result<String, String>),
    Run(Box<Result<SavedRun, String>>),
    Path(Option<PathBuf>, DialogFor),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum DialogFor {
    Data,
    Folder,
}

struct Job {
    what: String,
    rx: Receiver<JobMsg>,
    cancel: Arc<AtomicBool>,
    progress: f32,
}

/// A weight change, marked on every curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mark {
    /// First step with the new value.
    pub step: usize,
    /// What changed.
    pub text: String,
}

/// Everything about the current run that the panels show (plain data).
#[derive(Default)]
pub struct RunView {
    /// Device used.
    pub device: String,
    /// Epochs of the whole schedule.
    pub total_epochs: usize,
    /// Steps per epoch.
    pub steps_per_epoch: usize,
    /// Loss term names.
    pub term_names: Vec<String>,
    /// Per step: (step, terms).
    pub step_terms: Vec<(usize, Vec<f32>)>,
    /// Per epoch records.
    pub epochs: Vec<EpochRecord>,
    /// Weight changes.
    pub marks: Vec<Mark>,
    /// Latest snapshot.
    pub snapshot: Option<Arc<Snapshot>>,
    /// Centroid trajectories in the current basis.
    pub trajectories: Vec<Vec<[f32; 2]>>,
    basis_version: u32,
    /// Training now.
    pub playing: bool,
    /// Steps done.
    pub steps: usize,
    /// Phase.
    pub phase: String,
    /// Time spent playing (for the ETA).
    pub busy: Duration,
    busy_since: Option<Instant>,
    steps_at_busy: usize,
    /// Final scores.
    pub finished: Option<(Option<Scores>, Option<Scores>, Option<f64>)>,
    /// Last error.
    pub error: Option<String>,
    /// Decoded interpolation (a, b, images).
    pub interpolation: Option<(usize, usize, HostMat)>,
    /// Weights in force in the engine (alpha, beta, lambda).
    pub applied: (f64, f64, f64),
    /// The configuration of this run.
    pub config: Option<TrainConfig>,
    /// UMAP coordinates and the step they belong to.
    pub umap: Option<(Vec<[f32; 2]>, usize)>,
    /// Loaded from a saved run (no engine).
    pub inspect_only: bool,
    /// Counts snapshots (cache key of the scatter).
    pub version: u64,
}

/// A saved run (JSON, gzip-compressed): enough to inspect it without retraining.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedRun {
    /// Format version.
    pub format: u32,
    /// Data set name.
    pub dataset: String,
    /// Configuration.
    pub config: TrainConfig,
    /// Device.
    pub device: String,
    /// Steps per epoch.
    pub steps_per_epoch: usize,
    /// Loss term names.
    pub term_names: Vec<String>,
    /// Per-step terms.
    pub step_terms: Vec<(usize, Vec<f32>)>,
    /// Epoch records.
    pub epochs: Vec<EpochRecord>,
    /// Weight changes.
    pub marks: Vec<Mark>,
    /// Weights in force at the end.
    pub applied: (f64, f64, f64),
    /// Last snapshot.
    pub snapshot: Option<Snapshot>,
    /// Centroid trajectories.
    pub trajectories: Vec<Vec<[f32; 2]>>,
    /// Parameters, in the engine's order.
    pub params: Vec<HostMat>,
}

/// The explorer.
pub struct ExplorerApp {
    /// Persisted settings.
    pub settings: Settings,
    /// The loaded data set.
    pub data: Option<Arc<Dataset>>,
    /// The run.
    pub run: RunView,
    worker: Option<WorkerHandle>,
    job: Option<Job>,
    writers: Vec<Receiver<JobMsg>>,
    /// Status line.
    pub status: String,
    path_input: String,
    scatter: ScatterView,
    centroid_tex: Option<(u64, Vec<egui::TextureHandle>)>,
    interp_tex: Option<Vec<egui::TextureHandle>>,
    hover_tex: Option<(usize, egui::TextureHandle)>,
    interp_pair: (usize, usize),
    launch: LaunchOptions,
    screenshot_state: u8,
    frame_times: Vec<f64>,
    ui_times: Vec<f64>,
    bench_started: Option<Instant>,
    last_frame: Option<Instant>,
    gemm_gflops: Arc<Mutex<Option<f64>>>,
    shot: Arc<Mutex<Option<Arc<egui::ColorImage>>>>,
    pixel_range: (f32, f32),
    save_pending: bool,
    ctx: egui::Context,
    /// Files written by exports (most recent last).
    pub written: Vec<String>,
}

/// Opens the explorer window (blocking until it closes).
pub fn run_native(launch: LaunchOptions) -> anyhow::Result<()> {
    // the CPU backend's worker threads (matrix products) run at a lower priority than the window
    let _ = rayon::ThreadPoolBuilder::new()
        .start_handler(|_| worker::lower_priority())
        .thread_name(|i| format!("aecm-compute-{i}"))
        .build_global();
    let mut opts = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_inner_size([1280.0, 800.0])
            .with_min_inner_size([800.0, 500.0])
            .with_title("AE-CM explorer")
            .with_drag_and_drop(true),
        ..Default::default()
    };
    let gpu = crate::device::adapters().iter().any(|a| !a.is_cpu);
    // the renderer: wgpu (shares burn's wgpu) or OpenGL (glow), which is much faster than wgpu
    // on a software Vulkan driver (Mesa lavapipe) when there is no GPU
    opts.renderer = match std::env::var("AECM_RENDERER").as_deref() {
        Ok("glow") => eframe::Renderer::Glow,
        Ok("wgpu") => eframe::Renderer::Wgpu,
        _ if gpu => eframe::Renderer::Wgpu,
        _ => eframe::Renderer::Glow,
    };
    // Dithering (against banding in gradients, which this app hardly draws) costs ~20% of each
    // frame on a software rasteriser (BENCHMARKS.md): only with a GPU, unless AECM_DITHERING=0/1.
    opts.dithering = match std::env::var("AECM_DITHERING").as_deref() {
        Ok("0") => false,
        Ok("1") => true,
        _ => gpu,
    };
    eframe::run_native(
        "aecm-explorer",
        opts,
        Box::new(move |cc| Ok(Box::new(ExplorerApp::new(cc, launch)))),
    )
    .map_err(|e| anyhow::anyhow!("cannot open the window: {e}"))
}

const SETTINGS_KEY: &str = "aecm-settings";

/// A sorted copy of `v` (for [`quantile`]).
fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

/// The `p` quantile (nearest rank) of sorted values; 0 when there are none.
fn quantile(sorted: &[f64], p: f64) -> f64 {
    sorted
        .get(((sorted.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or(0.0)
}

impl ExplorerApp {
    /// Creates the app: restores settings, loads the default data.
    pub fn new(cc: &eframe::CreationContext<'_>, launch: LaunchOptions) -> Self {
        let mut settings: Settings = if launch.fresh || launch.screenshot.is_some() {
            Settings::default()
        } else {
            cc.storage
                .and_then(|s| eframe::get_value(s, SETTINGS_KEY))
                .unwrap_or_default()
        };
        if let Some(t) = launch.tab {
            settings.tab = t;
        }
        if launch.frame_bench.is_some() {
            settings = Settings::default();
            settings.apply_preset(AppPreset::AecmLight, "mnist10k", 10);
            settings.tab = Tab::Projection;
            if let Some(p) = &launch.bench_data {
                settings.source = DataSource::Path(p.clone());
                settings.preprocess = Preprocess::Scale255;
            }
        }
        if launch.light {
            settings.dark = false;
        }
        let mut app = Self {
            settings,
            data: None,
            run: RunView::default(),
            worker: None,
            job: None,
            writers: Vec::new(),
            status: String::new(),
            path_input: String::new(),
            scatter: ScatterView::default(),
            centroid_tex: None,
            interp_tex: None,
            hover_tex: None,
            interp_pair: (0, 1),
            launch,
            screenshot_state: 0,
            frame_times: Vec::new(),
            ui_times: Vec::new(),
            bench_started: None,
            last_frame: None,
            gemm_gflops: Arc::new(Mutex::new(None)),
            shot: Arc::new(Mutex::new(None)),
            pixel_range: (0.0, 1.0),
            save_pending: false,
            ctx: cc.egui_ctx.clone(),
            written: Vec::new(),
        };
        app.apply_theme();
        // restore the last data set, or the embedded sample
        match app.settings.source.clone() {
            DataSource::Embedded => app.apply(Action::LoadEmbedded),
            DataSource::Builtin(n) => app.apply(Action::LoadBuiltin(n)),
            DataSource::Path(p) => app.apply(Action::LoadPath(p)),
        }
        // enumerate the GPU adapters here, once, so that worker threads never call into the
        // graphics driver (a driver busy in another thread while the process exits can crash it)
        let _ = crate::device::adapters();
        // measure this machine's GEMM rate once, for cost estimates
        let slot = app.gemm_gflops.clone();
        let _ = std::thread::Builder::new()
            .name("aecm-gemm-probe".into())
            .spawn(move || {
                let r = crate::bench::gemm_gflops(&burn::tensor::Device::flex(), 384, 3);
                if let Ok(mut s) = slot.lock() {
                    *s = Some(r);
                }
            });
        app
    }

    fn apply_theme(&self) {
        self.ctx.set_theme(if self.settings.dark {
            egui::Theme::Dark
        } else {
            egui::Theme::Light
        });
    }

    /// The worker is running (or ready).
    pub fn has_worker(&self) -> bool {
        self.worker.is_some()
    }

    /// A background job is running.
    pub fn busy_job(&self) -> Option<&str> {
        self.job.as_ref().map(|j| j.what.as_str())
    }

    fn wake(&self) -> Box<dyn Fn() + Send> {
        let ctx = self.ctx.clone();
        Box::new(move || ctx.request_repaint())
    }

    /// Starts a fresh worker for the current settings and data (step 0).
    fn start_worker(&mut self) -> bool {
        let Some(data) = self.data.clone() else {
            self.status = "load a data set first".into();
            return false;
        };
        let cfg = match self.settings.train_config() {
            Ok(c) => c,
            Err(e) => {
                self.status = e;
                return false;
            }
        };
        if let Err(e) = cfg.clone().check(data.n, data.d) {
            self.status = e.to_string();
            return false;
        }
        self.worker = None;
        self.run = RunView {
            applied: (
                self.settings.alpha,
                self.settings.beta,
                self.settings.lambda,
            ),
            config: Some(cfg.clone()),
            ..RunView::default()
        };
        self.scatter.refit();
        self.centroid_tex = None;
        self.interp_tex = None;
        match WorkerHandle::spawn(cfg, data, self.settings.device, self.wake()) {
            Ok(w) => {
                if self.settings.speed > 0.0 {
                    w.send(Command::SetSpeed(self.settings.speed));
                }
                self.worker = Some(w);
                self.status = "ready".into();
                true
            }
            Err(e) => {
                self.status = format!("cannot start the training thread: {e}");
                false
            }
        }
    }

    fn send(&mut self, c: Command) {
        if let Some(w) = &self.worker
            && !w.send(c)
        {
            self.status = "the engine is busy; try again".into();
        }
    }

    /// Carries out one action.
    pub fn apply(&mut self, a: Action) {
        match a {
            Action::Train => {
                if self.worker.is_none() && !self.start_worker() {
                    return;
                }
                self.send(Command::Play);
                self.run.playing = true;
            }
            Action::Pause => {
                self.send(Command::Pause);
            }
            Action::StepBatch => {
                if self.worker.is_none() && !self.start_worker() {
                    return;
                }
                self.send(Command::Steps(1));
            }
            Action::StepEpoch => {
                if self.worker.is_none() && !self.start_worker() {
                    return;
                }
                self.send(Command::Epoch);
            }
            Action::Reset => {
                self.worker = None;
                self.start_worker();
            }
            Action::Reseed => {
                self.settings.seed = self.settings.seed.wrapping_add(1);
                self.worker = None;
                self.start_worker();
            }
            Action::SendWeights => {
                let (a, b, l) = (
                    self.settings.alpha,
                    self.settings.beta,
                    self.settings.lambda,
                );
                if let Err(e) = crate::train::config::check_weights(&[a], b, l, self.settings.k) {
                    self.status = e.to_string();
                    return;
                }
                self.send(Command::SetWeights {
                    alpha: a,
                    beta: b,
                    lambda: l,
                });
            }
            Action::SendSpeed => self.send(Command::SetSpeed(self.settings.speed)),
            Action::LoadEmbedded => match data::embedded_mnist10k() {
                Ok(mut ds) => {
                    data::preprocess(&mut ds, Preprocess::Scale255);
                    self.settings.preprocess = Preprocess::Scale255;
                    self.settings.source = DataSource::Embedded;
                    self.set_data(ds);
                }
                Err(e) => self.status = e.to_string(),
            },
            Action::LoadBuiltin(name) => {
                let opts = LoadOptions {
                    seed: self.settings.seed,
                    ..LoadOptions::default()
                };
                match data::load(&format!("builtin:{name}"), &opts) {
                    Ok(ds) => {
                        self.settings.source = DataSource::Builtin(name);
                        self.settings.preprocess = Preprocess::None;
                        self.set_data(ds);
                    }
                    Err(e) => self.status = e.to_string(),
                }
            }
            Action::LoadPath(p) => self.load_path_async(p),
            Action::OpenDataDialog => self.dialog(DialogFor::Data),
            Action::OpenFolderDialog => self.dialog(DialogFor::Folder),
            Action::ApplyPreset(p) => {
                let (name, classes) = self
                    .data
                    .as_ref()
                    .map_or(("".to_string(), 0), |d| (d.name.clone(), d.n_classes()));
                self.settings.apply_preset(p, &name, classes);
                self.worker = None;
                self.run = RunView::default();
            }
            Action::ExportFigure(tab, fmt) => {
                self.export_figure(tab, fmt);
            }
            Action::ExportData => self.export_data(),
            Action::SaveRun => {
                if self.worker.is_some() {
                    self.save_pending = true;
                    self.send(Command::RequestParams);
                } else if self.run.inspect_only || self.run.snapshot.is_some() {
                    self.save_run(Vec::new());
                } else {
                    self.status = "nothing to save yet: train first".into();
                }
            }
            Action::OpenRun(p) => self.open_run(p),
            Action::RefitBasis => {
                self.run.trajectories.clear();
                self.send(Command::RefitBasis);
            }
            Action::ComputeUmap => self.compute_umap(),
            Action::CancelJob => {
                if let Some(j) = self.job.take() {
                    j.cancel.store(true, Ordering::Relaxed);
                    self.status = format!("{} cancelled", j.what);
                }
            }
            Action::Interpolate(a, b) => {
                self.interp_tex = None;
                self.send(Command::Interpolate { a, b, steps: 8 });
            }
        }
    }

    fn set_data(&mut self, ds: Dataset) {
        self.status = format!(
            "loaded {}: {} samples x {} features{}",
            ds.name,
            ds.n,
            ds.d,
            if ds.labels.is_some() {
                format!(", {} classes", ds.n_classes())
            } else {
                ", no labels".into()
            }
        );
        let (name, classes) = (ds.name.clone(), ds.n_classes());
        let (lo, hi) =
            ds.x.iter()
                .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), v| {
                    (a.min(*v), b.max(*v))
                });
        self.pixel_range = if hi > lo { (lo, hi) } else { (0.0, 1.0) };
        self.data = Some(Arc::new(ds));
        let p = self.settings.preset;
        if p != AppPreset::Custom {
            self.settings.apply_preset(p, &name, classes);
        } else if classes >= 2 {
            self.settings.k = classes;
        }
        self.worker = None;
        self.run = RunView::default();
        self.scatter.refit();
        self.hover_tex = None;
        self.centroid_tex = None;
    }

    fn load_path_async(&mut self, path: String) {
        let opts = match self.settings.load_options() {
            Ok(o) => o,
            Err(e) => {
                self.status = format!("CSV label column: {e}");
                return;
            }
        };
        let pre = self.settings.preprocess;
        let (tx, rx) = sync_channel(4);
        let cancel = Arc::new(AtomicBool::new(false));
        let wake = self.wake();
        let p2 = path.clone();
        let spawned = std::thread::Builder::new()
            .name("aecm-loader".into())
            .spawn(move || {
                let r = data::load(&p2, &opts).map(|mut ds| {
                    data::preprocess(&mut ds, pre);
                    ds
                });
                let _ = tx.send(JobMsg::Data(Box::new(r.map_err(|e| e.to_string()))));
                wake();
            });
        match spawned {
            Ok(_) => {
                self.job = Some(Job {
                    what: format!("loading {path}"),
                    rx,
                    cancel,
                    progress: 0.0,
                });
                self.settings.source = DataSource::Path(path);
            }
            Err(e) => self.status = format!("cannot start the loader: {e}"),
        }
    }

    fn dialog(&mut self, what: DialogFor) {
        let (tx, rx) = sync_channel(1);
        let wake = self.wake();
        let spawned = std::thread::Builder::new()
            .name("aecm-dialog".into())
            .spawn(move || {
                let d = rfd::FileDialog::new();
                let p = match what {
                    DialogFor::Data => d
                        .add_filter(
                            "data",
                            &[
                                "csv",
                                "tsv",
                                "txt",
                                "data",
                                "npy",
                                "npz",
                                "gz",
                                "idx3-ubyte",
                            ],
                        )
                        .add_filter("all files", &["*"])
                        .pick_file(),
                    DialogFor::Folder => d.pick_folder(),
                };
                let _ = tx.send(JobMsg::Path(p, what));
                wake();
            });
        if spawned.is_ok() {
            self.writers.push(rx);
        }
    }

    fn compute_umap(&mut self) {
        let Some(data) = self.data.clone() else {
            return;
        };
        let emb = self.run.snapshot.as_ref().and_then(|s| s.embedding.clone());
        let step = self.run.steps;
        let (tx, rx) = sync_channel(64);
        let cancel = Arc::new(AtomicBool::new(false));
        let c2 = cancel.clone();
        let wake = self.wake();
        let seed = self.settings.seed;
        let spawned = std::thread::Builder::new()
            .name("aecm-umap".into())
            .spawn(move || {
                let (x, d): (&[f32], usize) = match &emb {
                    Some(e) => (&e.data, e.cols),
                    None => (&data.x, data.d),
                };
                let settings = UmapSettings {
                    seed,
                    epochs: if data.n > 10_000 { 200 } else { 300 },
                    ..UmapSettings::default()
                };
                let tx2 = tx.clone();
                let mut last = Instant::now();
                let r = projection::umap(
                    x,
                    data.n,
                    d,
                    settings,
                    &burn::tensor::Device::flex(),
                    &c2,
                    &mut |f| {
                        if last.elapsed() > Duration::from_millis(100) {
                            let _ = tx2.try_send(JobMsg::Progress(f));
                            last = Instant::now();
                        }
                    },
                );
                let _ = tx.send(JobMsg::Umap(r.map_err(|e| e.to_string())));
                wake();
            });
        match spawned {
            Ok(_) => {
                self.job = Some(Job {
                    what: format!("UMAP at step {step}"),
                    rx,
                    cancel,
                    progress: 0.0,
                });
                self.run.umap = None;
            }
            Err(e) => self.status = format!("cannot start UMAP: {e}"),
        }
    }

    /// Drains worker events for at most `budget`.
    fn drain_worker(&mut self, budget: Duration) {
        let start = Instant::now();
        let mut params = None;
        loop {
            if start.elapsed() > budget {
                self.ctx.request_repaint();
                break;
            }
            let Some(w) = &self.worker else { break };
            match w.rx.try_recv() {
                Ok(WorkerEvent::Params(p)) => params = Some(p),
                Ok(e) => self.run_event(e),
                Err(_) => break,
            }
        }
        if let Some(p) = params
            && self.save_pending
        {
            self.save_pending = false;
            self.save_run(p);
        }
        // busy time for the ETA
        match (self.run.playing, self.run.busy_since) {
            (true, None) => {
                self.run.busy_since = Some(Instant::now());
                self.run.steps_at_busy = self.run.steps;
            }
            (false, Some(t)) => {
                self.run.busy += t.elapsed();
                self.run.busy_since = None;
            }
            _ => {}
        }
    }

    fn run_event(&mut self, e: WorkerEvent) {
        let r = &mut self.run;
        match e {
            WorkerEvent::Ready {
                device,
                total_epochs,
                steps_per_epoch,
                term_names,
                ..
            } => {
                r.device = device;
                r.total_epochs = total_epochs;
                r.steps_per_epoch = steps_per_epoch.max(1);
                r.term_names = term_names;
            }
            WorkerEvent::Train(ev) => match ev {
                Event::Step {
                    step, terms, phase, ..
                } => {
                    r.steps = step + 1;
                    r.phase = phase;
                    r.step_terms.push((step, terms));
                }
                Event::Epoch(rec) => r.epochs.push(rec),
                Event::Phase { phase, .. } => r.phase = phase,
                Event::Done { .. } => r.phase = "done".into(),
            },
            WorkerEvent::Snapshot(s) => {
                if s.basis_version != r.basis_version {
                    r.trajectories.clear();
                    r.basis_version = s.basis_version;
                    self.scatter.refit();
                }
                if r.trajectories.len() != s.centroid_coords.len() {
                    r.trajectories = vec![Vec::new(); s.centroid_coords.len()];
                }
                for (t, c) in r.trajectories.iter_mut().zip(&s.centroid_coords) {
                    if t.last() != Some(c) {
                        t.push(*c);
                    }
                }
                r.steps = r.steps.max(s.step);
                r.version += 1;
                r.snapshot = Some(s);
            }
            WorkerEvent::WeightsApplied {
                step,
                alpha,
                beta,
                lambda,
            } => {
                let (a0, b0, l0) = r.applied;
                let mut parts = Vec::new();
                if alpha != a0 {
                    parts.push(format!("alpha {alpha:.3}"));
                }
                if beta != b0 {
                    parts.push(format!("beta {beta:.3}"));
                }
                if lambda != l0 {
                    parts.push(format!("lambda {lambda:.3}"));
                }
                r.applied = (alpha, beta, lambda);
                if !parts.is_empty() {
                    // drag bursts: merge changes that land on the same step
                    if let Some(m) = r.marks.last_mut()
                        && m.step == step
                    {
                        m.text = parts.join(", ");
                    } else {
                        r.marks.push(Mark {
                            step,
                            text: parts.join(", "),
                        });
                    }
                }
            }
            WorkerEvent::Playing(p) => r.playing = p,
            WorkerEvent::Interpolation { a, b, images } => {
                r.interpolation = Some((a, b, images));
                self.interp_tex = None;
            }
            WorkerEvent::Params(_) => {}
            WorkerEvent::Finished {
                scores,
                km_on_embedding,
                lsp,
            } => {
                r.finished = Some((scores, km_on_embedding, lsp));
                r.playing = false;
                self.status = match scores {
                    Some(s) => format!(
                        "finished: ARI {:.1}, NMI {:.1}, ACC {:.1}",
                        100.0 * s.ari,
                        100.0 * s.nmi,
                        100.0 * s.acc
                    ),
                    None => "finished".into(),
                };
            }
            WorkerEvent::Error(e) => {
                r.error = Some(e.clone());
                r.playing = false;
                self.status = format!("error: {e}");
            }
        }
    }

    fn drain_jobs(&mut self) {
        let mut done = false;
        if let Some(j) = &mut self.job {
            loop {
                match j.rx.try_recv() {
                    Ok(JobMsg::Progress(f)) => j.progress = f,
                    Ok(JobMsg::Data(r)) => {
                        done = true;
                        match *r {
                            Ok(ds) => {
                                self.job = None;
                                self.set_data(ds);
                            }
                            Err(e) => {
                                self.status = e;
                                self.job = None;
                            }
                        }
                        break;
                    }
                    Ok(JobMsg::Umap(r)) => {
                        done = true;
                        match r {
                            Ok(c) => {
                                self.run.umap = Some((c, self.run.steps));
                                self.run.version += 1;
                                self.scatter.refit();
                                self.status = "UMAP ready".into();
                            }
                            Err(e) => self.status = format!("UMAP: {e}"),
                        }
                        self.job = None;
                        break;
                    }
                    Ok(_) => {}
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        done = true;
                        self.job = None;
                        break;
                    }
                }
            }
        }
        let _ = done;
        let mut keep = Vec::new();
        for rx in std::mem::take(&mut self.writers) {
            match rx.try_recv() {
                Ok(JobMsg::Written(Ok(p))) => {
                    self.status = format!("wrote {p}");
                    self.written.push(p);
                }
                Ok(JobMsg::Written(Err(e))) => self.status = e,
                Ok(JobMsg::Run(r)) => match *r {
                    Ok(run) => self.show_saved_run(run),
                    Err(e) => self.status = e,
                },
                Ok(JobMsg::Path(Some(p), what)) => {
                    let s = p.display().to_string();
                    match what {
                        DialogFor::Data | DialogFor::Folder => {
                            if s.ends_with(".aecm.json.gz") {
                                self.apply(Action::OpenRun(s));
                            } else {
                                self.apply(Action::LoadPath(s));
                            }
                        }
                    }
                }
                Ok(JobMsg::Path(None, _)) => {
                    self.status =
                        "no file chosen (no file dialog here? type a path in the field)".into()
                }
                Ok(_) => {}
                Err(TryRecvError::Empty) => keep.push(rx),
                Err(TryRecvError::Disconnected) => {}
            }
        }
        self.writers = keep;
    }
}

impl eframe::App for ExplorerApp {
    fn logic(&mut self, ctx: &egui::Context, _frame: &mut eframe::Frame) {
        self.drain_worker(Duration::from_millis(8));
        self.drain_jobs();
        for a in self.shortcuts(ctx) {
            self.apply(a);
        }
        self.automation(ctx);
        if self.run.playing || self.job.is_some() || !self.writers.is_empty() {
            ctx.request_repaint_after(Duration::from_millis(100));
        }
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        let t_ui = Instant::now();
        let mut acts = Vec::new();
        // The panels are not filled: the window is cleared with their colour instead
        // (`clear_color`), which saves one full-window layer of shading per frame. Without a GPU
        // the rasteriser is software (llvmpipe) and that layer is a large share of each frame.
        let style = ui.style().clone();
        let side = egui::Frame::side_top_panel(&style).fill(Color32::TRANSPARENT);
        let central = egui::Frame::central_panel(&style).fill(Color32::TRANSPARENT);
        egui::Panel::bottom("status").frame(side).show(ui, |ui| {
            ui.horizontal(|ui| {
                ui.label(&self.status);
            });
        });
        egui::Panel::left("controls")
            .frame(side)
            .resizable(true)
            .default_size(300.0)
            .show(ui, |ui| {
                acts.extend(self.controls_ui(ui));
            });
        egui::CentralPanel::default().frame(central).show(ui, |ui| {
            acts.extend(self.tab_bar_ui(ui));
            ui.separator();
            match self.settings.tab {
                Tab::Loss => self.loss_ui(ui),
                Tab::Metrics => self.metrics_ui(ui),
                Tab::Projection => acts.extend(self.projection_ui(ui)),
                Tab::Centroids => acts.extend(self.centroids_ui(ui)),
                Tab::Confusion => self.confusion_ui(ui),
            }
        });
        for a in acts {
            self.apply(a);
        }
        if self.bench_started.is_some() {
            self.ui_times.push(t_ui.elapsed().as_secs_f64() * 1e3);
        }
    }

    fn clear_color(&self, visuals: &egui::Visuals) -> [f32; 4] {
        visuals.panel_fill.to_normalized_gamma_f32()
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        if self.launch.screenshot.is_none() && self.launch.frame_bench.is_none() {
            eframe::set_value(storage, SETTINGS_KEY, &self.settings);
        }
    }
}

/// Draws a [`Figure::Lines`] with egui_plot (log scale plots log10 of the values).
fn lines_plot_ui(ui: &mut egui::Ui, id: &str, fig: &Figure, log: bool) {
    let Figure::Lines {
        series,
        marks,
        references,
        x_label,
        y_label,
        ..
    } = fig
    else {
        return;
    };
    let tf = |v: f64| if log { v.abs().max(1e-12).log10() } else { v };
    egui_plot::Plot::new(id.to_string())
        .legend(egui_plot::Legend::default())
        .x_axis_label(x_label.clone())
        .y_axis_label(if log {
            format!("log10 {y_label}")
        } else {
            y_label.clone()
        })
        .show(ui, |p| {
            for s in series {
                let pts: Vec<[f64; 2]> = s.points.iter().map(|q| [q[0], tf(q[1])]).collect();
                p.line(
                    egui_plot::Line::new(s.name.clone(), pts)
                        .color(Color32::from_rgb(s.color[0], s.color[1], s.color[2])),
                );
            }
            for (name, y, c) in references {
                p.hline(
                    egui_plot::HLine::new(name.clone(), tf(*y))
                        .color(Color32::from_rgb(c[0], c[1], c[2]))
                        .style(egui_plot::LineStyle::dashed_loose()),
                );
            }
            for (x, text) in marks {
                p.vline(egui_plot::VLine::new(text.clone(), *x).color(Color32::GRAY));
            }
        });
}

/// Keeps at most about `max` points by averaging consecutive ones.
fn downsample(v: Vec<[f64; 2]>, max: usize) -> Vec<[f64; 2]> {
    if v.len() <= max {
        return v;
    }
    let k = v.len().div_ceil(max);
    v.chunks(k)
        .map(|c| {
            let n = c.len() as f64;
            [
                c.iter().map(|p| p[0]).sum::<f64>() / n,
                c.iter().map(|p| p[1]).sum::<f64>() / n,
            ]
        })
        .collect()
}

fn to_color_image(px: &[f32], shape: [usize; 3], lo: f32, hi: f32) -> egui::ColorImage {
    let [h, w, c] = shape;
    let s = |v: f32| (((v - lo) / (hi - lo)).clamp(0.0, 1.0) * 255.0) as u8;
    let mut out = Vec::with_capacity(w * h);
    for i in 0..h * w {
        let col = if c >= 3 {
            Color32::from_rgb(s(px[i * c]), s(px[i * c + 1]), s(px[i * c + 2]))
        } else {
            let g = s(px.get(i * c).copied().unwrap_or(0.0));
            Color32::from_gray(g)
        };
        out.push(col);
    }
    egui::ColorImage::new([w, h], out)
}

fn save_color_image(img: &egui::ColorImage, path: &Path) -> Result<(), String> {
    let [w, h] = img.size;
    let mut raw = Vec::with_capacity(w * h * 4);
    for p in &img.pixels {
        raw.extend_from_slice(&p.to_array());
    }
    let im = image::RgbaImage::from_raw(w as u32, h as u32, raw).ok_or("screenshot buffer size")?;
    let mut out = std::io::Cursor::new(Vec::new());
    im.write_to(&mut out, image::ImageFormat::Png)
        .map_err(|e| e.to_string())?;
    atomic_write(path, &out.into_inner()).map_err(|e| e.to_string())
}

fn human_time(s: f64) -> String {
    if s < 90.0 {
        format!("{s:.0} s")
    } else if s < 5400.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn history_csv(r: &RunView) -> String {
    let mut s = String::from("epoch,phase,steps,loss");
    for n in &r.term_names {
        s.push(',');
        s.push_str(n);
    }
    s.push_str(",ari,nmi,acc,lsp,seconds\n");
    for e in &r.epochs {
        s.push_str(&format!("{},{},{},{}", e.epoch, e.phase, e.steps, e.loss));
        for t in &e.terms {
            s.push_str(&format!(",{t}"));
        }
        for _ in e.terms.len()..r.term_names.len() {
            s.push(',');
        }
        match &e.scores {
            Some(sc) => s.push_str(&format!(",{},{},{}", sc.ari, sc.nmi, sc.acc)),
            None => s.push_str(",,,"),
        }
        match e.lsp {
            Some(l) => s.push_str(&format!(",{l}")),
            None => s.push(','),
        }
        s.push_str(&format!(",{}\n", e.seconds));
    }
    s
}

/// Reads a saved run (`.aecm.json.gz`), with the file named in errors.
pub fn read_run(p: &Path) -> Result<SavedRun, String> {
    use std::io::Read;
    let f = std::fs::File::open(p).map_err(|e| format!("{}: {e}", p.display()))?;
    let mut s = Vec::new();
    flate2::read::GzDecoder::new(f)
        .read_to_end(&mut s)
        .map_err(|e| format!("{}: not a gzip-compressed run file ({e})", p.display()))?;
    serde_json::from_slice(&s).map_err(|e| {
        format!(
            "{}: line {}, column {}: not an aecm run ({e})",
            p.display(),
            e.line(),
            e.column()
        )
    })
}
