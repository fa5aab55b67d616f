//! 2-D projections for the explorer: PCA with a fixed basis (so motion in the view is motion in
//! the data) and UMAP (umap-rs) on an exact k-nearest-neighbour graph computed with burn.

use crate::error::{AecmError, Result};
use crate::model::linalg::sym_eigen;
use crate::util::rng;
use burn::tensor::{Device, Tensor, TensorData};
use rand::seq::index::sample;
use std::sync::atomic::{AtomicBool, Ordering};

/// A fitted 2-component PCA: `coords = (x - mean) * components^T`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Pca {
    /// Input dimension.
    pub d: usize,
    /// Mean of the fitted data (`d`).
    pub mean: Vec<f32>,
    /// Two unit components, row-major (`2 x d`); the largest-magnitude entry of each is positive
    /// (scikit-learn's sign convention).
    pub components: Vec<f32>,
    /// Variance along each component (denominator n - 1, as scikit-learn).
    pub explained_variance: [f64; 2],
}

/// At most this many rows are used to fit the basis (a seeded random subset beyond it).
pub const PCA_FIT_ROWS: usize = 10_000;

impl Pca {
    /// Fits the two leading principal axes of `x` (`n x d`, row-major). The covariance is one
    /// matrix product on `device`; its top eigenvectors come from Jacobi (d <= 64) or from block
    /// power iteration with a Rayleigh-Ritz step (larger d).
    pub fn fit(x: &[f32], n: usize, d: usize, device: &Device, seed: u64) -> Result<Self> {
        if n < 2 || d == 0 || x.len() != n * d {
            return Err(AecmError::config(
                "projection",
                format!("PCA needs at least 2 samples and 1 feature (got {n} x {d})"),
            ));
        }
        let rows: Vec<usize> = if n > PCA_FIT_ROWS {
            let mut r = rng(seed, 40);
            let mut v = sample(&mut r, n, PCA_FIT_ROWS).into_vec();
            v.sort_unstable();
            v
        } else {
            (0..n).collect()
        };
        let m = rows.len();
        let mut sub = Vec::with_capacity(m * d);
        for &i in &rows {
            sub.extend_from_slice(&x[i * d..(i + 1) * d]);
        }
        let mut mean = vec![0f64; d];
        for r in sub.chunks_exact(d) {
            for (a, &b) in mean.iter_mut().zip(r) {
                *a += f64::from(b);
            }
        }
        let mean: Vec<f32> = mean.iter().map(|v| (v / m as f64) as f32).collect();
        for r in sub.chunks_exact_mut(d) {
            for (a, &b) in r.iter_mut().zip(&mean) {
                *a -= b;
            }
        }
        let xc = Tensor::<2>::from_data(TensorData::new(sub, [m, d]), device);
        let cov = xc.clone().transpose().matmul(xc) / (m as f64 - 1.0);
        let cov: Vec<f64> = cov
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .map_err(|e| AecmError::Backend(format!("{e:?}")))?
            .into_iter()
            .map(f64::from)
            .collect();
        let (vals, vecs) = top2_eigen(&cov, d, seed);
        let mut components = Vec::with_capacity(2 * d);
        for v in &vecs {
            let imax = v
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
                .map_or(0, |(i, _)| i);
            let s = if v.get(imax).copied().unwrap_or(0.0) < 0.0 {
                -1.0
            } else {
                1.0
            };
            components.extend(v.iter().map(|&c| (s * c) as f32));
        }
        Ok(Self {
            d,
            mean,
            components,
            explained_variance: vals,
        })
    }

    /// Projects `x` (`n x d`) onto the two components.
    pub fn project(&self, x: &[f32]) -> Vec<[f32; 2]> {
        let d = self.d;
        let (c0, c1) = self.components.split_at(d);
        x.chunks_exact(d)
            .map(|r| {
                let (mut a, mut b) = (0f32, 0f32);
                for j in 0..d {
                    let v = r[j] - self.mean[j];
                    a += v * c0[j];
                    b += v * c1[j];
                }
                [a, b]
            })
            .collect()
    }
}

/// The two leading eigenpairs of a symmetric `d x d` matrix (values descending).
fn top2_eigen(a: &[f64], d: usize, seed: u64) -> ([f64; 2], [Vec<f64>; 2]) {
    let pick = |vals: &[f64], vecs: &[f64], n: usize, lift: &dyn Fn(usize) -> Vec<f64>| {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&i, &j| vals[j].total_cmp(&vals[i]));
        let _ = vecs;
        let i0 = order.first().copied().unwrap_or(0);
        let i1 = order.get(1).copied().unwrap_or(i0);
        (
            [vals[i0], if n > 1 { vals[i1] } else { 0.0 }],
            [lift(i0), if n > 1 { lift(i1) } else { vec![0.0; d] }],
        )
    };
    if d <= 64 {
        let (vals, vecs) = sym_eigen(a, d);
        // eigenvectors are the columns of `vecs`
        let lift = |i: usize| (0..d).map(|r| vecs[r * d + i]).collect::<Vec<f64>>();
        return pick(&vals, &vecs, d, &lift);
    }
    // block power iteration: q (d x b), q <- orth(A q), then Rayleigh-Ritz on q^T A q
    let b = 8.min(d);
    let mut r = rng(seed, 41);
    let mut q: Vec<f64> = (0..d * b).map(|_| crate::util::normal(&mut r)).collect();
    orthonormalize(&mut q, d, b);
    let matmul = |q: &[f64]| {
        let mut out = vec![0f64; d * b];
        for i in 0..d {
            let row = &a[i * d..(i + 1) * d];
            for (k, &aik) in row.iter().enumerate() {
                if aik == 0.0 {
                    continue;
                }
                let qk = &q[k * b..(k + 1) * b];
                let o = &mut out[i * b..(i + 1) * b];
                for c in 0..b {
                    o[c] += aik * qk[c];
                }
            }
        }
        out
    };
    for _ in 0..60 {
        q = matmul(&q);
        orthonormalize(&mut q, d, b);
    }
    let aq = matmul(&q);
    let mut small = vec![0f64; b * b];
    for i in 0..b {
        for j in 0..b {
            small[i * b + j] = (0..d).map(|r| q[r * b + i] * aq[r * b + j]).sum();
        }
    }
    let (vals, vecs) = sym_eigen(&small, b);
    let lift = |i: usize| {
        (0..d)
            .map(|r| (0..b).map(|c| q[r * b + c] * vecs[c * b + i]).sum::<f64>())
            .collect::<Vec<f64>>()
    };
    pick(&vals, &vecs, b, &lift)
}

/// Modified Gram-Schmidt on the `b` columns of `q` (`d x b`, row-major).
fn orthonormalize(q: &mut [f64], d: usize, b: usize) {
    for c in 0..b {
        for p in 0..c {
            let dot: f64 = (0..d).map(|r| q[r * b + c] * q[r * b + p]).sum();
            for r in 0..d {
                q[r * b + c] -= dot * q[r * b + p];
            }
        }
        let norm = (0..d).map(|r| q[r * b + c].powi(2)).sum::<f64>().sqrt();
        if norm > 1e-300 {
            for r in 0..d {
                q[r * b + c] /= norm;
            }
        }
    }
}

/// Exact k nearest neighbours (Euclidean) of every row, the point itself first: squared
/// distances by chunked matrix products on `device`. Returns (indices `n x k`, distances `n x k`).
pub fn knn(
    x: &[f32],
    n: usize,
    d: usize,
    k: usize,
    device: &Device,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(f32),
) -> Result<(Vec<u32>, Vec<f32>)> {
    if k == 0 || k > n {
        return Err(AecmError::config(
            "neighbours",
            format!("need 1 <= k <= n (k {k}, n {n})"),
        ));
    }
    let all = Tensor::<2>::from_data(TensorData::new(x.to_vec(), [n, d]), device);
    let sq = all.clone().square().sum_dim(1); // n x 1
    let sq_t = sq.clone().transpose(); // 1 x n
    let mut idx_out = Vec::with_capacity(n * k);
    let mut dist_out = Vec::with_capacity(n * k);
    let chunk = (4_000_000 / n.max(1)).clamp(16, 2048);
    for s in (0..n).step_by(chunk) {
        if cancel.load(Ordering::Relaxed) {
            return Err(AecmError::config("umap", "cancelled"));
        }
        let len = chunk.min(n - s);
        let xb = all.clone().narrow(0, s, len);
        let d2 =
            sq.clone().narrow(0, s, len) + sq_t.clone() - xb.matmul(all.clone().transpose()) * 2.0;
        let (vals, idx) = d2.sort_with_indices(1);
        let vals: Vec<f32> = vals
            .narrow(1, 0, k)
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .map_err(|e| AecmError::Backend(format!("{e:?}")))?;
        let idx: Vec<i64> = idx
            .narrow(1, 0, k)
            .into_data()
            .convert::<i64>()
            .try_into_vec::<i64>()
            .map_err(|e| AecmError::Backend(format!("{e:?}")))?;
        for r in 0..len {
            let me = (s + r) as u32;
            let row_i = &idx[r * k..(r + 1) * k];
            let row_d = &vals[r * k..(r + 1) * k];
            // the point itself first (ties with duplicates may have put another index first)
            let mut pairs: Vec<(u32, f32)> = vec![(me, 0.0)];
            for (&i, &v) in row_i.iter().zip(row_d) {
                if i as u32 != me && pairs.len() < k {
                    pairs.push((i as u32, v.max(0.0).sqrt()));
                }
            }
            for (i, v) in pairs {
                idx_out.push(i);
                dist_out.push(v);
            }
        }
        progress((s + len) as f32 / n as f32);
    }
    Ok((idx_out, dist_out))
}

/// Settings of a UMAP run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UmapSettings {
    /// Neighbours of the kNN graph (umap-learn's default 15).
    pub neighbours: usize,
    /// Optimisation epochs (umap-learn: 500 below 10,000 points, else 200).
    pub epochs: usize,
    /// Seed of the initial layout.
    pub seed: u64,
}

impl Default for UmapSettings {
    fn default() -> Self {
        Self {
            neighbours: 15,
            epochs: 200,
            seed: 0,
        }
    }
}

/// UMAP embedding of `x` (`n x d`) into 2-D, initialised with the PCA projection (scaled to
/// [-10, 10] as umap-learn does with its spectral layout) plus a little seeded noise.
/// `progress` receives a fraction in [0, 1]; `cancel` stops it between epochs.
/// The graph comes from umap-rs; the layout optimisation is ours and seeded (reproducible).
pub fn umap(
    x: &[f32],
    n: usize,
    d: usize,
    settings: UmapSettings,
    device: &Device,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(f32),
) -> Result<Vec<[f32; 2]>> {
    if n < settings.neighbours.max(4) + 1 {
        return Err(AecmError::config(
            "umap",
            format!(
                "UMAP needs more than {} samples (got {n})",
                settings.neighbours.max(4)
            ),
        ));
    }
    if x.iter().any(|v| !v.is_finite()) {
        return Err(AecmError::config("umap", "the data has non-finite values"));
    }
    let k = settings.neighbours.clamp(2, n - 1);
    let (idx, dist) = knn(x, n, d, k, device, cancel, &mut |f| progress(0.3 * f))?;
    let pca = Pca::fit(x, n, d, device, settings.seed)?;
    let p = pca.project(x);
    let scale = p
        .iter()
        .flat_map(|v| v.iter())
        .fold(0f32, |m, v| m.max(v.abs()))
        .max(1e-12);
    let mut r = rng(settings.seed, 42);
    let init: Vec<f32> = p
        .iter()
        .flat_map(|v| v.iter().map(|c| c / scale * 10.0))
        .map(|c| c + 1e-4 * crate::util::normal(&mut r) as f32)
        .collect();
    let shape_err = |e: ndarray::ShapeError| AecmError::Backend(format!("umap input: {e}"));
    let data = ndarray::Array2::from_shape_vec((n, d), x.to_vec()).map_err(shape_err)?;
    let ki = ndarray::Array2::from_shape_vec((n, k), idx).map_err(shape_err)?;
    let kd = ndarray::Array2::from_shape_vec((n, k), dist).map_err(shape_err)?;
    let init = ndarray::Array2::from_shape_vec((n, 2), init).map_err(shape_err)?;
    let config = umap_rs::UmapConfig {
        n_components: 2,
        graph: umap_rs::GraphParams {
            n_neighbors: k,
            ..Default::default()
        },
        ..Default::default()
    };
    let model = umap_rs::Umap::new(config);
    let manifold = model.learn_manifold(data.view(), ki.view(), kd.view());
    progress(0.4);
    let (a, b) = manifold.curve_params();
    // edges of the fuzzy graph (umap-learn drops those too weak to be sampled once)
    let graph = manifold.graph();
    let mut head = Vec::new();
    let mut tail = Vec::new();
    let mut w = Vec::new();
    for (i, row) in graph.outer_iterator().enumerate() {
        for (j, &v) in row.iter() {
            head.push(i);
            tail.push(j);
            w.push(v);
        }
    }
    let epochs = settings.epochs.max(1);
    let wmax = w.iter().copied().fold(0f32, f32::max);
    let keep: Vec<usize> = (0..w.len())
        .filter(|&e| w[e] >= wmax / epochs as f32)
        .collect();
    let head: Vec<usize> = keep.iter().map(|&e| head[e]).collect();
    let tail: Vec<usize> = keep.iter().map(|&e| tail[e]).collect();
    let eps: Vec<f64> = keep
        .iter()
        .map(|&e| f64::from(wmax) / f64::from(w[e]))
        .collect();
    // umap-learn normalises the initial layout to [0, 10] per axis
    let mut y = init.into_raw_vec_and_offset().0;
    for c in 0..2 {
        let lo = (0..n).map(|i| y[2 * i + c]).fold(f32::INFINITY, f32::min);
        let hi = (0..n)
            .map(|i| y[2 * i + c])
            .fold(f32::NEG_INFINITY, f32::max);
        let span = (hi - lo).max(1e-12);
        for i in 0..n {
            y[2 * i + c] = 10.0 * (y[2 * i + c] - lo) / span;
        }
    }
    let mut layout = Layout {
        a,
        b,
        gamma: 1.0,
        neg_rate: 5.0,
        next: eps.clone(),
        neg_every: eps.iter().map(|e| e / 5.0).collect(),
        next_neg: eps.iter().map(|e| e / 5.0).collect(),
        eps,
        head,
        tail,
        rng: rng(settings.seed, 43),
    };
    for epoch in 0..epochs {
        if cancel.load(Ordering::Relaxed) {
            return Err(AecmError::config("umap", "cancelled"));
        }
        let alpha = 1.0 - epoch as f32 / epochs as f32;
        layout.epoch(&mut y, n, epoch, alpha);
        if epoch % 10 == 9 {
            progress(0.4 + 0.6 * (epoch + 1) as f32 / epochs as f32);
        }
    }
    Ok(y.chunks_exact(2).map(|p| [p[0], p[1]]).collect())
}

/// The layout optimisation of umap-learn (`optimize_layout_euclidean`, 2-D, head = tail
/// embedding, `move_other`), seeded. umap-rs 0.4.5 builds the fuzzy graph, but its optimiser has
/// an extra `* dist^2` in the denominators of both gradient coefficients (compare umap-learn's
/// `layouts.py`): well-separated blobs came out mixed (tested below), so the loop is ours.
struct Layout {
    a: f32,
    b: f32,
    gamma: f32,
    neg_rate: f64,
    eps: Vec<f64>,
    next: Vec<f64>,
    neg_every: Vec<f64>,
    next_neg: Vec<f64>,
    head: Vec<usize>,
    tail: Vec<usize>,
    rng: crate::util::SeededRng,
}

impl Layout {
    fn epoch(&mut self, y: &mut [f32], n: usize, epoch: usize, alpha: f32) {
        use rand::RngExt;
        let clip = |v: f32| v.clamp(-4.0, 4.0);
        let (a, b) = (self.a, self.b);
        let now = epoch as f64;
        for e in 0..self.eps.len() {
            if self.next[e] > now {
                continue;
            }
            let (j, k) = (self.head[e], self.tail[e]);
            let d0 = y[2 * j] - y[2 * k];
            let d1 = y[2 * j + 1] - y[2 * k + 1];
            let d2 = d0 * d0 + d1 * d1;
            if d2 > 0.0 {
                let gc = -2.0 * a * b * d2.powf(b - 1.0) / (a * d2.powf(b) + 1.0);
                let g0 = clip(gc * d0) * alpha;
                let g1 = clip(gc * d1) * alpha;
                y[2 * j] += g0;
                y[2 * j + 1] += g1;
                y[2 * k] -= g0;
                y[2 * k + 1] -= g1;
            }
            self.next[e] += self.eps[e];
            let n_neg = ((now - self.next_neg[e]) / self.neg_every[e]).max(0.0) as usize;
            for _ in 0..n_neg {
                let k = self.rng.random_range(0..n);
                if k == j {
                    continue;
                }
                let d0 = y[2 * j] - y[2 * k];
                let d1 = y[2 * j + 1] - y[2 * k + 1];
                let d2 = d0 * d0 + d1 * d1;
                // coincident points get no push (umap-learn 0.5)
                let (g0, g1) = if d2 > 0.0 {
                    let gc = 2.0 * self.gamma * b / ((0.001 + d2) * (a * d2.powf(b) + 1.0));
                    (clip(gc * d0), clip(gc * d1))
                } else {
                    (0.0, 0.0)
                };
                y[2 * j] += g0 * alpha;
                y[2 * j + 1] += g1 * alpha;
            }
            self.next_neg[e] += n_neg as f64 * self.neg_every[e];
        }
        let _ = self.neg_rate;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iris() -> (Vec<f32>, usize, usize) {
        let text = include_str!("../sample_data/iris/iris.csv");
        let mut x = Vec::new();
        let mut n = 0;
        for line in text.lines().skip(1) {
            let f: Vec<f32> = line
                .split(',')
                .take(4)
                .map(|v| v.parse().expect("number"))
                .collect();
            x.extend(f);
            n += 1;
        }
        (x, n, 4)
    }

    /// scikit-learn 1.5.2: `PCA(2).fit(load_iris().data)` gives components_
    /// [[0.36138659, -0.08452251, 0.85667061, 0.3582892], [0.65658877, 0.73016143, -0.17337266, -0.07548102]],
    /// explained_variance_ [4.22824171, 0.24267075] and the first row projected to [-2.68412563, 0.31939725].
    #[test]
    fn pca_matches_scikit_learn_on_iris() {
        let (x, n, d) = iris();
        let p = Pca::fit(&x, n, d, &Device::flex(), 0).expect("fit");
        let want = [
            0.36138659,
            -0.08452251,
            0.85667061,
            0.3582892,
            0.65658877,
            0.73016143,
            -0.17337266,
            -0.07548102,
        ];
        for (a, b) in p.components.iter().zip(want) {
            assert!((f64::from(*a) - b).abs() < 1e-4, "{:?}", p.components);
        }
        assert!((p.explained_variance[0] - 4.22824171).abs() < 1e-3);
        assert!((p.explained_variance[1] - 0.24267075).abs() < 1e-3);
        let c = p.project(&x[..4]);
        assert!((c[0][0] + 2.684_125_6).abs() < 1e-3 && (c[0][1] - 0.319_397_25).abs() < 1e-3);
    }

    /// The block power iteration (d > 64) agrees with Jacobi on a matrix with a known spectrum.
    #[test]
    fn pca_power_iteration_recovers_leading_axes() {
        // 3 strong directions in 100-d: axis 5 (var 9), axis 70 (var 4), axis 30 (var 1), noise 0.01
        let (n, d) = (2000, 100);
        let mut r = rng(7, 0);
        let mut x = vec![0f32; n * d];
        for i in 0..n {
            for j in 0..d {
                let s = match j {
                    5 => 3.0,
                    70 => 2.0,
                    30 => 1.0,
                    _ => 0.1,
                };
                x[i * d + j] = (s * crate::util::normal(&mut r)) as f32;
            }
        }
        let p = Pca::fit(&x, n, d, &Device::flex(), 1).expect("fit");
        assert!(
            p.components[5].abs() > 0.99,
            "first axis {}",
            p.components[5]
        );
        assert!(p.components[d + 70].abs() > 0.99, "second axis");
        assert!((p.explained_variance[0] - 9.0).abs() < 0.8);
        assert!((p.explained_variance[1] - 4.0).abs() < 0.4);
    }

    #[test]
    fn knn_puts_self_first_and_sorts() {
        let x = [0.0f32, 0.0, 1.0, 0.0, 3.0, 0.0, 3.5, 0.0];
        let (i, dd) = knn(
            &x,
            4,
            2,
            3,
            &Device::flex(),
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .expect("knn");
        assert_eq!(&i[0..3], &[0, 1, 2]);
        assert_eq!(&i[9..12], &[3, 2, 1]);
        assert!((dd[1] - 1.0).abs() < 1e-5 && (dd[10] - 0.5).abs() < 1e-5);
    }

    #[test]
    fn umap_separates_two_blobs() {
        let (n, d) = (600, 5);
        let mut r = rng(3, 0);
        let mut x = Vec::with_capacity(n * d);
        for i in 0..n {
            let c = if i < n / 2 { 0.0 } else { 20.0 };
            for _ in 0..d {
                x.push((c + crate::util::normal(&mut r)) as f32);
            }
        }
        let s = UmapSettings {
            neighbours: 10,
            epochs: 200,
            seed: 0,
        };
        let e = umap(
            &x,
            n,
            d,
            s,
            &Device::flex(),
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .expect("umap");
        let mean = |a: &[[f32; 2]]| {
            let m = a.iter().fold([0f32; 2], |m, p| [m[0] + p[0], m[1] + p[1]]);
            [m[0] / a.len() as f32, m[1] / a.len() as f32]
        };
        let (m0, m1) = (mean(&e[..n / 2]), mean(&e[n / 2..]));
        let dist2 = |p: &[f32; 2], m: [f32; 2]| (p[0] - m[0]).powi(2) + (p[1] - m[1]).powi(2);
        // the two blobs stay apart: each point is nearer its own blob's mean
        let right = e
            .iter()
            .enumerate()
            .filter(|(i, p)| (dist2(p, m0) < dist2(p, m1)) == (*i < n / 2))
            .count();
        assert!(
            right as f64 >= 0.99 * n as f64,
            "{right} of {n} on their side"
        );
        // seeded: the same layout twice
        let e2 = umap(
            &x,
            n,
            d,
            s,
            &Device::flex(),
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .expect("umap");
        assert_eq!(e, e2);
    }
}
