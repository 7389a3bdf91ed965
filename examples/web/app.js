// The page: load a model, read a recording (or the camera), run the model, show the top signs.
import * as ort from "./node_modules/onnxruntime-web/dist/ort.min.mjs";
import { GROUPS, InputError, POINTS, greedyTokens, readModelCard, readRecording, topSigns } from "./signflow.js";

// One wasm thread: multi-threaded wasm needs a cross-origin-isolated page, which a plain static
// server does not give.
ort.env.wasm.numThreads = 1;
ort.env.wasm.wasmPaths = new URL("./node_modules/onnxruntime-web/dist/", import.meta.url).href;

const $ = (id) => document.getElementById(id);
/** The loaded model: { session, card }. */
let model = null;

function message(text) {
  $("message").textContent = text;
  $("message").hidden = !text;
}

async function loadModel(file) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  const card = readModelCard(bytes);
  const session = await ort.InferenceSession.create(bytes, { executionProviders: ["wasm"] });
  if (!session.inputNames.includes("landmarks")) {
    throw new InputError("this model takes prepared features (`infer export-onnx --input features`); export it with the default `--input landmarks` for this page");
  }
  model = { session, card };
  const kind = card.task === "ctc" ? "continuous (CTC)" : "classifier";
  $("model-status").textContent = `${file.name}: ${card.model.kind} ${kind}, ${card.labels.length} classes, ${card.preprocess.window}-frame window`;
}

/** Run the model on `frames` frames of landmarks ([frames, 543, 3], NaN = missing). */
async function recognize(frames, data, source) {
  if (!model) throw new InputError("load a model first");
  const feeds = {
    landmarks: new ort.Tensor("float32", data, [1, frames, POINTS, 3]),
    lengths: new ort.Tensor("int64", BigInt64Array.of(BigInt(frames)), [1]),
  };
  const out = await model.session.run(feeds);
  const used = Number(out.frames.data[0]);
  const { labels } = model.card;
  const body = $("results").tBodies[0];
  body.replaceChildren();
  if (model.card.task === "ctc") {
    const tokens = greedyTokens(out.log_probs.data, labels.length, used, labels);
    $("output-title").textContent = "Recognized sequence";
    $("tokens").textContent = tokens.length ? tokens.join(" ") : "(nothing recognized)";
    $("tokens").hidden = false;
    $("results").hidden = true;
  } else {
    $("output-title").textContent = "Top signs";
    for (const s of topSigns(out.probabilities.data, labels, 5)) {
      const row = body.insertRow();
      row.dataset.label = s.label;
      row.dataset.probability = String(s.probability);
      row.insertCell().textContent = s.label;
      const p = row.insertCell();
      p.className = "p";
      p.textContent = s.probability.toFixed(4);
      const bar = row.insertCell();
      bar.className = "bar";
      bar.appendChild(document.createElement("span")).style.width = `${(100 * s.probability).toFixed(1)}%`;
    }
    $("tokens").hidden = true;
    $("results").hidden = false;
  }
  if (used === 0) message("no frame of the recording shows any landmark the model uses");
  $("output-detail").textContent = `${source}: ${frames} frames, ${used} model frames`;
  $("output").hidden = false;
}

/**
 * Run `task`, showing its error (an InputError as it is, anything else as a failure); the
 * body's `data-done` counts finished tasks (what a test waits for).
 */
async function guarded(task) {
  message("");
  try {
    await task();
  } catch (e) {
    message(e instanceof InputError ? e.message : `failed: ${e.message ?? e}`);
  } finally {
    document.body.dataset.done = String(Number(document.body.dataset.done ?? 0) + 1);
  }
}

$("model").addEventListener("change", (ev) =>
  guarded(async () => {
    model = null;
    $("model-status").textContent = "no model loaded";
    const file = ev.target.files[0];
    if (file) await loadModel(file);
  }),
);

$("recording").addEventListener("change", (ev) =>
  guarded(async () => {
    const file = ev.target.files[0];
    if (!file) return;
    let rec;
    try {
      rec = readRecording(await file.text());
    } catch (e) {
      throw e instanceof InputError ? new InputError(`${file.name}: ${e.message}`) : e;
    }
    await recognize(rec.frames, rec.data, file.name);
  }),
);

// Live: MediaPipe's Holistic landmarker (fetched from its CDN: needs the network) on the camera,
// the model on a sliding window of the last `window` frames, twice a second.
$("camera").addEventListener("click", () =>
  guarded(async () => {
    if (!model) throw new InputError("load a model first");
    const vision = await import("https://cdn.jsdelivr.net/npm/@mediapipe/tasks-vision@0.10.18/vision_bundle.mjs");
    const files = await vision.FilesetResolver.forVisionTasks("https://cdn.jsdelivr.net/npm/@mediapipe/tasks-vision@0.10.18/wasm");
    const holistic = await vision.HolisticLandmarker.createFromOptions(files, {
      baseOptions: {
        modelAssetPath: "https://storage.googleapis.com/mediapipe-models/holistic_landmarker/holistic_landmarker/float16/latest/holistic_landmarker.task",
      },
      runningMode: "VIDEO",
    });
    const video = $("video");
    video.srcObject = await navigator.mediaDevices.getUserMedia({ video: true });
    video.hidden = false;
    await video.play();
    const window = model.card.preprocess.window;
    const frames = [];
    let last = 0;
    const groups = { face: "faceLandmarks", left_hand: "leftHandLandmarks", pose: "poseLandmarks", right_hand: "rightHandLandmarks" };
    const step = async (now) => {
      const result = holistic.detectForVideo(video, now);
      const row = new Float32Array(POINTS * 3).fill(NaN);
      let offset = 0;
      for (const [group, count] of GROUPS) {
        const pts = result[groups[group]]?.[0];
        if (pts && pts.length === count) pts.forEach((p, k) => row.set([p.x, p.y, p.z], 3 * (offset + k)));
        offset += count;
      }
      frames.push(row);
      if (frames.length > window) frames.shift();
      if (now - last > 500 && frames.length > 0) {
        last = now;
        const data = new Float32Array(frames.length * POINTS * 3);
        frames.forEach((f, i) => data.set(f, i * POINTS * 3));
        await guarded(() => recognize(frames.length, data, "camera"));
      }
      video.requestVideoFrameCallback((t) => step(t));
    };
    video.requestVideoFrameCallback((t) => step(t));
  }),
);
