// The webhook template test in the page fills in exactly as the server does (template.rs's cases).
import { describe, expect, it } from 'vitest';
import { parseTemplate, renderTemplate } from '../src/template';

describe('webhook templates', () => {
  it('fills in keys, indexes, non-strings as compact JSON, and the whole body', () => {
    const body = JSON.stringify({ number: 7, sender: { login: 'ada' }, commits: [{ id: 'a' }, { id: 'b' }], draft: false });
    expect(renderTemplate('PR #{{ number }} by {{sender.login}}: {{ commits.1.id }} {{ draft }}', body)).toEqual({ prompt: 'PR #7 by ada: b false' });
    expect(renderTemplate('{{ . }}', '{"a":[1, 2]}')).toEqual({ prompt: '{"a":[1,2]}' });
    expect(renderTemplate('{{ sender }}', body)).toEqual({ prompt: '{"login":"ada"}' });
  });
  it('names a missing field, an unclosed brace, a bad path, a bad sample', () => {
    expect(renderTemplate('{{ pull_request.title }}', '{}')).toEqual({ error: 'the body has no pull_request.title', code: 'TEMPLATE_FIELD_MISSING' });
    expect(parseTemplate('hi {{ x')).toMatchObject({ ok: false, error: 'a "{{" is not closed by "}}"' });
    expect(parseTemplate('{{ a b }}')).toMatchObject({ ok: false });
    expect(parseTemplate('')).toMatchObject({ ok: false, error: 'the template is empty' });
    expect(renderTemplate('x', 'not json')).toMatchObject({ code: 'INVALID_BODY' });
  });
});
