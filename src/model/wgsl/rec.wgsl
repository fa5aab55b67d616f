// delta = two_scale (X_hat - X) over `count` entries; per workgroup of 1024 entries the sum of
// squares goes to scr[part_off + workgroup].
struct Rec { count: u32, part_off: u32, pad0: u32, pad1: u32 }
// (struct Step: step.wgsl)
@group(0) @binding(0) var<uniform> u: Rec;
@group(0) @binding(1) var<uniform> st: Step;
@group(0) @binding(2) var<storage, read> xh: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read_write> delta: array<f32>;
@group(0) @binding(5) var<storage, read_write> scr: array<f32>;
var<workgroup> red: array<f32, 256>;

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let t = lid.x;
    var s = 0.0;
    for (var r = 0u; r < 4u; r++) {
        let idx = wid.x * 1024u + r * 256u + t;
        if (idx < u.count) {
            let d = xh[idx] - x[idx];
            s += d * d;
            delta[idx] = st.two_scale * d;
        }
    }
    red[t] = s;
    workgroupBarrier();
    for (var h = 128u; h > 0u; h >>= 1u) {
        if (t < h) {
            red[t] += red[t + h];
        }
        workgroupBarrier();
    }
    if (t == 0u) {
        scr[u.part_off + wid.x] = red[0];
    }
}
