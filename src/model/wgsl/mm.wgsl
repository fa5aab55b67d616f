// Shared by the products (gemm.wgsl, gemm4.wgsl, splitk.wgsl; model/gpu.rs puts it in front of
// them): the product's uniform and its epilogue. The epilogue reads the module's `u`, `c` and `e`,
// which each product declares with its own bindings.
//
// C (m x n, row-major at c_off) = alpha * acc [+ C] [+ bias] [LeakyReLU] [* LeakyReLU'(E)] [+ E]
// (flags 1, 2, 4, 8, 16); the bias row is e[e_off + j], E is m x n at e_off. `kc`: the depth of
// one part of a split-k product, or the number of parts for splitk.wgsl.
struct Mm {
    m: u32, n: u32, k: u32, a_off: u32,
    a_rs: u32, a_cs: u32, b_off: u32, b_rs: u32,
    b_cs: u32, c_off: u32, flags: u32, e_off: u32,
    alpha: f32, slope: f32, kc: u32, pad1: u32,
}

fn epilogue(gi: u32, gj: u32, acc: f32) {
    let idx = u.c_off + gi * u.n + gj;
    let eidx = u.e_off + gi * u.n + gj;
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
