// The protein page check, run by the Rust browser tests against a live server that plays binder
// design episodes (`lachesis serve --env protein_binder`, or a test feeding the protein topic).
//
// /protein shows each episode as a timeline (the target, then its four stages, each with its
// state, the model's arguments, the answer, the time spent and who answered) and draws the
// selected episode's latest structure in a 3D view. This script waits for an episode whose four
// stages are all done and whose outcome is shown, pins it to the viewer, and checks the canvas
// drew at least two chains and thirty residues, with pixels other than the background. Prints one
// JSON line with what it saw; exits 0 only when everything held and the page logged no console
// error and threw no page error.
//
// Environment: BASE_URL; TIMEOUT_MS (default 120000); CHROMIUM (default /usr/bin/chromium);
// SCREENSHOT_DIR (optional).

import { join } from 'node:path';
import { requireEnv, runInChromium, watchErrors } from './common.mjs';

const BASE_URL = requireEnv('BASE_URL');
const TIMEOUT_MS = Number(process.env.TIMEOUT_MS || 120_000);
const STAGES = ['target_structure', 'binder_backbone', 'binder_sequence', 'complex_evaluation'];
// Fewer lit pixels than this is no drawing (a 30-residue trace covers tens of thousands).
const MIN_LIT_PIXELS = 500;

const seen = {
  ok: false,
  episode: null,
  target: null,
  stages: null,
  states: null,
  outcome: null,
  backend_badges: null,
  refused: null,
  caption: null,
  chains: null,
  residues: null,
  lit_pixels: null,
  canvas_pixels: null,
  console_errors: [],
  page_errors: [],
  error: null,
};

// Pixels of the viewer's canvas that differ from its background (the corner pixel, which the
// fitted structure never reaches). preserveDrawingBuffer keeps the last frame readable.
const litPixels = (page) =>
  page.evaluate(() => {
    const canvas = document.querySelector('[data-testid=protein-viewer]');
    if (!canvas || !canvas.width || !canvas.height) return { lit: 0, total: 0 };
    const copy = document.createElement('canvas');
    copy.width = canvas.width;
    copy.height = canvas.height;
    const g = copy.getContext('2d');
    g.drawImage(canvas, 0, 0);
    const d = g.getImageData(0, 0, copy.width, copy.height).data;
    const [r0, g0, b0] = [d[0], d[1], d[2]];
    let lit = 0;
    for (let i = 0; i < d.length; i += 4) {
      if (Math.abs(d[i] - r0) + Math.abs(d[i + 1] - g0) + Math.abs(d[i + 2] - b0) > 24) lit += 1;
    }
    return { lit, total: copy.width * copy.height };
  });

await runInChromium('protein', seen, async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1400, height: 950 } });
  watchErrors(page, seen);
  await page.goto(`${BASE_URL}/protein`);
  await page
    .locator('[data-testid=protein][data-subscribed=true]')
    .waitFor({ timeout: TIMEOUT_MS });

  // The first episode on the page with all four stages done and its outcome shown.
  const handle = await page.waitForFunction(
    (count) => {
      for (const card of document.querySelectorAll('[data-testid=protein-episode]')) {
        const states = [...card.querySelectorAll('[data-testid=protein-stage]')].map((s) =>
          s.getAttribute('data-state'),
        );
        const finished = card.querySelector('[data-testid=protein-outcome]');
        if (finished && states.length === count && states.every((s) => s === 'done')) {
          return card.getAttribute('data-episode');
        }
      }
      return null;
    },
    STAGES.length,
    { timeout: TIMEOUT_MS, polling: 250 },
  );
  seen.episode = await handle.jsonValue();
  const card = page.locator(`[data-testid=protein-episode][data-episode="${seen.episode}"]`);
  seen.target = (await card.locator('h3').textContent())?.trim() ?? null;
  const rows = card.locator('[data-testid=protein-stage]');
  seen.stages = await rows.evaluateAll((els) => els.map((e) => e.getAttribute('data-stage')));
  seen.states = await rows.evaluateAll((els) => els.map((e) => e.getAttribute('data-state')));
  seen.outcome = (await card.locator('[data-testid=protein-outcome]').textContent())?.trim() ?? null;
  seen.backend_badges = await card
    .locator('[data-testid=protein-backend]')
    .evaluateAll((els) =>
      els.map((e) => ({ backend: e.getAttribute('data-backend'), text: e.textContent.trim() })),
    );
  seen.refused = await card.locator('[data-testid=protein-refused]').count();

  // Pin it to the viewer (newer episodes may have started), then wait for the complex.
  const select = card.locator('[data-testid=protein-select]');
  if ((await select.getAttribute('aria-pressed')) !== 'true') await select.click();
  await page
    .locator('[data-testid=protein-caption]')
    .filter({ hasText: `Episode ${seen.episode}:` })
    .waitFor({ timeout: TIMEOUT_MS });
  await page.waitForFunction(
    () => {
      const canvas = document.querySelector('[data-testid=protein-viewer]');
      return (
        canvas &&
        Number(canvas.getAttribute('data-chains')) >= 2 &&
        Number(canvas.getAttribute('data-residues')) > 29
      );
    },
    null,
    { timeout: TIMEOUT_MS, polling: 250 },
  );
  seen.caption = (await page.locator('[data-testid=protein-caption]').textContent())?.trim() ?? null;
  const canvas = page.locator('[data-testid=protein-viewer]');
  seen.chains = Number(await canvas.getAttribute('data-chains'));
  seen.residues = Number(await canvas.getAttribute('data-residues'));

  // The frame after the structure arrived may still be on its way: read a few times.
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { lit, total } = await litPixels(page);
    seen.lit_pixels = lit;
    seen.canvas_pixels = total;
    if (lit >= MIN_LIT_PIXELS || Date.now() > deadline) break;
    await page.waitForTimeout(250);
  }
  if (process.env.SCREENSHOT_DIR) {
    await page.screenshot({ path: join(process.env.SCREENSHOT_DIR, 'protein.png'), fullPage: true });
  }
  seen.ok =
    JSON.stringify(seen.stages) === JSON.stringify(STAGES) &&
    seen.states.every((s) => s === 'done') &&
    Boolean(seen.outcome) &&
    seen.backend_badges.length >= STAGES.length &&
    seen.chains >= 2 &&
    seen.residues > 29 &&
    seen.lit_pixels >= MIN_LIT_PIXELS &&
    seen.console_errors.length === 0 &&
    seen.page_errors.length === 0;
});
