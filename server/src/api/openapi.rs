//! `GET /api/v1/openapi.json`: the API's OpenAPI document, with each operation's security
//! requirements and the workspace role it needs (`x-agenthold-access`). The authorization tests
//! read their expectations from it, and check that it lists every route the router has.

use axum::Json;
use serde_json::{Map, Value, json};

/// What an operation needs, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// Nothing.
    Public,
    /// A signed-in user (acting on its own things).
    SignedIn,
    /// The viewer role in the resource's workspace.
    Viewer,
    /// The operator role.
    Operator,
    /// The admin role.
    Admin,
    /// The server admin.
    ServerAdmin,
}

impl Access {
    /// Parses the document's `x-agenthold-access`.
    pub fn parse(raw: &str) -> Option<Self> {
        [Self::Public, Self::SignedIn, Self::Viewer, Self::Operator, Self::Admin, Self::ServerAdmin]
            .into_iter()
            .find(|access| access.as_str() == raw)
    }

    /// The document's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::SignedIn => "signed-in",
            Self::Viewer => "viewer",
            Self::Operator => "operator",
            Self::Admin => "admin",
            Self::ServerAdmin => "server-admin",
        }
    }
}

/// Every operation: method, path, summary, access.
pub const OPERATIONS: &[(&str, &str, &str, Access)] = &[
    ("get", "/", "The browser UI (web/dist; other paths outside /api get it too)", Access::Public),
    ("get", "/healthz", "Liveness", Access::Public),
    ("get", "/readyz", "Readiness (Postgres answers)", Access::Public),
    ("get", "/api/v1/openapi.json", "This document", Access::Public),
    ("post", "/api/v1/auth/login", "Start a browser session", Access::Public),
    ("post", "/api/v1/auth/logout", "End the browser session", Access::SignedIn),
    ("get", "/api/v1/me", "The caller and its workspaces", Access::SignedIn),
    ("post", "/api/v1/tokens", "Create an API token (shown once)", Access::SignedIn),
    ("get", "/api/v1/tokens", "The caller's API tokens", Access::SignedIn),
    ("delete", "/api/v1/tokens/{id}", "Revoke an API token", Access::SignedIn),
    ("get", "/api/v1/me/providers", "The caller's provider logins (never their values)", Access::SignedIn),
    (
        "post",
        "/api/v1/me/providers",
        "Connect a provider login (checked with the provider; write-only)",
        Access::SignedIn,
    ),
    ("delete", "/api/v1/me/providers/{id}", "Disconnect a provider login", Access::SignedIn),
    ("post", "/api/v1/users", "Create a user", Access::ServerAdmin),
    ("post", "/api/v1/workspaces", "Create a workspace", Access::SignedIn),
    ("get", "/api/v1/workspaces", "The caller's workspaces", Access::SignedIn),
    ("put", "/api/v1/workspaces/{id}/members/{user_id}", "Add a member or change its role", Access::Admin),
    ("delete", "/api/v1/workspaces/{id}/members/{user_id}", "Remove a member", Access::Admin),
    ("get", "/api/v1/workspaces/{id}/audit", "The workspace's audit log", Access::Admin),
    ("post", "/api/v1/workspaces/{id}/secrets", "Store a secret (its value is write-only)", Access::Admin),
    ("get", "/api/v1/workspaces/{id}/secrets", "The workspace's secrets (never their values)", Access::Admin),
    ("delete", "/api/v1/workspaces/{id}/secrets/{secret_id}", "Delete a secret (detaches it)", Access::Admin),
    ("post", "/api/v1/agents", "Create an agent (admin of the target workspace)", Access::SignedIn),
    ("get", "/api/v1/agents", "The agents of the caller's workspaces", Access::SignedIn),
    ("get", "/api/v1/agents/{id}", "An agent", Access::Viewer),
    (
        "patch",
        "/api/v1/agents/{id}",
        "Change an agent: harness, command, model, env, image, limits, egress allow-list",
        Access::Admin,
    ),
    ("delete", "/api/v1/agents/{id}", "Delete an agent, its sandbox and sessions", Access::Admin),
    ("put", "/api/v1/agents/{id}/logins", "Use my logins: the agent uses the caller's provider logins", Access::Admin),
    (
        "delete",
        "/api/v1/agents/{id}/logins",
        "Stop using someone's logins (admins of the agent, or the login's owner)",
        Access::Admin,
    ),
    ("post", "/api/v1/agents/{id}/sleep", "Stop the sandbox", Access::Admin),
    ("post", "/api/v1/agents/{id}/wake", "Start the sandbox", Access::Admin),
    (
        "post",
        "/api/v1/agents/{id}/rebuild",
        "Make the container again from the current image and limits (same home)",
        Access::Admin,
    ),
    (
        "get",
        "/api/v1/permissions",
        "Permission questions of the agents the caller operates (the approvals inbox)",
        Access::SignedIn,
    ),
    ("get", "/api/v1/permissions/stream", "The approvals inbox, live (WebSocket)", Access::SignedIn),
    ("get", "/api/v1/permissions/{id}", "A permission question", Access::Operator),
    (
        "post",
        "/api/v1/permissions/{id}/answer",
        "Answer a waiting permission question (the first answer wins)",
        Access::Operator,
    ),
    ("post", "/api/v1/agents/{id}/sessions", "Open a session", Access::Operator),
    ("get", "/api/v1/agents/{id}/sessions", "The agent's sessions", Access::Viewer),
    ("get", "/api/v1/agents/{id}/terminal", "A terminal in the sandbox (WebSocket)", Access::Operator),
    ("put", "/api/v1/agents/{id}/secrets/{env_name}", "Attach a secret under an environment variable", Access::Admin),
    ("delete", "/api/v1/agents/{id}/secrets/{env_name}", "Detach a secret", Access::Admin),
    ("get", "/api/v1/sessions/{id}", "A session", Access::Viewer),
    ("post", "/api/v1/sessions/{id}/prompt", "Prompt (starts a turn)", Access::Operator),
    ("post", "/api/v1/sessions/{id}/cancel", "Cancel the running turn", Access::Operator),
    ("get", "/api/v1/sessions/{id}/events", "The event log", Access::Viewer),
    ("get", "/api/v1/sessions/{id}/events/{seq}/payload", "One event's whole payload", Access::Viewer),
    ("get", "/api/v1/sessions/{id}/stream", "The event stream from a cursor (WebSocket)", Access::Viewer),
];

/// The document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for (method, path, summary, access) in OPERATIONS {
        let security = if *access == Access::Public { json!([]) } else { json!([{"bearer": []}, {"session": []}]) };
        let operation = json!({
            "summary": summary,
            "security": security,
            "x-agenthold-access": access.as_str(),
        });
        if let Some(item) = paths.entry((*path).to_owned()).or_insert_with(|| json!({})).as_object_mut() {
            item.insert((*method).to_owned(), operation);
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "agenthold",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Roles are per workspace: viewer < operator < admin. A resource in a workspace the caller \
                does not belong to answers 404; one it can see but not act on answers 403. See docs/api.md.",
        },
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "An API token"},
                "session": {"type": "apiKey", "in": "cookie", "name": crate::auth::SESSION_COOKIE,
                    "description": "A browser session; state-changing requests also send X-CSRF-Token"},
            }
        },
        "paths": paths,
    })
}

/// Serves the document.
pub async fn serve() -> Json<Value> {
    Json(document())
}
