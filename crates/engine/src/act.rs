//! Element-wise functions of the eval graph on host slices (SiLU, the logistic sigmoid, a row
//! softmax) over one polynomial `exp` that the compiler vectorizes, instead of a libm call per
//! element; every loop built a second time for AVX2 and chosen at run time ([`multiversion`]).

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

/// A host loop defined once and compiled twice: for AVX2 (chosen at run time where the CPU has
/// it, so the compiler vectorizes it 8 floats wide) and for the generic x86-64 target.
macro_rules! multiversion {
    ($(#[$doc:meta])* $vis:vis fn $name:ident / $avx2:ident ($($arg:ident : $ty:ty),* $(,)?) $body:block) => {
        $(#[$doc])*
        $vis fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2 (checked just above).
                return unsafe { $avx2($($arg),*) };
            }
            $body
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        unsafe fn $avx2($($arg: $ty),*) $body
    };
}
pub(crate) use multiversion;

multiversion!(
    /// `x * sigmoid(x)` in place.
    pub fn silu / silu_avx2(x: &mut [f32]) {
        x.iter_mut().for_each(|v| *v /= 1.0 + exp(-*v));
    }
);

multiversion!(
    /// `1 / (1 + e^-x)` in place.
    pub fn sigmoid / sigmoid_avx2(x: &mut [f32]) {
        x.iter_mut().for_each(|v| *v = 1.0 / (1.0 + exp(-*v)));
    }
);

multiversion!(
    /// `e^(x - max x)` in place: a softmax row before its normalization.
    fn exp_shifted / exp_shifted_avx2(x: &mut [f32]) {
        let max = x.iter().fold(f32::NEG_INFINITY, |m, v| m.max(*v));
        x.iter_mut().for_each(|v| *v = exp(*v - max));
    }
);

/// Softmax of one row in place.
pub fn softmax(row: &mut [f32]) {
    exp_shifted(row);
    let inv = 1.0 / row.iter().sum::<f32>();
    row.iter_mut().for_each(|v| *v *= inv);
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn vectorized_paths_equal_the_scalar_definitions() {
        let xs: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.037).collect();
        let mut s = xs.clone();
        silu(&mut s);
        let mut g = xs.clone();
        sigmoid(&mut g);
        for ((x, s), g) in xs.iter().zip(&s).zip(&g) {
            let want = 1.0 / (1.0 + (-*x as f64).exp());
            assert!((*g as f64 - want).abs() < 1e-6, "sigmoid({x}) = {g}, want {want}");
            assert!((*s as f64 - *x as f64 * want).abs() < 1e-5 * x.abs().max(1.0) as f64, "silu({x}) = {s}");
        }
        let mut row = vec![1.0, 2.0, 3.0, -1e4];
        softmax(&mut row);
        let z: f64 = [1.0f64, 2.0, 3.0].iter().map(|v| v.exp()).sum();
        for (p, v) in row.iter().zip([1.0f64, 2.0, 3.0]) {
            assert!((*p as f64 - v.exp() / z).abs() < 1e-6);
        }
        assert_eq!(row[3], 0.0);
    }
}
