//! Event-level evaluation of live recognition: continuous recordings ("takes") streamed frame by
//! frame through the [`StreamingRecognizer`], the sign events it reports scored against
//! reference annotations.
//!
//! A take is a recording `NAME.npy` (`.npz`, `.parquet`, `.pose`) with its annotations in
//! `NAME.events.csv` beside it (the format of [`data::takes`], which also writes synthetic
//! takes; `trainer generate-takes`):
//! ```text
//! label,start_frame,end_frame
//! hello,12,40
//! thanks,51,77
//! ```
//! one line per sign: its label (a class of the model) and its first and last frame, inclusive,
//! in the recording's frame numbers (the `frame` column of an ISLR parquet file, the row index
//! of the other formats), the signs in any order but not overlapping. A take without signs has
//! the header alone.
//!
//! Scoring, per take: a reported event and a reference sign *match* when they have the same
//! label and their frame spans overlap; matches are one-to-one, the pairs with the largest
//! overlap first. An event that matches nothing is *wrong-label* when it overlaps a reference
//! sign of another label (the confusion lists which), else *false* (a repeat of a sign already
//! matched is false); a reference that matches nothing is
//! *missed*. Over all takes: precision = matched / reported (1 when nothing was reported),
//! recall = matched / references (1 when there are none), F1 their harmonic mean. The latency of
//! a matched event is the frame the recognizer reported it at (the frame whose `push` returned
//! it; the last frame for those `finish` flushed) minus the reference's last frame, also in ms
//! at the recording's frame rate.
//!
//! ```no_run
//! use std::sync::Arc;
//! use infer::eval_stream::{evaluate, StreamEvalOptions};
//! use infer::{Predictor, PredictorOptions};
//! let model = Arc::new(Predictor::load("runs/default-20261122-193204".as_ref(), &PredictorOptions::default())?);
//! let takes = infer::eval_stream::find_takes("takes/".as_ref())?;
//! let report = evaluate(model, &takes, &StreamEvalOptions::default())?;
//! print!("{}", report.render());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use data::index::Format;
use data::{LandmarkSequence, Sample};
use serde::Serialize;

use crate::{InferError, Model, Result, SignEvent, StreamConfig, StreamingRecognizer};

pub use data::takes::{annotation_path, ANNOTATION_HEADER, ANNOTATION_SUFFIX};
/// Annotation files larger than this are refused (a take of an hour at 30 fps with a sign per
/// second is ~2 MB).
const MAX_ANNOTATION_BYTES: u64 = 64 << 20;

/// One annotated sign of a take.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reference {
    /// Its label.
    pub label: String,
    /// The model's class index of the label.
    pub index: usize,
    /// First frame.
    pub start: i64,
    /// Last frame (inclusive).
    pub end: i64,
    /// Line of the annotation file (1-based).
    pub line: usize,
}

/// A sign event with the frame it was reported at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reported {
    /// The event.
    pub event: SignEvent,
    /// The frame whose `push` returned it (the last frame for events `finish` flushed).
    pub at_frame: i64,
}

/// What became of one event or reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// An event matched to a reference sign.
    Matched,
    /// A reference sign no event matched.
    Missed,
    /// An unmatched event overlapping a reference sign of another label.
    WrongLabel,
    /// An unmatched event overlapping no reference sign of another label (in a pause, or a
    /// repeat of a sign already matched).
    False,
}

/// One row of a take's scoring: a reference, an event, or a matched pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scored {
    /// What happened.
    pub outcome: Outcome,
    /// The reference sign (matched, missed, or the one a wrong-label event overlaps most).
    pub reference: Option<Reference>,
    /// The reported event (matched, wrong-label or false).
    pub reported: Option<Reported>,
    /// Matched: reported frame minus the reference's last frame.
    pub latency_frames: Option<i64>,
}

/// Counts of a set of takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Reference signs.
    pub references: usize,
    /// Reported events.
    pub reported: usize,
    /// Matched pairs.
    pub matched: usize,
    /// References no event matched.
    pub missed: usize,
    /// Unmatched events overlapping a reference of another label.
    pub wrong_label: usize,
    /// Other unmatched events.
    pub false_events: usize,
}

impl Counts {
    /// Matched / reported (1 when nothing was reported).
    pub fn precision(&self) -> f64 {
        ratio(self.matched, self.reported)
    }

    /// Matched / references (1 when there are none).
    pub fn recall(&self) -> f64 {
        ratio(self.matched, self.references)
    }

    /// The harmonic mean of precision and recall (0 when both are 0).
    pub fn f1(&self) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        }
    }

    fn add(&mut self, o: &Counts) {
        self.references += o.references;
        self.reported += o.reported;
        self.matched += o.matched;
        self.missed += o.missed;
        self.wrong_label += o.wrong_label;
        self.false_events += o.false_events;
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

/// The scoring of one take.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TakeScore {
    /// The recording.
    pub path: PathBuf,
    /// Frames streamed.
    pub frames: usize,
    /// Its counts.
    pub counts: Counts,
    /// Every reference and event with its outcome, by frame.
    pub rows: Vec<Scored>,
}

/// Frames two inclusive spans share.
fn overlap(a: (i64, i64), b: (i64, i64)) -> i64 {
    (a.1.min(b.1) - a.0.max(b.0) + 1).max(0)
}

/// Score `reported` events against `references` (pure; see the module docs).
pub fn score(path: &Path, frames: usize, references: &[Reference], reported: &[Reported]) -> TakeScore {
    let span_r = |r: &Reference| (r.start, r.end);
    let span_e = |e: &Reported| (e.event.start_frame, e.event.end_frame);
    let mut pairs: Vec<(i64, usize, usize)> = Vec::new();
    for (ri, r) in references.iter().enumerate() {
        for (ei, e) in reported.iter().enumerate() {
            let o = overlap(span_r(r), span_e(e));
            if o > 0 && e.event.index == r.index {
                pairs.push((o, ri, ei));
            }
        }
    }
    pairs.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let (mut ref_taken, mut ev_taken) = (vec![false; references.len()], vec![false; reported.len()]);
    let mut rows = Vec::new();
    let mut counts = Counts { references: references.len(), reported: reported.len(), ..Default::default() };
    for (_, ri, ei) in pairs {
        if ref_taken[ri] || ev_taken[ei] {
            continue;
        }
        (ref_taken[ri], ev_taken[ei]) = (true, true);
        counts.matched += 1;
        let (r, e) = (&references[ri], &reported[ei]);
        rows.push(Scored {
            outcome: Outcome::Matched,
            reference: Some(r.clone()),
            reported: Some(e.clone()),
            latency_frames: Some(e.at_frame - r.end),
        });
    }
    for (r, _) in references.iter().zip(&ref_taken).filter(|(_, taken)| !**taken) {
        counts.missed += 1;
        rows.push(Scored {
            outcome: Outcome::Missed,
            reference: Some(r.clone()),
            reported: None,
            latency_frames: None,
        });
    }
    for (e, _) in reported.iter().zip(&ev_taken).filter(|(_, taken)| !**taken) {
        let covered = references
            .iter()
            .filter(|r| r.index != e.event.index)
            .map(|r| (overlap(span_r(r), span_e(e)), r))
            .filter(|(o, _)| *o > 0)
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.start.cmp(&a.1.start)));
        let outcome = if covered.is_some() { Outcome::WrongLabel } else { Outcome::False };
        match outcome {
            Outcome::WrongLabel => counts.wrong_label += 1,
            _ => counts.false_events += 1,
        }
        rows.push(Scored {
            outcome,
            reference: covered.map(|(_, r)| r.clone()),
            reported: Some(e.clone()),
            latency_frames: None,
        });
    }
    let first_frame = |s: &Scored| {
        s.reference.as_ref().map(|r| r.start).into_iter().chain(s.reported.as_ref().map(|e| e.event.start_frame)).min()
    };
    rows.sort_by_key(|s| first_frame(s).unwrap_or(i64::MAX));
    TakeScore { path: path.to_path_buf(), frames, counts, rows }
}

/// Read and check the annotations of a take: `labels` are the model's classes, `frames` the
/// recording's frame numbers (ascending). Every error names the file and line.
pub fn read_annotations(path: &Path, labels: &[String], frames: &[i64]) -> Result<Vec<Reference>> {
    let bad = |line: usize, message: String| InferError::File {
        path: path.to_path_buf(),
        message: format!("line {line}: {message}"),
    };
    let size =
        std::fs::metadata(path).map_err(|e| InferError::File { path: path.into(), message: e.to_string() })?.len();
    if size > MAX_ANNOTATION_BYTES {
        return Err(InferError::File {
            path: path.into(),
            message: format!("{size} bytes; annotation files are at most {MAX_ANNOTATION_BYTES}"),
        });
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| InferError::File { path: path.into(), message: e.to_string() })?;
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty());
    match lines.next() {
        Some((_, header)) if header == ANNOTATION_HEADER => {}
        Some((n, header)) => return Err(bad(n, format!("header `{header}`; expected `{ANNOTATION_HEADER}`"))),
        None => return Err(bad(1, format!("empty; expected the header `{ANNOTATION_HEADER}`"))),
    }
    let (first, last) = match (frames.first(), frames.last()) {
        (Some(&f), Some(&l)) => (f, l),
        _ => return Err(bad(1, "the recording has no frames".into())),
    };
    let mut refs = Vec::new();
    for (n, line) in lines {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [label, start, end] = fields[..] else {
            return Err(bad(n, format!("{} fields; expected 3 (`{ANNOTATION_HEADER}`)", fields.len())));
        };
        let frame =
            |what: &str, v: &str| v.parse::<i64>().map_err(|_| bad(n, format!("{what} `{v}` is not a frame number")));
        let (start, end) = (frame("start_frame", start)?, frame("end_frame", end)?);
        if start > end {
            return Err(bad(n, format!("start_frame {start} is after end_frame {end}")));
        }
        if start < first || end > last {
            return Err(bad(n, format!("span {start}-{end} is outside the recording's frames {first}-{last}")));
        }
        let index = labels.iter().position(|l| l == label).ok_or_else(|| {
            bad(n, format!("label `{label}` is not a sign of the model ({} signs, e.g. `{}`)", labels.len(), labels[0]))
        })?;
        refs.push(Reference { label: label.to_string(), index, start, end, line: n });
    }
    refs.sort_by_key(|r| (r.start, r.end));
    if let Some(w) = refs.windows(2).find(|w| w[1].start <= w[0].end) {
        return Err(bad(
            w[1].line,
            format!(
                "sign `{}` ({}-{}) overlaps sign `{}` of line {} ({}-{}); reference signs must not overlap",
                w[1].label, w[1].start, w[1].end, w[0].label, w[0].line, w[0].start, w[0].end
            ),
        ));
    }
    Ok(refs)
}

/// The takes at `input`: a recording (its annotation beside it), or every recording under a
/// directory that has an annotation file; sorted. An error when there is none.
pub fn find_takes(input: &Path) -> Result<Vec<PathBuf>> {
    let err = |message: String| InferError::File { path: input.to_path_buf(), message };
    if input.is_file() {
        return Ok(vec![input.to_path_buf()]);
    }
    let found: Vec<PathBuf> =
        crate::sequence_files(input)?.into_iter().filter(|p| annotation_path(p).is_file()).collect();
    if found.is_empty() {
        return Err(err(format!(
            "no recording ({}) with a `NAME{ANNOTATION_SUFFIX}` annotation file beside it",
            Format::EXTENSIONS
        )));
    }
    Ok(found)
}

/// Stream `seq` frame by frame through a fresh recognizer: every event with the frame it was
/// reported at.
pub fn stream_take(model: Arc<dyn Model>, cfg: &StreamConfig, seq: &LandmarkSequence) -> Result<Vec<Reported>> {
    let mut rec = StreamingRecognizer::new(model, cfg.clone())?;
    let mut out = Vec::new();
    let mut frame: Vec<[f32; 3]> = Vec::with_capacity(seq.points);
    for t in 0..seq.frames() {
        frame.clear();
        frame.extend((0..seq.points).map(|p| seq.at(t, p)));
        let at = i64::from(seq.frame_ids[t]);
        out.extend(rec.push(at, &frame)?.into_iter().map(|event| Reported { event, at_frame: at }));
    }
    let last = seq.frame_ids.last().map_or(0, |&f| i64::from(f));
    out.extend(rec.finish()?.into_iter().map(|event| Reported { event, at_frame: last }));
    Ok(out)
}

/// How to evaluate takes.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEvalOptions {
    /// The recognizer's settings.
    pub stream: StreamConfig,
    /// Frames per second of the recordings (for latencies in ms).
    pub fps: f64,
}

impl Default for StreamEvalOptions {
    fn default() -> Self {
        Self { stream: StreamConfig::default(), fps: 30.0 }
    }
}

/// The event-level figures of a set of takes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamEvalReport {
    /// Takes scored.
    pub takes: usize,
    /// All takes' counts.
    pub counts: Counts,
    /// Precision of the events.
    pub precision: f64,
    /// Recall of the reference signs.
    pub recall: f64,
    /// F1.
    pub f1: f64,
    /// Median latency of matched events, frames (None without matches).
    pub median_latency_frames: Option<f64>,
    /// 90th-percentile latency, frames.
    pub p90_latency_frames: Option<f64>,
    /// Median latency, ms at `fps`.
    pub median_latency_ms: Option<f64>,
    /// The frame rate used for ms.
    pub fps: f64,
    /// Wrong-label events: (reference label, reported label) -> count.
    pub confusions: Vec<(String, String, usize)>,
    /// Per take.
    pub per_take: Vec<TakeScore>,
}

impl StreamEvalReport {
    /// The report of scored takes.
    pub fn from_takes(per_take: Vec<TakeScore>, fps: f64) -> Self {
        let mut counts = Counts::default();
        let mut latencies = Vec::new();
        let mut confusions: BTreeMap<(String, String), usize> = BTreeMap::new();
        for t in &per_take {
            counts.add(&t.counts);
            for row in &t.rows {
                latencies.extend(row.latency_frames.map(|l| l as f64));
                if let (Outcome::WrongLabel, Some(r), Some(e)) = (row.outcome, &row.reference, &row.reported) {
                    *confusions.entry((r.label.clone(), e.event.label.clone())).or_default() += 1;
                }
            }
        }
        latencies.sort_by(f64::total_cmp);
        let quantile = |q: f64| {
            (!latencies.is_empty()).then(|| {
                let x = q * (latencies.len() - 1) as f64;
                let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
                latencies[lo] + (latencies[hi] - latencies[lo]) * (x - lo as f64)
            })
        };
        let median = quantile(0.5);
        let mut confusions: Vec<(String, String, usize)> =
            confusions.into_iter().map(|((a, b), n)| (a, b, n)).collect();
        confusions.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
        Self {
            takes: per_take.len(),
            precision: counts.precision(),
            recall: counts.recall(),
            f1: counts.f1(),
            counts,
            median_latency_frames: median,
            p90_latency_frames: quantile(0.9),
            median_latency_ms: median.map(|f| f * 1000.0 / fps),
            fps,
            confusions,
            per_take,
        }
    }

    /// A text summary.
    pub fn render(&self) -> String {
        let c = &self.counts;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} takes, {} reference signs, {} reported events: precision {:.3}, recall {:.3}, F1 {:.3}",
            self.takes, c.references, c.reported, self.precision, self.recall, self.f1
        );
        let _ = writeln!(
            s,
            "matched {}, missed {}, wrong label {}, false {}",
            c.matched, c.missed, c.wrong_label, c.false_events
        );
        match (self.median_latency_frames, self.p90_latency_frames, self.median_latency_ms) {
            (Some(m), Some(p90), Some(ms)) => {
                let _ = writeln!(
                    s,
                    "latency after a sign ends: median {m:.1} frames ({ms:.0} ms at {} fps), p90 {p90:.1} frames",
                    self.fps
                );
            }
            _ => s.push_str("latency: no matched events\n"),
        }
        for (r, e, n) in self.confusions.iter().take(10) {
            let _ = writeln!(s, "  {r} reported as {e}: {n}");
        }
        for t in self.per_take.iter().filter(|t| t.counts.matched < t.counts.references.max(t.counts.reported)) {
            let _ = writeln!(
                s,
                "  {}: {} of {} signs, {} events",
                t.path.display(),
                t.counts.matched,
                t.counts.references,
                t.counts.reported
            );
        }
        s
    }
}

/// Stream and score every take (see the module docs); an error names the take.
pub fn evaluate(model: Arc<dyn Model>, takes: &[PathBuf], opts: &StreamEvalOptions) -> Result<StreamEvalReport> {
    if !(opts.fps.is_finite() && opts.fps > 0.0) {
        return Err(InferError::Unsupported(format!("fps {} : expected a positive frame rate", opts.fps)));
    }
    let mut per_take = Vec::with_capacity(takes.len());
    for path in takes {
        let predictor = (*model).as_ref();
        let Sample::Landmarks(seq) = predictor.read_file(path)? else {
            return Err(InferError::File {
                path: path.clone(),
                message: "not a landmark recording ([frames, landmarks, 3]); takes are streamed as landmarks".into(),
            });
        };
        let frames: Vec<i64> = seq.frame_ids.iter().map(|&f| i64::from(f)).collect();
        let references = read_annotations(&annotation_path(path), predictor.labels(), &frames)?;
        let reported = stream_take(model.clone(), &opts.stream, &seq).map_err(|e| match e {
            InferError::Input { message, .. } => InferError::File { path: path.clone(), message },
            e => e,
        })?;
        per_take.push(score(path, seq.frames(), &references, &reported));
    }
    Ok(StreamEvalReport::from_takes(per_take, opts.fps))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(index: usize, start: i64, end: i64) -> Reference {
        Reference { label: format!("s{index}"), index, start, end, line: 2 }
    }

    fn e(index: usize, start: i64, end: i64, at: i64) -> Reported {
        Reported {
            event: SignEvent { label: format!("s{index}"), index, confidence: 0.9, start_frame: start, end_frame: end },
            at_frame: at,
        }
    }

    #[test]
    fn events_match_one_to_one_by_label_and_overlap() {
        let refs = [r(1, 0, 20), r(2, 30, 50), r(3, 60, 80), r(4, 90, 100)];
        let events = [
            e(1, 5, 18, 24),     // matched, latency 4
            e(1, 10, 22, 26),    // s1 again, smaller overlap: a false (repeated) event
            e(2, 35, 55, 58),    // matched, latency 8
            e(9, 62, 79, 83),    // over s3 with another label: wrong label (s3 missed)
            e(4, 120, 130, 133), // overlaps nothing (s4 missed): false
        ];
        let t = score(Path::new("take.npy"), 140, &refs, &events);
        let c = t.counts;
        assert_eq!((c.references, c.reported, c.matched), (4, 5, 2));
        assert_eq!((c.missed, c.wrong_label, c.false_events), (2, 1, 2));
        assert!((c.precision() - 0.4).abs() < 1e-12 && (c.recall() - 0.5).abs() < 1e-12);
        assert!((c.f1() - 2.0 * 0.4 * 0.5 / 0.9).abs() < 1e-12);
        let latencies: Vec<i64> = t.rows.iter().filter_map(|s| s.latency_frames).collect();
        assert_eq!(latencies, [4, 8]);
        // The larger overlap wins the match.
        let matched = t.rows.iter().find(|s| s.outcome == Outcome::Matched).unwrap();
        assert_eq!(matched.reported.as_ref().unwrap().event.start_frame, 5);

        let report = StreamEvalReport::from_takes(vec![t], 25.0);
        assert_eq!(report.median_latency_frames, Some(6.0));
        assert_eq!(report.median_latency_ms, Some(240.0));
        assert!(report.confusions.contains(&("s3".into(), "s9".into(), 1)), "{:?}", report.confusions);
        assert!(report.render().contains("precision 0.400, recall 0.500"), "{}", report.render());
    }

    #[test]
    fn a_take_without_signs_counts_every_event_as_false() {
        let t = score(Path::new("empty.npy"), 50, &[], &[e(1, 3, 9, 12)]);
        assert_eq!((t.counts.false_events, t.counts.precision(), t.counts.recall()), (1, 0.0, 1.0));
        let quiet = score(Path::new("empty.npy"), 50, &[], &[]);
        assert_eq!((quiet.counts.precision(), quiet.counts.recall(), quiet.counts.f1()), (1.0, 1.0, 1.0));
    }

    #[test]
    fn bad_annotations_name_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let labels: Vec<String> = ["a", "b"].map(String::from).to_vec();
        let frames: Vec<i64> = (0..100).collect();
        let read = |text: &str| {
            let p = dir.path().join("take.events.csv");
            std::fs::write(&p, text).unwrap();
            read_annotations(&p, &labels, &frames).map_err(|e| e.to_string())
        };
        let ok = read("label,start_frame,end_frame\nb,40,60\na,0,20\n\n").unwrap();
        assert_eq!(ok.iter().map(|r| (r.index, r.start, r.line)).collect::<Vec<_>>(), [(0, 0, 3), (1, 40, 2)]);
        assert!(read("label,start_frame,end_frame\n").unwrap().is_empty());
        for (text, expected) in [
            ("", "line 1: empty"),
            ("sign,from,to\n", "line 1: header `sign,from,to`"),
            (
                "label,start_frame,end_frame\na,0,20\nb,90,120\n",
                "line 3: span 90-120 is outside the recording's frames 0-99",
            ),
            ("label,start_frame,end_frame\nc,0,20\n", "line 2: label `c` is not a sign of the model"),
            ("label,start_frame,end_frame\na,0,20\nb,15,30\n", "line 3: sign `b` (15-30) overlaps sign `a` of line 2"),
            ("label,start_frame,end_frame\na,x,20\n", "line 2: start_frame `x` is not a frame number"),
            ("label,start_frame,end_frame\na,30,20\n", "line 2: start_frame 30 is after end_frame 20"),
            ("label,start_frame,end_frame\na,1\n", "line 2: 2 fields; expected 3"),
        ] {
            let err = read(text).unwrap_err();
            assert!(err.contains("take.events.csv") && err.contains(expected), "{text:?}: {err}");
        }
    }

    #[test]
    fn mutated_annotations_are_errors_naming_file_and_line_or_valid_signs() {
        let dir = tempfile::tempdir().unwrap();
        let labels: Vec<String> = ["a", "b", "sign_10"].map(String::from).to_vec();
        let frames: Vec<i64> = (5..300).collect();
        let valid = "label,start_frame,end_frame\nb,40,60\na,5,20\nsign_10,100,299\n";
        let p = dir.path().join("take.events.csv");
        let mut m = testkit::mutate::Mutator::new(11);
        let mut errors = 0;
        for _ in 0..2000 {
            std::fs::write(&p, m.mutate(valid.as_bytes())).unwrap();
            match read_annotations(&p, &labels, &frames) {
                Ok(signs) => {
                    assert!(signs.windows(2).all(|w| w[0].end < w[1].start));
                    assert!(signs.iter().all(|s| 5 <= s.start && s.start <= s.end && s.end < 300 && s.index < 3));
                }
                Err(e) => {
                    errors += 1;
                    let e = e.to_string();
                    assert!(e.contains("take.events.csv") && (e.contains("line ") || e.contains("UTF-8")), "{e}");
                }
            }
        }
        assert!(errors > 1000, "only {errors} of 2000 mutated files were refused");
    }
}
