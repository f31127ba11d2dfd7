// The steps a new user's flow shares whatever the harness (new-user.spec.ts with `fake` or the
// dev stack's harness, claude-code-flow.spec.ts with the real Claude Code): editing an agent's
// limits and reading when each change applies, adding a schedule and a webhook, a signed
// delivery and the schedule's first run. Each asserts what the page shows and photographs it
// (checkPage: axe too); the specs wrap them in their own test.step lines.
import { createHmac, randomUUID } from 'node:crypto';
import type { Page } from '@playwright/test';
import { checkPage, expect } from './fixtures';

/** A webhook as its creation shows it, once. */
export interface CreatedWebhook {
  url: string;
  secret: string;
}

/**
 * Opens the agent's edit form, sets memory to 1024 MiB and a 900 s turn limit, reads what each
 * change applies when (the server's dry run), saves and reads it back. Answers how long the form
 * took to open (ms).
 */
export async function editLimits(page: Page, agentUrl: string, shot: string): Promise<number> {
  await page.goto(agentUrl);
  const started = Date.now();
  await page.getByRole('link', { name: 'Edit' }).click();
  const memory = page.getByLabel('Memory (MiB)');
  await expect(memory).toBeVisible();
  const openMs = Date.now() - started;
  // The field's range is the server's (GET /api/v1/limits).
  await expect(memory).toHaveAttribute('max', /^\d+$/);
  await memory.fill('1024');
  await page.getByLabel('Turn time limit (s; 0: the server’s)').fill('900');
  await expect(page.locator('[data-impact="limits"]')).toContainText('applies when the sandbox is rebuilt');
  await expect(page.locator('[data-impact="turn_seconds"]')).toContainText('turn time limit: applies from the next prompt');
  await checkPage(page, shot);
  await page.getByRole('button', { name: 'Save' }).click();
  await expect(page.getByRole('status').filter({ hasText: 'Saved.' })).toBeVisible();
  await expect(page.locator('[data-applied]')).toContainText('limits: applies when the sandbox is rebuilt');
  await expect(page.getByRole('button', { name: 'Rebuild now' })).toBeVisible();
  await page.goto(agentUrl);
  await expect(page.getByText(/1024 MiB/)).toBeVisible();
  return openMs;
}

/**
 * From the agent's page: adds the schedule `every-minute` (its next runs previewed) and the
 * webhook `on-push` (its template tried), both prompting `prompt`; answers the webhook's URL and
 * secret, shown once.
 */
export async function addScheduleAndWebhook(page: Page, prompt: string, shot: string): Promise<CreatedWebhook> {
  await page.getByRole('link', { name: 'Triggers' }).click();
  await page.getByText('Add a schedule').click();
  const schedule = page.locator('section[aria-labelledby="schedules-h"] form');
  await schedule.getByLabel('Name', { exact: true }).fill('every-minute');
  await schedule.getByLabel(/^Cron/).fill('* * * * *');
  await schedule.getByLabel('Time zone').fill('UTC');
  await expect(schedule.locator('[data-preview] li')).toHaveCount(5);
  await schedule.getByLabel('Prompt').fill(prompt);
  await schedule.getByRole('button', { name: 'Add the schedule' }).click();
  await expect(page.locator('[data-schedule="every-minute"]')).toBeVisible();

  await page.getByText('Add a webhook').click();
  const webhook = page.locator('section[aria-labelledby="webhooks-h"] form');
  await webhook.getByLabel('Name', { exact: true }).fill('on-push');
  await webhook.getByLabel(/^Template/).fill('{{ prompt }}');
  await webhook.getByLabel(/^Try it/).fill(JSON.stringify({ prompt }));
  await expect(webhook.locator('[data-template-result] pre')).toHaveText(prompt);
  await webhook.getByRole('button', { name: 'Add the webhook' }).click();
  const shown = page.locator('[data-created-webhook]');
  await expect(shown).toBeVisible();
  const hook = {
    url: (await shown.locator('[data-webhook-url]').innerText()).trim(),
    secret: (await shown.locator('[data-webhook-secret]').innerText()).trim(),
  };
  await checkPage(page, shot);
  await shown.getByRole('button', { name: 'I have copied it' }).click();
  await expect(shown).toHaveCount(0);
  return hook;
}

/**
 * Sends the webhook one delivery signed as GitHub signs it, sees it listed as accepted, then waits
 * (at most `scheduleMs`) for the every-minute schedule's first run to be listed.
 */
export async function deliverAndSeeRuns(page: Page, baseURL: string, hook: CreatedWebhook, prompt: string, shot: string, scheduleMs: number) {
  const body = JSON.stringify({ prompt });
  const r = await page.request.post(new URL(hook.url, baseURL).pathname, {
    data: body,
    headers: {
      'content-type': 'application/json',
      'x-github-delivery': randomUUID(),
      'x-hub-signature-256': `sha256=${createHmac('sha256', hook.secret).update(body).digest('hex')}`,
    },
  });
  expect(r.status(), await r.text()).toBe(202);
  await page.reload();
  await page.locator('[data-webhook="on-push"] summary', { hasText: 'Deliveries' }).click();
  await expect(page.locator('[data-webhook="on-push"] tr[data-outcome="accepted"]')).toHaveCount(1);
  // A schedule runs on the minute.
  await expect(async () => {
    await page.reload();
    await page.locator('[data-schedule="every-minute"] summary', { hasText: 'Runs' }).click();
    await expect(page.locator('[data-schedule="every-minute"] tr[data-outcome]').first()).toBeVisible({ timeout: 2_000 });
  }).toPass({ timeout: scheduleMs, intervals: [5_000] });
  await checkPage(page, shot);
}
