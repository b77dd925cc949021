// The feedback queues end to end, run by the Rust harness against a live server holding three
// queues (one per kind, two items each) that a signed-in annotator has not judged yet.
//
// For each queue in turn (rank, rate, compare) the annotator opens /feedback/{id} and works
// through every item — waiting for `data-state=item` and, after each submission, for another
// item (`data-item` changes) or for `data-state=done`:
//   rate:    `rate-4`, then `rate-2`;
//   compare: `compare-a`, then `compare-tie`;
//   rank:    ranks chosen so the last answer is best (order reversed), then the identity.
// An item that closes at a deadline (a people's round's) shows its time left: its text is
// recorded twice, 1.5 s apart, as [first, later]; an item without one records null.
// At the end it waits for the thanks (`feedback-done`) and the agreement (`feedback-alpha`) and
// records the alpha text and the export links. The judgements the page sent are recorded from the
// requests themselves.
//
// Prints one JSON line; exits 0 only when each queue reached done after exactly 2 items, showed
// its kind, sent the expected judgements, and the page logged no console error and threw no page
// error.
//
// Environment:
//   BASE_URL                               the server (required)
//   QUEUE_RANK, QUEUE_RATE, QUEUE_COMPARE  the three queues' ids (required)
//   SESSION_COOKIE                         `name=value`: the signed-in annotator's session cookie
//   ITEMS                                  items expected per queue (default 2)
//   CHROMIUM                               default /usr/bin/chromium
//   SCREENSHOT_DIR                         receives feedback-*.png (optional)

import { requireEnv, runInChromium, shots, text, waitOrExplain, watchErrors } from './common.mjs';

const BASE_URL = requireEnv('BASE_URL');
const QUEUES = {
  rank: requireEnv('QUEUE_RANK'),
  rate: requireEnv('QUEUE_RATE'),
  compare: requireEnv('QUEUE_COMPARE'),
};
const SESSION_COOKIE = requireEnv('SESSION_COOKIE');
const ITEMS = Number(process.env.ITEMS || 2);
const TIMEOUT_MS = 30_000;

const perQueue = (value) => ({ rank: value(), rate: value(), compare: value() });

const seen = {
  ok: false,
  judged: perQueue(() => 0),
  done_shown: perQueue(() => false),
  alpha: perQueue(() => null),
  kind_shown: perQueue(() => null),
  // [data-done, data-left] of the progress on each item.
  progress: perQueue(() => []),
  // Answers shown on each item.
  answers: perQueue(() => []),
  // The time left each item showed, [first reading, 1.5 s later], or null.
  deadline: perQueue(() => []),
  // The bodies of the judgements the page posted, in order.
  sent: perQueue(() => []),
  exports: perQueue(() => null),
  console_errors: [],
  page_errors: [],
  failed_requests: [],
  error: null,
};

const shot = shots('feedback');

// The judgement expected as the `index`th of a queue of `kind`, for an item of `n` answers.
const expected = (kind, index, n) => {
  if (kind === 'rate') return { kind, score: index === 0 ? 4 : 2 };
  if (kind === 'compare') return { kind, choice: index === 0 ? 'a' : 'tie' };
  const identity = [...Array(n).keys()];
  return { kind, order: index === 0 ? identity.reverse() : identity };
};

// Judges the item shown, the `index`th of the queue.
const judge = async (page, kind, index) => {
  if (kind === 'rate') {
    await page.getByTestId(index === 0 ? 'rate-4' : 'rate-2').click();
  } else if (kind === 'compare') {
    await page.getByTestId(index === 0 ? 'compare-a' : 'compare-tie').click();
  } else {
    const selects = page.getByTestId('rank-select');
    const n = await selects.count();
    // Answer i gets rank n - i (the last answer best), then rank i + 1 (the order as shown).
    for (let i = 0; i < n; i += 1) {
      await selects.nth(i).selectOption(String(index === 0 ? n - i : i + 1));
    }
    await page.getByTestId('rank-submit').click();
  }
};

// Works through one queue until it says nothing is left.
const workQueue = async (page, kind, id) => {
  const root = page.getByTestId('feedback-queue');
  const posted = [];
  const onRequest = (request) => {
    if (request.method() === 'POST' && /\/api\/feedback\/items\/\d+\/judgements$/.test(request.url())) {
      posted.push(request.postDataJSON()?.judgement ?? null);
    }
  };
  page.on('request', onRequest);
  await page.goto(`${BASE_URL}/feedback/${id}`);
  await root.waitFor({ timeout: TIMEOUT_MS });
  let last = null;
  // One more round than the items expected, so that a queue that never ends fails here.
  for (let round = 0; round <= ITEMS; round += 1) {
    const item = last === null ? '' : `:not([data-item="${last}"])`;
    await waitOrExplain(
      page,
      page.locator(
        `[data-testid=feedback-queue][data-state=done], [data-testid=feedback-queue][data-state=item]${item}`,
      ),
      TIMEOUT_MS,
      `${kind}: no ${last === null ? 'first' : 'next'} item and no end`,
    );
    if ((await root.getAttribute('data-state')) === 'done') break;
    if (round === ITEMS) throw new Error(`${kind}: still an item after ${ITEMS} judgements`);
    seen.kind_shown[kind] = await root.getAttribute('data-kind');
    last = await root.getAttribute('data-item');
    const progress = page.getByTestId('feedback-progress');
    seen.progress[kind].push([
      Number(await progress.getAttribute('data-done')),
      Number(await progress.getAttribute('data-left')),
    ]);
    if ((await text(page.getByTestId('feedback-prompt'))).length === 0) {
      throw new Error(`${kind}: item ${last} shows no prompt`);
    }
    seen.answers[kind].push(await page.getByTestId('feedback-answer').count());
    const deadline = page.getByTestId('feedback-deadline');
    if ((await deadline.count()) > 0) {
      const first = await text(deadline);
      await page.waitForTimeout(1500);
      seen.deadline[kind].push([first, await text(deadline)]);
    } else {
      seen.deadline[kind].push(null);
    }
    if (round === 0) await shot(page, `${kind}-item`);
    await judge(page, kind, round);
    seen.judged[kind] += 1;
  }
  await waitOrExplain(page, page.getByTestId('feedback-done'), TIMEOUT_MS, `${kind}: no thanks`);
  seen.done_shown[kind] = true;
  await waitOrExplain(page, page.getByTestId('feedback-alpha'), TIMEOUT_MS, `${kind}: no alpha`);
  seen.alpha[kind] = await text(page.getByTestId('feedback-alpha'));
  seen.exports[kind] = {
    pairs: await page.getByTestId('feedback-export-pairs').getAttribute('href'),
    ratings: await page.getByTestId('feedback-export-ratings').getAttribute('href'),
  };
  await shot(page, `${kind}-done`);
  page.off('request', onRequest);
  seen.sent[kind] = posted;
};

await runInChromium('feedback', seen, async (browser) => {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const split = SESSION_COOKIE.indexOf('=');
  if (split <= 0) throw new Error('SESSION_COOKIE is not a name=value pair');
  const name = SESSION_COOKIE.slice(0, split);
  const origin = new URL(BASE_URL);
  // As the server sets it. `__Host-` and `__Secure-` cookies must be Secure; Chromium refuses a
  // Secure cookie given with an http `url`, but takes it given by domain and path (the browser
  // then sends it to http://127.0.0.1 and localhost, which count as secure origins).
  await context.addCookies([
    {
      name,
      value: SESSION_COOKIE.slice(split + 1),
      domain: origin.hostname,
      path: '/',
      httpOnly: true,
      secure: /^__(Host|Secure)-/.test(name) || origin.protocol === 'https:',
      sameSite: 'Strict',
    },
  ]);
  const page = await context.newPage();
  watchErrors(page, seen, { failedRequests: true });
  for (const [kind, id] of Object.entries(QUEUES)) {
    await workQueue(page, kind, id);
  }

  const sentAsExpected = (kind) =>
    seen.sent[kind].length === ITEMS &&
    seen.sent[kind].every(
      (body, index) =>
        JSON.stringify(body) === JSON.stringify(expected(kind, index, seen.answers[kind][index])),
    );
  seen.ok =
    Object.keys(QUEUES).every(
      (kind) =>
        seen.judged[kind] === ITEMS &&
        seen.done_shown[kind] &&
        seen.kind_shown[kind] === kind &&
        (seen.alpha[kind] ?? '').length > 0 &&
        sentAsExpected(kind),
    ) &&
    seen.console_errors.length === 0 &&
    seen.page_errors.length === 0;
});
