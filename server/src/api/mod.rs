//! The REST and WebSocket API under `/api/v1`, plus `/healthz`, `/readyz` and the browser UI (`web/dist`) at `/`. This is the one
//! place that lists every route; each resource module exposes its handlers.

mod agent_settings;
mod agent_view;
mod agents;
mod body_read;
pub mod error;
mod extract;
mod grants;
mod health;
mod hooks;
mod internal;
pub mod limits;
mod login;
mod mcp;
mod me;
pub mod openapi;
mod permissions;
mod prompt_targets;
mod providers;
mod request_ids;
mod schedules;
mod secrets;
mod sessions;
mod stream;
mod terminal;
mod terminal_relay;
mod users;
mod warm_claim;
mod web;
mod webhooks;
mod workspaces;
pub(crate) mod ws;

use axum::Router;
use axum::routing::{delete, get, post};
use tower_http::trace::TraceLayer;

use crate::app::AppState;

/// Every route of the API (the public listener).
pub fn router(state: AppState) -> Router {
    routes(state, false)
}

/// The replicas' own listener (`AGENTHOLD_INTERNAL_LISTEN`): the API — a terminal relayed from
/// another replica opens here with the caller's own credentials — plus the calls between
/// replicas, which the public listener does not serve (docs/replicas.md).
pub fn internal_router(state: AppState) -> Router {
    routes(state, true)
}

fn routes(state: AppState, internal: bool) -> Router {
    let limits = limits::RequestLimits::new(
        state.config.max_concurrent_requests as usize,
        state.config.max_anonymous_requests as usize,
        state.config.caller_caps(),
        std::time::Duration::from_secs(state.config.request_timeout_secs),
        Some(state.availability.clone()),
    );
    let body_limit = usize::try_from(state.config.max_body_bytes).unwrap_or(usize::MAX);
    let body_read = body_read::BodyRead {
        base: std::time::Duration::from_secs(state.config.body_read_secs),
        cap: body_limit.max(usize::try_from(state.config.webhook_max_body_bytes).unwrap_or(usize::MAX)),
    };
    let routes = Router::new()
        .route("/", get(web::serve))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/api/v1/openapi.json", get(openapi::serve))
        .route("/api/v1/auth/login", post(login::login))
        .route("/api/v1/auth/logout", post(login::logout))
        .route("/api/v1/me", get(me::show))
        .route("/api/v1/tokens", post(me::create_token).get(me::list_tokens))
        .route("/api/v1/me/providers", post(providers::connect).get(providers::list))
        .route("/api/v1/me/providers/{id}", delete(providers::disconnect))
        .route("/api/v1/agents/{id}/logins", axum::routing::put(providers::use_mine).delete(providers::stop_using))
        .route("/api/v1/tokens/{id}", delete(me::revoke_token))
        .route("/api/v1/users", post(users::create))
        .route("/api/v1/workspaces", post(workspaces::create).get(workspaces::list))
        .route(
            "/api/v1/workspaces/{id}/members/{user_id}",
            axum::routing::put(workspaces::set_member).delete(workspaces::remove_member),
        )
        .route("/api/v1/workspaces/{id}/members", get(workspaces::members))
        .route("/api/v1/workspaces/{id}/audit", get(workspaces::audit_log))
        .route("/api/v1/workspaces/{id}/secrets", post(secrets::create).get(secrets::list))
        .route("/api/v1/workspaces/{id}/secrets/{secret_id}", delete(secrets::delete))
        .route("/api/v1/agents", post(agents::create).get(agents::list))
        .route("/api/v1/agents/{id}", get(agents::show).patch(agents::update).delete(agents::delete))
        .route("/api/v1/agents/{id}/sleep", post(agents::sleep))
        .route("/api/v1/agents/{id}/wake", post(agents::wake))
        .route("/api/v1/agents/{id}/rebuild", post(agents::rebuild))
        .route("/api/v1/permissions", get(permissions::list))
        .route("/api/v1/permissions/stream", get(permissions::stream))
        .route("/api/v1/permissions/{id}", get(permissions::show))
        .route("/api/v1/permissions/{id}/answer", post(permissions::answer))
        .route("/api/v1/agents/{id}/sessions", post(sessions::create).get(sessions::list))
        .route("/api/v1/agents/{id}/terminal", get(terminal::open))
        .route("/api/v1/agents/{id}/secrets/{env_name}", axum::routing::put(secrets::attach).delete(secrets::detach))
        .route("/api/v1/agents/{id}/schedules", post(schedules::create).get(schedules::list))
        .route("/api/v1/schedules/{id}", get(schedules::show).patch(schedules::update).delete(schedules::delete))
        .route("/api/v1/schedules/{id}/runs", get(schedules::runs))
        .route("/api/v1/agents/{id}/webhooks", post(webhooks::create).get(webhooks::list))
        .route("/api/v1/webhooks/{id}", get(webhooks::show).patch(webhooks::update).delete(webhooks::delete))
        .route("/api/v1/webhooks/{id}/deliveries", get(webhooks::deliveries))
        .route("/api/v1/hooks/{id}", post(hooks::deliver))
        .route("/api/v1/agents/{id}/prompt-targets", get(prompt_targets::list))
        .route("/api/v1/agents/{id}/prompted-by", get(prompt_targets::incoming))
        .route("/api/v1/agents/{id}/prompted-by/{source_id}", delete(prompt_targets::revoke_incoming))
        .route(
            "/api/v1/agents/{id}/prompt-targets/{target_id}",
            axum::routing::put(prompt_targets::add).delete(prompt_targets::remove),
        )
        .route("/api/v1/mcp", post(mcp::call))
        .route("/api/v1/sessions/{id}", get(sessions::show).delete(sessions::delete))
        .route("/api/v1/sessions/{id}/prompt", post(sessions::prompt))
        .route("/api/v1/sessions/{id}/cancel", post(sessions::cancel))
        .route("/api/v1/sessions/{id}/grants", get(grants::list))
        .route("/api/v1/sessions/{id}/grants/{grant_id}", delete(grants::revoke))
        .route("/api/v1/sessions/{id}/events", get(sessions::events))
        .route("/api/v1/sessions/{id}/events/{seq}/payload", get(sessions::full_payload))
        .route("/api/v1/sessions/{id}/stream", get(stream::stream));
    let routes = if internal { routes.merge(internal::router()) } else { routes };
    routes
        .fallback(web::serve)
        .layer(axum::middleware::from_fn_with_state(limits, limits::enforce))
        .layer(axum::middleware::from_fn_with_state(body_read, body_read::read_first))
        .layer(axum::extract::DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn(crate::metrics::track_http))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_ids::span)
                .on_response(tower_http::trace::DefaultOnResponse::new().level(tracing::Level::INFO)),
        )
        .layer(axum::middleware::from_fn(request_ids::assign))
        .with_state(state)
}
