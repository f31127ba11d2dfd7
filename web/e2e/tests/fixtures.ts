// What every browser check shares: the server admin's API (AGENTHOLD_TOKEN), a fresh user per
// test (isolation: its own personal workspace, nothing left over from other tests), signing in
// through the page, an accessibility check (axe-core injected: no serious or critical violation
// on any page checked), screenshots into .dev/ui-screenshots/ (SCREENSHOTS overrides), and a
// page that fails its test on any page error or Content-Security-Policy violation.
import { test as base, expect, request, type APIRequestContext, type Page } from '@playwright/test';
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';

const axeSource: string = createRequire(import.meta.url)('axe-core').source;
const SHOTS = process.env.SCREENSHOTS ?? fileURLToPath(new URL('../../../.dev/ui-screenshots/', import.meta.url));

export interface User {
  id: string;
  username: string;
  password: string;
  workspaceId: string;
}

export const test = base.extend<{ admin: APIRequestContext; user: User; problems: string[] }>({
  admin: async ({ baseURL }, use) => {
    const token = process.env.AGENTHOLD_TOKEN;
    if (!token) throw new Error('AGENTHOLD_TOKEN is not set (set -a; . .dev/env; set +a)');
    const ctx = await request.newContext({ baseURL, extraHTTPHeaders: { authorization: `Bearer ${token}` } });
    await use(ctx);
    await ctx.dispose();
  },
  user: async ({ admin }, use) => {
    const username = `ui-${randomBytes(4).toString('hex')}`;
    const password = `pw-${randomBytes(12).toString('hex')}`;
    const r = await admin.post('/api/v1/users', { data: { username, password } });
    expect(r.status(), await r.text()).toBe(201);
    const made = await r.json();
    await use({ id: made.id, username, password, workspaceId: made.personal_workspace_id });
  },
  problems: async ({ page }, use) => {
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error' && /Content Security Policy|Refused to/.test(m.text())) problems.push(`CSP: ${m.text()}`);
    });
    await use(problems);
    expect(problems, 'page errors or CSP violations').toEqual([]);
  },
});
export { expect };

export async function signIn(page: Page, user: User) {
  await page.goto('/login');
  await page.getByLabel('Username').fill(user.username);
  await page.getByLabel('Password').fill(user.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('navigation', { name: 'Main' })).toBeVisible();
}

/** axe-core on the page as it is: fails on serious or critical violations; then a screenshot. */
export async function checkPage(page: Page, name: string) {
  // Evaluated through the devtools protocol: the page's CSP (no inline script) stays untouched.
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(axeSource);
  const result: any = await page.evaluate(async () => (window as any).axe.run(document, { resultTypes: ['violations'], runOnly: ['wcag2a', 'wcag2aa', 'best-practice'] }));
  const bad = result.violations
    .filter((v: any) => v.impact === 'serious' || v.impact === 'critical')
    .map((v: any) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 3).map((n: any) => n.target.join(' ')).join(', ')}`);
  expect(bad, `accessibility of ${name}`).toEqual([]);
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });
}
