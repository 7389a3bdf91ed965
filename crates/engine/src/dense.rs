//! One dense layer of the eval graph, `y = x W + b`, in f32 (the `gemm` crate, the same
//! matrix-product code Burn's CPU backend runs) or in int8 ([`crate::q8`]).

use crate::q8::Int8Linear;

/// How the eval graph stores its dense layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weights {
    /// f32 weights (BatchNorm folded in).
    F32,
    /// int8 weights per output column, activations quantized per row at run time; the
    /// classifier stays f32.
    Int8,
}

impl std::fmt::Display for Weights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::F32 => "f32",
            Self::Int8 => "int8",
        })
    }
}

/// A dense layer: `[k, n]` weights and an optional bias.
#[derive(Debug, Clone)]
pub enum Dense {
    /// f32 weights, row-major `[k, n]`.
    F32 {
        /// Weights.
        w: Vec<f32>,
        /// Inputs.
        k: usize,
        /// Outputs.
        n: usize,
        /// Bias (`n`).
        bias: Option<Vec<f32>>,
    },
    /// int8 weights.
    Int8(Int8Linear),
}

impl Dense {
    /// A layer from f32 weights `[k, n]`, stored as `weights` says.
    pub fn new(w: Vec<f32>, k: usize, n: usize, bias: Option<Vec<f32>>, weights: Weights) -> Self {
        match weights {
            Weights::F32 => Self::F32 { w, k, n, bias },
            Weights::Int8 => Self::Int8(Int8Linear::new(&w, k, n, bias)),
        }
    }

    /// Outputs per row.
    pub fn outputs(&self) -> usize {
        match self {
            Self::F32 { n, .. } => *n,
            Self::Int8(q) => q.outputs(),
        }
    }

    /// Bytes of weights and bias.
    pub fn bytes(&self) -> usize {
        match self {
            Self::F32 { w, bias, .. } => 4 * (w.len() + bias.as_ref().map_or(0, Vec::len)),
            Self::Int8(q) => q.bytes(),
        }
    }

    /// `x W + b` for `m` rows of `x` (`[m, k]`): `[m, n]`.
    pub fn forward(&self, x: &[f32], m: usize) -> Vec<f32> {
        match self {
            Self::F32 { w, k, n, bias } => {
                let mut out = match bias {
                    Some(b) => b.repeat(m),
                    None => vec![0.0; m * n],
                };
                matmul(&mut out, bias.is_some(), x, *k, w, *n, m, *k, *n, 1.0);
                out
            }
            Self::Int8(q) => q.forward(x, m),
        }
    }

    /// `out += x W + b` for `m` rows (a residual connection: the f32 product accumulates into
    /// `out` directly, with no `[m, n]` temporary).
    pub fn forward_add(&self, x: &[f32], m: usize, out: &mut [f32]) {
        match self {
            Self::F32 { w, k, n, bias } => {
                assert_eq!(out.len(), m * n, "residual of {} values for {m} rows of {n}", out.len());
                if let Some(b) = bias {
                    out.chunks_mut(*n).for_each(|row| row.iter_mut().zip(b).for_each(|(o, b)| *o += b));
                }
                matmul(out, true, x, *k, w, *n, m, *k, *n, 1.0);
            }
            Self::Int8(q) => {
                let p = q.forward(x, m);
                out.iter_mut().zip(&p).for_each(|(o, p)| *o += p);
            }
        }
    }
}

/// Sizes and strides of one product `out[m, n] (+)= scale * a[m, k] x b[k, n]`: rows of `out`
/// and `a` are `out_rs` and `a_rs` apart (columns adjacent); `b`'s element `(kk, j)` is at
/// `kk * b_rs + j * b_cs`.
struct Product {
    m: usize,
    k: usize,
    n: usize,
    out_rs: usize,
    a_rs: usize,
    b_rs: usize,
    b_cs: usize,
}

/// The one `gemm` call of the graph, after checking that every element it touches is inside
/// the slices.
fn gemm_checked(out: &mut [f32], add: bool, a: &[f32], b: &[f32], p: Product, scale: f32, parallel: bool) {
    let Product { m, k, n, out_rs, a_rs, b_rs, b_cs } = p;
    let last = |rows: usize, rs: usize, cols: usize, cs: usize| (rows - 1) * rs + (cols - 1) * cs + 1;
    if m == 0 || n == 0 {
        return;
    }
    assert!(out.len() >= last(m, out_rs, n, 1));
    assert!(k == 0 || (a.len() >= last(m, a_rs, k, 1) && b.len() >= last(k, b_rs, n, b_cs)));
    let parallelism = if parallel { gemm::Parallelism::Rayon(0) } else { gemm::Parallelism::None };
    // SAFETY: the bounds above cover every element gemm reads or writes with these strides.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            out_rs as isize,
            add,
            a.as_ptr(),
            1,
            a_rs as isize,
            b.as_ptr(),
            b_cs as isize,
            b_rs as isize,
            1.0,
            scale,
            false,
            false,
            false,
            parallelism,
        )
    }
}

/// `out[m, n] (+)= scale * a[m, k] x b[k, n]` for row-major slices with row strides `a_rs`
/// (of `a`) and `b_rs` (of `b`); `out` is contiguous `[m, n]`; on rayon's threads.
#[allow(clippy::too_many_arguments)]
pub fn matmul(
    out: &mut [f32],
    add: bool,
    a: &[f32],
    a_rs: usize,
    b: &[f32],
    b_rs: usize,
    m: usize,
    k: usize,
    n: usize,
    scale: f32,
) {
    gemm_checked(out, add, a, b, Product { m, k, n, out_rs: n, a_rs, b_rs, b_cs: 1 }, scale, true);
}

/// `out[m, n] = scale * a[m, k] x b[n, k]^T` (`b` read as rows of `k`, row stride `b_rs`), one
/// thread: the attention scores of one head.
#[allow(clippy::too_many_arguments)]
pub fn matmul_bt(
    out: &mut [f32],
    a: &[f32],
    a_rs: usize,
    b: &[f32],
    b_rs: usize,
    m: usize,
    k: usize,
    n: usize,
    scale: f32,
) {
    gemm_checked(out, false, a, b, Product { m, k, n, out_rs: n, a_rs, b_rs: 1, b_cs: b_rs }, scale, false);
}

/// `out = a x b` on one thread, into an output with row stride `out_rs`.
#[allow(clippy::too_many_arguments)]
pub fn matmul_into(
    out: &mut [f32],
    out_rs: usize,
    a: &[f32],
    a_rs: usize,
    b: &[f32],
    b_rs: usize,
    m: usize,
    k: usize,
    n: usize,
) {
    gemm_checked(out, false, a, b, Product { m, k, n, out_rs, a_rs, b_rs, b_cs: 1 }, 1.0, false);
}
