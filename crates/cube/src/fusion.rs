//! A kernel as a custom operation of Burn's fusion stream (the pattern of burn-vision's CubeCL
//! backend): registered with its inputs and uninitialized outputs, it runs in stream order when
//! the fusion layer executes its queue, on the CubeCL tensors behind the fusion handles.

use burn::tensor::{DType, Shape};
use burn_cubecl::fusion::FusionCubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeBackend, CubeRuntime};
use burn_fusion::stream::{Operation, OperationStreams};
use burn_fusion::{FusionRuntime, FusionTensor};
use burn_ir::{CustomOpIr, HandleContainer, OperationIr, TensorIr};

/// A launcher: CubeCL inputs and the op's parameters in, CubeCL outputs out (as many as the op
/// registered).
pub(crate) type Launch<R, P> = fn(Vec<CubeTensor<R>>, &P) -> Vec<CubeTensor<R>>;

/// What an op's parameters must be to travel in the fusion stream.
pub(crate) trait Params: Clone + Send + Sync + core::fmt::Debug + 'static {}
impl<P: Clone + Send + Sync + core::fmt::Debug + 'static> Params for P {}

/// The CubeCL backend the fusion handles convert through (its element types only matter for
/// tensors it creates itself; the handles carry their own dtype).
type Cube<R> = CubeBackend<R, f32, i32, u8>;

struct Custom<R: CubeRuntime, P> {
    desc: CustomOpIr,
    launch: Launch<R, P>,
    params: P,
}

impl<R: CubeRuntime, P: Params> core::fmt::Debug for Custom<R, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Custom").field("op", &self.desc.id).field("params", &self.params).finish()
    }
}

impl<R: CubeRuntime, P: Params> Operation<FusionCubeRuntime<R>> for Custom<R, P> {
    fn execute(&self, handles: &mut HandleContainer<<FusionCubeRuntime<R> as FusionRuntime>::FusionHandle>) {
        let inputs = self.desc.inputs.iter().map(|t| handles.get_float_tensor::<Cube<R>>(t)).collect();
        let results = (self.launch)(inputs, &self.params);
        assert_eq!(results.len(), self.desc.outputs.len(), "{}: one result per registered output", self.desc.id);
        for (out, tensor) in self.desc.outputs.iter().zip(results) {
            handles.register_float_tensor::<Cube<R>>(&out.id, tensor);
        }
    }
}

/// Queues `launch` on `inputs` as the custom op `name`, with outputs of the given shapes and
/// dtypes, and returns the output tensors (computed when the stream runs).
pub(crate) fn register<R: CubeRuntime, P: Params>(
    name: &'static str,
    inputs: Vec<FusionTensor<FusionCubeRuntime<R>>>,
    outputs: Vec<(Shape, DType)>,
    launch: Launch<R, P>,
    params: P,
) -> Vec<FusionTensor<FusionCubeRuntime<R>>> {
    let client = inputs[0].client.clone();
    let streams = OperationStreams::with_inputs(inputs.iter());
    let outputs: Vec<_> = outputs
        .into_iter()
        .map(|(shape, dtype)| TensorIr::uninit(client.create_empty_handle(), shape, dtype))
        .collect();
    let inputs: Vec<_> = inputs.into_iter().map(FusionTensor::into_ir).collect();
    let desc = CustomOpIr::new(name, &inputs, &outputs);
    let op = Custom { desc: desc.clone(), launch, params };
    // Boxed: the fusion server that runs it is the one the dispatcher compiled.
    client.register_boxed(streams, OperationIr::Custom(desc), Box::new(op))
}
