//! Backend selection: wgpu when a real (non-CPU) GPU adapter exists, else burn's `flex` CPU
//! backend. wgpu on a software adapter (Mesa's lavapipe) is correct but ~20x slower than flex, so
//! `auto` never picks it; `--device wgpu` forces wgpu on whatever adapter there is.

use crate::error::{AecmError, Result};
use burn::tensor::wgpu::wgpu;
use burn::tensor::{Device, DeviceKind};

/// What the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceChoice {
    /// A GPU through wgpu when one exists, else the CPU.
    #[default]
    Auto,
    /// burn's flex CPU backend.
    Cpu,
    /// wgpu on the best adapter (a software one if there is no GPU).
    Wgpu,
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "cpu" | "flex" => Ok(Self::Cpu),
            "wgpu" | "gpu" => Ok(Self::Wgpu),
            _ => Err(format!("'{s}': expected auto, cpu or wgpu")),
        }
    }
}

/// A wgpu adapter seen on this machine.
#[derive(Debug, Clone)]
pub struct AdapterInfo {
    /// Adapter name.
    pub name: String,
    /// Graphics API.
    pub backend: String,
    /// True for a software (CPU) adapter.
    pub is_cpu: bool,
}

/// Lists the wgpu adapters of the primary APIs (Vulkan, Metal, DX12). Enumerated once per
/// process (the first call creates and drops a wgpu instance; later calls, e.g. from worker
/// threads, reuse the list and touch no driver).
pub fn adapters() -> Vec<AdapterInfo> {
    static ADAPTERS: std::sync::OnceLock<Vec<AdapterInfo>> = std::sync::OnceLock::new();
    ADAPTERS.get_or_init(enumerate_adapters).clone()
}

fn enumerate_adapters() -> Vec<AdapterInfo> {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let list = futures_lite::future::block_on(instance.enumerate_adapters(wgpu::Backends::PRIMARY));
    list.into_iter()
        .map(|a| {
            let i = a.get_info();
            AdapterInfo {
                name: i.name.clone(),
                backend: format!("{:?}", i.backend),
                is_cpu: i.device_type == wgpu::DeviceType::Cpu,
            }
        })
        .collect()
}

/// How [`select`] describes the CPU backend when it is asked for.
pub const CPU_NAME: &str = "cpu (burn flex)";

/// The device for `choice`, with a description for the user.
pub fn select(choice: DeviceChoice) -> Result<(Device, String)> {
    match choice {
        DeviceChoice::Cpu => Ok((Device::flex(), CPU_NAME.into())),
        DeviceChoice::Auto => {
            let gpus: Vec<AdapterInfo> = adapters().into_iter().filter(|a| !a.is_cpu).collect();
            match gpus.first() {
                Some(a) => Ok((
                    Device::wgpu(DeviceKind::DefaultDevice),
                    format!("wgpu ({}, {})", a.name, a.backend),
                )),
                None => Ok((
                    Device::flex(),
                    "cpu (burn flex; no GPU adapter found)".into(),
                )),
            }
        }
        DeviceChoice::Wgpu => {
            let all = adapters();
            let best = all.iter().find(|a| !a.is_cpu).or(all.first()).ok_or_else(|| {
                AecmError::config(
                    "device",
                    "no wgpu adapter found (install a Vulkan driver, e.g. Debian's mesa-vulkan-drivers)",
                )
            })?;
            let soft = if best.is_cpu {
                ", software adapter: slow"
            } else {
                ""
            };
            Ok((
                Device::wgpu(DeviceKind::DefaultDevice),
                format!("wgpu ({}, {}{soft})", best.name, best.backend),
            ))
        }
    }
}
