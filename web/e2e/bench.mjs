#!/usr/bin/env node
// The UI's figures for `make bench` (scripts/bench/run.sh runs it against the bench server), in
// Chromium through playwright-core. Prints one JSON object as its last line:
//
//   ui_open_10k_ms            navigate to a session of 10,000 stored events → its last item visible
//   ui_flood_longest_task_ms  the longest main-thread task while 1,000 events/s stream in
//   ui_js_gzip_kib            the bundle's JavaScript, gzipped, without the lazily loaded terminal
//   ui_edit_form_ms           on an agent's page (loaded afresh), "Edit" clicked → its form filled in
//                             (the agent, the user's logins and the server's harnesses and limits
//                             fetched; the form's memory field holds the agent's value)
//
//   AGENTHOLD_URL=… AGENTHOLD_TOKEN=<server admin> node web/e2e/bench.mjs
import { chromium } from 'playwright-core';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { randomBytes } from 'node:crypto';

const here = dirname(fileURLToPath(import.meta.url));
const URL_ = (process.env.AGENTHOLD_URL ?? 'http://127.0.0.1:7700').replace(/\/$/, '');
const TOKEN = process.env.AGENTHOLD_TOKEN;
const log = (...a) => console.error('[ui-bench]', ...a);

async function rest(method, path, body, token = TOKEN) {
  const r = await fetch(`${URL_}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

async function waitTurn(session, token, turns = 1, timeoutMs = 300000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await rest('GET', `/api/v1/sessions/${session}`, undefined, token);
    const r = await rest('GET', `/api/v1/sessions/${session}/events?after=${Math.max(0, s.last_seq - 5)}`, undefined, token);
    const ends = r.events.filter((e) => e.type === 'turn_end').length;
    if (ends >= 1 && turns === 1) return s.last_seq;
    if (Date.now() > deadline) throw new Error('the turn did not end');
    await new Promise((ok) => setTimeout(ok, 500));
  }
}

// The bundle: every JavaScript file index.html loads up front (not the terminal's chunks).
function bundleGzipKib() {
  const dist = resolve(here, '../dist');
  const html = readFileSync(resolve(dist, 'index.html'), 'utf8');
  const entry = [...html.matchAll(/src="\/assets\/([^"]+\.js)"/g)].map((m) => m[1]);
  const files = readdirSync(resolve(dist, 'assets')).filter((f) => f.endsWith('.js') && !/^(xterm|addon-fit)/.test(f));
  let total = 0;
  for (const f of new Set([...entry, ...files])) total += gzipSync(readFileSync(resolve(dist, 'assets', f)), { level: 9 }).length;
  return Math.round((total / 1024) * 10) / 10;
}

const run = randomBytes(3).toString('hex');
const username = `bench-ui-${run}`;
const password = `bench-ui-password-${run}`;
await rest('POST', '/api/v1/users', { username, password });
const login = await fetch(`${URL_}/api/v1/auth/login`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ username, password }),
});
const csrf = (await login.json()).csrf_token;
const cookie = login.headers.get('set-cookie').split(';')[0];
const tokenRes = await fetch(`${URL_}/api/v1/tokens`, {
  method: 'POST',
  headers: { 'content-type': 'application/json', cookie, 'x-csrf-token': csrf },
  body: JSON.stringify({ name: 'bench' }),
});
const userToken = (await tokenRes.json()).token;

const agent = await rest('POST', '/api/v1/agents', { name: `ui-bench-${run}`, harness: 'fake' }, userToken);
// 10,000 stored events of mixed kinds: a message and a tool call (call + update) per step.
const steps = 3333;
const script = Array.from({ length: steps }, (_, i) => `text Step ${i}: reading **file ${i}**.\ntool read Reading src/file${i}.rs`).join('\n');
const big = await rest('POST', `/api/v1/agents/${agent.id}/sessions`, {}, userToken);
await rest('POST', `/api/v1/sessions/${big.id}/prompt`, { text: script }, userToken);
const lastSeq = await waitTurn(big.id, userToken);
log(`session of ${lastSeq} events stored`);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic'],
});
const context = await browser.newContext({ baseURL: URL_, viewport: { width: 1280, height: 900 } });
await context.addCookies([{ name: cookie.split('=')[0], value: cookie.split('=').slice(1).join('='), url: URL_ }]);
const page = await context.newPage();
await page.goto('/');
await page.getByRole('heading', { name: 'Agents' }).waitFor();

// Open: navigate, then wait for the last event applied and the last item on screen.
const opens = [];
for (let i = 0; i < 3; i++) {
  const t0 = Date.now();
  await page.goto(`/agents/${agent.id}/sessions/${big.id}`);
  await page.waitForFunction(
    (n) => {
      const logEl = document.querySelector('.log');
      if (!logEl || Number(logEl.dataset.cursor) < n) return false;
      const last = logEl.querySelector('.item-turn_end');
      if (!last) return false;
      const r = last.getBoundingClientRect();
      const box = logEl.getBoundingClientRect();
      return r.bottom <= box.bottom + 2 && r.top >= box.top - 2;
    },
    lastSeq,
    { timeout: 120000, polling: 'raf' },
  );
  opens.push(Date.now() - t0);
  log(`open ${i + 1}: ${opens[i]} ms`);
}
const ui_open_10k_ms = Math.min(...opens);

// The edit form: from the agent's page, freshly loaded each time (nothing cached in the page).
const edits = [];
for (let i = 0; i < 3; i++) {
  await page.goto(`/agents/${agent.id}`);
  const edit = page.getByRole('link', { name: 'Edit' });
  await edit.waitFor();
  const t0 = Date.now();
  await edit.click();
  await page.waitForFunction(() => {
    const memory = document.querySelector('input[name="limits.memory_mib"]');
    return !!memory && memory.value !== '';
  }, undefined, { timeout: 30000, polling: 'raf' });
  edits.push(Date.now() - t0);
  log(`edit form ${i + 1}: ${edits[i]} ms`);
}
const ui_edit_form_ms = Math.min(...edits);

// Flood: 1,000 events/s for 5 s; the longest main-thread task meanwhile.
const flood = await rest('POST', `/api/v1/agents/${agent.id}/sessions`, {}, userToken);
await page.goto(`/agents/${agent.id}/sessions/${flood.id}`);
await page.locator('[data-status="live"]').waitFor();
// Every task of the page's main thread, from Chromium's trace (the longtask API only reports
// tasks over 50 ms).
await browser.startTracing(page, { categories: ['devtools.timeline', 'disabled-by-default-devtools.timeline'] });
await rest('POST', `/api/v1/sessions/${flood.id}/prompt`, { text: 'flood 5000 1000\ntext done' }, userToken);
await page.locator('.item-turn_end').waitFor({ timeout: 120000 });
await page.waitForTimeout(300);
const trace = JSON.parse((await browser.stopTracing()).toString('utf8'));
const events = trace.traceEvents ?? trace;
const mains = new Set(
  events.filter((e) => e.name === 'thread_name' && e.args?.name === 'CrRendererMain').map((e) => `${e.pid}:${e.tid}`),
);
const tasks = events.filter((e) => e.name === 'RunTask' && e.ph === 'X' && mains.has(`${e.pid}:${e.tid}`)).map((e) => e.dur / 1000);
tasks.sort((a, b) => b - a);
if (process.env.UI_BENCH_DEBUG) {
  const all = events.filter((e) => e.name === 'RunTask' && e.ph === 'X' && mains.has(`${e.pid}:${e.tid}`)).sort((a, b) => b.dur - a.dur);
  for (const top of all.slice(0, 3)) {
    const inside = events.filter((e) => e.ph === 'X' && e.tid === top.tid && e.ts >= top.ts && e.ts + (e.dur ?? 0) <= top.ts + top.dur && e !== top);
    const by = {};
    for (const e of inside) by[e.name] = (by[e.name] ?? 0) + e.dur / 1000;
    log(`task ${(top.dur / 1000).toFixed(1)} ms:`, JSON.stringify(Object.entries(by).sort((a, b) => b[1] - a[1]).slice(0, 8).map(([k, v]) => `${k} ${v.toFixed(1)}`)));
  }
}
const ui_flood_longest_task_ms = Math.round(tasks[0] ?? 0);
log(`main-thread tasks during the flood: ${tasks.length}; longest ${tasks.slice(0, 5).map((t) => t.toFixed(1)).join(', ')} ms`);
await browser.close();

const ui_js_gzip_kib = bundleGzipKib();
console.log(JSON.stringify({ ui_open_10k_ms, ui_flood_longest_task_ms, ui_js_gzip_kib, ui_edit_form_ms }));
