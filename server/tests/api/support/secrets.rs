//! Helpers for the secrets tests: users with tokens, requests as them, a unique secret value
//! per test, and a look at every table of the server's database for a value's bytes.

use serde_json::{Value, json};
use sqlx::{Connection, Row};

use crate::support::TestServer;

pub const PASSWORD: &str = "a long enough password";

/// A user of the test with an API token.
pub struct User {
    /// The user's id.
    pub id: String,
    /// An API token of theirs.
    pub token: String,
}

/// Creates a user (as the server admin) and gets an API token through a browser login.
pub async fn make_user(server: &TestServer, name: &str) -> User {
    let (status, _, created) = server
        .raw_with_headers(
            "POST",
            "/api/v1/users",
            Some(&server.token),
            &[],
            json!({"username": name, "password": PASSWORD}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let (status, cookie, login) = server
        .raw_with_headers("POST", "/api/v1/auth/login", None, &[], json!({"username": name, "password": PASSWORD}))
        .await;
    assert_eq!(status, 200, "{login}");
    let cookie = cookie.split(';').next().unwrap_or_default().to_owned();
    let csrf = login["csrf_token"].as_str().expect("csrf").to_owned();
    let headers = [("cookie", cookie), ("x-csrf-token", csrf)];
    let (status, _, token) =
        server.raw_with_headers("POST", "/api/v1/tokens", None, &headers, json!({"name": "cli"})).await;
    assert_eq!(status, 201, "{token}");
    User {
        id: created["id"].as_str().expect("id").to_owned(),
        token: token["token"].as_str().expect("token").to_owned(),
    }
}

/// A request with a token.
pub async fn call(server: &TestServer, method: &str, path: &str, token: &str, body: Value) -> (u16, Value) {
    let (status, _, body) = server.raw_with_headers(method, path, Some(token), &[], body).await;
    (status, body)
}

/// A request as the server's admin.
pub async fn admin(server: &TestServer, method: &str, path: &str, body: Value) -> (u16, Value) {
    call(server, method, path, &server.token, body).await
}

/// A secret value no other test uses, shaped like an Anthropic key.
pub fn unique_value() -> String {
    format!("sk-ant-api03-REAL-{}-{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// The admin's personal workspace.
pub async fn personal_workspace(server: &TestServer) -> String {
    let (status, me) = admin(server, "GET", "/api/v1/me", json!({})).await;
    assert_eq!(status, 200, "{me}");
    me["workspaces"][0]["workspace_id"].as_str().expect("workspace").to_owned()
}

/// Creates a secret in a workspace as the server's admin; returns its id.
pub async fn create_secret(server: &TestServer, workspace: &str, body: Value) -> String {
    let (status, secret) = admin(server, "POST", &format!("/api/v1/workspaces/{workspace}/secrets"), body).await;
    assert_eq!(status, 201, "{secret}");
    secret["id"].as_str().expect("secret id").to_owned()
}

/// The server's database.
pub async fn database(server: &TestServer) -> sqlx::PgPool {
    sqlx::PgPool::connect(&server.database_url).await.expect("connecting to the server's database")
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// The tables (`table.column` for bytea columns) of the server's database in which `value`
/// occurs: as text in any row's text form, as its hex in a row (how `bytea` prints), or as raw
/// bytes in any `bytea` column.
pub async fn where_in_database(server: &TestServer, value: &str) -> Vec<String> {
    let mut connection = sqlx::PgConnection::connect(&server.database_url).await.expect("connecting");
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    )
    .fetch_all(&mut connection)
    .await
    .expect("tables");
    assert!(tables.iter().any(|t| t == "secrets"), "{tables:?}");
    let hex: String = value.bytes().map(|b| format!("{b:02x}")).collect();
    let mut found = Vec::new();
    for table in &tables {
        let rows: Vec<String> = sqlx::query_scalar(&format!("SELECT t::text FROM {table} t"))
            .fetch_all(&mut connection)
            .await
            .expect("rows");
        if rows.iter().any(|row| row.contains(value) || row.contains(&hex)) {
            found.push(table.clone());
        }
        let columns: Vec<String> = sqlx::query_scalar(
            "SELECT column_name::text FROM information_schema.columns WHERE table_name = $1 AND data_type = 'bytea'",
        )
        .bind(table)
        .fetch_all(&mut connection)
        .await
        .expect("columns");
        for column in columns {
            let cells =
                sqlx::query(&format!("SELECT {column} FROM {table}")).fetch_all(&mut connection).await.expect("cells");
            for cell in cells {
                let bytes: Option<Vec<u8>> = cell.try_get(0).expect("bytea");
                if bytes.is_some_and(|b| contains(&b, value.as_bytes())) {
                    found.push(format!("{table}.{column}"));
                }
            }
        }
    }
    found
}

/// A fresh Anthropic secret (a unique value) in the admin's workspace, attached to `agent` as
/// `ANTHROPIC_API_KEY`; returns the secret's id and its value.
pub async fn attach_anthropic_secret(server: &TestServer, agent: &str) -> (String, String) {
    let workspace = personal_workspace(server).await;
    let value = unique_value();
    let secret = create_secret(
        server,
        &workspace,
        serde_json::json!({"name": "anthropic", "preset": "anthropic", "value": value}),
    )
    .await;
    let attach = format!("/api/v1/agents/{agent}/secrets/ANTHROPIC_API_KEY");
    assert_eq!(admin(server, "PUT", &attach, serde_json::json!({"secret_id": secret})).await.0, 200);
    (secret, value)
}
