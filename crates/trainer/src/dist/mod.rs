//! Data-parallel training on several devices and machines, on Burn's collective
//! (`burn-collective`: all-reduce between peers; one thread per device on a machine, several
//! machines through its global orchestrator over websockets).
//!
//! One peer per device. Peer 0 (the leader, on node 0) runs the training loop: data order,
//! schedules, the loss-scale and NaN policies, the optimizer, validation, checkpoints and
//! metrics, all written once. Every step, with three all-reduces:
//! 1. the leader's command ([`protocol::Command`]): the step's dataset indices, each peer's rows
//!    of each micro-batch, the epoch, dropout seed and loss scale;
//! 2. the leader's weights (f32 masters), so every peer computes on exactly the same weights
//!    (the leader contributes them, the others zeros: the sum is exact);
//! 3. every peer's gradients of its share, weighted by its rows so that the sum is the gradient
//!    of the single-device step on the whole batch, with each peer's loss, correct count,
//!    samples and compute seconds.
//!
//! The leader then reads the reduced loss and gradient norm once, so the finite check, the loss
//! scale and the recovery decisions are the group's, and applies the one update. Peers other
//! than the leader keep no state between steps: resume, NaN rollback and device-fault recovery
//! are the single-device code paths, and unlike devices (a CPU and a GPU) never drift apart.
//! The price is the weights' all-reduce (one model's worth of traffic per step besides the
//! gradients), stated in docs/PERFORMANCE.md.

pub mod balance;
pub mod config;
pub mod flat;
mod link;
mod peer;
pub mod protocol;
pub mod security;
mod watch;

pub use peer::serve_node;

pub use watch::EXIT_PEER_LOST;

use std::thread::JoinHandle;
use std::time::Instant;

use burn::tensor::FloatDType;
use burn_collective::{finish_collective, register, reset_collective, PeerId};
use models::SignModel;
use serde::Serialize;

use crate::objective::Objective;
use crate::optim::Optim;
use crate::profile::Profiler;
use crate::step::{apply_gradients, compute_gradients, StepGradients, StepOutcome, StepSettings};
use crate::{InnerBackend, Result, TrainBackend, TrainError};
use balance::SpeedWindow;
pub use config::{Balance, DistributedConfig};
use link::{checksum_of, registration_error, share_vector, Link};
pub use link::{collective_config, Workload};
use protocol::{Command, GradLayout, Hello, StepHeader};
use watch::Watch;

/// One event of a group's step, `(kind, detail)`: `weights_verified` or `rebalance`.
pub type GroupEvent = (&'static str, String);

/// The peers of a data-parallel run and how the batch was split among them at the end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupSummary {
    /// `equal`, `measured` or `fixed`.
    pub balance: Balance,
    /// Share changes made from measurements.
    pub rebalances: usize,
    /// One entry per peer.
    pub peers: Vec<PeerSummary>,
}

/// One peer at the end of a data-parallel run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeerSummary {
    /// Rank, node and device.
    #[serde(flatten)]
    pub peer: PeerInfo,
    /// Rows of a full micro-batch it computed last.
    pub rows: usize,
    /// Its last measured samples/s on the real step (`None` before the first measurement).
    pub samples_per_s: Option<f64>,
}

/// One device of the group, as named in messages and `summary.json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PeerInfo {
    /// Global rank (burn-collective's `PeerId`).
    pub rank: usize,
    /// Node (machine) index.
    pub node: u32,
    /// Backend and device (`cpu`, `wgpu: llvmpipe ...`).
    pub device: String,
}

impl PeerInfo {
    /// `peer 1 (cpu, node 0)`.
    pub fn label(&self) -> String {
        format!("peer {} ({}, node {})", self.rank, self.device, self.node)
    }
}

/// This machine's devices for `[distributed] devices` (`gpus` = every CUDA GPU).
pub fn local_devices(cfg: &crate::ExperimentConfig) -> Result<Vec<device::SelectedDevice>> {
    let d = &cfg.distributed;
    let policy = cfg.device.policy();
    if d.devices.len() == 1 && d.devices[0].trim().eq_ignore_ascii_case("gpus") {
        let inv = device::probe::probe_cuda();
        let n = inv.gpus.len();
        if n == 0 {
            return Err(TrainError::Invalid(format!(
                "distributed.devices = [\"gpus\"] asks for every CUDA GPU, but none is usable: {:?}",
                inv.status
            )));
        }
        return (0..n).map(|i| Ok(device::resolve(&device::DeviceSpec::Cuda(Some(i)), &policy)?)).collect();
    }
    d.devices
        .iter()
        .map(|s| {
            let spec: device::DeviceSpec = s.parse()?;
            Ok(device::resolve(&spec, &policy)?)
        })
        .collect()
}

/// The leader's handle on the group (peer 0 on node 0).
pub struct Group {
    link: Link,
    /// The leader prepares its own rows with the same batcher as the peers.
    work: Workload,
    info: Vec<PeerInfo>,
    threads: Vec<JoinHandle<()>>,
    hello: Hello,
    layout: GradLayout,
    balance: Balance,
    rebalance_every: usize,
    weights: Vec<f64>,
    window: SpeedWindow,
    /// Steps since the shares last changed (the first one after a change warms up new shapes).
    since_change: usize,
    last_speeds: Option<Vec<f64>>,
    rebalances: usize,
    /// Steps run by the group.
    steps: usize,
    multi_node: bool,
    finished: bool,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group").field("peers", &self.info).field("weights", &self.weights).finish()
    }
}

/// A change of shares, for the run's events.
#[derive(Debug, Clone, PartialEq)]
pub struct Rebalanced {
    /// Measured samples/s per peer.
    pub speeds: Vec<f64>,
    /// Rows per peer of a full micro-batch, from now on.
    pub rows: Vec<usize>,
}

impl Group {
    /// Start the group of `cfg` (this process is node 0): worker threads for local peers 1..,
    /// then the leader's registration and the opening message. `devices[0]` is the leader's.
    pub fn start(
        cfg: &crate::ExperimentConfig,
        devices: &[device::SelectedDevice],
        work: Workload,
        leader_model: &SignModel<TrainBackend>,
        batch: usize,
        accumulation: usize,
        compute: FloatDType,
    ) -> Result<Self> {
        let d = &cfg.distributed;
        let collective = collective_config(d)?;
        let total = d.total_peers();
        let watch = Watch::new(d, devices);
        let info = peer_infos(d, devices, &cfg.device.device.to_string());
        let mut threads = Vec::new();
        for (i, dev) in devices.iter().enumerate().skip(1) {
            threads.push(peer::spawn_peer(
                i,
                dev.device.clone(),
                work.clone(),
                collective.clone(),
                watch.clone(),
                cfg,
            )?);
        }
        let device = devices[0].device.clone();
        let link = Link { rank: 0, device: device.clone(), watch: watch.clone() };
        watch.enter(0, "registration");
        let reg = register::<InnerBackend>(PeerId(0), device.clone(), collective);
        watch.leave(0);
        reg.map_err(|e| watch.error(0, "registration", registration_error(&e)))?;
        let params = flat::len(leader_model);
        let hello =
            Hello { batch, accumulation, peers: total, params: params as u64, dtype: protocol::dtype_code(compute) };
        link.reduce_host("opening message", hello.encode())?;
        let weights = match d.balance {
            Balance::Fixed => d.shares.clone(),
            _ => vec![1.0; total],
        };
        Ok(Self {
            link,
            work,
            info,
            threads,
            hello,
            layout: GradLayout { params, peers: total },
            balance: d.balance,
            rebalance_every: d.rebalance_every,
            weights,
            window: SpeedWindow::new(total),
            since_change: 0,
            last_speeds: None,
            rebalances: 0,
            steps: 0,
            multi_node: d.nodes > 1,
            finished: false,
        })
    }

    /// The group's peers.
    pub fn peers(&self) -> &[PeerInfo] {
        &self.info
    }

    /// Rows per peer of a full micro-batch with the current shares.
    pub fn rows(&self) -> Vec<usize> {
        balance::split(self.hello.batch, &self.weights)
    }

    /// The last measured samples/s per peer.
    pub fn speeds(&self) -> Option<&[f64]> {
        self.last_speeds.as_deref()
    }

    /// Share changes so far.
    pub fn rebalances(&self) -> usize {
        self.rebalances
    }

    /// The group for `summary.json`.
    pub fn summary(&self) -> GroupSummary {
        let rows = self.rows();
        GroupSummary {
            balance: self.balance,
            rebalances: self.rebalances,
            peers: self
                .info
                .iter()
                .enumerate()
                .map(|(i, p)| PeerSummary {
                    peer: p.clone(),
                    rows: rows[i],
                    samples_per_s: self.last_speeds.as_ref().map(|s| s[i]),
                })
                .collect(),
        }
    }

    /// One optimizer step of the group over the micro-batches `micro` (dataset indices, split
    /// among the peers; every peer, the leader too, prepares its own rows). Returns the updated model, the outcome (over the whole batch)
    /// and the group's events of the step, `(kind, detail)`: `weights_verified` after the first
    /// step, `rebalance` when the shares change.
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &mut self,
        model: SignModel<TrainBackend>,
        optim: &mut Optim,
        objective: &Objective,
        settings: &StepSettings,
        prof: &mut Profiler,
        epoch: usize,
        micro: &[Vec<usize>],
    ) -> Result<(SignModel<TrainBackend>, StepOutcome, Vec<GroupEvent>)> {
        let device = self.link.device.clone();
        let rows: Vec<Vec<usize>> = micro.iter().map(|m| balance::split(m.len(), &self.weights)).collect();
        let header = StepHeader {
            epoch,
            dropout_seed: settings.dropout_seed,
            loss_scale: settings.loss_scale.value(),
            rows: rows.clone(),
            indices: micro.iter().flat_map(|m| m.iter().copied()).collect(),
            // The first step checks that every peer computes on the leader's weights.
            verify: self.steps == 0,
        };
        self.link.reduce_host("step command", Command::Step(header.clone()).encode(&self.hello))?;
        let weights = flat::weights(&model, &device);
        let checksum = if header.verify { checksum_of(&weights) } else { 0.0 };
        self.link.reduce("weights", weights)?;
        let start = Instant::now();
        let work = &self.work;
        let g = compute_gradients(&device, &model, None, objective, settings, &header.weights(0), prof, |k| {
            Ok(work.batcher.host_batch(&work.dataset, header.share(k, 0), epoch).to_device(&device))
        })?;
        let own = share_vector(&model, &g, &self.layout, 0, &device, start, checksum);
        let reduced = self.link.reduce("gradients", own)?;
        let n = self.layout.params;
        let p = self.layout.peers;
        let tail = reduced.clone().slice(n + 2..self.layout.len()).into_data().to_vec::<f32>().unwrap_or_default();
        let samples: Vec<f64> = tail.iter().take(p).map(|&x| x as f64).collect();
        let seconds: Vec<f64> = tail.iter().skip(p).take(p).map(|&x| x as f64).collect();
        let mut events = Vec::new();
        if header.verify {
            self.verify(checksum, &tail[2 * p..])?;
            events.push((
                "weights_verified",
                format!("all {p} peers computed the first step on the leader's weights (checksum {checksum})"),
            ));
        }
        self.steps += 1;
        let total = StepGradients {
            grads: flat::load_grads(&model, reduced.clone().slice(0..n)),
            loss: reduced.clone().slice(n..n + 1),
            correct: reduced.slice(n + 1..n + 2),
            samples: samples.iter().sum::<f64>().round() as u64,
            memory: g.memory,
        };
        let (model, outcome) = apply_gradients(&device, model, optim, settings, total, prof);
        if let Some(r) = self.measure(&samples, &seconds) {
            events.push(("rebalance", describe_rebalance(&self.info, &r)));
        }
        Ok((model, outcome, events))
    }

    /// Every peer's checksum of the weights it computed with must be the leader's.
    fn verify(&self, own: f32, peers: &[f32]) -> Result<()> {
        let wrong: Vec<String> = peers
            .iter()
            .zip(&self.info)
            .filter(|(c, _)| c.to_bits() != own.to_bits())
            .map(|(c, info)| format!("{} (checksum {c}, the leader's {own})", info.label()))
            .collect();
        if wrong.is_empty() {
            return Ok(());
        }
        Err(TrainError::Group { peer: wrong.join(", "), message: "computed on other weights than the leader's".into() })
    }

    /// Record one step's speeds; with measured balance, set new shares when a window is full.
    fn measure(&mut self, samples: &[f64], seconds: &[f64]) -> Option<Rebalanced> {
        self.since_change += 1;
        if self.since_change == 1 {
            return None; // the first step on new shapes compiles and tunes kernels
        }
        self.window.add(samples, seconds);
        // The first shares are set after a short window; later ones every `rebalance_every`.
        let want = if self.rebalances == 0 { self.rebalance_every.min(3) } else { self.rebalance_every };
        if self.window.steps() < want {
            return None;
        }
        let speeds = self.window.speeds();
        self.window = SpeedWindow::new(self.layout.peers);
        let speeds = speeds?;
        self.last_speeds = Some(speeds.clone());
        if self.balance != Balance::Measured {
            return None;
        }
        let before = self.rows();
        self.weights = speeds.clone();
        self.rebalances += 1;
        let rows = self.rows();
        if rows != before {
            self.since_change = 0;
        }
        Some(Rebalanced { speeds, rows })
    }

    /// Tell every peer the run is over and wait for this machine's peers to leave.
    pub fn finish(mut self) -> Result<()> {
        self.finished = true;
        self.link.reduce_host("stop command", Command::Stop.encode(&self.hello))?;
        let _ = finish_collective::<InnerBackend>(PeerId(0));
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.link.watch.stop();
        match self.link.watch.failure() {
            Some((peer, message)) => Err(TrainError::Group { peer, message }),
            None => Ok(()),
        }
    }
}

impl Drop for Group {
    /// A leader that stops early (an error, a panic) releases the peers waiting on it.
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.link.watch.stop();
        if !self.multi_node {
            reset_collective::<InnerBackend>();
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
        }
    }
}

/// `peer 0 (cpu, node 0) 812 samples/s -> 24 rows, ...` for the `rebalance` event.
pub fn describe_rebalance(peers: &[PeerInfo], r: &Rebalanced) -> String {
    let parts: Vec<String> = peers
        .iter()
        .zip(r.speeds.iter().zip(&r.rows))
        .map(|(p, (s, rows))| format!("{} {s:.1} samples/s -> {rows} rows", p.label()))
        .collect();
    format!("shares from measured speeds: {}", parts.join(", "))
}

/// Every peer of the group; another node's devices are known by their spec (its `devices`
/// entries, or `fallback`, its `[device]`).
fn peer_infos(d: &DistributedConfig, devices: &[device::SelectedDevice], fallback: &str) -> Vec<PeerInfo> {
    let local = d.local_peers();
    (0..d.total_peers())
        .map(|rank| {
            let node = (rank / local) as u32;
            let device = if node == d.node_rank {
                devices.get(rank % local).map_or("?".into(), |s| s.selection.name.clone())
            } else {
                d.devices.get(rank % local).cloned().unwrap_or_else(|| fallback.to_string())
            };
            PeerInfo { rank, node, device }
        })
        .collect()
}

/// Run the global orchestrator that the `nodes` nodes of a multi-machine group meet through,
/// until the process is interrupted. It listens on `bind` only, every node must prove the group's
/// secret (`secret_file`, else `SIGNFLOW_GROUP_SECRET`; none only with `insecure`), and a node
/// that declares another node count is refused without affecting the group.
pub fn orchestrator(port: u16, nodes: u32, bind: &str, secret_file: &str, insecure: bool) -> Result<()> {
    if nodes < 2 {
        return Err(TrainError::Invalid(format!(
            "--nodes {nodes}: an orchestrator serves groups of at least 2 nodes (one machine needs none)"
        )));
    }
    let secret = security::group_secret(secret_file, insecure)?;
    security::secure(security::bind_address(bind, "--bind")?, secret);
    println!("orchestrator for groups of {nodes} nodes listening on {bind}:{port}; Ctrl-C stops it");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| TrainError::Invalid(format!("cannot start the orchestrator's runtime: {e}")))?;
    rt.block_on(burn_collective::start_global_orchestrator_for(port, Some(nodes)));
    Ok(())
}
