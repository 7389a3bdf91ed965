//! What the leader and the other peers of a group share: the [`Workload`] a peer computes on,
//! the collective's configuration, the [`Link`] through which a peer's reductions go (watched),
//! and a peer's share of a step as one vector.

use std::sync::Arc;
use std::time::Instant;

use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use burn_collective::{all_reduce, CollectiveConfig, PeerId, ReduceOperation};
use data::dataset::SignDataset;
use data::loader::ItemBatcher;
use models::{ModelConfig, SignModel};

use super::config::DistributedConfig;
use super::protocol::{self, GradLayout};
use super::watch::Watch;
use super::{flat, security};
use crate::objective::Objective;
use crate::step::StepGradients;
use crate::{InnerBackend, Result, TrainBackend, TrainError};

type Device = device::DispatchDevice;

/// What every peer needs to compute its share of a step: shared by the threads of a process;
/// another node rebuilds the same from the same config.
#[derive(Clone)]
pub struct Workload {
    /// The loaded dataset.
    pub dataset: Arc<SignDataset>,
    /// Augmentation and preprocessing, keyed by (epoch, index) like the leader's loader.
    pub batcher: ItemBatcher,
    /// Architecture.
    pub model: ModelConfig,
    /// `training.label_smoothing`.
    pub label_smoothing: f64,
    /// The task (its loss).
    pub task: models::Task,
    /// Deliberate failures (a dying peer).
    pub faults: crate::inject::Faults,
}

impl std::fmt::Debug for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workload").field("model", &self.model.kind()).finish()
    }
}

impl Workload {
    pub(super) fn model(&self, device: &Device) -> Result<SignModel<TrainBackend>> {
        let ds = &self.dataset;
        Ok(self.model.init::<TrainBackend>(ds.features, ds.num_classes(), device))
    }

    pub(super) fn objective(&self, device: &Device) -> Objective {
        Objective::new(self.task, self.label_smoothing, device)
    }
}

/// The collective's configuration for this machine. For a multi-node group this also sets the
/// process's network security up: its data server listens on `node_address` only, and every
/// connection proves the group's secret ([`security`]).
pub fn collective_config(cfg: &DistributedConfig) -> Result<CollectiveConfig> {
    let c = CollectiveConfig::default().with_num_devices(cfg.local_peers());
    if cfg.nodes <= 1 {
        return Ok(c);
    }
    let secret = security::group_secret(&cfg.secret_file, cfg.insecure)?;
    security::secure(security::bind_address(&cfg.node_address, "distributed.node_address")?, secret);
    let addr = |s: String| s.parse::<burn_communication::Address>().expect("addresses parse from any string");
    let ws = |s: &str| if s.contains("://") { s.to_string() } else { format!("ws://{s}") };
    Ok(c.with_num_nodes(cfg.nodes)
        .with_global_address(addr(ws(cfg.orchestrator.trim())))
        .with_node_address(addr(format!("{}:{}", ws(cfg.node_address.trim()), cfg.data_port)))
        .with_data_service_port(cfg.data_port))
}

/// Calls into the collective for one peer, with the watchdog told what it waits on.
pub(super) struct Link {
    /// This peer's rank.
    pub(super) rank: usize,
    /// Its device.
    pub(super) device: Device,
    /// The group's watchdog.
    pub(super) watch: Arc<Watch>,
}

impl Link {
    /// Sum `v` over the group.
    pub(super) fn reduce(&self, what: &'static str, v: Tensor<InnerBackend, 1>) -> Result<Tensor<InnerBackend, 1>> {
        self.watch.enter(self.rank, what);
        let r = all_reduce::<InnerBackend>(PeerId(self.rank as u32), v.into_primitive().tensor(), ReduceOperation::Sum);
        self.watch.leave(self.rank);
        match r {
            Ok(t) => Ok(Tensor::from_primitive(TensorPrimitive::Float(t))),
            Err(e) => Err(self.watch.error(self.rank, what, format!("{e:?}"))),
        }
    }

    /// Sum a host vector over the group.
    pub(super) fn reduce_host(&self, what: &'static str, v: Vec<f32>) -> Result<Vec<f32>> {
        let n = v.len();
        let t = Tensor::<InnerBackend, 1>::from_data(TensorData::new(v, [n]), &self.device);
        let out = self.reduce(what, t)?;
        out.into_data().to_vec::<f32>().map_err(|e| TrainError::Invalid(format!("reading the {what} message: {e:?}")))
    }
}

/// [`protocol::weights_checksum`] of a flat weight vector on the device (one host read).
pub(super) fn checksum_of(flat: &Tensor<InnerBackend, 1>) -> f32 {
    flat.clone().into_data().to_vec::<f32>().map_or(f32::NAN, |w| protocol::weights_checksum(&w))
}

fn host_tensor(v: Vec<f32>, device: &Device) -> Tensor<InnerBackend, 1> {
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), device)
}

/// A peer's share of a step: the gradients as one flat vector followed by its statistics.
pub(super) fn share_vector(
    model: &SignModel<TrainBackend>,
    g: &StepGradients,
    layout: &GradLayout,
    rank: usize,
    device: &Device,
    start: Instant,
    checksum: f32,
) -> Tensor<InnerBackend, 1> {
    let grads = flat::grads(model, &g.grads, device);
    // Wait for the device, so the seconds are the share's real compute time.
    device::memory::sync(device);
    let stats = layout.stats(rank, g.samples, start.elapsed().as_secs_f64(), checksum);
    Tensor::cat(vec![grads, g.loss.clone(), g.correct.clone(), host_tensor(stats[2..].to_vec(), device)], 0)
}

/// A failed registration in words: the orchestrator refuses a node whose `distributed.nodes`
/// differs from the group's (burn-collective reports it as a parameter mismatch).
pub(super) fn registration_error(e: &burn_collective::CollectiveError) -> String {
    match e {
        // The orchestrator's error type is not exported; its variant name is what tells.
        burn_collective::CollectiveError::Global(g) if format!("{g:?}") == "RegisterParamsMismatch" => format!(
            "the orchestrator refused this node: it serves groups of another size (distributed.nodes must be the same on every node and equal `trainer orchestrator --nodes`; {e:?})"
        ),
        _ => format!("{e:?}"),
    }
}
