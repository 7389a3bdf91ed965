//! The group's watchdog: which peer of this machine waits in which collective operation since
//! when, and what failed. A peer that panics, or a wait longer than `distributed.timeout_s`,
//! stops the group with a message naming the peer that failed or went silent.
//!
//! Within one machine, stopping means resetting burn-collective's local server, which fails
//! every pending operation, so each peer returns an error (no hang). Across machines a pending
//! operation waits on the network inside burn-collective and cannot be cancelled: the process
//! prints the message and exits with status 4 (checkpoints are written atomically, so the run
//! continues with `--resume`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use burn_collective::reset_collective;

use super::config::DistributedConfig;
use crate::{InnerBackend, TrainError};

/// Exit status of a process whose group lost a peer on another machine.
pub const EXIT_PEER_LOST: i32 = 4;

#[derive(Default)]
struct State {
    /// Per local peer: waiting since when, in which operation.
    waiting: Vec<Option<(Instant, &'static str)>>,
    /// Local peers that ended (returned or failed).
    gone: Vec<bool>,
    /// The first failure: (peer label, message).
    failure: Option<(String, String)>,
}

/// Shared by the peers of one process.
pub(crate) struct Watch {
    state: Mutex<State>,
    labels: Vec<String>,
    first_rank: usize,
    nodes: u32,
    node: u32,
    timeout: Duration,
    /// `distributed.orchestrator`, named when a registration waits too long.
    orchestrator: String,
    stopped: AtomicBool,
}

impl Watch {
    /// A watch over this machine's peers, with its watchdog thread.
    pub(crate) fn new(d: &DistributedConfig, devices: &[device::SelectedDevice]) -> Arc<Self> {
        let local = devices.len().max(1);
        let first_rank = d.node_rank as usize * local;
        let labels = (0..local)
            .map(|i| {
                let name = devices.get(i).map_or("?", |s| s.selection.name.as_str());
                format!("peer {} ({name}, node {})", first_rank + i, d.node_rank)
            })
            .collect();
        let watch = Arc::new(Self {
            state: Mutex::new(State { waiting: vec![None; local], gone: vec![false; local], failure: None }),
            labels,
            first_rank,
            nodes: d.nodes,
            node: d.node_rank,
            timeout: Duration::from_secs(d.timeout_s),
            orchestrator: d.orchestrator.clone(),
            stopped: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&watch);
        let _ = std::thread::Builder::new().name("signflow-watchdog".into()).spawn(move || watchdog(weak));
        watch
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn local(&self, rank: usize) -> usize {
        rank.saturating_sub(self.first_rank).min(self.labels.len() - 1)
    }

    /// Peer `rank` starts waiting in `what`.
    pub(crate) fn enter(&self, rank: usize, what: &'static str) {
        let i = self.local(rank);
        self.lock().waiting[i] = Some((Instant::now(), what));
    }

    /// Peer `rank` is done waiting.
    pub(crate) fn leave(&self, rank: usize) {
        let i = self.local(rank);
        self.lock().waiting[i] = None;
    }

    /// Peer `rank` ended with an error or a panic: stop the group.
    pub(crate) fn peer_failed(&self, rank: usize, message: String) {
        let i = self.local(rank);
        let label = self.labels[i].clone();
        {
            let mut s = self.lock();
            s.gone[i] = true;
            s.waiting[i] = None;
            if s.failure.is_some() {
                return;
            }
            s.failure = Some((label, message));
        }
        self.release();
    }

    /// The error for a failed collective operation of peer `rank`: the group's first failure if
    /// there is one, else the operation's own error.
    pub(crate) fn error(&self, rank: usize, what: &str, detail: String) -> TrainError {
        match self.failure() {
            Some((peer, message)) => TrainError::Group { peer, message },
            // Across machines the collective fails when another node's connection is lost.
            None if self.nodes > 1 => TrainError::Group {
                peer: self.other_nodes(),
                message: format!(
                    "lost while {} waited in the {what} all-reduce: {detail}",
                    self.labels[self.local(rank)]
                ),
            },
            None => TrainError::Group {
                peer: self.labels[self.local(rank)].clone(),
                message: format!("the {what} all-reduce failed: {detail}"),
            },
        }
    }

    /// `the peers on node 1` (every node but this one).
    fn other_nodes(&self) -> String {
        let others: Vec<String> = (0..self.nodes).filter(|&n| n != self.node).map(|n| n.to_string()).collect();
        format!("the peers on node {}", others.join(", "))
    }

    /// The first failure: (peer label, message).
    pub(crate) fn failure(&self) -> Option<(String, String)> {
        self.lock().failure.clone()
    }

    /// The run is over; the watchdog ends.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// Fail every pending operation (this machine), or end the process (several machines).
    fn release(&self) {
        if self.nodes <= 1 {
            reset_collective::<InnerBackend>();
            return;
        }
        if let Some((peer, message)) = self.failure() {
            eprintln!("error: data-parallel group: {peer}: {message}");
        }
        std::process::exit(EXIT_PEER_LOST);
    }

    /// A timed-out wait, if any: names the peers that went silent.
    fn check(&self) -> bool {
        let mut s = self.lock();
        if s.failure.is_some() {
            return false;
        }
        let Some((i, since, what)) = s
            .waiting
            .iter()
            .enumerate()
            .filter_map(|(i, w)| w.map(|(t, what)| (i, t, what)))
            .min_by_key(|(_, t, _)| *t)
        else {
            return false;
        };
        if since.elapsed() < self.timeout {
            return false;
        }
        let silent: Vec<String> = (0..self.labels.len())
            .filter(|&j| s.waiting[j].is_none() && !s.gone[j])
            .map(|j| self.labels[j].clone())
            .collect();
        let peer = if !silent.is_empty() {
            silent.join(", ")
        } else if self.nodes > 1 {
            self.other_nodes()
        } else {
            "a peer of this machine".into()
        };
        let hint = match (what, self.nodes > 1) {
            ("registration", true) => format!(
                "; is `trainer orchestrator` running at {} and every node started with the same config?",
                self.orchestrator
            ),
            _ => String::new(),
        };
        s.failure = Some((
            peer,
            format!(
                "sent nothing for {} s while {} waited in the {what} all-reduce (distributed.timeout_s){hint}",
                self.timeout.as_secs(),
                self.labels[i]
            ),
        ));
        true
    }
}

fn watchdog(watch: Weak<Watch>) {
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let Some(w) = watch.upgrade() else { return };
        if w.stopped.load(Ordering::SeqCst) {
            return;
        }
        if w.check() {
            w.release();
        }
    }
}
