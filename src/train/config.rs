//! Training configuration: what a user sets, validated once into a [`CheckedConfig`] so that
//! training itself never meets an invalid value.

use crate::error::{AecmError, Result};
use crate::model::LossWeights;
pub use crate::model::baselines::Seeding;
use serde::{Deserialize, Serialize};

/// The model to train.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// Clustering module on the input.
    Cm,
    /// Autoencoder with a clustering module on the embedding.
    Aecm,
    /// k-means (k-means++ seeding, restarts).
    Kmeans,
    /// Gaussian mixture, full covariance.
    Gmm,
    /// Isotropic Gaussian mixture with uniform weights.
    Igmm,
    /// Autoencoder alone, then k-means on the embedding.
    AeKm,
}

impl ModelKind {
    /// Name as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cm => "cm",
            Self::Aecm => "aecm",
            Self::Kmeans => "kmeans",
            Self::Gmm => "gmm",
            Self::Igmm => "igmm",
            Self::AeKm => "ae-km",
        }
    }

    /// Every model, for help texts and the GUI.
    pub const ALL: [ModelKind; 6] = [
        Self::Cm,
        Self::Aecm,
        Self::Kmeans,
        Self::Gmm,
        Self::Igmm,
        Self::AeKm,
    ];

    /// True for the models trained by gradient descent.
    pub fn is_neural(self) -> bool {
        matches!(self, Self::Cm | Self::Aecm | Self::AeKm)
    }
}

impl std::str::FromStr for ModelKind {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| {
                m.name() == s
                    || (s == "aekm" && *m == Self::AeKm)
                    || (s == "ae-cm" && *m == Self::Aecm)
            })
            .ok_or_else(|| format!("'{s}': expected one of cm, aecm, kmeans, gmm, igmm, ae-km"))
    }
}

/// Initialisation of the CM / AE-CM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Init {
    /// Glorot-uniform kernels and random biases.
    #[default]
    Random,
    /// CM: k-means++ plus one Lloyd step; AE-CM: pre-trained autoencoder, k-means, CM alone, then
    /// joint training (ALGORITHM.md section 2).
    Pretrained,
}

impl std::str::FromStr for Init {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "random" => Ok(Self::Random),
            "pretrained" | "pre" => Ok(Self::Pretrained),
            _ => Err(format!("'{s}': expected random or pretrained")),
        }
    }
}

/// Everything that defines a training run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// The model.
    pub model: ModelKind,
    /// Number of clusters K.
    pub clusters: usize,
    /// Dirichlet concentration: one value, or K values.
    pub alpha: Vec<f64>,
    /// Weight of the deep reconstruction (AE-CM).
    pub beta: f64,
    /// Weight of the orthonormality term (AE-CM).
    pub lambda: f64,
    /// Mini-batch size.
    pub batch: usize,
    /// Training epochs (before the averaging epoch).
    pub epochs: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Adam epsilon.
    pub adam_eps: f64,
    /// Adam epsilon of the autoencoder pre-training (Keras' default 1e-7: ALGORITHM.md fixes 1e-3
    /// for training CM and AE-CM, not for the plain DAE, which barely learns with 1e-3 on a
    /// mean-squared error).
    #[serde(default = "default_pretrain_eps")]
    pub pretrain_adam_eps: f64,
    /// The autoencoder pre-training with the authors' optimiser instead of Adam: SGD with
    /// `[learning rate, momentum]` on the per-sample mean squared error summed over the batch
    /// (their `AE.py`: `SGD(1e-2, 0.9)` for MNIST and USPS, `SGD(1e-3, 0.9)` for Pendigits);
    /// `None`: Adam (`pretrain_adam_eps`) on the batch's mean squared error. A probe of the
    /// pre-trained USPS gap (REPRODUCTION.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pretrain_sgd: Option<[f64; 2]>,
    /// Differentiate with burn's autodiff instead of the closed-form steps: the clustering
    /// module's gradients (`model::net::cm_loss_and_grads`) and, on the CPU backend, the
    /// autoencoder's host step (`model::dense`). Same values up to rounding, slower. (The name
    /// is kept for the stored configurations of earlier runs.)
    #[serde(default)]
    pub cm_autodiff: bool,
    /// Seed of initialisation and shuffling.
    pub seed: u64,
    /// Initialisation.
    pub init: Init,
    /// Encoder hidden widths (AE-CM, AE-KM).
    pub hidden: Vec<usize>,
    /// Embedding dimension p (AE-CM, AE-KM).
    pub embed: usize,
    /// AE-CM's encoder starts with the fixed quadratic feature map `(1, x_i, x_i x_j)` (the
    /// paper's two-circles encoder "2-quad-3"); the decoder still outputs `d` values.
    #[serde(default)]
    pub quadratic: bool,
    /// Which CM terms E1..E4 are in the loss (the ablation switches some off).
    pub cm_terms: [bool; 4],
    /// k-means / GMM restarts.
    pub restarts: usize,
    /// Seeding of the baselines (k-means, GMM, iGMM); stored configurations without it:
    /// k-means++.
    #[serde(default)]
    pub seeding: Seeding,
    /// Autoencoder pre-training epochs (AE-CM pretrained).
    pub pretrain_epochs: usize,
    /// Batch size of the autoencoder pre-training.
    pub pretrain_batch: usize,
    /// Epochs of CM-only training on the frozen embedding (AE-CM pretrained).
    pub cm_pretrain_epochs: usize,
    /// Keep the first encoder kernel at its random initial value during the autoencoder's
    /// pre-training, as the authors' code does (ALGORITHM.md section 2 calls it a bug; off by
    /// default: the faithful runs train every layer). It is trained again in the joint phase.
    #[serde(default)]
    pub freeze_first_kernel: bool,
    /// Alpha of the CM-only pre-training on the frozen embedding (AE-CM pretrained); `None`: the
    /// AE-CM's alpha (the faithful default; ALGORITHM.md does not give one). A probe of the
    /// pre-trained USPS gap (REPRODUCTION.md).
    #[serde(default)]
    pub cm_pretrain_alpha: Option<f64>,
    /// Batch of the CM-only pre-training; `None`: the AE-CM's batch.
    #[serde(default)]
    pub cm_pretrain_batch: Option<usize>,
    /// Evaluate metrics and L_sp every this many epochs (0: only at the end).
    pub eval_every: usize,
    /// When above 0, evaluations that cost more than [`EVAL_FREE_S`] are spaced (never closer
    /// than `eval_every`) so that they take at most this fraction of the time; 0: every
    /// `eval_every` epochs whatever they cost. Stored configurations without it: 0.
    #[serde(default)]
    pub eval_budget: f64,
    /// Run the averaging epoch at the end.
    pub averaging: bool,
    /// Emit a `Step` event for every mini-batch (for the live explorer).
    pub step_events: bool,
    /// Skip each epoch's last, partial batch (the paper's code and ALGORITHM.md keep it): a
    /// probe of the K sweep's divergences (REPRODUCTION.md), off by default. Stored
    /// configurations without it: off.
    #[serde(default)]
    pub drop_last: bool,
}

fn default_pretrain_eps() -> f64 {
    1e-7
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            model: ModelKind::Cm,
            clusters: 0,
            alpha: vec![1.0],
            beta: 1.0,
            lambda: 1.0,
            batch: 256,
            epochs: 150,
            lr: 1e-3,
            adam_eps: 1e-3,
            pretrain_adam_eps: 1e-7,
            pretrain_sgd: None,
            cm_autodiff: false,
            seed: 0,
            init: Init::Random,
            hidden: vec![500, 500, 2000],
            embed: 10,
            quadratic: false,
            cm_terms: [true; 4],
            restarts: 10,
            seeding: Seeding::KmeansPP,
            pretrain_epochs: 100,
            pretrain_batch: 256,
            cm_pretrain_epochs: 100,
            freeze_first_kernel: false,
            cm_pretrain_alpha: None,
            cm_pretrain_batch: None,
            eval_every: 1,
            eval_budget: 0.1,
            averaging: true,
            step_events: false,
            drop_last: false,
        }
    }
}

/// A configuration that passed [`TrainConfig::check`] against a data set's size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckedConfig(TrainConfig);

impl std::ops::Deref for CheckedConfig {
    type Target = TrainConfig;
    fn deref(&self) -> &TrainConfig {
        &self.0
    }
}

impl CheckedConfig {
    /// The loss weights of this configuration (alpha sorted ascending).
    pub fn weights(&self) -> LossWeights {
        let mut alpha = self.alpha.clone();
        alpha.sort_by(f64::total_cmp);
        LossWeights {
            alpha,
            beta: self.beta,
            lambda: self.lambda,
            cm_terms: self.cm_terms,
        }
    }
}

/// Checks one set of live-tunable weights (also used when the explorer changes them mid-run).
pub fn check_weights(alpha: &[f64], beta: f64, lambda: f64, k: usize) -> Result<()> {
    if alpha.is_empty() || !(alpha.len() == 1 || alpha.len() == k) {
        return Err(AecmError::config(
            "alpha",
            format!("give one value or K = {k} values, got {}", alpha.len()),
        ));
    }
    if alpha.iter().any(|a| !a.is_finite() || *a <= 0.0) {
        return Err(AecmError::config(
            "alpha",
            "every value must be a finite number > 0",
        ));
    }
    if !beta.is_finite() || beta < 0.0 {
        return Err(AecmError::config(
            "beta",
            format!("must be a finite number >= 0, got {beta}"),
        ));
    }
    if !lambda.is_finite() || lambda < 0.0 {
        return Err(AecmError::config(
            "lambda",
            format!("must be a finite number >= 0, got {lambda}"),
        ));
    }
    Ok(())
}

impl TrainConfig {
    /// Validates against a data set of `n` samples and `d` features.
    pub fn check(self, n: usize, d: usize) -> Result<CheckedConfig> {
        let c = &self;
        if c.clusters < 1 {
            return Err(AecmError::config(
                "clusters",
                "must be at least 1 (the data has no labels to count)",
            ));
        }
        if c.clusters > n {
            return Err(AecmError::config(
                "clusters",
                format!("K = {} exceeds the {n} samples", c.clusters),
            ));
        }
        check_weights(&c.alpha, c.beta, c.lambda, c.clusters)?;
        if c.batch < 1 {
            return Err(AecmError::config("batch", "must be at least 1"));
        }
        if !c.lr.is_finite() || c.lr <= 0.0 {
            return Err(AecmError::config(
                "lr",
                format!("must be a finite number > 0, got {}", c.lr),
            ));
        }
        if let Some([lr, mom]) = c.pretrain_sgd
            && !(lr.is_finite() && lr > 0.0 && (0.0..1.0).contains(&mom))
        {
            return Err(AecmError::config(
                "pretrain-sgd",
                format!("{lr},{mom}: expected LR,MOMENTUM with LR > 0 and 0 <= MOMENTUM < 1"),
            ));
        }
        if !c.pretrain_adam_eps.is_finite() || c.pretrain_adam_eps <= 0.0 {
            return Err(AecmError::config(
                "pretrain-adam-eps",
                "must be a finite number > 0",
            ));
        }
        if !c.adam_eps.is_finite() || c.adam_eps <= 0.0 {
            return Err(AecmError::config("adam-eps", "must be > 0"));
        }
        if matches!(c.model, ModelKind::Aecm | ModelKind::AeKm) {
            if c.embed < 1 {
                return Err(AecmError::config("embed", "must be at least 1"));
            }
            if c.hidden.contains(&0) {
                return Err(AecmError::config(
                    "hidden",
                    "layer widths must be at least 1",
                ));
            }
            if c.pretrain_batch < 1 {
                return Err(AecmError::config("pretrain-batch", "must be at least 1"));
            }
            if c.cm_pretrain_batch == Some(0) {
                return Err(AecmError::config("cm-pretrain-batch", "must be at least 1"));
            }
            if let Some(a) = c.cm_pretrain_alpha.filter(|a| !a.is_finite() || *a <= 0.0) {
                return Err(AecmError::config(
                    "cm-pretrain-alpha",
                    format!("must be a finite number above 0, got {a}"),
                ));
            }
        }
        if !c.cm_terms.iter().any(|t| *t) {
            return Err(AecmError::config(
                "cm-terms",
                "at least one of E1..E4 must be on",
            ));
        }
        if d == 0 {
            return Err(AecmError::config("data", "samples have no features"));
        }
        if c.restarts < 1 {
            return Err(AecmError::config("restarts", "must be at least 1"));
        }
        if !(0.0..1.0).contains(&c.eval_budget) {
            return Err(AecmError::config(
                "eval-budget",
                format!("{}: expected a fraction in [0, 1)", c.eval_budget),
            ));
        }
        Ok(CheckedConfig(self))
    }
}

/// An evaluation under this many seconds is always done (a budget spaces only costly ones).
pub const EVAL_FREE_S: f64 = 0.05;

/// Epochs from one evaluation to the next under a time budget: an evaluation of `eval_s`
/// seconds after epochs of `train_s` seconds (training alone) takes at most `budget` of the
/// time when `spacing` epochs pass between evaluations, `eval_s / (spacing train_s + eval_s) <=
/// budget`; never fewer than `every`. `budget` 0 (off) or a cheap evaluation: `every`.
pub fn eval_spacing(every: usize, budget: f64, train_s: f64, eval_s: f64) -> usize {
    let every = every.max(1);
    if budget <= 0.0 || eval_s < EVAL_FREE_S {
        return every;
    }
    let need = eval_s * (1.0 - budget) / (budget * train_s.max(1e-9));
    if !need.is_finite() {
        return every;
    }
    // `need` within rounding of a whole number of epochs counts as that number
    every.max((need - 1e-9).ceil().min(1e9) as usize)
}

/// Hyper-parameters of the paper's runs for one data set (ALGORITHM.md section 5).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Preset {
    /// Preset name.
    pub name: &'static str,
    /// Preprocessing the authors applied.
    pub preprocess: crate::data::Preprocess,
    /// CM alpha and batch.
    pub cm: (f64, usize),
    /// AE-CM embedding p, beta, alpha, batch.
    pub aecm: (usize, f64, f64, usize),
}

/// The published settings (lambda = 1 everywhere).
pub const PRESETS: [Preset; 8] = {
    use crate::data::Preprocess::{Max, None as Raw, Scale255};
    [
        Preset {
            name: "mnist",
            preprocess: Scale255,
            cm: (177.0, 111),
            aecm: (10, 5.0, 230.0, 500),
        },
        Preset {
            name: "fashion-mnist",
            preprocess: Scale255,
            cm: (80.0, 35),
            aecm: (10, 47.0, 13.0, 175),
        },
        Preset {
            name: "usps",
            preprocess: Max,
            cm: (40.0, 150),
            aecm: (30, 0.04, 3.0, 45),
        },
        Preset {
            name: "pendigits",
            preprocess: Max,
            cm: (13.0, 80),
            aecm: (70, 0.5, 13.0, 80),
        },
        Preset {
            name: "20news",
            preprocess: Raw,
            cm: (100.0, 600),
            aecm: (100, 232.0, 10.0, 300),
        },
        Preset {
            name: "r10k",
            preprocess: Raw,
            cm: (10.0, 400),
            aecm: (75, 2.3, 1.7, 250),
        },
        Preset {
            name: "10x73k",
            preprocess: Raw,
            cm: (1000.0, 500),
            aecm: (10, 15.0, 7.0, 40),
        },
        Preset {
            name: "cifar10",
            preprocess: Raw,
            cm: (164.0, 350),
            aecm: (10, 1.0, 64.0, 256),
        },
    ]
};

/// Looks a preset up by name.
pub fn preset(name: &str) -> Result<Preset> {
    PRESETS
        .iter()
        .copied()
        .find(|p| p.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
            AecmError::config(
                "preset",
                format!(
                    "unknown preset '{name}' (expected one of: {})",
                    names.join(", ")
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The budget spaces costly evaluations just enough, never below `every`, and leaves cheap
    /// ones and a zero budget alone.
    #[test]
    fn eval_spacing_keeps_the_share_under_the_budget() {
        // the AE-CM on MNIST: 3.3 s of evaluation after a 21 s epoch -> every second epoch
        assert_eq!(eval_spacing(1, 0.1, 21.0, 3.3), 2);
        assert_eq!(eval_spacing(3, 0.1, 21.0, 3.3), 3);
        assert_eq!(eval_spacing(1, 0.1, 1.0, 1.0), 9);
        assert_eq!(eval_spacing(1, 0.5, 1.0, 1.0), 1);
        assert_eq!(eval_spacing(1, 0.1, 0.27, 0.02), 1, "cheap: always");
        assert_eq!(eval_spacing(2, 0.0, 1.0, 100.0), 2, "no budget");
        assert_eq!(eval_spacing(0, 0.0, 1.0, 1.0), 1);
        for (train_s, eval_s) in [(21.0, 3.3), (0.3, 0.2), (5.0, 0.06), (0.0, 1.0)] {
            let s = eval_spacing(1, 0.1, train_s, eval_s);
            let share = eval_s / (s as f64 * train_s + eval_s);
            if train_s > 0.0 {
                assert!(share <= 0.1 + 1e-12, "{train_s} {eval_s}: {s} -> {share}");
                let closer = eval_s / ((s - 1) as f64 * train_s + eval_s);
                assert!(
                    s == 1 || closer > 0.1,
                    "{train_s} {eval_s}: {s} is not the least"
                );
            }
        }
    }

    #[test]
    fn eval_budget_must_be_a_fraction() {
        for bad in [-0.1, 1.0, f64::NAN] {
            let c = TrainConfig {
                clusters: 3,
                eval_budget: bad,
                ..TrainConfig::default()
            };
            let e = c.check(100, 2).unwrap_err().to_string();
            assert!(e.contains("eval-budget"), "{e}");
        }
    }
}
