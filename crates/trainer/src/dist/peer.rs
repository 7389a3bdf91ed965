//! The side of a data-parallel group that is not the leader: one thread per local device that
//! registers with burn-collective, reads the leader's commands and weights, computes the
//! gradient of its rows and contributes it, until the leader stops the run.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use burn::tensor::Tensor;
use burn_collective::{finish_collective, register, CollectiveConfig, PeerId};

use super::flat;
use super::link::{checksum_of, collective_config, registration_error, share_vector, Link, Workload};
use super::protocol::{self, Command, GradLayout, Hello};
use super::watch::Watch;
use crate::profile::Profiler;
use crate::step::{compute_gradients, LossScale, StepSettings};
use crate::{InnerBackend, Result, TrainError};

type Device = device::DispatchDevice;

pub(super) fn spawn_peer(
    local: usize,
    device: Device,
    work: Workload,
    collective: CollectiveConfig,
    watch: Arc<Watch>,
    cfg: &crate::ExperimentConfig,
) -> Result<JoinHandle<()>> {
    let d = &cfg.distributed;
    let rank = d.node_rank as usize * d.local_peers() + local;
    let die_at = work.faults.peer_death(rank, d.total_peers());
    std::thread::Builder::new()
        .name(format!("signflow-peer-{rank}"))
        .spawn(move || {
            let link = Link { rank, device, watch: watch.clone() };
            let body = std::panic::AssertUnwindSafe(|| serve_peer(&link, &work, collective, die_at));
            let result = match std::panic::catch_unwind(body) {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(payload) => Err(crate::fault::panic_message(&*payload)),
            };
            if let Err(message) = result {
                watch.peer_failed(rank, message);
            }
        })
        .map_err(|e| TrainError::Invalid(format!("cannot start the thread of peer {rank}: {e}")))
}

/// The loop of a peer other than the leader: commands until `Stop`.
fn serve_peer(link: &Link, work: &Workload, collective: CollectiveConfig, die_at: Option<usize>) -> Result<()> {
    let (rank, device) = (link.rank, link.device.clone());
    // Built before registering, so its draws from Burn's process-wide generator happen before
    // the leader (which waits for every registration) goes on. The leader's weights replace it.
    let mut model = work.model(&device)?;
    link.watch.enter(rank, "registration");
    let reg = register::<InnerBackend>(PeerId(rank as u32), device.clone(), collective);
    link.watch.leave(rank);
    reg.map_err(|e| link.watch.error(rank, "registration", registration_error(&e)))?;
    let hello = Hello::decode(&link.reduce_host("opening message", vec![0.0; protocol::HELLO_LEN])?)
        .ok_or_else(|| TrainError::Invalid("the leader's opening message is malformed".into()))?;
    let params = flat::len(&model);
    if hello.params != params as u64 {
        return Err(TrainError::Invalid(format!(
            "this peer's model has {params} trainable parameters, the leader's {}: the nodes' configs differ",
            hello.params
        )));
    }
    let layout = GradLayout { params, peers: hello.peers };
    let objective = work.objective(&device);
    let mut prof = Profiler::new(false);
    let mut steps = 0usize;
    loop {
        let v = link.reduce_host("step command", vec![0.0; protocol::command_len(&hello)])?;
        let header = match Command::decode(&v, &hello) {
            Some(Command::Stop) => break,
            Some(Command::Step(h)) => h,
            None => return Err(TrainError::Invalid("a malformed step command from the leader".into())),
        };
        if die_at == Some(steps) {
            panic!("injected peer failure at step {steps} (peer_dies_at_step)");
        }
        let weights = link.reduce("weights", Tensor::zeros([params], &device))?;
        let checksum = if header.verify { checksum_of(&weights) } else { 0.0 };
        model = flat::load_weights(model, weights);
        let start = Instant::now();
        let settings = StepSettings {
            compute: protocol::dtype_from_code(hello.dtype),
            micro_batches: header.rows.len(),
            loss_scale: LossScale::Host(header.loss_scale),
            lr: 0.0,
            clip_grad_norm: 0.0,
            dropout_seed: header
                .dropout_seed
                .map(|(seed, step)| (seed ^ (rank as u64).wrapping_mul(0x9E37_79B9), step)),
            faults: Default::default(),
            sample_memory: false,
        };
        let g =
            compute_gradients(&device, &model, None, &objective, &settings, &header.weights(rank), &mut prof, |k| {
                Ok(work.batcher.host_batch(&work.dataset, header.share(k, rank), header.epoch).to_device(&device))
            })?;
        link.reduce("gradients", share_vector(&model, &g, &layout, rank, &device, start, checksum))?;
        steps += 1;
    }
    let _ = finish_collective::<InnerBackend>(PeerId(rank as u32));
    Ok(())
}

/// Run this machine's peers of a group whose leader is on another node (`distributed.node_rank
/// > 0`), until the leader stops the run.
pub fn serve_node(cfg: &crate::ExperimentConfig, work: Workload, devices: &[device::SelectedDevice]) -> Result<()> {
    let d = &cfg.distributed;
    let collective = collective_config(d)?;
    let watch = Watch::new(d, devices);
    let mut threads = Vec::new();
    for (i, dev) in devices.iter().enumerate() {
        threads.push(spawn_peer(i, dev.device.clone(), work.clone(), collective.clone(), watch.clone(), cfg)?);
    }
    for t in threads {
        let _ = t.join();
    }
    watch.stop();
    match watch.failure() {
        Some((peer, message)) => Err(TrainError::Group { peer, message }),
        None => Ok(()),
    }
}
