// The browser end-to-end check, run by tests/tests/browser.rs against a live server.
//
// Signs in through the form, opens the run's dashboard, waits for the live socket, posts scored
// groups with the team's API token, and waits until the reward chart and the groups table grow
// without a reload. Prints one JSON line with what it saw; exits 0 only when everything held and
// the page logged no console error and threw no page error.
//
// Environment: BASE_URL, USERNAME, PASSWORD, RUN, TOKEN; CHROMIUM (default /usr/bin/chromium);
// SCREENSHOT_DIR, when set, receives a full-page screenshot of the dashboard.

import { join } from 'node:path';
import { requireEnv, runInChromium, signIn, watchErrors } from './common.mjs';

const BASE_URL = requireEnv('BASE_URL');
const USERNAME = requireEnv('USERNAME');
const PASSWORD = requireEnv('PASSWORD');
const RUN = requireEnv('RUN');
const TOKEN = requireEnv('TOKEN');
const GROUPS = 3;
const TIMEOUT_MS = 30_000;

const seen = {
  ok: false,
  signed_in: false,
  live: false,
  subscribed: false,
  texts_shown: false,
  invite_code: null,
  before: null,
  after: null,
  reloaded: null,
  posted: 0,
  console_errors: [],
  page_errors: [],
  ignored: [],
  error: null,
};

// A scored group as an Atropos environment posts it, with chat messages for the table's texts.
const group = (i) => ({
  tokens: [
    [1, 2, 3, i],
    [1, 2, 4, i],
  ],
  masks: [
    [-100, -100, 3, i],
    [-100, -100, 4, i],
  ],
  scores: [i / GROUPS, 1 - i / GROUPS],
  messages: [
    [
      { role: 'user', content: `What is ${i} + ${i}?` },
      { role: 'assistant', content: `Answer: ${2 * i}` },
    ],
    [
      { role: 'user', content: `What is ${i} + ${i}?` },
      { role: 'assistant', content: `Answer: ${2 * i + 1}` },
    ],
  ],
});

// What the dashboard shows: points over every reward line, and table rows.
const snapshot = (page) =>
  page.evaluate(() => {
    const paths = [...document.querySelectorAll('[data-testid="reward-chart"] path[data-points]')];
    return {
      series: paths.length,
      points: paths.reduce((sum, p) => sum + Number(p.getAttribute('data-points')), 0),
      rows: document.querySelectorAll('[data-testid="groups-table"] [data-testid="group-row"]').length,
    };
  });

await runInChromium('e2e', seen, async (browser) => {
  const page = await browser.newPage();
  page.setDefaultTimeout(TIMEOUT_MS);
  watchErrors(page, seen, { signIn: true });

  // The app loads at its root; from there on every move is client-side routing, as a person
  // clicking through it would do.
  await page.goto(`${BASE_URL}/`);
  await page.getByRole('link', { name: 'Sign in' }).click();

  // Sign in through the form.
  await signIn(page, seen, { username: USERNAME, password: PASSWORD });

  // The dashboard, opened from the runs list, connected.
  await page.getByTestId('runs-table').getByRole('link', { name: RUN, exact: true }).click();
  await page.waitForURL((url) => url.pathname === `/runs/${encodeURIComponent(RUN)}`);
  await page.getByTestId('reward-chart').waitFor();
  await page.waitForFunction(
    () => document.querySelector('[data-testid="live-status"]')?.textContent.trim() === 'live',
  );
  seen.live = true;
  // The run's topic is confirmed by the server: from here on every posted group is pushed.
  await page.locator('[data-testid="dashboard"][data-subscribed="true"]').waitFor();
  seen.subscribed = true;
  // Let the first history load settle, then mark the document: a reload would lose the mark.
  await page.waitForLoadState('networkidle');
  await page.evaluate(() => {
    window.__lachesisE2eMark = 'still here';
  });
  seen.before = await snapshot(page);

  for (let i = 1; i <= GROUPS; i++) {
    const response = await fetch(`${BASE_URL}/runs/${encodeURIComponent(RUN)}/scored_data`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify(group(i)),
    });
    if (!response.ok) {
      throw new Error(`POST scored_data answered ${response.status}: ${await response.text()}`);
    }
    seen.posted += 1;
  }

  await page.waitForFunction(
    ({ before, groups }) => {
      const paths = [...document.querySelectorAll('[data-testid="reward-chart"] path[data-points]')];
      const points = paths.reduce((sum, p) => sum + Number(p.getAttribute('data-points')), 0);
      const rows = document.querySelectorAll(
        '[data-testid="groups-table"] [data-testid="group-row"]',
      ).length;
      return points >= before.points + groups && rows >= before.rows + groups;
    },
    { before: seen.before, groups: GROUPS },
  );
  seen.after = await snapshot(page);
  seen.reloaded = (await page.evaluate(() => window.__lachesisE2eMark)) !== 'still here';

  // A live row carries no texts; opening it loads them from the server.
  await page.getByTestId('group-row').first().click();
  await page.locator('tr.detail pre', { hasText: `What is ${GROUPS} + ${GROUPS}?` }).first().waitFor();
  seen.texts_shown = true;
  if (process.env.SCREENSHOT_DIR) {
    await page.screenshot({ path: join(process.env.SCREENSHOT_DIR, 'dashboard.png'), fullPage: true });
  }
  // An owner hands out an invite from the settings page: the code is shown once.
  await page.getByRole('link', { name: 'Settings', exact: true }).click();
  await page.getByTestId('create-invite').first().click();
  seen.invite_code = (await page.getByTestId('invite-code').first().textContent()).trim();

  // Anything the page logs while settling after the updates still counts.
  await page.waitForTimeout(500);

  seen.ok =
    seen.live &&
    seen.subscribed &&
    seen.texts_shown &&
    Boolean(seen.invite_code) &&
    !seen.reloaded &&
    seen.after.points >= seen.before.points + GROUPS &&
    seen.after.rows >= seen.before.rows + GROUPS &&
    seen.console_errors.length === 0 &&
    seen.page_errors.length === 0;
});
