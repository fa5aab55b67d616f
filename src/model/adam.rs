//! Adam with the TensorFlow/Keras epsilon placement the authors' code used:
//! `theta -= lr_t * m / (sqrt(v) + eps)`, `lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t)`
//! (epsilon added to the uncorrected second moment; burn's and PyTorch's Adam add it to the
//! bias-corrected one, which differs early in training when eps = 1e-3).
//!
//! [`Adam::with_sgd_momentum`] turns it into Keras' SGD with momentum (`velocity = momentum *
//! velocity - lr * g; theta += velocity`, velocity in the first moment's slot), the optimiser of
//! the authors' autoencoder pre-training.

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
    /// SGD with this momentum instead of Adam.
    sgd_momentum: Option<f64>,
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
            sgd_momentum: None,
        }
    }

    /// Keras' SGD with `momentum` (0: plain SGD) instead of Adam, for every update after this;
    /// `None` keeps Adam.
    pub fn with_sgd_momentum(mut self, momentum: Option<f64>) -> Self {
        self.sgd_momentum = momentum;
        self
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
        // SGD keeps only its velocity (in `m`); Adam both moments
        for (i, shape) in shapes.iter().enumerate().take(self.hm.len()) {
            let n = shape[0] * shape[1];
            let fit = |x: Option<&Vec<f32>>| x.filter(|x| x.len() == n).cloned();
            let tensor = |x: Vec<f32>| Tensor::<2>::from_data(TensorData::new(x, *shape), device);
            let (mi, vi) = (fit(m.get(i)), fit(v.get(i)));
            if self.host {
                self.hm[i] = mi.unwrap_or_default();
                self.hv[i] = vi.unwrap_or_default();
            } else {
                self.m[i] = mi.map(tensor);
                self.v[i] = vi.map(tensor);
            }
        }
        self
    }

    /// One update with learning rate `lr`; parameters whose gradient is `None` stay as they are.
    pub fn step(&mut self, lr: f64, params: &mut [Tensor<2>], grads: Vec<Option<Tensor<2>>>) {
        self.t += 1;
        let t = self.t;
        if let Some(mom) = self.sgd_momentum
            && !self.host
        {
            for (i, g) in grads.into_iter().enumerate() {
                let Some(g) = g else { continue };
                let v = match self.m[i].take() {
                    Some(v) => v * mom - g * lr,
                    None => g * (-lr),
                };
                params[i] = params[i].clone() + v.clone();
                self.m[i] = Some(v);
            }
            return;
        }
        let lr_t = match self.sgd_momentum {
            Some(_) => lr,
            None => lr * (1.0 - self.beta2.powi(t)).sqrt() / (1.0 - self.beta1.powi(t)),
        };
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
            if let Some(mom) = self.sgd_momentum {
                sgd(&mut p, &mut self.hm[i], &gv, mom as f32, lr);
                params[i] = Tensor::from_data(TensorData::new(p, shape), &device);
                continue;
            }
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
        if let Some(mom) = self.sgd_momentum {
            let (mom, lr) = (mom as f32, lr as f32);
            for (i, (p, g)) in params.iter_mut().zip(grads).enumerate() {
                if g.is_empty() || g.len() != p.len() {
                    continue;
                }
                sgd(p, &mut self.hm[i], g, mom, lr);
            }
            return;
        }
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

/// Keras' SGD update of one parameter with momentum `mom`: `v = mom v - lr g; p += v`; a
/// velocity not yet of the parameter's length (none so far) starts at zero.
fn sgd(p: &mut [f32], v: &mut Vec<f32>, g: &[f32], mom: f32, lr: f32) {
    if v.len() != g.len() {
        *v = vec![0.0; g.len()];
    }
    for ((p, v), &g) in p.iter_mut().zip(v.iter_mut()).zip(g) {
        *v = mom * *v - lr * g;
        *p += *v;
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

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};

    /// SGD with momentum is Keras': `v = m v - lr g; p += v`, on the host, on host-updated
    /// tensors and on device tensors alike, and its velocity survives `state`/`with_state`.
    #[test]
    fn sgd_momentum_is_keras_sgd_on_every_path() {
        let dev = Device::flex();
        let (lr, mom) = (0.1, 0.5);
        let g1 = [1.0f32, -2.0];
        let g2 = [0.5f32, 0.5];
        // by hand: v1 = -lr g1, p1 = p0 + v1; v2 = mom v1 - lr g2, p2 = p1 + v2
        let p0 = [1.0f32, 1.0];
        let v1: Vec<f32> = g1.iter().map(|g| -0.1 * g).collect();
        let p1: Vec<f32> = p0.iter().zip(&v1).map(|(p, v)| p + v).collect();
        let v2: Vec<f32> = v1.iter().zip(&g2).map(|(v, g)| 0.5 * v - 0.1 * g).collect();
        let p2: Vec<f32> = p1.iter().zip(&v2).map(|(p, v)| p + v).collect();
        let close = |a: &[f32], b: &[f32]| {
            assert!(
                a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6),
                "{a:?} vs {b:?}"
            )
        };
        // host vectors
        let mut o = Adam::new(1, 1e-3).with_sgd_momentum(Some(mom));
        let mut p = vec![p0.to_vec()];
        o.step_host(lr, &mut p, &[g1.to_vec()]);
        close(&p[0], &p1);
        o.step_host(lr, &mut p, &[g2.to_vec()]);
        close(&p[0], &p2);
        // tensors, updated on the host or as tensors, with a state round trip in between
        let t = |v: &[f32]| Tensor::<2>::from_data(TensorData::new(v.to_vec(), [1, 2]), &dev);
        let host = |x: &Tensor<2>| {
            x.clone()
                .into_data()
                .convert::<f32>()
                .try_to_vec::<f32>()
                .unwrap()
        };
        for on_host in [true, false] {
            let mut o = Adam::new(1, 1e-3)
                .with_host_update(on_host)
                .with_sgd_momentum(Some(mom));
            let mut p = vec![t(&p0)];
            o.step(lr, &mut p, vec![Some(t(&g1))]);
            close(&host(&p[0]), &p1);
            let st = o.state();
            close(&st.m[0], &v1);
            let mut o = Adam::new(1, 1e-3)
                .with_host_update(on_host)
                .with_sgd_momentum(Some(mom))
                .with_state(&st, &[[1, 2]], &dev);
            o.step(lr, &mut p, vec![Some(t(&g2))]);
            close(&host(&p[0]), &p2);
        }
    }
}
