// What every browser script shares: reading its environment, launching the system Chromium,
// collecting the page's console and page errors, signing in or up through the app's forms, reading
// and waiting on the page, and printing the one JSON report the Rust harness reads
// (`lachesis_tests::browser::run_script`).
//
// playwright-core drives the system Chromium (CHROMIUM, default /usr/bin/chromium): never
// `npx playwright install` (it downloads a browser; this machine has no network for that).

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

/** The variable's value; without one, a failed report and exit status 2. */
export const requireEnv = (name) => {
  const value = process.env[name];
  if (!value) {
    console.log(JSON.stringify({ ok: false, error: `${name} is not set` }));
    process.exit(2);
  }
  return value;
};

/** The element's text, trimmed ('' when it has none). */
export const text = async (locator) => ((await locator.textContent()) ?? '').trim();

/**
 * A `shot(page, name)` that saves `<prefix>-<name>.png` of the page's viewport into SCREENSHOT_DIR,
 * and does nothing without one.
 */
export const shots = (prefix) => {
  const dir = process.env.SCREENSHOT_DIR;
  return async (page, name) => {
    if (dir) await page.screenshot({ path: join(dir, `${prefix}-${name}.png`) });
  };
};

/**
 * Waits for `locator`; when it does not come, the error names what the page shows as its alert
 * (the server's message for a refused request).
 */
export const waitOrExplain = async (page, locator, timeout, what) => {
  try {
    await locator.waitFor({ timeout });
  } catch (err) {
    const alert = page.locator('[role=alert]');
    const shown = (await alert.count()) > 0 ? await text(alert.first()) : 'no error shown';
    throw new Error(`${what} (page says: ${shown}): ${String(err).split('\n')[0]}`);
  }
};

// Quiet on a closed network (no update, sync or component downloads); Playwright supplies its own
// profile directory.
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * Runs `body(browser)` in a headless Chromium whose HOME is a fresh temporary folder (`name` goes
 * into its name), records what it throws in `seen.error` (the first `stackLines` lines of the
 * stack), closes the browser, prints `seen` as one JSON line and exits 0 only when `seen.ok`.
 */
export async function runInChromium(name, seen, body, { stackLines = 3 } = {}) {
  const profile = mkdtempSync(join(tmpdir(), `lachesis-${name}-`));
  let browser;
  try {
    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      headless: true,
      args: CHROMIUM_ARGS,
      env: { ...process.env, HOME: profile },
    });
    await body(browser);
  } catch (err) {
    seen.error = String(
      err && err.stack ? err.stack.split('\n').slice(0, stackLines).join(' | ') : err,
    );
  } finally {
    if (browser) await browser.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  }
  // The report can pass a pipe's 64 KiB (an arena's streamed answers, snapshot by snapshot), and
  // an exit right after a write to a full pipe cuts what is still queued: exit once it is written.
  await new Promise((resolve) => process.stdout.write(`${JSON.stringify(seen)}\n`, resolve));
  process.exit(seen.ok ? 0 : 1);
}

// Before sign-in the app asks `/api/me` and is told 401 (that is how it learns nobody is signed
// in); Chromium logs every non-2xx fetch as a console error. Only that one is expected, and only
// until the script has signed in.
let signedIn = false;
const expectedBeforeSignIn = (text) =>
  text.includes('Failed to load resource') && text.includes('401');

/**
 * Collects the page's console errors in `seen.console_errors` and its page errors in
 * `seen.page_errors`. With `signIn`, the 401 of `/api/me` before sign-in goes to `seen.ignored`
 * instead; with `failedRequests`, every answer of 400 and more is listed in
 * `seen.failed_requests` (which request a "Failed to load resource" error was about).
 */
export function watchErrors(page, seen, { signIn = false, failedRequests = false } = {}) {
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    const text = msg.text();
    if (signIn && !signedIn && expectedBeforeSignIn(text)) seen.ignored.push(text);
    else seen.console_errors.push(text);
  });
  page.on('pageerror', (err) => seen.page_errors.push(String(err)));
  if (failedRequests) {
    page.on('response', (r) => {
      if (r.status() >= 400) {
        seen.failed_requests.push(`${r.status()} ${r.request().method()} ${r.url()}`);
      }
    });
  }
}

// Waits until the form has let the user in and the navigation bar names them.
async function signedInAs(page, seen, username) {
  await page.waitForURL((url) => !url.pathname.startsWith('/login'));
  await page.getByTestId('nav-user').filter({ hasText: username }).waitFor();
  signedIn = true;
  seen.signed_in = true;
}

/** Signs in an existing account through the login form the page shows. */
export async function signIn(page, seen, { username, password }) {
  await page.getByTestId('login-username').fill(username);
  await page.getByTestId('login-password').fill(password);
  await page.getByTestId('login-submit').click();
  await signedInAs(page, seen, username);
}

/**
 * The account a script signs up when sign-in is on: USERNAME (default: `prefix` and the time),
 * PASSWORD (default "a long enough password") and TEAM (default none).
 */
export const accountFromEnv = (prefix) => ({
  username: process.env.USERNAME || `${prefix}${Date.now().toString(36)}`,
  password: process.env.PASSWORD || 'a long enough password',
  team: process.env.TEAM || '',
});

/**
 * Signs `account` up through /login when the server at `baseUrl` asks for sign-in at all
 * (`seen.auth`: 'on' or 'off'): the first-owner form on a fresh server (team: `team` or
 * "<username>-team"), else "Register" (with `team` when given). With sign-in off it opens the
 * app's root.
 */
export async function signUp(page, seen, baseUrl, { username, password, team }) {
  const state = await (await page.request.get(`${baseUrl}/api/auth/state`)).json();
  seen.auth = state.enabled ? 'on' : 'off';
  if (!state.enabled) {
    signedIn = true;
    await page.goto(`${baseUrl}/`);
    return;
  }
  await page.goto(`${baseUrl}/login`);
  if (state.needs_first_owner) {
    await page.getByTestId('setup-username').fill(username);
    await page.getByTestId('setup-password').fill(password);
    await page.getByTestId('setup-team').fill(team || `${username}-team`);
    await page.getByTestId('setup-submit').click();
  } else {
    await page.getByRole('button', { name: 'Register' }).click();
    await page.getByTestId('login-username').fill(username);
    await page.getByTestId('login-password').fill(password);
    if (team) await page.getByTestId('login-team').fill(team);
    await page.getByTestId('login-submit').click();
  }
  await signedInAs(page, seen, username);
}
