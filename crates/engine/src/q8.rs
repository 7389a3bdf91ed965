//! Int8 linear layers: weights quantized per output column (symmetric, 8 bits), activations per
//! row at run time (asymmetric, 7 bits), products summed in i32.
//!
//! Why 7-bit activations: the AVX2 kernel multiplies bytes with `vpmaddubsw`, which adds two
//! u8 x i8 products into a saturating i16. With activations in `0..=127` and weights in
//! `-127..=127` a pair stays within `2 * 127 * 127 = 32258 < 32767`, so it never saturates and
//! the vector kernel gives exactly the integers of the scalar one (FBGEMM's "reduce range"
//! makes the same choice on CPUs without VNNI).
//!
//! Weights are packed once, in blocks of [`NR`] columns by groups of 4 inputs: block `j`, group
//! `g` holds the 32 bytes `w[4g + i][8j + c]` at `c * 4 + i` (8 columns x 4 inputs, the layout a
//! `vpmaddubsw` + `vpmaddwd` pair reads, and the one VNNI's `vpdpbusd` reads).

use rayon::prelude::*;

/// Columns per packed block (one 256-bit register of i32 sums).
pub const NR: usize = 8;
/// Largest quantized activation (7 bits).
pub const QMAX_X: f32 = 127.0;
/// Largest quantized weight magnitude.
pub const QMAX_W: f32 = 127.0;

/// Multiply-adds below which a product runs on the calling thread.
const PAR_WORK: usize = 1 << 20;

/// A `[k, n]` weight matrix in int8 with a per-column scale, and an optional f32 bias.
#[derive(Debug, Clone)]
pub struct Int8Linear {
    k: usize,
    n: usize,
    /// `k` rounded up to a multiple of 4.
    k4: usize,
    /// Packed weights: `n.div_ceil(NR)` blocks of `k4 * NR` bytes.
    packed: Vec<i8>,
    /// Per-column dequantization scale (`max |w| / 127`).
    scale: Vec<f32>,
    /// Per-column sum of the quantized weights (for the activations' zero point).
    col_sum: Vec<i32>,
    bias: Option<Vec<f32>>,
}

/// One row of activations in 7 bits: `x ~ scale * (q - zero)`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct RowQuant {
    scale: f32,
    zero: i32,
}

impl Int8Linear {
    /// Quantize `weight` (`[k, n]`, row-major: input `i`, output `j` at `i * n + j`) and keep `bias`
    /// (`n` values) in f32.
    pub fn new(weight: &[f32], k: usize, n: usize, bias: Option<Vec<f32>>) -> Self {
        assert_eq!(weight.len(), k * n, "weight is not [k, n]");
        let k4 = k.div_ceil(4) * 4;
        let blocks = n.div_ceil(NR);
        let mut scale = vec![1.0f32; n];
        for (j, s) in scale.iter_mut().enumerate() {
            let amax = (0..k).map(|i| weight[i * n + j].abs()).fold(0.0f32, f32::max);
            if amax > 0.0 && amax.is_finite() {
                *s = amax / QMAX_W;
            }
        }
        let mut packed = vec![0i8; blocks * k4 * NR];
        let mut col_sum = vec![0i32; n];
        for i in 0..k {
            for j in 0..n {
                let q = (weight[i * n + j] / scale[j]).round().clamp(-QMAX_W, QMAX_W) as i8;
                let (block, c) = (j / NR, j % NR);
                packed[block * k4 * NR + (i / 4) * 4 * NR + c * 4 + i % 4] = q;
                col_sum[j] += q as i32;
            }
        }
        Self { k, n, k4, packed, scale, col_sum, bias }
    }

    /// Inputs per row.
    pub fn inputs(&self) -> usize {
        self.k
    }

    /// Outputs per row.
    pub fn outputs(&self) -> usize {
        self.n
    }

    /// Bytes held: int8 weights, scales, column sums and bias.
    pub fn bytes(&self) -> usize {
        self.packed.len() + 4 * (self.scale.len() + self.col_sum.len() + self.bias.as_ref().map_or(0, Vec::len))
    }

    /// `x W + b` for `m` rows of `x` (`[m, k]`) into `[m, n]`, with the best kernel this CPU has.
    pub fn forward(&self, x: &[f32], m: usize) -> Vec<f32> {
        self.forward_with(x, m, Kernel::detect())
    }

    /// [`Self::forward`] with a chosen kernel (tests compare them).
    pub fn forward_with(&self, x: &[f32], m: usize, kernel: Kernel) -> Vec<f32> {
        assert_eq!(x.len(), m * self.k, "input is not [m, k]");
        let mut out = vec![0.0f32; m * self.n];
        if m == 0 || self.n == 0 {
            return out;
        }
        // Rows per task: a multiple of the micro-kernel's 4 rows; one task when the work is small.
        let work = m * self.k * self.n;
        let threads = rayon::current_num_threads().max(1);
        let rows = if work < PAR_WORK { m } else { (m.div_ceil(threads * 4)).div_ceil(4).max(1) * 4 };
        let task = |(t, out): (usize, &mut [f32])| {
            let r0 = t * rows;
            let r = out.len() / self.n;
            let mut q = vec![0u8; r * self.k4];
            let quant: Vec<RowQuant> = (0..r)
                .map(|i| {
                    quantize_row(&x[(r0 + i) * self.k..(r0 + i + 1) * self.k], &mut q[i * self.k4..(i + 1) * self.k4])
                })
                .collect();
            self.rows_into(&q, &quant, out, kernel);
        };
        if rows >= m {
            task((0, &mut out[..]));
        } else {
            out.par_chunks_mut(rows * self.n).enumerate().for_each(task);
        }
        out
    }

    /// Products of quantized rows `q` (`[r, k4]`) into `out` (`[r, n]`), dequantized.
    fn rows_into(&self, q: &[u8], quant: &[RowQuant], out: &mut [f32], kernel: Kernel) {
        let r = quant.len();
        let blocks = self.n.div_ceil(NR);
        let mut acc = [[0i32; NR]; 4];
        let mut acc2 = [[0i32; NR]; 4];
        let mut block = 0;
        while block < blocks {
            // Two blocks per pass where the kernel shares each activation load between them.
            let pair = kernel == Kernel::Avx2 && block + 1 < blocks;
            let w = &self.packed[block * self.k4 * NR..(block + 1 + usize::from(pair)) * self.k4 * NR];
            let mut i = 0;
            while i < r {
                let rows = 4.min(r - i);
                let q = &q[i * self.k4..(i + rows) * self.k4];
                if pair {
                    kernel.dot2(q, rows, self.k4, w, &mut acc, &mut acc2);
                } else {
                    kernel.dot(q, rows, self.k4, w, &mut acc);
                }
                self.dequantize(&acc, &quant[i..i + rows], block, out, i);
                if pair {
                    self.dequantize(&acc2, &quant[i..i + rows], block + 1, out, i);
                }
                i += rows;
            }
            block += 1 + usize::from(pair);
        }
    }

    /// Write the sums `acc` of rows `row0..` and block `block` into `out` as floats.
    fn dequantize(&self, acc: &[[i32; NR]; 4], quant: &[RowQuant], block: usize, out: &mut [f32], row0: usize) {
        let c0 = block * NR;
        let cols = NR.min(self.n - c0);
        for (ri, (acc, &RowQuant { scale, zero })) in acc.iter().zip(quant).enumerate() {
            let o = &mut out[(row0 + ri) * self.n + c0..(row0 + ri) * self.n + c0 + cols];
            for (c, o) in o.iter_mut().enumerate() {
                let j = c0 + c;
                let v = (acc[c] - zero * self.col_sum[j]) as f32 * (scale * self.scale[j]);
                *o = v + self.bias.as_ref().map_or(0.0, |b| b[j]);
            }
        }
    }
}

/// Quantize `x` into `q` (its first `x.len()` bytes; the rest stay 0) in 7 bits with a zero
/// point: the range always includes 0, so a zero input is exact.
fn quantize_row(x: &[f32], q: &mut [u8]) -> RowQuant {
    let (lo, hi) = x.iter().fold((0.0f32, 0.0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    if hi <= lo || !(hi - lo).is_finite() {
        q.iter_mut().for_each(|q| *q = 0);
        return RowQuant { scale: 1.0, zero: 0 };
    }
    let scale = (hi - lo) / QMAX_X;
    let zero = (-lo / scale).round().clamp(0.0, QMAX_X);
    quantize_into(q, x, 1.0 / scale, zero);
    RowQuant { scale, zero: zero as i32 }
}

models::multiversion!(
    /// `q = clamp(round(x / scale + zero), 0, QMAX_X)` (with AVX2 or AVX-512, `round` is one instruction
    /// instead of a libm call per value).
    fn quantize_into(q: &mut [u8], x: &[f32], inv: f32, zero: f32) {
        for (q, v) in q.iter_mut().zip(x) {
            *q = (v * inv + zero).round().clamp(0.0, QMAX_X) as u8;
        }
    }
);

/// The integer dot-product kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Portable loops (any CPU).
    Scalar,
    /// x86-64 AVX2 (`vpmaddubsw` + `vpmaddwd`).
    Avx2,
    /// x86-64 AVX-512 VNNI on 256-bit registers (`vpdpbusd`: the same products in one
    /// instruction).
    Vnni,
}

impl Kernel {
    /// The fastest kernel this CPU runs.
    pub fn detect() -> Self {
        *Self::available().last().unwrap_or(&Self::Scalar)
    }

    /// Every kernel this CPU runs, slowest first (for tests and benches).
    pub fn available() -> Vec<Self> {
        #[allow(unused_mut)]
        let mut all = vec![Self::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                all.push(Self::Avx2);
            }
            if std::arch::is_x86_feature_detected!("avx512vnni") && std::arch::is_x86_feature_detected!("avx512vl") {
                all.push(Self::Vnni);
            }
        }
        all
    }

    /// `acc[r][c] = sum_i q[r][i] * w[i][c]` for `rows <= 4` rows of `q` (`k4` bytes each) and
    /// one packed block `w`.
    fn dot(self, q: &[u8], rows: usize, k4: usize, w: &[i8], acc: &mut [[i32; NR]; 4]) {
        match self {
            Self::Scalar => dot_scalar(q, rows, k4, w, acc),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Avx2` is only chosen where the CPU reports AVX2 (`detect`, `available`).
            Self::Avx2 => unsafe { avx2::dot(q, rows, k4, w, acc) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Vnni` is only chosen where the CPU reports AVX-512 VNNI and VL.
            Self::Vnni => unsafe { avx2::dot_vnni(q, rows, k4, w, acc) },
            #[cfg(not(target_arch = "x86_64"))]
            Self::Avx2 | Self::Vnni => dot_scalar(q, rows, k4, w, acc),
        }
    }
}

impl Kernel {
    /// [`Kernel::dot`] for two adjacent blocks (`w` holds both), sharing the activation loads.
    fn dot2(self, q: &[u8], rows: usize, k4: usize, w: &[i8], a: &mut [[i32; NR]; 4], b: &mut [[i32; NR]; 4]) {
        let (w0, w1) = w.split_at(k4 * NR);
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Avx2` is only chosen where the CPU reports AVX2.
            Self::Avx2 => unsafe { avx2::dot2(q, rows, k4, w0, w1, a, b) },
            _ => {
                self.dot(q, rows, k4, w0, a);
                self.dot(q, rows, k4, w1, b);
            }
        }
    }
}

fn dot_scalar(q: &[u8], rows: usize, k4: usize, w: &[i8], acc: &mut [[i32; NR]; 4]) {
    for (r, acc) in acc.iter_mut().enumerate().take(rows) {
        *acc = [0; NR];
        let q = &q[r * k4..(r + 1) * k4];
        for (g, wg) in w.chunks_exact(4 * NR).enumerate() {
            let x = &q[g * 4..g * 4 + 4];
            for (c, a) in acc.iter_mut().enumerate() {
                let wc = &wg[c * 4..c * 4 + 4];
                *a += (0..4).map(|i| x[i] as i32 * wc[i] as i32).sum::<i32>();
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::NR;
    use std::arch::x86_64::*;

    /// AVX2 form of `dot_scalar`: per group of 4 inputs, the 4 activation bytes of a row are
    /// broadcast, multiplied with 8 columns x 4 weights by `vpmaddubsw` (pairs into i16, never
    /// saturating: see the module doc) and summed to i32 by `vpmaddwd` with ones.
    #[target_feature(enable = "avx2")]
    pub unsafe fn dot(q: &[u8], rows: usize, k4: usize, w: &[i8], acc: &mut [[i32; NR]; 4]) {
        let groups = k4 / 4;
        debug_assert!(w.len() >= groups * 32 && q.len() >= rows * k4);
        let ones = _mm256_set1_epi16(1);
        let mut sums = [_mm256_setzero_si256(); 4];
        let wp = w.as_ptr();
        let qp = q.as_ptr();
        if rows == 4 {
            for g in 0..groups {
                // SAFETY: block `w` holds `groups` groups of 32 bytes; each row of `q` has `k4`
                // bytes (checked above); unaligned loads.
                let wv = unsafe { _mm256_loadu_si256(wp.add(g * 32) as *const __m256i) };
                for (r, s) in sums.iter_mut().enumerate() {
                    let x = unsafe { (qp.add(r * k4 + g * 4) as *const i32).read_unaligned() };
                    let p = _mm256_maddubs_epi16(_mm256_set1_epi32(x), wv);
                    *s = _mm256_add_epi32(*s, _mm256_madd_epi16(p, ones));
                }
            }
        } else {
            for g in 0..groups {
                // SAFETY: as above.
                let wv = unsafe { _mm256_loadu_si256(wp.add(g * 32) as *const __m256i) };
                for (r, s) in sums.iter_mut().enumerate().take(rows) {
                    let x = unsafe { (qp.add(r * k4 + g * 4) as *const i32).read_unaligned() };
                    let p = _mm256_maddubs_epi16(_mm256_set1_epi32(x), wv);
                    *s = _mm256_add_epi32(*s, _mm256_madd_epi16(p, ones));
                }
            }
        }
        for (a, s) in acc.iter_mut().zip(&sums).take(rows) {
            // SAFETY: `a` is 8 i32 = 32 bytes.
            unsafe { _mm256_storeu_si256(a.as_mut_ptr() as *mut __m256i, *s) };
        }
    }

    /// `dot` over two blocks at once: each activation broadcast feeds both.
    #[target_feature(enable = "avx2")]
    pub unsafe fn dot2(
        q: &[u8],
        rows: usize,
        k4: usize,
        w0: &[i8],
        w1: &[i8],
        a: &mut [[i32; NR]; 4],
        b: &mut [[i32; NR]; 4],
    ) {
        let groups = k4 / 4;
        assert!(w0.len() >= groups * 32 && w1.len() >= groups * 32 && q.len() >= rows * k4 && rows <= 4);
        let ones = _mm256_set1_epi16(1);
        let mut s0 = [_mm256_setzero_si256(); 4];
        let mut s1 = [_mm256_setzero_si256(); 4];
        let (p0, p1, qp) = (w0.as_ptr(), w1.as_ptr(), q.as_ptr());
        for g in 0..groups {
            // SAFETY: bounds asserted above; unaligned loads.
            let (v0, v1) = unsafe {
                (
                    _mm256_loadu_si256(p0.add(g * 32) as *const __m256i),
                    _mm256_loadu_si256(p1.add(g * 32) as *const __m256i),
                )
            };
            for r in 0..rows {
                let x = _mm256_set1_epi32(unsafe { (qp.add(r * k4 + g * 4) as *const i32).read_unaligned() });
                s0[r] = _mm256_add_epi32(s0[r], _mm256_madd_epi16(_mm256_maddubs_epi16(x, v0), ones));
                s1[r] = _mm256_add_epi32(s1[r], _mm256_madd_epi16(_mm256_maddubs_epi16(x, v1), ones));
            }
        }
        for r in 0..rows {
            // SAFETY: each row of `a` and `b` is 8 i32 = 32 bytes.
            unsafe {
                _mm256_storeu_si256(a[r].as_mut_ptr() as *mut __m256i, s0[r]);
                _mm256_storeu_si256(b[r].as_mut_ptr() as *mut __m256i, s1[r]);
            }
        }
    }

    /// `dot` with `vpdpbusd` (u8 x i8 products of 4 bytes summed into i32, no saturation).
    #[target_feature(enable = "avx2,avx512vnni,avx512vl")]
    pub unsafe fn dot_vnni(q: &[u8], rows: usize, k4: usize, w: &[i8], acc: &mut [[i32; NR]; 4]) {
        let groups = k4 / 4;
        debug_assert!(w.len() >= groups * 32 && q.len() >= rows * k4);
        let mut sums = [_mm256_setzero_si256(); 4];
        let wp = w.as_ptr();
        let qp = q.as_ptr();
        for g in 0..groups {
            // SAFETY: as in `dot`.
            let wv = unsafe { _mm256_loadu_si256(wp.add(g * 32) as *const __m256i) };
            for (r, s) in sums.iter_mut().enumerate().take(rows) {
                let x = unsafe { (qp.add(r * k4 + g * 4) as *const i32).read_unaligned() };
                *s = _mm256_dpbusd_epi32(*s, _mm256_set1_epi32(x), wv);
            }
        }
        for (a, s) in acc.iter_mut().zip(&sums).take(rows) {
            // SAFETY: `a` is 8 i32 = 32 bytes.
            unsafe { _mm256_storeu_si256(a.as_mut_ptr() as *mut __m256i, *s) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
    }

    #[test]
    fn kernels_agree_exactly_and_track_f32() {
        let mut seed = 7;
        for (m, k, n) in [(1, 3, 1), (5, 13, 9), (64, 192, 384), (7, 469, 250), (130, 64, 20)] {
            let w: Vec<f32> = (0..k * n).map(|_| lcg(&mut seed) * 0.2).collect();
            let b: Vec<f32> = (0..n).map(|_| lcg(&mut seed)).collect();
            let x: Vec<f32> = (0..m * k).map(|_| lcg(&mut seed) * 3.0).collect();
            let lin = Int8Linear::new(&w, k, n, Some(b.clone()));
            let outs: Vec<Vec<f32>> = Kernel::available().into_iter().map(|kk| lin.forward_with(&x, m, kk)).collect();
            for o in &outs[1..] {
                assert_eq!(o, &outs[0], "kernels differ at {m}x{k}x{n}");
            }
            let mut worst = 0.0f32;
            let mut norm = 0.0f32;
            for r in 0..m {
                for j in 0..n {
                    let exact: f32 = (0..k).map(|i| x[r * k + i] * w[i * n + j]).sum::<f32>() + b[j];
                    worst = worst.max((exact - outs[0][r * n + j]).abs());
                    norm = norm.max(exact.abs());
                }
            }
            assert!(worst <= 0.03 * norm.max(1.0), "{m}x{k}x{n}: error {worst} vs scale {norm}");
        }
    }

    #[test]
    fn zero_and_constant_rows_are_exact() {
        // Columns whose weights are exact multiples of their scale: [1, 0.5] and [-4, 4].
        let w = [1.0, -4.0, 0.5, 4.0];
        let lin = Int8Linear::new(&w, 2, 2, None);
        assert_eq!(lin.forward(&[0.0, 0.0], 1), vec![0.0, 0.0]);
        let y = lin.forward(&[1.0, 0.0], 1);
        assert!((y[0] - 1.0).abs() < 1e-6 && (y[1] + 4.0).abs() < 1e-6, "{y:?}");
    }
}
