// The sum of a split-k product's parts (gemm4.wgsl, flag 64) with alpha and the product's
// epilogue: C (m x n at c_off) = alpha * sum_z parts[z m n + i n + j] [+ C] [+ bias]
// [LeakyReLU] [* LeakyReLU'(E)] [+ E]; `kc` holds the number of parts.
struct Mm {
    m: u32, n: u32, k: u32, a_off: u32,
    a_rs: u32, a_cs: u32, b_off: u32, b_rs: u32,
    b_cs: u32, c_off: u32, flags: u32, e_off: u32,
    alpha: f32, slope: f32, kc: u32, pad1: u32,
}
@group(0) @binding(0) var<uniform> u: Mm;
@group(0) @binding(1) var<storage, read> parts: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<storage, read> e: array<f32>;

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let q = gid.x + gid.y * 65535u * 256u;
    if (q >= u.m * u.n) {
        return;
    }
    let gj = q % u.n;
    var acc = 0.0;
    for (var z = 0u; z < u.kc; z++) {
        acc += parts[z * u.m * u.n + q];
    }
    let idx = u.c_off + q;
    let eidx = u.e_off + q;
    var v = u.alpha * acc;
    if ((u.flags & 1u) != 0u) {
        v += c[idx];
    }
    if ((u.flags & 2u) != 0u) {
        v += e[u.e_off + gj];
    }
    if ((u.flags & 4u) != 0u && v < 0.0) {
        v *= u.slope;
    }
    if ((u.flags & 8u) != 0u && e[eidx] < 0.0) {
        v *= u.slope;
    }
    if ((u.flags & 16u) != 0u) {
        v += e[eidx];
    }
    c[idx] = v;
}
