//! The optimizers the config can name, behind one type, with their state saved and restored
//! exactly (full-precision records).

use std::path::Path;

use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamW, AdamWConfig, GradientsParams, Optimizer, Sgd, SgdConfig};
use models::SignModel;

use crate::config::{OptimizerConfig, OptimizerKind};
use crate::{InnerBackend, Result, TrainBackend};

type M = SignModel<TrainBackend>;

/// The optimizer of a run, with f32 state.
#[derive(Clone)]
pub enum Optim {
    /// AdamW.
    AdamW(burn::optim::adaptor::OptimizerAdaptor<AdamW, M, TrainBackend>),
    /// SGD.
    Sgd(burn::optim::adaptor::OptimizerAdaptor<Sgd<InnerBackend>, M, TrainBackend>),
}

impl std::fmt::Debug for Optim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::AdamW(_) => "Optim::AdamW",
            Self::Sgd(_) => "Optim::Sgd",
        })
    }
}

impl Optim {
    /// Gradient clipping is done by the loop (global norm), not per tensor by Burn.
    pub fn new(cfg: &OptimizerConfig) -> Self {
        match cfg.kind {
            OptimizerKind::Adamw => Self::AdamW(
                AdamWConfig::new()
                    .with_beta_1(cfg.beta1 as f32)
                    .with_beta_2(cfg.beta2 as f32)
                    .with_epsilon(cfg.epsilon as f32)
                    .with_weight_decay(cfg.weight_decay as f32)
                    .init(),
            ),
            OptimizerKind::Sgd => {
                let momentum = (cfg.momentum > 0.0).then_some(MomentumConfig {
                    momentum: cfg.momentum,
                    dampening: 0.0,
                    nesterov: cfg.nesterov,
                });
                let decay = (cfg.weight_decay > 0.0).then(|| WeightDecayConfig::new(cfg.weight_decay as f32));
                Self::Sgd(SgdConfig::new().with_momentum(momentum).with_weight_decay(decay).init())
            }
        }
    }

    /// Apply `grads` to `model` with learning rate `lr`.
    pub fn step(&mut self, lr: f64, model: M, grads: GradientsParams) -> M {
        match self {
            Self::AdamW(o) => o.step(lr, model, grads),
            Self::Sgd(o) => o.step(lr, model, grads),
        }
    }

    /// Write the optimizer state to `path`, atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        match self {
            Self::AdamW(o) => bundle::weights::write_record::<TrainBackend, _>(o.to_record(), path)?,
            Self::Sgd(o) => bundle::weights::write_record::<TrainBackend, _>(o.to_record(), path)?,
        }
        Ok(())
    }

    /// Load the state saved by [`Optim::save`] (the optimizer kind must match).
    pub fn load(self, path: &Path, device: &device::DispatchDevice) -> Result<Self> {
        const WHAT: &str = "optimizer state";
        Ok(match self {
            Self::AdamW(o) => Self::AdamW(o.load_record(bundle::weights::read_record(path, WHAT, device)?)),
            Self::Sgd(o) => Self::Sgd(o.load_record(bundle::weights::read_record(path, WHAT, device)?)),
        })
    }
}
