//! The model `infer` runs on a device (every GPU-class device, and the CPU where the eval graph
//! does not run): the conv-transformer with the BatchNorms that sit beside a linear layer folded
//! into it (the stem's norm into the stem, each transformer block's two norms into the q/k/v and
//! feed-forward input products), on the model's own device. A GPU then launches no norm kernel
//! for them: 5 fewer launches per pass of the reference model. The conv blocks' norms are
//! already applied inside their conv's kernel and stay as they are.
//!
//! The folding is [`crate::graph`]'s (one definition, on the host, once per model). A folded
//! norm runs as the identity ([`models::common::ChannelNorm::folded`]), and its parameters are
//! set to the identity norm (unit scale and variance, zero shift and mean, epsilon 0), so
//! anything that folds or applies it again (the eval graph, an export) gets the identity too.
//! A folded model is for inference only: it is never trained or saved.

use burn::module::Param;
use burn::nn::{BatchNorm, Linear};
use burn::tensor::backend::Backend;
use burn::tensor::{FloatDType, Tensor, TensorData};
use models::common::ChannelNorm;
use models::kernels::Kernels;
use models::precision::ComputeModel;
use models::SignModel;

use crate::graph::FoldedLinear;

/// The model `infer` runs on `model`'s device: norms folded ([`fold_norms`]), then cast for
/// computing in `dtype` ([`ComputeModel::new`]).
pub fn inference_model<B: Kernels>(model: SignModel<B>, dtype: FloatDType) -> ComputeModel<B> {
    ComputeModel::new(fold_norms(model), dtype)
}

/// `model` with the norms beside its linear layers folded into them (a conv-transformer; the
/// other architectures, and a model on an autodiff device, which may still train, come back as
/// they are).
pub fn fold_norms<B: Backend>(model: SignModel<B>) -> SignModel<B> {
    let SignModel::ConvTransformer(mut m) = model else { return model };
    if B::ad_enabled(&m.stem.weight.device()) {
        return SignModel::ConvTransformer(m);
    }
    m.stem = folded(&m.stem, FoldedLinear::after(&m.stem, &m.stem_norm.bn));
    identity(&mut m.stem_norm);
    for b in &mut m.transformer_blocks {
        b.attention.qkv = folded(&b.attention.qkv, FoldedLinear::before(&b.norm1.bn, &b.attention.qkv));
        identity(&mut b.norm1);
        b.ffn_in = folded(&b.ffn_in, FoldedLinear::before(&b.norm2.bn, &b.ffn_in));
        identity(&mut b.norm2);
    }
    SignModel::ConvTransformer(m)
}

/// A `Linear` holding `f`'s weight and bias, on `like`'s device and in its dtype.
fn folded<B: Backend>(like: &Linear<B>, f: FoldedLinear) -> Linear<B> {
    let (device, dtype) = (like.weight.device(), like.weight.dtype());
    let weight = Tensor::<B, 2>::from_data(TensorData::new(f.w, [f.k, f.n]), &device).cast(dtype);
    let bias = Tensor::<B, 1>::from_data(TensorData::new(f.bias, [f.n]), &device).cast(dtype);
    Linear { weight: Param::from_tensor(weight), bias: Some(Param::from_tensor(bias)) }
}

/// Marks `norm` folded and makes it the identity norm (`x * 1 / sqrt(1 + 0) + 0`).
fn identity<B: Backend>(norm: &mut ChannelNorm<B>) {
    let bn = &norm.bn;
    let [c] = bn.gamma.dims();
    let device = bn.gamma.device();
    let ones = || Tensor::<B, 1>::ones([c], &device);
    let zeros = || Tensor::<B, 1>::zeros([c], &device);
    norm.bn = BatchNorm {
        gamma: Param::from_tensor(ones()),
        beta: Param::from_tensor(zeros()),
        running_mean: burn::module::RunningState::new(zeros()),
        running_var: burn::module::RunningState::new(ones()),
        momentum: bn.momentum,
        epsilon: 0.0,
    };
    norm.folded = true;
}
