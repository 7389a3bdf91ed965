//! SignFlow patch: Burn's CubeCL float ops that a custom kernel calls, compiled here once per
//! GPU runtime.
//!
//! Generic code is compiled in the crate that instantiates it, and Burn's CubeCL matrix product
//! (every matmul strategy, its autotune and its quantized views) and reduction are the largest
//! generic code there is: a crate outside the dispatcher that called
//! `CubeBackend::<R, ..>::float_matmul` for the CUDA and WGPU runtimes compiled all of it again
//! (three quarters of the LLVM IR of SignFlow's kernel crate). The dispatcher compiles these
//! functions anyway, for the fusion backends it holds, so the impls below cost it nothing new:
//! callers reach them through `R: CubeFloatOps` and compile a call.

use burn_backend::ops::FloatTensorOps;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeBackend, CubeRuntime};

/// Burn's CubeCL float ops on a runtime's tensors, with the element types the dispatcher's
/// backend for that runtime has (the tensors carry their own dtype).
pub trait CubeFloatOps: CubeRuntime {
    /// `lhs @ rhs` (Burn's autotuned matrix product; broadcast batch dimensions).
    fn float_matmul(lhs: CubeTensor<Self>, rhs: CubeTensor<Self>) -> CubeTensor<Self>;
    /// The sum along `dim`, which keeps its dimension with size 1.
    fn float_sum_dim(tensor: CubeTensor<Self>, dim: usize) -> CubeTensor<Self>;
}

macro_rules! cube_float_ops {
    ($runtime:ty, $bool:ty) => {
        impl CubeFloatOps for $runtime {
            fn float_matmul(lhs: CubeTensor<Self>, rhs: CubeTensor<Self>) -> CubeTensor<Self> {
                CubeBackend::<Self, f32, i32, $bool>::float_matmul(lhs, rhs)
            }
            fn float_sum_dim(tensor: CubeTensor<Self>, dim: usize) -> CubeTensor<Self> {
                CubeBackend::<Self, f32, i32, $bool>::float_sum_dim(tensor, dim)
            }
        }
    };
}

// The bool element types of `burn_wgpu::Wgpu` and `burn_cuda::Cuda`, so these are the very
// instances the fusion backends use.
#[cfg(feature = "wgpu")]
cube_float_ops!(cubecl::wgpu::WgpuRuntime, u32);
#[cfg(feature = "cuda")]
cube_float_ops!(cubecl::cuda::CudaRuntime, u8);
