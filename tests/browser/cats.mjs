// The cat caretaker page end to end, for a Rust harness (tests/tests/*_browser.rs) to run against a
// live server with `lachesis_tests::browser::run_script("cats.mjs", ...)`.
//
// 1. Signs up through /login when the server asks for sign-in (the first-owner form on a fresh
//    server, else "Register"); with sign-in off it goes straight on.
// 2. Opens /cats from the navigation bar and plays the caretaker: the simulated cat's opening turn
//    is shown (behaviors with their descriptions), a message is sent (#cat-say, #cat-send) and the
//    cat's next turn comes back; then a final answer (#cat-finish) brings the verdict
//    (#cat-verdict .score) with the hidden need revealed.
// 3. Plays the cat: the hidden need is shown, the behavior checklist is listed, two behaviors
//    (the need's own when marked) are ticked and sent, and the model's caretaker turn appears.
// Prints one JSON line with what it saw; exits 0 only when all of that held and the page logged
// no console error (other than the 401 of `/api/me` before sign-in) and threw no page error.
//
// Environment:
//   BASE_URL            the server (required)
//   USERNAME, PASSWORD, TEAM
//                       the account signed up when sign-in is on (defaults: a fresh name,
//                       "a long enough password", no team / "<username>-team" for a first owner)
//   SAY, FINAL          the caretaker's message and final answer (defaults below)
//   SOUND               the cat's sound (default "mrrp")
//   BEHAVIORS           how many behaviors the checklist must list (default 35)
//   REPLY_TIMEOUT_MS    how long to wait for a reply or the verdict (default 180000: the model
//                       may answer slowly on a CPU)
//   CHROMIUM            default /usr/bin/chromium;  SCREENSHOT_DIR: receives cats-*.png

import { join } from 'node:path';
import { accountFromEnv, requireEnv, runInChromium, signUp, watchErrors } from './common.mjs';

const BASE_URL = requireEnv('BASE_URL');
const ACCOUNT = accountFromEnv('cats');
const SAY =
  process.env.SAY || 'I kneel down, check her water bowl and food dish, and offer fresh water.';
const FINAL =
  process.env.FINAL ||
  'She needs fresh water, a meal and a calm warm spot; if it goes on I take her to the vet.';
const SOUND = process.env.SOUND || 'mrrp';
const BEHAVIORS = Number(process.env.BEHAVIORS || 35);
const REPLY_TIMEOUT_MS = Number(process.env.REPLY_TIMEOUT_MS || 180_000);
const TIMEOUT_MS = 30_000;

const seen = {
  ok: false,
  auth: null,
  signed_in: false,
  caretaker: {
    session_cat_turns: 0,
    described: false,
    opening: [],
    cat_turns_after_send: 0,
    caretaker_turns: 0,
    finished_early: false,
    score_text: null,
    score: null,
    matched: [],
    judge_text: null,
    revealed_need: null,
    controls_gone: false,
  },
  cat: {
    need: null,
    category: null,
    behaviors_listed: 0,
    ticked: [],
    sound: null,
    sent_turn: [],
    caretaker_reply: null,
    caretaker_turns: 0,
  },
  console_errors: [],
  page_errors: [],
  ignored: [],
  failed_requests: [],
  error: null,
};

const count = (page, selector) => page.locator(selector).count();

// What the page is waited for, each once no request is in flight (or an error shows).
const ready = ({ kind, arg }) => {
  if (document.querySelector('#cat-error')) return true;
  const root = document.querySelector('[data-testid="cats"]');
  if (root?.dataset.busy !== 'false') return false;
  const n = (selector) => document.querySelectorAll(selector).length;
  switch (kind) {
    case 'role':
      return root.dataset.role === arg;
    case 'checklist':
      return root.dataset.role === 'cat' && n('#cat-behaviors input[type=checkbox]') > 0;
    case 'cat-turn':
      return n('#cat-transcript .turn-cat') > arg || n('#cat-verdict') > 0;
    case 'verdict':
      return n('#cat-verdict .score') > 0;
    case 'caretaker-turn':
      return n('#cat-transcript .turn-caretaker') > arg;
    default:
      return false;
  }
};

// Waits for `kind`; an error the page shows instead is thrown with its text.
async function settle(page, kind, arg = null, timeout = REPLY_TIMEOUT_MS) {
  await page.waitForFunction(ready, { kind, arg }, { timeout });
  if ((await count(page, '#cat-error')) > 0) {
    throw new Error(`the page says: ${(await page.locator('#cat-error').textContent()).trim()}`);
  }
}

await runInChromium('cats', seen, async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  page.setDefaultTimeout(TIMEOUT_MS);
  watchErrors(page, seen, { signIn: true, failedRequests: true });

  await signUp(page, seen, BASE_URL, ACCOUNT);
  await page.getByRole('link', { name: 'Cats', exact: true }).click();
  await page.waitForURL((url) => url.pathname === '/cats');

  // --- the person is the caretaker ------------------------------------------------------------
  const c = seen.caretaker;
  await page.locator('#cat-role-caretaker').click();
  await settle(page, 'role', 'caretaker', TIMEOUT_MS);
  c.session_cat_turns = await count(page, '#cat-transcript .turn-cat');
  // The behaviors list loads beside the session: the descriptions come once it has.
  await page
    .waitForFunction(() => {
      const shown = [...document.querySelectorAll('#cat-transcript .turn-cat .behavior')];
      return shown.length > 0 && shown.every((b) => b.querySelector('.muted'));
    })
    .catch(() => {});
  c.opening = await page.$$eval('#cat-transcript .turn-cat .behavior', (items) =>
    items.map((b) => ({
      behavior: b.dataset.behavior,
      description: b.querySelector('.muted')?.textContent.replace(/^\s*—\s*/, '').trim() ?? null,
    })),
  );
  c.described = c.opening.length > 0 && c.opening.every((b) => b.description);

  await page.locator('#cat-say').fill(SAY);
  await page.locator('#cat-send').click();
  await settle(page, 'cat-turn', c.session_cat_turns);
  c.cat_turns_after_send = await count(page, '#cat-transcript .turn-cat');
  c.finished_early = (await count(page, '#cat-verdict')) > 0;
  if (!c.finished_early) {
    await page.locator('#cat-say').fill(FINAL);
    await page.locator('#cat-finish').click();
    await settle(page, 'verdict');
  }
  c.caretaker_turns = await count(page, '#cat-transcript .turn-caretaker');
  c.score_text = (await page.locator('#cat-verdict .score').textContent()).trim();
  c.score = Number(await page.locator('#cat-verdict .score').getAttribute('data-score'));
  c.matched = await page.$$eval('#cat-verdict .matched li', (items) =>
    items.map((i) => i.textContent.trim()),
  );
  c.judge_text = (await page.locator('#cat-verdict .judge-text').textContent()).trim();
  c.revealed_need = await page
    .locator('#cat-verdict .scenario-need')
    .textContent()
    .then((t) => t.trim())
    .catch(() => null);
  c.controls_gone = (await count(page, '#cat-say')) === 0;
  if (process.env.SCREENSHOT_DIR) {
    await page.screenshot({ path: join(process.env.SCREENSHOT_DIR, 'cats-caretaker.png'), fullPage: true });
  }

  // --- the person is the cat ------------------------------------------------------------------
  const k = seen.cat;
  await page.locator('#cat-role-cat').click();
  await settle(page, 'checklist', null, TIMEOUT_MS);
  k.need = (await page.locator('#cat-scenario .scenario-need').textContent()).trim();
  k.category = (await page.locator('#cat-scenario .scenario-category').textContent()).trim();
  k.behaviors_listed = await count(page, '#cat-behaviors input[type=checkbox]');
  const before = await count(page, '#cat-transcript .turn-caretaker');
  // Two behaviors: the need's own (marked) first, then any.
  const candidates = await page.$$eval('#cat-behaviors .behavior-option', (labels) =>
    labels
      .map((l) => ({ value: l.querySelector('input').value, hint: l.classList.contains('hint') }))
      .sort((a, b) => Number(b.hint) - Number(a.hint))
      .map((o) => o.value),
  );
  k.ticked = candidates.slice(0, 2);
  for (const value of k.ticked) {
    const quoted = value.replace(/["\\]/g, '\\$&');
    await page.locator(`#cat-behaviors input[type=checkbox][value="${quoted}"]`).check();
  }
  await page.locator('#cat-sound').fill(SOUND);
  k.sound = SOUND;
  await page.locator('#cat-send').click();
  await settle(page, 'caretaker-turn', before);
  k.caretaker_turns = await count(page, '#cat-transcript .turn-caretaker');
  k.sent_turn = await page.$$eval('#cat-transcript .turn-cat', (turns) => {
    const last = turns[turns.length - 1];
    return last ? [...last.querySelectorAll('.behavior')].map((b) => b.dataset.behavior) : [];
  });
  k.caretaker_reply = (
    await page.locator('#cat-transcript .turn-caretaker .turn-text').last().textContent()
  ).trim();
  if (process.env.SCREENSHOT_DIR) {
    await page.screenshot({ path: join(process.env.SCREENSHOT_DIR, 'cats-cat.png'), fullPage: true });
  }
  await page.waitForTimeout(300);

  seen.ok =
    c.session_cat_turns > 0 &&
    c.described &&
    (c.cat_turns_after_send > c.session_cat_turns || c.finished_early) &&
    c.caretaker_turns >= 1 &&
    /^\d+ %$/.test(c.score_text) &&
    c.score >= 0 &&
    c.score <= 1 &&
    Boolean(c.revealed_need) &&
    c.controls_gone &&
    Boolean(k.need) &&
    k.behaviors_listed === BEHAVIORS &&
    k.ticked.length === 2 &&
    k.ticked.every((b) => k.sent_turn.includes(b)) &&
    k.caretaker_turns > before &&
    Boolean(k.caretaker_reply) &&
    seen.console_errors.length === 0 &&
    seen.page_errors.length === 0;
});
