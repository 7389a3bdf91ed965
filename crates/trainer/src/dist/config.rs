//! `[distributed]`: the devices and machines of a data-parallel run.

use device::DeviceSpec;

/// How the global batch is split among the peers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Balance {
    /// Equal shares (the remainder goes to the first peers).
    #[default]
    Equal,
    /// Shares proportional to each peer's measured samples/s on the real step, re-measured every
    /// `rebalance_every` steps.
    Measured,
    /// Shares proportional to `shares`.
    Fixed,
}

/// `[distributed]`: data-parallel training on several devices and machines.
#[derive(Debug, Clone, PartialEq)]
pub struct DistributedConfig {
    /// This machine's devices, one peer each (`["cpu", "cpu"]`, `["cpu", "wgpu"]`,
    /// `["cuda:0", "cuda:1"]`, or `["gpus"]` for every CUDA GPU). Empty: one device, `[device]`.
    pub devices: Vec<String>,
    /// `equal`, `measured` or `fixed`.
    pub balance: Balance,
    /// With `balance = "fixed"`: one relative share per peer (all nodes' peers, node 0's first).
    pub shares: Vec<f64>,
    /// With `balance = "measured"`: steps between re-measurements.
    pub rebalance_every: usize,
    /// Machines (processes) in the group; each runs the same config with its own `node_rank`.
    pub nodes: u32,
    /// This machine's index in `0..nodes`; node 0 runs the loop and writes the run directory.
    pub node_rank: u32,
    /// `host:port` of the global orchestrator (`trainer orchestrator --port P`), when `nodes > 1`.
    pub orchestrator: String,
    /// The address other nodes reach this one at, when `nodes > 1`.
    pub node_address: String,
    /// The port of this node's tensor data service, when `nodes > 1`.
    pub data_port: u16,
    /// Seconds the group waits for a silent peer before it stops with an error naming it. It must
    /// exceed the longest pause between steps (validation, checkpoint writes).
    pub timeout_s: u64,
    /// A file holding the group's shared secret (at least 16 bytes; surrounding whitespace is
    /// ignored), when `nodes > 1`; else the `SIGNFLOW_GROUP_SECRET` environment variable. Every
    /// node and the orchestrator must hold the same secret. The secret itself never goes in a
    /// config.
    pub secret_file: String,
    /// Run a multi-node group without a secret: any machine that reaches its ports can join it.
    /// Only for a network where every machine is trusted; a warning says so at start.
    pub insecure: bool,
}

impl DistributedConfig {
    /// Whether the run uses more than one peer.
    pub fn is_group(&self) -> bool {
        self.devices.len() > 1 || self.nodes > 1
    }

    /// Peers on this machine (at least 1).
    pub fn local_peers(&self) -> usize {
        self.devices.len().max(1)
    }

    /// Peers in the whole group: every node runs as many as this one.
    pub fn total_peers(&self) -> usize {
        self.local_peers() * self.nodes as usize
    }

    /// Range checks serde cannot do: (dotted key, message).
    pub fn validate(&self) -> Result<(), (String, String)> {
        let err = |key: &str, msg: String| Err((format!("distributed.{key}"), msg));
        for (i, d) in self.devices.iter().enumerate() {
            if d.trim().eq_ignore_ascii_case("gpus") {
                if self.devices.len() > 1 {
                    return err("devices", "\"gpus\" stands for every CUDA GPU and must be the only entry".into());
                }
                continue;
            }
            if let Err(e) = d.parse::<DeviceSpec>() {
                return err("devices", format!("entry {i} ({d:?}): {e}"));
            }
        }
        if !(1..=1024).contains(&self.nodes) {
            return err("nodes", format!("must be in 1..=1024, got {}", self.nodes));
        }
        if self.node_rank >= self.nodes {
            return err(
                "node_rank",
                format!("must be in 0..{} (distributed.nodes), got {}", self.nodes, self.node_rank),
            );
        }
        if self.rebalance_every == 0 {
            return err("rebalance_every", "must be at least 1".into());
        }
        if self.timeout_s == 0 {
            return err("timeout_s", "must be at least 1 second".into());
        }
        if self.balance == Balance::Fixed {
            if self.shares.len() != self.total_peers() {
                return err(
                    "shares",
                    format!(
                        "balance = \"fixed\" needs one share per peer ({} = {} devices x {} nodes), got {}",
                        self.total_peers(),
                        self.local_peers(),
                        self.nodes,
                        self.shares.len()
                    ),
                );
            }
            if self.shares.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
                return err("shares", format!("must all be finite and > 0, got {:?}", self.shares));
            }
        } else if !self.shares.is_empty() {
            return err("shares", "is only read with balance = \"fixed\"".into());
        }
        if self.nodes > 1 {
            if self.orchestrator.trim().is_empty() {
                return err("orchestrator", "must be the orchestrator's host:port when distributed.nodes > 1".into());
            }
            if self.data_port == 0 {
                return err("data_port", "must be a free port on this machine when distributed.nodes > 1".into());
            }
            if self.node_address.trim().is_empty() {
                return err("node_address", "must be this machine's address when distributed.nodes > 1".into());
            }
        }
        Ok(())
    }
}
