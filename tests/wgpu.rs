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
