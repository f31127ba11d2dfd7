// A real harness's session rendered from what Claude Code, Codex or OpenCode really sent: a card
// per tool call, the diff or result, every question answered, a collapsed thought, terminal
// output in colour without escape codes. Only when AGENTHOLD_UI_REAL_SESSION=<agent id>/<session
// id> names one (scripts/e2e/harness.sh with E2E_UI=1 does: it made the agent in the admin's
// workspace, whose viewer this test's user becomes).
import { checkPage, expect, PLAIN_TEXT_COLOUR, signIn, test } from './fixtures';

const REAL = process.env.AGENTHOLD_UI_REAL_SESSION;

test('a real harness session renders: tool cards, the diff or result, answered questions, thoughts and terminal colours', async ({ page, user, problems, admin }) => {
  void problems;
  test.skip(!REAL, 'AGENTHOLD_UI_REAL_SESSION is not set (scripts/e2e/harness.sh with E2E_UI=1 sets it)');
  const [agentId, sessionId] = REAL!.split('/');
  const get = async (path: string) => {
    const r = await admin.get(path);
    expect(r.ok(), `GET ${path}: ${r.status()} ${await r.text()}`).toBe(true);
    return r.json();
  };
  const agent = await get(`/api/v1/agents/${agentId}`);
  const made = await admin.put(`/api/v1/workspaces/${agent.workspace_id}/members/${user.id}`, { data: { role: 'viewer' } });
  expect(made.ok(), await made.text()).toBe(true);
  const stored = await get(`/api/v1/sessions/${sessionId}/events?after=0&limit=1000`);
  const count = (type: string, pred: (p: any) => boolean = () => true) => stored.events.filter((e: any) => e.type === type && pred(e.payload)).length;
  // A tall window: every item of the session is on screen (the list renders only what is).
  await page.setViewportSize({ width: 1280, height: 6000 });
  await signIn(page, user);
  await page.goto(`/agents/${agentId}/sessions/${sessionId}`);
  await expect(page.locator('[data-status="live"]')).toBeVisible({ timeout: 30_000 });
  await page.waitForFunction((n) => Number((document.querySelector('.log') as HTMLElement | null)?.dataset.applied ?? 0) === n, stored.events.length, { timeout: 30_000 });
  await expect(page.locator('.item-prompt'), 'one prompt item per prompt').toHaveCount(count('prompt'));
  await expect(page.locator('.item-turn_end'), 'one turn_end per turn').toHaveCount(count('turn_end'));
  const callIds = new Set(stored.events.filter((e: any) => e.type === 'update' && /^tool_call/.test(e.payload.sessionUpdate)).map((e: any) => e.payload.toolCallId));
  await expect(page.locator('.item-tool'), `one card per tool call (${callIds.size})`).toHaveCount(callIds.size);
  const write = page.locator('.item-tool', { hasText: 'hello.txt' }).first();
  await expect(write).toBeVisible();
  await expect(write, 'the write shows its diff or its result').toContainText(/\+hi|Wrote file successfully/);
  await expect(page.locator('.question.resolved'), 'every question shows answered').toHaveCount(count('permission'));
  await expect(page.locator('.question.resolved .resolution').first(), 'who answered').toHaveText(/^Approved by the autonomous posture$/);
  if (count('update', (p) => p.sessionUpdate === 'agent_thought_chunk')) {
    const thought = page.locator('details.thought').first();
    await expect(thought, 'a thought is collapsed').not.toHaveAttribute('open');
    await thought.locator('summary').click();
    await expect(thought, 'and opens on a click').toContainText('Which file');
  }
  // Terminal output (Claude Code's terminal_output_delta, OpenCode's text, Codex's delta): never
  // an escape code on screen, and colours where the harness's output had them.
  const outputs = await page.locator('.item-tool pre.ansi').allInnerTexts();
  expect(outputs.filter((o) => o.includes('\u001b')), 'no escape codes shown').toEqual([]);
  if (stored.events.some((e: any) => JSON.stringify(e.payload).includes('\\u001b[32mgreen'))) {
    const green = page.locator('.item-tool pre.ansi span', { hasText: 'green' }).first();
    const colour = await green.evaluate((e) => getComputedStyle(e).color);
    expect(colour, 'terminal output keeps its colour').not.toBe(PLAIN_TEXT_COLOUR);
    expect(outputs.some((o) => /^green plain\nhello\.txt/.test(o)), `the output as printed: ${JSON.stringify(outputs)}`).toBe(true);
  }
  const failed = count('update', (p) => p.sessionUpdate === 'tool_call_update' && p.status === 'failed');
  await expect(page.locator('.item-tool .badge.status.danger', { hasText: 'failed' }), 'failed calls say so').toHaveCount(failed);
  await page.setViewportSize({ width: 1280, height: 860 });
  await checkPage(page, `session-${agent.harness}`);
});
