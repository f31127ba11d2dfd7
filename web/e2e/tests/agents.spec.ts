// The shell and the agents' pages: signing in and out (a reload keeps the session and its CSRF
// token; no token in storage), the main navigation with the keyboard alone, creating an agent,
// the observed state in the list and the overview (asleep, awake, asleep, an error with its
// reason), and the harness log panel.
import { checkPage, expect, newAgentWithSession, pageApi, signIn, test } from './fixtures';

test('sign in, the agents list, sign out and in again keeps working after a reload', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  await expect(page.getByRole('heading', { name: 'Agents' })).toBeVisible();
  // After a reload the page has only the cookie: /me gives the CSRF token back, so changes work.
  await page.reload();
  await expect(page.getByRole('heading', { name: 'Agents' })).toBeVisible();
  const t = await pageApi(page, 'POST', '/api/v1/tokens', { name: 'after-reload' });
  expect(t.token, 'a change after a reload works').toMatch(/^ah_/);
  const stored = await page.evaluate(() => JSON.stringify(localStorage) + document.cookie);
  expect(stored, 'no token in storage or a readable cookie').not.toContain('ah_');
  expect(stored).not.toContain('agenthold_session');
  await checkPage(page, 'agents-empty');
  await page.locator('.menu summary').click();
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL(/\/login/);
  await checkPage(page, 'login');
  // And in again, with the keyboard: Enter in the password box submits.
  await page.getByLabel('Username').fill(user.username);
  await page.getByLabel('Password').fill(user.password);
  await page.getByLabel('Password').press('Enter');
  await expect(page.getByRole('heading', { name: 'Agents' })).toBeVisible();
});

test('the main navigation works with the keyboard alone (Tab, Enter)', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  await expect(page.getByRole('heading', { name: 'Agents' })).toBeVisible();
  const nav = page.getByRole('navigation', { name: 'Main' });
  /** Tabs from where the focus is until the main nav's link `name` has it (at most 30 presses). */
  const tabTo = async (name: string) => {
    const link = nav.getByRole('link', { name, exact: true });
    for (let i = 0; i < 30; i++) {
      if (await link.evaluate((el) => el === document.activeElement)) return;
      await page.keyboard.press('Tab');
    }
    throw new Error(`the main nav's ${name} is not reachable with Tab`);
  };
  for (const [name, url, heading] of [
    ['Approvals', /\/approvals$/, 'Approvals'],
    ['Settings', /\/settings/, 'Settings'],
    ['Agents', /\/$/, 'Agents'],
  ] as const) {
    await tabTo(name);
    await page.keyboard.press('Enter');
    await expect(page).toHaveURL(url);
    await expect(page.getByRole('heading', { name: heading, exact: true })).toBeVisible();
    await expect(nav.getByRole('link', { name, exact: true })).toHaveAttribute('aria-current', 'page');
    await checkPage(page, `keyboard-nav-${name.toLowerCase()}`);
  }
});

test('create an agent from the agents page', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  await page.getByRole('link', { name: 'Create an agent' }).click();
  await page.getByLabel('Name', { exact: true }).fill('ui-made');
  await page.getByLabel('Harness').selectOption('fake');
  await checkPage(page, 'agent-new');
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  await expect(page.getByRole('heading', { name: /ui-made/ })).toBeVisible();
  await expect(page.getByText('Overview')).toBeVisible();
  await checkPage(page, 'agent-overview');
  await page.goto('/');
  await expect(page.locator('tr[data-agent="ui-made"]')).toBeVisible();
  await checkPage(page, 'agents');
});

test('the agents list and overview show the observed state: asleep, awake, asleep, and an error with its reason', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  const agent = await pageApi(page, 'POST', '/api/v1/agents', { name: 'states', harness: 'fake' });
  const broken = await pageApi(page, 'POST', '/api/v1/agents', { name: 'broken', harness: 'command', command: ['no-such-acp-agent'] });
  const state = page.locator('.facts .state');
  // A new agent is asleep, or awake when it took a sandbox started ahead (the warm pool): then sleep it.
  await page.goto(`/agents/${agent.id}`);
  await expect(state).toHaveAttribute('data-state', /^(asleep|awake)$/, { timeout: 60_000 });
  if ((await state.getAttribute('data-state')) === 'awake') {
    await page.getByRole('button', { name: 'Sleep' }).click();
    await expect(state).toHaveAttribute('data-state', 'asleep', { timeout: 60_000 });
  }
  await page.goto('/');
  await expect(page.locator('tr[data-agent="states"] .state[data-state="asleep"]')).toBeVisible();
  await page.goto(`/agents/${agent.id}`);
  await page.getByRole('button', { name: 'Wake' }).click();
  // Starting until its sandbox connects; the overview follows it without a reload.
  await expect(state).toHaveAttribute('data-state', 'awake', { timeout: 90_000 });
  await checkPage(page, 'agent-awake');
  await page.getByRole('button', { name: 'Sleep' }).click();
  await expect(state).toHaveAttribute('data-state', 'asleep', { timeout: 60_000 });
  // A harness that cannot start: the turn fails and the agent says why, in the list too.
  const session = await pageApi(page, 'POST', `/api/v1/agents/${broken.id}/sessions`, {});
  await pageApi(page, 'POST', `/api/v1/sessions/${session.id}/prompt`, { text: 'hello' });
  await page.goto(`/agents/${broken.id}/sessions/${session.id}`);
  await expect(page.locator('.item-turn_end')).toBeVisible({ timeout: 90_000 });
  await page.goto('/');
  const row = page.locator('tr[data-agent="broken"]');
  await expect(row.locator('.state[data-state="error"]')).toBeVisible();
  await expect(row.locator('.state-reason'), 'the reason shows in the list').toContainText('HARNESS_START_FAILED');
  await checkPage(page, 'agents-states');
});

test('the harness log panel shows what the running harness wrote on stderr, live', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  const { agent, session } = await newAgentWithSession(page, 'stderr', { env: { FAKEAGENT_STDERR_LINES: '3' } });
  await pageApi(page, 'POST', `/api/v1/sessions/${session.id}/prompt`, { text: 'text hello' });
  await page.goto(`/agents/${agent.id}`);
  await page.locator('.harness-log summary').click();
  await expect(page.locator('.harness-log pre', { hasText: 'fakeagent: stderr line 3 of 3' })).toBeVisible({ timeout: 60_000 });
  await expect(page.getByTestId('harness-log-facts'), 'the panel names the harness').toContainText(/harness #\d+/);
  await checkPage(page, 'agent-harness-log');
});
