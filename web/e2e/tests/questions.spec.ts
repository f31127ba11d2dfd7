// Questions and approvals: a permission question answered inline and from the inbox at once in
// two browsers (one answer stored), then from the inbox alone; a question answered with the
// keyboard; a reply answering a question; Approve for this session (a grant answers the same call
// later, is listed, revoked; a viewer sees it without Revoke); the harness's own questions
// (elicitations), a text one and one with choices.
import { checkPage, events, expect, newAgentWithSession, openSession, pageApi, prompt, signIn, test } from './fixtures';
import type { Page } from '@playwright/test';

/** Waits until the pending question's buttons are enabled (they are while it is being answered). */
async function answerable(page: Page, selector = '.question.pending .answer') {
  await page.waitForFunction((s) => {
    const b = document.querySelector(s) as HTMLButtonElement | null;
    return !!b && !b.disabled;
  }, selector);
}

test('a permission question: inline and from the inbox, the first answer wins across two browsers', async ({ page: pa, user, problems, signedInAs }) => {
  void problems;
  await signIn(pa, user);
  const pb = await signedInAs(user);
  const { agent, session } = await newAgentWithSession(pa, 'asker', { posture: 'approval' });
  await openSession(pa, agent.id, session.id);
  await pb.goto('/approvals');
  await expect(pb.locator('[data-status="live"]')).toBeVisible({ timeout: 30_000 });
  await prompt(pa, 'ask execute rm -rf build/\nask edit src/main.rs\ntext finished');

  // 1. Both browsers answer the first question at once: exactly one answer is stored.
  const inline = pa.locator('.question.pending .answer[data-decision="allow"]');
  const inbox = pb.locator('.inbox .answer[data-decision="deny"]');
  await expect(inline).toBeVisible({ timeout: 60_000 });
  await expect(inbox).toBeVisible({ timeout: 30_000 });
  await answerable(pa);
  await answerable(pb, '.inbox .answer');
  await checkPage(pb, 'approvals');
  await checkPage(pa, 'session-question');
  await expect(pa.locator('#composer-hint'), 'the box says a reply answers the question').toContainText(/reply answers it/);
  // Pinned to the first question's buttons: a locator would re-resolve after the other browser's
  // answer landed and click the second question's button when it appears.
  const [inlineButton, inboxButton] = [await inline.elementHandle(), await inbox.elementHandle()];
  const answer = (button: Awaited<ReturnType<typeof inline.elementHandle>>) => button!.click({ timeout: 5000 }).catch(() => undefined);
  await Promise.all([answer(inlineButton), answer(inboxButton)]);
  await expect(pa.locator('.question.resolved').first()).toBeVisible({ timeout: 30_000 });
  // 2. The second question, answered from the inbox only; the session shows who answered.
  const second = pb.locator('.inbox .answer[data-decision="allow"]');
  await expect(second).toBeVisible({ timeout: 60_000 });
  await answerable(pb, '.inbox .answer');
  // Exactly agenthold's three answers, though the fake harness offers its "always" options too.
  const first = pb.locator('.inbox li').first();
  await expect(first.locator('.answers button'), "the inbox's answers").toHaveText(['Approve', 'Approve for this session', 'Deny']);
  await expect(first.locator('.offered'), "the harness's options are named, not buttons").toContainText('Always allow');
  await second.click();
  await expect(pa.locator('.item-turn_end')).toBeVisible({ timeout: 60_000 });
  await expect(pb.locator('.empty-inbox')).toBeVisible();
  await checkPage(pb, 'approvals-empty');
  const log = await events(pa, session.id);
  const asked = log.filter((e) => e.type === 'permission');
  const resolved = log.filter((e) => e.type === 'permission_resolved');
  expect([asked.length, resolved.length], 'two questions, two answers').toEqual([2, 2]);
  expect(new Set(resolved.map((e) => e.payload.permission_id)).size, 'one answer per question').toBe(2);
  const resolutions = await pa.locator('.question.resolved .resolution').allInnerTexts();
  expect(resolutions.length, `who answered: ${resolutions}`).toBe(2);
  for (const t of resolutions) expect(t, 'who answered').toMatch(/^(Approved|Denied) by you$/);
  await expect.poll(() => pa.locator('.item-message', { hasText: 'permission: allow-once' }).count(), 'the harness got the answer').toBeGreaterThanOrEqual(1);
});

test('a question is answered with the keyboard alone (Tab to Approve, Enter)', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  const { agent, session } = await newAgentWithSession(page, 'keys', { posture: 'approval' });
  await openSession(page, agent.id, session.id);
  await prompt(page, 'ask execute make test\ntext tested');
  const approve = page.locator('.question.pending .answer[data-decision="allow"]');
  await expect(approve).toBeVisible({ timeout: 60_000 });
  await answerable(page);
  // From the prompt box, Shift+Tab walks back to the question's buttons.
  await page.getByRole('textbox', { name: /Prompt|Reply/ }).focus();
  let reached = false;
  for (let i = 0; i < 30 && !reached; i++) {
    await page.keyboard.press('Shift+Tab');
    reached = await approve.evaluate((el) => el === document.activeElement);
  }
  expect(reached, 'Approve is reachable with the keyboard').toBe(true);
  await page.keyboard.press('Enter');
  await expect(page.locator('.question.resolved .resolution')).toHaveText('Approved by you', { timeout: 30_000 });
  await expect(page.locator('.item-turn_end')).toBeVisible({ timeout: 30_000 });
  await expect(page.locator('.item-message', { hasText: 'permission: allow-once' })).toHaveCount(1);
});

test('a reply answers a waiting question', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  const { agent, session } = await newAgentWithSession(page, 'replier', { posture: 'approval' });
  await openSession(page, agent.id, session.id);
  await prompt(page, 'ask execute make deploy');
  await expect(page.locator('.question.pending')).toBeVisible({ timeout: 60_000 });
  await expect(page.getByRole('textbox', { name: 'Reply to the question' })).toBeVisible();
  await prompt(page, 'yes');
  await expect(page.locator('.question.resolved')).toBeVisible({ timeout: 30_000 });
  await expect(page.locator('.question.resolved .resolution'), 'answered by a reply').toHaveText(/^Approved by you, in a reply$/);
  await expect(page.locator('.item-turn_end')).toBeVisible({ timeout: 30_000 });
});

test("the harness's own question (an elicitation) is answered inline, with the keyboard", async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  const { agent, session } = await newAgentWithSession(page, 'elicit');
  await openSession(page, agent.id, session.id);
  await prompt(page, 'elicit What is your name?');
  await expect(page.locator('.question.pending', { hasText: 'What is your name?' })).toBeVisible({ timeout: 60_000 });
  await checkPage(page, 'session-elicitation');
  const field = page.locator('.elicit [data-field="answer"] input');
  await field.fill('Ada');
  // Enter in the form's field submits it, as the Answer button does.
  await field.press('Enter');
  const said = page.locator('.item-message', { hasText: 'elicitation: accept' });
  await expect(said).toBeVisible({ timeout: 30_000 });
  await expect(said, 'the harness got the answer').toContainText('Ada');
  await expect(page.locator('.question.resolved')).toBeVisible();
});

test('Approve for this session: a session grant answers the same call, listed on the session page, revoked; a viewer sees it without Revoke', async ({
  page,
  user,
  problems,
  newUser,
  signedInAs,
}) => {
  void problems;
  const vera = await newUser('vera');
  // A tall window: every item of the session is on screen (the list renders only what is).
  await page.setViewportSize({ width: 1280, height: 1800 });
  await signIn(page, user);
  const ws = await pageApi(page, 'POST', '/api/v1/workspaces', { name: `grants-${user.username}` });
  await pageApi(page, 'PUT', `/api/v1/workspaces/${ws.id}/members/${vera.id}`, { role: 'viewer' });
  const { agent, session } = await newAgentWithSession(page, 'granter', { posture: 'approval', workspace_id: ws.id });
  await openSession(page, agent.id, session.id);
  const turnEnds = async (n: number) => {
    await expect
      .poll(async () => (await events(page, session.id)).filter((e) => e.type === 'turn_end').length, { message: `turn ${n} ends`, timeout: 60_000 })
      .toBeGreaterThanOrEqual(n);
    const log = await events(page, session.id);
    await page.waitForFunction((seq) => Number((document.querySelector('.log') as HTMLElement | null)?.dataset.cursor) >= seq, log[log.length - 1].seq);
  };
  // 1. The question: Approve for this session.
  await prompt(page, 'ask execute make deploy\ntext first done');
  const forSession = page.locator('.question.pending .answer[data-decision="allow_for_session"]');
  await expect(forSession).toBeVisible({ timeout: 60_000 });
  await answerable(page);
  await forSession.click();
  await turnEnds(1);
  const first = page.locator('.question.resolved .resolution').first();
  await expect(first, 'the answer reads').toHaveText('Approved for this session by you');
  await expect(first).toHaveAttribute('data-decision', 'allow_for_session');
  await expect(page.locator('.item-message', { hasText: 'permission: allow-once' }), 'the harness got a once-answer').toHaveCount(1);
  // The session's grants panel lists it.
  const panel = page.locator('details.grants');
  await expect(panel).toBeVisible({ timeout: 30_000 });
  await expect(panel.locator('summary'), 'one grant').toContainText(/Approved for this session \(1\)/);
  // 2. The same call again: the grant answers it, nobody is asked.
  await prompt(page, 'ask execute make deploy\ntext second done');
  await turnEnds(2);
  const resolutions = await page.locator('.question.resolved .resolution').allInnerTexts();
  expect(resolutions[1], `the second call: ${resolutions}`).toBe('Approved by a session grant');
  await expect(page.locator('.question.pending'), 'no question waits').toHaveCount(0);
  // A viewer sees the grant but cannot revoke it.
  const vp = await signedInAs(vera);
  await vp.goto(`/agents/${agent.id}/sessions/${session.id}`);
  await expect(vp.locator('details.grants')).toBeVisible({ timeout: 30_000 });
  await vp.locator('details.grants summary').click();
  await expect(vp.locator('details.grants li[data-grant]')).toBeVisible();
  await expect(vp.locator('details.grants button'), 'no Revoke for a viewer').toHaveCount(0);
  await checkPage(vp, 'session-grants-viewer');
  // 3. Revoke: the panel goes, and the same call asks again.
  await panel.locator('summary').click();
  const row = panel.locator('li[data-grant]');
  await expect(row, 'the grant says what it allows').toContainText('exec');
  await expect(row).toContainText('make deploy');
  await checkPage(page, 'session-grants');
  await row.getByRole('button', { name: 'Revoke' }).click();
  await expect(panel).toHaveCount(0, { timeout: 30_000 });
  const left = await pageApi(page, 'GET', `/api/v1/sessions/${session.id}/grants`);
  expect(left.grants.filter((g: any) => !g.revoked_at), 'no active grant').toEqual([]);
  await prompt(page, 'ask execute make deploy\ntext third done');
  const deny = page.locator('.question.pending .answer[data-decision="deny"]');
  await expect(deny).toBeVisible({ timeout: 60_000 });
  await answerable(page);
  await deny.click();
  await turnEnds(3);
  const last = (await page.locator('.question.resolved .resolution').allInnerTexts()).pop();
  expect(last, 'the third call').toBe('Denied by you');
  await expect(page.locator('.item-message', { hasText: 'permission: reject-once' }), 'the harness got a once-refusal').toHaveCount(1);
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

test("the agent's own question with choices (an elicitation with enum and oneOf) is answered by choosing", async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  const { agent, session } = await newAgentWithSession(page, 'chooser', { harness: 'command', command: ['bash', '-c', CHOICES_AGENT] });
  await openSession(page, agent.id, session.id);
  await prompt(page, 'ship it');
  const form = page.locator('.question.pending .elicit');
  await expect(form).toBeVisible({ timeout: 60_000 });
  // Choices, not text boxes: radio buttons with the titles.
  const release = form.locator('[data-field="release"]');
  await expect(release.locator('input[type="radio"]'), 'release: two radio buttons').toHaveCount(2);
  await expect(form.locator('[data-field="channel"] label'), 'channel: the oneOf titles').toHaveText(['Channel one', 'Channel two']);
  await expect(form.locator('[data-field="release"] input[type="text"], [data-field="channel"] input[type="text"]'), 'no free text for a choice').toHaveCount(0);
  await expect(form.locator('[data-field="notify"] input[type="checkbox"]'), 'a checkbox').toHaveCount(1);
  await expect(form.locator('[data-field="copies"] input[type="number"]'), 'a number box').toHaveCount(1);
  await checkPage(page, 'session-elicitation-choices');
  // Nothing chosen: it says so and does not post.
  await form.getByRole('button', { name: 'Answer', exact: true }).click();
  await expect(form.locator('[role="alert"]', { hasText: 'Release: choose one' })).toBeVisible();
  await expect(page.locator('.question.pending'), 'still waiting').toHaveCount(1);
  await release.getByLabel('beta').check();
  await form.locator('[data-field="channel"]').getByLabel('Channel two').check();
  await form.locator('[data-field="notify"] input').check();
  await form.locator('[data-field="copies"] input').fill('3');
  await form.getByRole('button', { name: 'Answer', exact: true }).click();
  const said = page.locator('.item-message', { hasText: 'elicitation: accept' });
  await expect(said).toBeVisible({ timeout: 30_000 });
  for (const part of ['release:beta', 'channel:ch-2', 'notify:true', 'copies:3']) await expect(said, `the harness got ${part}`).toContainText(part);
  const resolution = page.locator('.question.resolved .resolution');
  await expect(resolution, 'the answer reads').toHaveText(/^Answered by you: /);
  await expect(resolution).toContainText('channel: ch-2');
});
