// The judge marketplace end to end, for a Rust harness (tests/tests/*_browser.rs) to run against a
// live server with `lachesis_tests::browser::run_script("marketplace.mjs", ...)`.
//
// 1. Signs up through /login when the server asks for sign-in (the first-owner form on a fresh
//    server, else "Register"); with sign-in off it goes straight on.
// 2. Opens /marketplace from the navigation bar, waits for the live socket and the page's
//    subscription, and checks that a row is shown for every expected card.
// 3. Says it is ready (READY_FILE, and/or the TRIGGER_URL request), then waits, without reloading,
//    for a new `.feed-round` in `#market-feed` and for a budget's `.budget-available` to change.
//    Pay-to-Play rounds are the harness's job: it plays them once READY_FILE exists (or the
//    trigger asked for them). The run's budget must already exist (be funded) by then, since the
//    check is that its figure changes.
// 4. Waits (briefly) for the cards' evaluation counts to grow, then picks the changed budget and
//    reads its run's ledger (`#run-ledger .ledger-line`).
// Prints one JSON line with what it saw; exits 0 only when the cards, the live round, the budget
// change and the ledger were all seen, the page did not reload, and it logged no console error
// (other than the 401 of `/api/me` before sign-in) and threw no page error.
//
// Environment:
//   BASE_URL            the server (required)
//   USERNAME, PASSWORD, TEAM
//                       the account signed up when sign-in is on (defaults: a fresh name,
//                       "a long enough password", no team / "<username>-team" for a first owner)
//   CARDS               comma-separated slugs that must be listed (default: the seven seeded cards)
//   READY_FILE          written (the page's state as JSON) once the page is live and shows the cards
//   TRIGGER_URL         requested once ready (same origin: from the page, with its session cookie
//                       and CSRF token; with TRIGGER_TOKEN: from Node with `Authorization: Bearer`)
//   TRIGGER_METHOD      default POST;  TRIGGER_BODY: JSON text sent with it (default none)
//   ROUNDS_TIMEOUT_MS   how long to wait for the live round and the budget change (default 120000)
//   CHROMIUM            default /usr/bin/chromium;  SCREENSHOT_DIR: receives marketplace.png

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { accountFromEnv, requireEnv, runInChromium, signUp, watchErrors } from './common.mjs';

const BASE_URL = requireEnv('BASE_URL');
const ACCOUNT = accountFromEnv('market');
const CARDS = (
  process.env.CARDS ||
  'panel-chair,feline-vet,nutritionist,safety-inspector,play-therapist,llm-generalist,llm-rigorous'
)
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
const ROUNDS_TIMEOUT_MS = Number(process.env.ROUNDS_TIMEOUT_MS || 120_000);
const TIMEOUT_MS = 30_000;

const seen = {
  ok: false,
  auth: null,
  signed_in: false,
  live: false,
  cards: [],
  missing_cards: [],
  before: null,
  triggered: null,
  new_rounds: 0,
  round: null,
  budget_changes: [],
  budgets_appeared: [],
  evaluations_before: null,
  evaluations_after: null,
  cards_moved: false,
  budget_matches_feed: null,
  ledger_run: null,
  ledger_lines: 0,
  ledger_kinds: [],
  reloaded: null,
  console_errors: [],
  page_errors: [],
  ignored: [],
  failed_requests: [],
  error: null,
};

// What the page shows now: feed episodes, each budget's available text, evaluations per card.
const snapshot = (page) =>
  page.evaluate(() => {
    const budgets = {};
    for (const b of document.querySelectorAll('#market-budgets .budget[data-run]')) {
      budgets[b.dataset.run] = b.querySelector('.budget-available')?.textContent.trim() ?? null;
    }
    const rows = [...document.querySelectorAll('#market-cards .card-row[data-slug]')];
    return {
      rounds: [...document.querySelectorAll('#market-feed .feed-round')].map(
        (r) => `${r.dataset.run}/${r.dataset.episode}`,
      ),
      skipped: document.querySelectorAll('#market-feed .feed-skipped').length,
      budgets,
      evaluations: rows.reduce((sum, r) => sum + Number(r.dataset.evaluations || 0), 0),
    };
  });

// Asks for rounds, when the harness gave an address to ask.
async function trigger(page) {
  const url = process.env.TRIGGER_URL;
  if (!url) return null;
  const method = process.env.TRIGGER_METHOD || 'POST';
  const body = process.env.TRIGGER_BODY;
  if (process.env.TRIGGER_TOKEN) {
    const response = await page.request.fetch(new URL(url, BASE_URL).href, {
      method,
      headers: {
        Authorization: `Bearer ${process.env.TRIGGER_TOKEN}`,
        ...(body ? { 'Content-Type': 'application/json' } : {}),
      },
      data: body,
    });
    return response.status();
  }
  return page.evaluate(
    async ({ url, method, body }) => {
      const me = await fetch('/api/me').then((r) => (r.ok ? r.json() : {}));
      const headers = { Accept: 'application/json' };
      if (body) headers['Content-Type'] = 'application/json';
      if (me.csrf_token) headers['X-CSRF-Token'] = me.csrf_token;
      const response = await fetch(url, { method, headers, body: body || undefined });
      return response.status;
    },
    { url, method, body },
  );
}

await runInChromium('market', seen, async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.setDefaultTimeout(TIMEOUT_MS);
  watchErrors(page, seen, { signIn: true, failedRequests: true });

  await signUp(page, seen, BASE_URL, ACCOUNT);

  // The page, from the navigation bar, connected and subscribed.
  await page.getByRole('link', { name: 'Marketplace', exact: true }).click();
  await page.waitForURL((url) => url.pathname === '/marketplace');
  await page.waitForFunction(
    () => document.querySelector('[data-testid="live-status"]')?.textContent.trim() === 'live',
  );
  await page.locator('[data-testid="marketplace"][data-subscribed="true"]').waitFor();
  seen.live = true;

  // Every expected card has its row.
  await page.waitForFunction(
    (slugs) =>
      slugs.every((s) =>
        [...document.querySelectorAll('#market-cards .card-row')].some(
          (r) => r.dataset.slug === s,
        ),
      ),
    CARDS,
  ).catch(() => {});
  seen.cards = await page.$$eval('#market-cards .card-row', (rows) =>
    rows.map((r) => ({
      slug: r.dataset.slug,
      price: r.querySelector('.card-price')?.textContent.trim(),
      evaluations: Number(r.dataset.evaluations),
    })),
  );
  seen.missing_cards = CARDS.filter((s) => !seen.cards.some((c) => c.slug === s));
  // Feed and budgets have loaded (or said why not) before the "before" picture is taken.
  await page.waitForFunction(() => {
    const budgets = document.querySelector('#market-budgets');
    const loaded = budgets && !budgets.querySelector('.budgets')?.textContent.includes('Loading');
    return (loaded || budgets?.querySelector('.error')) && document.querySelector('#market-feed');
  });
  await page.evaluate(() => {
    window.__lachesisMarketMark = 'still here';
  });

  const before = await snapshot(page);
  seen.before = before;
  seen.evaluations_before = before.evaluations;
  if (process.env.READY_FILE) writeFileSync(process.env.READY_FILE, JSON.stringify(before));
  seen.triggered = await trigger(page);

  // A round arrives live: an entry the page did not have.
  await page.waitForFunction(
    (known) =>
      [...document.querySelectorAll('#market-feed .feed-round')].some(
        (r) => !known.includes(`${r.dataset.run}/${r.dataset.episode}`),
      ),
    before.rounds,
    { timeout: ROUNDS_TIMEOUT_MS },
  );
  seen.round = await page.evaluate((known) => {
    const fresh = [...document.querySelectorAll('#market-feed .feed-round')].filter(
      (r) => !known.includes(`${r.dataset.run}/${r.dataset.episode}`),
    );
    const r = fresh[0];
    const text = (sel) => r.querySelector(sel)?.textContent.trim() ?? null;
    return {
      run: r.dataset.run,
      episode: r.dataset.episode,
      choice: text('.feed-head [class*="choice-"]'),
      task: text('.feed-task'),
      cards: [...r.querySelectorAll('.paid-card')].map((c) => ({
        slug: c.dataset.slug,
        tx: c.querySelector('.tx')?.textContent.trim() ?? null,
        href: c.querySelector('a.tx')?.getAttribute('href') ?? null,
      })),
      paid: text('.feed-paid'),
      left: text('.feed-left'),
      scores: text('.feed-scores'),
      rewards: text('.feed-rewards'),
    };
  }, before.rounds);
  seen.new_rounds = (await snapshot(page)).rounds.filter((k) => !before.rounds.includes(k)).length;

  // A budget's available figure moves.
  await page
    .waitForFunction(
      (was) =>
        [...document.querySelectorAll('#market-budgets .budget[data-run]')].some((b) => {
          const now = b.querySelector('.budget-available')?.textContent.trim();
          return b.dataset.run in was && was[b.dataset.run] !== now;
        }),
      before.budgets,
      { timeout: ROUNDS_TIMEOUT_MS },
    )
    .catch(() => {});
  // The cards' statistics follow the rounds (refetched a moment after them).
  await page
    .waitForFunction(
      (was) =>
        [...document.querySelectorAll('#market-cards .card-row')].reduce(
          (sum, r) => sum + Number(r.dataset.evaluations || 0),
          0,
        ) > was,
      before.evaluations,
      { timeout: 15_000 },
    )
    .catch(() => {});
  // Let the refetch after the last event land before reading the figures.
  await page.waitForTimeout(1_500);
  const after = await snapshot(page);
  seen.evaluations_after = after.evaluations;
  seen.cards_moved = after.evaluations > before.evaluations;
  for (const [run, text] of Object.entries(after.budgets)) {
    if (!(run in before.budgets)) seen.budgets_appeared.push({ run, available: text });
    else if (before.budgets[run] !== text)
      seen.budget_changes.push({ run, before: before.budgets[run], after: text });
  }
  const newest = await page.evaluate(() => {
    const r = document.querySelector('#market-feed .feed-round');
    return r ? { run: r.dataset.run, left: r.querySelector('.feed-left')?.textContent.trim() } : null;
  });
  if (newest && newest.run in after.budgets) {
    seen.budget_matches_feed = after.budgets[newest.run] === newest.left;
  }

  // The changed budget's run ledger.
  const run = seen.budget_changes[0]?.run ?? seen.round.run;
  if (run in after.budgets) {
    const quoted = run.replace(/["\\]/g, '\\$&');
    await page.locator(`#market-budgets .budget[data-run="${quoted}"]`).click();
    await page.locator(`#run-ledger[data-run="${quoted}"] .ledger-line`).first().waitFor();
    seen.ledger_run = run;
    seen.ledger_lines = await page.locator('#run-ledger .ledger-line').count();
    seen.ledger_kinds = await page.$$eval('#run-ledger .ledger-line', (lines) => [
      ...new Set(lines.map((l) => l.dataset.kind)),
    ]);
  }
  if (process.env.SCREENSHOT_DIR) {
    await page.screenshot({ path: join(process.env.SCREENSHOT_DIR, 'marketplace.png'), fullPage: true });
  }
  seen.reloaded = (await page.evaluate(() => window.__lachesisMarketMark)) !== 'still here';
  await page.waitForTimeout(300);

  seen.ok =
    seen.missing_cards.length === 0 &&
    seen.new_rounds > 0 &&
    seen.budget_changes.length > 0 &&
    seen.ledger_lines > 0 &&
    !seen.reloaded &&
    seen.console_errors.length === 0 &&
    seen.page_errors.length === 0;
});
