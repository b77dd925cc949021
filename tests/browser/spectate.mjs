// A spectator in the browser, run by tests/tests/chess_browser.rs: nobody signed in opens the
// arena, follows its link to a chess game its owner opened to spectators, and watches the owner's
// moves (played over HTTP by the harness) and the agent's answers arrive live, on a board that
// offers no move and no owner's control.
// Prints one JSON line with what it saw; exits 0 only when everything held and the page logged
// no console error but the 401 of asking who is signed in, and threw no page error.
//
// Environment: BASE_URL, GAME (the public game's id); CHROMIUM (default /usr/bin/chromium).

import { requireEnv, runInChromium, text, watchErrors } from './common.mjs';

const BASE_URL = requireEnv('BASE_URL');
const GAME = requireEnv('GAME');
const TIMEOUT_MS = 60_000;

const seen = {
  ok: false,
  linked_from_arena: false,
  header: null,
  status: null,
  movable: null,
  owner_controls: null,
  plies_at_open: null,
  plies_watched: null,
  reloaded: null,
  failed_requests: [],
  ignored: [],
  console_errors: [],
  page_errors: [],
  error: null,
};

const plies = (page) =>
  page.evaluate(() =>
    Number(document.querySelector('[data-testid="move-list"]').getAttribute('data-plies')),
  );

await runInChromium('spectate', seen, async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  page.setDefaultTimeout(TIMEOUT_MS);
  // The app asks who is signed in; for a spectator the answer is 401, and nothing else may fail.
  // (the spectator never signs in, so that 401 is set aside as it is before any sign-in).
  watchErrors(page, seen, { signIn: true, failedRequests: true });

  await page.goto(`${BASE_URL}/arena`);
  const link = page.locator(`[data-testid="public-game"] a[href="/chess/${GAME}"]`);
  await link.waitFor();
  seen.linked_from_arena = true;
  await link.click();
  await page.waitForURL((url) => url.pathname === `/chess/${GAME}`);
  await page.locator('[data-testid="chess-game"][data-subscribed="true"]').waitFor();
  await page.evaluate(() => {
    window.__lachesisSpectatorMark = 'still here';
  });
  seen.header = await text(page.locator('.chess-game .page-head + p'));
  seen.movable = await page.getByTestId('board').getAttribute('data-movable');
  seen.owner_controls =
    (await page.getByTestId('resign').count()) + (await page.getByTestId('share').count());
  seen.plies_at_open = await plies(page);

  // The owner plays on: at least two more plies (a move and the agent's answer) arrive live.
  await page.waitForFunction(
    (n) =>
      Number(document.querySelector('[data-testid="move-list"]').getAttribute('data-plies')) >=
      n + 2,
    seen.plies_at_open,
  );
  seen.plies_watched = (await plies(page)) - seen.plies_at_open;
  seen.status = await text(page.getByTestId('status'));
  seen.reloaded = (await page.evaluate(() => window.__lachesisSpectatorMark)) !== 'still here';
  await page.waitForTimeout(300);

  seen.ok =
    seen.linked_from_arena &&
    seen.header.startsWith("A spectator's view") &&
    seen.movable === 'none' &&
    seen.owner_controls === 0 &&
    seen.plies_watched >= 2 &&
    seen.status.startsWith('Watching live') &&
    !seen.reloaded &&
    seen.failed_requests.every((r) => r.startsWith('401 GET') && r.endsWith('/api/me')) &&
    seen.console_errors.length === 0 &&
    seen.page_errors.length === 0;
});
