// The elicitation schema checked in the page before sending, and when a question's choices are
// one-click buttons.
import { describe, expect, it } from 'vitest';
import { contentOf, fieldsOf, quickChoices } from '../src/elicitation';

describe('the form’s schema, checked before it is sent', () => {
  const schema = {
    type: 'object',
    properties: {
      email: { type: 'string', format: 'email' },
      code: { type: 'string', minLength: 3, maxLength: 5 },
      when: { type: 'string', format: 'date' },
      color: { type: 'string', enum: ['red', 'green'] },
    },
    required: ['code'],
  };
  const fields = fieldsOf(schema)!;
  it('lengths, formats and choices', () => {
    expect(contentOf(fields, { code: 'ab' })).toEqual({ error: 'code: at least 3 characters' });
    expect(contentOf(fields, { code: 'abcdef' })).toEqual({ error: 'code: at most 5 characters' });
    expect(contentOf(fields, { code: 'abc', email: 'nope' })).toEqual({ error: 'email: an email address is needed' });
    expect(contentOf(fields, { code: 'abc', when: '2026-13-45' })).toEqual({ error: 'when: a date, YYYY-MM-DD is needed' });
    expect(contentOf(fields, { code: 'abc', color: 'blue' })).toEqual({ error: 'color: choose one of the choices' });
    expect(contentOf(fields, { code: 'abc', email: 'a@b.io', when: '2026-12-05', color: 'red' })).toEqual({ content: { code: 'abc', email: 'a@b.io', when: '2026-12-05', color: 'red' } });
  });
});

describe('one-click choices', () => {
  it('a single choice question is buttons', () => {
    const f = fieldsOf({ type: 'object', properties: { pick: { type: 'string', oneOf: [{ const: 'a', title: 'Alpha' }, { const: 'b', title: 'Beta' }] } }, required: ['pick'] });
    expect(quickChoices(f)).toEqual({ field: 'pick', choices: [{ value: 'a', title: 'Alpha' }, { value: 'b', title: 'Beta' }] });
  });
  it('not when another field is required, or there are many choices, or several choice fields', () => {
    expect(quickChoices(fieldsOf({ type: 'object', properties: { pick: { enum: ['a', 'b'] }, why: { type: 'string' } }, required: ['why'] }))).toBeNull();
    expect(quickChoices(fieldsOf({ type: 'object', properties: { pick: { enum: ['1', '2', '3', '4', '5', '6', '7'] } } }))).toBeNull();
    expect(quickChoices(fieldsOf({ type: 'object', properties: { a: { enum: ['x'] }, b: { enum: ['y'] } } }))).toBeNull();
    expect(quickChoices(null)).toBeNull();
  });
});
