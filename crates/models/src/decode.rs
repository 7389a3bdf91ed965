//! Turning per-frame CTC log-probabilities into token sequences, and scoring them.
//!
//! - [`greedy`]: the best class per frame, repeats merged, blanks dropped.
//! - [`beam`]: prefix beam search (each prefix keeps its probability of ending in a blank and in
//!   its last token, so alignments of one output are summed, not competing), optionally
//!   constrained to transcripts made of the words of a [`Lexicon`].
//! - [`CtcDecoder`]: the `[ctc]` settings with their lexicon, as validation and `infer` run them.
//! - [`levenshtein`], [`ErrorCounts`]: edit distance and the error rates of the field: the ASL
//!   Fingerspelling competition's normalized Levenshtein score `(N - D) / N` over a whole set,
//!   and character / word error rates `D / N`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use crate::lexicon::{Lexicon, LexiconState};

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
    /// A word list constraining beam search to transcripts of its words (whitespace-separated
    /// words of a text file, spelled in the vocabulary's tokens). In a model card: the file the
    /// words were read from; the words themselves travel in the card.
    pub lexicon: Option<PathBuf>,
}

impl Decoder {
    /// The config name (`greedy`, `beam`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Greedy => "greedy",
            Self::Beam => "beam",
        }
    }
}

impl Decoder {
    /// `greedy` or `beam`, whichever this decoder is.
    pub fn pick<T>(self, greedy: T, beam: T) -> T {
        match self {
            Self::Greedy => greedy,
            Self::Beam => beam,
        }
    }
}

impl Default for DecodeConfig {
    fn default() -> Self {
        Self { decoder: Decoder::Beam, beam_width: 8, lexicon: None }
    }
}

impl DecodeConfig {
    /// Range checks (`Err((key, message))`).
    pub fn validate(&self) -> Result<(), (String, String)> {
        if !(1..=1024).contains(&self.beam_width) {
            return Err(("ctc.beam_width".into(), format!("must be in 1..=1024, got {}", self.beam_width)));
        }
        if self.lexicon.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
            return Err(("ctc.lexicon".into(), "is an empty path; leave the key out for no lexicon".into()));
        }
        Ok(())
    }
}

/// A CTC decoder ready to run: the `[ctc]` settings and the lexicon they name, read.
#[derive(Debug, Clone, Default)]
pub struct CtcDecoder {
    /// Decoder and beam width.
    pub config: DecodeConfig,
    /// The lexicon beam search keeps to (greedy decoding ignores it).
    pub lexicon: Option<Arc<Lexicon>>,
}

impl CtcDecoder {
    /// Beam search with this decoder's width and lexicon ([`beam`]).
    pub fn beam(&self, log_probs: &[f32], classes: usize, length: usize, blank: usize) -> (Vec<usize>, f32) {
        beam(log_probs, classes, length, blank, self.config.beam_width, self.lexicon.as_deref())
    }

    /// The tokens of one sequence's `[frames, classes]` log-probabilities (first `length`
    /// frames real) with the configured decoder, each with its frames and confidence (beam
    /// search output is placed on the frames by [`align`]).
    pub fn decode(&self, log_probs: &[f32], classes: usize, length: usize, blank: usize) -> Vec<Token> {
        match self.config.decoder {
            Decoder::Greedy => greedy(log_probs, classes, length, blank),
            Decoder::Beam => {
                let (tokens, _) = self.beam(log_probs, classes, length, blank);
                // The beam's labelling was built from alignments of non-zero probability, so it
                // aligns; the greedy path stands in only if every path had probability 0.
                align(log_probs, classes, length, &tokens, blank)
                    .unwrap_or_else(|| greedy(log_probs, classes, length, blank))
            }
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

/// The most probable alignment (Viterbi path over the blank-extended target) of `tokens` to the
/// first `length` frames of `[frames, classes]` log-probabilities, as [`Token`]s with the
/// frames each token occupies on that path and its mean probability there. `None` when
/// `tokens` cannot fit the frames (a repeated token needs a blank between its copies).
pub fn align(log_probs: &[f32], classes: usize, length: usize, tokens: &[usize], blank: usize) -> Option<Vec<Token>> {
    let frames = length.min(log_probs.len() / classes.max(1));
    if tokens.is_empty() {
        return Some(Vec::new());
    }
    if frames == 0 {
        return None;
    }
    let ext: Vec<usize> = std::iter::once(blank).chain(tokens.iter().flat_map(|&l| [l, blank])).collect();
    let states = ext.len();
    let lp = |t: usize, s: usize| log_probs[t * classes + ext[s]];
    let neg = f32::NEG_INFINITY;
    let mut score = vec![neg; states];
    let mut back = vec![0u8; frames * states];
    score[0] = lp(0, 0);
    score[1] = lp(0, 1);
    let mut next = vec![neg; states];
    for t in 1..frames {
        for s in 0..states {
            let mut best = (score[s], 0u8);
            if s >= 1 && score[s - 1] > best.0 {
                best = (score[s - 1], 1);
            }
            if s >= 2 && ext[s] != blank && ext[s] != ext[s - 2] && score[s - 2] > best.0 {
                best = (score[s - 2], 2);
            }
            next[s] = if best.0 == neg { neg } else { best.0 + lp(t, s) };
            back[t * states + s] = best.1;
        }
        std::mem::swap(&mut score, &mut next);
    }
    let mut s = if score[states - 1] >= score[states - 2] { states - 1 } else { states - 2 };
    if score[s] == neg {
        return None;
    }
    let mut path = vec![0usize; frames];
    for t in (0..frames).rev() {
        path[t] = s;
        s -= usize::from(back[t * states + s]);
    }
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    for (t, &s) in path.iter().enumerate() {
        if s % 2 == 0 {
            continue;
        }
        let p = lp(t, s).exp();
        let same_token = out.len() == s.div_ceil(2);
        match out.last_mut() {
            Some(last) if same_token => {
                let run = (t - last.start + 1) as f32;
                last.end = t;
                last.confidence += (p - last.confidence) / run;
            }
            _ => out.push(Token { index: ext[s], start: t, end: t, confidence: p }),
        }
    }
    Some(out)
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
    /// (parent, token, lexicon state after it) of every node; node 0 is the empty prefix.
    nodes: Vec<(usize, usize, LexiconState)>,
    children: HashMap<(usize, usize), usize>,
}

impl Trie {
    fn child(&mut self, parent: usize, token: usize, state: LexiconState) -> usize {
        let next = self.nodes.len();
        let id = *self.children.entry((parent, token)).or_insert(next);
        if id == next {
            self.nodes.push((parent, token, state));
        }
        id
    }
    fn state(&self, node: usize) -> LexiconState {
        self.nodes[node].2
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
///
/// With a `lexicon`, a prefix is only extended by tokens the lexicon allows after it, and the
/// result is the best prefix that ends a word; when no surviving prefix does (too few frames
/// for any word), the best one is returned as it is.
pub fn beam(
    log_probs: &[f32],
    classes: usize,
    length: usize,
    blank: usize,
    width: usize,
    lexicon: Option<&Lexicon>,
) -> (Vec<usize>, f32) {
    let neg = f32::NEG_INFINITY;
    let width = width.max(1);
    let start = lexicon.map_or(0, Lexicon::start);
    let mut trie = Trie { nodes: vec![(0, usize::MAX, start)], children: HashMap::new() };
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
                // A repeat only extends after a blank; without one it stays the same prefix.
                if last == Some(k) {
                    let same = next.entry(prefix).or_insert((neg, neg));
                    same.1 = log_add(same.1, pnb + p);
                }
                let state = match lexicon {
                    None => Some(start),
                    Some(lex) => lex.step(trie.state(prefix), k),
                };
                let Some(state) = state else { continue };
                let extended = trie.child(prefix, k, state);
                let e = next.entry(extended).or_insert((neg, neg));
                e.1 = log_add(e.1, if last == Some(k) { pb + p } else { total + p });
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
    // The empty transcript is complete; any other ends on a whole word.
    let complete = |b: &(usize, f32, f32)| b.0 == 0 || lexicon.is_none_or(|lex| lex.complete(trie.state(b.0)));
    let any_complete = beams.iter().any(complete);
    let best = beams
        .iter()
        .filter(|b| !any_complete || complete(b))
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
    /// Sequences added.
    pub sequences: usize,
    /// Sequences decoded exactly.
    pub exact: usize,
}

impl ErrorCounts {
    /// Add one (hypothesis, reference) pair. `separator` is the word-boundary token (a space
    /// among characters); without one every token is a word (glosses), so the word error rate
    /// equals the token error rate.
    pub fn add(&mut self, hypothesis: &[usize], reference: &[usize], separator: Option<usize>) {
        let edits = levenshtein(hypothesis, reference);
        self.token_edits += edits;
        self.tokens += reference.len();
        self.sequences += 1;
        self.exact += usize::from(hypothesis == reference);
        match separator {
            Some(sep) => {
                let words = |s: &[usize]| -> Vec<Vec<usize>> {
                    s.split(|&t| t == sep).filter(|w| !w.is_empty()).map(<[usize]>::to_vec).collect()
                };
                let (h, r) = (words(hypothesis), words(reference));
                self.word_edits += levenshtein(&h, &r);
                self.words += r.len();
            }
            None => {
                self.word_edits += edits;
                self.words += reference.len();
            }
        }
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

    /// Share of sequences decoded exactly.
    pub fn sequence_accuracy(&self) -> f64 {
        self.exact as f64 / self.sequences.max(1) as f64
    }

    /// The rates, for reports.
    pub fn scores(&self) -> Scores {
        Scores {
            nld: self.normalized_levenshtein(),
            cer: self.cer(),
            wer: self.wer(),
            sequence_accuracy: self.sequence_accuracy(),
        }
    }
}

/// Validation of a CTC model over a set, one sequence at a time: the CTC loss and both
/// decoders' edit counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CtcTally {
    /// Summed per-sequence loss per target token (sequences whose target cannot fit their
    /// frames count 0, as in training).
    pub loss: f64,
    /// Greedy decoding's counts.
    pub greedy: ErrorCounts,
    /// Beam search's counts.
    pub beam: ErrorCounts,
}

impl CtcTally {
    /// Score one sequence's `[frames, classes]` log-probabilities (first `length` frames real)
    /// against `target`; returns the (greedy, beam) hypotheses, beam search being `decoder`'s
    /// (its width and lexicon). `separator` as in [`ErrorCounts::add`].
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &mut self,
        log_probs: &[f32],
        classes: usize,
        length: usize,
        target: &[usize],
        blank: usize,
        separator: Option<usize>,
        decoder: &CtcDecoder,
    ) -> (Vec<usize>, Vec<usize>) {
        let nll = crate::ctc::ctc_nll(log_probs, classes, length, target, blank);
        if nll.is_finite() {
            self.loss += nll / target.len().max(1) as f64;
        }
        let g: Vec<usize> = greedy(log_probs, classes, length, blank).into_iter().map(|t| t.index).collect();
        let (b, _) = decoder.beam(log_probs, classes, length, blank);
        self.greedy.add(&g, target, separator);
        self.beam.add(&b, target, separator);
        (g, b)
    }

    /// Mean loss per sequence.
    pub fn mean_loss(&self) -> f64 {
        self.loss / self.greedy.sequences.max(1) as f64
    }
}

/// The error rates of one decoder over a set (what `summary.json`, the epoch records and
/// `infer eval` report).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    /// Normalized Levenshtein score `(N - D) / N` (higher is better).
    pub nld: f64,
    /// Token (character) error rate.
    pub cer: f64,
    /// Word error rate (gloss error rate for gloss vocabularies).
    pub wer: f64,
    /// Share of sequences decoded exactly.
    pub sequence_accuracy: f64,
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
        let (best, logp) = beam(&lp, 2, 2, 0, 4, None);
        assert_eq!(best, vec![1]);
        assert!((logp.exp() - 0.64).abs() < 1e-5, "{}", logp.exp());
        // "a a" needs a blank between: a _ a.
        let lp = rows(&[&[0.1, 0.9], &[0.9, 0.1], &[0.1, 0.9]]);
        assert_eq!(beam(&lp, 2, 3, 0, 4, None).0, vec![1, 1]);
    }

    /// Random `[frames, classes]` log-probabilities (a fixed xorshift stream, `scale` the
    /// spread of the logits).
    fn random_log_probs(x: &mut u64, frames: usize, classes: usize, scale: f64) -> Vec<f32> {
        let z: Vec<f64> = (0..frames * classes)
            .map(|_| {
                *x ^= *x << 13;
                *x ^= *x >> 7;
                *x ^= *x << 17;
                (*x >> 11) as f64 / (1u64 << 53) as f64 * scale
            })
            .collect();
        z.chunks(classes)
            .flat_map(|r| {
                let lse = r.iter().map(|v| v.exp()).sum::<f64>().ln();
                r.iter().map(move |v| (v - lse) as f32).collect::<Vec<_>>()
            })
            .collect()
    }

    /// The most probable labelling of up to `frames` tokens over classes `1..classes` that
    /// `allowed` accepts, by scoring every one with the CTC forward pass.
    fn best_labelling(
        lp: &[f32],
        classes: usize,
        frames: usize,
        allowed: impl Fn(&[usize]) -> bool,
    ) -> (Vec<usize>, f64) {
        let tokens = classes - 1;
        let mut best = (Vec::new(), f64::NEG_INFINITY);
        for n in 0..=frames {
            for code in 0..tokens.pow(n as u32) {
                let label: Vec<usize> = (0..n).map(|i| 1 + code / tokens.pow(i as u32) % tokens).collect();
                if !allowed(&label) {
                    continue;
                }
                let logp = -crate::ctc::ctc_one(lp, classes, frames, &label, 0).nll;
                if logp > best.1 {
                    best = (label, logp);
                }
            }
        }
        best
    }

    #[test]
    fn a_wide_beam_finds_the_most_probable_labelling_with_its_exact_probability() {
        // Every labelling of up to 5 tokens over {1, 2}, scored exactly by the CTC forward pass.
        let (classes, frames) = (3, 5);
        let mut x = 0x853c_49e6_748f_ea9bu64;
        for _ in 0..20 {
            let lp = random_log_probs(&mut x, frames, classes, 3.0);
            let best = best_labelling(&lp, classes, frames, |_| true);
            let (got, logp) = beam(&lp, classes, frames, 0, 64, None);
            assert_eq!(got, best.0);
            assert!((f64::from(logp) - best.1).abs() < 1e-4, "{logp} vs {}", best.1);
        }
    }

    #[test]
    fn a_lexicon_beam_finds_the_most_probable_transcript_of_lexicon_words() {
        // Classes: blank, space, a, b, c. Words "ab", "c", "ca", "bcc"; every labelling of up
        // to 6 tokens is scored, the best one made of lexicon words is what beam search with
        // the lexicon must return, whatever the unconstrained best is.
        let (classes, frames) = (5, 6);
        let words = [vec![2, 3], vec![4], vec![4, 2], vec![3, 4, 4]];
        let lex = Lexicon::new(&words, Some(1), 0).unwrap();
        let is_transcript =
            |label: &[usize]| label.is_empty() || label.split(|&t| t == 1).all(|w| words.iter().any(|v| v == w));
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut differs = 0;
        for _ in 0..12 {
            let lp = random_log_probs(&mut x, frames, classes, 4.0);
            let free = best_labelling(&lp, classes, frames, |_| true);
            let best = best_labelling(&lp, classes, frames, is_transcript);
            let (got, logp) = beam(&lp, classes, frames, 0, 256, Some(&lex));
            assert_eq!(got, best.0, "free best {:?}", free.0);
            assert!((f64::from(logp) - best.1).abs() < 1e-4, "{logp} vs {}", best.1);
            differs += usize::from(free.0 != best.0);
        }
        // The constraint changed the answer in most cases: the test is not vacuous.
        assert!(differs >= 6, "{differs}");
    }

    #[test]
    fn the_lexicon_mends_a_misspelling_greedy_and_free_beam_make() {
        // Classes blank, space, a, b, c. The "a" of "cab" is weak: without the lexicon "cb"
        // (p = 0.251, by the CTC forward pass) beats "cab" (0.151) and greedy reads "cbb"; with
        // the words {"cab", "aa"} beam search answers "cab".
        let lp = rows(&[
            &[0.05, 0.05, 0.05, 0.05, 0.8],
            &[0.3, 0.05, 0.2, 0.4, 0.05],
            &[0.5, 0.05, 0.15, 0.25, 0.05],
            &[0.05, 0.05, 0.05, 0.8, 0.05],
        ]);
        let lex = Lexicon::new(&[vec![4, 2, 3], vec![2, 2]], Some(1), 0).unwrap();
        assert_eq!(beam(&lp, 5, 4, 0, 8, None).0, vec![4, 3]);
        assert_eq!(greedy(&lp, 5, 4, 0).iter().map(|t| t.index).collect::<Vec<_>>(), [4, 3, 3]);
        assert_eq!(beam(&lp, 5, 4, 0, 8, Some(&lex)).0, vec![4, 2, 3]);
        let decoder = CtcDecoder { config: DecodeConfig::default(), lexicon: Some(Arc::new(lex)) };
        let tokens = decoder.decode(&lp, 5, 4, 0);
        assert_eq!(tokens.iter().map(|t| t.index).collect::<Vec<_>>(), [4, 2, 3]);
        assert!(tokens.windows(2).all(|w| w[0].end < w[1].start));
    }

    /// The best single path collapsing to `target`, by enumerating every path (tiny cases).
    fn best_path(lp: &[f32], classes: usize, frames: usize, target: &[usize]) -> Option<Vec<usize>> {
        let mut best: Option<(f32, Vec<usize>)> = None;
        for code in 0..classes.pow(frames as u32) {
            let path: Vec<usize> = (0..frames).map(|t| code / classes.pow(t as u32) % classes).collect();
            let mut collapsed = Vec::new();
            let mut prev = 0;
            for &k in &path {
                if k != 0 && k != prev {
                    collapsed.push(k);
                }
                prev = k;
            }
            let score: f32 = path.iter().enumerate().map(|(t, &k)| lp[t * classes + k]).sum();
            if collapsed == target && best.as_ref().is_none_or(|b| score > b.0) {
                best = Some((score, path));
            }
        }
        best.map(|b| b.1)
    }

    #[test]
    fn alignment_is_the_best_path_of_the_labelling() {
        let (classes, frames) = (3, 6);
        let mut seed = 7u64;
        for case in 0..40 {
            let lp: Vec<f32> = (0..frames)
                .flat_map(|_| {
                    let z: Vec<f32> = (0..classes)
                        .map(|_| {
                            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                            (seed >> 33) as f32 / (1u64 << 31) as f32 * 4.0
                        })
                        .collect();
                    let lse = z.iter().map(|v| v.exp()).sum::<f32>().ln();
                    z.into_iter().map(move |v| v - lse)
                })
                .collect();
            let targets: [&[usize]; 4] = [&[1], &[1, 2], &[2, 2], &[1, 2, 1]];
            let target = targets[case % 4];
            let path = best_path(&lp, classes, frames, target).expect("fits");
            let got = align(&lp, classes, frames, target, 0).expect("fits");
            assert_eq!(got.iter().map(|t| t.index).collect::<Vec<_>>(), target);
            // Every frame the best path gives a token lies in that token's span, and the
            // spans follow each other.
            for (k, tok) in got.iter().enumerate() {
                assert!(tok.start <= tok.end && (k == 0 || got[k - 1].end < tok.start));
                for t in tok.start..=tok.end {
                    assert_eq!(path[t], tok.index, "case {case} frame {t}: {path:?} vs {got:?}");
                }
                let mean = (tok.start..=tok.end).map(|t| lp[t * classes + tok.index].exp()).sum::<f32>()
                    / (tok.end - tok.start + 1) as f32;
                assert!((tok.confidence - mean).abs() < 1e-5);
            }
            let on_tokens: usize = got.iter().map(|t| t.end - t.start + 1).sum();
            assert_eq!(on_tokens, path.iter().filter(|&&k| k != 0).count());
        }
        // "a a" needs a blank between: 2 frames cannot hold it.
        let lp = vec![(0.5f32).ln(); 2 * 2];
        assert!(align(&lp, 2, 2, &[1, 1], 0).is_none());
        assert_eq!(align(&lp, 2, 2, &[], 0), Some(Vec::new()));
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
        // Glosses: every token a word; one exact sequence of two.
        c.add(&[7, 8], &[7, 8], None);
        c.add(&[7], &[7, 8, 6], None);
        assert_eq!((c.token_edits, c.tokens, c.word_edits, c.words), (3, 10, 3, 7));
        assert_eq!((c.sequences, c.exact), (3, 1));
        let s = c.scores();
        assert!((s.cer - 0.3).abs() < 1e-12 && (s.wer - 3.0 / 7.0).abs() < 1e-12);
        assert!((s.nld - 0.7).abs() < 1e-12 && (s.sequence_accuracy - 1.0 / 3.0).abs() < 1e-12);
    }
}
