// The arena end to end, run by tests/tests/browser.rs against a live server with (at least) two
// contenders in the catbot arena.
//
// 1. Page 1 opens /arena/leaderboard (no account needed), waits until its live subscription is
//    confirmed (`data-subscribed=true`) and the leaderboard has loaded (`data-counted`), and
//    records the counted votes and the number of rows.
// 2. Page 2, in a fresh browser context (a visitor who is not signed in: the page gets a visitor
//    token itself), opens /arena, deals a battle, records every text the answers show while they
//    are being written (`writing`: A's and B's, as they streamed in), waits until both answers
//    are in (`data-state=ready`), records the prompt and both answers, types a reason, votes "A is
//    better", waits for `data-state=voted` and records who A and B were.
// 3. Page 1, without a reload, must show one more counted vote within 30 s (the live update) —
//    unless the vote came back excluded by an anomaly filter, which page 2 shows and this records
//    (`excluded`); then it must show the vote in its "recent votes" list instead.
// Prints one JSON line with what it saw; exits 0 only when all of that held. The page's console
// errors and page errors are listed (the 401 of `/api/me` for a visitor when sign-in is on goes
// to `ignored`); the harness requires both lists empty.
//
// Environment:
//   BASE_URL           the server (required)
//   READY_TIMEOUT_MS   how long both answers may take (default 120000: a small CPU model)
//   LIVE_TIMEOUT_MS    how long the leaderboard may take to show the vote (default 30000)
//   READ_MS            how long the visitor reads before voting (default 3000)
//   REASON             the vote's reason (default below)
//   CHROMIUM           default /usr/bin/chromium;  SCREENSHOT_DIR: receives arena-*.png

import { requireEnv, runInChromium, shots, text, waitOrExplain, watchErrors } from './common.mjs';

const BASE_URL = requireEnv('BASE_URL');
const READY_TIMEOUT_MS = Number(process.env.READY_TIMEOUT_MS || 120_000);
const LIVE_TIMEOUT_MS = Number(process.env.LIVE_TIMEOUT_MS || 30_000);
// How long the visitor "reads" before voting: the server does not count a vote cast sooner than
// LACHESIS_ARENA_MIN_VOTE_S (default 2 s) after the answers were complete.
const READ_MS = Number(process.env.READ_MS || 3_000);
const REASON =
  process.env.REASON || 'A notices the cat is hiding and gives her a quiet, warm place first.';
const TIMEOUT_MS = 30_000;

const seen = {
  ok: false,
  subscribed: false,
  rows_before: null,
  counted_before: null,
  battle_id: null,
  state_after_deal: null,
  prompt: null,
  answer_a: null,
  answer_b: null,
  writing: null,
  reveal_a: null,
  reveal_b: null,
  vote_shown: null,
  excluded: null,
  void: null,
  counted_after: null,
  rows_after: null,
  recent_vote: null,
  live_update: false,
  reloaded: false,
  console_errors: [],
  page_errors: [],
  ignored: [],
  failed_requests: [],
  error: null,
};

const shot = shots('arena');

await runInChromium('arena', seen, async (browser) => {
  // Page 1: the leaderboard, watched live.
  const watcher = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const board = await watcher.newPage();
  // `signIn: true` files the visitor's expected 401 of `/api/me` (sign-in on) under `ignored`:
  // this script never signs in.
  watchErrors(board, seen, { signIn: true, failedRequests: true });
  await board.goto(`${BASE_URL}/arena/leaderboard`);
  const live = board.locator('[data-testid=leaderboard][data-subscribed=true][data-counted]');
  await live.waitFor({ timeout: TIMEOUT_MS });
  seen.subscribed = true;
  // Marks the document: a reload would lose the mark, so the update is seen without one.
  await board.evaluate(() => {
    window.__arenaNoReload = true;
  });
  seen.counted_before = Number(await live.getAttribute('data-counted'));
  seen.rows_before = await board.getByTestId('leaderboard-row').count();

  // Page 2: a visitor votes.
  const visitor = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await visitor.newPage();
  watchErrors(page, seen, { signIn: true, failedRequests: true });
  await page.goto(`${BASE_URL}/arena`);
  const arena = page.getByTestId('arena');
  await arena.waitFor({ timeout: TIMEOUT_MS });
  // Every distinct text an answer shows while it is still being written.
  await page.evaluate(() => {
    window.__writing = { a: [], b: [] };
    new MutationObserver(() => {
      for (const side of ['a', 'b']) {
        const shown = document.querySelector(`[data-testid=arena-writing-${side}]`);
        const texts = window.__writing[side];
        if (shown && texts[texts.length - 1] !== shown.textContent) texts.push(shown.textContent);
      }
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  await page.getByTestId('arena-new').click();
  // Dealt: answering, or already ready (or void) when the answers came fast.
  await waitOrExplain(
    page,
    page.locator('[data-testid=arena]:not([data-state=none])'),
    TIMEOUT_MS,
    'no battle was dealt',
  );
  seen.state_after_deal = await arena.getAttribute('data-state');
  seen.prompt = await text(page.getByTestId('arena-prompt'));
  await waitOrExplain(
    page,
    page.locator('[data-testid=arena][data-state=ready], [data-testid=arena][data-state=void]'),
    READY_TIMEOUT_MS,
    'the answers did not come',
  );
  if ((await arena.getAttribute('data-state')) === 'void') {
    seen.void = await text(page.getByTestId('arena-void'));
    await shot(page, 'void');
    throw new Error(`the battle was voided: ${seen.void}`);
  }
  const battleLink = page.locator('a[href^="/arena/battles/"]').first();
  seen.battle_id = Number((await battleLink.getAttribute('href')).split('/').pop());
  seen.answer_a = await text(page.getByTestId('arena-answer-a'));
  seen.answer_b = await text(page.getByTestId('arena-answer-b'));
  seen.writing = await page.evaluate(() => window.__writing);
  // Nobody is revealed before the vote.
  if ((await page.getByTestId('arena-reveal-a').count()) > 0) {
    throw new Error('contender A was revealed before the vote');
  }
  await page.getByTestId('arena-reason').fill(REASON);
  await shot(page, 'ready');
  await page.waitForTimeout(READ_MS);
  await page.getByTestId('vote-a').click();
  await waitOrExplain(
    page,
    page.locator('[data-testid=arena][data-state=voted]'),
    TIMEOUT_MS,
    'the vote was not taken',
  );
  seen.reveal_a = await text(page.getByTestId('arena-reveal-a'));
  seen.reveal_b = await text(page.getByTestId('arena-reveal-b'));
  seen.vote_shown = await text(page.getByTestId('arena-vote'));
  const excluded = page.getByTestId('arena-excluded');
  if ((await excluded.count()) > 0) seen.excluded = await text(excluded);
  await shot(page, 'voted');

  // Page 1 again, untouched: the vote arrives over the socket.
  if (seen.excluded === null) {
    const after = board.locator(
      `[data-testid=leaderboard][data-counted="${seen.counted_before + 1}"]`,
    );
    await after.waitFor({ timeout: LIVE_TIMEOUT_MS });
    seen.counted_after = Number(await after.getAttribute('data-counted'));
    // The voted contenders are on the board.
    for (const name of [seen.reveal_a, seen.reveal_b]) {
      await board
        .locator(`[data-testid=leaderboard-row][data-contender="${name.replaceAll('"', '\\"')}"]`)
        .waitFor({ timeout: TIMEOUT_MS });
    }
  } else {
    // Excluded: not counted, but the live feed still reports it.
    await board
      .locator('[data-testid=arena-recent-vote][data-counted=false]')
      .first()
      .waitFor({ timeout: LIVE_TIMEOUT_MS });
    seen.counted_after = Number(
      await board.getByTestId('leaderboard').getAttribute('data-counted'),
    );
  }
  const recent = board.getByTestId('arena-recent-vote').first();
  if ((await recent.count()) > 0) seen.recent_vote = await text(recent);
  seen.rows_after = await board.getByTestId('leaderboard-row').count();
  seen.reloaded = !(await board.evaluate(() => window.__arenaNoReload === true));
  seen.live_update = !seen.reloaded;
  await shot(board, 'leaderboard');

  const expectedCount = seen.counted_before + (seen.excluded === null ? 1 : 0);
  seen.ok =
    seen.subscribed &&
    seen.prompt.length > 0 &&
    seen.answer_a.length > 0 &&
    seen.answer_b.length > 0 &&
    seen.reveal_a.length > 0 &&
    seen.reveal_b.length > 0 &&
    seen.reveal_a !== seen.reveal_b &&
    seen.counted_after === expectedCount &&
    seen.live_update &&
    seen.console_errors.length === 0 &&
    seen.page_errors.length === 0;
});
