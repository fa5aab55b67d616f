// The AE-CM's clustering-module part of a step (dense.rs `cm_part`) in one workgroup: from Z
// (b x p) and the CM's parameters in `prm`, into `scr`: G and dlogits (b x K), R (b x p), U (K x
// p), S (K x K), [dU; colsum(dU)] ((K + 1) x p), and the step's loss terms at terms_off + 8 slot:
// [beta rec, CM rec, sparsity, prior, lambda orth] (the first alone, the deep MSE, when has_cm
// is 0; the deep reconstruction's partial sums are at part_off); dZ into `dz`. Two products
// follow it (model/gpu.rs): [dW_enc; db_enc] = [Z 1]^T dlogits and [dW_dec; db_dec] =
// -2 [G 1]^T R + [dU; colsum(dU)].
struct Cm {
    b: u32, p: u32, k: u32, we: u32,
    be: u32, wd: u32, bd: u32, g_off: u32,
    r_off: u32, dl_off: u32, u_off: u32, s_off: u32,
    part_off: u32, nparts: u32, terms_off: u32, du_off: u32,
}
// (struct Step: step.wgsl)
@group(0) @binding(0) var<uniform> u: Cm;
@group(0) @binding(1) var<uniform> st: Step;
@group(0) @binding(2) var<storage, read> prm: array<f32>;
@group(0) @binding(3) var<storage, read> z: array<f32>;
@group(0) @binding(4) var<storage, read_write> dz: array<f32>;
@group(0) @binding(5) var<storage, read_write> scr: array<f32>;

var<workgroup> red: array<f32, 256>;
var<workgroup> sh_mean: array<f32, 256>;
var<workgroup> sh_logm: array<f32, 256>;
var<workgroup> sh_pw: array<f32, 256>;

fn reduce(v: f32, t: u32) -> f32 {
    red[t] = v;
    workgroupBarrier();
    for (var h = 128u; h > 0u; h >>= 1u) {
        if (t < h) {
            red[t] += red[t + h];
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

fn sync() {
    storageBarrier();
    workgroupBarrier();
}

// (S U)[kk, c], S and U in the scratch
fn su(kk: u32, c: u32) -> f32 {
    var v = 0.0;
    for (var l = 0u; l < u.k; l++) {
        v += scr[u.s_off + kk * u.k + l] * scr[u.u_off + l * u.p + c];
    }
    return v;
}

fn wval(rank: u32) -> f32 {
    let i = min(rank, st.nw - 1u);
    return st.wv[i / 4u][i % 4u];
}

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
    let t = lid.x;
    let B = u.b;
    let P = u.p;
    let K = u.k;
    let to = u.terms_off + 8u * st.slot;
    var rs = 0.0;
    for (var i = t; i < u.nparts; i += 256u) {
        rs += scr[u.part_off + i];
    }
    let rec = reduce(rs, t);
    if (st.has_cm == 0u) {
        if (t == 0u) {
            scr[to] = rec * st.terms0;
        }
        return;
    }
    // G = softmax(Z W_enc + b_enc), R = Z - (G W_dec + b_dec)
    var cmrec = 0.0;
    var spars = 0.0;
    for (var i = t; i < B; i += 256u) {
        var mx = -3.0e38;
        for (var j = 0u; j < K; j++) {
            var l = prm[u.be + j];
            for (var a = 0u; a < P; a++) {
                l += z[i * P + a] * prm[u.we + a * K + j];
            }
            scr[u.g_off + i * K + j] = l;
            mx = max(mx, l);
        }
        var s = 0.0;
        for (var j = 0u; j < K; j++) {
            let ev = exp(scr[u.g_off + i * K + j] - mx);
            scr[u.g_off + i * K + j] = ev;
            s += ev;
        }
        for (var j = 0u; j < K; j++) {
            let g = scr[u.g_off + i * K + j] / s;
            scr[u.g_off + i * K + j] = g;
            spars += g * (1.0 - g);
        }
        for (var c = 0u; c < P; c++) {
            var zh = prm[u.bd + c];
            for (var j = 0u; j < K; j++) {
                zh += scr[u.g_off + i * K + j] * prm[u.wd + j * P + c];
            }
            let r = z[i * P + c] - zh;
            scr[u.r_off + i * P + c] = r;
            cmrec += r * r;
        }
    }
    sync();
    // batch means of G (a workgroup sum per cluster), U = W_dec + b_dec
    for (var j = 0u; j < K; j++) {
        var cs = 0.0;
        for (var i = t; i < B; i += 256u) {
            cs += scr[u.g_off + i * K + j];
        }
        let tot = reduce(cs, t);
        if (t == 0u) {
            let m = tot / f32(B) + 1e-10;
            sh_mean[j] = m;
            sh_logm[j] = log(m);
        }
    }
    for (var q = t; q < K * P; q += 256u) {
        scr[u.u_off + q] = prm[u.wd + q] + prm[u.bd + q % P];
    }
    sync();
    // the prior's weights by rank (stable: ties in index order), S = sign(U U^T - I)
    var prior = 0.0;
    for (var j = t; j < K; j += 256u) {
        let lj = sh_logm[j];
        var rank = 0u;
        for (var q = 0u; q < K; q++) {
            let lq = sh_logm[q];
            if (lq < lj || (lq == lj && q < j)) {
                rank++;
            }
        }
        let w = wval(rank);
        prior += lj * w;
        sh_pw[j] = w / (f32(B) * sh_mean[j]);
    }
    var orth = 0.0;
    for (var q = t; q < K * K; q += 256u) {
        let i = q / K;
        let j = q % K;
        var mij = 0.0;
        for (var c = 0u; c < P; c++) {
            mij += scr[u.u_off + i * P + c] * scr[u.u_off + j * P + c];
        }
        var ev = mij;
        if (i == j) {
            ev = mij - 1.0;
        }
        orth += abs(ev);
        scr[u.s_off + q] = sign(ev);
    }
    sync();
    // dG = -2 R W_dec^T + (1 - 2 G) + pw; dlogits = G (dG - rowsum(dG G)); dZ = 2 R + dlogits W_enc^T
    for (var i = t; i < B; i += 256u) {
        var dot = 0.0;
        for (var j = 0u; j < K; j++) {
            var acc = 0.0;
            for (var c = 0u; c < P; c++) {
                acc += scr[u.r_off + i * P + c] * prm[u.wd + j * P + c];
            }
            let g = scr[u.g_off + i * K + j];
            let dg = -2.0 * acc + (1.0 - 2.0 * g) + sh_pw[j];
            scr[u.dl_off + i * K + j] = dg;
            dot += dg * g;
        }
        for (var j = 0u; j < K; j++) {
            let g = scr[u.g_off + i * K + j];
            scr[u.dl_off + i * K + j] = g * (scr[u.dl_off + i * K + j] - dot);
        }
        for (var c = 0u; c < P; c++) {
            var v = 2.0 * scr[u.r_off + i * P + c];
            for (var j = 0u; j < K; j++) {
                v += scr[u.dl_off + i * K + j] * prm[u.we + c * K + j];
            }
            dz[i * P + c] = v;
        }
    }
    // dU = 2 lambda S U and its column sums
    let lam2 = 2.0 * st.lambda;
    for (var q = t; q < K * P; q += 256u) {
        let kk = q / P;
        let c = q % P;
        let du = su(kk, c);
        scr[u.du_off + q] = du * lam2;
    }
    for (var c = t; c < P; c += 256u) {
        var cold = 0.0;
        for (var kk = 0u; kk < K; kk++) {
            let du = su(kk, c);
            cold += du * lam2;
        }
        scr[u.du_off + K * P + c] = cold;
    }
    let t_cm = reduce(cmrec, t);
    let t_sp = reduce(spars, t);
    let t_pr = reduce(prior, t);
    let t_or = reduce(orth, t);
    if (t == 0u) {
        scr[to] = rec * st.terms0;
        scr[to + 1u] = t_cm;
        scr[to + 2u] = t_sp;
        scr[to + 3u] = t_pr;
        scr[to + 4u] = t_or * st.lambda;
    }
}
