//! What the peers of a group exchange, as f32 vectors all-reduced with a sum: the leader writes a
//! message, every other peer contributes zeros, and every peer reads the leader's message back
//! (exactly: x + 0 = x). Integers are below 2^24 or split into 16-bit chunks, so f32 carries
//! them exactly.

/// Opening message: the group's shape, checked by every peer before the first step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// Global micro-batch rows.
    pub batch: usize,
    /// Micro-batches per optimizer step.
    pub accumulation: usize,
    /// Peers in the group.
    pub peers: usize,
    /// Trainable parameter elements of the model.
    pub params: u64,
    /// Compute dtype code ([`dtype_code`]).
    pub dtype: u32,
}

/// Elements of an encoded [`Hello`].
pub const HELLO_LEN: usize = 8;

impl Hello {
    /// Encode (leader) or `None` for the zeros other peers contribute.
    pub fn encode(&self) -> Vec<f32> {
        let mut v = vec![0.0; HELLO_LEN];
        v[0] = 1.0;
        v[1] = self.batch as f32;
        v[2] = self.accumulation as f32;
        v[3] = self.peers as f32;
        put_u64(&mut v[4..8], self.params);
        v[0] += self.dtype as f32 * 2.0;
        v
    }

    /// Decode the leader's message.
    pub fn decode(v: &[f32]) -> Option<Self> {
        if v.len() != HELLO_LEN || v[0] < 1.0 {
            return None;
        }
        Some(Self {
            batch: v[1] as usize,
            accumulation: v[2] as usize,
            peers: v[3] as usize,
            params: get_u64(&v[4..8]),
            dtype: ((v[0] - 1.0) / 2.0) as u32,
        })
    }
}

/// The compute dtype as a small code.
pub fn dtype_code(d: burn::tensor::FloatDType) -> u32 {
    match d {
        burn::tensor::FloatDType::F16 => 1,
        burn::tensor::FloatDType::BF16 => 2,
        _ => 0,
    }
}

/// The compute dtype of a [`dtype_code`].
pub fn dtype_from_code(code: u32) -> burn::tensor::FloatDType {
    match code {
        1 => burn::tensor::FloatDType::F16,
        2 => burn::tensor::FloatDType::BF16,
        _ => burn::tensor::FloatDType::F32,
    }
}

/// What the leader asks for next.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// One training step.
    Step(StepHeader),
    /// The run is over: leave the group.
    Stop,
}

/// One step's instructions.
#[derive(Debug, Clone, PartialEq)]
pub struct StepHeader {
    /// Epoch (augmentation draws are keyed by it).
    pub epoch: usize,
    /// `Some((seed, step))`: dropout re-seeding as in a single-device step.
    pub dropout_seed: Option<(u64, u64)>,
    /// f16 loss scale.
    pub loss_scale: f64,
    /// `rows[k][p]`: rows of micro-batch `k` that peer `p` computes.
    pub rows: Vec<Vec<usize>>,
    /// Dataset indices of the step's micro-batches, concatenated in order; within micro-batch
    /// `k`, peer 0's rows first.
    pub indices: Vec<usize>,
    /// Every peer reports the checksum of the weights it received ([`weights_checksum`]).
    pub verify: bool,
}

impl StepHeader {
    /// Peer `p`'s dataset indices of micro-batch `k`.
    pub fn share(&self, k: usize, p: usize) -> &[usize] {
        let before: usize = self.rows[..k].iter().map(|r| r.iter().sum::<usize>()).sum();
        let start = before + self.rows[k][..p].iter().sum::<usize>();
        &self.indices[start..start + self.rows[k][p]]
    }

    /// The loss weight of peer `p`'s share of each micro-batch: (its rows / the micro-batch's
    /// rows) / micro-batches, so the group's weighted sum is the single-device step's mean.
    pub fn weights(&self, p: usize) -> Vec<f64> {
        let k = self.rows.len() as f64;
        self.rows
            .iter()
            .map(|r| {
                let total: usize = r.iter().sum();
                if total == 0 {
                    0.0
                } else {
                    r[p] as f64 / total as f64 / k
                }
            })
            .collect()
    }
}

const FIXED: usize = 16;

/// Elements of an encoded command for a group of this shape.
pub fn command_len(hello: &Hello) -> usize {
    FIXED + hello.accumulation * hello.peers + hello.accumulation * hello.batch
}

impl Command {
    /// Encode for a group of shape `hello`.
    pub fn encode(&self, hello: &Hello) -> Vec<f32> {
        let mut v = vec![0.0; command_len(hello)];
        let Self::Step(h) = self else {
            v[0] = 2.0;
            return v;
        };
        v[0] = 1.0;
        v[1] = h.epoch as f32;
        if let Some((seed, step)) = h.dropout_seed {
            v[2] = 1.0;
            put_u64(&mut v[3..7], seed);
            put_u64(&mut v[7..11], step);
        }
        put_u64(&mut v[11..15], h.loss_scale.to_bits());
        v[15] = f32::from(u8::from(h.verify));
        let mut at = FIXED;
        for k in 0..hello.accumulation {
            for p in 0..hello.peers {
                // Stored +1 so that "micro-batch absent" (0) differs from "0 rows".
                v[at] = h.rows.get(k).map_or(0.0, |r| r[p] as f32 + 1.0);
                at += 1;
            }
        }
        for (i, &x) in h.indices.iter().enumerate() {
            v[at + i] = x as f32;
        }
        v
    }

    /// Decode the leader's command.
    pub fn decode(v: &[f32], hello: &Hello) -> Option<Self> {
        if v.len() != command_len(hello) {
            return None;
        }
        match v[0] as u32 {
            2 => return Some(Self::Stop),
            1 => {}
            _ => return None,
        }
        let dropout_seed = (v[2] == 1.0).then(|| (get_u64(&v[3..7]), get_u64(&v[7..11])));
        let mut rows = Vec::new();
        let mut at = FIXED;
        for _ in 0..hello.accumulation {
            let r: Vec<usize> = v[at..at + hello.peers].iter().map(|&x| x as usize).collect();
            at += hello.peers;
            if r.iter().all(|&x| x > 0) {
                rows.push(r.iter().map(|x| x - 1).collect());
            }
        }
        let n: usize = rows.iter().map(|r: &Vec<usize>| r.iter().sum::<usize>()).sum();
        let indices = v[at..at + n].iter().map(|&x| x as usize).collect();
        Some(Self::Step(StepHeader {
            epoch: v[1] as usize,
            dropout_seed,
            loss_scale: f64::from_bits(get_u64(&v[11..15])),
            rows,
            indices,
            verify: v[15] == 1.0,
        }))
    }
}

/// Layout of the all-reduced gradient vector: `params` gradient elements, then the weighted
/// loss, the correct count, and per peer its samples, its compute seconds and the checksum of
/// the weights it computed with (on verifying steps; 0 otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GradLayout {
    /// Trainable parameter elements.
    pub params: usize,
    /// Peers.
    pub peers: usize,
}

impl GradLayout {
    /// Elements in all.
    pub fn len(&self) -> usize {
        self.params + 2 + STATS * self.peers
    }

    /// Never empty (the statistics are always there).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Peer `p`'s statistics: `[loss, correct, samples..., seconds..., checksums...]` with only
    /// its own slots set.
    pub fn stats(&self, p: usize, samples: u64, seconds: f64, checksum: f32) -> Vec<f32> {
        let mut v = vec![0.0; 2 + STATS * self.peers];
        v[2 + p] = samples as f32;
        v[2 + self.peers + p] = seconds as f32;
        v[2 + 2 * self.peers + p] = checksum;
        v
    }
}

/// Per-peer statistics slots: samples, seconds, weights checksum.
pub const STATS: usize = 3;

/// A position-sensitive checksum of a weight vector, computed on the host in one order so that
/// equal vectors give bit-equal results on every peer.
pub fn weights_checksum(w: &[f32]) -> f32 {
    w.iter().enumerate().map(|(i, &x)| x as f64 * ((i % 1021) + 1) as f64).sum::<f64>() as f32
}

fn put_u64(out: &mut [f32], x: u64) {
    for (i, o) in out.iter_mut().enumerate().take(4) {
        *o = ((x >> (16 * i)) & 0xFFFF) as f32;
    }
}

fn get_u64(v: &[f32]) -> u64 {
    v.iter().take(4).enumerate().fold(0u64, |acc, (i, &x)| acc | ((x as u64 & 0xFFFF) << (16 * i)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_round_trip_through_f32() {
        let hello = Hello { batch: 5, accumulation: 2, peers: 2, params: 1_784_152, dtype: 1 };
        assert_eq!(Hello::decode(&hello.encode()), Some(hello));
        assert_eq!(Hello::decode(&[0.0; HELLO_LEN]), None);
        let step = Command::Step(StepHeader {
            epoch: 7,
            dropout_seed: Some((u64::MAX - 12345, 987_654_321)),
            loss_scale: 65536.0 * 0.3,
            rows: vec![vec![3, 2], vec![0, 1]],
            indices: vec![16_000_000, 1, 2, 3, 4, 9],
            verify: true,
        });
        let v = step.encode(&hello);
        assert_eq!(v.len(), command_len(&hello));
        assert_eq!(Command::decode(&v, &hello), Some(step.clone()));
        let Command::Step(h) = step else { unreachable!() };
        assert_eq!(h.share(0, 1), &[3, 4]);
        assert_eq!(h.share(1, 0), &[] as &[usize]);
        assert_eq!(h.share(1, 1), &[9]);
        assert_eq!(h.weights(0), vec![0.3, 0.0]);
        assert_eq!(Command::decode(&Command::Stop.encode(&hello), &hello), Some(Command::Stop));
    }
}
