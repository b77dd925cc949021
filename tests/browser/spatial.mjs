// The spatial browser check, run by tests/tests/spatial_browser.rs against a live server.
//
// 1. /spatial: the live viewer shows the episode the test streams (caption, score) and draws it.
// 2. /spatial/solve: the viewer draws the task's movable object where its label says (pixel
//    check against the object's colour), a mouse drag moves it onto the goal region, the pixels
//    follow it, and Submit shows the server's verdict.
// Prints one JSON line with what it saw; exits 0 only when everything held and the page logged
// no console error and threw no page error.
//
// Environment: BASE_URL, DIFFICULTY, SEED, OBJECT (the movable object's id), COLOR ("r,g,b" in
// 0..1); CHROMIUM (default /usr/bin/chromium); SCREENSHOT_DIR (optional).

import { join } from 'node:path';
import { requireEnv, runInChromium, watchErrors } from './common.mjs';

const BASE_URL = requireEnv('BASE_URL');
const DIFFICULTY = requireEnv('DIFFICULTY');
const SEED = requireEnv('SEED');
const OBJECT = requireEnv('OBJECT');
const COLOR = requireEnv('COLOR').split(',').map(Number);
const TIMEOUT_MS = 30_000;

const seen = {
  ok: false,
  live_caption: null,
  live_score: null,
  live_object_drawn: null,
  drawn_before: null,
  ground_before: null,
  preview: null,
  drawn_after: null,
  left_behind: null,
  verdict: null,
  console_errors: [],
  page_errors: [],
  error: null,
};

// Chroma (r, g, b over their sum): lighting changes brightness, much less the hue.
const chroma = ([r, g, b]) => {
  const sum = r + g + b || 1;
  return [r / sum, g / sum, b / sum];
};
const distance = (a, b) => Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);
// The object's colour, as opposed to the grey ground and the light background (shading and
// specular light wash colours out a little, hence the loose bound).
const looksLikeObject = (pixel) =>
  distance(chroma(pixel), chroma(COLOR)) < distance(chroma(pixel), [1 / 3, 1 / 3, 1 / 3]) &&
  distance(chroma(pixel), chroma(COLOR)) < 0.2;

// The canvas pixel under a CSS point of the scene view (preserveDrawingBuffer keeps it readable).
const pixelAt = (page, x, y) =>
  page.evaluate(
    ([x, y]) => {
      const canvas = document.querySelector('[data-testid=scene-canvas]');
      const copy = document.createElement('canvas');
      copy.width = canvas.width;
      copy.height = canvas.height;
      const g = copy.getContext('2d');
      g.drawImage(canvas, 0, 0);
      const ratio = canvas.width / canvas.clientWidth;
      const d = g.getImageData(Math.round(x * ratio), Math.round(y * ratio), 1, 1).data;
      return [d[0] / 255, d[1] / 255, d[2] / 255];
    },
    [x, y],
  );

// A label's anchor in CSS pixels of the scene view (data-x/data-y), and on the page.
const anchor = async (page, testid) => {
  const label = page.locator(`[data-testid="${testid}"]`);
  await label.waitFor({ state: 'attached', timeout: TIMEOUT_MS });
  const x = Number(await label.getAttribute('data-x'));
  const y = Number(await label.getAttribute('data-y'));
  const box = await page.locator('[data-testid=scene-canvas]').boundingBox();
  return { x, y, pageX: box.x + x, pageY: box.y + y };
};

// Waits until the object's colour is drawn under its label's anchor. The first frames may come
// before the canvas has its layout size (labels move then), so the anchor is read again each time.
const objectDrawnAt = async (page, testid) => {
  const deadline = Date.now() + TIMEOUT_MS;
  for (;;) {
    const at = await anchor(page, testid);
    const pixel = await pixelAt(page, at.x, at.y);
    if (looksLikeObject(pixel)) return { at, pixel, drawn: true };
    if (Date.now() > deadline) return { at, pixel, drawn: false };
    await page.waitForTimeout(200);
  }
};

await runInChromium('spatial', seen, async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  watchErrors(page, seen);

  // 1. The live viewer.
  await page.goto(`${BASE_URL}/spatial`);
  const caption = page.locator('[data-testid=scene-caption]');
  await caption.waitFor({ timeout: TIMEOUT_MS });
  seen.live_caption = await caption.textContent();
  const liveScore = page.locator('[data-testid=live-score]');
  await liveScore.waitFor({ timeout: TIMEOUT_MS });
  seen.live_score = await liveScore.textContent();
  seen.live_object_drawn = (await objectDrawnAt(page, `label-${OBJECT}`)).drawn;

  // 2. A person solves a task.
  await page.goto(`${BASE_URL}/spatial/solve?difficulty=${DIFFICULTY}&seed=${SEED}`);
  await page.locator('[data-testid=task-id]').filter({ hasText: `d${DIFFICULTY}-s${SEED}` }).waitFor({ timeout: TIMEOUT_MS });
  const before = await objectDrawnAt(page, `label-${OBJECT}`);
  const start = before.at;
  seen.pixel_before = before.pixel;
  seen.drawn_before = before.drawn;
  const goal = await anchor(page, 'goal-0');
  seen.ground_before = looksLikeObject(await pixelAt(page, goal.x, goal.y));

  await page.mouse.move(start.pageX, start.pageY);
  await page.mouse.down();
  await page.mouse.move(goal.pageX, goal.pageY, { steps: 12 });
  await page.mouse.up();
  await page.waitForFunction(
    () => Number(document.querySelector('[data-testid=preview-score]')?.textContent) >= 0.95,
    null,
    { timeout: TIMEOUT_MS },
  );
  seen.preview = Number(await page.locator('[data-testid=preview-score]').textContent());
  seen.drawn_after = (await objectDrawnAt(page, `label-${OBJECT}`)).drawn;
  seen.left_behind = looksLikeObject(await pixelAt(page, start.x, start.y));

  await page.locator('[data-testid=submit]').click();
  const verdict = page.locator('[data-testid=verdict-score]');
  await verdict.waitFor({ timeout: TIMEOUT_MS });
  seen.verdict = await verdict.textContent();
  if (process.env.SCREENSHOT_DIR) {
    await page.screenshot({ path: join(process.env.SCREENSHOT_DIR, 'spatial-solve.png') });
  }
  seen.ok =
    seen.drawn_before &&
    !seen.ground_before &&
    seen.drawn_after &&
    !seen.left_behind &&
    seen.live_object_drawn &&
    seen.console_errors.length === 0 &&
    seen.page_errors.length === 0;
}, { stackLines: Infinity });
