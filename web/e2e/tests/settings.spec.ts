// The settings pages: an API token shown once, revoked and then refused; provider logins; the
// audit log recording the revocation; secrets; and the members page (a member added by id, a role
// changed in place, the last admin refused with the choice put back, a removal; a viewer sees the
// list without controls).
import { checkPage, expect, pageApi, signIn, test } from './fixtures';

test('settings pages: tokens created once and revoked, providers, audit, secrets', async ({ page, user, problems, baseURL }) => {
  void problems;
  await signIn(page, user);
  await page.goto('/settings/tokens');
  await page.getByLabel("New token's name").fill('ui-token');
  await page.getByRole('button', { name: 'Create token' }).click();
  const value = (await page.locator('.secret-once').innerText()).trim();
  expect(value, 'shown once').toMatch(/^ah_/);
  await checkPage(page, 'settings-tokens');
  const me = await fetch(`${baseURL}/api/v1/me`, { headers: { authorization: `Bearer ${value}` } });
  expect(me.status, 'the new token works').toBe(200);
  page.once('dialog', (d) => d.accept());
  await page.locator('tr[data-token="ui-token"]').getByRole('button', { name: 'Revoke' }).click();
  await expect(page.locator('tr[data-token="ui-token"]')).toHaveCount(0);
  const r = await fetch(`${baseURL}/api/v1/me`, { headers: { authorization: `Bearer ${value}` } });
  expect(r.status, 'the revoked token stopped working').toBe(401);
  await page.goto('/settings/providers');
  await expect(page.getByRole('heading', { name: 'Provider logins' })).toBeVisible();
  await checkPage(page, 'settings-providers');
  await page.goto('/settings/audit');
  await expect(page.locator('td code', { hasText: 'token.revoked' }).first()).toBeVisible();
  await checkPage(page, 'settings-audit');
  await page.goto('/settings/secrets');
  await expect(page.getByRole('button', { name: 'Add secret' })).toBeVisible();
  await checkPage(page, 'settings-secrets');
});

test('members: the list, a role changed and a member removed by an admin; the last admin stays; a viewer only reads', async ({
  page,
  user,
  problems,
  newUser,
  signedInAs,
}) => {
  void problems;
  const mia = await newUser('mia');
  await signIn(page, user);
  const ws = await pageApi(page, 'POST', '/api/v1/workspaces', { name: `crew-${user.username}` });
  await page.goto('/settings/members');
  await page.getByLabel('Workspace').selectOption(ws.id);
  await expect(page.locator(`tr[data-member="${user.username}"]`)).toBeVisible();
  // Add Mia by her id, as a viewer.
  await page.getByLabel('Add a member by user id').fill(mia.id);
  await page.getByLabel('Their role').selectOption('viewer');
  await page.getByRole('button', { name: 'Add member' }).click();
  const row = page.locator(`tr[data-member="${mia.username}"]`);
  await expect(row).toBeVisible();
  await expect(row.getByLabel(`Role of ${mia.username}`), 'added as a viewer').toHaveValue('viewer');
  // Mia, a viewer, sees the list but no controls.
  const mp = await signedInAs(mia);
  await mp.goto('/settings/members');
  await mp.getByLabel('Workspace').selectOption(ws.id);
  await expect(mp.locator(`tr[data-member="${user.username}"]`)).toBeVisible();
  await expect(mp.locator('tr[data-member] select'), 'a viewer changes no roles').toHaveCount(0);
  await expect(mp.getByRole('button', { name: 'Remove' }), 'a viewer removes no one').toHaveCount(0);
  await checkPage(mp, 'settings-members-viewer');
  // A role change, saved on change.
  await row.getByLabel(`Role of ${mia.username}`).selectOption('operator');
  await expect
    .poll(async () => (await pageApi(page, 'GET', `/api/v1/workspaces/${ws.id}/members`)).members.some((m: any) => m.user_id === mia.id && m.role === 'operator'), {
      message: 'the role change is saved',
    })
    .toBe(true);
  // The last admin cannot step down: the error shows and the choice goes back.
  const mine = page.locator(`tr[data-member="${user.username}"]`);
  await mine.getByLabel(`Role of ${user.username}`).selectOption('viewer');
  await expect(mine.locator('[role="alert"]', { hasText: 'LAST_ADMIN' })).toBeVisible();
  await expect(mine.getByLabel(`Role of ${user.username}`), 'the select shows the role that holds').toHaveValue('admin');
  await checkPage(page, 'settings-members');
  // Removal.
  page.once('dialog', (d) => d.accept());
  await row.getByRole('button', { name: 'Remove' }).click();
  await expect(row).toHaveCount(0);
  const left = await pageApi(page, 'GET', `/api/v1/workspaces/${ws.id}/members`);
  expect(left.members.length, 'one member left').toBe(1);
  expect(left.members[0].user_id, 'Mia is gone').not.toBe(mia.id);
});
