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

/// This machine's CPU as far as it decides a CPU run's bits: its model and its L1 data cache.
/// The matrix products (the `gemm` crate, under burn's flex backend and ours) size their k
/// blocks from the L1 cache they read at run time, so the same seed and build add the same
/// sums in another order, and end a long run elsewhere, on a CPU with another L1 (a USPS AE+KM
/// seed gave 57.4 on an earlier session's machine and 58.1 on a Zen 5 with a 48K L1d;
/// REPRODUCTION.md). None off Linux.
/// Read once per process.
pub fn host_cpu() -> Option<String> {
    static CPU: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    CPU.get_or_init(|| {
        let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        let l1d = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index0/size").ok();
        describe_cpu(&info, l1d.as_deref())
    })
    .clone()
}

/// The CPU to record beside a run trained on `device` (as [`select`] names it): [`host_cpu`]
/// on the CPU backend, None on a GPU, whose bits the host CPU does not decide.
pub fn cpu_of_run(device: &str) -> Option<String> {
    (device == CPU_NAME).then(host_cpu).flatten()
}

/// "MODEL NAME (family F, model M), L1d SIZE" from `/proc/cpuinfo`'s first processor and
/// the L1 data cache size as sysfs writes it ("48K"); None without a model name.
fn describe_cpu(cpuinfo: &str, l1d: Option<&str>) -> Option<String> {
    let field = |key: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    let mut s = field("model name")?;
    if let (Some(f), Some(m)) = (field("cpu family"), field("model")) {
        s.push_str(&format!(" (family {f}, model {m})"));
    }
    if let Some(l1) = l1d.map(str::trim).filter(|l| !l.is_empty()) {
        s.push_str(&format!(", L1d {l1}"));
    }
    Some(s)
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

#[cfg(test)]
mod tests {
    use super::describe_cpu;

    #[test]
    fn describes_the_first_processor_and_its_l1() {
        let info = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n\
                    model name\t: AMD EPYC\nflags\t\t: fpu fma\n\nprocessor\t: 1\ncpu family\t: 99\n";
        assert_eq!(
            describe_cpu(info, Some("48K\n")).as_deref(),
            Some("AMD EPYC (family 26, model 2), L1d 48K")
        );
        assert_eq!(describe_cpu("model name : X\n", None).as_deref(), Some("X"));
        assert_eq!(describe_cpu("processor : 0\n", Some("32K")), None);
    }
}
