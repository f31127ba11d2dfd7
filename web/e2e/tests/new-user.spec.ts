// A new user sets up and runs an agent end to end in the browser, without curl: signs in, stores
// a provider key (a workspace secret), creates an agent in the guarded posture with a policy and
// the key attached, prompts it (keyboard only), approves its question, reads the turn's usage,
// edits its limits (seeing what the change restarts), adds a schedule and a webhook and sees
// their runs and deliveries, and reads the agent's usage. Every page passes axe (no serious or
// critical violation) and is photographed.
//
// The harness: E2E_HARNESS (default `fake`, whose prompt is a script: docs/fakeagent.md). With
// `claude-code`, the dev stack's stand-in provider answers through the real proxy (scripts/e2e/
// real-harness.sh sets it up; E2E_SECRET_VALUE is the stand-in's key, E2E_PROMPT a prompt the
// stand-in answers with a tool call that asks).
import { checkPage, expect, signIn, test } from './fixtures';
import { addScheduleAndWebhook, deliverAndSeeRuns, editLimits, type CreatedWebhook } from './flow-steps';
import { deleteAgentAs } from './ui33-helpers';

const HARNESS = process.env.E2E_HARNESS ?? 'fake';
const fake = HARNESS === 'fake';
const PROMPT = process.env.E2E_PROMPT ?? (fake ? 'ask execute git push\ntext Pushed.\nusage 1200 340' : 'please write hello.txt hi');
const SECRET_VALUE = process.env.E2E_SECRET_VALUE ?? 'sk-ant-test-0000000000000000';
const TRIGGER_PROMPT = fake ? 'text From a trigger.\nusage 10 5' : 'say hi';

// The agent a test made goes with it (its sandbox, its every-minute schedule).
let agentId = '';
test.afterEach(async ({ user, baseURL }) => {
  if (agentId) expect(await deleteAgentAs(baseURL!, user, agentId), 'deleting the agent').toBe(204);
  agentId = '';
});

test('a new user sets up and runs a guarded agent end to end', async ({ page, user, problems, baseURL }) => {
  void problems;
  await test.step('signs in', async () => {
    await signIn(page, user);
    await expect(page.getByText('No agents yet.')).toBeVisible();
    await checkPage(page, 'flow-01-agents-empty');
  });

  await test.step('stores a provider key as a workspace secret', async () => {
    await page.goto('/settings/secrets');
    await page.getByLabel('Name', { exact: true }).fill('anthropic-key');
    await page.getByLabel('Preset').selectOption('anthropic');
    await page.getByLabel('Value (write-only)').fill(SECRET_VALUE);
    await page.getByRole('button', { name: 'Add secret' }).click();
    await expect(page.getByText('anthropic-key')).toBeVisible();
    await checkPage(page, 'flow-02-secrets');
  });

  const name = `guarded-${Date.now().toString(36)}`;
  await test.step('creates a guarded agent with a policy and the key attached', async () => {
    await page.goto('/');
    await page.getByRole('link', { name: 'Create an agent' }).click();
    const form = page.locator('form.settings-form');
    await expect(form).toBeVisible();
    // Defaults that work: the workspace holds an Anthropic key, so Claude Code, with it attached.
    await expect(page.getByLabel('Harness')).toHaveValue('claude-code');
    await expect(page.getByLabel('Secret 1: variable')).toHaveValue('ANTHROPIC_API_KEY');
    await page.getByLabel('Name', { exact: true }).fill(name);
    if (HARNESS !== 'claude-code') await page.getByLabel('Harness').selectOption(HARNESS);
    await page.getByLabel('Posture').selectOption('guarded');
    await page.getByLabel('Start from').selectOption({ label: 'Read freely, ask for the rest' });
    await expect(page.getByLabel('Rule 0: effect')).toHaveValue('read');
    // A mistake is shown at its field before anything is sent.
    await page.getByRole('button', { name: 'Add a rule' }).click();
    await page.getByLabel('Rule 1: path glob').fill('relative/path');
    await page.getByRole('button', { name: 'Create' }).click();
    await expect(page.locator('#app').getByText('`path` must be absolute')).toBeVisible();
    await page.getByRole('button', { name: 'Remove rule 1' }).click();
    await checkPage(page, 'flow-03-create-agent');
    await page.getByRole('button', { name: 'Create' }).click();
    await expect(page.getByRole('heading', { name })).toBeVisible();
    await expect(page.getByText('ANTHROPIC_API_KEY', { exact: true })).toBeVisible();
    await expect(page.getByText('guarded', { exact: true })).toBeVisible();
  });
  const agentUrl = page.url();
  agentId = new URL(agentUrl).pathname.split('/')[2];

  await test.step('prompts it with the keyboard and approves its question', async () => {
    await page.getByRole('button', { name: 'New session' }).click();
    const box = page.getByLabel('Prompt', { exact: true });
    await box.focus();
    await page.keyboard.type(PROMPT.split('\n')[0]);
    for (const line of PROMPT.split('\n').slice(1)) {
      await page.keyboard.press('Shift+Enter');
      await page.keyboard.type(line);
    }
    await page.keyboard.press('Enter');
    const approve = page.locator('button[data-decision="allow"]').first();
    await expect(approve).toBeEnabled({ timeout: 60_000 });
    await approve.focus();
    await page.keyboard.press('Enter');
    await expect(page.locator('.resolution[data-decision="allow"]').first()).toBeVisible();
  });

  await test.step('reads the turn’s usage', async () => {
    const end = page.locator('.turn-end').first();
    await expect(end).toBeVisible({ timeout: 60_000 });
    await expect(end).toHaveAttribute('data-usage', /\d+(\.\d+)?k? in · \d+(\.\d+)?k? out/);
    if (fake) await expect(end).toContainText('1.2k in · 340 out');
    await expect(page.locator('[data-usage-totals]')).toContainText('1 turn');
    await checkPage(page, 'flow-04-session');
  });

  await test.step('edits its limits, seeing what the change restarts', async () => {
    const openMs = await editLimits(page, agentUrl, 'flow-05-edit-agent');
    test.info().annotations.push({ type: 'edit form open (ms)', description: String(openMs) });
    console.log(`edit form open: ${openMs} ms`);
  });

  let hook: CreatedWebhook = { url: '', secret: '' };
  await test.step('adds a schedule (previewed) and a webhook (secret shown once)', async () => {
    hook = await addScheduleAndWebhook(page, TRIGGER_PROMPT, 'flow-06-triggers');
  });

  await test.step('a signed delivery is accepted and listed; the schedule runs', async () => {
    await deliverAndSeeRuns(page, baseURL!, hook, TRIGGER_PROMPT, 'flow-07-trigger-runs', 90_000);
  });

  await test.step('reads the agent’s usage over its sessions', async () => {
    await page.goto(agentUrl);
    await expect(page.locator('section[aria-labelledby="usage-h"] [data-usage-totals]')).toContainText(/\d+ turns?/);
    await expect(page.locator('.usage-chart svg rect.bar.used').first()).toBeVisible();
    await checkPage(page, 'flow-08-agent-overview');
  });
});

test('an admin sets the workspace’s egress default; an agent follows it until given a list of its own', async ({ page, user, problems }) => {
  void problems;
  await signIn(page, user);
  await test.step('Settings → Egress: presets from the server, saved', async () => {
    await page.goto('/settings/egress');
    await page.getByRole('checkbox', { name: /^npm/ }).check();
    await page.getByLabel(/^Also allow/).fill('git.example.com');
    await page.getByRole('button', { name: 'Save the default' }).click();
    await expect(page.getByRole('status').filter({ hasText: 'Saved' })).toBeVisible();
    await checkPage(page, 'egress-01-workspace-default');
  });
  const name = `egress-${Date.now().toString(36)}`;
  await test.step('a new agent follows it', async () => {
    await page.goto('/agents/new');
    await page.getByLabel('Name', { exact: true }).fill(name);
    await page.getByLabel('Harness').selectOption('fake');
    await expect(page.getByRole('checkbox', { name: 'Follow the workspace’s default' })).toBeChecked();
    await page.getByRole('button', { name: 'Create' }).click();
    await expect(page.getByRole('heading', { name })).toBeVisible();
    agentId = new URL(page.url()).pathname.split('/')[2];
    await expect(page.locator('[data-egress-inherited="yes"]')).toBeVisible();
    await expect(page.getByText('preset npm')).toBeVisible();
    await expect(page.getByText('git.example.com', { exact: true })).toBeVisible();
  });
  await test.step('given a list of its own, then back to the default', async () => {
    await page.getByRole('link', { name: 'Edit' }).click();
    await expect(page.locator('p[data-egress-inherited="yes"]')).toContainText('npm, git.example.com');
    await page.getByRole('checkbox', { name: 'Follow the workspace’s default' }).uncheck();
    await page.getByLabel(/^Also allow/).fill('example.org');
    await expect(page.locator('[data-impact="egress"]')).toContainText('reaches the proxy within seconds');
    await checkPage(page, 'egress-02-own-list');
    await page.getByRole('button', { name: 'Save' }).click();
    await expect(page.locator('[data-applied]')).toContainText('egress allow-list: reaches the proxy within seconds');
    await page.getByRole('link', { name: 'Back to the overview' }).click();
    await expect(page.locator('[data-egress-inherited="no"]')).toBeVisible();
    await expect(page.getByText('example.org', { exact: true })).toBeVisible();
    await page.getByRole('link', { name: 'Edit' }).click();
    await page.getByRole('checkbox', { name: 'Follow the workspace’s default' }).check();
    await page.getByRole('button', { name: 'Save' }).click();
    await expect(page.locator('[data-applied]')).toBeVisible();
    await page.getByRole('link', { name: 'Back to the overview' }).click();
    await expect(page.locator('[data-egress-inherited="yes"]')).toBeVisible();
  });
});
