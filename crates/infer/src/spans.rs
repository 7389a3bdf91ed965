//! Splitting a stretch of continuous signing into signs with a clip classifier: an online
//! semi-Markov (segmental) decoding.
//!
//! Positions are *nodes*, one every `hop` frames of the stretch (node `n` is the boundary after
//! `n * hop` of its frames). For every node, the caller classifies the spans that end there, one
//! per candidate sign length, and [`SpanDecoder::push`]es the top class and probability of each.
//! The best path to a node explains the frames before it as signs (a span scored `ln p` of its
//! top class, minus `sign_cost`) and gaps (transitions between signs, `gap_cost` per node); the
//! sign cost is a prior for fewer, whole signs over more, shorter ones. A sign is therefore
//! placed where a whole sign's span is classified confidently, which a window sliding over two
//! co-articulated signs is not. Signs on the best path that ended far enough back are final
//! ([`SpanDecoder::settle`]): they are returned once and the path restarts after them.

/// The classifier's top class for one span and its probability.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scored {
    /// Top class.
    pub class: usize,
    /// Its probability (0..=1).
    pub prob: f32,
}

/// A sign on the best path: its class and probability, its span in nodes (`start..end`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Decoded {
    /// Class.
    pub class: usize,
    /// The classifier's probability of the class on the span.
    pub prob: f32,
    /// First node (the span's first frame is `start * hop`).
    pub start: usize,
    /// Node after the span.
    pub end: usize,
}

/// How the best path reached a node.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// From the node before, through a gap.
    Gap,
    /// A sign of `lengths[j]` nodes ended here.
    Sign(usize),
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct SpanDecoder {
    /// Candidate sign lengths in nodes, ascending, each at least 1.
    lengths: Vec<usize>,
    /// Cost of a node not inside a sign.
    gap_cost: f32,
    /// Cost of each sign on a path.
    sign_cost: f32,
    /// The node `best[0]` stands for (the path's anchor: the stretch's start or the end of the
    /// last settled sign).
    base: usize,
    /// Best path score of node `base + i`.
    best: Vec<f32>,
    /// Its last step.
    back: Vec<Step>,
    /// `scores[i][j]`: the span of `lengths[j]` nodes ending at node `base + i`.
    scores: Vec<Vec<Option<Scored>>>,
}

impl SpanDecoder {
    /// A decoder anchored at node 0. `lengths` (nodes) must be non-empty and positive.
    pub(crate) fn new(mut lengths: Vec<usize>, gap_cost: f32, sign_cost: f32) -> Self {
        lengths.retain(|&l| l > 0);
        lengths.sort_unstable();
        lengths.dedup();
        assert!(!lengths.is_empty(), "span lengths");
        Self { lengths, gap_cost, sign_cost, base: 0, best: vec![0.0], back: vec![Step::Gap], scores: vec![Vec::new()] }
    }

    /// The node the next [`Self::push`] stands for.
    pub(crate) fn next_node(&self) -> usize {
        self.base + self.best.len()
    }

    /// The first node of each candidate span ending at the next node (`None` where the span
    /// would start before the anchor): what the caller classifies, in the order `push` takes.
    pub(crate) fn candidates(&self) -> Vec<Option<usize>> {
        let end = self.next_node();
        self.lengths.iter().map(|&l| end.checked_sub(l).filter(|&s| s >= self.base)).collect()
    }

    /// The oldest node a future candidate can start at (frames before it are no longer needed).
    pub(crate) fn oldest_needed(&self) -> usize {
        self.next_node().saturating_sub(self.longest()).max(self.base)
    }

    /// The longest candidate length, in nodes.
    fn longest(&self) -> usize {
        self.lengths[self.lengths.len() - 1]
    }

    /// Add the next node with the scores of [`Self::candidates`] (same order; `None` for a span
    /// not classified).
    pub(crate) fn push(&mut self, scores: Vec<Option<Scored>>) {
        debug_assert_eq!(scores.len(), self.lengths.len());
        self.scores.push(scores);
        self.best.push(f32::NEG_INFINITY);
        self.back.push(Step::Gap);
        self.relax(self.best.len() - 1);
    }

    /// Recompute node `base + i` from the nodes before it.
    fn relax(&mut self, i: usize) {
        let (mut best, mut back) = (self.best[i - 1] - self.gap_cost, Step::Gap);
        for (j, &l) in self.lengths.iter().enumerate() {
            let (Some(s), Some(Some(sc))) = (i.checked_sub(l), self.scores[i].get(j)) else { continue };
            let v = self.best[s] + sc.prob.max(f32::MIN_POSITIVE).ln() - self.sign_cost;
            if v > best {
                (best, back) = (v, Step::Sign(j));
            }
        }
        self.best[i] = best;
        self.back[i] = back;
    }

    /// The signs on the best path to the newest node, in order.
    fn path(&self) -> Vec<Decoded> {
        let mut out = Vec::new();
        let mut i = self.best.len() - 1;
        while i > 0 {
            match self.back[i] {
                Step::Gap => i -= 1,
                Step::Sign(j) => {
                    let l = self.lengths[j];
                    let sc = self.scores[i][j].expect("a sign step has a score");
                    out.push(Decoded { class: sc.class, prob: sc.prob, start: self.base + i - l, end: self.base + i });
                    i -= l;
                }
            }
        }
        out.reverse();
        out
    }

    /// The signs on the best path that end at or before node `until`: final from now on (each is
    /// returned once; later paths start after the last of them). Paths that have gone on for
    /// longer than `horizon` nodes without a settled sign restart `horizon` nodes back, so memory
    /// stays bounded on endless input.
    pub(crate) fn settle(&mut self, until: usize, horizon: usize) -> Vec<Decoded> {
        let done: Vec<Decoded> = self.path().into_iter().take_while(|d| d.end <= until).collect();
        if let Some(last) = done.last() {
            self.rebase(last.end);
        }
        let (newest, keep) = (self.next_node() - 1, horizon.max(self.longest()));
        if newest > self.base + keep {
            self.rebase(newest - keep);
        }
        done
    }

    /// Every sign on the best path (the stretch is over).
    pub(crate) fn flush(self) -> Vec<Decoded> {
        self.path()
    }

    /// Anchor the path at `node` (at most the newest): nodes before it are dropped, spans
    /// starting before it forgotten, the nodes after it recomputed.
    fn rebase(&mut self, node: usize) {
        let k = node - self.base;
        if k == 0 {
            return;
        }
        self.best.drain(..k);
        self.back.drain(..k);
        self.scores.drain(..k);
        self.base = node;
        self.best[0] = 0.0;
        self.back[0] = Step::Gap;
        for i in 1..self.best.len() {
            for (j, &l) in self.lengths.iter().enumerate() {
                if l > i {
                    self.scores[i][j] = None;
                }
            }
            self.relax(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores where spans of exactly `truth` (start, end, class) are confident and every other
    /// span is a coin toss between two classes.
    fn feed(d: &mut SpanDecoder, nodes: usize, truth: &[(usize, usize, usize)]) {
        for _ in 0..nodes {
            let end = d.next_node();
            let scores = d
                .candidates()
                .into_iter()
                .map(|s| {
                    s.map(|s| match truth.iter().find(|t| t.0 == s && t.1 == end) {
                        Some(t) => Scored { class: t.2, prob: 0.95 },
                        None => Scored { class: 9, prob: 0.2 },
                    })
                })
                .collect();
            d.push(scores);
        }
    }

    #[test]
    fn confident_spans_become_the_signs_and_settle_once() {
        let mut d = SpanDecoder::new(vec![3, 4, 5, 6], 0.3, 0.0);
        // Sign 1 on nodes 0..5, a one-node transition, sign 2 on 6..10.
        let truth = [(0, 5, 1), (6, 10, 2)];
        feed(&mut d, 8, &truth);
        assert_eq!(d.settle(4, 20), vec![], "sign 1 ends at node 5, after node 4");
        let first = d.settle(6, 20);
        assert_eq!(first, vec![Decoded { class: 1, prob: 0.95, start: 0, end: 5 }]);
        assert_eq!(d.settle(6, 20), vec![], "returned once");
        feed(&mut d, 4, &truth);
        assert_eq!(d.flush(), vec![Decoded { class: 2, prob: 0.95, start: 6, end: 10 }]);
    }

    #[test]
    fn unsure_stretches_are_gaps_and_memory_stays_bounded() {
        let mut d = SpanDecoder::new(vec![3, 4], 0.1, 0.0);
        feed(&mut d, 100, &[]);
        // ln 0.2 = -1.6 per sign vs 0.1 per gap node: nothing is a sign.
        assert_eq!(d.settle(100, 10), vec![]);
        assert!(d.best.len() <= 11 && d.scores.len() == d.best.len(), "{}", d.best.len());
        assert_eq!(d.oldest_needed(), d.next_node() - 4);
        assert_eq!(d.flush(), vec![]);
    }

    #[test]
    fn a_sign_cost_prefers_one_whole_sign_to_two_halves() {
        // Nodes 0..8: the whole span is class 1 at 0.9; its halves 0..4 and 4..8 are class 1 and
        // class 2 at 0.99 each. Two signs score 2 ln 0.99 = -0.02 > ln 0.9 = -0.105; with a
        // cost of 0.2 per sign, -0.42 < -0.305: one sign.
        let scores = |d: &SpanDecoder| -> Vec<Option<Scored>> {
            let end = d.next_node();
            d.candidates()
                .into_iter()
                .map(|s| {
                    s.map(|s| match (s, end) {
                        (0, 8) => Scored { class: 1, prob: 0.9 },
                        (0, 4) => Scored { class: 1, prob: 0.99 },
                        (4, 8) => Scored { class: 2, prob: 0.99 },
                        _ => Scored { class: 9, prob: 0.01 },
                    })
                })
                .collect()
        };
        let decode = |sign_cost| {
            let mut d = SpanDecoder::new(vec![4, 8], 1.0, sign_cost);
            for _ in 0..8 {
                let s = scores(&d);
                d.push(s);
            }
            d.flush().iter().map(|s| (s.class, s.start, s.end)).collect::<Vec<_>>()
        };
        assert_eq!(decode(0.0), vec![(1, 0, 4), (2, 4, 8)]);
        assert_eq!(decode(0.2), vec![(1, 0, 8)]);
    }
}
