// The API as the signed-in page calls it (its cookie and the CSRF token from /me), a session's
// stored events, an agent of the `fake` harness with a session, and the prompt box (typed into
// and sent with the keyboard's Enter). Used by the flows under e2e/tests/; the fake harness's
// prompt is a script (docs/fakeagent.md).
import { expect, type Page } from '@playwright/test';

export interface StoredEvent {
  seq: number;
  type: string;
  payload: any;
}

/** The API from inside the page, as the page calls it; a non-2xx answer throws. */
export async function pageApi<T = any>(page: Page, method: string, path: string, body?: unknown): Promise<T> {
  return page.evaluate(
    async ({ method, path, body }) => {
      const me = await (await fetch('/api/v1/me')).json();
      const r = await fetch(path, {
        method,
        headers: { 'content-type': 'application/json', 'x-csrf-token': me.csrf_token ?? '' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await r.text();
      if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
      return text ? JSON.parse(text) : null;
    },
    { method, path, body },
  );
}

/** Every stored event of a session, read page by page. */
export async function events(page: Page, sessionId: string): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  let after = 0;
  for (;;) {
    const r = await pageApi(page, 'GET', `/api/v1/sessions/${sessionId}/events?after=${after}&limit=1000`);
    out.push(...r.events);
    if (!r.events.length) return out;
    after = r.next_after;
  }
}

/** An agent (the `fake` harness unless `extra` says otherwise) and a session of it. */
export async function newAgentWithSession(page: Page, name: string, extra: Record<string, unknown> = {}) {
  const agent = await pageApi(page, 'POST', '/api/v1/agents', { name, harness: 'fake', ...extra });
  const session = await pageApi(page, 'POST', `/api/v1/agents/${agent.id}/sessions`, {});
  return { agent, session };
}

/** Opens a session's page and waits for its stream to be live. */
export async function openSession(page: Page, agentId: string, sessionId: string) {
  await page.goto(`/agents/${agentId}/sessions/${sessionId}`);
  await expect(page.locator('[data-status="live"]')).toBeVisible({ timeout: 30_000 });
}

/** Types into the prompt box (or the reply box) and sends it with Enter. */
export async function prompt(page: Page, text: string) {
  const box = page.getByRole('textbox', { name: /Prompt|Reply/ });
  await box.fill(text);
  await box.press('Enter');
}

/** The log element's counters (data-applied, data-cursor, data-items) as numbers. */
export async function logCounter(page: Page, name: 'applied' | 'cursor' | 'items'): Promise<number> {
  return Number((await page.locator('.log').getAttribute(`data-${name}`)) ?? 0);
}

/** Waits until the page has applied every event stored so far (the log's cursor reaches the last seq). */
export async function waitCaughtUp(page: Page, sessionId: string, timeout = 30_000) {
  const log = await events(page, sessionId);
  const last = log[log.length - 1].seq;
  await page.waitForFunction((n) => Number((document.querySelector('.log') as HTMLElement | null)?.dataset.cursor) >= n, last, { timeout });
  return { log, last };
}

/** The colour of plain text: ANSI-coloured text must differ from it. */
export const PLAIN_TEXT_COLOUR = 'rgb(29, 29, 31)';
