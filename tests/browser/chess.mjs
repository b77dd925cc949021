// The chess board end to end, run by tests/tests/chess_browser.rs against a live server.
//
// Opens /chess from the navigation bar, reads the agent's yardstick line, starts a game as White, plays e2-e4 by clicking, waits
// for the agent's reply over the live socket, plays two more legal moves picked from the board's
// destination dots (one by dragging, one by clicking), replays and flips the board, resigns,
// then reads the review (rewards per agent move), rates a move and checks the PGN export.
// Last, a game as Black opens with the agent's move on a board turned round.
// Prints one JSON line with what it saw; exits 0 only when everything held and the page logged
// no console error and threw no page error.
//
// Environment: BASE_URL; CHROMIUM (default /usr/bin/chromium); SCREENSHOT_DIR, when set,
// receives screenshots of the board and the review.

import { join } from 'node:path';
import { requireEnv, runInChromium, watchErrors } from './common.mjs';

const BASE_URL = requireEnv('BASE_URL');
// The agent searches before it answers; a debug-built server on a busy machine is slow.
const TIMEOUT_MS = 60_000;

const seen = {
  ok: false,
  game: null,
  agent_version: null,
  agent_rating: null,
  dots_for_e2: [],
  first_reply: null,
  moves_played: [],
  dragged: false,
  last_move_squares: 0,
  replay_shows_e4: false,
  flipped_corner: null,
  socket_moves_sent: 0,
  plies_before_resign: 0,
  sans: [],
  status_after_resign: null,
  review_rows: 0,
  agent_moves: 0,
  rewards: [],
  rated: null,
  pgn: null,
  downloaded_pgn: null,
  eval_points: [],
  fen: null,
  listed_in_lobby: false,
  as_black: null,
  reloaded: null,
  console_errors: [],
  page_errors: [],
  error: null,
};

const plies = (page) =>
  page.evaluate(() =>
    Number(document.querySelector('[data-testid="move-list"]').getAttribute('data-plies')),
  );

// Waits until it is the person's turn (White) or the game is over.
const waitForTurn = (page) =>
  page.waitForFunction(() => {
    const game = document.querySelector('[data-testid="chess-game"]');
    const board = document.querySelector('[data-testid="board"]');
    return game?.dataset.over === 'true' || board?.dataset.movable === 'white';
  });

// A legal move found through the board itself: select each white piece until one shows
// destination dots. Returns [from, to] with the piece still selected.
async function pickMove(page) {
  const squares = await page.$$eval('[data-testid="board"] [data-square]', (cells) =>
    cells.filter((c) => c.querySelector('.piece.white')).map((c) => c.dataset.square),
  );
  for (const from of squares) {
    await page.click(`[data-square="${from}"]`);
    const dests = await page.$$eval('[data-testid="board"] .square.dest', (cells) =>
      cells.map((c) => c.dataset.square),
    );
    if (dests.length > 0) return [from, dests[0]];
  }
  throw new Error('no white piece has a legal move');
}

// Drags a piece with the mouse (pointer events) from one square's centre to another's.
async function drag(page, from, to) {
  const a = await page.locator(`[data-square="${from}"]`).boundingBox();
  const b = await page.locator(`[data-square="${to}"]`).boundingBox();
  await page.mouse.move(a.x + a.width / 2, a.y + a.height / 2);
  await page.mouse.down();
  await page.mouse.move(b.x + b.width / 2, b.y + b.height / 2, { steps: 8 });
  await page.mouse.up();
}

// Plays one move and waits for the server's echo and the agent's answer (or the game's end).
async function playAndWait(page, how) {
  const before = await plies(page);
  const [from, to] = await pickMove(page);
  if (how === 'drag') {
    await drag(page, from, to);
    seen.dragged = true;
  } else {
    await page.click(`[data-square="${to}"]`);
  }
  const promotion = page.getByTestId('promote-q');
  if (await promotion.isVisible().catch(() => false)) await promotion.click();
  seen.moves_played.push(`${from}${to}`);
  await page.waitForFunction(
    (n) => {
      const list = document.querySelector('[data-testid="move-list"]');
      const over = document.querySelector('[data-testid="chess-game"]')?.dataset.over === 'true';
      const now = Number(list.getAttribute('data-plies'));
      return now >= n + 2 || (over && now >= n + 1);
    },
    before,
  );
  await waitForTurn(page);
}

await runInChromium('chess', seen, async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  page.setDefaultTimeout(TIMEOUT_MS);
  watchErrors(page, seen);
  // Moves must travel over the app's one socket, not the HTTP fallback.
  page.on('websocket', (ws) =>
    ws.on('framesent', (frame) => {
      if (String(frame.payload).includes('"chess_move"')) seen.socket_moves_sent += 1;
    }),
  );

  await page.goto(`${BASE_URL}/`);
  await page.getByRole('link', { name: 'Chess', exact: true }).click();
  await page.waitForURL((url) => url.pathname === '/chess');
  seen.agent_version = (await page.getByTestId('agent-version').textContent()).trim();
  seen.agent_rating = (await page.getByTestId('agent-rating').textContent()).trim();

  await page.getByTestId('play-white').click();
  await page.waitForURL((url) => /^\/chess\/[^/]+$/.test(url.pathname));
  seen.game = decodeURIComponent(new URL(page.url()).pathname.split('/').pop());
  await page.waitForFunction(
    () => document.querySelector('[data-testid="live-status"]')?.textContent.trim() === 'live',
  );
  await page.locator('[data-testid="chess-game"][data-subscribed="true"]').waitFor();
  await page.locator('[data-testid="board"][data-movable="white"]').waitFor();
  await page.evaluate(() => {
    window.__lachesisChessMark = 'still here';
  });

  // The first move by clicking: e2 shows its two destinations, e4 plays it.
  await page.click('[data-square="e2"]');
  seen.dots_for_e2 = await page.$$eval('[data-testid="board"] .square.dest', (cells) =>
    cells.map((c) => c.dataset.square).sort(),
  );
  await page.click('[data-square="e4"]');
  seen.moves_played.push('e2e4');
  await page.waitForFunction(
    () =>
      Number(document.querySelector('[data-testid="move-list"]').getAttribute('data-plies')) >= 2,
  );
  seen.first_reply = (await page.locator('[data-testid="move"][data-ply="1"]').textContent()).trim();
  await waitForTurn(page);
  seen.last_move_squares = await page.locator('[data-testid="board"] .square.last').count();

  // Two more moves chosen from what the board offers, so the agent's replies do not matter.
  for (const how of ['drag', 'click']) {
    if ((await page.getByTestId('chess-game').getAttribute('data-over')) === 'true') break;
    await playAndWait(page, how);
  }
  if (process.env.SCREENSHOT_DIR) {
    await page.screenshot({ path: join(process.env.SCREENSHOT_DIR, 'chess-board.png') });
  }

  // Replay: the position after the first move has the pawn on e4; then back to live.
  await page.locator('[data-testid="move"][data-ply="0"]').click();
  seen.replay_shows_e4 =
    (await page.locator('[data-square="e4"] .piece').getAttribute('data-piece')) === 'P' &&
    (await page.locator('[data-square="e2"] .piece').count()) === 0;
  await page.getByTestId('replay-live').click();

  // Flip: h1 comes to the top-left corner, and back.
  await page.getByTestId('flip').click();
  seen.flipped_corner = await page
    .locator('[data-testid="board"] [data-square]')
    .first()
    .getAttribute('data-square');
  await page.getByTestId('flip').click();

  // A scripted end: resign (two steps); the server answers at once and reviews the game after,
  // and the page shows the review when the game's topic says it is done.
  seen.plies_before_resign = await plies(page);
  if ((await page.getByTestId('chess-game').getAttribute('data-over')) !== 'true') {
    await page.getByTestId('resign').click();
    await page.getByTestId('resign-confirm').click();
  }
  await page.locator('[data-testid="chess-game"][data-over="true"][data-reviewed="true"]').waitFor();
  seen.status_after_resign = (await page.getByTestId('status').textContent()).trim();
  seen.sans = await page.$$eval('[data-testid="move"]', (moves) =>
    moves.map((m) => m.textContent.trim()),
  );

  // The review: one row per agent move, each with numeric rewards.
  await page.getByTestId('review-table').waitFor();
  seen.agent_moves = await page.locator('[data-testid="move"].agent').count();
  seen.rewards = await page.$$eval('[data-testid="review-row"]', (rows) =>
    rows.map((row) => {
      const num = (id) => Number(row.querySelector(`[data-testid="${id}"]`).textContent);
      return {
        ply: Number(row.dataset.ply),
        aggression: num('reward-aggression'),
        brilliance: num('reward-brilliance'),
        soundness: num('reward-soundness'),
        total: num('reward-total'),
        mark: row.querySelector('[data-testid="reward-mark"]').textContent.trim(),
        better: row.querySelector('[data-testid="reward-better"]').textContent.trim(),
        justification: row.querySelector('.justification').textContent.trim(),
      };
    }),
  );
  seen.review_rows = seen.rewards.length;
  // The evaluation graph, when Stockfish judged: one point per agent move.
  seen.eval_points = await page.$$eval('[data-testid="eval-point"]', (points) =>
    points.map((p) => ({
      ply: Number(p.dataset.ply),
      y: Number(p.getAttribute('cy')),
      title: p.querySelector('title').textContent,
    })),
  );

  // Rate the agent's first move 4 of 5: the server stores it and the row shows it.
  if (seen.rewards.length > 0) {
    const ply = seen.rewards[0].ply;
    await page.getByTestId(`rate-${ply}-4`).click();
    await page
      .locator(`[data-testid="review-row"][data-ply="${ply}"] [data-testid="rating"][data-rating="4"]`)
      .waitFor();
    seen.rated = { ply, rating: 4 };
  }

  // Exports: the PGN from the server, and the FEN of the final position.
  await page.getByTestId('show-pgn').click();
  await page.waitForFunction(() => {
    const box = document.querySelector('[data-testid="pgn"]');
    return box && box.value.includes('[Result');
  });
  seen.pgn = await page.getByTestId('pgn').inputValue();
  // The download link saves the same annotated PGN as a file.
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByTestId('download-pgn').click(),
  ]);
  const { readFile } = await import('node:fs/promises');
  seen.downloaded_pgn = await readFile(await download.path(), 'utf8');
  seen.fen = await page.getByTestId('fen').inputValue();
  if (process.env.SCREENSHOT_DIR) {
    await page.screenshot({ path: join(process.env.SCREENSHOT_DIR, 'chess-review.png'), fullPage: true });
  }
  seen.reloaded = (await page.evaluate(() => window.__lachesisChessMark)) !== 'still here';

  // Back in the lobby, the game is listed and links back.
  await page.getByRole('link', { name: 'All games' }).click();
  await page.waitForURL((url) => url.pathname === '/chess');
  await page.locator(`[data-testid="game-row"] a[href="/chess/${seen.game}"]`).waitFor();
  seen.listed_in_lobby = true;
  if (process.env.SCREENSHOT_DIR) {
    await page.screenshot({ path: join(process.env.SCREENSHOT_DIR, 'chess-lobby.png'), fullPage: true });
  }

  // As Black: the agent has opened, the board is turned, and it is Black's move.
  await page.getByTestId('play-black').click();
  await page.waitForURL((url) => /^\/chess\/[^/]+$/.test(url.pathname) && !url.pathname.endsWith(`/${seen.game}`));
  await page.locator('[data-testid="board"][data-movable="black"]').waitFor();
  seen.as_black = {
    corner: await page.locator('[data-testid="board"] [data-square]').first().getAttribute('data-square'),
    plies: await plies(page),
    agent_opened: (await page.locator('[data-testid="move"][data-ply="0"].agent').count()) === 1,
  };
  // Anything the page logs while settling still counts.
  await page.waitForTimeout(300);

  const numeric = (r) =>
    [r.aggression, r.brilliance, r.soundness, r.total].every((v) => Number.isFinite(v));
  seen.ok =
    seen.dots_for_e2.join(',') === 'e3,e4' &&
    seen.moves_played.length >= 3 &&
    seen.review_rows > 0 &&
    seen.review_rows === seen.agent_moves &&
    seen.rewards.every(numeric) &&
    seen.pgn.includes('1. e4') &&
    seen.sans.every((san) => seen.pgn.includes(san)) &&
    seen.pgn.includes('0-1') &&
    seen.replay_shows_e4 &&
    seen.flipped_corner === 'h1' &&
    seen.listed_in_lobby &&
    seen.as_black.corner === 'h1' &&
    seen.as_black.plies === 1 &&
    seen.as_black.agent_opened &&
    !seen.reloaded &&
    seen.console_errors.length === 0 &&
    seen.page_errors.length === 0;
});
