// The terminal page: input echoed, the pty resized with the window; and a sign-in inside the
// sandbox started from the overview runs the harness's login in the terminal, after which the
// agent is marked as holding its credentials in the sandbox.
import { checkPage, expect, newAgentWithSession, pageApi, signIn, test } from './fixtures';

test('the terminal echoes input and resizes', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  const { agent } = await newAgentWithSession(page, 'term');
  await page.goto(`/agents/${agent.id}/terminal`);
  await expect(page.locator('[data-status="connected"]')).toBeVisible({ timeout: 90_000 });
  await page.locator('.xterm').click();
  await page.keyboard.type('echo hello-$((6*7))\n');
  await expect(page.locator('.xterm-rows', { hasText: 'hello-42' })).toBeVisible({ timeout: 30_000 });
  await page.setViewportSize({ width: 700, height: 500 });
  await page.waitForTimeout(500);
  await page.keyboard.type('stty size\n');
  await page.waitForFunction(() => /\n\s*\d+ \d+\s*\n/.test((document.querySelector('.xterm-rows') as HTMLElement | null)?.innerText ?? ''), null, { timeout: 15_000 });
  const rows = await page.locator('.xterm-rows').innerText();
  const sizes = [...rows.matchAll(/^\s*(\d+) (\d+)\s*$/gm)].map((m) => Number(m[2]));
  expect(sizes.length, `stty size printed: ${rows}`).toBeGreaterThan(0);
  expect(sizes[sizes.length - 1], `the terminal took the smaller size: ${sizes}`).toBeLessThan(100);
  await checkPage(page, 'terminal');
});

test('sign in inside the sandbox from the overview: the login runs in the terminal and the agent is marked', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  const { agent, session } = await newAgentWithSession(page, 'sandbox-login');
  await pageApi(page, 'POST', `/api/v1/sessions/${session.id}/prompt`, { text: 'text hello' });
  // The login methods come from the running harness's answer to initialize.
  await page.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await expect(page.locator('.item-turn_end')).toBeVisible({ timeout: 60_000 });
  await page.goto(`/agents/${agent.id}`);
  await page.getByText('Sign in inside this sandbox instead').click();
  await checkPage(page, 'agent-sandbox-login');
  await page.locator('a[href*="terminal?login="]').first().click();
  await page.waitForURL(/terminal\?login=/);
  await expect(page.locator('.xterm-rows', { hasText: 'signed in' })).toBeVisible({ timeout: 60_000 });
  await expect(page.locator('[data-status^="closed"]')).toBeVisible({ timeout: 30_000 });
  await checkPage(page, 'terminal-login');
  await page.goto(`/agents/${agent.id}`);
  await expect(page.locator('.badge', { hasText: 'credentials inside sandbox' })).toBeVisible();
});
