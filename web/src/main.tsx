import { render } from 'preact';
import { useEffect } from 'preact/hooks';
import { signal } from '@preact/signals';
import './style.css';
import { loadMe, me, signOut } from './api';
import { match, navigate, path } from './router';
import { Link } from './ui';
import { LoginPage } from './pages/Login';
import { AgentsPage } from './pages/Agents';
import { AgentPage } from './pages/Agent';
import { SessionPage } from './pages/Session';
import { ApprovalsPage } from './pages/Approvals';
import { SettingsPage } from './pages/Settings';
import { TerminalPage } from './pages/Terminal';
import { AgentFormPage } from './pages/AgentForm';
import { TriggersPage } from './pages/Triggers';

type Theme = 'system' | 'light' | 'dark';
const theme = signal<Theme>((localStorage.getItem('agenthold.theme') as Theme) || 'system');
function applyTheme() {
  if (theme.value === 'system') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme.value;
}
applyTheme();

const loadError = signal<string | null>(null);

function Shell() {
  const p = path.value;
  const who = me.value;
  useEffect(() => {
    if (who === null && p !== '/login') navigate(`/login?next=${encodeURIComponent(location.pathname + location.search)}`, true);
  }, [who, p]);
  if (loadError.value) return <main class="page"><p class="error" role="alert">{loadError.value}</p></main>;
  if (who === undefined) return <main class="page"><p class="muted">Loading…</p></main>;
  if (who === null || p === '/login') return <LoginPage />;
  const nav = [
    ['/', 'Agents'],
    ['/approvals', 'Approvals'],
    ['/settings', 'Settings'],
  ];
  const section = p === '/' || p.startsWith('/agents') ? '/' : p.startsWith('/approvals') ? '/approvals' : '/settings';
  return (
    <>
      <header class="top">
        <Link href="/" class="brand">agenthold</Link>
        <nav aria-label="Main">
          {nav.map(([href, label]) => (
            <Link href={href} aria-current={section === href ? 'page' : undefined}>{label}</Link>
          ))}
        </nav>
        <details class="menu">
          <summary aria-label="Your menu">{who.username}</summary>
          <div class="menu-body">
            <Link href="/settings/tokens">API tokens</Link>
            <Link href="/settings/providers">Provider logins</Link>
            <label>
              Theme{' '}
              <select
                value={theme.value}
                onChange={(e) => {
                  theme.value = (e.currentTarget as HTMLSelectElement).value as Theme;
                  localStorage.setItem('agenthold.theme', theme.value);
                  applyTheme();
                }}
              >
                <option value="system">as the system</option>
                <option value="light">light</option>
                <option value="dark">dark</option>
              </select>
            </label>
            <button type="button" onClick={() => signOut().then(() => navigate('/login'))}>Sign out</button>
          </div>
        </details>
      </header>
      <Routes p={p} />
    </>
  );
}

function Routes({ p }: { p: string }) {
  let m: Record<string, string> | null;
  if (p === '/') return <AgentsPage />;
  if (p === '/agents/new') return <AgentFormPage id={null} />;
  if ((m = match('/agents/:id', p))) return <AgentPage id={m.id} />;
  if ((m = match('/agents/:id/edit', p))) return <AgentFormPage id={m.id} />;
  if ((m = match('/agents/:id/triggers', p))) return <TriggersPage agentId={m.id} />;
  if ((m = match('/agents/:id/sessions/:sid', p))) return <SessionPage agentId={m.id} sessionId={m.sid} />;
  if ((m = match('/agents/:id/terminal', p))) return <TerminalPage agentId={m.id} />;
  if (p === '/approvals') return <ApprovalsPage />;
  if (p === '/settings' || p.startsWith('/settings/')) return <SettingsPage tab={p.split('/')[2] ?? 'providers'} />;
  return (
    <main class="page">
      <h1>Not found</h1>
      <p>Nothing lives at {p}. <Link href="/">Back to the agents</Link>.</p>
    </main>
  );
}

loadMe().catch((e) => {
  loadError.value = `The server cannot be reached (${e instanceof Error ? e.message : String(e)}). Reload to try again.`;
});
render(<Shell />, document.getElementById('app')!);
