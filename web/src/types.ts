// The shapes of the API's answers the pages use (docs/api.md).
export interface Agent {
  id: string;
  workspace_id: string;
  created_by: string | null;
  name: string;
  harness: string;
  command: string[] | null;
  model: string | null;
  env: Record<string, string>;
  image: string;
  driver: string;
  isolated: boolean;
  posture: string;
  own_posture: string | null;
  policy: unknown;
  limits: { cpus: number; memory_mib: number; pids: number; turn_seconds: number | null; auto_sleep_secs: number | null };
  login_user_id: string | null;
  sandbox_login_at: string | null;
  desired_state: string;
  /** What its sandbox is doing, as the server observes it. */
  state: AgentState;
  /** Why it is in `error`. */
  state_reason: string | null;
  created_at: string;
  secrets: { env_name: string; secret_id: string; secret_name: string; preset: string }[];
  credentials_inside_sandbox: boolean;
  egress: { allow: string[]; presets: string[] };
  login_methods?: { id: string; name?: string; description?: string }[];
  logins?: { user_id: string; delivered: string[]; connect_again: string[] } | null;
  advertised?: unknown;
}

/** An agent's sandbox as observed (docs/api.md, "Agent states"). */
export type AgentState = 'starting' | 'awake' | 'stopping' | 'asleep' | 'error';

export interface Permission {
  id: string;
  agent_id: string;
  agent_name: string;
  workspace_id: string;
  session_id: string;
  turn_id: string | null;
  kind: 'permission' | 'elicitation';
  tool_call: any;
  options: { optionId: string; name: string; kind: string }[];
  outcome: unknown;
  created_at: string;
  resolved_at: string | null;
}

export const HARNESSES = ['fake', 'claude-code', 'codex', 'opencode', 'command'];

/** An "Approve for this session" answer: agenthold approves calls like `call` in the session until it is revoked. */
export interface SessionGrant {
  id: string;
  session_id: string;
  call: {
    effect: 'write' | 'exec' | 'read' | 'network' | null;
    paths: string[];
    command: string | null;
    url: string | null;
    title: string | null;
  };
  created_by: string | null;
  created_at: string | null;
  revoked_at: string | null;
}
