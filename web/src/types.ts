// The API's shapes as the pages use them: the generated types (src/api-types.ts, from the server's
// OpenAPI document; `npm run check-types`) with the few fields the document leaves open
// (`unknown`: a harness's own JSON) narrowed to what the pages read.
import type { components } from './api-types';

export type Schemas = components['schemas'];

/** One agent, as `GET /api/v1/agents/{id}` answers (the list's entries lack the detail fields). */
export type Agent = Schemas['Agent'] & Partial<Pick<Schemas['AgentDetail'], 'login_methods' | 'logins' | 'advertised'>>;
export type AgentDetail = Schemas['AgentDetail'];

/** An agent's sandbox as observed (docs/api.md, "Agent states"). */
export type AgentState = Schemas['AgentState'];

export type Permission = Omit<Schemas['Permission'], 'kind' | 'tool_call' | 'options'> & {
  kind: 'permission' | 'elicitation';
  tool_call: any;
  options: { optionId: string; name: string; kind: string }[];
};

export type Schedule = Schemas['Schedule'];
export type ScheduleRun = Schemas['ScheduleRun'];
export type Webhook = Schemas['Webhook'];
export type CreatedWebhook = Schemas['CreatedWebhook'];
export type Delivery = Schemas['Delivery'];
export type PromptTargets = Schemas['PromptTargets'];
export type IncomingLinks = Schemas['IncomingLinks'];
export type Secret = Schemas['Secret'];
export type ProviderLoginList = Schemas['ProviderLoginList'];
export type CreateAgent = Schemas['CreateAgent'];
export type UpdateAgent = Schemas['UpdateAgent'];

/** An "Approve for this session" answer: agenthold approves calls like `call` in the session until it is revoked. */
export type SessionGrant = Omit<Schemas['SessionGrant'], 'call'> & {
  call: {
    effect: 'write' | 'exec' | 'read' | 'network' | null;
    paths: string[];
    command: string | null;
    url: string | null;
    title: string | null;
  };
};
