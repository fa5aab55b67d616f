//! Adam with the TensorFlow/Keras epsilon placement the authors' code used:
//! `theta -= lr_t * m / (sqrt(v) + eps)`, `lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t)`
//! (epsilon added to the uncorrected second moment; burn's and PyTorch's Adam add it to the
//! bias-corrected one, which differs early in training when eps = 1e-3).

use burn::tensor::Tensor;

/// Adam's update count and moments as host vectors in parameter order (an empty vector: a
/// parameter not updated yet), what a checkpoint keeps; the CPU, tensor and GPU optimisers
/// read and restore it alike.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdamState {
    /// Updates done.
    pub t: i32,
    /// First moments.
    pub m: Vec<Vec<f32>>,
    /// Second moments.
    pub v: Vec<Vec<f32>>,
}

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
    /// Update on the host in one fused pass (CPU backend: tensors already live in host memory).
    host: bool,
    hm: Vec<Vec<f32>>,
    hv: Vec<Vec<f32>>,
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
            host: false,
            hm: vec![Vec::new(); n],
            hv: vec![Vec::new(); n],
        }
    }

    /// Fused host update (for the CPU backend): each parameter's update becomes one pass over
    /// host memory, split over the CPU threads, instead of about ten tensor operations. The
    /// arithmetic is the same, in the same order, in f32.
    pub fn with_host_update(mut self, on: bool) -> Self {
        self.host = on;
        self
    }

    /// Number of updates done.
    pub fn steps(&self) -> i32 {
        self.t
    }

    /// The update count and both moments.
    pub fn state(&self) -> AdamState {
        if self.host {
            return AdamState {
                t: self.t,
                m: self.hm.clone(),
                v: self.hv.clone(),
            };
        }
        let host = |m: &[Option<Tensor<2>>]| -> Vec<Vec<f32>> {
            m.iter()
                .map(|t| {
                    t.as_ref().map_or_else(Vec::new, |t| {
                        t.clone()
                            .into_data()
                            .convert::<f32>()
                            .try_into_vec::<f32>()
                            .unwrap_or_default()
                    })
                })
                .collect()
        };
        AdamState {
            t: self.t,
            m: host(&self.m),
            v: host(&self.v),
        }
    }

    /// Restores [`Self::state`] (moments of the parameters' `shapes`; empty or missing: not
    /// updated yet), on `device` when the update is not on the host.
    pub fn with_state(
        mut self,
        state: &AdamState,
        shapes: &[[usize; 2]],
        device: &burn::tensor::Device,
    ) -> Self {
        use burn::tensor::TensorData;
        let (m, v) = (&state.m, &state.v);
        self.t = state.t;
        for (i, shape) in shapes.iter().enumerate() {
            let (mi, vi) = match (m.get(i), v.get(i)) {
                (Some(a), Some(b)) if !a.is_empty() && a.len() == b.len() => (a, b),
                _ => continue,
            };
            if i >= self.hm.len() {
                break;
            }
            if self.host {
                self.hm[i].clone_from(mi);
                self.hv[i].clone_from(vi);
            } else {
                let tensor = |x: &Vec<f32>| {
                    Tensor::<2>::from_data(TensorData::new(x.clone(), *shape), device)
                };
                self.m[i] = Some(tensor(mi));
                self.v[i] = Some(tensor(vi));
            }
        }
        self
    }

    /// One update with learning rate `lr`; parameters whose gradient is `None` stay as they are.
    pub fn step(&mut self, lr: f64, params: &mut [Tensor<2>], grads: Vec<Option<Tensor<2>>>) {
        self.t += 1;
        let t = self.t;
        let lr_t = lr * (1.0 - self.beta2.powi(t)).sqrt() / (1.0 - self.beta1.powi(t));
        if self.host {
            self.host_step(lr_t, params, grads);
            return;
        }
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

    fn host_step(&mut self, lr_t: f64, params: &mut [Tensor<2>], grads: Vec<Option<Tensor<2>>>) {
        use burn::tensor::TensorData;
        let (b1, b2) = (self.beta1 as f32, self.beta2 as f32);
        let (c1, c2) = ((1.0 - self.beta1) as f32, (1.0 - self.beta2) as f32);
        let (eps, lr) = (self.eps as f32, lr_t as f32);
        for (i, g) in grads.into_iter().enumerate() {
            let Some(g) = g else { continue };
            let shape = params[i].dims();
            let device = params[i].device();
            let to_vec = |t: Tensor<2>| {
                t.into_data()
                    .convert::<f32>()
                    .try_into_vec::<f32>()
                    .unwrap_or_default()
            };
            let gv = to_vec(g);
            let mut p = to_vec(params[i].clone());
            if self.hm[i].is_empty() {
                self.hm[i] = vec![0.0; gv.len()];
                self.hv[i] = vec![0.0; gv.len()];
            }
            fused(
                &mut p,
                &mut self.hm[i],
                &mut self.hv[i],
                &gv,
                [b1, b2, c1, c2, eps, lr],
            );
            params[i] = Tensor::from_data(TensorData::new(p, shape), &device);
        }
    }

    /// One update of parameters that live on the host (the AE-CM's host step,
    /// [`super::dense`]): the same arithmetic as [`Self::step`]'s fused update, in place;
    /// parameters with an empty gradient stay as they are.
    pub fn step_host(&mut self, lr: f64, params: &mut [Vec<f32>], grads: &[Vec<f32>]) {
        self.t += 1;
        let t = self.t;
        let lr_t = lr * (1.0 - self.beta2.powi(t)).sqrt() / (1.0 - self.beta1.powi(t));
        let k = [
            self.beta1 as f32,
            self.beta2 as f32,
            (1.0 - self.beta1) as f32,
            (1.0 - self.beta2) as f32,
            self.eps as f32,
            lr_t as f32,
        ];
        for (i, (p, g)) in params.iter_mut().zip(grads).enumerate() {
            if g.is_empty() || g.len() != p.len() {
                continue;
            }
            if self.hm[i].len() != g.len() {
                self.hm[i] = vec![0.0; g.len()];
                self.hv[i] = vec![0.0; g.len()];
            }
            fused(p, &mut self.hm[i], &mut self.hv[i], g, k);
        }
    }
}

/// The fused Adam update of one parameter over the CPU threads; `k` = `[beta1, beta2, 1 -
/// beta1, 1 - beta2, eps, lr_t]`.
fn fused(p: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32], k: [f32; 6]) {
    use rayon::prelude::*;
    let [b1, b2, c1, c2, eps, lr] = k;
    const CHUNK: usize = 16_384;
    p.par_chunks_mut(CHUNK)
        .zip(m.par_chunks_mut(CHUNK))
        .zip(v.par_chunks_mut(CHUNK))
        .zip(g.par_chunks(CHUNK))
        .for_each(|(((p, m), v), g)| {
            // the first step starts from m = v = 0, which gives exactly m = g (1 - b1),
            // v = g^2 (1 - b2); no branch in the loop, so the compiler vectorises it
            for (((p, m), v), &g) in p.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(g) {
                let mj = *m * b1 + g * c1;
                let vj = *v * b2 + g * g * c2;
                *p -= mj / (vj.sqrt() + eps) * lr;
                *m = mj;
                *v = vj;
            }
        });
}
