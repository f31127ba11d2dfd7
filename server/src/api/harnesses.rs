//! `GET /api/v1/harnesses`: each kind of harness the server knows, as its adapter describes it
//! (`harness::Profile`) — its name, the models it is known to take, how it signs in (provider
//! logins on the account, secret presets and their variables, methods the server calls on its
//! own, a terminal login), the image its agents default to, whether it needs a `command`, and
//! whether this server's mode offers it (the same check `POST /api/v1/agents` makes:
//! `harness::available`). Nothing secret: any signed-in user may read it.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;
use super::openapi::Access;
use crate::auth::Principal;
use crate::harness::{self, HarnessAdapter};
use crate::state::AppState;

/// A secret preset that fits a harness, and the variable it is attached under.
#[derive(Debug, Serialize, ToSchema)]
pub struct HarnessSecret {
    /// The secret's preset (`anthropic`).
    preset: &'static str,
    /// The variable (`ANTHROPIC_API_KEY`).
    env: &'static str,
}

/// A login method the server calls on its own when the harness asks to sign in.
#[derive(Debug, Serialize, ToSchema)]
pub struct AutoLogin {
    /// The method's id as the harness advertises it (`api-key`).
    method: &'static str,
    /// The variable that must be in the harness's environment for it (an attached secret).
    env: &'static str,
}

/// One kind of harness.
#[derive(Debug, Serialize, ToSchema)]
pub struct Harness {
    /// Its name in the API (`"harness": "claude-code"`).
    name: &'static str,
    /// What people call it.
    label: &'static str,
    /// Whether this server offers it (`false`: a development-only harness on a production
    /// server; `POST /api/v1/agents` refuses it with `UNKNOWN_HARNESS`).
    available: bool,
    /// Only for development and tests.
    development_only: bool,
    /// Whether an agent of it must name the program to run (`command`); the others refuse one.
    needs_command: bool,
    /// Models it is known to take, most usual first: suggestions, any model name is accepted.
    models: &'static [&'static str],
    /// The provider logins on a person's account it uses (`GET /api/v1/me/providers`), most
    /// preferred first.
    account_logins: Vec<&'static str>,
    /// Secret presets that fit it, with the variable each is attached under.
    secrets: Vec<HarnessSecret>,
    /// Login methods the server calls on its own, given their variable.
    auto_logins: Vec<AutoLogin>,
    /// Whether it can be signed in from the agent's terminal (`cli-login`).
    terminal_login: bool,
    /// The image its agents get when they name none.
    default_image: String,
    /// Hosts it talks to, allowed through the egress proxy.
    provider_hosts: &'static [&'static str],
}

fn view(state: &AppState, adapter: &dyn HarnessAdapter) -> Harness {
    let profile = adapter.profile();
    Harness {
        name: adapter.name(),
        label: profile.label,
        available: harness::available(adapter.name(), state.config.mode).is_ok(),
        development_only: profile.development_only,
        needs_command: adapter.validate(None).is_err(),
        models: profile.models,
        account_logins: profile.account_logins.iter().map(|k| k.as_str()).collect(),
        secrets: profile.secrets.iter().map(|&(preset, env)| HarnessSecret { preset, env }).collect(),
        auto_logins: adapter.auto_authenticate().iter().map(|&(method, env)| AutoLogin { method, env }).collect(),
        terminal_login: adapter.terminal_login("cli-login").is_some(),
        default_image: if profile.in_base_image { state.config.base_image.clone() } else { state.config.image.clone() },
        provider_hosts: profile.provider_hosts,
    }
}

/// Every kind of harness the server knows (those its mode does not offer too, marked
/// `available: false`), real ones first as the server lists them.
#[utoipa::path(
    get,
    path = "/api/v1/harnesses",
    operation_id = "list_harnesses",
    tag = "agents",
    responses((status = 200, description = "The harnesses", body = Vec<Harness>)),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn list(State(state): State<AppState>, _principal: Principal) -> Result<Json<Vec<Harness>>, ApiError> {
    Ok(Json(harness::all().iter().map(|adapter| view(&state, *adapter)).collect()))
}
