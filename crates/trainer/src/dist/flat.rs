//! A model's trainable parameters and their gradients as one flat f32 vector on a device, so a
//! data-parallel step moves them in one collective operation (like DDP's buckets, one bucket).
//!
//! Order: the model's visiting order, the same on every peer of one architecture. Only
//! parameters that take gradients are included (BatchNorm running statistics are not: each
//! peer's stay its own, and the leader's are the ones saved, as with PyTorch DDP's rank 0).

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;
use models::SignModel;

use crate::{InnerBackend, TrainBackend};

type Device = device::DispatchDevice;

/// Elements of every trainable parameter of `model`.
pub fn len(model: &SignModel<TrainBackend>) -> usize {
    struct Count(usize);
    impl ModuleVisitor<TrainBackend> for Count {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<TrainBackend, D>>) {
            let t = param.val();
            if t.is_require_grad() {
                self.0 += t.shape().num_elements();
            }
        }
    }
    let mut c = Count(0);
    model.visit(&mut c);
    c.0
}

/// The trainable parameters of `model`, concatenated, on `device`.
pub fn weights(model: &SignModel<TrainBackend>, device: &Device) -> Tensor<InnerBackend, 1> {
    struct Collect(Vec<Tensor<InnerBackend, 1>>);
    impl ModuleVisitor<TrainBackend> for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<TrainBackend, D>>) {
            let t = param.val();
            if t.is_require_grad() {
                let n = t.shape().num_elements();
                self.0.push(t.inner().reshape([n]));
            }
        }
    }
    let mut c = Collect(Vec::new());
    model.visit(&mut c);
    cat(c.0, device)
}

/// `model` with its trainable parameters replaced by the slices of `flat` (same ids).
pub fn load_weights(model: SignModel<TrainBackend>, flat: Tensor<InnerBackend, 1>) -> SignModel<TrainBackend> {
    struct Load {
        flat: Tensor<InnerBackend, 1>,
        at: usize,
    }
    impl ModuleMapper<TrainBackend> for Load {
        fn map_float<const D: usize>(
            &mut self,
            param: Param<Tensor<TrainBackend, D>>,
        ) -> Param<Tensor<TrainBackend, D>> {
            let (id, old, mapper) = param.consume();
            if !old.is_require_grad() {
                return Param::from_mapped_value(id, old, mapper);
            }
            let shape = old.shape();
            let n = shape.num_elements();
            let slice = self.flat.clone().slice(self.at..self.at + n).reshape(shape);
            self.at += n;
            Param::from_mapped_value(id, Tensor::from_inner(slice).require_grad(), mapper)
        }
    }
    model.map(&mut Load { flat, at: 0 })
}

/// The gradients of `model`'s trainable parameters, concatenated (zeros where a parameter got
/// none, e.g. on a peer with no rows this step).
pub fn grads(model: &SignModel<TrainBackend>, grads: &GradientsParams, device: &Device) -> Tensor<InnerBackend, 1> {
    struct Collect<'a> {
        grads: &'a GradientsParams,
        out: Vec<Tensor<InnerBackend, 1>>,
        device: &'a Device,
    }
    impl ModuleVisitor<TrainBackend> for Collect<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<TrainBackend, D>>) {
            let t = param.val();
            if !t.is_require_grad() {
                return;
            }
            let n = t.shape().num_elements();
            self.out.push(match self.grads.get::<InnerBackend, D>(param.id) {
                Some(g) => g.reshape([n]),
                None => Tensor::zeros([n], self.device),
            });
        }
    }
    let mut c = Collect { grads, out: Vec::new(), device };
    model.visit(&mut c);
    cat(c.out, device)
}

/// Gradients for `model`'s trainable parameters read from the first elements of `flat`.
pub fn load_grads(model: &SignModel<TrainBackend>, flat: Tensor<InnerBackend, 1>) -> GradientsParams {
    struct Split {
        flat: Tensor<InnerBackend, 1>,
        at: usize,
        out: GradientsParams,
    }
    impl ModuleVisitor<TrainBackend> for Split {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<TrainBackend, D>>) {
            let t = param.val();
            if !t.is_require_grad() {
                return;
            }
            let shape = t.shape();
            let n = shape.num_elements();
            let g: Tensor<InnerBackend, D> = self.flat.clone().slice(self.at..self.at + n).reshape(shape);
            self.at += n;
            self.out.register(param.id, g);
        }
    }
    let mut s = Split { flat, at: 0, out: GradientsParams::new() };
    model.visit(&mut s);
    s.out
}

fn cat(parts: Vec<Tensor<InnerBackend, 1>>, device: &Device) -> Tensor<InnerBackend, 1> {
    if parts.is_empty() {
        Tensor::zeros([0], device)
    } else {
        Tensor::cat(parts, 0)
    }
}
