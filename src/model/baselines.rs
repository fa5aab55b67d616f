//! Classical baselines on burn tensors: k-means (k-means++ seeding, Lloyd, restarts), the
//! isotropic GMM with uniform weights (iGMM) and the full-covariance GMM, all fitted by EM.
//! Distances and covariance products run on the chosen device; K x K and d x d algebra on the host.

use super::linalg::{cholesky, lower_inverse};
use super::net::HostMat;
use crate::util::SeededRng;
use burn::tensor::activation::softmax;
use burn::tensor::{Device, Tensor, TensorData};
use rand::RngExt;

/// Data resident on a device, with the host copy and squared row norms.
pub struct DeviceData<'a> {
    /// `N x d` on the device.
    pub x: Tensor<2>,
    /// Squared row norms, `N x 1`.
    pub xsq: Tensor<2>,
    /// Host copy, row-major.
    pub host: &'a [f32],
    /// Samples.
    pub n: usize,
    /// Features.
    pub d: usize,
}

impl<'a> DeviceData<'a> {
    /// Uploads `host` (`n x d`).
    pub fn new(host: &'a [f32], n: usize, d: usize, device: &Device) -> Self {
        let x = Tensor::<2>::from_data(TensorData::new(host.to_vec(), [n, d]), device);
        let xsq = x.clone().square().sum_dim(1);
        Self { x, xsq, host, n, d }
    }

    /// Squared distances to the rows of `c` (`K x d`): `N x K` tensor.
    pub fn sq_dists(&self, c: &HostMat) -> Tensor<2> {
        let ct = c.to_tensor(&self.x.device());
        let csq = ct.clone().square().sum_dim(1).transpose(); // 1 x K
        (self.xsq.clone() - self.x.clone().matmul(ct.transpose()) * 2.0 + csq).clamp_min(0.0)
    }
}

fn to_vec_f32(t: Tensor<2>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap_or_default()
}

fn to_vec_u32(t: Tensor<2, burn::tensor::Int>) -> Vec<u32> {
    t.into_data()
        .convert::<i64>()
        .try_into_vec::<i64>()
        .unwrap_or_default()
        .into_iter()
        .map(|v| v as u32)
        .collect()
}

/// Nearest centre and squared distance for every sample.
pub fn assign(data: &DeviceData, c: &HostMat) -> (Vec<u32>, Vec<f32>) {
    let (mind, idx) = data.sq_dists(c).min_dim_with_indices(1);
    (to_vec_u32(idx), to_vec_f32(mind))
}

/// k-means++ seeding (D^2 sampling).
pub fn kmeanspp(data: &DeviceData, k: usize, rng: &mut SeededRng) -> HostMat {
    let (n, d) = (data.n, data.d);
    let mut centres = Vec::with_capacity(k * d);
    let first = rng.random_range(0..n);
    centres.extend_from_slice(&data.host[first * d..(first + 1) * d]);
    let mut best = {
        let c = HostMat {
            rows: 1,
            cols: d,
            data: centres.clone(),
        };
        to_vec_f32(data.sq_dists(&c))
    };
    for _ in 1..k {
        let total: f64 = best.iter().map(|&v| f64::from(v)).sum();
        let pick = if total > 0.0 {
            let mut t = rng.random::<f64>() * total;
            let mut i = 0;
            while i + 1 < n {
                t -= f64::from(best[i]);
                if t <= 0.0 {
                    break;
                }
                i += 1;
            }
            i
        } else {
            rng.random_range(0..n)
        };
        let row = &data.host[pick * d..(pick + 1) * d];
        centres.extend_from_slice(row);
        let c = HostMat {
            rows: 1,
            cols: d,
            data: row.to_vec(),
        };
        let dn = to_vec_f32(data.sq_dists(&c));
        for (b, v) in best.iter_mut().zip(dn) {
            *b = b.min(v);
        }
    }
    HostMat {
        rows: k,
        cols: d,
        data: centres,
    }
}

/// Means of the samples of each cluster; an empty cluster takes the sample farthest from its
/// centre (as scikit-learn relocates empty clusters).
fn update_centres(data: &DeviceData, labels: &[u32], dist: &[f32], k: usize) -> HostMat {
    let d = data.d;
    let mut sums = vec![0f64; k * d];
    let mut counts = vec![0usize; k];
    for (i, &l) in labels.iter().enumerate() {
        let l = l as usize;
        counts[l] += 1;
        for (s, &v) in sums[l * d..(l + 1) * d]
            .iter_mut()
            .zip(&data.host[i * d..(i + 1) * d])
        {
            *s += f64::from(v);
        }
    }
    let mut order: Vec<usize> = (0..data.n).collect();
    order.sort_by(|&a, &b| dist[b].total_cmp(&dist[a]));
    let mut far = order.into_iter();
    let mut out = vec![0f32; k * d];
    for c in 0..k {
        if counts[c] > 0 {
            for j in 0..d {
                out[c * d + j] = (sums[c * d + j] / counts[c] as f64) as f32;
            }
        } else if let Some(i) = far.next() {
            out[c * d..(c + 1) * d].copy_from_slice(&data.host[i * d..(i + 1) * d]);
        }
    }
    HostMat {
        rows: k,
        cols: d,
        data: out,
    }
}

/// One Lloyd iteration from `c`: (new centres, labels of the assignment step).
pub fn lloyd_step(data: &DeviceData, c: &HostMat) -> (HostMat, Vec<u32>, f64) {
    let (labels, dist) = assign(data, c);
    let inertia = dist.iter().map(|&v| f64::from(v)).sum();
    (
        update_centres(data, &labels, &dist, c.rows),
        labels,
        inertia,
    )
}

/// A fitted partition.
#[derive(Debug, Clone)]
pub struct Partition {
    /// Cluster per sample.
    pub labels: Vec<u32>,
    /// Centres / means, `K x d`.
    pub centres: HostMat,
    /// Objective (k-means: inertia; GMM: negative mean log-likelihood).
    pub objective: f64,
}

fn mean_variance(data: &DeviceData) -> f64 {
    let (n, d) = (data.n, data.d);
    let mut tot = 0.0;
    for j in 0..d {
        let m: f64 = (0..n).map(|i| f64::from(data.host[i * d + j])).sum::<f64>() / n as f64;
        tot += (0..n)
            .map(|i| (f64::from(data.host[i * d + j]) - m).powi(2))
            .sum::<f64>()
            / n as f64;
    }
    tot / d as f64
}

/// k-means: `restarts` k-means++ seedings, each refined by Lloyd iterations until the centre
/// shift falls under `1e-4 x` the mean feature variance (scikit-learn's tolerance) or 300
/// iterations; the run with the lowest inertia wins.
pub fn kmeans(data: &DeviceData, k: usize, restarts: usize, rng: &mut SeededRng) -> Partition {
    let tol = 1e-4 * mean_variance(data);
    let mut best: Option<Partition> = None;
    for _ in 0..restarts.max(1) {
        let mut c = kmeanspp(data, k, rng);
        for _ in 0..300 {
            let (next, _, _) = lloyd_step(data, &c);
            let shift: f64 = next
                .data
                .iter()
                .zip(&c.data)
                .map(|(a, b)| f64::from(a - b).powi(2))
                .sum();
            c = next;
            if shift <= tol {
                break;
            }
        }
        let (labels, dist) = assign(data, &c);
        let inertia: f64 = dist.iter().map(|&v| f64::from(v)).sum();
        if best.as_ref().is_none_or(|b| inertia < b.objective) {
            best = Some(Partition {
                labels,
                centres: c,
                objective: inertia,
            });
        }
    }
    best.unwrap_or(Partition {
        labels: vec![0; data.n],
        centres: HostMat {
            rows: 0,
            cols: data.d,
            data: vec![],
        },
        objective: f64::INFINITY,
    })
}

/// Isotropic GMM with uniform weights and one variance per component, fitted by EM from a
/// k-means++ seeding (best of `restarts` by log-likelihood).
pub fn igmm(data: &DeviceData, k: usize, restarts: usize, rng: &mut SeededRng) -> Partition {
    let (n, d) = (data.n, data.d);
    let dev = data.x.device();
    let mut best: Option<Partition> = None;
    for _ in 0..restarts.max(1) {
        let mut c = kmeanspp(data, k, rng);
        let (_, dist) = assign(data, &c);
        let v0 = (dist.iter().map(|&v| f64::from(v)).sum::<f64>() / (n * d) as f64).max(1e-6);
        let mut var = vec![v0; k];
        let mut last = f64::NEG_INFINITY;
        let mut ll = last;
        for _ in 0..200 {
            let dist = data.sq_dists(&c); // N x K
            let inv: Vec<f32> = var.iter().map(|v| (-0.5 / v) as f32).collect();
            let logdet: Vec<f32> = var
                .iter()
                .map(|v| {
                    (-0.5 * d as f64 * (2.0 * std::f64::consts::PI * v).ln() - (k as f64).ln())
                        as f32
                })
                .collect();
            let inv_t = Tensor::<2>::from_data(TensorData::new(inv, [1, k]), &dev);
            let ld_t = Tensor::<2>::from_data(TensorData::new(logdet, [1, k]), &dev);
            let logp = dist.clone() * inv_t + ld_t; // N x K
            let lse = logp.clone().max_dim(1);
            let lse = lse.clone() + (logp.clone() - lse).exp().sum_dim(1).log();
            ll = to_vec_f32(lse.sum().reshape([1, 1]))[0] as f64 / n as f64;
            let r = softmax(logp, 1); // N x K
            let nk = r.clone().sum_dim(0); // 1 x K
            let means = r.clone().transpose().matmul(data.x.clone())
                / nk.clone().transpose().clamp_min(1e-10);
            let nk_h = to_vec_f32(nk);
            c = HostMat::from_tensor(&means);
            let newd = data.sq_dists(&c);
            let sv = to_vec_f32((r * newd).sum_dim(0));
            for j in 0..k {
                var[j] = (f64::from(sv[j]) / (d as f64 * f64::from(nk_h[j]).max(1e-10))).max(1e-6);
            }
            if (ll - last).abs() < 1e-3 {
                break;
            }
            last = ll;
        }
        if best.as_ref().is_none_or(|b| -ll < b.objective) {
            let dist = data.sq_dists(&c);
            let inv: Vec<f32> = var.iter().map(|v| (-0.5 / v) as f32).collect();
            let logdet: Vec<f32> = var
                .iter()
                .map(|v| (-0.5 * d as f64 * v.ln()) as f32)
                .collect();
            let logp = dist * Tensor::<2>::from_data(TensorData::new(inv, [1, k]), &dev)
                + Tensor::<2>::from_data(TensorData::new(logdet, [1, k]), &dev);
            let labels = to_vec_u32(logp.argmax(1));
            best = Some(Partition {
                labels,
                centres: c,
                objective: -ll,
            });
        }
    }
    best.unwrap_or(Partition {
        labels: vec![0; n],
        centres: HostMat {
            rows: 0,
            cols: d,
            data: vec![],
        },
        objective: f64::INFINITY,
    })
}

/// Full-covariance GMM fitted by EM (regularisation 1e-6 on the diagonal, as scikit-learn),
/// initialised from k-means (`restarts` k-means++ seedings); at most 100 EM iterations, stopping
/// when the mean log-likelihood changes by less than 1e-3.
pub fn gmm(data: &DeviceData, k: usize, restarts: usize, rng: &mut SeededRng) -> Partition {
    let (n, d) = (data.n, data.d);
    let dev = data.x.device();
    let km = kmeans(data, k, restarts, rng);
    // responsibilities from the k-means labels
    let mut onehot = vec![0f32; n * k];
    for (i, &l) in km.labels.iter().enumerate() {
        onehot[i * k + l as usize] = 1.0;
    }
    let mut r = Tensor::<2>::from_data(TensorData::new(onehot, [n, k]), &dev);
    let mut last = f64::NEG_INFINITY;
    let mut means = km.centres.clone();
    let mut ll = last;
    for _ in 0..100 {
        // M-step
        let nk = r.clone().sum_dim(0); // 1 x K
        let nk_h: Vec<f64> = to_vec_f32(nk.clone())
            .into_iter()
            .map(|v| f64::from(v).max(1e-10))
            .collect();
        let mt = r.clone().transpose().matmul(data.x.clone()) / nk.transpose().clamp_min(1e-10);
        means = HostMat::from_tensor(&mt);
        let mut cols = Vec::with_capacity(k);
        for (c, &nk_c) in nk_h.iter().enumerate() {
            let mu = Tensor::<2>::from_data(
                TensorData::new(means.data[c * d..(c + 1) * d].to_vec(), [1, d]),
                &dev,
            );
            let diff = data.x.clone() - mu; // N x d
            let rc = r.clone().slice([0..n, c..c + 1]); // N x 1
            let cov = (diff.clone() * rc).transpose().matmul(diff.clone()); // d x d
            let mut cov: Vec<f64> = to_vec_f32(cov)
                .into_iter()
                .map(|v| f64::from(v) / nk_c)
                .collect();
            for j in 0..d {
                cov[j * d + j] += 1e-6;
            }
            let l = cholesky(&cov, d).unwrap_or_else(|| {
                let mut id = vec![0.0; d * d];
                for j in 0..d {
                    id[j * d + j] = 1.0;
                }
                id
            });
            let logdet: f64 = (0..d).map(|j| l[j * d + j].ln()).sum::<f64>() * 2.0;
            let linv_t: Vec<f32> = {
                let li = lower_inverse(&l, d);
                let mut t = vec![0f32; d * d];
                for i in 0..d {
                    for j in 0..d {
                        t[j * d + i] = li[i * d + j] as f32;
                    }
                }
                t
            };
            let y = diff.matmul(Tensor::<2>::from_data(
                TensorData::new(linv_t, [d, d]),
                &dev,
            ));
            let maha = y.square().sum_dim(1); // N x 1
            let konst = -0.5 * (d as f64 * (2.0 * std::f64::consts::PI).ln() + logdet)
                + (nk_c / n as f64).ln();
            cols.push(maha * (-0.5) + konst as f32);
        }
        let logp = Tensor::cat(cols, 1); // N x K
        let mx = logp.clone().max_dim(1);
        let lse = mx.clone() + (logp.clone() - mx).exp().sum_dim(1).log();
        ll = f64::from(to_vec_f32(lse.sum().reshape([1, 1]))[0]) / n as f64;
        r = softmax(logp, 1);
        if (ll - last).abs() < 1e-3 {
            break;
        }
        last = ll;
    }
    let labels = to_vec_u32(r.argmax(1));
    Partition {
        labels,
        centres: means,
        objective: -ll,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::rng;

    /// 300 points around (0,0), (8,0), (0,8), unit normal noise: well separated.
    fn blobs() -> (Vec<f32>, Vec<u32>) {
        let mut r = rng(11, 0);
        let centres = [(0.0, 0.0), (8.0, 0.0), (0.0, 8.0)];
        let mut x = Vec::new();
        let mut y = Vec::new();
        for i in 0..300 {
            let (cx, cy) = centres[i % 3];
            x.push((cx + crate::util::normal(&mut r)) as f32);
            x.push((cy + crate::util::normal(&mut r)) as f32);
            y.push((i % 3) as u32);
        }
        (x, y)
    }

    #[test]
    fn kmeans_recovers_well_separated_blobs() {
        let (x, y) = blobs();
        let data = DeviceData::new(&x, 300, 2, &Device::flex());
        let p = kmeans(&data, 3, 3, &mut rng(0, 0));
        assert!(crate::metrics::ari(&p.labels, &y) > 0.95);
    }

    #[test]
    fn igmm_and_gmm_recover_blobs() {
        let (x, y) = blobs();
        let data = DeviceData::new(&x, 300, 2, &Device::flex());
        let p = igmm(&data, 3, 2, &mut rng(0, 0));
        assert!(crate::metrics::ari(&p.labels, &y) > 0.9, "igmm");
        let p = gmm(&data, 3, 2, &mut rng(0, 0));
        assert!(crate::metrics::ari(&p.labels, &y) > 0.9, "gmm");
    }
}
