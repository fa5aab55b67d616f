//! The synchronous trainer: one validated config, one data set, an event sink and a stop flag.
//! A worker thread can wrap it; hyper-parameters may change between steps.

use super::checkpoint::{self, Checkpoint, CheckpointState, DataPrint};
use super::config::{CheckedConfig, Init, ModelKind, eval_spacing};
use super::events::{EpochRecord, Event, EventSink, RunResult};
use crate::data::Dataset;
use crate::error::{AecmError, Result};
use crate::metrics::{Scores, scores};
use crate::model::adam::{Adam, AdamState};
use crate::model::baselines::{self, DeviceData, Seeding};
use crate::model::dense::{self, HostLoss};
use crate::model::gpu::{self, GpuStep};
use crate::model::linalg::pinv;
use crate::model::net::{self, Arch, HostMat, HostRows, LossWeights, Net, NetKind, e2_e3};
use crate::util::{SeededRng, rng};
use burn::tensor::{Device, Int, Tensor, TensorData};
use rand::seq::SliceRandom;
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Where a run is in its schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Autoencoder alone, mean-squared error (AE-CM pretrained, AE-KM).
    AePretrain,
    /// Clustering module alone on the frozen embedding (AE-CM pretrained).
    CmPretrain,
    /// The model's own loss.
    Train,
    /// The averaging epoch.
    Averaging,
    /// Finished.
    Done,
}

impl Phase {
    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Self::AePretrain => "ae-pretrain",
            Self::CmPretrain => "cm-pretrain",
            Self::Train => "train",
            Self::Averaging => "averaging",
            Self::Done => "done",
        }
    }
}

/// Trains one CM / AE-CM / AE-KM model step by step.
pub struct Trainer {
    cfg: CheckedConfig,
    arch: Arch,
    device: Device,
    data: Dataset,
    x: Tensor<2>,
    /// The CM's data as sparse rows when at most a third of it is non-zero (MNIST): the host
    /// step and the evaluation multiply only those entries (CPU backend).
    x_sparse: Option<net::SparseRows>,
    /// Frozen embedding of the whole data set during `CmPretrain`.
    z_frozen: Option<Tensor<2>>,
    params: Vec<Tensor<2>>,
    /// Host copies of the parameters while the autoencoder's host step trains them (CPU
    /// backend, [`dense`]); `params` lags behind them while `host_dirty`.
    host_params: Option<Vec<Vec<f32>>>,
    host_dirty: bool,
    /// The AE-CM's own GPU step (wgpu backend, [`gpu`]): parameters, gradients and Adam's
    /// moments in GPU buffers; `params` lags behind them while `gpu_dirty`.
    gpu: Option<GpuStep>,
    gpu_dirty: bool,
    /// A failure reading the GPU step's parameters back, raised by the next [`Self::step`].
    gpu_error: Option<String>,
    /// Why the GPU step could not be set up (then burn's autodiff trains on wgpu).
    gpu_unavailable: Option<String>,
    adam: Adam,
    rng: SeededRng,
    weights: LossWeights,
    lr: f64,
    phase: Phase,
    phase_epochs: usize,
    epoch_in_phase: usize,
    perm: Option<Tensor<1, Int>>,
    /// The same permutation on the host (rows for the CM's host path).
    perm_host: Vec<i64>,
    cursor: usize,
    step: usize,
    epoch_terms: Vec<Tensor<1>>,
    avg_sum: Option<Vec<Tensor<2>>>,
    avg_count: usize,
    history: Vec<EpochRecord>,
    /// The epoch of the next evaluation under an evaluation budget.
    next_eval: usize,
    epoch_start: Instant,
    started: Instant,
    /// Seconds of training in earlier sessions of this run (a resumed checkpoint's).
    elapsed_before: f64,
    device_name: String,
}

fn to_f32(t: Tensor<1>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap_or_default()
}

impl Trainer {
    /// Sets up a run: uploads the data, initialises the parameters (random, or from k-means for
    /// the pre-trained CM), and enters the first phase.
    pub fn new(
        cfg: CheckedConfig,
        data: Dataset,
        device: Device,
        device_name: &str,
    ) -> Result<Self> {
        if !cfg.model.is_neural() {
            return Err(AecmError::config(
                "model",
                format!("{} is not trained step by step", cfg.model.name()),
            ));
        }
        let kind = if cfg.model == ModelKind::Cm {
            NetKind::Cm
        } else {
            NetKind::AeCm
        };
        let arch = Arch {
            kind,
            input: data.d,
            hidden: if kind == NetKind::Cm {
                vec![]
            } else {
                cfg.hidden.clone()
            },
            embed: if kind == NetKind::Cm {
                data.d
            } else {
                cfg.embed
            },
            k: cfg.clusters,
            quadratic: kind == NetKind::AeCm && cfg.quadratic,
        };
        let x = Tensor::<2>::from_data(TensorData::new(data.x.clone(), [data.n, data.d]), &device);
        let mut init_rng = rng(cfg.seed, 1);
        let host = net::random_params(&arch, &mut init_rng);
        let mut params: Vec<Tensor<2>> = host.iter().map(|p| p.to_tensor(&device)).collect();
        if cfg.model == ModelKind::Cm && cfg.init == Init::Pretrained {
            let dd = DeviceData::new(&data.x, data.n, data.d, &device);
            let c0 = baselines::kmeanspp(&dd, cfg.clusters, &mut init_rng);
            let (c1, _, _) = baselines::lloyd_step(&dd, &c0);
            set_cm_params(&mut params, &arch, &c1, &device);
        }
        let phase = match (cfg.model, cfg.init) {
            (ModelKind::AeKm, _) | (ModelKind::Aecm, Init::Pretrained) => Phase::AePretrain,
            _ => Phase::Train,
        };
        let adam = optimizer(&cfg, phase, params.len(), &device);
        let weights = cfg.weights();
        let lr = cfg.lr;
        let seed = cfg.seed;
        let cfg_eval_every = cfg.eval_every.max(1);
        let x_sparse = (kind == NetKind::Cm && device == Device::flex())
            .then(|| net::SparseRows::detect(&data.x, data.n, data.d, 1.0 / 3.0))
            .flatten();
        let mut t = Self {
            cfg,
            arch,
            device,
            data,
            x,
            x_sparse,
            z_frozen: None,
            params,
            host_params: None,
            host_dirty: false,
            gpu: None,
            gpu_dirty: false,
            gpu_error: None,
            gpu_unavailable: None,
            adam,
            rng: rng(seed, 2),
            weights,
            lr,
            phase,
            phase_epochs: 0,
            epoch_in_phase: 0,
            perm: None,
            perm_host: Vec::new(),
            cursor: 0,
            step: 0,
            epoch_terms: Vec::new(),
            avg_sum: None,
            avg_count: 0,
            history: Vec::new(),
            next_eval: cfg_eval_every,
            epoch_start: Instant::now(),
            started: Instant::now(),
            elapsed_before: 0.0,
            device_name: device_name.to_string(),
        };
        t.phase_epochs = t.epochs_of(phase);
        if t.phase_epochs == 0 {
            t.advance_phase()?;
        }
        Ok(t)
    }

    fn epochs_of(&self, p: Phase) -> usize {
        match p {
            Phase::AePretrain => {
                if self.cfg.model == ModelKind::AeKm {
                    self.cfg.epochs
                } else {
                    self.cfg.pretrain_epochs
                }
            }
            Phase::CmPretrain => self.cfg.cm_pretrain_epochs,
            Phase::Train => self.cfg.epochs,
            Phase::Averaging => usize::from(self.cfg.averaging),
            Phase::Done => 0,
        }
    }

    /// The architecture.
    pub fn arch(&self) -> &Arch {
        &self.arch
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Mini-batch updates done so far.
    pub fn steps(&self) -> usize {
        self.step
    }

    /// Epoch history so far.
    pub fn history(&self) -> &[EpochRecord] {
        &self.history
    }

    /// The loss weights now in use.
    pub fn weights(&self) -> &LossWeights {
        &self.weights
    }

    /// Changes alpha/beta/lambda; applies from the next step.
    pub fn set_weights(&mut self, alpha: Vec<f64>, beta: f64, lambda: f64) -> Result<()> {
        super::config::check_weights(&alpha, beta, lambda, self.arch.k)?;
        let mut alpha = alpha;
        alpha.sort_by(f64::total_cmp);
        self.weights.alpha = alpha;
        self.weights.beta = beta;
        self.weights.lambda = lambda;
        Ok(())
    }

    /// Changes the learning rate; applies from the next step.
    pub fn set_lr(&mut self, lr: f64) -> Result<()> {
        if !lr.is_finite() || lr <= 0.0 {
            return Err(AecmError::config("lr", "must be a finite number > 0"));
        }
        self.lr = lr;
        Ok(())
    }

    /// Total number of epochs of the whole schedule (all phases).
    pub fn total_epochs(&self) -> usize {
        [
            Phase::AePretrain,
            Phase::CmPretrain,
            Phase::Train,
            Phase::Averaging,
        ]
        .into_iter()
        .filter(|p| self.phase_applies(*p))
        .map(|p| self.epochs_of(p))
        .sum()
    }

    fn phase_applies(&self, p: Phase) -> bool {
        match p {
            Phase::AePretrain => matches!(
                (self.cfg.model, self.cfg.init),
                (ModelKind::AeKm, _) | (ModelKind::Aecm, Init::Pretrained)
            ),
            Phase::CmPretrain => {
                self.cfg.model == ModelKind::Aecm && self.cfg.init == Init::Pretrained
            }
            Phase::Train | Phase::Averaging => self.cfg.model != ModelKind::AeKm,
            Phase::Done => false,
        }
    }

    /// The loss weights of the CM-only pre-training: the full CM loss, with its own alpha when
    /// the configuration gives one.
    fn cm_pretrain_weights(&self) -> LossWeights {
        LossWeights {
            cm_terms: [true; 4],
            alpha: self
                .cfg
                .cm_pretrain_alpha
                .map_or_else(|| self.weights.alpha.clone(), |a| vec![a]),
            ..self.weights.clone()
        }
    }

    fn batch_size(&self) -> usize {
        match self.phase {
            Phase::AePretrain => self.cfg.pretrain_batch,
            Phase::CmPretrain => self.cfg.cm_pretrain_batch.unwrap_or(self.cfg.batch),
            _ => self.cfg.batch,
        }
        .min(self.data.n)
    }

    /// True when the schedule is finished.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    fn advance_phase(&mut self) -> Result<()> {
        // transitions read and replace the tensors: bring them up to date, and let the next
        // host step start again from them
        self.sync_tensors();
        self.host_params = None;
        let from = self.phase;
        loop {
            let next = match self.phase {
                Phase::AePretrain => {
                    if self.cfg.model == ModelKind::AeKm {
                        Phase::Done
                    } else {
                        Phase::CmPretrain
                    }
                }
                Phase::CmPretrain => Phase::Train,
                Phase::Train => {
                    if self.cfg.averaging {
                        Phase::Averaging
                    } else {
                        Phase::Done
                    }
                }
                Phase::Averaging | Phase::Done => Phase::Done,
            };
            // phase transitions of the pre-trained AE-CM (ALGORITHM.md section 2)
            if self.phase == Phase::AePretrain && next == Phase::CmPretrain {
                let z = self.embed_all();
                let zh = HostMat::from_tensor(&z);
                let dd = DeviceData::new(&zh.data, zh.rows, zh.cols, &self.device);
                let mut r = rng(self.cfg.seed, 3);
                let km = baselines::kmeans(&dd, self.arch.k, 20, Seeding::KmeansPP, &mut r);
                set_cm_params(&mut self.params, &self.arch, &km.centres, &self.device);
                self.z_frozen = Some(z);
                self.adam = optimizer(&self.cfg, next, self.params.len(), &self.device);
            }
            if self.phase == Phase::CmPretrain && next == Phase::Train {
                self.z_frozen = None;
                self.adam = optimizer(&self.cfg, next, self.params.len(), &self.device);
            }
            if next == Phase::Averaging {
                self.avg_sum = None;
                self.avg_count = 0;
            }
            if self.phase == Phase::Averaging
                && next == Phase::Done
                && let Some(sum) = self.avg_sum.take()
            {
                let c = self.avg_count.max(1) as f64;
                self.params = sum.into_iter().map(|s| s / c).collect();
            }
            self.phase = next;
            self.phase_epochs = self.epochs_of(next);
            self.epoch_in_phase = 0;
            if next == Phase::Done || self.phase_epochs > 0 {
                break;
            }
        }
        // The GPU step's state carries on into the averaging epoch (Adam's moments, as the
        // host's) and, at the end, serves the predictions with the final parameters; other
        // phases start from the tensors.
        match (from, self.phase) {
            (Phase::Train, Phase::Averaging) => {}
            (Phase::Train | Phase::Averaging | Phase::AePretrain, Phase::Done) => {
                if let Some(g) = &self.gpu {
                    let host: Vec<Vec<f32>> = self
                        .params
                        .iter()
                        .map(|t| HostMat::from_tensor(t).data)
                        .collect();
                    g.set_params(&host)?;
                }
            }
            _ => self.gpu = None,
        }
        Ok(())
    }

    /// Indices of the trainable parameters in the current phase.
    fn trainable(&self) -> std::ops::Range<usize> {
        let cm = 2 * self.arch.n_deep();
        match self.phase {
            Phase::AePretrain => usize::from(self.cfg.freeze_first_kernel)..cm,
            Phase::CmPretrain => cm..cm + 4,
            _ => 0..self.params.len(),
        }
    }

    /// One mini-batch update. Returns the loss terms of that batch when `step_events` is on
    /// (reading them back synchronises the device), else `None`.
    pub fn step(&mut self, sink: &mut dyn EventSink) -> Result<Option<Vec<f32>>> {
        if self.phase == Phase::Done {
            return Ok(None);
        }
        if let Some(e) = self.gpu_error.take() {
            return Err(AecmError::Backend(e));
        }
        let n = self.data.n;
        if self.perm.is_none() {
            let mut p: Vec<i64> = (0..n as i64).collect();
            p.shuffle(&mut self.rng);
            self.perm_host.clone_from(&p);
            self.perm = Some(Tensor::<1, Int>::from_data(
                TensorData::new(p, [n]),
                &self.device,
            ));
            self.cursor = 0;
            self.epoch_start = Instant::now();
            if self.epoch_in_phase == 0 {
                sink.event(&Event::Phase {
                    phase: self.phase.name().into(),
                    epochs: self.phase_epochs,
                });
            }
        }
        let b = self.batch_size();
        let end = (self.cursor + b).min(n);
        let idx = self
            .perm
            .as_ref()
            .map(|p| p.clone().narrow(0, self.cursor, end - self.cursor));
        let Some(idx) = idx else { return Ok(None) };
        let rows = self.cursor..end;
        self.cursor = end;
        let terms = self.update(idx, rows)?;
        let step_terms = if self.cfg.step_events {
            let v = match (&terms, &self.gpu) {
                (Some(t), _) => to_f32(t.clone()),
                (None, Some(g)) => g.last_terms()?,
                (None, None) => Vec::new(),
            };
            sink.event(&Event::Step {
                step: self.step,
                epoch: self.epochs_done(),
                phase: self.phase.name().into(),
                terms: v.clone(),
            });
            Some(v)
        } else {
            None
        };
        if let Some(t) = terms {
            self.epoch_terms.push(t);
        }
        self.step += 1;
        if self.phase == Phase::Averaging {
            self.sync_tensors();
            let cur = self.params.clone();
            self.avg_sum = Some(match self.avg_sum.take() {
                None => cur,
                Some(s) => s.into_iter().zip(cur).map(|(a, b)| a + b).collect(),
            });
            self.avg_count += 1;
        }
        // `drop_last`: the epoch's last, partial batch is skipped (its points wait for the
        // next epoch's shuffle)
        if self.cfg.drop_last && n - self.cursor < b {
            self.cursor = n;
        }
        if self.cursor >= n {
            self.finish_epoch(sink)?;
        }
        Ok(step_terms)
    }

    fn epochs_done(&self) -> usize {
        self.history.len()
    }

    /// True when this phase's step runs in [`dense`] on host copies of the parameters (CPU
    /// backend, unless `cm_autodiff`): the autoencoder (AE-CM, its pre-training, AE-KM), and the
    /// CM where the CPU runs [`crate::model::skinny`]'s kernels.
    fn host_step_on(&self) -> bool {
        let phase_ok = |pre: bool| match self.phase {
            Phase::Train | Phase::Averaging => true,
            Phase::AePretrain => pre,
            _ => false,
        };
        !self.cfg.cm_autodiff
            && self.device == Device::flex()
            && match self.arch.kind {
                NetKind::AeCm => dense::supported(&self.arch) && phase_ok(true),
                NetKind::Cm => crate::model::skinny::available() && phase_ok(false),
            }
    }

    /// The learning rate of an update on `rows` rows: the run's, or in the autoencoder's
    /// pre-training with `pretrain_sgd` that rate times the rows, since its loss (a mean over
    /// the batch) stands for the authors' sum over the batch.
    fn step_lr(&self, rows: usize) -> f64 {
        match self.cfg.pretrain_sgd {
            Some([lr, _]) if self.phase == Phase::AePretrain => lr * rows as f64,
            _ => self.lr,
        }
    }

    /// True when this phase's step runs in [`gpu`]'s shaders: the AE-CM (and its pre-training
    /// with Adam) on the wgpu backend, unless `cm_autodiff`.
    fn gpu_step_on(&self) -> bool {
        !(self.cfg.cm_autodiff
            || self.phase == Phase::AePretrain && self.cfg.pretrain_sgd.is_some())
            && self.device != Device::flex()
            && self.gpu_unavailable.is_none()
            && gpu::supported(&self.arch)
            && matches!(
                self.phase,
                Phase::Train | Phase::Averaging | Phase::AePretrain
            )
    }

    /// Tensors of host parameter vectors, in parameter order.
    fn tensors_of(&self, host: &[Vec<f32>]) -> Vec<Tensor<2>> {
        self.arch
            .param_shapes()
            .into_iter()
            .zip(host)
            .map(|(shape, v)| {
                Tensor::<2>::from_data(TensorData::new(v.clone(), shape), &self.device)
            })
            .collect()
    }

    /// Makes the parameter tensors current (after host steps), so that the reads that follow
    /// (predictions, centroids, decoding) do not each convert the host copies again.
    pub fn sync_params(&mut self) {
        self.sync_tensors();
    }

    /// Brings `params` up to date with the host step's copies.
    fn sync_tensors(&mut self) {
        if self.gpu_dirty {
            if let Some(g) = &self.gpu {
                match g.read_params() {
                    Ok(h) => self.params = self.tensors_of(&h),
                    Err(e) => self.gpu_error = Some(e.to_string()),
                }
            }
            self.gpu_dirty = false;
        }
        if self.host_dirty
            && let Some(h) = &self.host_params
        {
            self.params = self.tensors_of(h);
        }
        self.host_dirty = false;
    }

    /// The current parameters as tensors (built from the host step's copies when those are
    /// newer).
    fn current(&self) -> Cow<'_, [Tensor<2>]> {
        if self.gpu_dirty
            && let Some(Ok(h)) = self.gpu.as_ref().map(GpuStep::read_params)
        {
            return Cow::Owned(self.tensors_of(&h));
        }
        match &self.host_params {
            Some(h) if self.host_dirty => Cow::Owned(self.tensors_of(h)),
            _ => Cow::Borrowed(&self.params),
        }
    }

    /// One step of [`dense::step`] on the batch `rows` of the permutation, gathered from the
    /// host copy of the data, and the fused Adam update of the host parameters.
    fn host_update(&mut self, rows: std::ops::Range<usize>) -> Tensor<1> {
        let d = self.data.d;
        let b = rows.len();
        // the batch: the non-zero entries of its rows for the CM on sparse data, else the rows
        let idx = &self.perm_host[rows];
        let sparse_b = match &self.x_sparse {
            Some(s) if self.arch.kind == NetKind::Cm => {
                Some(s.gather(idx.iter().map(|&r| r as usize)))
            }
            _ => None,
        };
        let xb = if sparse_b.is_some() {
            Vec::new()
        } else {
            self.gather_rows(idx)
        };
        let loss = self.host_loss();
        let lr = self.step_lr(b);
        let params = &self.params;
        let hp = self.host_params.get_or_insert_with(|| {
            params
                .iter()
                .map(|t| HostMat::from_tensor(t).data)
                .collect()
        });
        let (terms, grads) = if self.arch.kind == NetKind::Cm {
            let z = match &sparse_b {
                Some(s) => HostRows::Sparse(s),
                None => HostRows::Dense(&xb),
            };
            dense::cm_step(hp, d, self.arch.k, z, b, &self.weights)
        } else {
            let out = dense::step(&self.arch, hp, &xb, b, loss, &self.weights);
            (out.terms, out.grads)
        };
        let mut grads = grads;
        if self.phase == Phase::AePretrain && self.cfg.freeze_first_kernel {
            // a zero gradient leaves Adam's moments at zero: the kernel does not move
            grads[0].fill(0.0);
        }
        self.adam.step_host(lr, hp, &grads);
        self.host_dirty = true;
        let n = terms.len();
        Tensor::<1>::from_data(TensorData::new(terms, [n]), &self.device)
    }

    /// One update; the batch's loss terms as a tensor, or `None` when they stay on the GPU
    /// ([`GpuStep::take_terms`]).
    fn update(
        &mut self,
        idx: Tensor<1, Int>,
        rows: std::ops::Range<usize>,
    ) -> Result<Option<Tensor<1>>> {
        if self.gpu_step_on() {
            match self.gpu_update(rows.clone()) {
                Ok(()) => return Ok(None),
                // no GPU step could be set up (a driver that rejects a shader, say): burn's
                // autodiff trains instead, and the device's description says so
                Err(e) if self.gpu.is_none() => {
                    self.device_name = format!(
                        "{} (own GPU step unavailable, burn autodiff instead: {e})",
                        self.device_name
                    );
                    self.gpu_unavailable = Some(e.to_string());
                }
                Err(e) => return Err(e),
            }
        }
        // the GPU step's parameters, if any, are read back and its state dropped
        if self.gpu.is_some() {
            self.sync_tensors();
            self.gpu = None;
        }
        if self.host_step_on() {
            return Ok(Some(self.host_update(rows)));
        }
        // the tensor paths below change `params`: the host copies are then out of date
        self.sync_tensors();
        self.host_params = None;
        // The clustering module alone (CM, or AE-CM pre-training its CM on the frozen embedding):
        // closed-form gradients, no autodiff graph.
        let cm_only = match self.phase {
            Phase::CmPretrain => true,
            Phase::AePretrain => false,
            _ => self.arch.kind == NetKind::Cm,
        };
        if cm_only && !self.cfg.cm_autodiff {
            let c = 2 * self.arch.n_deep();
            let w = if self.phase == Phase::CmPretrain {
                self.cm_pretrain_weights()
            } else {
                self.weights.clone()
            };
            let z = match (&self.z_frozen, self.phase) {
                (Some(zf), Phase::CmPretrain) => zf.clone(),
                _ => self.x.clone(),
            }
            .select(0, idx);
            let (terms, grads) = net::cm_loss_and_grads(z, &self.params[c..c + 4], &w);
            let mut g: Vec<Option<Tensor<2>>> = vec![None; self.params.len()];
            for (slot, gr) in g[c..c + 4].iter_mut().zip(grads) {
                *slot = Some(gr);
            }
            self.adam.step(self.lr, &mut self.params, g);
            return Ok(Some(terms));
        }
        let train = self.trainable();
        let leaves: Vec<Tensor<2>> = self
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if train.contains(&i) {
                    p.clone().autodiff().require_grad()
                } else {
                    p.clone()
                }
            })
            .collect();
        let net = Net {
            arch: &self.arch,
            params: &leaves,
        };
        let (total, terms) = match self.phase {
            Phase::AePretrain => {
                let xb = self.x.clone().select(0, idx);
                let rec = net.decode(net.encode(xb.clone()));
                let mse = (xb - rec).square().mean();
                (mse.clone(), mse.reshape([1]))
            }
            Phase::CmPretrain => {
                let z = self
                    .z_frozen
                    .clone()
                    .unwrap_or_else(|| self.x.clone())
                    .select(0, idx);
                let (g, z_hat) = net.cm(z.clone());
                let f = net::Forward {
                    z: z.clone(),
                    g,
                    z_hat,
                    u: net.centroids(),
                    x_hat: None,
                };
                net::loss(NetKind::Cm, &z, &f, &self.cm_pretrain_weights())
            }
            _ => {
                let xb = self.x.clone().select(0, idx);
                let f = net.forward(xb.clone());
                net::loss(self.arch.kind, &xb, &f, &self.weights)
            }
        };
        let grads = total.backward();
        let g: Vec<Option<Tensor<2>>> = leaves
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if train.contains(&i) {
                    p.grad(&grads)
                } else {
                    None
                }
            })
            .collect();
        let lr = self.step_lr(rows.len());
        self.adam.step(lr, &mut self.params, g);
        Ok(Some(terms.without_autodiff().detach()))
    }

    /// The rows `idx` of the data set's host copy, one after another (a batch, `B x d`).
    fn gather_rows(&self, idx: &[i64]) -> Vec<f32> {
        let d = self.data.d;
        let mut xb = Vec::with_capacity(idx.len() * d);
        for &r in idx {
            let r = r as usize;
            xb.extend_from_slice(&self.data.x[r * d..(r + 1) * d]);
        }
        xb
    }

    /// The autoencoder's loss in this phase: the MSE while pre-training, else the AE-CM's.
    fn host_loss(&self) -> HostLoss {
        if self.phase == Phase::AePretrain {
            HostLoss::AeMse
        } else {
            HostLoss::AeCm
        }
    }

    /// One step of [`GpuStep`] on the batch `rows` of the permutation, gathered from the host
    /// copy of the data (the GPU state is set up from the current parameters on first use).
    fn gpu_update(&mut self, rows: std::ops::Range<usize>) -> Result<()> {
        if self.gpu.is_none() {
            self.sync_tensors();
            let host: Vec<Vec<f32>> = self
                .params
                .iter()
                .map(|t| HostMat::from_tensor(t).data)
                .collect();
            let n = self.data.n;
            let b_max = self.cfg.batch.max(self.cfg.pretrain_batch).min(n).max(1);
            let b_min = self.cfg.batch.min(self.cfg.pretrain_batch).max(1);
            let slots = n.div_ceil(b_min).clamp(1, 4096);
            let mut g = GpuStep::new(&self.arch, &host, b_max, slots, n)?;
            // a resumed run's optimiser carries on (a phase's first step has a fresh one)
            if self.adam.steps() > 0 {
                g.set_adam(&self.adam.state())?;
            }
            self.gpu = Some(g);
        }
        let xb = self.gather_rows(&self.perm_host[rows]);
        let loss = self.host_loss();
        let freeze = self.phase == Phase::AePretrain && self.cfg.freeze_first_kernel;
        let (lr, eps) = (self.lr, self.adam.eps);
        if let Some(g) = self.gpu.as_mut() {
            g.step(&xb, loss, &self.weights, lr, eps, freeze)?;
            self.gpu_dirty = true;
        }
        Ok(())
    }

    fn finish_epoch(&mut self, sink: &mut dyn EventSink) -> Result<()> {
        self.sync_tensors();
        // the steps' terms: tensors of the tensor and host paths, then the GPU step's
        let mut rows: Vec<Vec<f32>> = Vec::new();
        if let Some(first) = self.epoch_terms.first() {
            let k = first.dims()[0];
            let all = to_f32(Tensor::cat(std::mem::take(&mut self.epoch_terms), 0));
            rows.extend(all.chunks_exact(k.max(1)).map(<[f32]>::to_vec));
        }
        if let Some(g) = self.gpu.as_mut() {
            rows.extend(g.take_terms()?);
        }
        let terms: Vec<f64> = match rows.first() {
            Some(first) => (0..first.len())
                .map(|j| {
                    rows.iter()
                        .map(|r| f64::from(r.get(j).copied().unwrap_or(0.0)))
                        .sum::<f64>()
                        / rows.len() as f64
                })
                .collect(),
            None => Vec::new(),
        };
        self.perm = None;
        self.epoch_in_phase += 1;
        let epoch = self.history.len() + 1;
        let last_of_phase = self.epoch_in_phase >= self.phase_epochs;
        let phase = self.phase;
        let every = self.cfg.eval_every;
        let eval = every > 0
            && phase != Phase::Averaging
            && if self.cfg.eval_budget > 0.0 {
                epoch >= self.next_eval
            } else {
                epoch.is_multiple_of(every)
            };
        let train_s = self.epoch_start.elapsed().as_secs_f64();
        let eval_start = Instant::now();
        let (sc, lsp, counts) = if eval {
            self.evaluate()
        } else {
            (None, None, None)
        };
        let eval_s = eval_start.elapsed().as_secs_f64();
        if eval {
            self.next_eval = epoch + eval_spacing(every, self.cfg.eval_budget, train_s, eval_s);
        }
        let rec = EpochRecord {
            epoch,
            phase: phase.name().into(),
            steps: self.step,
            loss: terms.iter().sum(),
            terms,
            scores: sc,
            lsp,
            counts,
            seconds: self.epoch_start.elapsed().as_secs_f64(),
            eval_seconds: eval_s,
        };
        sink.event(&Event::Epoch(rec.clone()));
        self.history.push(rec);
        if last_of_phase {
            self.advance_phase()?;
        }
        Ok(())
    }

    /// Embedding of the whole data set (`N x p`; the input itself for CM), in chunks.
    pub fn embed_all(&self) -> Tensor<2> {
        if let Some(z) = self.gpu_encode() {
            let (n, p) = (self.data.n, self.arch.embed);
            return Tensor::from_data(TensorData::new(z, [n, p]), &self.device);
        }
        if let Some(hp) = &self.host_params
            && dense::supported(&self.arch)
        {
            let (n, d) = (self.data.n, self.data.d);
            let z = dense::encode(&self.arch, hp, &self.data.x[..n * d], n);
            return Tensor::from_data(TensorData::new(z, [n, self.arch.embed]), &self.device);
        }
        let cur = self.current();
        let net = Net {
            arch: &self.arch,
            params: &cur,
        };
        let n = self.data.n;
        let chunks: Vec<Tensor<2>> = (0..n)
            .step_by(8192)
            .map(|s| net.encode(self.x.clone().narrow(0, s, (n - s).min(8192))))
            .collect();
        Tensor::cat(chunks, 0)
    }

    /// The embedding of the whole data set by the GPU step's encoder when it holds the
    /// parameters (`None` without it, or when it fails: the callers then use burn's tensors).
    fn gpu_encode(&self) -> Option<Vec<f32>> {
        let g = self.gpu.as_ref()?;
        let (n, d) = (self.data.n, self.data.d);
        g.encode(&self.data.x[..n * d], n).ok()
    }

    /// Predicted clusters (argmax gamma) of all samples and L_sp = E2 + E3 over the whole data set.
    pub fn predict(&self) -> (Vec<u32>, f64) {
        let (labels, lsp, _) = self.predict_inner(false);
        (labels, lsp)
    }

    /// [`Self::predict`] plus the embedding of every sample (`N x p`; AE-CM only, else `None`),
    /// from one pass of the encoder.
    pub fn predict_embed(&self) -> (Vec<u32>, f64, Option<HostMat>) {
        self.predict_inner(self.arch.kind == NetKind::AeCm)
    }

    fn predict_inner(&self, keep_z: bool) -> (Vec<u32>, f64, Option<HostMat>) {
        let cur = self.current();
        let net = Net {
            arch: &self.arch,
            params: &cur,
        };
        let n = self.data.n;
        let u = net.centroids();
        let mut labels = Vec::with_capacity(n);
        let mut lsp = 0f64;
        let mut zs = Vec::new();
        let (d, c) = (self.data.d, 2 * self.arch.n_deep());
        // AE-CM trained by the host step: the encoder on the host copies of the parameters and
        // of the data
        // (or on the GPU step's copies when it holds them)
        let host_z = match &self.host_params {
            _ if self.gpu.is_some() => self.gpu_encode(),
            Some(hp) if self.arch.kind == NetKind::AeCm && dense::supported(&self.arch) => {
                Some(dense::encode(&self.arch, hp, &self.data.x[..n * d], n))
            }
            _ => None,
        };
        // gamma of every sample on the host (no tensor copy of X or Z), over the CPU threads
        let g_all = match &host_z {
            Some(z) => net::cm_gamma_host(HostRows::Dense(z), n, &cur[c..c + 2]),
            None if self.arch.kind == NetKind::Cm && !keep_z => {
                let rows = match &self.x_sparse {
                    Some(s) => HostRows::Sparse(s),
                    None => HostRows::Dense(&self.data.x[..n * d]),
                };
                net::cm_gamma_host(rows, n, &cur[c..c + 2])
            }
            None => None,
        };
        if let Some(gv) = &g_all {
            // labels and L_sp on the host too
            let uh = HostMat::from_tensor(&u);
            let (labels, lsp) = dense::labels_and_lsp(gv, uh.rows, &uh.data, uh.cols);
            let z = match host_z {
                Some(data) if keep_z => Some(HostMat {
                    rows: n,
                    cols: self.arch.embed,
                    data,
                }),
                _ => None,
            };
            return (labels, lsp, z);
        }
        for s in (0..n).step_by(8192) {
            let m = (n - s).min(8192);
            let g = {
                let z = net.encode(self.x.clone().narrow(0, s, m));
                if keep_z {
                    zs.push(z.clone());
                }
                net.gamma(z)
            };
            let (e2, e3) = e2_e3(&g, &u);
            lsp += to_f32(e2 + e3).first().copied().map_or(0.0, f64::from);
            let am = g.argmax(1);
            labels.extend(
                am.into_data()
                    .convert::<i64>()
                    .try_into_vec::<i64>()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|v| v as u32),
            );
        }
        let z = (keep_z && !zs.is_empty()).then(|| HostMat::from_tensor(&Tensor::cat(zs, 0)));
        (labels, lsp, z)
    }

    /// Scores, L_sp and the clusters x classes counts of the current parameters on the whole
    /// data set (nothing while the autoencoder pre-trains: no clustering yet).
    fn evaluate(&self) -> (Option<Scores>, Option<f64>, Option<Vec<Vec<u64>>>) {
        if self.phase == Phase::AePretrain {
            return (None, None, None);
        }
        let (pred, lsp) = self.predict();
        let sc = self.data.labels.as_ref().map(|t| scores(&pred, t));
        let counts = self.data.labels.as_ref().map(|t| {
            crate::metrics::cluster_class_counts(&pred, t, self.arch.k, self.data.n_classes())
        });
        (sc, Some(lsp), counts)
    }

    /// A host copy of every parameter, in parameter order.
    pub fn params_host(&self) -> Vec<HostMat> {
        if self.gpu_dirty
            && let Some(Ok(h)) = self.gpu.as_ref().map(GpuStep::read_params)
        {
            return self
                .arch
                .param_shapes()
                .into_iter()
                .zip(h)
                .map(|([rows, cols], data)| HostMat { rows, cols, data })
                .collect();
        }
        match &self.host_params {
            Some(h) if self.host_dirty => self
                .arch
                .param_shapes()
                .into_iter()
                .zip(h)
                .map(|([rows, cols], v)| HostMat {
                    rows,
                    cols,
                    data: v.clone(),
                })
                .collect(),
            _ => self.params.iter().map(HostMat::from_tensor).collect(),
        }
    }

    /// Centroids in embedding space (`K x p`).
    pub fn centroids(&self) -> HostMat {
        let cur = self.current();
        HostMat::from_tensor(
            &Net {
                arch: &self.arch,
                params: &cur,
            }
            .centroids(),
        )
    }

    /// Centroids decoded to input space (`K x d`): AE-CM decodes them, CM centroids already are.
    pub fn decoded_centroids(&self) -> HostMat {
        let cur = self.current();
        let net = Net {
            arch: &self.arch,
            params: &cur,
        };
        let u = net.centroids();
        match self.arch.kind {
            NetKind::Cm => HostMat::from_tensor(&u),
            NetKind::AeCm => HostMat::from_tensor(&net.decode(u)),
        }
    }

    /// Decodes points of the embedding space (`m x p`) to input space (`m x d`); for CM the
    /// embedding is the input space and the points are returned as they are.
    pub fn decode_points(&self, z: &HostMat) -> HostMat {
        match self.arch.kind {
            NetKind::Cm => z.clone(),
            NetKind::AeCm => {
                let cur = self.current();
                let net = Net {
                    arch: &self.arch,
                    params: &cur,
                };
                HostMat::from_tensor(&net.decode(z.to_tensor(&self.device)))
            }
        }
    }

    /// The data set being trained on.
    pub fn data(&self) -> &Dataset {
        &self.data
    }

    /// The device description.
    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    /// Runs to the end (or until `stop` is set, after the current step) and returns the result.
    pub fn run(self, sink: &mut dyn EventSink, stop: &AtomicBool) -> Result<RunResult> {
        self.run_with(sink, stop, &mut |_| Ok(()))
    }

    /// [`Self::run`], calling `between` after every epoch (at an epoch boundary, where
    /// [`Self::checkpoint`] works), the last time with the schedule done.
    pub fn run_with(
        mut self,
        sink: &mut dyn EventSink,
        stop: &AtomicBool,
        between: &mut dyn FnMut(&mut Trainer) -> Result<()>,
    ) -> Result<RunResult> {
        self.started = Instant::now();
        let mut interrupted = false;
        while !self.is_done() {
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
            self.step(sink)?;
            if self.at_epoch_boundary() {
                between(&mut self)?;
            }
        }
        let result = self.result(interrupted);
        sink.event(&Event::Done { interrupted });
        Ok(result)
    }

    /// True between two epochs (no epoch begun): where a checkpoint can be taken.
    pub fn at_epoch_boundary(&self) -> bool {
        self.perm.is_none()
    }

    /// Seconds of training of this run so far, earlier sessions of a resumed run included.
    pub fn elapsed_s(&self) -> f64 {
        self.elapsed_before + self.started.elapsed().as_secs_f64()
    }

    /// Everything needed to continue this run exactly ([`Self::resume`]); only between epochs
    /// ([`Self::at_epoch_boundary`]). Reads the parameters and Adam's moments back from the
    /// GPU when they live there; a finished run keeps its parameters only.
    pub fn checkpoint(&mut self) -> Result<Checkpoint> {
        if !self.at_epoch_boundary() {
            return Err(AecmError::config(
                "checkpoint",
                "a run can be saved only between two epochs",
            ));
        }
        self.sync_tensors();
        if let Some(e) = self.gpu_error.take() {
            return Err(AecmError::Backend(e));
        }
        let params: Vec<Vec<f32>> = self
            .params
            .iter()
            .map(|t| HostMat::from_tensor(t).data)
            .collect();
        let adam = match &self.gpu {
            _ if self.phase == Phase::Done => AdamState {
                t: self.adam.steps(),
                ..AdamState::default()
            },
            Some(g) => g.read_adam()?,
            None => self.adam.state(),
        };
        Ok(Checkpoint {
            state: CheckpointState {
                format: checkpoint::FORMAT,
                config: (*self.cfg).clone(),
                data: DataPrint::of(&self.data),
                phase: self.phase,
                epoch_in_phase: self.epoch_in_phase,
                step: self.step,
                next_eval: self.next_eval,
                weights: self.weights.clone(),
                lr: self.lr,
                rng_word_pos: self.rng.get_word_pos().to_string(),
                adam_t: adam.t,
                adam_eps: self.adam.eps,
                elapsed_s: self.elapsed_s(),
                device: self.device_name.clone(),
                history: self.history.clone(),
            },
            shapes: self.arch.param_shapes(),
            params,
            adam_m: adam.m,
            adam_v: adam.v,
        })
    }

    /// A trainer that continues the run saved in `ck` ([`Self::checkpoint`]) with the
    /// configuration `cfg` on `data`, which must be the checkpoint's (the evaluation settings
    /// may differ). On the device that saved it the run continues exactly as if it had not
    /// stopped; on another device, up to rounding.
    pub fn resume(
        ck: Checkpoint,
        cfg: CheckedConfig,
        data: Dataset,
        device: Device,
        device_name: &str,
    ) -> Result<Self> {
        ck.check_matches(&cfg, &data)
            .map_err(|m| AecmError::config("resume", m))?;
        let mut t = Self::new(cfg, data, device, device_name)?;
        let shapes = t.arch.param_shapes();
        let fits = ck.params.len() == shapes.len()
            && ck.shapes == shapes
            && ck
                .params
                .iter()
                .zip(&shapes)
                .all(|(p, [r, c])| p.len() == r * c);
        if !fits {
            return Err(AecmError::config(
                "resume",
                format!(
                    "the checkpoint's parameters ({} arrays) do not fit the model ({} arrays)",
                    ck.params.len(),
                    shapes.len()
                ),
            ));
        }
        let st = ck.state;
        let pos: u128 = st.rng_word_pos.parse().map_err(|_| {
            AecmError::config(
                "resume",
                format!("generator position {:?}", st.rng_word_pos),
            )
        })?;
        t.params = t.tensors_of(&ck.params);
        t.host_params = None;
        t.host_dirty = false;
        t.phase = st.phase;
        t.phase_epochs = t.epochs_of(st.phase);
        t.epoch_in_phase = st.epoch_in_phase;
        t.step = st.step;
        t.next_eval = st.next_eval;
        t.weights = st.weights;
        t.lr = st.lr;
        t.rng.set_word_pos(pos);
        t.adam = optimizer(&t.cfg, t.phase, shapes.len(), &t.device).with_state(
            &AdamState {
                t: st.adam_t,
                m: ck.adam_m,
                v: ck.adam_v,
            },
            &shapes,
            &t.device,
        );
        t.history = st.history;
        t.elapsed_before = st.elapsed_s;
        t.z_frozen = None;
        if t.phase == Phase::CmPretrain {
            // the encoder does not train in this phase: its embedding is the frozen one
            t.z_frozen = Some(t.embed_all());
        }
        Ok(t)
    }

    /// The result at this point: predictions, scores, L_sp, centroids, history.
    pub fn result(&self, interrupted: bool) -> RunResult {
        let kind = self.cfg.model;
        let (assign, lsp, centroids, decoded, extra) = if kind == ModelKind::AeKm {
            let z = HostMat::from_tensor(&self.embed_all());
            let dd = DeviceData::new(&z.data, z.rows, z.cols, &self.device);
            let km = baselines::kmeans(
                &dd,
                self.arch.k,
                self.cfg.restarts,
                Seeding::KmeansPP,
                &mut rng(self.cfg.seed, 4),
            );
            let dec = {
                let cur = self.current();
                let net = Net {
                    arch: &self.arch,
                    params: &cur,
                };
                HostMat::from_tensor(&net.decode(km.centres.to_tensor(&self.device)))
            };
            (km.labels, None, km.centres, Some(dec), Vec::new())
        } else {
            // one encoder pass for the predictions and AE-CM+KM's embedding
            let (pred, lsp, z) = self.predict_embed();
            let extra = if kind == ModelKind::Aecm {
                // AE-CM+KM: k-means on the learned embedding
                let z = z.unwrap_or_else(|| HostMat::from_tensor(&self.embed_all()));
                let dd = DeviceData::new(&z.data, z.rows, z.cols, &self.device);
                let km = baselines::kmeans(
                    &dd,
                    self.arch.k,
                    self.cfg.restarts,
                    Seeding::KmeansPP,
                    &mut rng(self.cfg.seed, 5),
                );
                km.labels
            } else {
                Vec::new()
            };
            let dec = (self.arch.kind == NetKind::AeCm).then(|| self.decoded_centroids());
            (pred, Some(lsp), self.centroids(), dec, extra)
        };
        let sc = self.data.labels.as_ref().map(|t| scores(&assign, t));
        let km_sc = self
            .data
            .labels
            .as_ref()
            .filter(|_| !extra.is_empty())
            .map(|t| scores(&extra, t));
        RunResult {
            model: kind.name().into(),
            seed: self.cfg.seed,
            device: self.device_name.clone(),
            assignments: assign,
            scores: sc,
            lsp,
            centroids,
            decoded_centroids: decoded,
            km_on_embedding: km_sc,
            km_assignments: extra,
            history: self.history.clone(),
            steps: self.step,
            epochs: self.history.len(),
            interrupted,
            wall_s: self.elapsed_s(),
        }
    }
}

/// A fresh optimiser for the parameters of a run of `cfg` entering `phase`: Adam (the
/// pre-training's epsilon, or the run's), or for the autoencoder's pre-training with
/// `pretrain_sgd` the authors' SGD with momentum; updated on the host on the CPU backend.
fn optimizer(cfg: &CheckedConfig, phase: Phase, n: usize, device: &Device) -> Adam {
    let pre = phase == Phase::AePretrain;
    let eps = if pre {
        cfg.pretrain_adam_eps
    } else {
        cfg.adam_eps
    };
    Adam::new(n, eps)
        .with_host_update(*device == Device::flex())
        .with_sgd_momentum(cfg.pretrain_sgd.filter(|_| pre).map(|[_, m]| m))
}

/// Sets the CM weights from centres U (`K x p`): `W_enc = pinv(U)` (`p x K`), `W_dec = U`, both
/// biases 0 (ALGORITHM.md, k-means++ initialisation).
fn set_cm_params(params: &mut [Tensor<2>], arch: &Arch, c: &HostMat, device: &Device) {
    let i = 2 * arch.n_deep();
    let (k, p) = (c.rows, c.cols);
    let w_enc = HostMat {
        rows: p,
        cols: k,
        data: pinv(&c.data, k, p),
    };
    params[i] = w_enc.to_tensor(device);
    params[i + 1] = Tensor::zeros([1, k], device);
    params[i + 2] = c.to_tensor(device);
    params[i + 3] = Tensor::zeros([1, p], device);
}

/// Runs a classical baseline (k-means, GMM, iGMM) on the data set.
pub fn run_baseline(
    cfg: &CheckedConfig,
    data: &Dataset,
    device: &Device,
    device_name: &str,
) -> RunResult {
    let started = Instant::now();
    let dd = DeviceData::new(&data.x, data.n, data.d, device);
    let mut r = rng(cfg.seed, 6);
    let part = match cfg.model {
        ModelKind::Gmm => baselines::gmm(&dd, cfg.clusters, cfg.restarts, cfg.seeding, &mut r),
        ModelKind::Igmm => baselines::igmm(&dd, cfg.clusters, cfg.restarts, cfg.seeding, &mut r),
        _ => baselines::kmeans(&dd, cfg.clusters, cfg.restarts, cfg.seeding, &mut r),
    };
    RunResult {
        model: cfg.model.name().into(),
        seed: cfg.seed,
        device: device_name.into(),
        scores: data.labels.as_ref().map(|t| scores(&part.labels, t)),
        assignments: part.labels,
        lsp: None,
        centroids: part.centres,
        decoded_centroids: None,
        km_on_embedding: None,
        km_assignments: Vec::new(),
        history: Vec::new(),
        steps: 0,
        epochs: 0,
        interrupted: false,
        wall_s: started.elapsed().as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::TrainConfig;

    /// The epochs' phases of a pre-trained AE-CM with 2 epochs in each phase.
    const PRETRAINED_2X2_PHASES: [&str; 7] = [
        "ae-pretrain",
        "ae-pretrain",
        "cm-pretrain",
        "cm-pretrain",
        "train",
        "train",
        "averaging",
    ];

    fn blobs() -> Dataset {
        crate::data::generate("blobs", Some(90), 3).unwrap()
    }

    /// Asserts that two parameter lists agree element by element within `tol * (1 + |b|)`.
    fn assert_params_close(a: &[HostMat], b: &[HostMat], tol: f32, what: &str) {
        assert_eq!(a.len(), b.len(), "{what}: parameter counts");
        for (p, (a, b)) in a.iter().zip(b).enumerate() {
            assert_eq!(a.data.len(), b.data.len(), "{what}: param {p} sizes");
            for (j, (x, y)) in a.data.iter().zip(&b.data).enumerate() {
                assert!(
                    (x - y).abs() <= tol * (1.0 + y.abs()),
                    "{what} param {p}[{j}]: {x} vs {y}"
                );
            }
        }
    }

    /// A small AE-CM for the blobs (8-5-2 encoder, K 3, batches of 32 in every phase), pre-trained
    /// init; tests change epochs, seed and the option under test.
    fn tiny_aecm() -> TrainConfig {
        TrainConfig {
            model: ModelKind::Aecm,
            clusters: 3,
            alpha: vec![2.0],
            batch: 32,
            pretrain_batch: 32,
            hidden: vec![8, 5],
            embed: 2,
            init: Init::Pretrained,
            ..TrainConfig::default()
        }
    }

    /// Evaluations land every `eval_every` epochs with and without a budget when they are cheap
    /// (the budget's spacing itself: `config::eval_spacing`'s test).
    #[test]
    fn evaluations_follow_the_interval_under_a_budget() {
        for budget in [0.0, 0.1] {
            let c = TrainConfig {
                clusters: 3,
                alpha: vec![2.0],
                batch: 30,
                epochs: 6,
                eval_every: 2,
                eval_budget: budget,
                ..TrainConfig::default()
            }
            .check(90, 2)
            .unwrap();
            let mut t = Trainer::new(c, blobs(), Device::flex(), "cpu").unwrap();
            let mut none = |_: &Event| {};
            while !t.is_done() {
                t.step(&mut none).unwrap();
            }
            let evaluated: Vec<usize> = t
                .history()
                .iter()
                .filter(|h| h.lsp.is_some())
                .map(|h| h.epoch)
                .collect();
            assert_eq!(evaluated, [2, 4, 6], "budget {budget}");
            // evaluated epochs carry the clusters x classes counts of all 90 points
            for h in t.history() {
                match (&h.counts, h.lsp) {
                    (Some(c), Some(_)) => {
                        assert_eq!((c.len(), c[0].len()), (3, 3), "epoch {}", h.epoch);
                        let n: u64 = c.iter().flatten().sum();
                        assert_eq!(n, 90, "epoch {}", h.epoch);
                    }
                    (None, None) => {}
                    (c, l) => panic!("epoch {}: counts {c:?} with L_sp {l:?}", h.epoch),
                }
            }
        }
    }

    /// `drop_last` skips each epoch's last, partial batch: 90 points in batches of 40 give 2
    /// steps an epoch instead of 3, in every phase of the pre-trained AE-CM; without it the
    /// third step trains on the remaining 10.
    #[test]
    fn drop_last_skips_the_partial_batch() {
        let ds = blobs();
        for drop_last in [false, true] {
            let c = TrainConfig {
                batch: 40,
                pretrain_batch: 40,
                epochs: 2,
                pretrain_epochs: 2,
                cm_pretrain_epochs: 2,
                drop_last,
                ..tiny_aecm()
            }
            .check(90, 2)
            .unwrap();
            let mut t = Trainer::new(c, ds.clone(), Device::flex(), "cpu").unwrap();
            let mut none = |_: &Event| {};
            while !t.is_done() {
                t.step(&mut none).unwrap();
            }
            let per_epoch = if drop_last { 2 } else { 3 };
            let steps: Vec<usize> = t.history().iter().map(|h| h.steps).collect();
            let want: Vec<usize> = (1..=7).map(|e| e * per_epoch).collect();
            assert_eq!(steps, want, "drop_last {drop_last}");
            let phases: Vec<&str> = t.history().iter().map(|h| h.phase.as_str()).collect();
            assert_eq!(phases, PRETRAINED_2X2_PHASES);
        }
    }

    /// The CM on MNIST digits (81% zero pixels) trains and evaluates from sparse rows, with the
    /// same parameters, predictions and L_sp as from the dense matrix.
    #[test]
    fn cm_trains_and_evaluates_sparse_data_as_dense() {
        let mut ds = crate::data::embedded_mnist10k().unwrap();
        ds = ds.select_rows(&(0..3000).collect::<Vec<_>>());
        crate::data::preprocess(&mut ds, crate::data::Preprocess::Scale255);
        let c = TrainConfig {
            model: ModelKind::Cm,
            clusters: 10,
            alpha: vec![50.0],
            batch: 111,
            epochs: 2,
            ..TrainConfig::default()
        }
        .check(ds.n, ds.d)
        .unwrap();
        let mut none = |_: &Event| {};
        let mut run = |sparse: bool| {
            let mut t = Trainer::new(c.clone(), ds.clone(), Device::flex(), "cpu").unwrap();
            assert!(t.x_sparse.is_some(), "MNIST digits are sparse");
            if !sparse {
                t.x_sparse = None;
            }
            for _ in 0..40 {
                t.step(&mut none).unwrap();
            }
            (t.params_host(), t.predict())
        };
        let (ps, (pred_s, lsp_s)) = run(true);
        let (pd, (pred_d, lsp_d)) = run(false);
        assert_params_close(&ps, &pd, 1e-4, "sparse vs dense");
        assert_eq!(pred_s, pred_d);
        assert!(
            (lsp_s - lsp_d).abs() <= 1e-4 * lsp_d.abs(),
            "{lsp_s} vs {lsp_d}"
        );
        assert!(
            pred_s.iter().any(|&l| l != pred_s[0]),
            "one cluster: a weak check"
        );
    }

    /// The autoencoder pre-training learns on real images: on 2,000 MNIST digits (/255) the
    /// reconstruction error falls below half of its first-epoch value within 8 epochs. With the
    /// training epsilon (1e-3) instead of the pre-training one it does not (see
    /// `TrainConfig::pretrain_adam_eps`).
    #[test]
    fn autoencoder_pretraining_learns() {
        let mut ds = crate::data::embedded_mnist10k().unwrap();
        ds = ds.select_rows(&(0..2000).collect::<Vec<_>>());
        crate::data::preprocess(&mut ds, crate::data::Preprocess::Scale255);
        let run = |pre_eps: f64| {
            let c = TrainConfig {
                model: ModelKind::AeKm,
                clusters: 10,
                epochs: 8,
                pretrain_batch: 256,
                hidden: vec![64],
                embed: 10,
                pretrain_adam_eps: pre_eps,
                restarts: 1,
                ..TrainConfig::default()
            }
            .check(ds.n, ds.d)
            .unwrap();
            let t = Trainer::new(c, ds.clone(), Device::flex(), "cpu").unwrap();
            let r = t.run(&mut |_: &Event| {}, &AtomicBool::new(false)).unwrap();
            let mse: Vec<f64> = r.history.iter().map(|h| h.terms[0]).collect();
            (mse[0], *mse.last().unwrap())
        };
        let (first, last) = run(1e-7);
        assert!(last < 0.5 * first, "MSE {first} -> {last}");
        let (first3, last3) = run(1e-3);
        assert!(
            last3 > 0.5 * first3,
            "with eps 1e-3: MSE {first3} -> {last3}"
        );
    }

    fn cfg(model: ModelKind, epochs: usize, averaging: bool) -> CheckedConfig {
        TrainConfig {
            model,
            clusters: 3,
            alpha: vec![2.0],
            batch: 32,
            epochs,
            averaging,
            hidden: vec![8],
            embed: 2,
            seed: 7,
            ..TrainConfig::default()
        }
        .check(90, 2)
        .unwrap()
    }

    /// The CM's host path (rows gathered from the data set's host copy, AVX2 products) trains
    /// the same parameters as burn's autodiff on gathered tensor rows, and predicts the same.
    #[test]
    fn cm_host_path_matches_autodiff_training() {
        let train = |autodiff: bool| {
            let mut none = |_: &Event| {};
            let c = TrainConfig {
                model: ModelKind::Cm,
                clusters: 3,
                alpha: vec![2.0],
                batch: 32,
                epochs: 2,
                seed: 7,
                cm_autodiff: autodiff,
                ..TrainConfig::default()
            }
            .check(90, 2)
            .unwrap();
            let mut t = Trainer::new(c, blobs(), Device::flex(), "cpu").unwrap();
            while !t.is_done() {
                t.step(&mut none).unwrap();
            }
            (t.params_host(), t.predict())
        };
        let (host, (pred_h, lsp_h)) = train(false);
        let (auto, (pred_a, lsp_a)) = train(true);
        assert_params_close(&host, &auto, 1e-4, "host vs autodiff");
        assert_eq!(pred_h, pred_a);
        assert!(
            (lsp_h - lsp_a).abs() <= 1e-4 * (1.0 + lsp_a.abs()),
            "{lsp_h} vs {lsp_a}"
        );
    }

    /// `freeze_first_kernel` keeps the first encoder kernel at its initial value through the
    /// autoencoder's pre-training (host step and autodiff alike), trains the other layers, and
    /// lets the joint phase train the first kernel again.
    #[test]
    fn freeze_first_kernel_holds_only_in_pretraining() {
        for autodiff in [false, true] {
            let mut none = |_: &Event| {};
            let c = TrainConfig {
                epochs: 1,
                pretrain_epochs: 2,
                cm_pretrain_epochs: 1,
                seed: 3,
                freeze_first_kernel: true,
                cm_autodiff: autodiff,
                ..tiny_aecm()
            }
            .check(90, 2)
            .unwrap();
            let mut t = Trainer::new(c, blobs(), Device::flex(), "cpu").unwrap();
            let p0 = t.params_host();
            while t.phase() == Phase::AePretrain {
                t.step(&mut none).unwrap();
            }
            let p1 = t.params_host();
            assert_eq!(
                p0[0].data, p1[0].data,
                "autodiff {autodiff}: first kernel moved"
            );
            for i in 1..4 {
                assert_ne!(
                    p0[i].data, p1[i].data,
                    "autodiff {autodiff}: param {i} frozen"
                );
            }
            while t.phase() != Phase::Averaging {
                t.step(&mut none).unwrap();
            }
            assert_ne!(
                p1[0].data,
                t.params_host()[0].data,
                "joint phase kept it frozen"
            );
        }
    }

    /// `cm_pretrain_alpha` and `cm_pretrain_batch` act on the CM-only pre-training alone: equal
    /// to the AE-CM's values they change nothing, another alpha moves the CM's parameters, another
    /// batch changes the number of steps; a zero batch or a bad alpha is a config error.
    #[test]
    fn cm_pretrain_alpha_and_batch_act_on_the_cm_pretraining() {
        let run = |alpha: Option<f64>, batch: Option<usize>| {
            let mut none = |_: &Event| {};
            let c = TrainConfig {
                epochs: 1,
                pretrain_epochs: 1,
                cm_pretrain_epochs: 2,
                seed: 5,
                cm_pretrain_alpha: alpha,
                cm_pretrain_batch: batch,
                ..tiny_aecm()
            }
            .check(90, 2)
            .unwrap();
            let mut t = Trainer::new(c, blobs(), Device::flex(), "cpu").unwrap();
            while t.phase() != Phase::CmPretrain {
                t.step(&mut none).unwrap();
            }
            let mut steps = 0;
            while t.phase() == Phase::CmPretrain {
                t.step(&mut none).unwrap();
                steps += 1;
            }
            (steps, t.params_host())
        };
        let (s0, p0) = run(None, None);
        let (s1, p1) = run(Some(2.0), Some(32));
        assert_eq!(s0, s1);
        for (a, b) in p0.iter().zip(&p1) {
            assert_eq!(a.data, b.data);
        }
        let (s2, p2) = run(Some(50.0), None);
        assert_eq!(s2, s0);
        assert!(
            p0.iter().zip(&p2).any(|(a, b)| a.data != b.data),
            "another alpha left the CM unchanged"
        );
        let (s3, _) = run(None, Some(9));
        // 2 epochs of 90 samples: 3 batches of 32 against 10 of 9 (the phase switch may
        // take one step of its own)
        assert!(s3 > s0 + 10, "batch 9: {s3} steps, batch 32: {s0}");
        for (alpha, batch, field) in [
            (Some(0.0), None, "cm-pretrain-alpha"),
            (Some(f64::NAN), None, "cm-pretrain-alpha"),
            (None, Some(0), "cm-pretrain-batch"),
        ] {
            let e = TrainConfig {
                model: ModelKind::Aecm,
                clusters: 3,
                init: Init::Pretrained,
                cm_pretrain_alpha: alpha,
                cm_pretrain_batch: batch,
                ..TrainConfig::default()
            }
            .check(90, 2)
            .unwrap_err();
            assert!(e.to_string().contains(field), "{e}");
        }
    }

    /// `pretrain_sgd` is the authors' pre-training optimiser: one step of SGD (momentum 0) on a
    /// full batch moves the parameters by `-lr` times the gradient of the per-sample mean squared
    /// error summed over the batch (computed here by autodiff), on the host step and on the
    /// autodiff path; with momentum the two paths train the same autoencoder, unlike Adam.
    #[test]
    fn authors_sgd_pretraining_steps_on_the_batch_summed_error() {
        let ds = blobs();
        let base = TrainConfig {
            model: ModelKind::AeKm,
            pretrain_batch: 90,
            epochs: 1,
            pretrain_sgd: Some([0.01, 0.0]),
            seed: 2,
            ..tiny_aecm()
        };
        for autodiff in [false, true] {
            let c = TrainConfig {
                cm_autodiff: autodiff,
                ..base.clone()
            };
            let mut t =
                Trainer::new(c.check(90, 2).unwrap(), ds.clone(), Device::flex(), "cpu").unwrap();
            let before = t.params_host();
            t.step(&mut |_: &Event| {}).unwrap();
            let after = t.params_host();
            let dev = Device::flex();
            let leaves: Vec<Tensor<2>> = before
                .iter()
                .map(|p| p.to_tensor(&dev).autodiff().require_grad())
                .collect();
            let net = Net {
                arch: t.arch(),
                params: &leaves,
            };
            let x = Tensor::<2>::from_data(TensorData::new(ds.x.clone(), [90, 2]), &dev);
            let rec = net.decode(net.encode(x.clone()));
            let per_sample = (x - rec).square().mean_dim(1);
            let g = per_sample.sum().backward();
            for (i, leaf) in leaves.iter().enumerate().take(2 * t.arch().n_deep()) {
                let gi = HostMat::from_tensor(&leaf.grad(&g).unwrap()).data;
                for (j, ((a, b), g)) in after[i]
                    .data
                    .iter()
                    .zip(&before[i].data)
                    .zip(gi)
                    .enumerate()
                {
                    let want = b - 0.01 * g;
                    assert!(
                        (a - want).abs() <= 1e-5 * (1.0 + want.abs()),
                        "autodiff {autodiff}: param {i}[{j}] {a} vs {want}"
                    );
                }
            }
        }
        // with momentum, over two epochs of partial batches: the host step and autodiff agree,
        // and the result is not Adam's
        let run = |autodiff: bool, sgd: Option<[f64; 2]>| {
            let c = TrainConfig {
                cm_autodiff: autodiff,
                pretrain_batch: 32,
                epochs: 2,
                pretrain_sgd: sgd,
                ..base.clone()
            };
            let mut t =
                Trainer::new(c.check(90, 2).unwrap(), ds.clone(), Device::flex(), "cpu").unwrap();
            while t.phase() == Phase::AePretrain {
                t.step(&mut |_: &Event| {}).unwrap();
            }
            t.params_host()
        };
        let sgd = Some([0.01, 0.9]);
        let host = run(false, sgd);
        assert_params_close(
            &host,
            &run(true, sgd),
            1e-4,
            "SGD momentum, host vs autodiff",
        );
        let adam = run(false, None);
        assert!(
            host[0]
                .data
                .iter()
                .zip(&adam[0].data)
                .any(|(a, b)| (a - b).abs() > 1e-4)
        );
    }

    /// The autoencoder's host step ([`dense`]: parameters in host vectors between steps)
    /// trains the same AE-CM as burn's autodiff, with random and with pre-trained
    /// initialisation (host pre-training, the CM's tensor pre-training in between, host joint
    /// training, the averaging epoch), and predicts the same.
    #[test]
    fn aecm_host_step_matches_autodiff_training() {
        for init in [Init::Random, Init::Pretrained] {
            let train = |autodiff: bool| {
                let mut none = |_: &Event| {};
                let c = TrainConfig {
                    epochs: 2,
                    pretrain_epochs: 2,
                    cm_pretrain_epochs: 1,
                    averaging: true,
                    seed: 7,
                    init,
                    cm_autodiff: autodiff,
                    ..tiny_aecm()
                }
                .check(90, 2)
                .unwrap();
                let mut t = Trainer::new(c, blobs(), Device::flex(), "cpu").unwrap();
                let mut mid = None;
                while !t.is_done() {
                    t.step(&mut none).unwrap();
                    if t.steps() == 4 {
                        // read between steps, while the host copies are ahead of the tensors
                        mid = Some((t.params_host(), t.centroids(), t.predict()));
                    }
                }
                (t.params_host(), t.predict(), mid, t.history().to_vec())
            };
            let (host, (pred_h, lsp_h), mid_h, hist_h) = train(false);
            let (auto, (pred_a, lsp_a), mid_a, hist_a) = train(true);
            let close = |a: &[HostMat], b: &[HostMat], what: &str| {
                assert_params_close(a, b, 1e-3, &format!("{init:?} {what}"));
            };
            close(&host, &auto, "final");
            let ((ph, ch, (prh, _)), (pa, ca, (pra, _))) = (mid_h.unwrap(), mid_a.unwrap());
            close(&ph, &pa, "after 4 steps");
            close(&[ch], &[ca], "centroids after 4 steps");
            assert_eq!(prh, pra);
            assert_eq!(pred_h, pred_a);
            assert!(
                (lsp_h - lsp_a).abs() <= 1e-3 * (1.0 + lsp_a.abs()),
                "{lsp_h} vs {lsp_a}"
            );
            assert_eq!(hist_h.len(), hist_a.len());
            for (a, b) in hist_h.iter().zip(&hist_a) {
                for (x, y) in a.terms.iter().zip(&b.terms) {
                    assert!((x - y).abs() <= 1e-3 * (1.0 + y.abs()), "{x} vs {y}");
                }
            }
        }
    }

    #[test]
    fn averaging_epoch_returns_the_mean_of_the_iterates() {
        let mut none = |_: &Event| {};
        for model in [ModelKind::Cm, ModelKind::Aecm] {
            // A: no training epoch, then the averaging epoch.
            let mut a = Trainer::new(cfg(model, 0, true), blobs(), Device::flex(), "cpu").unwrap();
            assert_eq!(a.phase(), Phase::Averaging);
            while !a.is_done() {
                a.step(&mut none).unwrap();
            }
            // B: the same epoch as a plain training epoch (same shuffle, same updates): keep every iterate.
            let mut b = Trainer::new(cfg(model, 1, false), blobs(), Device::flex(), "cpu").unwrap();
            let mut iterates: Vec<Vec<HostMat>> = Vec::new();
            while !b.is_done() {
                b.step(&mut none).unwrap();
                iterates.push(b.params_host());
            }
            assert_eq!(
                iterates.len(),
                3,
                "90 samples in batches of 32: 3 updates, last partial batch kept"
            );
            let avg = a.params_host();
            for (p, got) in avg.iter().enumerate() {
                for (j, v) in got.data.iter().enumerate() {
                    let mean: f32 = iterates.iter().map(|it| it[p].data[j]).sum::<f32>() / 3.0;
                    assert!(
                        (v - mean).abs() < 1e-5,
                        "{model:?} param {p}[{j}]: {v} vs mean {mean}"
                    );
                }
            }
            // and it differs from the last iterate
            assert_ne!(avg, *iterates.last().unwrap());
        }
    }

    /// A run saved between any two epochs (through the checkpoint's bytes) and resumed ends
    /// exactly as the run that never stopped: the CM, the random-init AE-CM, and every phase of
    /// the pre-trained AE-CM (autoencoder, CM on the frozen embedding, joint, averaging, done),
    /// on the CPU.
    #[test]
    fn resumed_runs_end_exactly_as_uninterrupted_ones() {
        let go = AtomicBool::new(false);
        let pretrained = TrainConfig {
            epochs: 2,
            pretrain_epochs: 2,
            cm_pretrain_epochs: 2,
            eval_every: 2,
            seed: 3,
            ..tiny_aecm()
        }
        .check(90, 2)
        .unwrap();
        let sgd = TrainConfig {
            pretrain_sgd: Some([0.01, 0.9]),
            ..(*pretrained).clone()
        }
        .check(90, 2)
        .unwrap();
        let cases = [
            ("cm", cfg(ModelKind::Cm, 4, true)),
            ("aecm", cfg(ModelKind::Aecm, 4, true)),
            ("aecm pretrained", pretrained),
            ("aecm pretrained with the authors' SGD", sgd),
        ];
        let history = |r: &RunResult| -> Vec<(Vec<f64>, Option<Scores>, Option<f64>)> {
            r.history
                .iter()
                .map(|h| (h.terms.clone(), h.scores, h.lsp))
                .collect()
        };
        for (name, c) in cases {
            let straight = Trainer::new(c.clone(), blobs(), Device::flex(), "cpu")
                .unwrap()
                .run(&mut |_: &Event| {}, &go)
                .unwrap();
            let mut t = Trainer::new(c.clone(), blobs(), Device::flex(), "cpu").unwrap();
            let mut resumed = 0;
            let mut mid_epoch_refused = false;
            while !t.is_done() {
                t.step(&mut |_: &Event| {}).unwrap();
                if !t.at_epoch_boundary() {
                    mid_epoch_refused |= t.checkpoint().is_err();
                    continue;
                }
                let bytes = t.checkpoint().unwrap().to_bytes().unwrap();
                let ck = Checkpoint::from_bytes(&bytes).unwrap();
                assert_eq!(ck.epochs_done(), t.history().len(), "{name}");
                t = Trainer::resume(ck, c.clone(), blobs(), Device::flex(), "cpu").unwrap();
                resumed += 1;
            }
            assert!(mid_epoch_refused, "{name}: a checkpoint inside an epoch");
            let r = t.result(false);
            assert_eq!(resumed, straight.epochs, "{name}");
            assert_eq!(r.steps, straight.steps, "{name}");
            assert_eq!(history(&r), history(&straight), "{name}");
            assert_eq!(r.assignments, straight.assignments, "{name}");
            assert_eq!(r.centroids, straight.centroids, "{name}");
            assert_eq!(r.decoded_centroids, straight.decoded_centroids, "{name}");
            assert_eq!(r.lsp, straight.lsp, "{name}");
            assert_eq!(r.km_on_embedding, straight.km_on_embedding, "{name}");
        }
    }

    /// A checkpoint resumes only the run it belongs to: other settings (the evaluation's
    /// excepted) or other data are refused, naming what differs.
    #[test]
    fn resume_refuses_other_settings_and_data() {
        let c = cfg(ModelKind::Aecm, 3, true);
        let mut t = Trainer::new(c.clone(), blobs(), Device::flex(), "cpu").unwrap();
        while t.history().is_empty() {
            t.step(&mut |_: &Event| {}).unwrap();
        }
        let ck = t.checkpoint().unwrap();
        let with = |f: &dyn Fn(&mut TrainConfig)| {
            let mut tc = (*c).clone();
            f(&mut tc);
            tc.check(90, 2).unwrap()
        };
        let err = |c: CheckedConfig, ds: Dataset| {
            Trainer::resume(ck.clone(), c, ds, Device::flex(), "cpu")
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        let e = err(with(&|tc| tc.alpha = vec![5.0]), blobs());
        assert!(e.contains("alpha [2.0] (now [5.0])"), "{e}");
        let e = err(with(&|tc| tc.epochs = 9), blobs());
        assert!(e.contains("epochs 3 (now 9)"), "{e}");
        let mut other = blobs();
        other.x[0] += 1.0;
        let e = err(c.clone(), other);
        assert!(e.contains("trained on other data"), "{e}");
        // the evaluation's settings may change
        let ok = Trainer::resume(
            ck.clone(),
            with(&|tc| {
                tc.eval_every = 5;
                tc.eval_budget = 0.0;
            }),
            blobs(),
            Device::flex(),
            "cpu",
        );
        assert!(ok.is_ok());
    }

    #[test]
    fn same_seed_same_result_on_cpu() {
        let run = || {
            let t =
                Trainer::new(cfg(ModelKind::Cm, 3, true), blobs(), Device::flex(), "cpu").unwrap();
            t.run(&mut |_: &Event| {}, &AtomicBool::new(false)).unwrap()
        };
        let (r1, r2) = (run(), run());
        assert_eq!(r1.assignments, r2.assignments);
        assert_eq!(r1.centroids, r2.centroids);
        assert_eq!(
            r1.history
                .iter()
                .map(|h| h.terms.clone())
                .collect::<Vec<_>>(),
            r2.history
                .iter()
                .map(|h| h.terms.clone())
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn stop_flag_ends_after_the_current_step_and_keeps_results() {
        let t = Trainer::new(cfg(ModelKind::Cm, 50, true), blobs(), Device::flex(), "cpu").unwrap();
        let stop = AtomicBool::new(false);
        let mut n = 0;
        let r = t
            .run(
                &mut |e: &Event| {
                    if matches!(e, Event::Epoch(_)) {
                        n += 1;
                        if n == 2 {
                            stop.store(true, Ordering::SeqCst);
                        }
                    }
                },
                &stop,
            )
            .unwrap();
        assert!(r.interrupted);
        assert_eq!(r.epochs, 2);
        assert_eq!(r.assignments.len(), 90);
    }

    #[test]
    fn pretrained_aecm_runs_all_phases() {
        let c = TrainConfig {
            model: ModelKind::Aecm,
            clusters: 3,
            alpha: vec![2.0],
            batch: 32,
            epochs: 2,
            init: Init::Pretrained,
            pretrain_epochs: 2,
            cm_pretrain_epochs: 2,
            hidden: vec![8],
            embed: 2,
            restarts: 2,
            ..TrainConfig::default()
        }
        .check(90, 2)
        .unwrap();
        let t = Trainer::new(c, blobs(), Device::flex(), "cpu").unwrap();
        assert_eq!(t.total_epochs(), 7);
        let r = t.run(&mut |_: &Event| {}, &AtomicBool::new(false)).unwrap();
        let phases: Vec<&str> = r.history.iter().map(|h| h.phase.as_str()).collect();
        assert_eq!(phases, PRETRAINED_2X2_PHASES);
        assert!(r.km_on_embedding.is_some());
        // k-means' clusters on the embedding: one per sample, K of them at most
        assert_eq!(r.km_assignments.len(), 90);
        assert!(
            r.km_assignments
                .iter()
                .all(|&c| (c as usize) < r.centroids.rows)
        );
    }

    #[test]
    fn live_weight_changes_are_validated() {
        let mut t =
            Trainer::new(cfg(ModelKind::Cm, 1, true), blobs(), Device::flex(), "cpu").unwrap();
        assert!(t.set_weights(vec![-1.0], 1.0, 1.0).is_err());
        t.set_weights(vec![9.0], 1.0, 0.5).unwrap();
        assert_eq!(t.weights().alpha, vec![9.0]);
        assert!(t.set_lr(0.0).is_err());
    }
}
