//! Turning per-frame CTC log-probabilities into token sequences, and scoring them.
//!
//! - [`greedy`]: the best class per frame, repeats merged, blanks dropped.
//! - [`beam`]: prefix beam search (each prefix keeps its probability of ending in a blank and in
//!   its last token, so alignments of one output are summed, not competing).
//! - [`levenshtein`], [`ErrorCounts`]: edit distance and the error rates of the field: the ASL
//!   Fingerspelling competition's normalized Levenshtein score `(N - D) / N` over a whole set,
//!   and character / word error rates `D / N`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// Which CTC decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decoder {
    /// Best class per frame ([`greedy`]).
    Greedy,
    /// Prefix beam search ([`beam`]).
    Beam,
}

/// The `[ctc]` decoding settings shared by validation, `infer` and the model card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DecodeConfig {
    /// The decoder of predictions (validation reports both).
    pub decoder: Decoder,
    /// Prefixes kept per frame by the beam search.
    pub beam_width: usize,
}

impl Default for DecodeConfig {
    fn default() -> Self {
        Self { decoder: Decoder::Beam, beam_width: 8 }
    }
}

impl DecodeConfig {
    /// Range checks (`Err((key, message))`).
    pub fn validate(&self) -> Result<(), (String, String)> {
        if !(1..=1024).contains(&self.beam_width) {
            return Err(("ctc.beam_width".into(), format!("must be in 1..=1024, got {}", self.beam_width)));
        }
        Ok(())
    }

    /// The tokens of one sequence's `[frames, classes]` log-probabilities (first `length`
    /// frames real) with this decoder.
    pub fn decode(&self, log_probs: &[f32], classes: usize, length: usize, blank: usize) -> Vec<usize> {
        match self.decoder {
            Decoder::Greedy => greedy(log_probs, classes, length, blank).into_iter().map(|t| t.index).collect(),
            Decoder::Beam => beam(log_probs, classes, length, blank, self.beam_width).0,
        }
    }
}

/// A decoded token with where and how sure.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// The class index.
    pub index: usize,
    /// First frame it was emitted on.
    pub start: usize,
    /// Last frame of its run.
    pub end: usize,
    /// Mean probability of the token over its frames.
    pub confidence: f32,
}

/// Greedy (best path) decoding of `[frames, classes]` log-probabilities, the first `length`
/// frames real.
pub fn greedy(log_probs: &[f32], classes: usize, length: usize, blank: usize) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::new();
    let mut prev = blank;
    let mut run = 0usize;
    for t in 0..length.min(log_probs.len() / classes.max(1)) {
        let row = &log_probs[t * classes..(t + 1) * classes];
        let (k, lp) =
            row.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &v)| if v > b.1 { (i, v) } else { b });
        if k != blank && k == prev {
            if let Some(last) = out.last_mut() {
                run += 1;
                last.end = t;
                last.confidence += (lp.exp() - last.confidence) / run as f32;
            }
        } else if k != blank {
            run = 1;
            out.push(Token { index: k, start: t, end: t, confidence: lp.exp() });
        }
        prev = k;
    }
    out
}

fn log_add(a: f32, b: f32) -> f32 {
    if a == f32::NEG_INFINITY {
        return b;
    }
    if b == f32::NEG_INFINITY {
        return a;
    }
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    hi + (lo - hi).exp().ln_1p()
}

/// Prefixes as nodes of a trie: a prefix is its node id, extended without copying.
struct Trie {
    /// (parent, token) of every node; node 0 is the empty prefix.
    nodes: Vec<(usize, usize)>,
    children: HashMap<(usize, usize), usize>,
}

impl Trie {
    fn child(&mut self, parent: usize, token: usize) -> usize {
        let next = self.nodes.len();
        let id = *self.children.entry((parent, token)).or_insert(next);
        if id == next {
            self.nodes.push((parent, token));
        }
        id
    }
    fn last(&self, node: usize) -> Option<usize> {
        (node != 0).then(|| self.nodes[node].1)
    }
    fn tokens(&self, mut node: usize) -> Vec<usize> {
        let mut out = Vec::new();
        while node != 0 {
            out.push(self.nodes[node].1);
            node = self.nodes[node].0;
        }
        out.reverse();
        out
    }
}

/// Prefix beam search over `[frames, classes]` log-probabilities (the first `length` frames real),
/// keeping `width` prefixes per frame. Returns the best token sequence and its log-probability
/// (summed over its alignments). `width = 1` is close to, but not the same as, greedy: it merges
/// alignments of a prefix.
pub fn beam(log_probs: &[f32], classes: usize, length: usize, blank: usize, width: usize) -> (Vec<usize>, f32) {
    let neg = f32::NEG_INFINITY;
    let width = width.max(1);
    let mut trie = Trie { nodes: vec![(0, usize::MAX)], children: HashMap::new() };
    // (prefix node, log p ending in blank, log p ending in its last token)
    let mut beams: Vec<(usize, f32, f32)> = vec![(0, 0.0, neg)];
    let mut next: HashMap<usize, (f32, f32)> = HashMap::new();
    let mut order: Vec<usize> = Vec::with_capacity(classes);
    let frames = length.min(log_probs.len() / classes.max(1));
    for t in 0..frames {
        let row = &log_probs[t * classes..(t + 1) * classes];
        next.clear();
        // Only classes that can matter: the top `width + 1` of this frame, plus blank.
        order.clear();
        order.extend(0..classes);
        let keep = (width + 1).min(classes);
        if keep < classes {
            order.select_nth_unstable_by(keep - 1, |&a, &b| row[b].total_cmp(&row[a]));
            order.truncate(keep);
        }
        if !order.contains(&blank) {
            order.push(blank);
        }
        for &(prefix, pb, pnb) in &beams {
            let total = log_add(pb, pnb);
            let last = trie.last(prefix);
            for &k in &order {
                let p = row[k];
                if k == blank {
                    let e = next.entry(prefix).or_insert((neg, neg));
                    e.0 = log_add(e.0, total + p);
                    continue;
                }
                let extended = trie.child(prefix, k);
                let e = next.entry(extended).or_insert((neg, neg));
                // A repeat only extends after a blank; without one it stays the same prefix.
                e.1 = log_add(e.1, if last == Some(k) { pb + p } else { total + p });
                if last == Some(k) {
                    let same = next.entry(prefix).or_insert((neg, neg));
                    same.1 = log_add(same.1, pnb + p);
                }
            }
        }
        beams.clear();
        beams.extend(next.iter().map(|(&n, &(b, nb))| (n, b, nb)));
        let score = |b: &(usize, f32, f32)| log_add(b.1, b.2);
        if beams.len() > width {
            beams.select_nth_unstable_by(width - 1, |a, b| score(b).total_cmp(&score(a)).then(a.0.cmp(&b.0)));
            beams.truncate(width);
        }
    }
    let best = beams
        .iter()
        .max_by(|a, b| log_add(a.1, a.2).total_cmp(&log_add(b.1, b.2)).then(b.0.cmp(&a.0)))
        .copied()
        .unwrap_or((0, 0.0, neg));
    (trie.tokens(best.0), log_add(best.1, best.2))
}

/// Edit distance (insertions, deletions, substitutions, each 1) between two sequences.
pub fn levenshtein<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, x) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, y) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(x != y)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Edit distances summed over a set, for the error rates.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ErrorCounts {
    /// Summed token (character) edit distance.
    pub token_edits: usize,
    /// Summed reference length in tokens.
    pub tokens: usize,
    /// Summed word edit distance (words split at `separator` tokens).
    pub word_edits: usize,
    /// Summed reference length in words.
    pub words: usize,
}

impl ErrorCounts {
    /// Add one (hypothesis, reference) pair; `separator` is the word-boundary token (space), if any.
    pub fn add(&mut self, hypothesis: &[usize], reference: &[usize], separator: Option<usize>) {
        self.token_edits += levenshtein(hypothesis, reference);
        self.tokens += reference.len();
        let words = |s: &[usize]| -> Vec<Vec<usize>> {
            match separator {
                Some(sep) => s.split(|&t| t == sep).filter(|w| !w.is_empty()).map(<[usize]>::to_vec).collect(),
                None => vec![s.to_vec()],
            }
        };
        let (h, r) = (words(hypothesis), words(reference));
        self.word_edits += levenshtein(&h, &r);
        self.words += r.len();
    }

    /// The competition's normalized Levenshtein score `(N - D) / N` (1 = perfect; can go below 0).
    pub fn normalized_levenshtein(&self) -> f64 {
        if self.tokens == 0 {
            return 0.0;
        }
        (self.tokens as f64 - self.token_edits as f64) / self.tokens as f64
    }

    /// Character (token) error rate `D / N`.
    pub fn cer(&self) -> f64 {
        self.token_edits as f64 / self.tokens.max(1) as f64
    }

    /// Word error rate.
    pub fn wer(&self) -> f64 {
        self.word_edits as f64 / self.words.max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(probs: &[&[f32]]) -> Vec<f32> {
        probs.iter().flat_map(|r| r.iter().map(|p| p.ln())).collect()
    }

    #[test]
    fn greedy_merges_repeats_and_drops_blanks_with_spans() {
        // blank 0; frames: a a _ a b b
        let lp = rows(&[
            &[0.1, 0.8, 0.1],
            &[0.2, 0.6, 0.2],
            &[0.9, 0.05, 0.05],
            &[0.1, 0.7, 0.2],
            &[0.1, 0.1, 0.8],
            &[0.3, 0.1, 0.6],
        ]);
        let t = greedy(&lp, 3, 6, 0);
        assert_eq!(t.iter().map(|t| (t.index, t.start, t.end)).collect::<Vec<_>>(), [(1, 0, 1), (1, 3, 3), (2, 4, 5)]);
        assert!((t[0].confidence - 0.7).abs() < 1e-6 && (t[2].confidence - 0.7).abs() < 1e-6);
        // Frames past the length are ignored.
        assert_eq!(greedy(&lp, 3, 3, 0).len(), 1);
    }

    #[test]
    fn beam_sums_alignments_where_greedy_cannot() {
        // Two frames over {blank, a}: P(_ _) = 0.36 is the best single path (greedy: empty), but
        // "a" has aa + a_ + _a = 0.16 + 0.24 + 0.24 = 0.64.
        let lp = rows(&[&[0.6, 0.4], &[0.6, 0.4]]);
        assert!(greedy(&lp, 2, 2, 0).is_empty());
        let (best, logp) = beam(&lp, 2, 2, 0, 4);
        assert_eq!(best, vec![1]);
        assert!((logp.exp() - 0.64).abs() < 1e-5, "{}", logp.exp());
        // "a a" needs a blank between: a _ a.
        let lp = rows(&[&[0.1, 0.9], &[0.9, 0.1], &[0.1, 0.9]]);
        assert_eq!(beam(&lp, 2, 3, 0, 4).0, vec![1, 1]);
    }

    #[test]
    fn a_wide_beam_finds_the_most_probable_labelling_with_its_exact_probability() {
        // Every labelling of up to 5 tokens over {1, 2}, scored exactly by the CTC forward pass.
        let (classes, frames) = (3, 5);
        let mut x = 0x853c_49e6_748f_ea9bu64;
        for _ in 0..20 {
            let z: Vec<f64> = (0..frames * classes)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x >> 11) as f64 / (1u64 << 53) as f64 * 3.0
                })
                .collect();
            let lp: Vec<f32> = z
                .chunks(classes)
                .flat_map(|r| {
                    let lse = r.iter().map(|v| v.exp()).sum::<f64>().ln();
                    r.iter().map(move |v| (v - lse) as f32).collect::<Vec<_>>()
                })
                .collect();
            let mut best = (Vec::new(), f64::NEG_INFINITY);
            for n in 0..=frames {
                for bits in 0..1usize << n {
                    let label: Vec<usize> = (0..n).map(|i| 1 + (bits >> i & 1)).collect();
                    let logp = -crate::ctc::ctc_one(&lp, classes, frames, &label, 0).nll;
                    if logp > best.1 {
                        best = (label, logp);
                    }
                }
            }
            let (got, logp) = beam(&lp, classes, frames, 0, 64);
            assert_eq!(got, best.0);
            assert!((f64::from(logp) - best.1).abs() < 1e-4, "{logp} vs {}", best.1);
        }
    }

    #[test]
    fn edit_distances_and_rates() {
        assert_eq!(levenshtein(b"kitten", b"sitting"), 3);
        assert_eq!(levenshtein::<u8>(b"", b"abc"), 3);
        assert_eq!(levenshtein(b"abc", b"abc"), 0);
        let mut c = ErrorCounts::default();
        // "ab cd" vs reference "ab ce", separator 9.
        c.add(&[1, 2, 9, 3, 4], &[1, 2, 9, 3, 5], Some(9));
        assert_eq!((c.token_edits, c.tokens, c.word_edits, c.words), (1, 5, 1, 2));
        assert!((c.normalized_levenshtein() - 0.8).abs() < 1e-12);
        assert!((c.cer() - 0.2).abs() < 1e-12 && (c.wer() - 0.5).abs() < 1e-12);
    }
}
