//! `/healthz` (the process answers) and `/readyz` (it can reach Postgres).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use super::openapi::Access;
use crate::state::AppState;

/// How the process is.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok` (liveness), `ready` or `database unavailable` (readiness).
    status: &'static str,
}

/// Liveness.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "healthz",
    tag = "meta",
    responses((status = 200, description = "The process answers", body = Health)),
    extensions(("x-agenthold-access" = json!(Access::Public))),
)]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// Readiness: Postgres answers.
#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "readyz",
    tag = "meta",
    responses(
        (status = 200, description = "Postgres answers", body = Health),
        (status = 503, description = "Postgres does not answer (`database unavailable`)", body = Health),
    ),
    extensions(("x-agenthold-access" = json!(Access::Public))),
)]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    match sqlx::query_scalar!("SELECT 1 AS \"one!\"").fetch_one(&state.pool).await {
        Ok(_) => (StatusCode::OK, Json(Health { status: "ready" })),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, Json(Health { status: "database unavailable" })),
    }
}
