//! The training worker: a named thread that owns the [`Trainer`] (and so every burn tensor),
//! obeys plain-data [`Command`]s and sends plain-data [`WorkerEvent`]s over bounded channels.
//! The UI never touches tensors; it reads [`Snapshot`]s.

use crate::data::Dataset;
use crate::device::{self, DeviceChoice};
use crate::metrics::{Scores, scores};
use crate::model::HostMat;
use crate::projection::Pca;
use crate::train::{Event, TrainConfig, Trainer, run_baseline};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the UI asks of the worker.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Train continuously.
    Play,
    /// Stop after the current step.
    Pause,
    /// Do this many mini-batch updates, then pause.
    Steps(usize),
    /// Finish the current epoch (or do one whole epoch), then pause.
    Epoch,
    /// New loss weights, applied before the next step.
    SetWeights {
        /// Dirichlet concentration (one value for all clusters).
        alpha: f64,
        /// Deep reconstruction weight.
        beta: f64,
        /// Orthonormality weight.
        lambda: f64,
    },
    /// New learning rate.
    SetLr(f64),
    /// At most this many steps per second (0: as fast as possible).
    SetSpeed(f64),
    /// Take a snapshot now.
    SnapshotNow,
    /// Fit the PCA basis again on the current data/embedding.
    RefitBasis,
    /// Decode a linear interpolation between two centroids (`steps` points including both).
    Interpolate {
        /// First centroid.
        a: usize,
        /// Second centroid.
        b: usize,
        /// Number of points.
        steps: usize,
    },
    /// Send a host copy of all parameters (to save a run).
    RequestParams,
    /// End the thread.
    Shutdown,
}

/// The state of the model at one moment, as plain data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Mini-batch updates done.
    pub step: usize,
    /// Epochs done.
    pub epoch: usize,
    /// Phase name.
    pub phase: String,
    /// Cluster of each sample.
    pub assignments: Vec<u32>,
    /// 2-D PCA coordinates of each sample (of the embedding for AE-CM).
    pub coords: Vec<[f32; 2]>,
    /// 2-D PCA coordinates of the centroids.
    pub centroid_coords: Vec<[f32; 2]>,
    /// Centroids in input space (`K x d`; decoded for AE-CM).
    pub centroids_input: HostMat,
    /// Centroids in the embedding (`K x p`).
    pub centroids: HostMat,
    /// The embedding of every sample (`N x p`, AE-CM only).
    pub embedding: Option<HostMat>,
    /// Metrics against the labels, when known.
    pub scores: Option<Scores>,
    /// L_sp on the whole data set.
    pub lsp: Option<f64>,
    /// Samples per cluster.
    pub sizes: Vec<usize>,
    /// Increments each time the PCA basis is refitted (trajectories restart).
    pub basis_version: u32,
    /// Seconds the snapshot cost on the worker.
    pub cost_s: f64,
}

/// What the worker reports.
#[derive(Debug, Clone)]
pub enum WorkerEvent {
    /// The trainer is set up.
    Ready {
        /// Device description.
        device: String,
        /// Epochs of the whole schedule.
        total_epochs: usize,
        /// Mini-batches per epoch (training phase).
        steps_per_epoch: usize,
        /// Loss term names.
        term_names: Vec<String>,
        /// Trainable parameters.
        n_params: usize,
    },
    /// An event of the trainer.
    Train(Event),
    /// A new snapshot.
    Snapshot(Arc<Snapshot>),
    /// New weights took effect before step `step`.
    WeightsApplied {
        /// The first step that uses them.
        step: usize,
        /// alpha.
        alpha: f64,
        /// beta.
        beta: f64,
        /// lambda.
        lambda: f64,
    },
    /// Playing or paused.
    Playing(bool),
    /// Decoded interpolation (`steps x d`).
    Interpolation {
        /// First centroid.
        a: usize,
        /// Second centroid.
        b: usize,
        /// Decoded points.
        images: HostMat,
    },
    /// Host copy of the parameters.
    Params(Vec<HostMat>),
    /// The schedule ended.
    Finished {
        /// Final scores.
        scores: Option<Scores>,
        /// AE-CM+KM scores.
        km_on_embedding: Option<Scores>,
        /// Final L_sp.
        lsp: Option<f64>,
    },
    /// Something failed; the worker stops.
    Error(String),
}

/// A running worker: send commands, drain events.
pub struct WorkerHandle {
    tx: SyncSender<Command>,
    /// Events from the worker.
    pub rx: Receiver<WorkerEvent>,
    join: Option<JoinHandle<()>>,
}

impl WorkerHandle {
    /// Starts the worker thread `aecm-trainer` for `cfg` on `data`. `wake` is called after each
    /// batch of events (the app passes `request_repaint`).
    pub fn spawn(
        cfg: TrainConfig,
        data: Arc<Dataset>,
        device: DeviceChoice,
        wake: Box<dyn Fn() + Send>,
    ) -> std::io::Result<Self> {
        let (tx, crx) = sync_channel::<Command>(256);
        let (etx, rx) = sync_channel::<WorkerEvent>(4096);
        let join = std::thread::Builder::new()
            .name("aecm-trainer".into())
            .spawn(move || {
                lower_priority();
                let mut w = Worker::new(etx, wake);
                if let Err(e) = w.main(cfg, &data, device, crx) {
                    w.send(WorkerEvent::Error(e));
                }
            })?;
        Ok(Self {
            tx,
            rx,
            join: Some(join),
        })
    }

    /// Sends a command without blocking; false when the queue is full or the worker ended.
    pub fn send(&self, c: Command) -> bool {
        match self.tx.try_send(c) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => false,
        }
    }
}

impl Drop for WorkerHandle {
    /// Asks the worker to stop and lets a reaper thread join it, so the UI never waits.
    fn drop(&mut self) {
        let _ = self.tx.try_send(Command::Shutdown);
        if let Some(j) = self.join.take() {
            let _ = std::thread::Builder::new()
                .name("aecm-reaper".into())
                .spawn(move || {
                    let _ = j.join();
                });
        }
    }
}

struct Worker {
    tx: SyncSender<WorkerEvent>,
    wake: Box<dyn Fn() + Send>,
    pca: Option<Pca>,
    basis_version: u32,
    last_wake: Instant,
}

enum Mode {
    Paused,
    Playing,
    Steps(usize),
    UntilEpoch(usize),
}

impl Worker {
    fn new(tx: SyncSender<WorkerEvent>, wake: Box<dyn Fn() + Send>) -> Self {
        Self {
            tx,
            wake,
            pca: None,
            basis_version: 0,
            last_wake: Instant::now(),
        }
    }

    /// Sends an event (blocking when the UI is far behind: back-pressure) and wakes the UI at
    /// most every 33 ms.
    fn send(&mut self, e: WorkerEvent) {
        let _ = self.tx.send(e);
        if self.last_wake.elapsed() > Duration::from_millis(33) {
            (self.wake)();
            self.last_wake = Instant::now();
        }
    }

    fn flush(&mut self) {
        (self.wake)();
        self.last_wake = Instant::now();
    }

    fn main(
        &mut self,
        cfg: TrainConfig,
        data: &Dataset,
        device_choice: DeviceChoice,
        rx: Receiver<Command>,
    ) -> Result<(), String> {
        let (device, device_name) = device::select(device_choice).map_err(|e| e.to_string())?;
        let mut cfg = cfg;
        cfg.step_events = true;
        let checked = cfg
            .clone()
            .check(data.n, data.d)
            .map_err(|e| e.to_string())?;
        if !cfg.model.is_neural() {
            return self.baseline(&checked, data, &device, &device_name, rx);
        }
        let mut trainer =
            Trainer::new(checked, data.clone(), device, &device_name).map_err(|e| e.to_string())?;
        let steps_per_epoch = data.n.div_ceil(cfg.batch.min(data.n).max(1));
        let kind = trainer.arch().kind;
        self.send(WorkerEvent::Ready {
            device: device_name.clone(),
            total_epochs: trainer.total_epochs(),
            steps_per_epoch,
            term_names: crate::model::net::term_names(kind)
                .iter()
                .map(|s| s.to_string())
                .collect(),
            n_params: trainer.arch().n_params(),
        });
        let snap = self.snapshot(&mut trainer);
        self.send(WorkerEvent::Snapshot(Arc::new(snap)));
        self.flush();

        let mut mode = Mode::Paused;
        let mut speed = 0f64;
        let mut last_snap = Instant::now();
        let mut snap_cost = 0f64;
        let mut last_step = Instant::now();
        let mut finished_sent = false;
        loop {
            // commands: block while paused, poll while running
            let cmd = if matches!(mode, Mode::Paused) || trainer.is_done() {
                match rx.recv() {
                    Ok(c) => Some(c),
                    Err(_) => return Ok(()),
                }
            } else {
                match rx.try_recv() {
                    Ok(c) => Some(c),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => return Ok(()),
                }
            };
            if let Some(c) = cmd {
                match c {
                    Command::Shutdown => return Ok(()),
                    Command::Play => mode = Mode::Playing,
                    Command::Pause => mode = Mode::Paused,
                    Command::Steps(n) => mode = Mode::Steps(n.max(1)),
                    Command::Epoch => mode = Mode::UntilEpoch(trainer.history().len() + 1),
                    Command::SetWeights {
                        alpha,
                        beta,
                        lambda,
                    } => match trainer.set_weights(vec![alpha], beta, lambda) {
                        Ok(()) => self.send(WorkerEvent::WeightsApplied {
                            step: trainer.steps(),
                            alpha,
                            beta,
                            lambda,
                        }),
                        Err(e) => self.send(WorkerEvent::Error(e.to_string())),
                    },
                    Command::SetLr(lr) => {
                        if let Err(e) = trainer.set_lr(lr) {
                            self.send(WorkerEvent::Error(e.to_string()));
                        }
                    }
                    Command::SetSpeed(s) => speed = s.max(0.0),
                    Command::SnapshotNow => {
                        let s = self.snapshot(&mut trainer);
                        self.send(WorkerEvent::Snapshot(Arc::new(s)));
                    }
                    Command::RefitBasis => {
                        self.pca = None;
                        let s = self.snapshot(&mut trainer);
                        self.send(WorkerEvent::Snapshot(Arc::new(s)));
                    }
                    Command::Interpolate { a, b, steps } => {
                        let u = trainer.centroids();
                        if a < u.rows && b < u.rows && steps >= 2 {
                            let p = u.cols;
                            let mut z = Vec::with_capacity(steps * p);
                            for s in 0..steps {
                                let t = s as f32 / (steps - 1) as f32;
                                for j in 0..p {
                                    z.push((1.0 - t) * u.data[a * p + j] + t * u.data[b * p + j]);
                                }
                            }
                            let zm = HostMat {
                                rows: steps,
                                cols: p,
                                data: z,
                            };
                            let images = trainer.decode_points(&zm);
                            self.send(WorkerEvent::Interpolation { a, b, images });
                        }
                    }
                    Command::RequestParams => {
                        self.send(WorkerEvent::Params(trainer.params_host()));
                    }
                }
                let playing = !matches!(mode, Mode::Paused);
                self.send(WorkerEvent::Playing(playing && !trainer.is_done()));
                self.flush();
                continue;
            }
            if trainer.is_done() {
                if !finished_sent {
                    finished_sent = true;
                    let r = trainer.result(false);
                    let s = self.snapshot(&mut trainer);
                    self.send(WorkerEvent::Snapshot(Arc::new(s)));
                    self.send(WorkerEvent::Train(Event::Done { interrupted: false }));
                    self.send(WorkerEvent::Finished {
                        scores: r.scores,
                        km_on_embedding: r.km_on_embedding,
                        lsp: r.lsp,
                    });
                    self.send(WorkerEvent::Playing(false));
                    self.flush();
                }
                mode = Mode::Paused;
                continue;
            }
            if speed > 0.0 {
                let gap = Duration::from_secs_f64(1.0 / speed);
                let since = last_step.elapsed();
                if since < gap {
                    std::thread::sleep((gap - since).min(Duration::from_millis(50)));
                    continue;
                }
            }
            last_step = Instant::now();
            let epochs_before = trainer.history().len();
            let mut events: Vec<Event> = Vec::new();
            let res = trainer.step(&mut |e: &Event| events.push(e.clone()));
            if let Err(e) = res {
                return Err(e.to_string());
            }
            for e in events {
                self.send(WorkerEvent::Train(e));
            }
            // pause conditions
            mode = match mode {
                Mode::Steps(1) => Mode::Paused,
                Mode::Steps(n) => Mode::Steps(n - 1),
                Mode::UntilEpoch(e) if trainer.history().len() >= e => Mode::Paused,
                m => m,
            };
            let paused_now = matches!(mode, Mode::Paused);
            // adaptive snapshots: at most ~10% of the time goes to them
            let due = last_snap.elapsed().as_secs_f64() >= (9.0 * snap_cost).max(0.25);
            let epoch_end = trainer.history().len() > epochs_before;
            if paused_now || (due && (epoch_end || last_snap.elapsed().as_secs_f64() > 0.5)) {
                let s = self.snapshot(&mut trainer);
                snap_cost = s.cost_s;
                last_snap = Instant::now();
                self.send(WorkerEvent::Snapshot(Arc::new(s)));
            }
            if paused_now {
                self.send(WorkerEvent::Playing(false));
                self.flush();
            }
        }
    }

    fn snapshot(&mut self, t: &mut Trainer) -> Snapshot {
        let started = Instant::now();
        // one tensor copy of the host step's parameters for the reads below
        t.sync_params();
        let data = t.data();
        let (assignments, lsp, embedding) = t.predict_embed();
        let (space, p) = match &embedding {
            Some(e) => (&e.data[..], e.cols),
            None => (&data.x[..], data.d),
        };
        if self.pca.as_ref().is_none_or(|pca| pca.d != p) {
            self.basis_version += 1;
            self.pca = Pca::fit(space, data.n, p, &burn::tensor::Device::flex(), 0).ok();
        }
        let centroids = t.centroids();
        let (coords, centroid_coords) = match &self.pca {
            Some(pca) => (pca.project(space), pca.project(&centroids.data)),
            None => (vec![[0.0; 2]; data.n], vec![[0.0; 2]; centroids.rows]),
        };
        let k = centroids.rows;
        let sizes = cluster_sizes(&assignments, k);
        let sc = data.labels.as_ref().map(|l| scores(&assignments, l));
        let h = t.history();
        Snapshot {
            step: t.steps(),
            epoch: h.len(),
            phase: t.phase().name().into(),
            assignments,
            coords,
            centroid_coords,
            centroids_input: t.decoded_centroids(),
            centroids,
            embedding,
            scores: sc,
            lsp: Some(lsp),
            sizes,
            basis_version: self.basis_version,
            cost_s: started.elapsed().as_secs_f64(),
        }
    }

    fn baseline(
        &mut self,
        cfg: &crate::train::CheckedConfig,
        data: &Dataset,
        device: &burn::tensor::Device,
        device_name: &str,
        rx: Receiver<Command>,
    ) -> Result<(), String> {
        self.send(WorkerEvent::Ready {
            device: device_name.into(),
            total_epochs: 1,
            steps_per_epoch: 1,
            term_names: vec![],
            n_params: 0,
        });
        self.flush();
        let mut done = false;
        while let Ok(c) = rx.recv() {
            match c {
                Command::Shutdown => return Ok(()),
                Command::Play | Command::Steps(_) | Command::Epoch if !done => {
                    self.send(WorkerEvent::Playing(true));
                    self.flush();
                    let r = run_baseline(cfg, data, device, device_name);
                    if self.pca.is_none() {
                        self.basis_version += 1;
                        self.pca = Pca::fit(&data.x, data.n, data.d, device, 0).ok();
                    }
                    let (coords, cc) = match &self.pca {
                        Some(p) => (p.project(&data.x), p.project(&r.centroids.data)),
                        None => (vec![], vec![]),
                    };
                    let k = r.centroids.rows;
                    let sizes = cluster_sizes(&r.assignments, k);
                    let snap = Snapshot {
                        step: 1,
                        epoch: 1,
                        phase: "done".into(),
                        assignments: r.assignments.clone(),
                        coords,
                        centroid_coords: cc,
                        centroids_input: r.centroids.clone(),
                        centroids: r.centroids.clone(),
                        embedding: None,
                        scores: r.scores,
                        lsp: None,
                        sizes,
                        basis_version: self.basis_version,
                        cost_s: 0.0,
                    };
                    self.send(WorkerEvent::Snapshot(Arc::new(snap)));
                    self.send(WorkerEvent::Finished {
                        scores: r.scores,
                        km_on_embedding: None,
                        lsp: None,
                    });
                    self.send(WorkerEvent::Playing(false));
                    self.flush();
                    done = true;
                }
                Command::RequestParams => self.send(WorkerEvent::Params(vec![])),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Lowers the calling thread's scheduling priority (Linux: nice 10) so that drawing the window
/// keeps its share of the CPU while training uses the rest.
pub fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls on the calling thread's own id; failure only leaves the
    // priority unchanged.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}

/// Samples per cluster (`k` clusters).
fn cluster_sizes(assignments: &[u32], k: usize) -> Vec<usize> {
    let mut sizes = vec![0usize; k];
    for &a in assignments {
        if let Some(s) = sizes.get_mut(a as usize) {
            *s += 1;
        }
    }
    sizes
}
