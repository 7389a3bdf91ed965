//! Host loops over `f32` slices that the compiler vectorizes: a polynomial [`exp`] (instead of a
//! libm call per element) and [`multiversion!`](crate::multiversion), which compiles a loop
//! again for AVX2 and AVX-512 and picks the build at run time (the workspace targets generic x86-64,
//! whose loops are 4 floats wide). The training kernels ([`crate::kernels`]) and the eval graph
//! (`engine`) both use them.

/// `log2(e)`.
const LOG2E: f32 = std::f32::consts::LOG2_E;
/// `ln 2` in two parts, so that `n ln 2` is exact in the high part.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// `1.5 * 2^23`: adding it to a float below `2^22` in magnitude rounds it to an integer, kept in
/// the low mantissa bits.
const ROUND: f32 = 12_582_912.0;
/// Below this `e^x` is under `f32`'s smallest normal number: 0.
const MIN_X: f32 = -87.33;
/// Above this `e^x` is clamped (`e^88` ~ 1.65e38, finite).
const MAX_X: f32 = 88.0;

/// `e^x` (relative error below 3e-7 on `[-87.3, 88]`; 0 below, `e^88` above): `2^n e^r` with
/// `n` the nearest integer to `x / ln 2` and a degree-6 polynomial for `e^r`, `|r| <= ln 2 / 2`.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let xc = x.clamp(MIN_X, MAX_X);
    let t = xc * LOG2E + ROUND;
    let n = t - ROUND;
    let r = xc - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_2e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let e = p * r * r + r + 1.0;
    // n in [-126, 127]: the biased exponent n + 127 is a normal number's.
    let bits = (t.to_bits() as i32 - ROUND.to_bits() as i32 + 127) << 23;
    let y = e * f32::from_bits(bits as u32);
    if x < MIN_X {
        0.0
    } else {
        y
    }
}

/// A host loop defined once and compiled three times: for AVX-512F and for AVX2 (each chosen at
/// run time where the CPU has it, so the compiler vectorizes the loop 16 or 8 floats wide) and
/// for the generic x86-64 target. The builds differ only in vector width: without fast-math the
/// compiler keeps every operation and its order, so all three give the same bits.
#[macro_export]
macro_rules! multiversion {
    ($(#[$doc:meta])* $vis:vis fn $name:ident ($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$doc])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                unsafe fn avx512($($arg: $ty),*) $(-> $ret)? $body
                #[target_feature(enable = "avx2")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? $body
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has AVX-512F (checked just above).
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2 (checked just above).
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body
        }
    };
}
multiversion!(
    /// `e^(x - max)` in place (`max`: the row's maximum, so every value is at most 1).
    fn exp_shifted(x: &mut [f32], max: f32) {
        x.iter_mut().for_each(|v| *v = exp(*v - max));
    }
);

multiversion!(
    /// `sum(a[i] * b[i])` over the shorter length, in 8 interleaved partial sums: a plain
    /// running sum fixes the order of additions, so the compiler cannot vectorize it.
    pub fn dot(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        let mut acc = [0.0f32; 8];
        let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
        let tail: f32 = ac.remainder().iter().zip(bc.remainder()).map(|(x, y)| x * y).sum();
        for (x, y) in ac.zip(bc) {
            for ((s, x), y) in acc.iter_mut().zip(x).zip(y) {
                *s += x * y;
            }
        }
        acc.iter().sum::<f32>() + tail
    }
);

/// Softmax of a row in place, given its maximum: `e^(x - max)`, then divided by their sum.
pub fn softmax_with_max(row: &mut [f32], max: f32) {
    exp_shifted(row, max);
    let inv = 1.0 / row.iter().sum::<f32>();
    row.iter_mut().for_each(|v| *v *= inv);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_equals_the_f64_sum_of_products_at_every_length() {
        for n in [0usize, 1, 7, 8, 9, 64, 1001] {
            let a: Vec<f32> = (0..n).map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.25).collect();
            let b: Vec<f32> = (0..n).map(|i| ((i * 13 % 7) as f32 - 3.0) * 0.5).collect();
            let want: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
            assert!((dot(&a, &b) as f64 - want).abs() <= 1e-4 * want.abs().max(1.0), "n {n}");
        }
        assert_eq!(dot(&[1.0, 2.0, 3.0], &[4.0, 5.0]), 14.0);
    }

    #[test]
    fn exp_is_within_3e_7_of_f64_and_saturates() {
        let mut worst = 0f64;
        let mut x = -87.3f32;
        while x < 88.0 {
            let rel = ((exp(x) as f64 - (x as f64).exp()) / (x as f64).exp()).abs();
            worst = worst.max(rel);
            x += 0.001_37;
        }
        assert!(worst < 3e-7, "worst relative error {worst}");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-1e4), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert!(exp(1e4).is_finite() && exp(1e4) > 1e38);
    }
}
