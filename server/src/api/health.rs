//! `/healthz` (the process answers) and `/readyz` (it can reach Postgres).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::app::AppState;

/// Liveness.
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Readiness: Postgres answers.
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    match sqlx::query_scalar!("SELECT 1 AS \"one!\"").fetch_one(&state.pool).await {
        Ok(_) => (StatusCode::OK, Json(json!({"status": "ready"}))),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "database unavailable"}))),
    }
}
