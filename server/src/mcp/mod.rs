//! Agents prompting agents (issue 15, part 3; docs/triggers.md): agenthold offers each harness
//! an MCP server of its own, `POST /api/v1/mcp` (MCP's streamable HTTP transport, JSON answers
//! only), with four tools — `list_agents`, `prompt_agent`, `wait_turn`, `read_events` — over the
//! agents the calling agent may prompt (its allow-list, [`crate::store::agent_prompts`]).
//!
//! Who calls is proven by a per-agent bearer credential ([`credential`]) derived from the
//! master key. A sandbox behind the egress proxy never holds it: its harness is given a
//! placeholder, and the proxy — which already knows the sandbox by its proxy credentials and
//! address — swaps it for the real value with an ordinary injection rule on the reserved host
//! [`HOST`] ([`servers`]). [`rpc`] is the JSON-RPC framing, [`tools`] the tools' schemas and
//! argument checks (pure); what each tool does is the route's (`crate::api::mcp::calls`).

pub mod credential;
pub mod rate;
pub mod read_audit;
pub mod rpc;
pub mod servers;
pub mod tools;

/// The reserved host name sandboxes reach agenthold's MCP server at, through the egress proxy.
pub const HOST: &str = "mcp.agenthold.internal";

/// The route's path.
pub const PATH: &str = "/api/v1/mcp";

/// How deep a chain of agents prompting agents may go: a turn prompted by a person, a script or
/// a trigger is depth 0; the agent it prompts runs at depth 1, and so on. A call that would
/// start a turn deeper than this is a tool error.
pub const MAX_CHAIN_DEPTH: i32 = 3;

/// The most bytes of one request body.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
