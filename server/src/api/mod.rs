//! The REST and WebSocket API under `/api/v1`, plus `/healthz`, `/readyz` and the browser UI
//! (`web/dist`) at `/`. [`operations`] is the one list of routes: each handler is routed at the
//! path and method of its own `#[utoipa::path]`, and the OpenAPI document (`openapi`) is made
//! from the same list. Each resource module exposes its handlers.

mod agent_limits;
mod agent_settings;
mod agent_view;
mod agents;
mod body_read;
mod create_secrets;
mod egress;
pub mod error;
mod extract;
mod grants;
mod harness_log;
mod harnesses;
mod health;
mod hooks;
mod internal;
pub mod limits;
mod login;
mod mcp;
mod me;
pub mod openapi;
mod permissions;
mod principal;
mod prompt_targets;
mod providers;
mod read_relay;
mod request_ids;
mod schedules;
mod secrets;
mod sessions;
mod stream;
mod terminal;
mod terminal_relay;
pub mod tunnel;
mod usage;
mod users;
mod warm_claim;
mod web;
mod webhooks;
mod workspaces;
pub(crate) mod ws;

use axum::Router;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::AppState;

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

/// Every operation of the API, grouped by path: the router and the OpenAPI document both come
/// from this list.
pub(crate) fn operations() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(web::serve))
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(openapi::serve))
        .routes(routes!(login::login))
        .routes(routes!(login::logout))
        .routes(routes!(me::show))
        .routes(routes!(me::create_token, me::list_tokens))
        .routes(routes!(me::revoke_token))
        .routes(routes!(providers::connect, providers::list))
        .routes(routes!(providers::disconnect))
        .routes(routes!(providers::use_mine, providers::stop_using))
        .routes(routes!(users::create))
        .routes(routes!(workspaces::create, workspaces::list))
        .routes(routes!(workspaces::set_member, workspaces::remove_member))
        .routes(routes!(workspaces::members))
        .routes(routes!(workspaces::audit_log))
        .routes(routes!(egress::get, egress::set))
        .routes(routes!(egress::set_agent, egress::reset_agent))
        .routes(routes!(secrets::create, secrets::list))
        .routes(routes!(secrets::delete))
        .routes(routes!(secrets::attach, secrets::detach))
        .routes(routes!(harnesses::list))
        .routes(routes!(agent_limits::show))
        .routes(routes!(agents::create, agents::list))
        .routes(routes!(agents::show, agents::update, agents::delete))
        .routes(routes!(agents::sleep))
        .routes(routes!(agents::wake))
        .routes(routes!(agents::rebuild))
        .routes(routes!(harness_log::show))
        .routes(routes!(usage::show))
        .routes(routes!(permissions::list))
        .routes(routes!(permissions::stream))
        .routes(routes!(permissions::show))
        .routes(routes!(permissions::answer))
        .routes(routes!(sessions::create, sessions::list))
        .routes(routes!(terminal::open))
        .routes(routes!(schedules::create, schedules::list))
        .routes(routes!(schedules::show, schedules::update, schedules::delete))
        .routes(routes!(schedules::runs))
        .routes(routes!(webhooks::create, webhooks::list))
        .routes(routes!(webhooks::show, webhooks::update, webhooks::delete))
        .routes(routes!(webhooks::deliveries))
        .routes(routes!(hooks::deliver))
        .routes(routes!(prompt_targets::list))
        .routes(routes!(prompt_targets::incoming))
        .routes(routes!(prompt_targets::revoke_incoming))
        .routes(routes!(prompt_targets::add, prompt_targets::remove))
        .routes(routes!(mcp::call))
        .routes(routes!(sessions::show, sessions::delete))
        .routes(routes!(sessions::prompt))
        .routes(routes!(sessions::cancel))
        .routes(routes!(grants::list))
        .routes(routes!(grants::revoke))
        .routes(routes!(sessions::events))
        .routes(routes!(sessions::full_payload))
        .routes(routes!(stream::stream))
}

fn routes(state: AppState, internal: bool) -> Router {
    let limits = limits::RequestLimits::new(
        state.config.max_concurrent_requests as usize,
        state.config.max_anonymous_requests as usize,
        limits::CallerCaps::of(&state.config),
        std::time::Duration::from_secs(state.config.request_timeout_secs),
        Some(state.availability.clone()),
    );
    let body_limit = usize::try_from(state.config.max_body_bytes).unwrap_or(usize::MAX);
    let body_read = body_read::BodyRead {
        base: std::time::Duration::from_secs(state.config.body_read_secs),
        cap: body_limit.max(usize::try_from(state.config.webhook_max_body_bytes).unwrap_or(usize::MAX)),
    };
    let (routes, _) = operations().split_for_parts();
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
