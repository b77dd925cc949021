// Reads the spatial viewer's frame rate with OBJECTS objects in headless Chromium: opens
// BASE_URL/spatial/bench?objects=N, waits SECONDS_TO_RUN seconds, then samples the page's
// frames-per-second readout (one value per second) for as long again. Prints one JSON line.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const base = process.env.BASE_URL;
const objects = Number(process.env.OBJECTS || 500);
const seconds = Number(process.env.SECONDS_TO_RUN || 8);
const userDataDir = mkdtempSync(join(tmpdir(), 'lachesis-viewer-'));
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  env: { ...process.env, HOME: userDataDir },
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(`${base}/spatial/bench?objects=${objects}`);
  await page.locator('[data-testid=fps]').waitFor();
  await page.waitForTimeout(seconds * 1000);
  const samples = [];
  for (let i = 0; i < seconds; i++) {
    samples.push(Number(await page.locator('[data-testid=fps]').textContent()));
    await page.waitForTimeout(1000);
  }
  const canvas = await page.evaluate(() => {
    const c = document.querySelector('[data-testid=scene-canvas]');
    return [c.width, c.height];
  });
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  console.log(JSON.stringify({ objects, canvas, fps_mean: Number(mean.toFixed(1)), samples }));
} finally {
  await browser.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
