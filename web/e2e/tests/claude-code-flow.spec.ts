// The "done when", with the REAL Claude Code: a new user, in Chromium, signs in, stores a
// provider key (an Anthropic API key secret), creates a Claude Code agent on the base image in the
// guarded posture with a policy and the key attached, prompts it, approves its question (the
// permission gate asks before Claude Code writes a file), reads the turn's usage, edits its
// limits (the server's answer says what the change applies when), adds a schedule and a webhook
// and sees their runs, and reads the agent's usage. Every page passes axe and is photographed
// (claude-NN-*.png).
//
// Claude Code (claude-agent-acp in agenthold/base) runs in a real sandbox and reaches "Anthropic"
// only through the real egress proxy, whose TEST-ONLY upstream override points api.anthropic.com
// at the local stand-in (scripts/e2e/standins/anthropic.py); ui33-helpers.ts starts it and
// restarts the dev server with the override (and without it afterwards), as
// scripts/e2e/real-harness.sh does. Skipped, with the reason, only when the base image is absent.
//
//   set -a; . .dev/env; set +a; cd web && npx playwright test tests/claude-code-flow.spec.ts
import { randomUUID } from 'node:crypto';
import { checkPage, expect, signIn, test } from './fixtures';
import { addScheduleAndWebhook, deliverAndSeeRuns, editLimits, type CreatedWebhook } from './flow-steps';
import { baseImageMissing, deleteAgentAs, recorded, startStandIn, type StandIn } from './ui33-helpers';

const IMAGE = process.env.E2E_HARNESS_IMAGE ?? 'agenthold/base:latest';
const KEY = `sk-ant-api03-ui-${randomUUID()}`;
/** The stand-in answers this with Claude Code's Write tool: the gate asks first. */
const PROMPT = 'please write hello.txt hi';
const TRIGGER_PROMPT = 'say hi';
const missing = baseImageMissing(IMAGE);

test.describe('Claude Code, set up and run in the browser', () => {
  test.skip(!!missing, missing ?? '');
  test.describe.configure({ timeout: 900_000 });

  let standIn: StandIn | null = null;
  test.beforeAll(async () => {
    test.setTimeout(240_000);
    standIn = await startStandIn();
  });
  test.afterAll(() => {
    standIn?.stop();
  });
  // Its sandbox and its every-minute schedule go with it.
  let agentId = '';
  test.afterEach(async ({ user, baseURL }) => {
    if (agentId) expect(await deleteAgentAs(baseURL!, user, agentId), 'deleting the agent').toBe(204);
  });

  test('a new user runs a guarded Claude Code agent end to end', async ({ page, user, problems, baseURL }) => {
    void problems;
    await test.step('signs in', async () => {
      await signIn(page, user);
      await expect(page.getByText('No agents yet.')).toBeVisible();
      await checkPage(page, 'claude-01-agents-empty');
    });

    await test.step('stores an Anthropic API key as a workspace secret', async () => {
      await page.goto('/settings/secrets');
      await page.getByLabel('Name', { exact: true }).fill('anthropic-key');
      await page.getByLabel('Preset').selectOption('anthropic');
      await page.getByLabel('Value (write-only)').fill(KEY);
      await page.getByRole('button', { name: 'Add secret' }).click();
      await expect(page.getByRole('cell', { name: 'anthropic-key' })).toBeVisible();
      await checkPage(page, 'claude-02-secret');
    });

    const name = `claude-${Date.now().toString(36)}`;
    await test.step('creates a Claude Code agent, guarded with a policy, the key attached', async () => {
      await page.goto('/');
      await page.getByRole('link', { name: 'Create an agent' }).click();
      await expect(page.locator('form.settings-form')).toBeVisible();
      // The defaults come from the server: Claude Code (the workspace holds an Anthropic key), its
      // key suggested under the variable it reads, the base image as its default image.
      await expect(page.getByLabel('Harness')).toHaveValue('claude-code');
      await expect(page.getByLabel('Secret 1: variable')).toHaveValue('ANTHROPIC_API_KEY');
      await expect(page.getByLabel('Secret 1: secret')).not.toHaveValue('');
      await page.getByLabel('Name', { exact: true }).fill(name);
      if (process.env.E2E_HARNESS_IMAGE) await page.getByLabel('Image').fill(IMAGE);
      else await expect(page.getByLabel('Image')).toHaveAttribute('placeholder', IMAGE);
      await page.getByLabel('Posture').selectOption('guarded');
      await page.getByLabel('Start from').selectOption({ label: 'Read freely, ask for the rest' });
      await expect(page.getByLabel('Rule 0: effect')).toHaveValue('read');
      await checkPage(page, 'claude-03-create');
      await page.getByRole('button', { name: 'Create' }).click();
      await expect(page.getByRole('heading', { name })).toBeVisible();
      await expect(page.getByText('ANTHROPIC_API_KEY', { exact: true })).toBeVisible();
      await expect(page.getByText('guarded', { exact: true })).toBeVisible();
      await expect(page.getByText('claude-code', { exact: true })).toBeVisible();
    });
    const agentUrl = page.url();
    agentId = new URL(agentUrl).pathname.split('/')[2];

    await test.step('prompts it and approves the question the gate asks before the write', async () => {
      await page.getByRole('button', { name: 'New session' }).click();
      const box = page.getByLabel('Prompt', { exact: true });
      await box.focus();
      await page.keyboard.type(PROMPT);
      await page.keyboard.press('Enter');
      // A cold sandbox and harness: the first answer may take a minute or two.
      const approve = page.locator('button[data-decision="allow"]').first();
      await expect(approve).toBeEnabled({ timeout: 240_000 });
      await checkPage(page, 'claude-04-question');
      await approve.focus();
      await page.keyboard.press('Enter');
      await expect(page.locator('.resolution[data-decision="allow"]').first()).toBeVisible();
    });

    await test.step('reads the turn’s usage; the key went to the provider only through the proxy', async () => {
      const end = page.locator('.turn-end').first();
      await expect(end).toBeVisible({ timeout: 180_000 });
      await expect(end).toHaveClass(/end_turn/);
      await expect(end).toHaveAttribute('data-usage', /\d+(\.\d+)?k? in.* · \d+(\.\d+)?k? out/);
      await expect(page.locator('[data-usage-totals]')).toContainText('1 turn');
      await checkPage(page, 'claude-05-session');
      const seen = recorded(standIn!.record);
      expect(seen.length, 'the stand-in answered Claude Code').toBeGreaterThan(0);
      expect(seen.some((r) => r.headers?.['x-api-key'] === KEY), 'the real key reached the provider in x-api-key (put in by the proxy)').toBe(true);
    });

    await test.step('edits its limits; the server says when each change applies', async () => {
      await editLimits(page, agentUrl, 'claude-06-edit');
    });

    let hook: CreatedWebhook = { url: '', secret: '' };
    await test.step('adds a schedule and a webhook', async () => {
      hook = await addScheduleAndWebhook(page, TRIGGER_PROMPT, 'claude-07-triggers');
    });

    await test.step('sees the webhook’s delivery and the schedule’s run', async () => {
      await deliverAndSeeRuns(page, baseURL!, hook, TRIGGER_PROMPT, 'claude-08-trigger-runs', 120_000);
    });

    await test.step('reads the agent’s usage (summed by the server) and its chart', async () => {
      await page.goto(agentUrl);
      const usage = page.locator('section[aria-labelledby="usage-h"]');
      await expect(usage.locator('[data-usage-totals]')).toContainText(/\d+ turns?/);
      await expect(usage.locator('.usage-chart svg rect.bar.used').first()).toBeVisible();
      await usage.getByLabel(/Over the last/).selectOption('7');
      await expect(usage.locator('.usage-chart svg rect.bar')).toHaveCount(7);
      await checkPage(page, 'claude-09-agent-usage');
    });
  });
});
