// The sum of a split-k product's parts (gemm4.wgsl, flag 64) with alpha and the product's
// epilogue: C (m x n at c_off) = alpha * sum_z parts[z m n + i n + j] [+ C] [+ bias]
// [LeakyReLU] [* LeakyReLU'(E)] [+ E]; `kc` holds the number of parts.
// (struct Mm and fn epilogue: mm.wgsl)
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
    var acc = 0.0;
    for (var z = 0u; z < u.kc; z++) {
        acc += parts[z * u.m * u.n + q];
    }
    epilogue(q / u.n, q % u.n, acc);
}
