// C (m x n, row-major at c_off) = alpha * A B [+ C] [+ bias] [LeakyReLU] [* LeakyReLU'(E)] [+ E]
// with A(i, k) = a[a_off + i a_rs + k a_cs] and B(k, j) = b[b_off + k b_rs + j b_cs] (strides
// express transposes); with flag 32, A's last row is ones (a weight gradient and, in its last
// row, the bias gradient, which follows the kernel in the parameter buffer).
//
// Split k (flag 64): workgroup z multiplies k in [z kc, (z + 1) kc) and writes its raw sums to
// c[c_off + z m n + i n + j]; splitk.wgsl then adds the parts and applies alpha and the epilogue.
//
// Tiles of (16 TM) x 64 outputs, 16 deep; 256 threads (16 x 16), each TM rows x 4 columns held
// in vec4 registers acc0..acc{TM-1}: no array in function memory (naga lowers a dynamically
// indexed local array to memory the GPU reaches through its caches, which made the first
// version of this kernel, gemm.wgsl, spend ~10 us per 16-deep step on an H200). model/gpu.rs
// writes TM and the per-row lines ({DECL}, {FMA}, {STORE}) in before compiling.
// (struct Mm and fn epilogue: mm.wgsl)
@group(0) @binding(0) var<uniform> u: Mm;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
@group(0) @binding(4) var<storage, read> e: array<f32>;

const TM: u32 = {TM}u;
const BM: u32 = 16u * TM;
const BN: u32 = 64u;
const BK: u32 = 16u;
// rows padded by one: the stores of a transposed operand (consecutive threads along k) then fall
// in different banks
const SA: u32 = BM + 1u;
const SB: u32 = BN + 1u;
var<workgroup> As: array<f32, {AS}>; // [BK][SA]
var<workgroup> Bs: array<f32, 1040>; // [BK][SB]

fn out1(gi: u32, gj: u32, acc: f32, z: u32) {
    if ((u.flags & 64u) != 0u) {
        c[u.c_off + z * u.m * u.n + gi * u.n + gj] = acc;
    } else {
        epilogue(gi, gj, acc);
    }
}

// one row of a thread's outputs: columns gj0, gj0 + 16, gj0 + 32, gj0 + 48
fn out4(gi: u32, gj0: u32, v: vec4<f32>, z: u32) {
    if (gi >= u.m) {
        return;
    }
    if (gj0 < u.n) {
        out1(gi, gj0, v.x, z);
    }
    if (gj0 + 16u < u.n) {
        out1(gi, gj0 + 16u, v.y, z);
    }
    if (gj0 + 32u < u.n) {
        out1(gi, gj0 + 32u, v.z, z);
    }
    if (gj0 + 48u < u.n) {
        out1(gi, gj0 + 48u, v.w, z);
    }
}

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let tx = lid.x;
    let ty = lid.y;
    let t = ty * 16u + tx;
    let row0 = wid.y * BM;
    let col0 = wid.x * BN;
{DECL}
    let kbeg = wid.z * u.kc;
    let kend = min(u.k, kbeg + u.kc);
    let ktiles = (kend - min(kbeg, kend) + BK - 1u) / BK;
    for (var kt = 0u; kt < ktiles; kt++) {
        let k0 = kbeg + kt * BK;
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
            if (gi < u.m && gka < kend) {
                if ((u.flags & 32u) != 0u && gi == u.m - 1u) {
                    va = 1.0;
                } else {
                    va = a[u.a_off + gi * u.a_rs + gka * u.a_cs];
                }
            }
            As[ka * SA + ii] = va;
        }
        for (var r = 0u; r < 4u; r++) {
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
            if (gj < u.n && gkb < kend) {
                vb = b[u.b_off + gkb * u.b_rs + gj * u.b_cs];
            }
            Bs[kb * SB + jj] = vb;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            let bb = kk * SB + tx;
            let br = vec4<f32>(Bs[bb], Bs[bb + 16u], Bs[bb + 32u], Bs[bb + 48u]);
            let ab = kk * SA + ty;
{FMA}
        }
        workgroupBarrier();
    }
{STORE}
}
