//! Classical baselines on burn tensors: k-means (k-means++ seeding, Lloyd, restarts), the
//! isotropic GMM with uniform weights (iGMM) and the full-covariance GMM, all fitted by EM.
//! Distances and covariance products run on the chosen device; K x K and d x d algebra on the host.

use super::linalg::{cholesky, lower_inverse};
use super::net::HostMat;
use crate::util::SeededRng;
use burn::tensor::activation::softmax;
use burn::tensor::{Device, Tensor, TensorData};
use rand::RngExt;
use serde::{Deserialize, Serialize};

/// How the classical baselines (k-means, GMM, iGMM) start: the paper's two initialisations
/// (superscripts r and p of its CM table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Seeding {
    /// k-means++ (D^2) seeding; the GMM starts from the responsibilities of a k-means.
    #[default]
    #[serde(rename = "kmeans++")]
    KmeansPP,
    /// k-means and iGMM: K distinct samples drawn uniformly as centres (scikit-learn's
    /// `init="random"`); GMM: uniformly random responsibilities, normalised per sample
    /// (scikit-learn's `init_params="random"`).
    #[serde(rename = "random")]
    Random,
}

impl Seeding {
    /// The name used on the command line and in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::KmeansPP => "kmeans++",
            Self::Random => "random",
        }
    }
}

impl std::str::FromStr for Seeding {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "kmeans++" | "k-means++" | "pp" => Ok(Self::KmeansPP),
            "random" => Ok(Self::Random),
            _ => Err(format!("'{s}': expected kmeans++ or random")),
        }
    }
}

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

/// Random seeding: `k` distinct samples drawn uniformly (scikit-learn's `init="random"`).
pub fn random_centres(data: &DeviceData, k: usize, rng: &mut SeededRng) -> HostMat {
    let (n, d) = (data.n, data.d);
    // a partial Fisher-Yates shuffle of the indices: k distinct picks
    let mut idx: Vec<usize> = (0..n).collect();
    let mut centres = Vec::with_capacity(k * d);
    for i in 0..k.min(n) {
        let j = rng.random_range(i..n);
        idx.swap(i, j);
        centres.extend_from_slice(&data.host[idx[i] * d..(idx[i] + 1) * d]);
    }
    HostMat {
        rows: k.min(n),
        cols: d,
        data: centres,
    }
}

/// The first centres of k-means / iGMM under `seeding`.
pub fn seed_centres(data: &DeviceData, k: usize, seeding: Seeding, rng: &mut SeededRng) -> HostMat {
    match seeding {
        Seeding::KmeansPP => kmeanspp(data, k, rng),
        Seeding::Random => random_centres(data, k, rng),
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

/// k-means: `restarts` seedings (k-means++ or random), each refined by Lloyd iterations until
/// the centre shift falls under `1e-4 x` the mean feature variance (scikit-learn's tolerance) or
/// 300 iterations; the run with the lowest inertia wins.
pub fn kmeans(
    data: &DeviceData,
    k: usize,
    restarts: usize,
    seeding: Seeding,
    rng: &mut SeededRng,
) -> Partition {
    let tol = 1e-4 * mean_variance(data);
    let mut best: Option<Partition> = None;
    for _ in 0..restarts.max(1) {
        let mut c = seed_centres(data, k, seeding, rng);
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
/// k-means++ or random seeding of the means (best of `restarts` by log-likelihood).
pub fn igmm(
    data: &DeviceData,
    k: usize,
    restarts: usize,
    seeding: Seeding,
    rng: &mut SeededRng,
) -> Partition {
    let (n, d) = (data.n, data.d);
    let dev = data.x.device();
    let mut best: Option<Partition> = None;
    for _ in 0..restarts.max(1) {
        let mut c = seed_centres(data, k, seeding, rng);
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
/// initialised as scikit-learn's `GaussianMixture`: k-means++ seeding starts from the
/// responsibilities of a k-means (`restarts` seedings; `init_params="kmeans"`), random seeding
/// from uniformly random responsibilities normalised per sample (`init_params="random"`); at
/// most 100 EM iterations, stopping when the mean log-likelihood changes by less than 1e-3.
pub fn gmm(
    data: &DeviceData,
    k: usize,
    restarts: usize,
    seeding: Seeding,
    rng: &mut SeededRng,
) -> Partition {
    let (n, d) = (data.n, data.d);
    let dev = data.x.device();
    let init = match seeding {
        Seeding::KmeansPP => {
            let km = kmeans(data, k, restarts, Seeding::KmeansPP, rng);
            let mut onehot = vec![0f32; n * k];
            for (i, &l) in km.labels.iter().enumerate() {
                onehot[i * k + l as usize] = 1.0;
            }
            onehot
        }
        Seeding::Random => {
            let mut r: Vec<f32> = (0..n * k).map(|_| rng.random::<f32>()).collect();
            for row in r.chunks_mut(k) {
                let s: f32 = row.iter().sum::<f32>().max(f32::MIN_POSITIVE);
                row.iter_mut().for_each(|v| *v /= s);
            }
            r
        }
    };
    let mut r = Tensor::<2>::from_data(TensorData::new(init, [n, k]), &dev);
    let mut last = f64::NEG_INFINITY;
    let mut means = HostMat {
        rows: k,
        cols: d,
        data: vec![0.0; k * d],
    };
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
        let p = kmeans(&data, 3, 3, Seeding::KmeansPP, &mut rng(0, 0));
        assert!(crate::metrics::ari(&p.labels, &y) > 0.95);
    }

    #[test]
    fn igmm_and_gmm_recover_blobs() {
        let (x, y) = blobs();
        let data = DeviceData::new(&x, 300, 2, &Device::flex());
        let p = igmm(&data, 3, 2, Seeding::KmeansPP, &mut rng(0, 0));
        assert!(crate::metrics::ari(&p.labels, &y) > 0.9, "igmm");
        let p = gmm(&data, 3, 2, Seeding::KmeansPP, &mut rng(0, 0));
        assert!(crate::metrics::ari(&p.labels, &y) > 0.9, "gmm");
    }

    /// Random seeding draws distinct samples; each baseline still finds well separated blobs
    /// from it, and the same seed gives the same partition.
    #[test]
    fn random_seeding_draws_distinct_samples_and_recovers_blobs() {
        let (x, y) = blobs();
        let data = DeviceData::new(&x, 300, 2, &Device::flex());
        let c = random_centres(&data, 50, &mut rng(1, 0));
        assert_eq!((c.rows, c.cols), (50, 2));
        let mut rows: Vec<(u32, u32)> = c
            .data
            .chunks(2)
            .map(|r| (r[0].to_bits(), r[1].to_bits()))
            .collect();
        assert!(
            rows.iter()
                .all(|r| x.chunks(2).any(|s| (s[0].to_bits(), s[1].to_bits()) == *r)),
            "every centre is a sample"
        );
        rows.sort_unstable();
        rows.dedup();
        assert_eq!(rows.len(), 50, "distinct samples");
        let k = kmeans(&data, 3, 3, Seeding::Random, &mut rng(0, 0));
        assert!(crate::metrics::ari(&k.labels, &y) > 0.95, "kmeans");
        let again = kmeans(&data, 3, 3, Seeding::Random, &mut rng(0, 0));
        assert_eq!(k.labels, again.labels);
        let i = igmm(&data, 3, 2, Seeding::Random, &mut rng(0, 0));
        assert!(crate::metrics::ari(&i.labels, &y) > 0.9, "igmm");
        // the GMM from random responsibilities: as scikit-learn's `init_params="random"` (the
        // same three blobs, 300 points, `GaussianMixture(3, init_params="random",
        // random_state=s)` for s in 0..20, scikit-learn 1.5.2: 10 runs reach ARI >= 0.97, 8 end
        // near 0.5; 15 of the 20 stop after two EM iterations) some seeds find the blobs and
        // some stop early at a merged solution (ours: 5 of these 10 seeds >= 0.97, 5 near 0.5)
        let aris: Vec<f64> = (0..10)
            .map(|s| {
                let g = gmm(&data, 3, 1, Seeding::Random, &mut rng(s, 0));
                crate::metrics::ari(&g.labels, &y)
            })
            .collect();
        assert!(aris.iter().any(|&a| a > 0.95), "{aris:?}");
        assert!(aris.iter().all(|&a| a > 0.3), "{aris:?}");
        let g = gmm(&data, 3, 1, Seeding::Random, &mut rng(3, 0));
        assert_eq!(
            crate::metrics::ari(&g.labels, &y),
            aris[3],
            "same seed, same partition"
        );
    }
}
