// What every browser check shares: the server admin's API (AGENTHOLD_TOKEN), a fresh user per
// test (isolation: its own personal workspace, nothing left over from other tests), more users
// and more signed-in browser contexts when a test needs them (`newUser`, `signedInAs`), signing
// in through the page, an accessibility check (axe-core injected: no serious or critical
// violation on any page checked, and no control without an accessible name), screenshots (light
// and dark) into .dev/ui-screenshots/ (SCREENSHOTS overrides), and pages that fail their test on
// any page error or Content-Security-Policy violation.
//
// The API helpers the flows use (the page's own fetch with its cookie and CSRF token, a session's
// events, a fake agent with a session, the prompt box) are in helpers.ts and exported here too.
import { test as base, expect, request, type APIRequestContext, type Browser, type BrowserContext, type Page } from '@playwright/test';
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';

export * from './helpers';

const axeSource: string = createRequire(import.meta.url)('axe-core').source;
const SHOTS = process.env.SCREENSHOTS ?? fileURLToPath(new URL('../../../.dev/ui-screenshots/', import.meta.url));

export interface User {
  id: string;
  username: string;
  password: string;
  workspaceId: string;
}

/** Makes a user with the admin's token: a fresh name and password, its own personal workspace. */
export async function makeUser(admin: APIRequestContext, prefix = 'ui'): Promise<User> {
  const username = `${prefix}-${randomBytes(4).toString('hex')}`;
  const password = `pw-${randomBytes(12).toString('hex')}`;
  const r = await admin.post('/api/v1/users', { data: { username, password } });
  expect(r.status(), await r.text()).toBe(201);
  const made = await r.json();
  return { id: made.id, username, password, workspaceId: made.personal_workspace_id };
}

/**
 * Deletes every agent in the workspaces `user` administers, with their sandboxes: a test's
 * sandboxes would otherwise outlive it (by design), and a few runs of the suite fill the shared
 * Docker engine (each container holds a kernel keyring of the remapped root; the quota is 200).
 * A schedule of a deleted agent runs no more.
 */
export async function deleteAgentsOf(user: User, baseURL: string) {
  const ctx = await request.newContext({ baseURL });
  try {
    const login = await ctx.post('/api/v1/auth/login', { data: { username: user.username, password: user.password } });
    expect(login.status(), await login.text()).toBe(200);
    const headers = { 'x-csrf-token': (await login.json()).csrf_token };
    const me = await (await ctx.get('/api/v1/me')).json();
    const mine = new Set(me.workspaces.filter((w: any) => w.role === 'admin').map((w: any) => w.workspace_id));
    const listed = await ctx.get('/api/v1/agents');
    expect(listed.status(), await listed.text()).toBe(200);
    const agents = (await listed.json()).agents.filter((a: any) => mine.has(a.workspace_id));
    for (const a of agents) {
      const r = await ctx.delete(`/api/v1/agents/${a.id}`, { headers });
      expect([204, 404], `deleting agent ${a.name}: ${r.status()} ${await r.text()}`).toContain(r.status());
    }
  } finally {
    await ctx.dispose();
  }
}

/** Page errors and CSP violations of `page`, collected into `into`. */
export function watchProblems(page: Page, into: string[]) {
  page.on('pageerror', (e) => into.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/.test(m.text())) into.push(`CSP: ${m.text()}`);
  });
}

/** Opens another browser context signed in as `user` (its problems fail the test at its end). */
export type SignedInAs = (user: User, options?: { viewport?: { width: number; height: number } }) => Promise<Page>;

export const test = base.extend<{ admin: APIRequestContext; user: User; problems: string[]; newUser: (prefix?: string) => Promise<User>; signedInAs: SignedInAs }>({
  admin: async ({ baseURL }, use) => {
    const token = process.env.AGENTHOLD_TOKEN;
    if (!token) throw new Error('AGENTHOLD_TOKEN is not set (set -a; . .dev/env; set +a)');
    const ctx = await request.newContext({ baseURL, extraHTTPHeaders: { authorization: `Bearer ${token}` } });
    await use(ctx);
    await ctx.dispose();
  },
  user: async ({ admin, baseURL }, use) => {
    const user = await makeUser(admin);
    await use(user);
    await deleteAgentsOf(user, baseURL!);
  },
  newUser: async ({ admin }, use) => {
    await use((prefix?: string) => makeUser(admin, prefix));
  },
  problems: async ({ page }, use) => {
    const problems: string[] = [];
    watchProblems(page, problems);
    await use(problems);
    expect(problems, 'page errors or CSP violations').toEqual([]);
  },
  signedInAs: async ({ browser }, use) => {
    const opened: { context: BrowserContext; problems: string[] }[] = [];
    await use(async (user, options) => {
      const { context, page } = await openContext(browser, options);
      const problems: string[] = [];
      watchProblems(page, problems);
      opened.push({ context, problems });
      await signIn(page, user);
      return page;
    });
    for (const { context } of opened) await context.close();
    expect(opened.flatMap((o) => o.problems), 'page errors or CSP violations (other contexts)').toEqual([]);
  },
});
export { expect };

async function openContext(browser: Browser, options?: { viewport?: { width: number; height: number } }) {
  const context = await browser.newContext({ baseURL: test.info().project.use.baseURL, viewport: options?.viewport ?? { width: 1280, height: 900 } });
  return { context, page: await context.newPage() };
}

export async function signIn(page: Page, user: User) {
  await page.goto('/login');
  await page.getByLabel('Username').fill(user.username);
  await page.getByLabel('Password').fill(user.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('navigation', { name: 'Main' })).toBeVisible();
}

/** Controls without an accessible name (axe names most; this also catches a `summary`). */
async function unlabelled(page: Page): Promise<string[]> {
  return page.evaluate(() =>
    [...document.querySelectorAll('button, input, select, textarea, a[href], summary')]
      .filter((el) => {
        if (el.closest('.xterm')) return false;
        const by = el.getAttribute('aria-labelledby');
        const name =
          el.getAttribute('aria-label') ||
          (by && document.getElementById(by)?.textContent) ||
          el.closest('label')?.textContent ||
          (el.id && document.querySelector(`label[for="${el.id}"]`)?.textContent) ||
          (['INPUT', 'SELECT', 'TEXTAREA'].includes(el.tagName) ? '' : el.textContent);
        return !name || !name.trim();
      })
      .map((el) => el.outerHTML.slice(0, 120)),
  );
}

/**
 * axe-core on the page as it is: fails on serious or critical violations (the terminal's own
 * xterm.js DOM aside), and on a control without a name; then screenshots, light and dark
 * (`<name>.png` and `<name>-dark.png`).
 */
export async function checkPage(page: Page, name: string) {
  // Evaluated through the devtools protocol: the page's CSP (no inline script) stays untouched.
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(axeSource);
  const result: any = await page.evaluate(async () =>
    (window as any).axe.run({ exclude: [['.xterm']] }, { resultTypes: ['violations'], runOnly: ['wcag2a', 'wcag2aa', 'best-practice'] }),
  );
  const bad = result.violations
    .filter((v: any) => v.impact === 'serious' || v.impact === 'critical')
    .map((v: any) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 3).map((n: any) => n.target.join(' ')).join(', ')}`);
  expect(bad, `accessibility of ${name}`).toEqual([]);
  expect(await unlabelled(page), `controls without a name on ${name}`).toEqual([]);
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.screenshot({ path: `${SHOTS}/${name}-dark.png`, fullPage: false });
  await page.emulateMedia({ colorScheme: 'light' });
}
