// api(): a read that fails before any answer (Chromium's ERR_NETWORK_CHANGED on a Docker host) is
// tried again; a write is not (it may have reached the server), and says NETWORK at once.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { api, ApiError } from '../src/api';

afterEach(() => {
  vi.unstubAllGlobals();
});

function failingThen(failures: number) {
  let calls = 0;
  const fetch = vi.fn(async () => {
    calls++;
    if (calls <= failures) throw new TypeError('Failed to fetch');
    return new Response(JSON.stringify({ ok: true }), { status: 200 });
  });
  vi.stubGlobal('fetch', fetch);
  return fetch;
}

describe('api', () => {
  it('tries a read again when it fails without an answer', async () => {
    const fetch = failingThen(2);
    await expect(api('GET', '/api/v1/agents')).resolves.toEqual({ ok: true });
    expect(fetch).toHaveBeenCalledTimes(3);
  });

  it('gives up on a read after three tries, saying NETWORK', async () => {
    const fetch = failingThen(5);
    await expect(api('GET', '/api/v1/agents')).rejects.toMatchObject({ code: 'NETWORK', status: 0 });
    expect(fetch).toHaveBeenCalledTimes(3);
  });

  it('never sends a write twice', async () => {
    for (const method of ['POST', 'PATCH', 'PUT', 'DELETE']) {
      const fetch = failingThen(1);
      const error: unknown = await api(method, '/api/v1/agents/x/schedules', { name: 'n' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ApiError);
      expect((error as ApiError).code).toBe('NETWORK');
      expect(fetch, method).toHaveBeenCalledTimes(1);
    }
  });
});
