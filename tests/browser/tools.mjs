// The tools page check, run by tests/tests/browser.rs against a live server whose test feeds it
// real MCP episodes (the scripted solver on the reference servers).
//
// /tools shows an episode as it happens: its task, the tools offered (with their schemas), each
// call with its arguments and the server's result, and the outcome. Prints one JSON line with
// what it saw; exits 0 only when everything held and the page logged no console error and threw
// no page error.
//
// Environment: BASE_URL; CHROMIUM (default /usr/bin/chromium); SCREENSHOT_DIR (optional).

import { requireEnv, runInChromium, watchErrors } from './common.mjs';

const BASE_URL = requireEnv('BASE_URL');
const TIMEOUT_MS = 60_000;

const seen = {
  ok: false,
  task: null,
  tools_offered: null,
  schema_shown: null,
  call_name: null,
  call_result: null,
  solved: null,
  outcome: null,
  console_errors: [],
  page_errors: [],
  error: null,
};

await runInChromium('tools', seen, async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  watchErrors(page, seen);
  await page.goto(`${BASE_URL}/tools`);
  await page.locator('[data-testid=tools][data-subscribed=true]').waitFor({ timeout: TIMEOUT_MS });
  // The first episode that finishes while the page is open, with at least one call.
  const done = page
    .locator('[data-testid=tool-episode]')
    .filter({ has: page.locator('[data-testid=tool-outcome]') })
    .filter({ has: page.locator('[data-testid=tool-call]') })
    .first();
  await done.waitFor({ timeout: TIMEOUT_MS });
  seen.task = await done.locator('[data-testid=tool-task]').textContent();
  seen.tools_offered = await done.locator('summary').textContent();
  await done.locator('summary').click();
  seen.schema_shown = await done.locator('.tool-list pre').first().textContent();
  const call = done.locator('[data-testid=tool-call]').first();
  seen.call_name = await call.locator('code').first().textContent();
  seen.call_result = await call.locator('.tool-result').textContent();
  const outcome = done.locator('[data-testid=tool-outcome]');
  seen.solved = await outcome.getAttribute('data-solved');
  seen.outcome = await outcome.textContent();
  seen.ok = true;
});
