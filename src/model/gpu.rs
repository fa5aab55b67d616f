//! The AE-CM's training step on a GPU through wgpu, with our own compute shaders (`wgsl/`):
//! the same forward pass, closed-form backward pass and Adam update as [`super::dense`]'s host
//! step, in one command buffer per step, with the parameters, the gradients and Adam's moments
//! in GPU buffers between steps.
//!
//! Why (BENCHMARKS.md, "GPU"): burn's autodiff on wgpu took 96 ms per AE-CM MNIST step on an
//! H100 (19 ms of kernels in the steady state; its matrix-product kernels ran the step's skinny
//! `[256, 500] x [500, 2000]` products at ~0.35 TFLOP/s, and each step cost tens of ms of CPU
//! time in the runtime). Here a step is about 28 dispatches recorded into one compute pass:
//! 8 products forward (bias and LeakyReLU in the product's epilogue), the reconstruction's
//! gradient, the clustering module in one workgroup and its two gradient products, 8 weight-
//! gradient products (the bias gradient as their last row: a row of ones after the layer's
//! input), 7 input-gradient products (the LeakyReLU mask or dZ in their epilogue), and one Adam
//! pass over all parameters at once (they live in one flat buffer). Nothing is read back per
//! step: the loss terms of every step stay in a GPU buffer until [`GpuStep::take_terms`]; at
//! most three steps are queued ahead of the GPU.
//!
//! Measured on an NVIDIA H200 (BENCHMARKS.md, "Our own GPU step"): the AE-CM MNIST step took
//! 14.2 ms with the first product kernel (`gemm.wgsl`, arrays in function memory), 3.06 ms with
//! `gemm4.wgsl` (vec4 registers) and 1.85 ms with split k (the default) besides; PyTorch's eager
//! CUDA step on the same card 3.24 ms.
//!
//! Shapes: the batch `x` is `b x d` row-major; parameters are flattened in the order of
//! [`Arch::layers`] (kernels `fan_in x fan_out` row-major, then the bias), as the host step's.

use super::adam::AdamState;
use super::dense::HostLoss;
use super::net::{Arch, LossWeights};
use crate::error::{AecmError, Result};
use burn::tensor::wgpu::wgpu;
use std::collections::HashMap;
use wgpu::util::DeviceExt;

/// LeakyReLU slope (as [`super::dense`]).
const SLOPE: f32 = 0.2;
/// The CM kernel's limit on K (its workgroup arrays and the prior's weights in a uniform).
const MAX_K: usize = 256;
/// Loss-term slots per step in the terms buffer.
const SLOT: usize = 8;
/// Rows per chunk of [`GpuStep::encode`].
const EVAL_CHUNK: usize = 4096;
/// Steps submitted and not yet finished before [`GpuStep::step`] waits for the oldest: the CPU
/// prepares the next steps while the GPU runs, but never runs far ahead (each queued step holds
/// its batch in a staging buffer, and a stop would wait for all of them).
const MAX_IN_FLIGHT: usize = 3;

/// True when [`GpuStep`] implements `arch` (as [`super::dense::supported`], K at most 256).
pub fn supported(arch: &Arch) -> bool {
    super::dense::supported(arch) && arch.k <= MAX_K
}

/// Per-step values shared by the reconstruction, CM and Adam kernels (`Step` in the shaders).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct StepU {
    two_scale: f32,
    terms0: f32,
    lambda: f32,
    lr_t: f32,
    b1: f32,
    b2: f32,
    c1: f32,
    c2: f32,
    eps: f32,
    slot: u32,
    nw: u32,
    adam_lo: u32,
    adam_hi: u32,
    has_cm: u32,
    pad: [u32; 2],
    wv: [f32; MAX_K],
}

/// How a product kernel keeps its outputs and runs its k loop.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Gemm {
    /// Outputs in an array (`gemm.wgsl`, the first version, kept for comparison: slow on an H200).
    Array,
    /// Outputs in vec4 variables, loops over the loads and the 16-deep product (`gemm4.wgsl`;
    /// the measured default).
    Vec4,
    /// The same with both loops unrolled (not measured on a GPU yet).
    Unrolled,
    /// Unrolled, and the next k tile's loads issued into registers before the current tile is
    /// multiplied (not measured on a GPU yet).
    Prefetch,
}

impl Gemm {
    /// The prefix of the variant's name in `AECM_GPU_TILES`.
    fn prefix(self) -> &'static str {
        match self {
            Gemm::Array => "a",
            Gemm::Vec4 => "",
            Gemm::Unrolled => "u",
            Gemm::Prefetch => "p",
        }
    }
}

/// The product's variants `(TM, TN, kind)`: 256 threads of `TM x TN` outputs, tiles of
/// `16 TM x 16 TN`; all but [`Gemm::Array`] have TN = 4.
const TILES: [(u32, u32, Gemm); 10] = [
    (4, 4, Gemm::Vec4),
    (2, 4, Gemm::Vec4),
    (4, 4, Gemm::Array),
    (2, 4, Gemm::Array),
    (4, 2, Gemm::Array),
    (2, 2, Gemm::Array),
    (4, 4, Gemm::Unrolled),
    (2, 4, Gemm::Unrolled),
    (4, 4, Gemm::Prefetch),
    (2, 4, Gemm::Prefetch),
];

/// The variant for an `m x n` product: of the kernels of kind `tiles.1` (the vec4 kernels by
/// default), 64 x 64 tiles when they give at least 264 workgroups (two per multiprocessor of a
/// 132-SM H100 or H200), else 32 x 64; or the variant `tiles.0` forces.
fn tile_for(m: usize, n: usize, tiles: (Option<usize>, Gemm)) -> usize {
    if let Some(i) = tiles.0 {
        return i;
    }
    let tm = if m.div_ceil(64) * n.div_ceil(64) >= 264 {
        4
    } else {
        2
    };
    TILES
        .iter()
        .position(|&(a, b, k)| (a, b, k) == (tm, 4, tiles.1))
        .unwrap_or(0)
}

/// The tile choice `v` names (`AECM_GPU_TILES`): `44`, `24` (vec4 kernels), `a44`, `a24`, `a42`,
/// `a22` (array), `u44`, `u24` (unrolled), `p44`, `p24` (prefetch) force one variant; `u` or `p`
/// alone pick that kind with the tile chosen per shape; anything else: the default.
fn tiles_named(v: &str) -> (Option<usize>, Gemm) {
    let v = v.trim();
    let forced = TILES
        .iter()
        .position(|&(a, b, kind)| format!("{}{a}{b}", kind.prefix()) == v);
    let kind = [Gemm::Unrolled, Gemm::Prefetch]
        .into_iter()
        .find(|k| k.prefix() == v)
        .unwrap_or(Gemm::Vec4);
    (forced, kind)
}

/// How many parts of k a product with `wgs` workgroups and depth `k` is split into
/// (`AECM_GPU_SPLITK`: unset or `auto`: products of fewer than 132 workgroups and k of at least
/// 512, into up to 8 parts of at least 256; `auto:K`: the same from k of at least K, into parts of
/// at least K/2 (not measured yet: `auto:256` would also split MNIST's k = 500 products, 31% of
/// the step); `off` (or 0, 1): never; a number N: every product with k of at least 32, into N
/// parts, for the tests). On an H200 `auto` took the MNIST AE-CM step from
/// 3.06 to 1.85 ms (BENCHMARKS.md, fifteenth session), hence the default.
fn split_parts(mode: Split, wgs: usize, k: usize) -> usize {
    match mode {
        Split::Off => 1,
        Split::Auto(min_k) if wgs < 132 && k >= min_k => {
            264usize.div_ceil(wgs).min(8).min(k / (min_k / 2).max(16))
        }
        Split::Auto(_) => 1,
        Split::Fixed(n) if k >= 32 => n.min(k.div_ceil(16)),
        Split::Fixed(_) => 1,
    }
}

/// The split-k setting of `AECM_GPU_SPLITK`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Split {
    Off,
    /// Split products of few workgroups whose k is at least this.
    Auto(usize),
    Fixed(usize),
}

impl Split {
    fn from_env() -> Self {
        match std::env::var("AECM_GPU_SPLITK").as_deref().map(str::trim) {
            Ok("off") => Self::Off,
            Ok(v) => match (v.parse::<usize>(), v.strip_prefix("auto:")) {
                (Ok(n), _) if n > 1 => Self::Fixed(n.min(64)),
                (Ok(_), _) => Self::Off,
                (_, Some(k)) => Self::Auto(k.trim().parse::<usize>().map_or(512, |k| k.max(32))),
                _ => Self::Auto(512),
            },
            Err(_) => Self::Auto(512),
        }
    }
}

/// How [`GpuStep`] builds and runs its products: read once from the environment
/// ([`GpuOptions::from_env`]) for benchmarks and diagnosis on a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuOptions {
    /// `AECM_GPU_SPLITK` ([`split_parts`]).
    split: Split,
    /// `AECM_GPU_TILES` ([`tiles_named`]).
    tiles: (Option<usize>, Gemm),
    /// `AECM_GPU_TRUSTED=1`: the product kernels compiled without naga's runtime bounds checks
    /// and loop counters (not measured on a GPU yet).
    trusted: bool,
}

impl GpuOptions {
    /// The options the `AECM_GPU_*` variables set (the measured defaults where unset).
    pub fn from_env() -> Self {
        Self {
            split: Split::from_env(),
            tiles: tiles_named(&std::env::var("AECM_GPU_TILES").unwrap_or_default()),
            trusted: std::env::var("AECM_GPU_TRUSTED").is_ok_and(|v| v.trim() == "1"),
        }
    }
}

/// The products' uniform and epilogue, put in front of each product's shader.
const MM_WGSL: &str = include_str!("wgsl/mm.wgsl");
/// The per-step uniform, put in front of the reconstruction, CM and Adam shaders.
const STEP_WGSL: &str = include_str!("wgsl/step.wgsl");

/// The product's shader for one variant.
fn gemm_source(tm: u32, tn: u32, kind: Gemm) -> String {
    if kind == Gemm::Array {
        return (MM_WGSL.to_owned() + include_str!("wgsl/gemm.wgsl"))
            .replace("{TM}", &tm.to_string())
            .replace("{TN}", &tn.to_string())
            .replace("{AS}", &(256 * tm).to_string())
            .replace("{BS}", &(256 * tn).to_string())
            .replace("{ACC}", &(tm * tn).to_string());
    }
    let lines = |n: u32, f: &dyn Fn(u32) -> String| -> String { (0..n).map(f).collect() };
    let decl = lines(tm, &|i| format!("    var acc{i} = vec4<f32>(0.0);\n"));
    let fma = lines(tm, &|i| {
        format!(
            "            acc{i} = fma(vec4<f32>(As[ab + {}u]), br, acc{i});\n",
            16 * i
        )
    });
    let store = lines(tm, &|i| {
        format!(
            "    out4(row0 + ty + {}u, col0 + tx, acc{i}, wid.z);\n",
            16 * i
        )
    });
    // the 16-deep product of the tiles in shared memory, as a loop or unrolled
    let step = |kk: &str| {
        format!(
            "            let bb = {kk} * SB + tx;\n            let br = vec4<f32>(Bs[bb], Bs[bb + 16u], \
             Bs[bb + 32u], Bs[bb + 48u]);\n            let ab = {kk} * SA + ty;\n{fma}"
        )
    };
    let el = |r: u32| format!("t + {}u", 256 * r);
    let fetch_a = |r: u32, k0: &str| format!("fetch_a({}, row0, {k0}, kend)", el(r));
    let fetch_b = |r: u32, k0: &str| format!("fetch_b({}, col0, {k0}, kend)", el(r));
    let (prologue, load, next, inner) = match kind {
        Gemm::Vec4 => (
            String::new(),
            "        for (var r = 0u; r < TM; r++) {\n            put_a(t + r * 256u, \
             fetch_a(t + r * 256u, row0, k0, kend));\n        }\n        for (var r = 0u; r < 4u; \
             r++) {\n            put_b(t + r * 256u, fetch_b(t + r * 256u, col0, k0, kend));\n        }\n"
                .to_string(),
            String::new(),
            format!(
                "        for (var kk = 0u; kk < BK; kk++) {{\n{}        }}\n",
                step("kk")
            ),
        ),
        _ => {
            let unrolled = lines(16, &|kk| format!("        {{\n{}        }}\n", step(&format!("{kk}u"))));
            if kind == Gemm::Unrolled {
                let load = lines(tm, &|r| format!("        put_a({}, {});\n", el(r), fetch_a(r, "k0")))
                    + &lines(4, &|r| format!("        put_b({}, {});\n", el(r), fetch_b(r, "k0")));
                (String::new(), load, String::new(), unrolled)
            } else {
                let prologue = lines(tm, &|r| format!("    var pa{r} = {};\n", fetch_a(r, "kbeg")))
                    + &lines(4, &|r| format!("    var pb{r} = {};\n", fetch_b(r, "kbeg")));
                let load = lines(tm, &|r| format!("        put_a({}, pa{r});\n", el(r)))
                    + &lines(4, &|r| format!("        put_b({}, pb{r});\n", el(r)));
                let next = "        if (kt + 1u < ktiles) {\n".to_string()
                    + &lines(tm, &|r| format!("            pa{r} = {};\n", fetch_a(r, "k0 + BK")))
                    + &lines(4, &|r| format!("            pb{r} = {};\n", fetch_b(r, "k0 + BK")))
                    + "        }\n";
                (prologue, load, next, unrolled)
            }
        }
    };
    (MM_WGSL.to_owned() + include_str!("wgsl/gemm4.wgsl"))
        .replace("{TM}", &tm.to_string())
        .replace("{AS}", &(16 * (16 * tm + 1)).to_string())
        .replace("{DECL}\n", &decl)
        .replace("{PROLOGUE}\n", &prologue)
        .replace("{LOAD}\n", &load)
        .replace("{NEXT}\n", &next)
        .replace("{INNER}\n", &inner)
        .replace("{STORE}\n", &store)
}

/// Which kernel a recorded dispatch runs.
#[derive(Clone, Copy)]
enum Kern {
    /// The product, tile variant [`TILES`]`[i]`.
    Gemm(usize),
    Rec,
    Cm,
    Adam,
    /// The sum of a split-k product's parts.
    SplitK,
}

/// One recorded dispatch: kernel, bindings, workgroups, and a name for the profile.
struct Pass {
    kern: Kern,
    bg: wgpu::BindGroup,
    groups: [u32; 3],
    label: String,
}

/// The dispatches of one step for one batch size and loss.
struct Plan {
    passes: Vec<Pass>,
    n_terms: usize,
}

/// GPU time per dispatch of the step (`AECM_GPU_PROFILE` set and the adapter has timestamp
/// queries): every dispatch in a compute pass of its own with timestamps, read back after
/// each step (which serialises the steps: for finding the slow kernels, not for timing steps).
struct Profile {
    queries: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    capacity: u32,
    period_ns: f64,
    /// (label, total ns, count) in dispatch order of first appearance.
    totals: Vec<(String, f64, u64)>,
    steps: u64,
}

/// A matrix operand: buffer, offset and strides (row, column) in elements.
#[derive(Clone, Copy)]
struct Op<'a> {
    buf: &'a wgpu::Buffer,
    off: usize,
    rs: usize,
    cs: usize,
    /// One more row of ones after the matrix's rows (left operand only).
    ones: bool,
}

impl<'a> Op<'a> {
    /// Row-major `rows x cols` at `off`.
    fn rm(buf: &'a wgpu::Buffer, off: usize, cols: usize) -> Self {
        Self {
            buf,
            off,
            rs: cols,
            cs: 1,
            ones: false,
        }
    }
    /// The transpose of a row-major matrix with `cols` columns.
    fn rm_t(buf: &'a wgpu::Buffer, off: usize, cols: usize) -> Self {
        Self {
            buf,
            off,
            rs: 1,
            cs: cols,
            ones: false,
        }
    }
    /// The same with a row of ones appended: `[A; 1]` times B is `[A B; colsum(B)]`.
    fn with_ones(self) -> Self {
        Self { ones: true, ..self }
    }
}

/// The product's epilogue (bits of `Mm.flags` in `gemm.wgsl`).
#[derive(Clone, Copy)]
enum Epi<'a> {
    /// Plain `C = A B`.
    None,
    /// `+ bias row` (at `off` of the buffer), then LeakyReLU when `leaky`.
    Bias(&'a wgpu::Buffer, usize, bool),
    /// `* LeakyReLU'(act)` with `act` the same shape as C.
    Mask(&'a wgpu::Buffer, usize),
    /// `+ E` with `E` the same shape as C.
    Add(&'a wgpu::Buffer, usize),
}

/// Training state of one AE-CM on a GPU: pipelines, buffers and Adam's step count.
pub struct GpuStep {
    device: wgpu::Device,
    queue: wgpu::Queue,
    name: String,
    gemm: Vec<wgpu::ComputePipeline>,
    rec: wgpu::ComputePipeline,
    cm: wgpu::ComputePipeline,
    adam: wgpu::ComputePipeline,
    splitk: wgpu::ComputePipeline,
    /// The product options it was built with.
    options: GpuOptions,
    /// The parts of split-k products (a placeholder when splitting is off).
    parts: wgpu::Buffer,
    arch: Arch,
    /// Offset of every parameter in the flat buffers, and the total.
    offs: Vec<usize>,
    n_params: usize,
    prm: wgpu::Buffer,
    grad: wgpu::Buffer,
    mom1: wgpu::Buffer,
    mom2: wgpu::Buffer,
    /// acts[0] = the batch, acts[l + 1] = output of deep layer l.
    acts: Vec<wgpu::Buffer>,
    delta: [wgpu::Buffer; 2],
    dz: wgpu::Buffer,
    /// Terms slots, then the CM's scratch, then the reconstruction's partial sums.
    scr: wgpu::Buffer,
    dummy: wgpu::Buffer,
    /// Evaluation: a chunk of the data set's rows, two hidden layers' outputs, and Z of all
    /// `n_eval` rows.
    ev_in: wgpu::Buffer,
    ev_hid: [wgpu::Buffer; 2],
    ev_z: wgpu::Buffer,
    n_eval: usize,
    step_u: wgpu::Buffer,
    b_max: usize,
    max_slots: usize,
    plans: HashMap<(usize, bool), Plan>,
    /// Adam's update count.
    t: i32,
    profile: Option<Profile>,
    /// Submissions of steps not known to have finished, oldest first.
    in_flight: std::collections::VecDeque<wgpu::SubmissionIndex>,
    /// Steps recorded in the terms buffer since the last read, with their term counts.
    slots: Vec<usize>,
    /// Terms already read back (the buffer filled up within an epoch).
    pending: Vec<Vec<f32>>,
}

impl Profile {
    /// Adds one step's timestamps (begin, end per dispatch), summing dispatches of one label.
    fn add(&mut self, labels: &[String], ticks: &[u64]) {
        for (label, be) in labels.iter().zip(ticks.chunks_exact(2)) {
            let ns = be[1].saturating_sub(be[0]) as f64 * self.period_ns;
            match self.totals.iter_mut().find(|t| &t.0 == label) {
                Some(t) => {
                    t.1 += ns;
                    t.2 += 1;
                }
                None => self.totals.push((label.clone(), ns, 1)),
            }
        }
        self.steps += 1;
    }
}

impl Drop for GpuStep {
    /// Prints the profile of `AECM_GPU_PROFILE` runs to standard error.
    fn drop(&mut self) {
        if let Some(r) = self.profile_report() {
            eprint!("{r}");
        }
    }
}

fn backend(e: impl std::fmt::Display) -> AecmError {
    AecmError::Backend(format!("wgpu: {e}"))
}

impl GpuStep {
    /// Sets up the GPU state for `arch` ([`supported`]) with parameters `params` (host vectors
    /// in parameter order), batches of at most `b_max` rows, at most `max_slots` steps' terms
    /// between reads, and [`Self::encode`] of data sets of up to `n_eval` rows. Picks the first
    /// hardware adapter wgpu finds (a software one if there is none).
    pub fn new(
        arch: &Arch,
        params: &[Vec<f32>],
        b_max: usize,
        max_slots: usize,
        n_eval: usize,
    ) -> Result<Self> {
        Self::with_options(
            arch,
            params,
            b_max,
            max_slots,
            n_eval,
            GpuOptions::from_env(),
        )
    }

    /// [`GpuStep::new`] with the product options given instead of read from the environment.
    pub fn with_options(
        arch: &Arch,
        params: &[Vec<f32>],
        b_max: usize,
        max_slots: usize,
        n_eval: usize,
        options: GpuOptions,
    ) -> Result<Self> {
        if !supported(arch) {
            return Err(AecmError::config(
                "device",
                "the GPU step needs an AE-CM without the quadratic layer and K <= 256",
            ));
        }
        let shapes = arch.param_shapes();
        if params.len() != shapes.len()
            || params
                .iter()
                .zip(&shapes)
                .any(|(p, s)| p.len() != s[0] * s[1])
        {
            return Err(AecmError::Backend(
                "GPU step: parameters do not match the architecture".into(),
            ));
        }
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = futures_lite::future::block_on(instance.request_adapter(
            &wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            },
        ))
        .map_err(backend)?;
        let info = adapter.get_info();
        let name = format!("{} ({:?})", info.name, info.backend);
        let profiling = std::env::var_os("AECM_GPU_PROFILE").is_some()
            && adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        let (device, queue) =
            futures_lite::future::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
                label: Some("aecm-gpu-step"),
                required_limits: adapter.limits(),
                required_features: if profiling {
                    wgpu::Features::TIMESTAMP_QUERY
                } else {
                    wgpu::Features::empty()
                },
                ..Default::default()
            }))
            .map_err(backend)?;
        let profile = profiling.then(|| {
            let capacity = 256;
            Profile {
                queries: device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("profile"),
                    ty: wgpu::QueryType::Timestamp,
                    count: capacity,
                }),
                resolve: device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("profile-resolve"),
                    size: u64::from(capacity) * 8,
                    usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                }),
                capacity,
                period_ns: f64::from(queue.get_timestamp_period()),
                totals: Vec::new(),
                steps: 0,
            }
        });
        // a shader the driver or naga rejects, or a buffer over the device's limits, is an error
        // here (the trainer then falls back to burn), not a panic in wgpu's default handler
        let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let pipe_with = |src: &str, label: &str, trusted: bool| {
            let desc = wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(src.into()),
            };
            let module = if trusted {
                let checks = wgpu::ShaderRuntimeChecks {
                    bounds_checks: false,
                    force_loop_bounding: false,
                    ..wgpu::ShaderRuntimeChecks::checked()
                };
                // SAFETY: only the product kernels, whose loops all end (k tiles, fixed counts)
                // and whose every buffer access is guarded by the product's own bounds (rows,
                // columns, k) against buffers sized for them; shared-memory indices stay inside
                // their tiles by construction. Opt-in (`AECM_GPU_TRUSTED=1`) for measurement;
                // the lavapipe tests run these kernels too.
                unsafe { device.create_shader_module_trusted(desc, checks) }
            } else {
                device.create_shader_module(desc)
            };
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        let pipe = |src: &str, label: &str| pipe_with(src, label, false);
        let gemm = TILES
            .iter()
            .map(|&(tm, tn, kind)| pipe_with(&gemm_source(tm, tn, kind), "gemm", options.trusted))
            .collect();
        let rec = pipe(
            &(STEP_WGSL.to_owned() + include_str!("wgsl/rec.wgsl")),
            "rec",
        );
        let cm = pipe(&(STEP_WGSL.to_owned() + include_str!("wgsl/cm.wgsl")), "cm");
        let adam = pipe(
            &(STEP_WGSL.to_owned() + include_str!("wgsl/adam.wgsl")),
            "adam",
        );
        let splitk = pipe(
            &(MM_WGSL.to_owned() + include_str!("wgsl/splitk.wgsl")),
            "splitk",
        );

        let mut offs = Vec::with_capacity(params.len());
        let mut n_params = 0;
        for p in params {
            offs.push(n_params);
            n_params += p.len();
        }
        let storage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC;
        let buf = |label: &str, floats: usize| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: (floats.max(4) * 4) as u64,
                usage: storage,
                mapped_at_creation: false,
            })
        };
        let flat: Vec<f32> = params.iter().flatten().copied().collect();
        let prm = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("params"),
            contents: bytemuck::cast_slice(&flat),
            usage: storage,
        });
        let grad = buf("grads", n_params);
        let mom1 = buf("adam-m", n_params);
        let mom2 = buf("adam-v", n_params);
        let layers = arch.layers();
        let n_deep = layers.len() - 2;
        let mut acts = vec![buf("act0", b_max * arch.input)];
        let mut widest = arch.input;
        for (l, &(_, fout)) in layers[..n_deep].iter().enumerate() {
            acts.push(buf(&format!("act{}", l + 1), b_max * fout));
            widest = widest.max(fout);
        }
        let delta = [buf("delta0", b_max * widest), buf("delta1", b_max * widest)];
        let dz = buf("dz", b_max * arch.embed);
        let (p, k) = (arch.embed, arch.k);
        let scr_len = max_slots * SLOT
            + 2 * b_max * k
            + b_max * p
            + k * p
            + k * k
            + (k + 1) * p
            + (b_max * arch.input).div_ceil(1024);
        let scr = buf("scratch", scr_len);
        let dummy = buf("dummy", 4);
        let ev_rows = EVAL_CHUNK.min(n_eval).max(1);
        let ev_wide = layers[..n_deep / 2].iter().map(|l| l.1).max().unwrap_or(1);
        let ev_in = buf("eval-x", ev_rows * arch.input);
        let ev_hid = [
            buf("eval-h0", ev_rows * ev_wide),
            buf("eval-h1", ev_rows * ev_wide),
        ];
        let ev_z = buf("eval-z", n_eval * arch.embed);
        let split = options.split;
        let parts = if split == Split::Off {
            buf("split-parts", 4)
        } else {
            let rows = b_max.max(ev_rows).max(widest) + 1;
            let max_parts = match split {
                Split::Fixed(n) => n,
                _ => 8,
            };
            buf("split-parts", rows * (widest + 1) * max_parts)
        };
        let step_u = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("step"),
            size: std::mem::size_of::<StepU>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        for s in [scope, oom] {
            if let Some(e) = futures_lite::future::block_on(s.pop()) {
                return Err(backend(e));
            }
        }
        Ok(Self {
            device,
            queue,
            name,
            gemm,
            rec,
            cm,
            adam,
            splitk,
            options,
            parts,
            arch: arch.clone(),
            offs,
            n_params,
            prm,
            grad,
            mom1,
            mom2,
            acts,
            delta,
            dz,
            scr,
            dummy,
            ev_in,
            ev_hid,
            ev_z,
            n_eval,
            step_u,
            b_max,
            max_slots,
            plans: HashMap::new(),
            t: 0,
            profile,
            in_flight: std::collections::VecDeque::new(),
            slots: Vec::new(),
            pending: Vec::new(),
        })
    }

    /// The adapter's name and graphics API.
    pub fn adapter_name(&self) -> &str {
        &self.name
    }

    /// Scratch layout: (terms, G, R, dlogits, U, S, [dU; colsum(dU)], partial sums) offsets.
    fn scratch_offsets(&self) -> [usize; 8] {
        let (p, k, b) = (self.arch.embed, self.arch.k, self.b_max);
        let g = self.max_slots * SLOT;
        let r = g + b * k;
        let dl = r + b * p;
        let u = dl + b * k;
        let s = u + k * p;
        let du = s + k * k;
        let part = du + (k + 1) * p;
        [0, g, r, dl, u, s, du, part]
    }

    fn uniform(&self, words: &[u32]) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: bytemuck::cast_slice(words),
                usage: wgpu::BufferUsages::UNIFORM,
            })
    }

    fn pipeline(&self, kern: Kern) -> &wgpu::ComputePipeline {
        match kern {
            Kern::Gemm(i) => &self.gemm[i],
            Kern::Rec => &self.rec,
            Kern::Cm => &self.cm,
            Kern::Adam => &self.adam,
            Kern::SplitK => &self.splitk,
        }
    }

    /// Records one dispatch into a compute pass.
    fn record(&self, pass: &mut wgpu::ComputePass<'_>, ps: &Pass) {
        pass.set_pipeline(self.pipeline(ps.kern));
        pass.set_bind_group(0, &ps.bg, &[]);
        pass.dispatch_workgroups(ps.groups[0], ps.groups[1], ps.groups[2]);
    }

    fn bind(&self, kern: Kern, bufs: &[&wgpu::Buffer]) -> wgpu::BindGroup {
        let pipe = self.pipeline(kern);
        let entries: Vec<wgpu::BindGroupEntry<'_>> = bufs
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipe.get_bind_group_layout(0),
            entries: &entries,
        })
    }

    /// `C (m x n at c_off of c) = alpha A B` with an epilogue, as one recorded dispatch, or two
    /// when k is split (`m` counts the row of ones of `a.ones`).
    #[allow(clippy::too_many_arguments)]
    fn gemm_pass(
        &self,
        m: usize,
        n: usize,
        k: usize,
        a: Op<'_>,
        b: Op<'_>,
        c: &wgpu::Buffer,
        c_off: usize,
        alpha: f32,
        epi: Epi<'_>,
    ) -> Vec<Pass> {
        let (flags, e, e_off) = match epi {
            Epi::None => (0u32, &self.dummy, 0),
            Epi::Bias(buf, off, leaky) => (2 | if leaky { 4 } else { 0 }, buf, off),
            Epi::Mask(buf, off) => (8, buf, off),
            Epi::Add(buf, off) => (16, buf, off),
        };
        let flags = flags | if a.ones { 32 } else { 0 };
        let w = |v: usize| v as u32;
        let v = tile_for(m, n, self.options.tiles);
        let (tm, tn, kind) = (TILES[v].0 as usize, TILES[v].1 as usize, TILES[v].2);
        let groups = [w(n.div_ceil(16 * tn)), w(m.div_ceil(16 * tm)), 1];
        let parts = if kind != Gemm::Array {
            split_parts(self.options.split, (groups[0] * groups[1]) as usize, k)
        } else {
            1
        };
        let kc = k.div_ceil(parts).div_ceil(16) * 16;
        let parts = k.div_ceil(kc.max(1)).max(1);
        let mut words = [
            w(m),
            w(n),
            w(k),
            w(a.off),
            w(a.rs),
            w(a.cs),
            w(b.off),
            w(b.rs),
            w(b.cs),
            w(c_off),
            flags,
            w(e_off),
            alpha.to_bits(),
            SLOPE.to_bits(),
            w(kc),
            0,
        ];
        let label = format!("product {m}x{n}x{k} ({}{tm}{tn})", kind.prefix());
        if parts == 1 {
            let ub = self.uniform(&words);
            let bg = self.bind(Kern::Gemm(v), &[&ub, a.buf, b.buf, c, e]);
            return vec![Pass {
                kern: Kern::Gemm(v),
                bg,
                groups,
                label,
            }];
        }
        // split k: the parts into `parts`, then their sum with the epilogue into C
        let (c_off_word, flags_word, kc_word) = (9, 10, 14);
        let mut pw = words;
        pw[c_off_word] = 0;
        pw[flags_word] = (flags & 32) | 64;
        let ub = self.uniform(&pw);
        let bg = self.bind(
            Kern::Gemm(v),
            &[&ub, a.buf, b.buf, &self.parts, &self.dummy],
        );
        let first = Pass {
            kern: Kern::Gemm(v),
            bg,
            groups: [groups[0], groups[1], w(parts)],
            label: format!("{label} split {parts}"),
        };
        words[kc_word] = w(parts);
        let ub = self.uniform(&words);
        let bg = self.bind(Kern::SplitK, &[&ub, &self.parts, c, e]);
        let cells = (m * n).div_ceil(256);
        let second = Pass {
            kern: Kern::SplitK,
            bg,
            groups: [w(cells.min(65535)), w(cells.div_ceil(65535)), 1],
            label: format!("{label} split sum"),
        };
        vec![first, second]
    }

    /// The dispatches of a step on `b` rows (AE-CM loss when `cm`, else the deep MSE).
    fn plan(&self, b: usize, cm: bool) -> Plan {
        let layers = self.arch.layers();
        let n_deep = layers.len() - 2;
        let n_enc = n_deep / 2;
        let (d, p, k) = (self.arch.input, self.arch.embed, self.arch.k);
        let o = &self.offs;
        let mut passes = Vec::new();
        // forward
        for (l, &(fin, fout)) in layers[..n_deep].iter().enumerate() {
            let leaky = l + 1 != n_enc && l + 1 != n_deep;
            passes.extend(self.gemm_pass(
                b,
                fout,
                fin,
                Op::rm(&self.acts[l], 0, fin),
                Op::rm(&self.prm, o[2 * l], fout),
                &self.acts[l + 1],
                0,
                1.0,
                Epi::Bias(&self.prm, o[2 * l + 1], leaky),
            ));
        }
        // the reconstruction's gradient into delta[0]
        let [_, g_off, r_off, dl_off, u_off, s_off, du_off, part_off] = self.scratch_offsets();
        let nparts = (b * d).div_ceil(1024);
        let ru = self.uniform(&[(b * d) as u32, part_off as u32, 0, 0]);
        let bg = self.bind(
            Kern::Rec,
            &[
                &ru,
                &self.step_u,
                &self.acts[n_deep],
                &self.acts[0],
                &self.delta[0],
                &self.scr,
            ],
        );
        passes.push(Pass {
            kern: Kern::Rec,
            bg,
            groups: [nparts as u32, 1, 1],
            label: "reconstruction gradient".into(),
        });
        // the clustering module (or the MSE's sum alone)
        let c = 2 * n_deep;
        let cu = self.uniform(&[
            b as u32,
            p as u32,
            k as u32,
            o[c] as u32,
            o[c + 1] as u32,
            o[c + 2] as u32,
            o[c + 3] as u32,
            g_off as u32,
            r_off as u32,
            dl_off as u32,
            u_off as u32,
            s_off as u32,
            part_off as u32,
            nparts as u32,
            0,
            du_off as u32,
        ]);
        let bg = self.bind(
            Kern::Cm,
            &[
                &cu,
                &self.step_u,
                &self.prm,
                &self.acts[n_enc],
                &self.dz,
                &self.scr,
            ],
        );
        passes.push(Pass {
            kern: Kern::Cm,
            bg,
            groups: [1, 1, 1],
            label: "clustering module".into(),
        });
        if cm {
            // [dW_enc; db_enc] = [Z 1]^T dlogits
            passes.extend(self.gemm_pass(
                p + 1,
                k,
                b,
                Op::rm_t(&self.acts[n_enc], 0, p).with_ones(),
                Op::rm(&self.scr, dl_off, k),
                &self.grad,
                o[c],
                1.0,
                Epi::None,
            ));
            // [dW_dec; db_dec] = -2 [G 1]^T R + [dU; colsum(dU)]
            passes.extend(self.gemm_pass(
                k + 1,
                p,
                b,
                Op::rm_t(&self.scr, g_off, k).with_ones(),
                Op::rm(&self.scr, r_off, p),
                &self.grad,
                o[c + 2],
                -2.0,
                Epi::Add(&self.scr, du_off),
            ));
        }
        // backward, top layer first; delta[cur] holds dLoss/d(output of layer l)
        let mut cur = 0;
        for l in (0..n_deep).rev() {
            let (fin, fout) = layers[l];
            // [dW; db] = [input 1]^T delta (the bias follows the kernel in the buffers)
            passes.extend(self.gemm_pass(
                fin + 1,
                fout,
                b,
                Op::rm_t(&self.acts[l], 0, fin).with_ones(),
                Op::rm(&self.delta[cur], 0, fout),
                &self.grad,
                o[2 * l],
                1.0,
                Epi::None,
            ));
            if l > 0 {
                // the gradient of layer l - 1's output: LeakyReLU' of it, or + dZ at Z
                let epi = if l == n_enc {
                    if cm { Epi::Add(&self.dz, 0) } else { Epi::None }
                } else {
                    Epi::Mask(&self.acts[l], 0)
                };
                passes.extend(self.gemm_pass(
                    b,
                    fin,
                    fout,
                    Op::rm(&self.delta[cur], 0, fout),
                    Op::rm_t(&self.prm, o[2 * l], fout),
                    &self.delta[1 - cur],
                    0,
                    1.0,
                    epi,
                ));
                cur = 1 - cur;
            }
        }
        let bg = self.bind(
            Kern::Adam,
            &[&self.step_u, &self.grad, &self.prm, &self.mom1, &self.mom2],
        );
        let groups = self.n_params.div_ceil(256).min(4096) as u32;
        passes.push(Pass {
            kern: Kern::Adam,
            bg,
            groups: [groups, 1, 1],
            label: "adam".into(),
        });
        Plan {
            passes,
            n_terms: if cm { 5 } else { 1 },
        }
    }

    /// One training step on the batch `x` (`b x d`, row-major, `b` at most `b_max`): forward,
    /// backward and Adam (`lr`, `eps`; moments `beta1` 0.9, `beta2` 0.999 as
    /// [`super::adam::Adam`]) of the parameters the loss trains (the deep ones for the MSE; all
    /// for the AE-CM), skipping the first kernel when `freeze_first`. Recorded and submitted;
    /// returns without waiting.
    pub fn step(
        &mut self,
        x: &[f32],
        loss: HostLoss,
        w: &LossWeights,
        lr: f64,
        eps: f64,
        freeze_first: bool,
    ) -> Result<()> {
        let d = self.arch.input;
        let b = x.len() / d;
        if b == 0 || b > self.b_max || x.len() != b * d {
            return Err(AecmError::Backend(format!(
                "GPU step: a batch of {} values is not 1 to {} rows of {d}",
                x.len(),
                self.b_max
            )));
        }
        if self.slots.len() == self.max_slots {
            let t = self.read_terms()?;
            self.pending.extend(t);
            self.slots.clear();
        }
        let cm = loss == HostLoss::AeCm;
        if !self.plans.contains_key(&(b, cm)) {
            let plan = self.plan(b, cm);
            self.plans.insert((b, cm), plan);
        }
        self.t += 1;
        let (beta1, beta2) = (0.9f64, 0.999f64);
        let lr_t = lr * (1.0 - beta2.powi(self.t)).sqrt() / (1.0 - beta1.powi(self.t));
        let (scale, terms0) = match loss {
            HostLoss::AeMse => (1.0 / (b * d) as f64, 1.0 / (b * d) as f64),
            HostLoss::AeCm => (w.beta, w.beta),
        };
        let n_deep = 2 * (self.arch.hidden.len() + 1);
        let lo = if freeze_first { self.offs[1] } else { 0 };
        let hi = if cm {
            self.n_params
        } else {
            self.offs[2 * n_deep]
        };
        let mut su = StepU {
            two_scale: (2.0 * scale) as f32,
            terms0: terms0 as f32,
            lambda: w.lambda as f32,
            lr_t: lr_t as f32,
            b1: beta1 as f32,
            b2: beta2 as f32,
            c1: (1.0 - beta1) as f32,
            c2: (1.0 - beta2) as f32,
            eps: eps as f32,
            slot: self.slots.len() as u32,
            nw: 1,
            adam_lo: lo as u32,
            adam_hi: hi as u32,
            has_cm: u32::from(cm),
            pad: [0; 2],
            wv: [0.0; MAX_K],
        };
        // the prior's weight 1 - alpha by rank (one value for a scalar alpha)
        if w.alpha.len() <= 1 {
            su.wv[0] = (1.0 - w.alpha.first().copied().unwrap_or(1.0)) as f32;
        } else {
            for (slot, a) in su.wv.iter_mut().zip(&w.alpha) {
                *slot = (1.0 - a) as f32;
            }
            su.nw = w.alpha.len().min(MAX_K) as u32;
        }
        self.queue
            .write_buffer(&self.acts[0], 0, bytemuck::cast_slice(x));
        self.queue
            .write_buffer(&self.step_u, 0, bytemuck::bytes_of(&su));
        let Some(plan) = self.plans.get(&(b, cm)) else {
            return Err(AecmError::Backend("GPU step: no plan".into()));
        };
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        let n_passes = plan.passes.len();
        let n_terms = plan.n_terms;
        match &self.profile {
            Some(pr) if 2 * n_passes as u32 <= pr.capacity => {
                for (i, ps) in plan.passes.iter().enumerate() {
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: None,
                        timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                            query_set: &pr.queries,
                            beginning_of_pass_write_index: Some(2 * i as u32),
                            end_of_pass_write_index: Some(2 * i as u32 + 1),
                        }),
                    });
                    self.record(&mut pass, ps);
                }
                enc.resolve_query_set(&pr.queries, 0..2 * n_passes as u32, &pr.resolve, 0);
            }
            _ => {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: None,
                    timestamp_writes: None,
                });
                for ps in &plan.passes {
                    self.record(&mut pass, ps);
                }
            }
        }
        let idx = self.queue.submit([enc.finish()]);
        self.slots.push(n_terms);
        self.in_flight.push_back(idx);
        if self.in_flight.len() > MAX_IN_FLIGHT
            && let Some(old) = self.in_flight.pop_front()
        {
            self.device
                .poll(wgpu::PollType::Wait {
                    submission_index: Some(old),
                    timeout: None,
                })
                .map_err(backend)?;
        }
        if let Some(pr) = &self.profile {
            let ticks = self.read_u64(&pr.resolve, 2 * n_passes)?;
            let labels: Vec<String> = plan.passes.iter().map(|p| p.label.clone()).collect();
            if let Some(pr) = self.profile.as_mut() {
                pr.add(&labels, &ticks);
            }
        }
        Ok(())
    }

    /// The per-dispatch GPU times so far (`AECM_GPU_PROFILE`), or `None` when not profiling.
    pub fn profile_report(&self) -> Option<String> {
        let pr = self.profile.as_ref()?;
        let steps = pr.steps.max(1) as f64;
        let total: f64 = pr.totals.iter().map(|t| t.1).sum::<f64>() / steps;
        let mut out = format!(
            "GPU time per step ({} steps): {:.3} ms in dispatches\n",
            pr.steps,
            total * 1e-6
        );
        for (label, ns, count) in &pr.totals {
            let per = ns / steps;
            out += &format!(
                "{:>9.1} us {:>5.1}%  x{:<3} {label}\n",
                per * 1e-3,
                100.0 * per / total.max(1e-9),
                (*count as f64 / steps).round()
            );
        }
        Some(out)
    }

    /// Copies `floats` values from `src` at element `off` to the host (waits for the GPU).
    fn read(&self, src: &wgpu::Buffer, off: usize, floats: usize) -> Result<Vec<f32>> {
        if floats == 0 {
            return Ok(Vec::new());
        }
        let bytes = (floats * 4) as u64;
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        enc.copy_buffer_to_buffer(src, (off * 4) as u64, &staging, 0, bytes);
        self.queue.submit([enc.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(backend)?;
        rx.recv().map_err(backend)?.map_err(backend)?;
        let out = {
            let view = staging.get_mapped_range(..).map_err(backend)?;
            bytemuck::cast_slice::<u8, f32>(&view).to_vec()
        };
        staging.unmap();
        Ok(out)
    }

    /// `count` 64-bit values of `src` (timestamps), waiting for the GPU.
    fn read_u64(&self, src: &wgpu::Buffer, count: usize) -> Result<Vec<u64>> {
        let halves = self.read(src, 0, 2 * count)?;
        Ok(halves
            .chunks_exact(2)
            .map(|h| u64::from(h[0].to_bits()) | (u64::from(h[1].to_bits()) << 32))
            .collect())
    }

    fn read_terms(&self) -> Result<Vec<Vec<f32>>> {
        let all = self.read(&self.scr, 0, self.slots.len() * SLOT)?;
        Ok(self
            .slots
            .iter()
            .enumerate()
            .map(|(s, &n)| all[s * SLOT..s * SLOT + n].to_vec())
            .collect())
    }

    /// The loss terms of every step since the last call, oldest first (waits for the GPU).
    pub fn take_terms(&mut self) -> Result<Vec<Vec<f32>>> {
        let mut out = std::mem::take(&mut self.pending);
        out.extend(self.read_terms()?);
        self.slots.clear();
        Ok(out)
    }

    /// The loss terms of the last step (waits for the GPU).
    pub fn last_terms(&self) -> Result<Vec<f32>> {
        match self.slots.len() {
            0 => Ok(self.pending.last().cloned().unwrap_or_default()),
            s => {
                let n = self.slots[s - 1];
                self.read(&self.scr, (s - 1) * SLOT, n)
            }
        }
    }

    /// Replaces the parameters (host vectors in parameter order; Adam's moments stay).
    pub fn set_params(&self, params: &[Vec<f32>]) -> Result<()> {
        let flat: Vec<f32> = params.iter().flatten().copied().collect();
        if flat.len() != self.n_params {
            return Err(AecmError::Backend(
                "GPU step: parameters do not match the architecture".into(),
            ));
        }
        self.queue
            .write_buffer(&self.prm, 0, bytemuck::cast_slice(&flat));
        Ok(())
    }

    /// The encoder's output `Z` (`n x p`, row-major) of `x` (`n x d`, at most `n_eval` rows),
    /// in chunks of 4096 rows (waits for the GPU).
    pub fn encode(&self, x: &[f32], n: usize) -> Result<Vec<f32>> {
        let (d, p) = (self.arch.input, self.arch.embed);
        if n > self.n_eval || x.len() != n * d {
            return Err(AecmError::Backend(format!(
                "GPU encode: {} values for {n} rows of {d} (at most {} rows)",
                x.len(),
                self.n_eval
            )));
        }
        let layers = self.arch.layers();
        let n_enc = (layers.len() - 2) / 2;
        let o = &self.offs;
        let rows = EVAL_CHUNK.min(n).max(1);
        for start in (0..n).step_by(rows) {
            let m = (n - start).min(rows);
            self.queue.write_buffer(
                &self.ev_in,
                0,
                bytemuck::cast_slice(&x[start * d..(start + m) * d]),
            );
            let mut passes = Vec::with_capacity(n_enc);
            for (l, &(fin, fout)) in layers[..n_enc].iter().enumerate() {
                let a = if l == 0 {
                    Op::rm(&self.ev_in, 0, fin)
                } else {
                    Op::rm(&self.ev_hid[(l - 1) % 2], 0, fin)
                };
                let (c, c_off) = if l + 1 == n_enc {
                    (&self.ev_z, start * p)
                } else {
                    (&self.ev_hid[l % 2], 0)
                };
                passes.extend(self.gemm_pass(
                    m,
                    fout,
                    fin,
                    a,
                    Op::rm(&self.prm, o[2 * l], fout),
                    c,
                    c_off,
                    1.0,
                    Epi::Bias(&self.prm, o[2 * l + 1], l + 1 != n_enc),
                ));
            }
            let mut enc = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: None,
                    timestamp_writes: None,
                });
                for ps in &passes {
                    self.record(&mut pass, ps);
                }
            }
            self.queue.submit([enc.finish()]);
        }
        self.read(&self.ev_z, 0, n * p)
    }

    /// The current parameters as host vectors in parameter order (waits for the GPU).
    pub fn read_params(&self) -> Result<Vec<Vec<f32>>> {
        Ok(self.split(&self.read(&self.prm, 0, self.n_params)?))
    }

    /// A flat buffer's contents as host vectors in parameter order.
    fn split(&self, flat: &[f32]) -> Vec<Vec<f32>> {
        let mut out = Vec::with_capacity(self.offs.len());
        for (i, &o) in self.offs.iter().enumerate() {
            let end = self.offs.get(i + 1).copied().unwrap_or(self.n_params);
            out.push(flat.get(o..end).map(<[f32]>::to_vec).unwrap_or_default());
        }
        out
    }

    /// Adam's update count and moments (waits for the GPU).
    pub fn read_adam(&self) -> Result<AdamState> {
        Ok(AdamState {
            t: self.t,
            m: self.split(&self.read(&self.mom1, 0, self.n_params)?),
            v: self.split(&self.read(&self.mom2, 0, self.n_params)?),
        })
    }

    /// Restores Adam's update count and moments ([`Self::read_adam`]; an empty vector leaves
    /// that parameter's moments at zero).
    pub fn set_adam(&mut self, state: &AdamState) -> Result<()> {
        let flat = |x: &[Vec<f32>]| -> Result<Vec<f32>> {
            let mut out = vec![0.0f32; self.n_params];
            for (i, p) in x.iter().enumerate().filter(|(_, p)| !p.is_empty()) {
                let o = self.offs.get(i).copied().unwrap_or(usize::MAX);
                match out.get_mut(o..o.saturating_add(p.len())) {
                    Some(dst)
                        if o + p.len()
                            <= self.offs.get(i + 1).copied().unwrap_or(self.n_params) =>
                    {
                        dst.copy_from_slice(p);
                    }
                    _ => {
                        return Err(AecmError::Backend(format!(
                            "GPU step: Adam's moments of parameter {i} do not match the architecture"
                        )));
                    }
                }
            }
            Ok(out)
        };
        let (fm, fv) = (flat(&state.m)?, flat(&state.v)?);
        self.queue
            .write_buffer(&self.mom1, 0, bytemuck::cast_slice(&fm));
        self.queue
            .write_buffer(&self.mom2, 0, bytemuck::cast_slice(&fv));
        self.t = state.t;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::adam::Adam;
    use crate::model::dense;
    use crate::model::net::NetKind;
    use crate::util::{SeededRng, rng};
    use rand::RngExt;

    fn arch(hidden: &[usize]) -> Arch {
        arch_in(70, hidden)
    }

    fn arch_in(input: usize, hidden: &[usize]) -> Arch {
        Arch {
            kind: NetKind::AeCm,
            input,
            hidden: hidden.to_vec(),
            embed: 5,
            k: 4,
            quadratic: false,
        }
    }

    fn randn(r: &mut SeededRng, n: usize, s: f32) -> Vec<f32> {
        (0..n).map(|_| (r.random::<f32>() - 0.5) * s).collect()
    }

    /// `steps` GPU steps against the host step and host Adam; batches of `bs[i]` rows.
    fn compare(loss: HostLoss, alpha: Vec<f64>, freeze: bool, bs: &[usize], a: Arch) {
        compare_tiles(("", false), loss, alpha, freeze, bs, a);
    }

    /// [`compare`] with the product variants `tiles` names ([`tiles_named`]), their shaders
    /// compiled without runtime checks where `trusted`.
    fn compare_tiles(
        (tiles, trusted): (&str, bool),
        loss: HostLoss,
        alpha: Vec<f64>,
        freeze: bool,
        bs: &[usize],
        a: Arch,
    ) {
        let mut r = rng(7, 0);
        let mut host: Vec<Vec<f32>> = a
            .param_shapes()
            .iter()
            .map(|s| randn(&mut r, s[0] * s[1], 0.6))
            .collect();
        let w = LossWeights {
            alpha,
            beta: 0.7,
            lambda: 0.3,
            cm_terms: [true; 4],
        };
        let options = GpuOptions {
            tiles: tiles_named(tiles),
            trusted,
            ..GpuOptions::from_env()
        };
        let mut gpu = GpuStep::with_options(&a, &host, 70, 2, 10_000, options)
            .expect("a wgpu adapter (lavapipe in CI)");
        eprintln!("adapter: {} ({options:?})", gpu.adapter_name());
        let mut adam = Adam::new(host.len(), 1e-3);
        let mut host_terms = Vec::new();
        for &b in bs {
            let x = randn(&mut r, b * a.input, 2.0);
            let out = dense::step(&a, &host, &x, b, loss, &w);
            let mut grads = out.grads;
            if freeze {
                grads[0].fill(0.0);
            }
            adam.step_host(0.01, &mut host, &grads);
            host_terms.push(out.terms);
            gpu.step(&x, loss, &w, 0.01, 1e-3, freeze).unwrap();
        }
        // three steps with two slots: the terms buffer was read back once in between
        let terms = gpu.take_terms().unwrap();
        assert_eq!(terms.len(), bs.len());
        for (g, h) in terms.iter().zip(&host_terms) {
            assert_eq!(g.len(), h.len());
            for (x, y) in g.iter().zip(h) {
                assert!((x - y).abs() <= 1e-3 * (1.0 + y.abs()), "term {x} vs {y}");
            }
        }
        let got = gpu.read_params().unwrap();
        let mut worst = 0f32;
        for (i, (g, h)) in got.iter().zip(&host).enumerate() {
            assert_eq!(g.len(), h.len(), "parameter {i}");
            for (x, y) in g.iter().zip(h) {
                worst = worst.max((x - y).abs());
                assert!((x - y).abs() < 2e-4, "parameter {i}: gpu {x} vs host {y}");
            }
        }
        eprintln!("largest parameter difference {worst:e}");
        // the encoder over a data set of two chunks and a part, against the host's
        let n = 2 * EVAL_CHUNK + 808;
        let x = randn(&mut r, n * a.input, 2.0);
        let z = gpu.encode(&x, n).unwrap();
        let zh = dense::encode(&a, &got, &x, n);
        assert_eq!(z.len(), zh.len());
        for (i, (g, h)) in z.iter().zip(&zh).enumerate() {
            assert!(
                (g - h).abs() <= 1e-4 * (1.0 + h.abs()),
                "z[{i}]: gpu {g} vs host {h}"
            );
        }
    }

    #[test]
    fn buffers_over_the_device_limits_are_an_error_not_a_panic() {
        let a = arch(&[66, 20]);
        let host: Vec<Vec<f32>> = a
            .param_shapes()
            .iter()
            .map(|s| vec![0.1; s[0] * s[1]])
            .collect();
        // batches of 2^33 rows of 70 floats: far over any device's largest buffer
        let r = GpuStep::new(&a, &host, 1 << 33, 2, 10);
        assert!(
            matches!(&r, Err(AecmError::Backend(m)) if m.starts_with("wgpu")),
            "{:?}",
            r.err()
        );
    }

    #[test]
    fn aecm_steps_match_the_host_step() {
        // alpha by rank, batches of 64, 37 (a partial last batch) and 64 rows
        compare(
            HostLoss::AeCm,
            vec![1.0, 1.5, 2.0, 4.0],
            false,
            &[64, 37, 64],
            arch(&[66, 20]),
        );
        // the UCI network: no hidden layer (d -> 2K -> d)
        compare(HostLoss::AeCm, vec![1.5], false, &[70, 70], arch(&[]));
    }

    #[test]
    fn pretraining_and_a_scalar_alpha_and_a_frozen_kernel_match_the_host_step() {
        compare(
            HostLoss::AeMse,
            vec![2.0],
            true,
            &[70, 5, 70],
            arch(&[66, 20]),
        );
        compare(
            HostLoss::AeCm,
            vec![2.0],
            false,
            &[9, 70, 1],
            arch(&[66, 20]),
        );
    }

    #[test]
    fn every_product_variant_matches_the_host_step() {
        // the kinds with the tile chosen per shape, and single variants forced (64 x 64 tiles
        // on these small products, and the first, array kernel)
        assert_eq!(tiles_named("u"), (None, Gemm::Unrolled));
        assert_eq!(tiles_named("p44"), (Some(8), Gemm::Vec4));
        assert_eq!(tiles_named("auto"), (None, Gemm::Vec4));
        assert_eq!(tile_for(256, 500, tiles_named("p")), 9);
        assert_eq!(tile_for(4096, 500, tiles_named("p")), 8);
        assert_eq!(tile_for(4096, 500, tiles_named("")), 0);
        for tiles in [
            ("u", false),
            ("p", false),
            ("u44", false),
            ("p44", false),
            ("a22", false),
            ("", true),
            ("u", true),
        ] {
            compare_tiles(
                tiles,
                HostLoss::AeCm,
                vec![1.5, 2.0],
                false,
                &[64, 37],
                arch(&[66, 20]),
            );
        }
        // the prefetching kernel on split products (each part starts its k at its own offset)
        compare_tiles(
            ("p", false),
            HostLoss::AeCm,
            vec![1.5],
            false,
            &[70],
            arch_in(600, &[520, 20]),
        );
    }

    #[test]
    fn deep_products_split_k_by_default_and_match_the_host_step() {
        // the default split (`auto`) cuts products of few workgroups and k >= 512 (MNIST's
        // 256x10x2000, 8 workgroups, into 7 parts; 256x500x2000, 64, into 5); here the first
        // layer's 70x520x600 (27 workgroups of 32x64) into 2
        let auto = Split::Auto(512);
        assert_eq!(split_parts(auto, 8, 2000), 7);
        assert_eq!(split_parts(auto, 64, 2000), 5);
        assert_eq!(split_parts(auto, 128, 2000), 3);
        assert_eq!(split_parts(auto, 64, 500), 1);
        assert_eq!(split_parts(auto, 200, 2000), 1);
        // `auto:256` also cuts MNIST's 256x500x500 (64 workgroups) into parts of at least 128
        assert_eq!(split_parts(Split::Auto(256), 64, 500), 3);
        assert_eq!(split_parts(Split::Auto(256), 64, 200), 1);
        assert_eq!(split_parts(Split::Off, 8, 2000), 1);
        if std::env::var_os("AECM_GPU_SPLITK").is_none() {
            assert!(Split::from_env() == auto);
        }
        assert_eq!(split_parts(auto, 27, 600), 2);
        compare(
            HostLoss::AeCm,
            vec![1.5, 2.0],
            false,
            &[70, 41],
            arch_in(600, &[520, 20]),
        );
    }
}
