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
// writes TM and the per-row lines ({DECL}, {FMA}, {STORE}) in before compiling, and the k
// loop's body in one of three forms: loops over the loads and the 16-deep product (the
// measured default), the same unrolled, or unrolled with the next k tile's loads issued into
// registers before the current tile is multiplied ({PROLOGUE}, {LOAD}, {NEXT}, {INNER}).
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

// Element el (0 .. 256 TM) of A's tile: its (row, k) in the tile. Consecutive threads read
// consecutive addresses of whichever stride is 1.
fn a_slot(el: u32) -> vec2<u32> {
    if (u.a_cs == 1u) {
        return vec2<u32>(el / BK, el % BK);
    }
    return vec2<u32>(el % BM, el / BM);
}

// A's element el of the k tile at k0 (zero outside A; one on the row of ones, flag 32)
fn fetch_a(el: u32, row0: u32, k0: u32, kend: u32) -> f32 {
    let s = a_slot(el);
    let gi = row0 + s.x;
    let gka = k0 + s.y;
    var va = 0.0;
    if (gi < u.m && gka < kend) {
        if ((u.flags & 32u) != 0u && gi == u.m - 1u) {
            va = 1.0;
        } else {
            va = a[u.a_off + gi * u.a_rs + gka * u.a_cs];
        }
    }
    return va;
}

fn put_a(el: u32, v: f32) {
    let s = a_slot(el);
    As[s.y * SA + s.x] = v;
}

// Element el (0 .. 1024) of B's tile: its (column, k) in the tile.
fn b_slot(el: u32) -> vec2<u32> {
    if (u.b_cs == 1u) {
        return vec2<u32>(el % BN, el / BN);
    }
    return vec2<u32>(el / BK, el % BK);
}

fn fetch_b(el: u32, col0: u32, k0: u32, kend: u32) -> f32 {
    let s = b_slot(el);
    let gj = col0 + s.x;
    let gkb = k0 + s.y;
    var vb = 0.0;
    if (gj < u.n && gkb < kend) {
        vb = b[u.b_off + gkb * u.b_rs + gj * u.b_cs];
    }
    return vb;
}

fn put_b(el: u32, v: f32) {
    let s = b_slot(el);
    Bs[s.y * SB + s.x] = v;
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
{PROLOGUE}
    for (var kt = 0u; kt < ktiles; kt++) {
        let k0 = kbeg + kt * BK;
{LOAD}
        workgroupBarrier();
{NEXT}
{INNER}
        workgroupBarrier();
    }
{STORE}
}
