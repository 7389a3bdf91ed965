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
}

/// `out[m, n] (+)= scale * a[m, k] x b[k, n]` for row-major slices with row strides `a_rs`
/// (of `a`) and `b_rs` (of `b`); `out` is contiguous `[m, n]`.
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
    assert!(
        out.len() >= m * n && (m == 0 || a.len() >= (m - 1) * a_rs + k) && (k == 0 || b.len() >= (k - 1) * b_rs + n)
    );
    // SAFETY: the bounds above cover every element gemm reads or writes with these strides.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            add,
            a.as_ptr(),
            1,
            a_rs as isize,
            b.as_ptr(),
            1,
            b_rs as isize,
            1.0,
            scale,
            false,
            false,
            false,
            gemm::Parallelism::Rayon(0),
        )
    }
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
    assert!(
        out.len() >= m * n && (m == 0 || a.len() >= (m - 1) * a_rs + k) && (n == 0 || b.len() >= (n - 1) * b_rs + k)
    );
    // SAFETY: as in `matmul`; `b`'s element (kk, j) is at `j * b_rs + kk`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            a_rs as isize,
            b.as_ptr(),
            b_rs as isize,
            1,
            1.0,
            scale,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}

/// [`matmul`] on one thread, into an output with row stride `out_rs`.
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
    assert!(
        (m == 0 || out.len() >= (m - 1) * out_rs + n)
            && (m == 0 || a.len() >= (m - 1) * a_rs + k)
            && (k == 0 || b.len() >= (k - 1) * b_rs + n)
    );
    // SAFETY: as in `matmul`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            out_rs as isize,
            false,
            a.as_ptr(),
            1,
            a_rs as isize,
            b.as_ptr(),
            1,
            b_rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}
