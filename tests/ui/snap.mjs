// Opens pages in headless Chromium (Debian's /usr/bin/chromium) and reports what a person
// would see: every frame's text and a screenshot per step.
//
//   node tests/ui/snap.mjs < job.json > report.json
//
// job: {"out": DIR, "steps": [STEP, ...], "columns": [LABEL, ...], "viewport": [W, H]}
// STEP: {"name": "run", "url": "http://...", "wait": ["text", ...], "until": "JS expression",
//        "clicks": [{"text": "User Metadata", "wait": ["text", ...]}, ...],
//        "evaluate": "JS expression", "timeout_ms": 30000, "full_page": false,
//        "clip": {"x": 0, "y": 0, "width": W, "height": H}}   (a part of the page only)
// Each page and each click leaves DIR/NAME.png (NAME_1.png, ... after clicks); the report is
// a JSON list with one entry per snapshot: {name, url, png, frames: [{url, text}], text,
// missing: [texts never seen], value (of evaluate), console: [errors], error}.
// Waits are conditions polled until they hold or time out, never fixed pauses.
import { chromium } from 'playwright-core';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const FLAGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
const POLL_MS = 150;

async function frameTexts(page) {
  const frames = [];
  for (const frame of page.frames()) {
    try {
      const text = await frame.evaluate(() => (document.body ? document.body.innerText : ''));
      frames.push({ url: frame.url(), text });
    } catch (err) {
      frames.push({ url: frame.url(), text: '', error: String(err.message).split('\n')[0] });
    }
  }
  return frames;
}

// Texts of `wanted` not yet shown in any frame once they all appear or `timeoutMs` passes.
async function waitForTexts(page, wanted, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const all = (await frameTexts(page)).map((f) => f.text).join('\n');
    const missing = wanted.filter((text) => !all.includes(text));
    if (missing.length === 0 || Date.now() > deadline) return missing;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

async function snapshot(page, out, name, step, extra) {
  const png = join(out, `${name}.png`);
  const options = step.clip ? { clip: step.clip } : { fullPage: !!step.full_page };
  await page.screenshot({ path: png, ...options });
  const frames = await frameTexts(page);
  return { name, url: page.url(), png, frames, text: frames.map((f) => f.text).join('\n'), ...extra };
}

async function runStep(context, out, step) {
  const timeout = step.timeout_ms ?? 30000;
  const page = await context.newPage();
  const console_ = [];
  page.on('console', (m) => { if (m.type() === 'error') console_.push(m.text().slice(0, 300)); });
  page.on('pageerror', (e) => console_.push(String(e.message).slice(0, 300)));
  const reports = [];
  try {
    await page.goto(step.url);
    let missing = await waitForTexts(page, step.wait ?? [], timeout);
    let error = null;
    if (step.until) {
      try {
        await page.waitForFunction(step.until, null, { timeout, polling: POLL_MS });
      } catch (err) {
        error = `until ${step.until}: ${String(err.message).split('\n')[0]}`;
      }
    }
    const value = step.evaluate ? await page.evaluate(step.evaluate) : undefined;
    reports.push(await snapshot(page, out, step.name, step, { missing, value, console: console_, error }));
    let index = 0;
    for (const click of step.clicks ?? []) {
      index += 1;
      const { text, wait = [] } = typeof click === 'string' ? { text: click } : click;
      error = null;
      try {
        await page.getByText(text, { exact: false }).first().click({ timeout });
      } catch (err) {
        error = `click ${text}: ${String(err.message).split('\n')[0]}`;
      }
      missing = await waitForTexts(page, wait, timeout);
      reports.push(await snapshot(page, out, `${step.name}_${index}`, step, { missing, console: console_, error }));
    }
  } catch (err) {
    reports.push({ name: step.name, url: step.url, error: String(err.message).split('\n')[0], frames: [], text: '', missing: step.wait ?? [], console: console_ });
  } finally {
    await page.close();
  }
  return reports;
}

const job = JSON.parse(readFileSync(0, 'utf8'));
mkdirSync(job.out, { recursive: true });
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', headless: true, args: FLAGS,
});
try {
  const [width, height] = job.viewport ?? [1600, 1000];
  const context = await browser.newContext({ viewport: { width, height } });
  if (job.columns) {
    // The Temporal UI keeps its workflow-list columns in localStorage.
    await context.addInitScript((labels) => {
      const columns = labels.map((label) => ({ label }));
      localStorage.setItem('namespace-workflow-table-columns', JSON.stringify({ default: columns }));
    }, job.columns);
  }
  const reports = [];
  for (const step of job.steps) reports.push(...(await runStep(context, job.out, step)));
  process.stdout.write(JSON.stringify(reports));
} finally {
  await browser.close();
}
