//! One training step on the wgpu backend (a software adapter in CI: Mesa's lavapipe, installed by
//! .ci/run), compared with the same step on the CPU backend.

use aecm::device::{DeviceChoice, adapters, select};
use aecm::train::{Event, ModelKind, TrainConfig, Trainer};

#[test]
fn one_cm_step_on_wgpu_matches_the_cpu_backend() {
    assert!(
        !adapters().is_empty(),
        "no wgpu adapter: install a Vulkan driver (Debian: mesa-vulkan-drivers libvulkan1)"
    );
    let ds = aecm::data::generate("blobs", Some(64), 0).unwrap();
    let cfg = TrainConfig {
        model: ModelKind::Cm,
        clusters: 3,
        alpha: vec![2.0],
        batch: 64,
        epochs: 1,
        seed: 1,
        ..TrainConfig::default()
    };
    let mut none = |_: &Event| {};
    let mut params = Vec::new();
    for choice in [DeviceChoice::Wgpu, DeviceChoice::Cpu] {
        let (device, desc) = select(choice).unwrap();
        eprintln!("{desc}");
        let mut t =
            Trainer::new(cfg.clone().check(64, 2).unwrap(), ds.clone(), device, &desc).unwrap();
        t.step(&mut none).unwrap();
        params.push(t.params_host());
    }
    for (a, b) in params[0].iter().zip(&params[1]) {
        for (x, y) in a.data.iter().zip(&b.data) {
            assert!((x - y).abs() < 1e-4, "wgpu {x} vs cpu {y}");
        }
    }
}

/// The AE-CM's own GPU step (`model::gpu`) through the trainer, against the CPU backend's host
/// step, with per-step loss events: AE-KM (the autoencoder's pre-training alone, with a frozen
/// first kernel and its own batch size) and AE-CM from random init with the averaging epoch.
/// (Kept off burn's tensor kernels, evaluation included: compiling them on a software Vulkan
/// takes minutes.)
#[test]
fn aecm_on_the_gpu_step_matches_the_cpu_backend() {
    let ds = aecm::data::generate("blobs", Some(90), 0).unwrap();
    let base = TrainConfig {
        clusters: 3,
        alpha: vec![1.0, 2.0, 3.0],
        hidden: vec![12, 9],
        embed: 3,
        batch: 32,
        pretrain_batch: 40,
        pretrain_epochs: 2,
        freeze_first_kernel: true,
        epochs: 2,
        step_events: true,
        eval_every: 0,
        seed: 3,
        ..TrainConfig::default()
    };
    let aekm = TrainConfig {
        model: ModelKind::AeKm,
        ..base.clone()
    };
    let aecm = TrainConfig {
        model: ModelKind::Aecm,
        averaging: true,
        ..base
    };
    for cfg in [aekm, aecm] {
        let mut runs = Vec::new();
        for choice in [DeviceChoice::Wgpu, DeviceChoice::Cpu] {
            let (device, desc) = select(choice).unwrap();
            let mut steps: Vec<Vec<f32>> = Vec::new();
            let mut sink = |e: &Event| match e {
                Event::Step { terms, .. } => steps.push(terms.clone()),
                Event::Epoch(r) => steps.push(r.terms.iter().map(|&v| v as f32).collect()),
                _ => {}
            };
            let mut t =
                Trainer::new(cfg.clone().check(90, 2).unwrap(), ds.clone(), device, &desc).unwrap();
            while !t.is_done() {
                t.step(&mut sink).unwrap();
            }
            runs.push((t.params_host(), steps, t.predict()));
        }
        let (gp, gs, (gl, glsp)) = &runs[0];
        let (cp, cs, (cl, clsp)) = &runs[1];
        // the predictions: the GPU step's encoder (kept for them after the run) against the host's
        assert_eq!(gl, cl, "predictions");
        assert!(
            (glsp - clsp).abs() <= 1e-3 * (1.0 + clsp.abs()),
            "L_sp {glsp} vs {clsp}"
        );
        assert_eq!(gs.len(), cs.len(), "steps and epochs");
        assert!(gs.len() >= 8, "{} events", gs.len());
        for (a, b) in gs.iter().zip(cs) {
            assert_eq!(a.len(), b.len(), "terms {a:?} vs {b:?}");
            assert!(!a.is_empty());
            for (x, y) in a.iter().zip(b) {
                assert!(
                    (x - y).abs() <= 1e-3 * (1.0 + y.abs()),
                    "terms {a:?} vs {b:?}"
                );
            }
        }
        for (a, b) in gp.iter().zip(cp) {
            for (x, y) in a.data.iter().zip(&b.data) {
                assert!((x - y).abs() < 1e-3, "wgpu {x} vs cpu {y}");
            }
        }
    }
}

/// An AE-CM on the GPU step saved after its first epoch (parameters and Adam's moments read
/// back from the GPU, through the checkpoint's bytes) and resumed ends as the run left alone:
/// on the GPU step again, and on the CPU backend (up to rounding).
#[test]
fn aecm_checkpoint_from_the_gpu_step_resumes_on_gpu_and_cpu() {
    use aecm::train::Checkpoint;
    let ds = aecm::data::generate("blobs", Some(90), 0).unwrap();
    let cfg = TrainConfig {
        model: ModelKind::Aecm,
        clusters: 3,
        alpha: vec![2.0],
        hidden: vec![12, 9],
        embed: 3,
        batch: 32,
        epochs: 3,
        eval_every: 0,
        seed: 5,
        ..TrainConfig::default()
    }
    .check(90, 2)
    .unwrap();
    let mut none = |_: &Event| {};
    let (gpu, gpu_desc) = select(DeviceChoice::Wgpu).unwrap();
    let finish = |mut t: Trainer| {
        while !t.is_done() {
            t.step(&mut |_: &Event| {}).unwrap();
        }
        t.params_host()
    };
    let straight = finish(Trainer::new(cfg.clone(), ds.clone(), gpu.clone(), &gpu_desc).unwrap());
    let mut t = Trainer::new(cfg.clone(), ds.clone(), gpu.clone(), &gpu_desc).unwrap();
    while t.history().is_empty() {
        t.step(&mut none).unwrap();
    }
    let bytes = t.checkpoint().unwrap().to_bytes().unwrap();
    let ck = Checkpoint::from_bytes(&bytes).unwrap();
    assert_eq!(ck.state.adam_t, 3, "3 steps of 32, 32 and 26 rows");
    assert!(
        ck.adam_v.iter().all(|v| v.iter().any(|&x| x > 0.0)),
        "moments read back"
    );
    let (cpu, cpu_desc) = select(DeviceChoice::Cpu).unwrap();
    for (device, desc, tol) in [(gpu, gpu_desc, 1e-5), (cpu, cpu_desc, 1e-3)] {
        let r = Trainer::resume(ck.clone(), cfg.clone(), ds.clone(), device, &desc).unwrap();
        let resumed = finish(r);
        for (a, b) in resumed.iter().zip(&straight) {
            for (x, y) in a.data.iter().zip(&b.data) {
                assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{desc}: {x} vs {y}");
            }
        }
    }
}
