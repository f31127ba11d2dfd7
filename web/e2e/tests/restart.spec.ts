// The server killed (SIGKILL: no graceful shutdown, the socket just drops) and started again in
// the middle of a turn, with the page open: the page reconnects, the turn ends one way or another
// (resumed, or reported lost), and every event is rendered once, in order. Runs in the `restart`
// project (playwright.config.ts), after every other test: restarting the server would break the
// tests running beside it. It restarts the dev stack's server (scripts/dev/server.sh start, with
// the environment of .dev/env), see server-restart.ts.
import { events, expect, logCounter, newAgentWithSession, openSession, prompt, signIn, test } from './fixtures';
import { killServer, restartable, startServer } from './server-restart';

test('kill and restart the server mid-turn with the page open: it continues without a gap or a duplicate', async ({ page, user, problems }) => {
  void problems;
  const why = restartable();
  test.skip(why !== null, why ?? '');
  await signIn(page, user);
  const { agent, session } = await newAgentWithSession(page, 'restart');
  await openSession(page, agent.id, session.id);
  await prompt(page, 'flood 1500 150\ntext after the flood');
  await page.waitForFunction(() => Number((document.querySelector('.log') as HTMLElement | null)?.dataset.applied ?? 0) > 150, null, { timeout: 60_000 });
  await killServer();
  const restarted = startServer();
  await expect(page.locator('[data-status="reconnecting"]')).toBeVisible({ timeout: 30_000 });
  await restarted;
  await expect(page.locator('[data-status="live"]')).toBeVisible({ timeout: 60_000 });
  // The turn ends one way or another (the server may resume it or report it lost).
  await expect(page.locator('[data-running]')).toHaveAttribute('data-running', 'no', { timeout: 120_000 });
  await page.waitForTimeout(1000);
  const log = await events(page, session.id);
  const last = log[log.length - 1].seq;
  await page.waitForFunction((n) => Number((document.querySelector('.log') as HTMLElement | null)?.dataset.cursor) >= n, last, { timeout: 30_000 });
  expect(await logCounter(page, 'applied'), `events applied; the log has ${last}`).toBe(last);
  const text = (await page.locator('.item-message').allInnerTexts()).join('\n');
  const nums = [...text.matchAll(/flood (\d+)/g)].map((m) => Number(m[1]));
  const inLog = log.filter((e) => e.type === 'update' && /^flood \d+$/.test(e.payload?.content?.text ?? '')).length;
  expect(inLog, 'the flood ran before the kill').toBeGreaterThan(150);
  expect(nums.length, 'rendered as many flood chunks as the log has').toBe(inLog);
  expect(nums.every((n, i) => i === 0 || n > nums[i - 1]), 'in order, none twice').toBe(true);
});
