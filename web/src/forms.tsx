// The small form pieces the settings pages share: a form that reports its submit's error, labelled
// text and select fields, a workspace chooser and a role chooser that saves on change.
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { errorText, type Workspace } from './api';
import { ErrorLine } from './ui';

export type Role = Workspace['role'];
export const ROLES: Role[] = ['viewer', 'operator', 'admin'];

/** A form whose `submit` runs on Enter or its submit button; its error shows at the end. */
export function SubmitForm(props: { class?: string; submit: () => Promise<unknown>; children: ComponentChildren }) {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  return (
    <form
      class={props.class ?? 'grid-form'}
      aria-busy={busy}
      onSubmit={async (e) => {
        e.preventDefault();
        setError(null);
        setBusy(true);
        try {
          await props.submit();
        } catch (err) {
          setError(err);
        } finally {
          setBusy(false);
        }
      }}
    >
      {props.children}
      <ErrorLine error={error} />
    </form>
  );
}

/** A labelled, required text input (`rows`: a textarea; `secret`: a write-only password field). */
export function TextField(props: { label: string; value: string; onInput: (v: string) => void; rows?: number; secret?: boolean; placeholder?: string; optional?: boolean }) {
  const common = { required: !props.optional, value: props.value, placeholder: props.placeholder, autoComplete: props.secret || props.rows ? 'off' : undefined };
  return (
    <label>
      {props.label}
      {props.rows ? (
        <textarea {...common} rows={props.rows} onInput={(e) => props.onInput(e.currentTarget.value)} />
      ) : props.secret ? (
        <input {...common} type="password" onInput={(e) => props.onInput(e.currentTarget.value)} />
      ) : (
        <input {...common} onInput={(e) => props.onInput(e.currentTarget.value)} />
      )}
    </label>
  );
}

/** A labelled select of `[value, label]` options. */
export function SelectField(props: { label: string; value: string; onChange: (v: string) => void; options: [string, string][]; required?: boolean }) {
  return (
    <label>
      {props.label}{' '}
      <select required={props.required} value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)}>
        {props.options.map(([value, label]) => <option value={value}>{label}</option>)}
      </select>
    </label>
  );
}

/** Chooses one of `workspaces`. */
export function WorkspacePicker(props: { value: string; onChange: (id: string) => void; workspaces: Workspace[] }) {
  return <SelectField label="Workspace" value={props.value} onChange={props.onChange} options={props.workspaces.map((w) => [w.workspace_id, w.name])} />;
}

/** A role chooser that saves on change (`onChange` rejects: its error shows beside it). */
export function RoleSelect(props: { label: string; value: Role; onChange: (r: Role) => Promise<unknown> }) {
  const [error, setError] = useState<unknown>(null);
  return (
    <span class="action">
      <select
        aria-label={props.label}
        value={props.value}
        onChange={async (e) => {
          const select = e.currentTarget;
          setError(null);
          try {
            await props.onChange(select.value as Role);
          } catch (err) {
            select.value = props.value; // not changed: show what holds
            setError(err);
          }
        }}
      >
        {ROLES.map((r) => <option value={r}>{r}</option>)}
      </select>
      {error ? <span class="error" role="alert">{errorText(error)}</span> : null}
    </span>
  );
}
