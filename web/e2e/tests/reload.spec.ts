// A reload and a dropped connection in the middle of a fast flood (3,000 chunks at 600/s): the
// reloaded page opens at the tail of the log and reads the rest on scrolling up; every event is
// applied once, the rendered chunks equal the log's, in order, none twice, none missing.
import { events, expect, logCounter, newAgentWithSession, openSession, prompt, signIn, test } from './fixtures';

test('reload mid-turn during a fast flood: every event rendered once, no gap, no duplicate', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  const { agent, session } = await newAgentWithSession(page, 'flood');
  await openSession(page, agent.id, session.id);
  const N = 3000;
  await prompt(page, `text start\nflood ${N} 600\ntext end`);
  // Far enough in that the reloaded page opens at the tail of the log (it reads 400 events).
  await page.waitForFunction(() => Number((document.querySelector('.log') as HTMLElement | null)?.dataset.applied ?? 0) > 900, null, { timeout: 60_000 });
  const reads: number[] = [];
  page.on('request', (r) => {
    const m = /\/events\?after=(\d+)/.exec(r.url());
    if (m) reads.push(Number(m[1]));
  });
  await page.reload();
  await expect(page.locator('.log')).toBeVisible();
  // And once more, with a dropped connection: the page goes offline and back.
  await page.waitForTimeout(700);
  await page.context().setOffline(true);
  await page.waitForTimeout(500);
  await page.context().setOffline(false);
  await expect(page.locator('.item-turn_end')).toBeVisible({ timeout: 90_000 });
  const log = await events(page, session.id);
  const last = log[log.length - 1].seq;
  await page.waitForFunction((n) => Number((document.querySelector('.log') as HTMLElement | null)?.dataset.cursor) >= n, last);
  // The page opened at the tail: scrolling up reads the rest.
  expect(reads.length, 'the reloaded page read events').toBeGreaterThan(0);
  expect(reads[0], `the reloaded page opened at the tail of the log (read after ${reads[0]})`).toBeGreaterThan(0);
  const older = page.locator('button.older');
  for (let i = 0; i < 20 && (await older.count()); i++) {
    await page.locator('.log').evaluate((el) => (el.scrollTop = 0));
    await page.waitForTimeout(200);
  }
  await expect(older, 'scrolling up read the whole log').toHaveCount(0);
  expect(await logCounter(page, 'cursor'), `the page's cursor; the log has ${last}`).toBe(last);
  expect(await logCounter(page, 'applied'), `events applied; the log has ${last}`).toBe(last);
  const text = await page.locator('.item-message').allInnerTexts();
  const nums = [...text.join('\n').matchAll(/flood (\d+)/g)].map((m) => Number(m[1]));
  const chunks = log.filter((e) => e.type === 'update' && /^flood \d+$/.test(e.payload?.content?.text ?? '')).length;
  expect(chunks, 'the log has every flood chunk').toBe(N);
  expect(nums.length, 'rendered as many flood chunks as the log has').toBe(N);
  expect(nums.every((n, i) => n === i + 1), 'in order, none twice, none missing').toBe(true);
  const prompts = log.filter((e) => e.type === 'prompt').length;
  const ends = log.filter((e) => e.type === 'turn_end').length;
  await expect(page.locator('.item-prompt'), 'one prompt item per prompt event').toHaveCount(prompts);
  await expect(page.locator('.item-turn_end'), 'one turn_end item per turn_end event').toHaveCount(ends);
});
