//! Live recognition: push landmark frames as they arrive, get sign events.
//!
//! The recognizer keeps the last `window_frames` frames, runs the model every `hop` frames on
//! them once it holds at least 3/4 of a window (through the same preprocessing as training), averages the last `smoothing` probability
//! vectors, and tracks runs of evaluations whose top class is above `threshold`. A run that lasted
//! at least `min_hops` evaluations becomes a [`SignEvent`] when it ends (another sign wins, the
//! confidence drops, a gap, or [`StreamingRecognizer::finish`]). Frames without any kept landmark
//! (hands out of view) are kept as missing data, as in training; a jump in frame numbers larger
//! than `max_gap_frames` starts a fresh window. A window in which no hand is visible in any frame
//! (holistic layout) is not evaluated: it holds no sign.
//!
//! Segmentation: when both hands have been out of view for `boundary_frames` frames in a row (the
//! signer lowered them between signs), the sign in progress is over and the next one starts from
//! an empty window, so no window straddles two signs separated by a pause (such a window can
//! look like a third sign). A classifier classifies a short segment (the signing between two
//! pauses, at most `segment_frames` frames: one sign) whole when it ends, as a clip: its top
//! class is the sign when it reaches `segment_threshold`, and the window events inside it are
//! held until then (reported only when the whole segment is unsure). A longer segment (signs run
//! together without a pause) is split into signs by span decoding ([`crate::spans`]) from the
//! frame it outgrows that length: every `hop` frames the spans ending there, one per candidate
//! sign length (half to 1.6 times the window), are classified whole, and the best split of the
//! segment into signs and transitions is kept (each sign costs `sign_cost`, a prior for fewer,
//! whole signs); a sign on it is reported once it ended `settle_frames` frames before the newest
//! frame and its probability reaches `segment_threshold`. A segment that ends (at a pause) before
//! span decoding reported any sign of it and is at most two windows (or `segment_frames`) long is
//! one long sign: classified whole, as a short segment is; otherwise the rest of the split is
//! reported.
//!
//! A continuous-recognition (CTC) model is decoded instead ([`crate::transcribe`]): every `hop`
//! frames the window (at most the model's window, so frames are never resampled) is decoded
//! into tokens with frame spans, and a token is reported once it has settled: it ended at least
//! `settle_frames` frames before the newest frame and starts after the last reported token. At
//! a pause, a gap or the end of the stream every remaining token is reported. Tokens below
//! `token_threshold` (mean probability over their frames; 0 by default) are dropped.

use std::collections::VecDeque;
use std::sync::Arc;

use data::{LandmarkSequence, Sample};
use serde::Serialize;

use crate::spans::{Decoded, Scored, SpanDecoder};
use crate::{InferError, Model, Predictor, Result};

/// How the streaming recognizer evaluates and reports.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamConfig {
    /// Frames per evaluation; `0` = the median training-sequence length stored with the model
    /// (one whole sign), or the model's window for bundles without it.
    pub window_frames: usize,
    /// Evaluate every this many frames.
    pub hop: usize,
    /// Average this many consecutive probability vectors.
    pub smoothing: usize,
    /// Smoothed probability a sign needs to count.
    pub threshold: f32,
    /// Evaluations in a row a sign must win to be reported.
    pub min_hops: usize,
    /// A larger jump in frame numbers resets the window.
    pub max_gap_frames: i64,
    /// Consecutive frames with both hands out of view that end a sign (0 = off). Needs frames of
    /// the 543-point MediaPipe holistic layout; other layouts never trigger it.
    pub boundary_frames: usize,
    /// Frames a sign must have ended before the newest frame to be reported: CTC tokens, and
    /// the signs a classifier splits a long segment into.
    pub settle_frames: usize,
    /// CTC models: tokens whose mean probability over their frames is below this are dropped
    /// (0 keeps every decoded token, as `transcribe` does; CTC tokens are often one- or
    /// two-frame spikes whose mean probability is well below a classifier's).
    pub token_threshold: f32,
    /// Classifiers with pause segmentation: the longest segment between two pauses classified
    /// whole when it ends (0 = 1.25 times the window); a longer one is split into signs by span
    /// decoding from then on, and still classified whole when it ends (up to twice the window,
    /// or this length where longer) before span decoding has reported any sign of it.
    pub segment_frames: usize,
    /// Classifiers: probability the top class of a whole segment, or of a sign span decoding
    /// found, needs to be reported as a sign (a segment is signing by construction, so this sits
    /// below `threshold`); span decoding's cost of a frame outside a sign derives from it.
    pub segment_threshold: f32,
    /// Classifiers, span decoding: the log-probability each sign costs, a prior for fewer,
    /// whole signs over more, shorter ones (0 = none). Without it a span holding the end of one
    /// sign and the start of the next is often reported as a third sign.
    pub sign_cost: f32,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            window_frames: 0,
            hop: 2,
            smoothing: 3,
            threshold: 0.6,
            min_hops: 3,
            max_gap_frames: 30,
            boundary_frames: 5,
            settle_frames: 6,
            token_threshold: 0.0,
            segment_frames: 0,
            segment_threshold: 0.3,
            sign_cost: 0.25,
        }
    }
}

/// A recognized sign.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignEvent {
    /// Class name.
    pub label: String,
    /// Class index.
    pub index: usize,
    /// Highest smoothed probability during the sign.
    pub confidence: f32,
    /// First frame of the window where the sign first won (frame numbers as pushed).
    pub start_frame: i64,
    /// Last frame of the window where it last won.
    pub end_frame: i64,
}

#[derive(Debug, Clone)]
struct Run {
    index: usize,
    start: i64,
    end: i64,
    hops: usize,
    confidence: f32,
}

/// See the module docs. Owns an `Arc` of the model ([`Predictor`], [`crate::Classifier`] or
/// [`crate::Transcriber`]), so many recognizers (one per camera) can share one loaded model.
#[derive(Debug)]
pub struct StreamingRecognizer {
    model: Arc<dyn Model>,
    cfg: StreamConfig,
    window: usize,
    points: Option<usize>,
    frames: VecDeque<(i64, Vec<[f32; 3]>)>,
    since_eval: usize,
    history: VecDeque<Vec<f32>>,
    run: Option<Run>,
    pushed: usize,
    /// Hand landmark indices (holistic layout only).
    hands: Vec<usize>,
    /// Consecutive frames without either hand.
    handless: usize,
    /// Evaluations since the window was last emptied.
    segment_evals: usize,
    /// CTC models: decode tokens instead of classifying windows.
    ctc: bool,
    /// CTC: the last frame of the last reported token.
    reported_until: i64,
    /// Classifiers: the longest segment classified whole (0 when segments are not classified).
    segment_limit: usize,
    /// Window events of the short segment in progress, held until it ends.
    held: Vec<SignEvent>,
    /// The segment in progress outgrew `segment_limit` and is split into signs.
    spans: Option<SpanDecoder>,
    /// Frames of the segment in progress so far.
    segment_len: usize,
    /// Span decoding reported a sign of the segment in progress (it is no longer one sign).
    split_reported: bool,
}

impl StreamingRecognizer {
    /// A recognizer over `model` (checks `cfg` against the model).
    pub fn new(model: Arc<dyn Model>, cfg: StreamConfig) -> Result<Self> {
        let predictor = (*model).as_ref();
        if cfg.hop == 0
            || cfg.smoothing == 0
            || cfg.min_hops == 0
            || !(0.0..=1.0).contains(&cfg.threshold)
            || !(0.0..=1.0).contains(&cfg.token_threshold)
            || !(0.0..=1.0).contains(&cfg.segment_threshold)
            || !(0.0..=10.0).contains(&cfg.sign_cost)
        {
            return Err(InferError::Unsupported(format!(
                "stream config needs hop, smoothing, min_hops >= 1, threshold, token_threshold, segment_threshold in [0, 1] and sign_cost in [0, 10], got {cfg:?}"
            )));
        }
        let ctc = predictor.card().task == models::Task::Ctc;
        let window = match cfg.window_frames {
            0 if ctc => predictor.window(),
            0 => predictor.card().median_frames.unwrap_or(predictor.window()),
            w if ctc && w > predictor.window() => {
                return Err(InferError::Unsupported(format!(
                "stream window of {w} frames is longer than the CTC model's window ({}): its frames would be resampled",
                predictor.window()
            )))
            }
            w => w,
        };
        let window = window.max(2);
        let segment_limit = match (ctc, cfg.boundary_frames, cfg.segment_frames) {
            (true, _, _) | (_, 0, _) => 0,
            (false, _, 0) => window + window / 4,
            (false, _, n) => n.max(window),
        };
        Ok(Self {
            model,
            cfg,
            window,
            points: None,
            frames: VecDeque::new(),
            since_eval: 0,
            history: VecDeque::new(),
            run: None,
            pushed: 0,
            hands: Vec::new(),
            handless: 0,
            segment_evals: 0,
            ctc,
            reported_until: i64::MIN,
            segment_limit,
            held: Vec::new(),
            spans: None,
            segment_len: 0,
            split_reported: false,
        })
    }

    /// Whether the segment in progress is held to be classified whole (a pause-segmented
    /// classifier, in a segment not yet longer than the limit; set once the layout is known).
    fn holding(&self) -> bool {
        self.segment_limit > 0 && !self.hands.is_empty() && self.spans.is_none()
    }

    /// Add one frame (all landmarks of the layout the model was trained on, NaN where missing).
    /// Returns the events that ended with this frame.
    pub fn push(&mut self, frame: i64, landmarks: &[[f32; 3]]) -> Result<Vec<SignEvent>> {
        let index = self.pushed;
        match self.points {
            None => {
                self.points = Some(landmarks.len());
                if landmarks.len() == data::layout::NUM_LANDMARKS {
                    self.hands = data::layout::named_subset("hands").unwrap_or_default();
                }
            }
            Some(p) if p != landmarks.len() => {
                return Err(InferError::Input {
                    index,
                    message: format!("frame {frame} has {} landmarks, earlier frames had {p}", landmarks.len()),
                })
            }
            Some(_) => {}
        }
        if landmarks.is_empty() {
            return Err(InferError::Input { index, message: format!("frame {frame} has no landmarks") });
        }
        let mut events = Vec::new();
        if let Some(&(last, _)) = self.frames.back() {
            if frame <= last {
                return Err(InferError::Input {
                    index,
                    message: format!("frame numbers must increase: {frame} after {last}"),
                });
            }
            if frame - last > self.cfg.max_gap_frames {
                events.extend(self.end_segment()?);
            }
        }
        self.pushed += 1;
        let handless = !self.hands.is_empty() && !self.hand_in_view(landmarks);
        self.handless = if handless { self.handless + 1 } else { 0 };
        if self.cfg.boundary_frames > 0 && self.handless >= self.cfg.boundary_frames {
            // Hands lowered between signs: end the sign once, then skip the pause's frames.
            if self.handless == self.cfg.boundary_frames {
                events.extend(self.end_segment()?);
            }
            return Ok(events);
        }
        self.frames.push_back((frame, landmarks.to_vec()));
        self.segment_len += 1;
        if self.spans.is_some() {
            events.extend(self.decode_spans()?);
            return Ok(events);
        }
        if self.holding() && self.frames.len() > self.segment_limit {
            // More than one sign's worth without a pause: split it into signs from here.
            events.extend(self.start_splitting()?);
            return Ok(events);
        }
        let keep = if self.holding() { self.segment_limit } else { self.window };
        while self.frames.len() > keep {
            self.frames.pop_front();
        }
        self.since_eval += 1;
        if self.ctc {
            if self.since_eval >= self.cfg.hop {
                self.since_eval = 0;
                events.extend(self.decode_window(false)?);
            }
        } else if self.since_eval >= self.cfg.hop && 4 * self.frames.len().min(self.window) >= 3 * self.window {
            self.since_eval = 0;
            let found = self.evaluate()?;
            if self.holding() {
                self.held.extend(found);
            } else {
                events.extend(found);
            }
        }
        Ok(events)
    }

    /// Whether the segment in progress may still be one sign, classified whole when it ends:
    /// it is held, or span decoding has split nothing off it yet and its frames are all kept.
    fn maybe_one_sign(&self) -> bool {
        self.holding() || (self.spans.is_some() && !self.split_reported && self.frames.len() == self.segment_len)
    }

    /// The longest segment classified whole at its end when span decoding split nothing off:
    /// two windows, or the segment limit where that is longer.
    fn whole_limit(&self) -> usize {
        self.segment_limit.max(2 * self.window)
    }

    /// Split the held segment into signs by span decoding from its first frame on (its held
    /// window events are dropped); the signs that settled already.
    fn start_splitting(&mut self) -> Result<Vec<SignEvent>> {
        self.held.clear();
        self.spans = Some(SpanDecoder::new(self.span_lengths(), self.gap_cost(), self.cfg.sign_cost));
        self.decode_spans()
    }

    /// End of stream: report a sign still in progress (evaluating a short last sign once more,
    /// as at a pause).
    pub fn finish(&mut self) -> Result<Vec<SignEvent>> {
        self.end_segment()
    }

    /// Start from an empty window: its frames, evaluations, run and held events are gone.
    fn reset_window(&mut self) {
        self.frames.clear();
        self.history.clear();
        self.run = None;
        self.since_eval = 0;
        self.segment_evals = 0;
        self.held.clear();
        self.spans = None;
        self.segment_len = 0;
        self.split_reported = false;
    }

    /// The sign in the window is over: give a short one (fewer than `min_hops` evaluations) a
    /// last evaluation, report it with the evaluations it could have had, empty the window.
    fn end_segment(&mut self) -> Result<Vec<SignEvent>> {
        if self.ctc {
            let events = self.decode_window(true)?;
            self.reset_window();
            return Ok(events);
        }
        if self.maybe_one_sign() {
            if let Some(sign) = self.classify_segment()? {
                self.reset_window();
                return Ok(vec![sign]);
            }
        }
        if let Some(spans) = self.spans.take() {
            let events = self.span_events(spans.flush());
            self.reset_window();
            return Ok(events);
        }
        let mut events = std::mem::take(&mut self.held);
        if self.segment_evals < self.cfg.min_hops
            && 4 * self.frames.len().min(self.window) >= self.window
            && self.since_eval > 0
        {
            events.extend(self.evaluate()?);
        }
        let needed = self.cfg.min_hops.min(self.segment_evals.max(1));
        events.extend(self.close_run_with(needed));
        self.reset_window();
        Ok(events)
    }

    /// The whole short segment classified as one clip: its sign, when the top class reaches
    /// `segment_threshold`. The clip runs from the first to the last frame with a hand in view
    /// (the frames of the pause that ended it are not part of the sign).
    fn classify_segment(&self) -> Result<Option<SignEvent>> {
        let visible = |f: &(i64, Vec<[f32; 3]>)| self.hand_in_view(&f.1);
        let (Some(first), Some(last)) = (self.frames.iter().position(visible), self.frames.iter().rposition(visible))
        else {
            return Ok(None);
        };
        let clip = self.frames.range(first..=last);
        let Some(prepared) = self.prepare_window(self.sequence_of(clip.clone()))? else { return Ok(None) };
        let probs = self.model().class_probabilities(std::slice::from_ref(&prepared))?.remove(0);
        let (index, confidence) = top_class(&probs);
        Ok((confidence >= self.cfg.segment_threshold).then(|| SignEvent {
            label: self.model().labels()[index].clone(),
            index,
            confidence,
            start_frame: self.frames[first].0,
            end_frame: self.frames[last].0,
        }))
    }

    /// Candidate sign lengths of span decoding, in nodes of `hop` frames: half the window to 1.6
    /// times it, about ten steps apart by a constant ratio.
    fn span_lengths(&self) -> Vec<usize> {
        let (lo, hi) = (self.window as f32 * 0.5, self.window as f32 * 1.6);
        (0..10).map(|k| (lo * (hi / lo).powf(k as f32 / 9.0) / self.cfg.hop as f32).round() as usize).collect()
    }

    /// Span decoding's cost of a node outside a sign: a window-long span whose top class has
    /// `segment_threshold` probability scores as much as a gap of the same length.
    fn gap_cost(&self) -> f32 {
        let nodes = (self.window as f32 / self.cfg.hop as f32).max(1.0);
        -self.cfg.segment_threshold.max(1e-3).ln() / nodes
    }

    /// Span decoding: classify the spans ending at each node the segment completed, then report
    /// the signs that settled and drop the frames no future span needs.
    fn decode_spans(&mut self) -> Result<Vec<SignEvent>> {
        let hop = self.cfg.hop;
        let Some(mut spans) = self.spans.take() else { return Ok(Vec::new()) };
        // Segment offset of `frames[0]`.
        let mut first = self.segment_len - self.frames.len();
        while spans.next_node() * hop <= self.segment_len {
            let end = spans.next_node();
            let candidates = spans.candidates();
            let mut prepared = Vec::new();
            let mut slots = Vec::with_capacity(candidates.len());
            for start in &candidates {
                let range = start.map(|s| (s * hop).saturating_sub(first)..end * hop - first);
                let clip = match range {
                    Some(r) if r.start < r.end && self.has_hands(self.frames.range(r.clone())) => {
                        self.prepare_window(self.sequence_of(self.frames.range(r)))?
                    }
                    _ => None,
                };
                slots.push(clip.is_some());
                prepared.extend(clip);
            }
            let mut probs = self.model().class_probabilities(&prepared)?.into_iter();
            let scores: Vec<Option<Scored>> = slots
                .into_iter()
                .map(|scored| {
                    let (class, prob) = top_class(&(if scored { probs.next() } else { None })?);
                    Some(Scored { class, prob })
                })
                .collect();
            spans.push(scores);
        }
        let newest = spans.next_node() - 1;
        let settle = self.cfg.settle_frames.div_ceil(hop);
        let horizon = 4 * (2 * self.window).div_ceil(hop);
        let done = self.span_events(spans.settle(newest.saturating_sub(settle), horizon));
        self.split_reported |= !done.is_empty();
        let keep_from = spans.oldest_needed() * hop;
        // Until a sign is split off, keep the segment (up to `whole_limit`) for `end_segment`.
        let whole = !self.split_reported && self.frames.len() <= self.whole_limit();
        while !whole && first < keep_from && self.frames.len() > 1 {
            self.frames.pop_front();
            first += 1;
        }
        self.spans = Some(spans);
        Ok(done)
    }

    /// Decoded signs as events (those reaching `segment_threshold`), with the frame numbers of
    /// their first and last frames.
    fn span_events(&self, signs: Vec<Decoded>) -> Vec<SignEvent> {
        let first = self.segment_len - self.frames.len();
        let frame_at = |offset: usize| {
            let i = offset.saturating_sub(first).min(self.frames.len().saturating_sub(1));
            self.frames.get(i).map_or(0, |f| f.0)
        };
        signs
            .into_iter()
            .filter(|d| d.prob >= self.cfg.segment_threshold)
            .map(|d| SignEvent {
                label: self.model().labels()[d.class].clone(),
                index: d.class,
                confidence: d.prob,
                start_frame: frame_at(d.start * self.cfg.hop),
                end_frame: frame_at(d.end * self.cfg.hop - 1),
            })
            .collect()
    }

    /// The last `window` frames (all of them for CTC models, whose frames never exceed it).
    fn window_frames(&self) -> std::collections::vec_deque::Iter<'_, (i64, Vec<[f32; 3]>)> {
        self.frames.range(self.frames.len().saturating_sub(self.window)..)
    }

    /// Whether a hand point of the frame `landmarks` is in view (has a coordinate; recordings
    /// without z carry it as NaN).
    fn hand_in_view(&self, landmarks: &[[f32; 3]]) -> bool {
        self.hands.iter().any(|&i| landmarks[i].iter().any(|v| !v.is_nan()))
    }

    /// Whether a hand is visible in some of `frames` (always, for layouts without hands): frames
    /// of the face alone hold no sign, whatever the model makes of them.
    fn has_hands<'a>(&self, mut frames: impl Iterator<Item = &'a (i64, Vec<[f32; 3]>)>) -> bool {
        self.hands.is_empty() || frames.any(|(_, lms)| self.hand_in_view(lms))
    }

    /// The window as a landmark sequence.
    fn window_sequence(&self) -> LandmarkSequence {
        self.sequence_of(self.window_frames())
    }

    /// `frames` as a landmark sequence.
    fn sequence_of<'a>(&self, frames: impl ExactSizeIterator<Item = &'a (i64, Vec<[f32; 3]>)>) -> LandmarkSequence {
        let mut seq = LandmarkSequence::empty(frames.len(), self.points.unwrap_or(0));
        for (t, (id, lms)) in frames.enumerate() {
            seq.frame_ids[t] = *id as i32;
            for (p, v) in lms.iter().enumerate() {
                seq.set(t, p, *v);
            }
        }
        seq
    }

    /// The window as the model's input; `None` when nothing in it is visible.
    fn prepare_window(&self, seq: LandmarkSequence) -> Result<Option<data::Prepared>> {
        match self.model().prepare(&Sample::Landmarks(seq), self.pushed) {
            Ok(p) => Ok(Some(p)),
            // Nothing visible in the window (e.g. both hands out of view).
            Err(InferError::Input { message, .. }) if message.contains("no frame") || message.contains("empty") => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// CTC: decode the window and report the tokens that have settled (all new ones when
    /// `flush`).
    fn decode_window(&mut self, flush: bool) -> Result<Vec<SignEvent>> {
        if self.frames.len() < 2 || !self.has_hands(self.frames.iter()) {
            return Ok(Vec::new());
        }
        let seq = self.window_sequence();
        // Preprocessing may drop frames without a kept landmark: the frame number of each row
        // of the model's input.
        let keep =
            self.model().preprocessor().kept_frames(&seq, std::path::Path::new("stream")).map_err(InferError::Data)?;
        let kept: Vec<i64> = self.frames.iter().zip(&keep).filter(|(_, &k)| k).map(|(f, _)| f.0).collect();
        let Some(prepared) = self.prepare_window(seq)? else { return Ok(Vec::new()) };
        let (log_probs, valid) = self.model().ctc_frame_log_probs(std::slice::from_ref(&prepared))?.remove(0);
        let transcript = self.model().decode_frames(&log_probs, valid)?;
        let newest = self.frames.back().map_or(0, |f| f.0);
        let frame_of = |row: usize| kept.get(row).copied().unwrap_or(newest);
        let mut events = Vec::new();
        for t in transcript.tokens {
            let (start, end) = (frame_of(t.start), frame_of(t.end));
            if start <= self.reported_until {
                continue;
            }
            if !flush && end + self.cfg.settle_frames as i64 > newest {
                break;
            }
            self.reported_until = end;
            if t.confidence >= self.cfg.token_threshold {
                events.push(SignEvent {
                    label: t.label,
                    index: t.index,
                    confidence: t.confidence,
                    start_frame: start,
                    end_frame: end,
                });
            }
        }
        Ok(events)
    }

    /// The model's predictor.
    fn model(&self) -> &Predictor {
        (*self.model).as_ref()
    }

    fn evaluate(&mut self) -> Result<Vec<SignEvent>> {
        if !self.has_hands(self.window_frames()) {
            return Ok(self.close_run().into_iter().collect());
        }
        let Some(prepared) = self.prepare_window(self.window_sequence())? else {
            return Ok(self.close_run().into_iter().collect());
        };
        let probs = self.model().class_probabilities(std::slice::from_ref(&prepared))?.remove(0);
        self.segment_evals += 1;
        self.since_eval = 0;
        self.history.push_back(probs);
        while self.history.len() > self.cfg.smoothing {
            self.history.pop_front();
        }
        let classes = self.model().labels().len();
        let mut smooth = vec![0f32; classes];
        for h in &self.history {
            for (s, p) in smooth.iter_mut().zip(h) {
                *s += p / self.history.len() as f32;
            }
        }
        let (top, conf) = top_class(&smooth);
        let (start, end) = (self.window_frames().next().map_or(0, |f| f.0), self.frames.back().map_or(0, |f| f.0));
        tracing::debug!("window {start}-{end}: top {top} smoothed {conf:.2}");
        let mut events = Vec::new();
        if conf >= self.cfg.threshold {
            match &mut self.run {
                Some(r) if r.index == top => {
                    r.end = end;
                    r.hops += 1;
                    r.confidence = r.confidence.max(conf);
                }
                _ => {
                    events.extend(self.close_run());
                    self.run = Some(Run { index: top, start, end, hops: 1, confidence: conf });
                }
            }
        } else {
            events.extend(self.close_run());
        }
        Ok(events)
    }

    fn close_run(&mut self) -> Option<SignEvent> {
        self.close_run_with(self.cfg.min_hops)
    }

    fn close_run_with(&mut self, min_hops: usize) -> Option<SignEvent> {
        let r = self.run.take()?;
        (r.hops >= min_hops).then(|| SignEvent {
            label: self.model().labels()[r.index].clone(),
            index: r.index,
            confidence: r.confidence,
            start_frame: r.start,
            end_frame: r.end,
        })
    }
}

/// The most probable class of `probs` and its probability (the first of equals).
fn top_class(probs: &[f32]) -> (usize, f32) {
    probs.iter().enumerate().fold((0, f32::MIN), |b, (i, &p)| if p > b.1 { (i, p) } else { b })
}
