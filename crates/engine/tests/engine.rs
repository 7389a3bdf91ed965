//! The eval graph against Burn's forward of the same weights (CPU backend, Flex via `Dispatch`).

use burn::backend::Autodiff;
use burn::module::{AutodiffModule, ModuleMapper, Param};
use burn::tensor::{Bool, Tensor, TensorData};
use engine::{EvalGraph, Weights};
use models::{ConvTransformerConfig, GruModelConfig, ModelConfig, SignModel};

type B = device::Backend;
type AD = Autodiff<device::Backend>;

fn dev() -> device::DispatchDevice {
    device::dispatch_device(&device::Target::Cpu).unwrap()
}

fn values<const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec::<f32>().unwrap()
}

/// Normally distributed values drawn from a ChaCha stream fixed by `seed` (Box-Muller), so the
/// tests do not depend on Burn's process-global RNG, which the other tests of the binary draw from
/// at the same time.
fn normal(seed: u64, n: usize, mean: f32, std: f32) -> Vec<f32> {
    use rand_chacha::rand_core::{RngCore, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut unit = || (rng.next_u32() as f64 + 0.5) / 4_294_967_296.0;
    (0..n)
        .map(|_| {
            let (u, v) = (unit(), unit());
            let z = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
            mean + std * z as f32
        })
        .collect()
}

/// Gives every parameter seeded values (not the running statistics): weights at the scale of
/// their fan-in, BatchNorm's gamma near 1 and every other vector near 0 but not at it.
struct Seeded {
    field: String,
    next_seed: u64,
}

impl<Bk: burn::tensor::backend::Backend> ModuleMapper<Bk> for Seeded {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.field = name.to_string();
    }

    fn map_float<const D: usize>(&mut self, p: Param<Tensor<Bk, D>>) -> Param<Tensor<Bk, D>> {
        if self.field.starts_with("running_") {
            return p;
        }
        self.next_seed += 1;
        let (seed, field) = (self.next_seed, self.field.clone());
        p.map(|t| {
            let dims = t.dims();
            let n = dims.iter().product::<usize>();
            let (mean, std) = match D {
                1 if field == "gamma" => (1.0, 0.1),
                1 => (0.0, 0.1),
                // Burn's linear weight is [in, out]; a convolution's [out, in / groups, kernel].
                2 => (0.0, 1.0 / (dims[0] as f32).sqrt()),
                _ => (0.0, 1.0 / ((n / dims[0]) as f32).sqrt()),
            };
            Tensor::from_data(TensorData::new(normal(seed, n, mean, std), dims), &t.device())
        })
    }
}

/// A conv-transformer with seeded weights whose norms have real running statistics (three
/// training-mode passes over seeded inputs).
fn model(features: usize, classes: usize) -> SignModel<B> {
    let cfg = ModelConfig::ConvTransformer(ConvTransformerConfig {
        dim: 32,
        kernel: 5,
        heads: 4,
        bn_momentum: 0.5,
        ..Default::default()
    });
    let m = cfg.init::<AD>(features, classes, &dev());
    let m = burn::module::Module::map(m, &mut Seeded { field: String::new(), next_seed: 0 });
    for pass in 0..3 {
        let x = Tensor::<AD, 3>::from_data(
            TensorData::new(normal(100 + pass, 48 * features, 0.5, 2.0), [4, 12, features]),
            &dev(),
        );
        let mask = Tensor::<AD, 2, Bool>::from_data(TensorData::new(vec![false; 48], [4, 12]), &dev());
        let _ = m.forward(x, mask);
    }
    m.valid()
}

/// Seeded inputs of `batch` sequences, the `b`-th with `frames - 3b mod frames` valid frames.
fn inputs(batch: usize, frames: usize, features: usize) -> (Tensor<B, 3>, Tensor<B, 2, Bool>, Vec<usize>) {
    let seed = (batch * 1000 + frames) as u64 * 1000 + features as u64;
    let x = seeded(seed, [batch, frames, features]);
    let valid: Vec<usize> = (0..batch).map(|b| frames - (b * 3) % frames).collect();
    let mask: Vec<bool> = valid.iter().flat_map(|&n| (0..frames).map(move |t| t >= n)).collect();
    (x, Tensor::from_data(TensorData::new(mask, [batch, frames]), &dev()), valid)
}

/// A [batch, frames, width] tensor of seeded N(0, 1.5) values.
fn seeded(seed: u64, shape: [usize; 3]) -> Tensor<B, 3> {
    Tensor::from_data(TensorData::new(normal(seed, shape.iter().product(), 0.0, 1.5), shape), &dev())
}

fn max_abs(v: &[f32]) -> f32 {
    v.iter().fold(0.0f32, |m, x| m.max(x.abs()))
}

#[test]
fn f32_graph_equals_burns_forward_with_padding() {
    let (features, classes) = (21, 9);
    let m = model(features, classes);
    let graph = EvalGraph::new(&m, Weights::F32).unwrap();
    for (batch, frames) in [(1, 1), (1, 7), (3, 16), (5, 24)] {
        let (x, mask, valid) = inputs(batch, frames, features);
        let host = values(x.clone());
        let burn = values(m.forward(x.clone(), mask.clone()));
        let ours = graph.logits(&host, &valid, frames).unwrap();
        let scale = max_abs(&burn).max(1.0);
        for (a, b) in burn.iter().zip(&ours) {
            assert!((a - b).abs() <= 2e-5 * scale, "{batch}x{frames}: burn {a} vs graph {b}");
        }
        let burn = values(m.forward_frames(x, mask));
        let ours = graph.frame_logits(&host, &valid, frames).unwrap();
        assert_eq!(burn.len(), ours.len());
        let scale = max_abs(&burn).max(1.0);
        for (a, b) in burn.iter().zip(&ours) {
            assert!((a - b).abs() <= 2e-5 * scale, "frames {batch}x{frames}: burn {a} vs graph {b}");
        }
    }
}

/// The three forwards of the conv-transformer (Burn's modules, the f32 eval graph, the int8 eval
/// graph) kept in step block by block: a change to one block's module that the eval graph does
/// not follow fails here, naming the block.
#[test]
fn each_eval_block_equals_burns_eval_forward_of_that_block() {
    use engine::{EvalConvBlock, EvalTransformerBlock};
    use models::common::{DropDraw, FrameMask};
    let SignModel::ConvTransformer(m) = model(21, 9) else { unreachable!("a conv-transformer") };
    let [_, dim] = m.stem.weight.dims();
    let (batch, frames) = (3, 16);
    let (_, mask, valid) = inputs(batch, frames, 1);
    let frame_mask = FrameMask::new(mask, burn::tensor::DType::F32);
    let x = seeded(7, [batch, frames, dim]).reshape([batch * frames, dim]);
    let host = values(x.clone());
    let check = |what: String, burn: &[f32], run: &dyn Fn(Weights, &mut Vec<f32>)| {
        let scale = max_abs(burn).max(1.0);
        for (weights, tolerance) in [(Weights::F32, 2e-5), (Weights::Int8, 0.05)] {
            let mut ours = host.clone();
            run(weights, &mut ours);
            let worst = burn.iter().zip(&ours).fold(0.0f32, |w, (a, b)| w.max((a - b).abs()));
            assert!(worst <= tolerance * scale, "{what} ({weights}): differs from Burn's by {worst} (scale {scale})");
        }
    };
    for (i, block) in m.conv_blocks.iter().enumerate() {
        let burn = values(block.forward(x.clone(), &frame_mask, &DropDraw::new(0.0, 0, &x, &frame_mask)));
        check(format!("conv block {i}"), &burn, &|w, ours| EvalConvBlock::new(block, w).forward(ours, &valid, frames));
    }
    for (i, block) in m.transformer_blocks.iter().enumerate() {
        let burn = values(block.forward(x.clone(), &frame_mask, &DropDraw::new(0.0, 0, &x, &frame_mask)));
        check(format!("transformer block {i}"), &burn, &|w, ours| {
            EvalTransformerBlock::new(block, w).forward(ours, &valid, frames)
        });
    }
}

#[test]
fn a_batch_split_over_threads_gives_the_logits_of_one_part() {
    let (features, classes, frames) = (21, 9, 16);
    let m = model(features, classes);
    let (x, _, valid) = inputs(7, frames, features);
    let host = values(x);
    for weights in [Weights::F32, Weights::Int8] {
        let graph = EvalGraph::new(&m, weights).unwrap();
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                (graph.logits(&host, &valid, frames).unwrap(), graph.frame_logits(&host, &valid, frames).unwrap())
            })
        };
        // One thread: the batch as one part. Three threads: parts of 3, 3 and 1 sequences.
        let ((one, one_frames), (split, split_frames)) = (run(1), run(3));
        for (a, b, what) in [(&one, &split, "logits"), (&one_frames, &split_frames, "frame logits")] {
            assert_eq!(a.len(), b.len(), "{weights} {what}");
            let scale = max_abs(a).max(1.0);
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert!((x - y).abs() <= 1e-5 * scale, "{weights} {what} {i}: one part {x} vs split {y}");
            }
        }
        assert_eq!(one.len(), 7 * classes);
    }
}

#[test]
fn int8_graph_stays_close_to_f32_and_is_smaller() {
    let (features, classes) = (40, 12);
    let m = model(features, classes);
    let f32_graph = EvalGraph::new(&m, Weights::F32).unwrap();
    let int8 = EvalGraph::new(&m, Weights::Int8).unwrap();
    let (x, _, valid) = inputs(16, 20, features);
    let host = values(x);
    let a = f32_graph.logits(&host, &valid, 20).unwrap();
    let b = int8.logits(&host, &valid, 20).unwrap();
    let scale = max_abs(&a);
    let worst = a.iter().zip(&b).fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
    assert!(worst <= 0.05 * scale, "int8 logits differ by {worst} (scale {scale})");
    let argmax = |v: &[f32]| {
        v.chunks(classes).map(|r| (0..classes).max_by(|&i, &j| r[i].total_cmp(&r[j])).unwrap()).collect::<Vec<_>>()
    };
    let agree = argmax(&a).iter().zip(argmax(&b)).filter(|(x, y)| **x == *y).count();
    assert!(agree >= 14, "top-1 agrees on {agree}/16");
    assert!(int8.bytes() * 2 < f32_graph.bytes(), "{} vs {} bytes", int8.bytes(), f32_graph.bytes());
}

#[test]
fn unsupported_models_and_bad_shapes_are_errors() {
    let gru = ModelConfig::Gru(GruModelConfig { hidden: 8, ..Default::default() }).init::<B>(5, 3, &dev());
    let err = EvalGraph::new(&gru, Weights::Int8).unwrap_err().to_string();
    assert!(err.contains("gru") && err.contains("conv-transformer"), "{err}");
    let m = model(6, 3);
    let g = EvalGraph::new(&m, Weights::Int8).unwrap();
    let err = g.logits(&[0.0; 10], &[2], 2).unwrap_err().to_string();
    assert!(err.contains("10 input values") && err.contains("expected 12"), "{err}");
    let err = g.logits(&[0.0; 12], &[3], 2).unwrap_err().to_string();
    assert!(err.contains("3 valid frames"), "{err}");
}

/// The model `infer` runs, its norms folded into the linear layers beside them, gives Burn's
/// forward of the unfolded model (pooled and per frame, with padding); its folded norms are the
/// identity, so the eval graph built from it is the unfolded model's graph; the other
/// architectures and a model that can still train come back unfolded.
#[test]
fn folded_norms_give_the_unfolded_models_forward() {
    let (features, classes) = (21, 9);
    let m = model(features, classes);
    let folded = engine::fold_norms(m.clone());
    let SignModel::ConvTransformer(f) = &folded else { panic!("not a conv-transformer") };
    let norms = [&f.stem_norm].into_iter().chain(f.transformer_blocks.iter().flat_map(|b| [&b.norm1, &b.norm2]));
    assert!(norms.into_iter().all(|n| n.folded));
    assert!(f.conv_blocks.iter().all(|b| !b.norm.folded), "the conv blocks' norms run inside their conv");
    assert!(f.stem.bias.is_some() && f.transformer_blocks[0].attention.qkv.bias.is_some());
    let graph = EvalGraph::new(&m, Weights::F32).unwrap();
    let graph_of_folded = EvalGraph::new(&folded, Weights::F32).unwrap();
    for (batch, frames) in [(1, 1), (3, 16), (5, 24)] {
        let (x, mask, valid) = inputs(batch, frames, features);
        let want = values(m.forward(x.clone(), mask.clone()));
        let got = values(folded.forward(x.clone(), mask.clone()));
        let scale = max_abs(&want).max(1.0);
        let worst = want.iter().zip(&got).fold(0.0f32, |w, (a, b)| w.max((a - b).abs()));
        assert!(worst <= 2e-5 * scale, "{batch}x{frames}: folded logits differ by {worst} (scale {scale})");
        assert_ne!(want, values(m.forward(x.clone() * 1.5, mask.clone())), "the inputs matter");
        let want = values(m.forward_frames(x.clone(), mask.clone()));
        let got = values(folded.forward_frames(x.clone(), mask));
        let scale = max_abs(&want).max(1.0);
        let worst = want.iter().zip(&got).fold(0.0f32, |w, (a, b)| w.max((a - b).abs()));
        assert!(worst <= 2e-5 * scale, "frames {batch}x{frames}: folded logits differ by {worst}");
        let host = values(x);
        assert_eq!(
            graph.logits(&host, &valid, frames).unwrap(),
            graph_of_folded.logits(&host, &valid, frames).unwrap()
        );
    }
    let compute = engine::inference_model(m.clone(), burn::tensor::FloatDType::F32);
    let (x, mask, _) = inputs(2, 8, features);
    let (want, got) = (values(m.forward(x.clone(), mask.clone())), values(compute.forward(x, mask)));
    assert!(want.iter().zip(&got).all(|(a, b)| (a - b).abs() <= 2e-5 * max_abs(&want).max(1.0)));

    let gru = ModelConfig::Gru(GruModelConfig { hidden: 8, ..Default::default() }).init::<B>(5, 3, &dev());
    assert!(matches!(engine::fold_norms(gru), SignModel::Gru(_)));
    let training = ModelConfig::ConvTransformer(ConvTransformerConfig { dim: 16, heads: 2, ..Default::default() })
        .init::<AD>(5, 3, &dev());
    let SignModel::ConvTransformer(t) = engine::fold_norms(training) else { panic!() };
    assert!(!t.stem_norm.folded && t.stem.bias.is_none(), "a model on an autodiff device is left to train");
}
