// C (m x n, row-major at c_off) = alpha * A B [+ C] [+ bias] [LeakyReLU] [* LeakyReLU'(E)] [+ E]
// with A(i, k) = a[a_off + i a_rs + k a_cs] and B(k, j) = b[b_off + k b_rs + j b_cs] (strides
// express transposes); with flag 32, A's last row is ones (a weight gradient and, in its last
// row, the bias gradient, which follows the kernel in the parameter buffer). Tiles of BM x BN outputs, 16 deep, 256 threads (16 x 16) of TM x TN
// outputs each; model/gpu.rs writes TM and TN in before compiling (tile variants).
// (struct Mm and fn epilogue: mm.wgsl)
@group(0) @binding(0) var<uniform> u: Mm;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
@group(0) @binding(4) var<storage, read> e: array<f32>;

const TM: u32 = {TM}u;
const TN: u32 = {TN}u;
const BM: u32 = 16u * TM;
const BN: u32 = 16u * TN;
const BK: u32 = 16u;
var<workgroup> As: array<f32, {AS}>; // [BK][BM]
var<workgroup> Bs: array<f32, {BS}>; // [BK][BN]

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let tx = lid.x;
    let ty = lid.y;
    let t = ty * 16u + tx;
    let row0 = wid.y * BM;
    let col0 = wid.x * BN;
    var acc: array<f32, {ACC}>;
    for (var i = 0u; i < TM * TN; i++) {
        acc[i] = 0.0;
    }
    let ktiles = (u.k + BK - 1u) / BK;
    for (var kt = 0u; kt < ktiles; kt++) {
        let k0 = kt * BK;
        // consecutive threads read consecutive addresses of whichever stride is 1
        for (var r = 0u; r < TM; r++) {
            let el = t + r * 256u;
            var ii: u32;
            var ka: u32;
            if (u.a_cs == 1u) {
                ka = el % BK;
                ii = el / BK;
            } else {
                ii = el % BM;
                ka = el / BM;
            }
            let gi = row0 + ii;
            let gka = k0 + ka;
            var va = 0.0;
            if (gi < u.m && gka < u.k) {
                if ((u.flags & 32u) != 0u && gi == u.m - 1u) {
                    va = 1.0;
                } else {
                    va = a[u.a_off + gi * u.a_rs + gka * u.a_cs];
                }
            }
            As[ka * BM + ii] = va;
        }
        for (var r = 0u; r < TN; r++) {
            let el = t + r * 256u;
            var jj: u32;
            var kb: u32;
            if (u.b_cs == 1u) {
                jj = el % BN;
                kb = el / BN;
            } else {
                kb = el % BK;
                jj = el / BK;
            }
            let gj = col0 + jj;
            let gkb = k0 + kb;
            var vb = 0.0;
            if (gj < u.n && gkb < u.k) {
                vb = b[u.b_off + gkb * u.b_rs + gj * u.b_cs];
            }
            Bs[kb * BN + jj] = vb;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            var ar: array<f32, {TM}>;
            var br: array<f32, {TN}>;
            for (var i = 0u; i < TM; i++) {
                ar[i] = As[kk * BM + ty + 16u * i];
            }
            for (var j = 0u; j < TN; j++) {
                br[j] = Bs[kk * BN + tx + 16u * j];
            }
            for (var i = 0u; i < TM; i++) {
                for (var j = 0u; j < TN; j++) {
                    acc[i * TN + j] = fma(ar[i], br[j], acc[i * TN + j]);
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < TM; i++) {
        let gi = row0 + ty + 16u * i;
        for (var j = 0u; j < TN; j++) {
            let gj = col0 + tx + 16u * j;
            if (gi < u.m && gj < u.n) {
                epilogue(gi, gj, acc[i * TN + j]);
            }
        }
    }
}
