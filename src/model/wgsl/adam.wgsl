// Adam (TensorFlow's epsilon placement, as model/adam.rs) over p[adam_lo..adam_hi].
// (struct Step: step.wgsl)
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
