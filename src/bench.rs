//! Speed measurements shared by `aecm bench` and the explorer's cost estimate.

use crate::train::{ModelKind, TrainConfig};
use burn::tensor::{Device, Tensor};
use std::time::Instant;

/// Multiply-accumulates per sample of one forward pass of the network `cfg` describes on
/// `d`-dimensional input (CM: encoder d x K and decoder K x d; AE-CM adds the autoencoder).
pub fn macs_per_sample(cfg: &TrainConfig, d: usize) -> f64 {
    let k = cfg.clusters as f64;
    match cfg.model {
        ModelKind::Cm => 2.0 * d as f64 * k,
        _ => {
            let mut widths = vec![d];
            widths.extend(&cfg.hidden);
            widths.push(cfg.embed);
            let enc: f64 = widths.windows(2).map(|w| (w[0] * w[1]) as f64).sum();
            2.0 * enc + 2.0 * cfg.embed as f64 * k
        }
    }
}

/// FLOPs of one training step (forward 2 FLOPs per MAC, backward 4).
pub fn flops_per_step(cfg: &TrainConfig, d: usize) -> f64 {
    6.0 * cfg.batch as f64 * macs_per_sample(cfg, d)
}

/// The single-precision matrix-multiply rate of `device` in GFLOP/s: the median of `reps`
/// timed `n x n` products (each read back to the host) after one warm-up product.
pub fn gemm_gflops(device: &Device, n: usize, reps: usize) -> f64 {
    // operands made on the host and uploaded: with `Tensor::random` on wgpu the timed products
    // came out impossibly fast (thousands of GFLOP/s on a software rasteriser)
    let mut r = crate::util::rng(0, 61);
    let mut host = || -> Tensor<2> {
        let v: Vec<f32> = (0..n * n)
            .map(|_| crate::util::uniform(&mut r, 0.0, 1.0) as f32)
            .collect();
        Tensor::from_data(burn::tensor::TensorData::new(v, [n, n]), device)
    };
    let a = host();
    let b = host();
    // read the whole product back: a reduced scalar let a fusing backend skip most of the work
    // (wgpu reported 2,000 GFLOP/s on a software rasteriser); the copy costs ~2% at 2048^3 on flex
    let sync = |t: Tensor<2>| {
        let _ = t.into_data().convert::<f32>().try_into_vec::<f32>();
    };
    sync(a.clone().matmul(b.clone()));
    let mut times: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let t = Instant::now();
            sync(a.clone().matmul(b.clone()));
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let med = times[times.len() / 2].max(1e-9);
    2.0 * (n as f64).powi(3) / med / 1e9
}

/// One benchmark shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BenchCase {
    /// Case name (as in the JSON output).
    pub name: &'static str,
    /// CM or AE-CM.
    pub model: ModelKind,
    /// Input dimension.
    pub d: usize,
    /// Encoder hidden widths (AE-CM).
    pub hidden: &'static [usize],
    /// Embedding dimension (AE-CM).
    pub embed: usize,
    /// Clusters.
    pub k: usize,
    /// Batch size.
    pub batch: usize,
}

/// The four cases of the speed issue.
pub const CASES: [BenchCase; 4] = [
    BenchCase {
        name: "cm-pendigits",
        model: ModelKind::Cm,
        d: 16,
        hidden: &[],
        embed: 16,
        k: 10,
        batch: 80,
    },
    BenchCase {
        name: "cm-mnist",
        model: ModelKind::Cm,
        d: 784,
        hidden: &[],
        embed: 784,
        k: 10,
        batch: 111,
    },
    BenchCase {
        name: "aecm-mnist",
        model: ModelKind::Aecm,
        d: 784,
        hidden: &[500, 500, 2000],
        embed: 10,
        k: 10,
        batch: 256,
    },
    BenchCase {
        name: "aecm-pendigits",
        model: ModelKind::Aecm,
        d: 16,
        hidden: &[500, 500, 2000],
        embed: 70,
        k: 10,
        batch: 80,
    },
];

/// A measured case.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CaseResult {
    /// Case name.
    pub name: String,
    /// Median milliseconds per training step.
    pub ms_per_step: f64,
    /// Steps per second (1000 / ms_per_step).
    pub steps_per_s: f64,
    /// CPU time of the whole process per step over the timed repetitions (all threads), in
    /// milliseconds: near `ms_per_step` or above means the host side bounds the step.
    pub cpu_ms_per_step: f64,
    /// FLOPs of one step, in GFLOP.
    pub gflop_per_step: f64,
    /// Achieved FLOP rate over the measured GEMM rate.
    pub fraction_of_gemm: f64,
    /// Timed repetitions (each a whole epoch of the synthetic set).
    pub reps: usize,
    /// Steps per repetition.
    pub steps_per_rep: usize,
}

/// The training configuration of a case (paper-style settings; alpha 5).
pub fn case_config(c: &BenchCase, cm_autodiff: bool) -> TrainConfig {
    TrainConfig {
        cm_autodiff,
        model: c.model,
        clusters: c.k,
        alpha: vec![5.0],
        batch: c.batch,
        epochs: 1_000_000,
        hidden: c.hidden.to_vec(),
        embed: c.embed,
        eval_every: 0,
        averaging: false,
        step_events: false,
        ..TrainConfig::default()
    }
}

/// Times one case on `device`: a synthetic data set of `steps_per_rep` batches (uniform values
/// in [0, 1), seeded), warm-up epochs (one on the CPU; on a GPU until the epoch time settles),
/// then the median of `reps` timed epochs. Each epoch
/// ends by reading the loss terms back, which waits for the device.
pub fn run_case(
    c: &BenchCase,
    device: &Device,
    device_name: &str,
    gemm: f64,
    reps: usize,
    steps_per_rep: usize,
    cm_autodiff: bool,
) -> crate::Result<CaseResult> {
    use crate::train::Trainer;
    let n = c.batch * steps_per_rep;
    let mut r = crate::util::rng(0, 60);
    let x: Vec<f32> = (0..n * c.d)
        .map(|_| crate::util::uniform(&mut r, 0.0, 1.0) as f32)
        .collect();
    let ds = crate::data::Dataset::new(c.name, n, c.d, x)?;
    let cfg = case_config(c, cm_autodiff);
    let gflop = flops_per_step(&cfg, c.d) / 1e9;
    let mut t = Trainer::new(cfg.check(n, c.d)?, ds, device.clone(), device_name)?;
    let mut sink = |_: &crate::train::Event| {};
    let epoch = |t: &mut Trainer, sink: &mut dyn crate::train::EventSink| -> crate::Result<f64> {
        let start = Instant::now();
        let e0 = t.history().len();
        while t.history().len() == e0 {
            t.step(sink)?;
        }
        Ok(start.elapsed().as_secs_f64())
    };
    // Warm-up: one epoch on the CPU. On a GPU the autotuner keeps compiling and benchmarking
    // kernels for tens of steps (BENCHMARKS.md, H100), so warm up until two epochs in a row
    // agree within 10% (at most 30 epochs).
    let mut last = epoch(&mut t, &mut sink)?;
    if *device != Device::flex() {
        for _ in 0..30 {
            let now = epoch(&mut t, &mut sink)?;
            let settled = (now - last).abs() <= 0.1 * last;
            last = now;
            if settled {
                break;
            }
        }
    }
    let mut times = Vec::with_capacity(reps);
    let cpu0 = process_cpu_seconds();
    for _ in 0..reps.max(1) {
        times.push(epoch(&mut t, &mut sink)? / steps_per_rep as f64);
    }
    let cpu = (process_cpu_seconds() - cpu0) / (times.len() * steps_per_rep) as f64;
    times.sort_by(f64::total_cmp);
    let s = times[times.len() / 2].max(1e-12);
    Ok(CaseResult {
        name: c.name.into(),
        ms_per_step: s * 1e3,
        steps_per_s: 1.0 / s,
        cpu_ms_per_step: cpu * 1e3,
        gflop_per_step: gflop,
        fraction_of_gemm: if gemm > 0.0 { gflop / s / gemm } else { 0.0 },
        reps: times.len(),
        steps_per_rep,
    })
}

/// `epochs` full training epochs on a real data set, with the case's shapes, each followed by
/// the evaluation the trainer does after an epoch (predictions, metrics, L_sp on all samples):
/// returns (epoch seconds including evaluation, evaluation seconds) per epoch. On a GPU the first
/// epoch includes compiling and autotuning the kernels, so ask for two there.
pub fn real_epochs(
    c: &BenchCase,
    ds: &crate::data::Dataset,
    device: &Device,
    device_name: &str,
    epochs: usize,
    cm_autodiff: bool,
) -> crate::Result<Vec<(f64, f64)>> {
    use crate::train::Trainer;
    let mut cfg = case_config(c, cm_autodiff);
    cfg.clusters = c.k;
    cfg.eval_every = 1;
    cfg.eval_budget = 0.0; // measure the evaluation after every epoch
    let mut t = Trainer::new(
        cfg.check(ds.n, ds.d)?,
        ds.clone(),
        device.clone(),
        device_name,
    )?;
    let mut sink = |_: &crate::train::Event| {};
    let mut out = Vec::with_capacity(epochs);
    for e in 0..epochs.max(1) {
        let start = Instant::now();
        while t.history().len() <= e {
            t.step(&mut sink)?;
        }
        let eval = t.history().get(e).map_or(0.0, |h| h.eval_seconds);
        out.push((start.elapsed().as_secs_f64(), eval));
    }
    Ok(out)
}

/// User plus system CPU time of this process so far (all threads), in seconds.
pub fn process_cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Peak resident memory of this process so far (Linux `VmHWM`), in MiB.
pub fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
