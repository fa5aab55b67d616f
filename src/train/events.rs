//! Plain-data events and results that leave the trainer (no tensors): the explorer and the CLI
//! read only these.

use crate::metrics::Scores;
use crate::model::HostMat;
use serde::{Deserialize, Serialize};

/// One epoch's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// 1-based epoch count over the whole schedule.
    pub epoch: usize,
    /// Phase the epoch belonged to.
    pub phase: String,
    /// Mini-batch updates done by the end of the epoch.
    pub steps: usize,
    /// Mean over the epoch's mini-batches of each loss term (as it enters the loss).
    pub terms: Vec<f64>,
    /// Sum of `terms`.
    pub loss: f64,
    /// Metrics on the whole data set, when labels exist and this epoch was evaluated.
    pub scores: Option<Scores>,
    /// L_sp = E2 + E3 on the whole data set, when evaluated.
    pub lsp: Option<f64>,
    /// Samples per (cluster, class) on the whole data set
    /// ([`crate::metrics::cluster_class_counts`]), when labels exist and this epoch was
    /// evaluated: which classes the clustering merged, split or mixed at that point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<Vec<Vec<u64>>>,
    /// Wall time of the epoch (training and evaluation).
    pub seconds: f64,
    /// Part of `seconds` spent evaluating (metrics and L_sp on the whole data set).
    #[serde(default)]
    pub eval_seconds: f64,
}

/// Something that happened during training.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A phase began (`epochs` epochs long).
    Phase {
        /// Phase name.
        phase: String,
        /// Its length in epochs.
        epochs: usize,
    },
    /// A mini-batch update (only with `step_events`).
    Step {
        /// 0-based step index.
        step: usize,
        /// Epochs completed before this step.
        epoch: usize,
        /// Phase name.
        phase: String,
        /// The batch's loss terms.
        terms: Vec<f32>,
    },
    /// An epoch ended.
    Epoch(EpochRecord),
    /// The run ended (or was stopped).
    Done {
        /// True when stopped before the end of the schedule.
        interrupted: bool,
    },
}

/// Receives events.
pub trait EventSink {
    /// Called for each event, on the training thread.
    fn event(&mut self, e: &Event);
}

impl<F: FnMut(&Event)> EventSink for F {
    fn event(&mut self, e: &Event) {
        self(e)
    }
}

/// What a run produced.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// Model name.
    pub model: String,
    /// Seed.
    pub seed: u64,
    /// Device description.
    pub device: String,
    /// Cluster of each sample, in input order.
    #[serde(skip)]
    pub assignments: Vec<u32>,
    /// Metrics, when labels exist.
    pub scores: Option<Scores>,
    /// L_sp on the whole data set (CM, AE-CM).
    pub lsp: Option<f64>,
    /// Centroids (embedding space for AE-CM), `K x p`.
    #[serde(skip)]
    pub centroids: HostMat,
    /// Centroids decoded to input space (AE-CM, AE-KM).
    #[serde(skip)]
    pub decoded_centroids: Option<HostMat>,
    /// AE-CM+KM: metrics of k-means on the learned embedding.
    pub km_on_embedding: Option<Scores>,
    /// AE-CM+KM: the k-means cluster of each sample, in input order (empty otherwise).
    #[serde(skip)]
    pub km_assignments: Vec<u32>,
    /// Per-epoch history.
    pub history: Vec<EpochRecord>,
    /// Mini-batch updates done.
    pub steps: usize,
    /// Epochs done.
    pub epochs: usize,
    /// True when stopped early.
    pub interrupted: bool,
    /// Wall time of the run in seconds.
    pub wall_s: f64,
}
