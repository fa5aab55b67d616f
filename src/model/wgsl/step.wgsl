// Shared by rec.wgsl, cm.wgsl and adam.wgsl (model/gpu.rs puts it in front of them): the
// per-step uniform (`StepU` in model/gpu.rs): the reconstruction's 2 x scale, the first term's
// factor, lambda, Adam's bias-corrected rate, moments and epsilon, the step's slot in the terms
// buffer, the prior's weights by rank (nw of them in wv), the parameter range Adam updates, and
// whether the loss has the clustering module.
struct Step {
    two_scale: f32, terms0: f32, lambda: f32, lr_t: f32,
    b1: f32, b2: f32, c1: f32, c2: f32,
    eps: f32, slot: u32, nw: u32, adam_lo: u32,
    adam_hi: u32, has_cm: u32, pad0: u32, pad1: u32,
    wv: array<vec4<f32>, 64>,
}
