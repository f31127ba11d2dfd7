// The policy editor of a guarded agent: one row per rule (effect, path glob, outside the work
// folder, command pattern for exec, answer), moved and removed with buttons, a default answer,
// and starting points. Each row's mistakes show beside the field (src/policy.ts checks them with
// the server's grammar; the server's own "rule N:" error lands on row N the same way).
import { ANSWERS, EFFECTS, POLICY_PRESETS, fromPolicy, type Answer, type RuleRow } from './policy';

export function PolicyEditor(props: {
  rows: RuleRow[];
  default: Answer;
  errors: Partial<Record<string, string>>;
  onChange: (rows: RuleRow[], def: Answer) => void;
}) {
  const { rows, errors } = props;
  const set = (i: number, over: Partial<RuleRow>) => props.onChange(rows.map((r, j) => (j === i ? { ...r, ...over } : r)), props.default);
  const move = (i: number, by: number) => {
    const next = [...rows];
    const [r] = next.splice(i, 1);
    next.splice(i + by, 0, r);
    props.onChange(next, props.default);
  };
  return (
    <div class="policy-editor" data-field="policy">
      <p class="muted">
        The first rule that matches a call decides; the default answers the rest. Paths are globs that start with <code>/</code> or <code>**</code> (<code>*</code> stays in a folder, <code>**</code> spans folders); a command pattern matches the whole command line (<code>*</code>: anything).
      </p>
      <label>
        Start from{' '}
        <select
          onChange={(e) => {
            const p = POLICY_PRESETS[Number(e.currentTarget.value)];
            if (p) {
              const read = fromPolicy(p.policy);
              props.onChange(read.rows, read.default);
            }
            e.currentTarget.value = '';
          }}
        >
          <option value="">a preset…</option>
          {POLICY_PRESETS.map((p, i) => <option value={String(i)}>{p.name}</option>)}
        </select>
      </label>
      {rows.length ? (
        <table class="rules">
          <thead>
            <tr><th scope="col">#</th><th scope="col">Effect</th><th scope="col">Path glob</th><th scope="col">Outside work folder</th><th scope="col">Command pattern</th><th scope="col">Answer</th><th scope="col"><span class="sr-only">Order</span></th></tr>
          </thead>
          <tbody>
            {rows.map((r, i) => {
              const err = (k: string) => errors[`policy.${i}.${k}`];
              const rowError = errors[`policy.${i}`];
              return (
                <tr data-rule={i} class={rowError ? 'invalid' : undefined}>
                  <td>{i}</td>
                  <td>
                    <select aria-label={`Rule ${i}: effect`} value={r.effect} onChange={(e) => set(i, { effect: e.currentTarget.value as RuleRow['effect'] })}>
                      {EFFECTS.map((x) => <option value={x}>{x}</option>)}
                    </select>
                  </td>
                  <td>
                    <input aria-label={`Rule ${i}: path glob`} value={r.path} disabled={r.effect === 'network'} placeholder="any path" aria-invalid={!!err('path')} onInput={(e) => set(i, { path: e.currentTarget.value })} />
                    {err('path') ? <span class="field-error" role="alert">{err('path')}</span> : null}
                  </td>
                  <td>
                    <input type="checkbox" aria-label={`Rule ${i}: only outside the work folder`} checked={r.outsideWorkdir} disabled={r.effect === 'network'} onChange={(e) => set(i, { outsideWorkdir: e.currentTarget.checked })} />
                  </td>
                  <td>
                    <input aria-label={`Rule ${i}: command pattern`} value={r.command} disabled={r.effect !== 'exec'} placeholder={r.effect === 'exec' ? 'any command' : 'exec only'} aria-invalid={!!err('command')} onInput={(e) => set(i, { command: e.currentTarget.value })} />
                    {err('command') ? <span class="field-error" role="alert">{err('command')}</span> : null}
                  </td>
                  <td>
                    <select aria-label={`Rule ${i}: answer`} value={r.answer} onChange={(e) => set(i, { answer: e.currentTarget.value as Answer })}>
                      {ANSWERS.map((x) => <option value={x}>{x}</option>)}
                    </select>
                  </td>
                  <td class="row-actions">
                    <button type="button" aria-label={`Move rule ${i} up`} disabled={i === 0} onClick={() => move(i, -1)}>↑</button>
                    <button type="button" aria-label={`Move rule ${i} down`} disabled={i === rows.length - 1} onClick={() => move(i, 1)}>↓</button>
                    <button type="button" aria-label={`Remove rule ${i}`} onClick={() => props.onChange(rows.filter((_, j) => j !== i), props.default)}>✕</button>
                  </td>
                  {rowError ? <td class="field-error" role="alert">{rowError}</td> : null}
                </tr>
              );
            })}
          </tbody>
        </table>
      ) : (
        <p class="muted">No rules: the default answers every call.</p>
      )}
      <div class="actions">
        <button type="button" onClick={() => props.onChange([...rows, { effect: 'read', path: '', outsideWorkdir: false, command: '', answer: 'allow' }], props.default)}>Add a rule</button>
        <label>
          Default answer{' '}
          <select name="policy-default" value={props.default} onChange={(e) => props.onChange(rows, e.currentTarget.value as Answer)}>
            {ANSWERS.map((x) => <option value={x}>{x}</option>)}
          </select>
        </label>
      </div>
      {errors.policy ? <p class="field-error" role="alert">{errors.policy}</p> : null}
    </div>
  );
}
