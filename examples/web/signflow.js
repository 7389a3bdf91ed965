// What the page does with files, apart from the page itself: read the model card an exported
// SignFlow model carries, read a recording of landmark frames, and rank a model's outputs.
// Plain functions, no DOM, so a reader can follow them against `infer`'s Rust code.

/** Landmark groups of MediaPipe Holistic in SignFlow's 543-point layout, in order. */
export const GROUPS = [
  ["face", 468],
  ["left_hand", 21],
  ["pose", 33],
  ["right_hand", 21],
];
/** Points per frame. */
export const POINTS = 543;
/** The metadata key `infer export-onnx` stores the model card under. */
export const CARD_KEY = "signflow_model_card";

/** A clear error for the page to show. */
export class InputError extends Error {}

function varint(bytes, at) {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 10; i++) {
    if (at.pos >= bytes.length) throw new InputError("the file ends inside a protobuf field");
    const b = bytes[at.pos++];
    value += (b & 0x7f) * scale;
    if (b < 0x80) return value;
    scale *= 128;
  }
  throw new InputError("a protobuf varint is longer than 10 bytes");
}

/** The top-level fields of a protobuf message: [field number, wire type, value or bytes]. */
function fields(bytes) {
  const at = { pos: 0 };
  const out = [];
  while (at.pos < bytes.length) {
    const key = varint(bytes, at);
    const [field, wire] = [Math.floor(key / 8), key % 8];
    if (wire === 0) out.push([field, wire, varint(bytes, at)]);
    else if (wire === 1 || wire === 5) at.pos += wire === 1 ? 8 : 4;
    else if (wire === 2) {
      const len = varint(bytes, at);
      if (at.pos + len > bytes.length) throw new InputError("a protobuf field runs past the end of the file");
      out.push([field, wire, bytes.subarray(at.pos, at.pos + len)]);
      at.pos += len;
    } else throw new InputError(`protobuf wire type ${wire} is not used by ONNX`);
  }
  if (at.pos !== bytes.length) throw new InputError("the file ends inside a protobuf field");
  return out;
}

/**
 * The model card in an ONNX file's metadata (ModelProto field 14, key/value entries), or an
 * InputError saying why the file is not an exported SignFlow model.
 */
export function readModelCard(bytes) {
  const text = new TextDecoder();
  let entries;
  try {
    entries = fields(bytes).filter(([f, w]) => f === 14 && w === 2);
  } catch (e) {
    throw new InputError(`not an ONNX file (${e.message}); expected a model written by \`infer export-onnx\``);
  }
  for (const [, , entry] of entries) {
    const kv = Object.fromEntries(fields(entry).map(([f, , v]) => [f, text.decode(v)]));
    if (kv[1] === CARD_KEY) {
      const card = JSON.parse(kv[2]);
      if (card.format !== "signflow-model" || !Array.isArray(card.labels)) {
        throw new InputError(`the ${CARD_KEY} metadata is not a SignFlow model card`);
      }
      return card;
    }
  }
  throw new InputError(`not a SignFlow model: the ONNX file has no ${CARD_KEY} metadata; export one with \`infer export-onnx\``);
}

function point(p, where) {
  if (p === null || p === undefined) return [NaN, NaN, NaN];
  if (!Array.isArray(p) || p.length < 2 || p.length > 3) {
    throw new InputError(`${where} is not [x, y] or [x, y, z]`);
  }
  const v = (i) => (typeof p[i] === "number" && Number.isFinite(p[i]) ? p[i] : NaN);
  const [x, y] = [v(0), v(1)];
  if (Number.isNaN(x) || Number.isNaN(y)) return [NaN, NaN, NaN];
  return [x, y, p.length === 3 ? v(2) : NaN];
}

/**
 * A recording as `infer stream --input -` reads it (one JSON frame per line: the Holistic groups
 * by name, or `landmarks` with all 543 points; null = missing) as `{frames, data}`, `data` a
 * Float32Array of [frames, 543, 3] with NaN for missing values. Errors name the line.
 */
export function readRecording(text) {
  const rows = [];
  const lines = text.split("\n");
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (!line) return;
    const where = `line ${i + 1}`;
    let frame;
    try {
      frame = JSON.parse(line);
    } catch (e) {
      throw new InputError(`${where}: not JSON (${e.message}); expected one frame object per line`);
    }
    if (frame === null || typeof frame !== "object" || Array.isArray(frame)) {
      throw new InputError(`${where}: not a frame object`);
    }
    const known = new Set(["frame", "landmarks", ...GROUPS.map(([g]) => g)]);
    const unknown = Object.keys(frame).find((k) => !known.has(k));
    if (unknown !== undefined) {
      throw new InputError(`${where}: unknown key \`${unknown}\`; expected frame, face, left_hand, pose, right_hand or landmarks`);
    }
    const row = new Float32Array(POINTS * 3).fill(NaN);
    const named = GROUPS.some(([g]) => frame[g] != null);
    if (frame.landmarks != null && named) {
      throw new InputError(`${where}: has both \`landmarks\` and named groups; expected one or the other`);
    }
    if (frame.landmarks != null) {
      if (!Array.isArray(frame.landmarks) || frame.landmarks.length !== POINTS) {
        throw new InputError(`${where}: \`landmarks\` has ${frame.landmarks?.length ?? 0} points; expected ${POINTS}`);
      }
      frame.landmarks.forEach((p, k) => row.set(point(p, `${where}: landmarks[${k}]`), 3 * k));
    } else {
      let offset = 0;
      for (const [group, count] of GROUPS) {
        const pts = frame[group];
        if (pts !== undefined && pts !== null) {
          if (!Array.isArray(pts) || pts.length !== count) {
            throw new InputError(`${where}: \`${group}\` has ${Array.isArray(pts) ? pts.length : "no"} points; expected ${count}`);
          }
          pts.forEach((p, k) => row.set(point(p, `${where}: ${group}[${k}]`), 3 * (offset + k)));
        }
        offset += count;
      }
    }
    rows.push(row);
  });
  if (rows.length === 0) throw new InputError("the recording has no frame; expected one JSON frame per line");
  const data = new Float32Array(rows.length * POINTS * 3);
  rows.forEach((r, i) => data.set(r, i * POINTS * 3));
  return { frames: rows.length, data };
}

/** The `k` most probable classes: [{label, index, probability}], most probable first. */
export function topSigns(probabilities, labels, k) {
  return Array.from(probabilities, (p, index) => ({ label: labels[index], index, probability: p }))
    .sort((a, b) => b.probability - a.probability || a.index - b.index)
    .slice(0, k);
}

/** Greedy CTC decoding of `logProbs` ([frames, classes], class 0 the blank) over `frames` frames. */
export function greedyTokens(logProbs, classes, frames, labels) {
  const tokens = [];
  let last = 0;
  for (let t = 0; t < frames; t++) {
    let best = 0;
    for (let c = 1; c < classes; c++) if (logProbs[t * classes + c] > logProbs[t * classes + best]) best = c;
    if (best !== 0 && best !== last) tokens.push(labels[best]);
    last = best;
  }
  return tokens;
}
