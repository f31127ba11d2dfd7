// Routes are paths (history API); a link inside the app navigates without a reload.
import { signal } from '@preact/signals';

export const path = signal(location.pathname);
export const query = signal(new URLSearchParams(location.search));

export function navigate(to: string, replace = false) {
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  path.value = location.pathname;
  query.value = new URLSearchParams(location.search);
  window.scrollTo(0, 0);
}

window.addEventListener('popstate', () => {
  path.value = location.pathname;
  query.value = new URLSearchParams(location.search);
});

/** Matches `/agents/:id` style patterns; returns the parameters or null. */
export function match(pattern: string, p: string): Record<string, string> | null {
  const a = pattern.split('/').filter(Boolean);
  const b = p.split('/').filter(Boolean);
  if (a.length !== b.length) return null;
  const out: Record<string, string> = {};
  for (let i = 0; i < a.length; i++) {
    if (a[i].startsWith(':')) out[a[i].slice(1)] = decodeURIComponent(b[i]);
    else if (a[i] !== b[i]) return null;
  }
  return out;
}

/** onClick for in-app links: plain clicks navigate, modified clicks open as the browser does. */
export function linkClick(e: MouseEvent) {
  const a = (e.currentTarget as HTMLAnchorElement) ?? null;
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const href = a.getAttribute('href');
  if (!href || !href.startsWith('/')) return;
  e.preventDefault();
  navigate(href);
}
