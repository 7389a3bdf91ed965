//! The linear layer's matrix products on host memory, written straight into fresh output buffers.
//!
//! Burn's `linear` on the CPU backend is a matrix product into a zero-filled buffer (the filling is
//! wasted: the product overwrites it) followed by a broadcast bias add, and in backward two more
//! zero-filled products and a bias-gradient reduction; the filling and the bias passes ran on one
//! thread while the other core waited. Here the bias is written into the output first, the product
//! accumulates onto it, products without a bias write into uninitialised memory, and the bias
//! gradient's column sums are split over rayon's threads. Products go through `gemm` (the crate
//! Burn's Flex backend multiplies with), so every number is the same kind of sum as before.

use crate::par::{fill_rows, sum_tasks};

/// Below this many multiply-adds a product runs on the calling thread (Flex's own threshold).
const PARALLEL_MACS: usize = 192 * 192 * 192;

/// A row-major `rows x cols` matrix or a strided view of one: `(data, row stride, column stride)`.
type View<'a> = (&'a [f32], isize, isize);

/// `m x n` row-major product `lhs (m x k) * rhs (k x n)`, accumulated onto `init` rows when given
/// (`init` is one row of `n` values written into every output row first: the bias).
fn product(m: usize, n: usize, k: usize, lhs: View, rhs: View, init: Option<&[f32]>) -> Vec<f32> {
    let len = m * n;
    let mut out = match init {
        Some(row) => {
            debug_assert_eq!(row.len(), n);
            fill_rows(len, n, |_, o| o.copy_from_slice(&row[..o.len()]))
        }
        None => Vec::with_capacity(len),
    };
    if len == 0 {
        return out;
    }
    let parallelism = if m.saturating_mul(n).saturating_mul(k) >= PARALLEL_MACS && rayon::current_num_threads() > 1 {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    let ((a, a_rs, a_cs), (b, b_rs, b_cs)) = (lhs, rhs);
    // SAFETY: `out` has capacity for `m * n` values, laid out row-major (row stride `n`, column
    // stride 1). With `read_dst` false gemm writes every output element before it reads any (its
    // first pass over the depth stores, later passes accumulate; a zero depth stores zeros), so
    // the uninitialised buffer is never read; with `read_dst` it was filled above. The operands'
    // strides address elements inside their slices (checked by the callers' shape asserts).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            init.is_some(),
            a.as_ptr(),
            a_cs,
            a_rs,
            b.as_ptr(),
            b_cs,
            b_rs,
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
        if init.is_none() {
            out.set_len(len);
        }
    }
    out
}

/// `y = x w (+ bias)` for `x` `[n, k]`, `w` `[k, m]`, `bias` `[m]` -> `y` `[n, m]`, row-major.
pub fn linear(x: &[f32], w: &[f32], bias: Option<&[f32]>, n: usize, k: usize, m: usize) -> Vec<f32> {
    assert!(x.len() == n * k && w.len() == k * m && bias.is_none_or(|b| b.len() == m), "linear: shapes");
    product(n, m, k, (x, k as isize, 1), (w, m as isize, 1), bias)
}

/// Gradient of [`linear`] with respect to `x`: `dy w^T` (`[n, m] x [m, k]`).
pub fn linear_grad_x(dy: &[f32], w: &[f32], n: usize, k: usize, m: usize) -> Vec<f32> {
    assert!(dy.len() == n * m && w.len() == k * m, "linear_grad_x: shapes");
    // w^T as a view: element (o, i) of w^T is w[i * m + o].
    product(n, k, m, (dy, m as isize, 1), (w, 1, m as isize), None)
}

/// Gradient of [`linear`] with respect to `w`: `x^T dy` (`[k, n] x [n, m]`).
pub fn linear_grad_w(x: &[f32], dy: &[f32], n: usize, k: usize, m: usize) -> Vec<f32> {
    assert!(x.len() == n * k && dy.len() == n * m, "linear_grad_w: shapes");
    // x^T as a view: element (i, r) of x^T is x[r * k + i].
    product(k, m, n, (x, 1, k as isize), (dy, m as isize, 1), None)
}

/// Gradient of [`linear`] with respect to the bias: the column sums of `dy` (`[n, m]` -> `[m]`),
/// over blocks of rows on rayon's threads when large, each block summed in f32 and the blocks in
/// f64.
pub fn linear_grad_bias(dy: &[f32], n: usize, m: usize) -> Vec<f32> {
    assert!(dy.len() == n * m, "linear_grad_bias: shapes");
    if m == 0 {
        return Vec::new();
    }
    // Blocks of rows summed in f32 (vectorized), the block sums added in f64.
    const BLOCK_ROWS: usize = 64;
    let sums = sum_tasks(n.div_ceil(BLOCK_ROWS), m, dy.len(), |bi, acc| {
        let mut block = vec![0.0f32; m];
        let rows = bi * BLOCK_ROWS * m..((bi + 1) * BLOCK_ROWS * m).min(dy.len());
        for row in dy[rows].chunks_exact(m) {
            block.iter_mut().zip(row).for_each(|(a, v)| *a += v);
        }
        acc.iter_mut().zip(&block).for_each(|(a, b)| *a += f64::from(*b));
    });
    sums.into_iter().map(|s| s as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain triple loop, in f64.
    fn naive(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
        let mut out = vec![0.0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                out[i * n + j] = (0..k).map(|p| a[i * k + p] as f64 * b[p * n + j] as f64).sum::<f64>() as f32;
            }
        }
        out
    }

    fn transpose(a: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        (0..cols * rows).map(|i| a[(i % rows) * cols + i / rows]).collect()
    }

    fn values(len: usize, seed: u32) -> Vec<f32> {
        (0..len).map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 1000) as f32 / 500.0 - 1.0).collect()
    }

    fn close(a: &[f32], b: &[f32]) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "element {i}: {x} vs {y}");
        }
    }

    #[test]
    fn products_match_the_definition_small_and_large() {
        // 3 x 5 x 4 runs on the calling thread; 300 x 200 x 130 crosses the parallel threshold.
        for (n, k, m) in [(3, 5, 4), (300, 200, 130), (1, 7, 1)] {
            let (x, w, b, dy) = (values(n * k, 1), values(k * m, 2), values(m, 3), values(n * m, 4));
            let mut want = naive(&x, &w, n, k, m);
            want.iter_mut().enumerate().for_each(|(i, v)| *v += b[i % m]);
            close(&linear(&x, &w, Some(&b), n, k, m), &want);
            close(&linear(&x, &w, None, n, k, m), &naive(&x, &w, n, k, m));
            close(&linear_grad_x(&dy, &w, n, k, m), &naive(&dy, &transpose(&w, k, m), n, m, k));
            close(&linear_grad_w(&x, &dy, n, k, m), &naive(&transpose(&x, n, k), &dy, k, n, m));
            let sums: Vec<f32> = (0..m).map(|j| (0..n).map(|i| dy[i * m + j] as f64).sum::<f64>() as f32).collect();
            close(&linear_grad_bias(&dy, n, m), &sums);
        }
    }

    #[test]
    fn empty_and_zero_depth_products_are_well_defined() {
        assert!(linear(&[], &[], None, 0, 0, 0).is_empty());
        // Zero input features: the output is the bias (or zeros), never uninitialised memory.
        assert_eq!(linear(&[], &[], Some(&[1.5, -2.0]), 3, 0, 2), [1.5, -2.0, 1.5, -2.0, 1.5, -2.0]);
        assert_eq!(linear(&[], &[], None, 2, 0, 2), [0.0; 4]);
        assert_eq!(linear_grad_bias(&[], 0, 3), [0.0; 3]);
    }
}
