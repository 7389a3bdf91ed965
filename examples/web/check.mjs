// Drive the page in Debian's Chromium (headless, through puppeteer-core; nothing downloads a
// browser) the way a person would: pick a model file, then each recording, and write what the
// page shows as JSON, with a screenshot. The page is served from this directory on 127.0.0.1.
//
// usage: node check.mjs --model M.onnx --recordings A.jsonl,B.jsonl --out page.json
//          [--bad-model FILE] [--bad-recording FILE] [--screenshot page.png]
// CHROMIUM names the browser (default /usr/bin/chromium).
import { createServer } from "node:http";
import { readFile, writeFile } from "node:fs/promises";
import { extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import puppeteer from "puppeteer-core";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith("--") ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []),
);
for (const required of ["model", "recordings", "out"]) {
  if (!args[required]) throw new Error(`--${required} is required`);
}
const root = fileURLToPath(new URL(".", import.meta.url));
const types = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css", ".wasm": "application/wasm", ".json": "application/json" };

const server = createServer(async (req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, "http://x").pathname)).replace(/^(\.\.[/\\])+/, "");
  const file = join(root, path === "/" ? "index.html" : path);
  if (!resolve(file).startsWith(resolve(root))) return res.writeHead(403).end();
  try {
    const body = await readFile(file);
    res.writeHead(200, { "content-type": types[extname(file)] ?? "application/octet-stream" }).end(body);
  } catch {
    res.writeHead(404).end();
  }
});
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
const url = `http://127.0.0.1:${server.address().port}/index.html`;

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const report = { console: [], recordings: [] };
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 900, height: 720 });
  page.on("console", (m) => report.console.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => report.console.push(`pageerror: ${e.message}`));
  await page.goto(url, { waitUntil: "load" });
  let done = 0;
  const pick = async (input, file) => {
    const handle = await page.$(`#${input}`);
    await handle.uploadFile(resolve(file));
    done += 1;
    await page.waitForFunction((n) => Number(document.body.dataset.done ?? 0) >= n, { timeout: 60000 }, done);
    return page.evaluate(() => {
      const m = document.getElementById("message");
      return m.hidden ? "" : m.textContent;
    });
  };
  if (args["bad-model"]) report.bad_model = await pick("model", args["bad-model"]);
  report.model_message = await pick("model", args.model);
  report.model_status = await page.$eval("#model-status", (e) => e.textContent);
  for (const [i, file] of args.recordings.split(",").entries()) {
    const message = await pick("recording", file);
    const shown = await page.evaluate(() => ({
      rows: [...document.querySelectorAll("#results tbody tr")].map((r) => ({ label: r.dataset.label, probability: Number(r.dataset.probability), text: r.cells[1].textContent })),
      tokens: document.getElementById("tokens").hidden ? null : document.getElementById("tokens").textContent,
      detail: document.getElementById("output-detail").textContent,
    }));
    report.recordings.push({ file, message, ...shown });
    if (i === 0 && args.screenshot) await page.screenshot({ path: args.screenshot, fullPage: true });
  }
  if (args["bad-recording"]) report.bad_recording = await pick("recording", args["bad-recording"]);
} finally {
  await browser.close();
  server.close();
}
await writeFile(args.out, JSON.stringify(report, null, 2));
console.log(`chromium: ${report.recordings.length} recordings classified on ${url}`);
