use burn_backend::{Backend, Scalar, ops::ActivationOps, tensor::FloatTensor};

use crate::Dispatch;
use crate::backends::*;

impl ActivationOps<Self> for Dispatch {
    fn leaky_relu(tensor: FloatTensor<Self>, negative_slope: Scalar) -> FloatTensor<Self> {
        unary_float!(tensor, float, |tensor| B::leaky_relu(tensor, negative_slope) => Float)
    }

    fn relu(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        unary_float!(tensor, float, |tensor| B::relu(tensor) => Float)
    }

    fn relu_backward(output: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        binary_float!((output, float), (grad, float), |output, grad| B::relu_backward(output, grad) => Float)
    }

    fn gelu(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        unary_float!(tensor, float, |tensor| B::gelu(tensor) => Float)
    }

    fn prelu(tensor: FloatTensor<Self>, alpha: FloatTensor<Self>) -> FloatTensor<Self> {
        binary_float!((tensor, float), (alpha, float), |tensor, alpha| B::prelu(tensor, alpha) => Float)
    }

    fn gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        // SignFlow patch: the exact derivative on every backend (`GeluGradient`).
        binary_float!((x, float), (grad, float), |x, grad| <B as GeluGradient>::exact(x, grad) => Float)
    }

    fn sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        unary_float!(tensor, float, |tensor| B::sigmoid(tensor) => Float)
    }

    fn sigmoid_backward(output: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        binary_float!((output, float), (grad, float), |output, grad| B::sigmoid_backward(output, grad) => Float)
    }

    fn hard_sigmoid(tensor: FloatTensor<Self>, alpha: Scalar, beta: Scalar) -> FloatTensor<Self> {
        unary_float!(tensor, float, |tensor| B::hard_sigmoid(tensor, alpha, beta) => Float)
    }

    fn softmax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        unary_float!(tensor, float, |tensor| B::softmax(tensor, dim) => Float)
    }

    fn log_softmax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        unary_float!(tensor, float, |tensor| B::log_softmax(tensor, dim) => Float)
    }

    fn softmin(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        unary_float!(tensor, float, |tensor| B::softmin(tensor, dim) => Float)
    }

    fn log_sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        unary_float!(tensor, float, |tensor| B::log_sigmoid(tensor) => Float)
    }

    fn log_sigmoid_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        binary_float!((x, float), (grad, float), |x, grad| B::log_sigmoid_backward(x, grad) => Float)
    }
}

/// SignFlow patch: the gradient of GELU's erf form, `grad * (Phi(x) + x * phi(x))`, the function
/// `gelu` computes. Burn's default `ActivationOps::gelu_backward`, which every CubeCL backend
/// (CUDA, ROCm, WGPU, the CubeCL CPU) and NdArray inherit, is the derivative of the tanh
/// approximation instead (off by up to 8.7e-4, at x = 2.02). Flex and LibTorch already differentiate
/// the erf form in one pass and keep their own; the others compose it from element-wise ops,
/// which fusion runs as one kernel.
trait GeluGradient: Backend {
    fn exact(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        let cdf = Self::float_div_scalar(x.clone(), core::f64::consts::SQRT_2.into());
        let cdf = Self::float_erf(cdf);
        let cdf = Self::float_add_scalar(cdf, 1f32.into());
        let cdf = Self::float_mul_scalar(cdf, 0.5f32.into());
        let inv_sqrt_2pi = 1.0 / (2.0 * core::f64::consts::PI).sqrt();
        let pdf = Self::float_mul(x.clone(), x.clone());
        let pdf = Self::float_mul_scalar(pdf, (-0.5f32).into());
        let pdf = Self::float_exp(pdf);
        let pdf = Self::float_mul_scalar(pdf, inv_sqrt_2pi.into());
        let slope = Self::float_add(cdf, Self::float_mul(x, pdf));
        Self::float_mul(slope, grad)
    }
}

#[cfg(feature = "cpu")]
impl GeluGradient for Cpu<f32> {}
#[cfg(feature = "cuda")]
impl GeluGradient for Cuda<f32> {}
#[cfg(wgpu_metal)]
impl GeluGradient for Metal<f32> {}
#[cfg(feature = "rocm")]
impl GeluGradient for Rocm<f32> {}
#[cfg(wgpu_vulkan)]
impl GeluGradient for Vulkan<f32> {}
#[cfg(wgpu_webgpu)]
impl GeluGradient for Wgpu<f32> {}
#[cfg(feature = "ndarray")]
impl GeluGradient for NdArray<f32> {}
#[cfg(feature = "flex")]
impl GeluGradient for Flex<f32> {
    fn exact(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::gelu_backward(x, grad)
    }
}
#[cfg(feature = "tch")]
impl GeluGradient for LibTorch<f32> {
    fn exact(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::gelu_backward(x, grad)
    }
}
