// Adam (TensorFlow's epsilon placement, as model/adam.rs) over p[adam_lo..adam_hi].
struct Step {
    two_scale: f32, terms0: f32, lambda: f32, lr_t: f32,
    b1: f32, b2: f32, c1: f32, c2: f32,
    eps: f32, slot: u32, nw: u32, adam_lo: u32,
    adam_hi: u32, has_cm: u32, pad0: u32, pad1: u32,
    wv: array<vec4<f32>, 64>,
}
@group(0) @binding(0) var<uniform> st: Step;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read_write> p: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;

const THREADS: u32 = 1048576u; // 4096 workgroups of 256

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = st.adam_lo + gid.x; i < st.adam_hi; i += THREADS) {
        let gi = g[i];
        let mj = m[i] * st.b1 + gi * st.c1;
        let vj = v[i] * st.b2 + gi * gi * st.c2;
        p[i] -= mj / (sqrt(vj) + st.eps) * st.lr_t;
        m[i] = mj;
        v[i] = vj;
    }
}
