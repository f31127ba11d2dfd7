// Small shared pieces of the pages.
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { linkClick } from './router';
import { errorText } from './api';

export function Link(props: { href: string; children: ComponentChildren; class?: string; 'aria-current'?: 'page' | undefined }) {
  return (
    <a href={props.href} class={props.class} onClick={linkClick} aria-current={props['aria-current']}>
      {props.children}
    </a>
  );
}

export function ErrorLine({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {errorText(error)}
    </p>
  );
}

/** Loads once per key; `reload()` loads again. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): { data: T | undefined; error: unknown; reload: () => void } {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [n, setN] = useState(0);
  useEffect(() => {
    let live = true;
    load().then(
      (d) => live && (setData(d), setError(null)),
      (e) => live && setError(e),
    );
    return () => {
      live = false;
    };
  }, [...deps, n]);
  return { data, error, reload: () => setN((x) => x + 1) };
}

/** A button that runs an async action, shows it is busy, and reports its error. */
export function Action(props: {
  run: () => Promise<unknown>;
  children: ComponentChildren;
  class?: string;
  confirm?: string;
  disabled?: boolean;
  title?: string;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  return (
    <span class="action">
      <button
        type="button"
        class={props.class}
        disabled={busy || props.disabled}
        title={props.title}
        onClick={async () => {
          if (props.confirm && !window.confirm(props.confirm)) return;
          setBusy(true);
          setError(null);
          try {
            await props.run();
          } catch (e) {
            setError(e);
          } finally {
            setBusy(false);
          }
        }}
      >
        {props.children}
      </button>
      {error ? <span class="error" role="alert">{errorText(error)}</span> : null}
    </span>
  );
}

export function Json({ value, summary }: { value: unknown; summary: string }) {
  return (
    <details class="json">
      <summary>{summary}</summary>
      <pre>{JSON.stringify(value, null, 2)}</pre>
    </details>
  );
}

export function when(at: string | null | undefined): string {
  if (!at) return '—';
  const d = new Date(at);
  return Number.isNaN(d.getTime()) ? at : d.toLocaleString();
}

export function Badge({ children, tone }: { children: ComponentChildren; tone?: string }) {
  return <span class={`badge ${tone ?? ''}`}>{children}</span>;
}
