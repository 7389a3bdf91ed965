//! Casting a model's weights to a compute dtype for mixed precision.
//!
//! Burn 0.21 has no autocast and panics on mixed-dtype operands, so the weights used for the
//! forward pass are cast copies. BatchNorm parameters stay f32 (their layers normalize in f32).
//! GRU layers also stay f32: Burn's `Gru` creates f32 tensors internally, and the recurrence is
//! the numerically sensitive part. `ParamId`s are kept so gradients of the copy map back onto
//! the f32 master weights.

use crate::kernels::Kernels;
use crate::{ModelError, SignModel};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Bool, FloatDType, Tensor};

/// Layer types whose parameters stay f32 under mixed precision.
pub const KEEP_F32: [&str; 2] = ["BatchNorm", "Gru"];

/// Casts every float parameter to `dtype`, except those of [`KEEP_F32`] layers.
#[derive(Debug)]
pub struct ComputeCast<B: Backend> {
    /// The compute dtype.
    pub dtype: FloatDType,
    keep: KeepF32,
    /// The trainable parameters already cast ([`Precast`]): views of its buffer, one per
    /// parameter to cast, in visit order, not yet handed out.
    precast: Option<std::vec::IntoIter<FloatTensor<B>>>,
}

impl<B: Backend> ComputeCast<B> {
    /// A mapper casting to `dtype`.
    pub fn new(dtype: FloatDType) -> Self {
        Self { dtype, keep: KeepF32::default(), precast: None }
    }
}

/// Depth of nesting inside [`KEEP_F32`] layers while a module is walked.
#[derive(Debug, Default)]
struct KeepF32(usize);

impl KeepF32 {
    fn enter(&mut self, container_type: &str) {
        if keeps_f32(container_type) {
            self.0 += 1;
        }
    }

    fn exit(&mut self, container_type: &str) {
        if keeps_f32(container_type) {
            self.0 -= 1;
        }
    }

    fn active(&self) -> bool {
        self.0 > 0
    }
}

/// The windows of a [`Precast`] buffer the cast copy takes: `(offset, shape)` of each trainable
/// parameter outside [`KEEP_F32`] layers, in visit order (every trainable parameter has an
/// offset; those of kept layers are skipped).
struct PrecastWindows {
    keep: KeepF32,
    offsets: std::vec::IntoIter<usize>,
    windows: Vec<(usize, burn::tensor::Shape)>,
}

impl<B: Backend> ModuleVisitor<B> for PrecastWindows {
    fn enter_module(&mut self, _name: &str, container_type: &str) {
        self.keep.enter(container_type);
    }

    fn exit_module(&mut self, _name: &str, container_type: &str) {
        self.keep.exit(container_type);
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if !param.val().is_require_grad() {
            return;
        }
        let at = self.offsets.next();
        if let (Some(at), false) = (at, self.keep.active()) {
            self.windows.push((at, param.shape()));
        }
    }
}

/// The trainable parameters of a model already cast to the compute dtype: one flat tensor in
/// that dtype with each trainable parameter (in the model's visit order) at its offset, such as
/// one cast of the optimizer's flat f32 buffer. The cast copy's parameters are then views of it,
/// all made by one operation ([`crate::kernels::Kernels::views`]), and their gradients reach the masters uncast
/// ([`crate::kernels::Kernels::precast`]): no cast kernel per parameter either way.
#[derive(Debug, Clone)]
pub struct Precast<B: Backend> {
    /// The parameters' values in the compute dtype, 1-D.
    pub flat: Tensor<B, 1>,
    /// Where each trainable parameter starts in `flat`, in visit order.
    pub offsets: Vec<usize>,
}

/// Burn's derive names containers `Struct:<Name>` / `Enum:<Name>`.
fn keeps_f32(container_type: &str) -> bool {
    let name = container_type.rsplit(':').next().unwrap_or(container_type);
    KEEP_F32.contains(&name)
}

impl<B: Kernels> ModuleMapper<B> for ComputeCast<B> {
    fn enter_module(&mut self, _name: &str, container_type: &str) {
        self.keep.enter(container_type);
    }

    fn exit_module(&mut self, _name: &str, container_type: &str) {
        self.keep.exit(container_type);
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let dtype = self.dtype;
        if self.keep.active() {
            return param;
        }
        let view = match &mut self.precast {
            Some(views) if param.val().is_require_grad() => views.next(),
            _ => None,
        };
        match view {
            Some(view) => param.map(|t| {
                let cast = Tensor::from_primitive(burn::tensor::TensorPrimitive::Float(view));
                crate::kernels::ops::precast(t, cast)
            }),
            None => param.map(|t| t.cast(dtype)),
        }
    }
}

/// Forces lazily-initialized parameters to materialize. Cloning a lazy `Param` clones its
/// initializer, so a cast copy made before this would get *different* values under the same
/// `ParamId`, and its gradients would silently not reach the master weights.
#[derive(Debug, Default)]
pub struct Materialize;

impl<B: Kernels> ModuleMapper<B> for Materialize {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        param.map(|t| t)
    }
}

/// A copy of `model` with compute-dtype weights (see [`ComputeCast`]).
pub fn cast_for_compute<B: Kernels, M: Module<B>>(model: M, dtype: FloatDType) -> M {
    model.map(&mut ComputeCast::new(dtype))
}

/// A model ready to run its forward pass in a compute dtype: the one mixed-precision forward of
/// SignFlow, used by training, validation, the benches and `infer`. The weights are cast once
/// when it is built ([`cast_for_compute`]; `F32` keeps them as they are), the inputs are cast on
/// each call, and the logits always come back in f32 (loss and softmax run in f32).
#[derive(Debug, Clone)]
pub struct ComputeModel<B: Kernels> {
    model: SignModel<B>,
    dtype: FloatDType,
}

impl<B: Kernels> ComputeModel<B> {
    /// Cast `model` for computing in `dtype`.
    pub fn new(model: SignModel<B>, dtype: FloatDType) -> Self {
        let model = if dtype == FloatDType::F32 { model } else { cast_for_compute(model, dtype) };
        Self { model, dtype }
    }

    /// `model` for computing in `precast`'s dtype, its trainable parameters taken from
    /// `precast` (one offset per trainable parameter, in visit order, [`KEEP_F32`] layers' too).
    pub fn with_precast(model: SignModel<B>, precast: Precast<B>) -> Self {
        let dtype = FloatDType::from(precast.flat.dtype());
        let offsets = precast.offsets.into_iter();
        let mut windows = PrecastWindows { keep: KeepF32::default(), offsets, windows: Vec::new() };
        model.visit(&mut windows);
        let views = B::views(precast.flat.into_primitive().tensor(), &windows.windows);
        let mut cast = ComputeCast { dtype, keep: KeepF32::default(), precast: Some(views.into_iter()) };
        Self { model: model.map(&mut cast), dtype }
    }

    /// Drops the model, its cast weights all at once ([`Kernels::release`]: on a CubeCL device
    /// one operation of Burn's fusion stream where dropping them queues one per weight). An f32
    /// model holds its masters' own weights, and is only dropped.
    pub fn release(self) {
        if self.dtype == FloatDType::F32 {
            return;
        }
        let mut take = TakeWeights { keep: KeepF32::default(), taken: Vec::new() };
        drop(self.model.map(&mut take));
        B::release(take.taken);
    }

    /// The compute dtype.
    pub fn dtype(&self) -> FloatDType {
        self.dtype
    }

    /// The cast model.
    pub fn model(&self) -> &SignModel<B> {
        &self.model
    }

    /// Logits in f32.
    ///
    /// # Shapes
    /// - `inputs`: `[batch, frames, features]` (f32; cast here)
    /// - `pad_mask`: `[batch, frames]`, true = padding
    /// - output: `[batch, classes]`, f32
    pub fn forward(&self, inputs: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 2> {
        if self.dtype == FloatDType::F32 {
            return self.model.forward(inputs, pad_mask);
        }
        self.model.forward(inputs.cast(self.dtype), pad_mask).cast(FloatDType::F32)
    }

    /// Per-frame logits in f32 ([`SignModel::forward_frames`]).
    ///
    /// # Shapes
    /// - `inputs`: `[batch, frames, features]` (f32; cast here)
    /// - `pad_mask`: `[batch, frames]`, true = padding
    /// - output: `[batch, frames, classes]`, f32
    pub fn forward_frames(&self, inputs: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        if self.dtype == FloatDType::F32 {
            return self.model.forward_frames(inputs, pad_mask);
        }
        self.model.forward_frames(inputs.cast(self.dtype), pad_mask).cast(FloatDType::F32)
    }

    /// [`ComputeModel::forward`] after checking the shapes (no device work before the check).
    pub fn try_forward(&self, inputs: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Result<Tensor<B, 2>, ModelError> {
        self.model.check_input(inputs.dims(), pad_mask.dims())?;
        Ok(self.forward(inputs, pad_mask))
    }

    /// [`Self::forward_frames`] after checking the input shapes against the model (an error
    /// instead of a panic inside Burn).
    pub fn try_forward_frames(
        &self,
        inputs: Tensor<B, 3>,
        pad_mask: Tensor<B, 2, Bool>,
    ) -> Result<Tensor<B, 3>, ModelError> {
        self.model.check_input(inputs.dims(), pad_mask.dims())?;
        Ok(self.forward_frames(inputs, pad_mask))
    }
}

/// Counts trainable parameters: every float `Param` except BatchNorm running statistics, which
/// Burn's `num_params` includes (it gives the Keras-style count).
#[derive(Debug, Default)]
pub struct TrainableCount {
    /// Trainable parameters counted.
    pub count: usize,
    field: String,
}

impl<B: Kernels> burn::module::ModuleVisitor<B> for TrainableCount {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.field = name.to_string();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if self.field != "running_mean" && self.field != "running_var" {
            self.count += param.shape().num_elements();
        }
    }
}

/// Takes the tensor of every parameter outside [`KEEP_F32`] layers (the cast model's own: cast
/// copies, or views of a [`Precast`] buffer) out of a model that is about to be dropped,
/// leaving zeros to be made if the parameter is ever read (it is not: see
/// [`ComputeModel::release`]). Those of kept layers are the masters' (and BatchNorm's running
/// statistics, which their module reads back at once) and stay.
struct TakeWeights<B: Backend> {
    keep: KeepF32,
    taken: Vec<FloatTensor<B>>,
}

impl<B: Backend> ModuleMapper<B> for TakeWeights<B> {
    fn enter_module(&mut self, _name: &str, container_type: &str) {
        self.keep.enter(container_type);
    }

    fn exit_module(&mut self, _name: &str, container_type: &str) {
        self.keep.exit(container_type);
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        if self.keep.active() {
            return param;
        }
        let (id, tensor, _) = param.consume();
        let (shape, device) = (tensor.shape(), tensor.device());
        self.taken.push(tensor.into_primitive().tensor());
        let zeros = {
            let shape = shape.clone();
            move |device: &B::Device, _| Tensor::zeros(shape.clone(), device)
        };
        Param::uninitialized(id, zeros, device, false, shape)
    }
}
