//! Element-wise functions of the eval graph on host slices (SiLU, the logistic sigmoid, a row
//! softmax) over [`models::simd::exp`], each built again for AVX2 and AVX-512 and chosen at run time
//! ([`models::multiversion!`]).

use models::multiversion;
use models::simd::exp;

multiversion!(
    /// `x * sigmoid(x)` in place.
    pub fn silu(x: &mut [f32]) {
        x.iter_mut().for_each(|v| *v /= 1.0 + exp(-*v));
    }
);

multiversion!(
    /// `1 / (1 + e^-x)` in place.
    pub fn sigmoid(x: &mut [f32]) {
        x.iter_mut().for_each(|v| *v = 1.0 / (1.0 + exp(-*v)));
    }
);

/// Softmax of one row in place.
pub fn softmax(row: &mut [f32]) {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, v| m.max(*v));
    models::simd::softmax_with_max(row, max);
}

#[cfg(test)]
mod tests {
    use super::*;

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
