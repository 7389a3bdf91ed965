//! Splitting a batch among peers: shares from relative weights, weights from measured speeds.

/// Rows of a `batch`-row micro-batch for each peer, proportional to `weights` (largest
/// remainder), summing to `batch`. Every peer gets at least one row when `batch >= peers`.
pub fn split(batch: usize, weights: &[f64]) -> Vec<usize> {
    let p = weights.len();
    if p == 0 {
        return Vec::new();
    }
    let total: f64 = weights.iter().sum();
    let ideal: Vec<f64> = weights.iter().map(|w| batch as f64 * w / total).collect();
    let mut rows: Vec<usize> = ideal.iter().map(|x| x.floor() as usize).collect();
    if batch >= p {
        for r in rows.iter_mut() {
            *r = (*r).max(1);
        }
    }
    // Hand out (or take back) the difference by largest (smallest) remainder.
    let mut order: Vec<usize> = (0..p).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (ideal[a] - rows[a] as f64, ideal[b] - rows[b] as f64);
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    let mut sum: usize = rows.iter().sum();
    let mut i = 0;
    while sum < batch {
        rows[order[i % p]] += 1;
        sum += 1;
        i += 1;
    }
    let min = usize::from(batch >= p);
    let mut i = 0;
    while sum > batch {
        let j = order[p - 1 - (i % p)];
        if rows[j] > min {
            rows[j] -= 1;
            sum -= 1;
        }
        i += 1;
    }
    rows
}

/// Measured throughput of each peer over a window of steps: samples and busy seconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpeedWindow {
    samples: Vec<f64>,
    seconds: Vec<f64>,
    steps: usize,
}

impl SpeedWindow {
    /// An empty window for `peers` peers.
    pub fn new(peers: usize) -> Self {
        Self { samples: vec![0.0; peers], seconds: vec![0.0; peers], steps: 0 }
    }

    /// Add one step's per-peer samples and compute seconds.
    pub fn add(&mut self, samples: &[f64], seconds: &[f64]) {
        for (i, (s, t)) in samples.iter().zip(seconds).enumerate() {
            self.samples[i] += s;
            self.seconds[i] += t;
        }
        self.steps += 1;
    }

    /// Steps in the window.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Samples/s of each peer (`None` when a peer has no measurement).
    pub fn speeds(&self) -> Option<Vec<f64>> {
        self.samples.iter().zip(&self.seconds).map(|(s, t)| (*s > 0.0 && *t > 0.0).then(|| s / t)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_sums_to_the_batch_and_follows_the_weights() {
        assert_eq!(split(32, &[1.0, 1.0]), vec![16, 16]);
        assert_eq!(split(33, &[1.0, 1.0]), vec![17, 16]);
        assert_eq!(split(32, &[3.0, 1.0]), vec![24, 8]);
        assert_eq!(split(10, &[1.0, 1.0, 1.0]), vec![4, 3, 3]);
        assert_eq!(split(4, &[100.0, 1.0]), vec![3, 1]);
        assert_eq!(split(1, &[1.0, 1.0]), vec![1, 0]);
        for b in 0..70 {
            for w in [[1.0, 2.0, 3.0], [0.1, 5.0, 0.01], [1.0, 1.0, 1.0]] {
                let r = split(b, &w);
                assert_eq!(r.iter().sum::<usize>(), b, "batch {b} weights {w:?}: {r:?}");
                if b >= 3 {
                    assert!(r.iter().all(|&x| x >= 1), "batch {b} weights {w:?}: {r:?}");
                }
            }
        }
    }

    #[test]
    fn speeds_are_samples_per_busy_second() {
        let mut w = SpeedWindow::new(2);
        assert_eq!(w.speeds(), None);
        w.add(&[24.0, 8.0], &[0.1, 0.1]);
        w.add(&[24.0, 8.0], &[0.1, 0.3]);
        assert_eq!(w.steps(), 2);
        let s = w.speeds().unwrap();
        assert!((s[0] - 240.0).abs() < 1e-9 && (s[1] - 40.0).abs() < 1e-9, "{s:?}");
    }
}
