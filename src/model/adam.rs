//! Adam with the TensorFlow/Keras epsilon placement the authors' code used:
//! `theta -= lr_t * m / (sqrt(v) + eps)`, `lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t)`
//! (epsilon added to the uncorrected second moment; burn's and PyTorch's Adam add it to the
//! bias-corrected one, which differs early in training when eps = 1e-3).

use burn::tensor::Tensor;

/// Adam state over a list of parameters.
pub struct Adam {
    /// Exponential decay of the first moment.
    pub beta1: f64,
    /// Exponential decay of the second moment.
    pub beta2: f64,
    /// Epsilon (1e-3 in the paper's runs).
    pub eps: f64,
    t: i32,
    m: Vec<Option<Tensor<2>>>,
    v: Vec<Option<Tensor<2>>>,
}

impl Adam {
    /// A fresh optimiser for `n` parameters.
    pub fn new(n: usize, eps: f64) -> Self {
        Self {
            beta1: 0.9,
            beta2: 0.999,
            eps,
            t: 0,
            m: vec![None; n],
            v: vec![None; n],
        }
    }

    /// Number of updates done.
    pub fn steps(&self) -> i32 {
        self.t
    }

    /// One update with learning rate `lr`; parameters whose gradient is `None` stay as they are.
    pub fn step(&mut self, lr: f64, params: &mut [Tensor<2>], grads: Vec<Option<Tensor<2>>>) {
        self.t += 1;
        let t = self.t;
        let lr_t = lr * (1.0 - self.beta2.powi(t)).sqrt() / (1.0 - self.beta1.powi(t));
        for (i, g) in grads.into_iter().enumerate() {
            let Some(g) = g else { continue };
            let m = match self.m[i].take() {
                Some(m) => m * self.beta1 + g.clone() * (1.0 - self.beta1),
                None => g.clone() * (1.0 - self.beta1),
            };
            let v = match self.v[i].take() {
                Some(v) => v * self.beta2 + g.square() * (1.0 - self.beta2),
                None => g.square() * (1.0 - self.beta2),
            };
            let upd = m.clone() / (v.clone().sqrt() + self.eps) * lr_t;
            params[i] = params[i].clone() - upd;
            self.m[i] = Some(m);
            self.v[i] = Some(v);
        }
    }
}
