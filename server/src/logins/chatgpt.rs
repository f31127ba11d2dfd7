//! The ChatGPT login (Codex): the `auth.json` that `codex login` writes, its OAuth refresh
//! exchange, and the placeholder `auth.json` a sandbox gets (ACP.md §4). Pure: JSON in, JSON out.
//!
//! Only the server refreshes (refresh tokens rotate: a second user of one logs the first out).
//! The sandbox's `auth.json` holds JWT-shaped placeholder tokens whose `exp` lies far in the
//! future, so Codex never refreshes on its own; the proxy swaps the access-token placeholder for
//! the current real token on `chatgpt.com/backend-api/`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::ids::AgentId;

/// Codex's OAuth client id (`codex-rs/login`).
pub const CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";

/// Where the refresh exchange goes.
pub const TOKEN_HOST: &str = "auth.openai.com";

/// The refresh exchange's path.
pub const TOKEN_PATH: &str = "/oauth/token";

/// 2100-01-01: the placeholders' `exp`, so that Codex never thinks them expired.
const FAR_FUTURE: i64 = 4_102_444_800;

/// The tokens of a ChatGPT login (what is sealed); its `Debug` shows none of them.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tokens {
    /// The short-lived access token (a JWT).
    pub access_token: String,
    /// The single-use refresh token.
    pub refresh_token: String,
    /// The identity token (a JWT: email, plan, account).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_token: Option<String>,
    /// The ChatGPT account (workspace) id (not secret: sent as `ChatGPT-Account-ID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
}

/// Never prints a token.
impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens").field("account_id", &self.account_id).finish_non_exhaustive()
    }
}

fn token(value: Option<&Value>, name: &str) -> Result<String, String> {
    let text = value.and_then(Value::as_str).ok_or_else(|| format!("auth.json: tokens.{name} is missing"))?;
    if text.is_empty() || text.len() > 16 * 1024 || !text.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("auth.json: tokens.{name} is not a token"));
    }
    Ok(text.to_owned())
}

/// Reads the `auth.json` `codex login` writes (ChatGPT mode). The error never quotes a token.
pub fn parse_auth_json(text: &str) -> Result<Tokens, String> {
    let json: Value = serde_json::from_str(text).map_err(|e| format!("auth.json is not JSON (line {})", e.line()))?;
    let mode = json.get("auth_mode").and_then(Value::as_str);
    if mode.is_some_and(|m| m != "chatgpt") {
        return Err(format!(
            "auth.json is in {:?} mode; connect a ChatGPT login (auth_mode chatgpt)",
            mode.unwrap_or("")
        ));
    }
    let tokens = json.get("tokens").filter(|t| t.is_object()).ok_or("auth.json has no tokens (not a ChatGPT login)")?;
    let optional = |name: &str| token(tokens.get(name), name).ok();
    Ok(Tokens {
        access_token: token(tokens.get("access_token"), "access_token")?,
        refresh_token: token(tokens.get("refresh_token"), "refresh_token")?,
        id_token: optional("id_token"),
        account_id: tokens.get("account_id").and_then(Value::as_str).map(str::to_owned).filter(|a| a.len() <= 200),
    })
}

/// A JWT's claims (unverified: only what the token says of itself).
pub fn claims(jwt: &str) -> Option<Value> {
    let payload = jwt.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// When a JWT says it expires.
pub fn expires_at(jwt: &str) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(claims(jwt)?.get("exp")?.as_i64()?, 0)
}

/// The refresh exchange's body.
pub fn refresh_body(refresh_token: &str) -> Value {
    json!({"client_id": CLIENT_ID, "grant_type": "refresh_token", "refresh_token": refresh_token})
}

/// Why a refresh failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefreshError {
    /// The login is gone (expired, reused or invalidated refresh token, or 401): connect again.
    Permanent(String),
    /// Try again later.
    Transient(String),
}

/// The tokens after a refresh answered `status` with `body` (rotated tokens replace the old;
/// those the answer lacks are kept).
pub fn after_refresh(old: &Tokens, status: u16, body: &[u8]) -> Result<Tokens, RefreshError> {
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if !(200..300).contains(&status) {
        let code = json
            .pointer("/error/code")
            .or_else(|| json.get("code"))
            .or_else(|| json.get("error"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let reason = format!(
            "the token endpoint answered {status}{}",
            if code.is_empty() { String::new() } else { format!(" ({code})") }
        );
        let permanent = status == 401
            || matches!(code, "refresh_token_expired" | "refresh_token_reused" | "refresh_token_invalidated");
        return Err(if permanent { RefreshError::Permanent(reason) } else { RefreshError::Transient(reason) });
    }
    let get = |name: &str| json.get(name).and_then(Value::as_str).map(str::to_owned);
    let access_token =
        get("access_token").ok_or_else(|| RefreshError::Transient("no access_token in the answer".to_owned()))?;
    Ok(Tokens {
        access_token,
        refresh_token: get("refresh_token").unwrap_or_else(|| old.refresh_token.clone()),
        id_token: get("id_token").or_else(|| old.id_token.clone()),
        account_id: old.account_id.clone(),
    })
}

fn b64(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

/// A JWT-shaped placeholder: a header, the claims, and a signature that is the placeholder's own
/// marker (`agenthold…`), so it is distinct per agent and recognisable.
fn placeholder_jwt(claims: &Value, marker: &str) -> String {
    format!("{}.{}.{marker}", b64(&json!({"alg": "none", "typ": "JWT"})), b64(claims))
}

/// The access-token placeholder for an agent (what the proxy replaces on `chatgpt.com`). It
/// depends on the marker only, so a refresh of the real token leaves it as the sandbox has it.
pub fn access_placeholder(marker: &str) -> String {
    placeholder_jwt(&json!({"exp": FAR_FUTURE}), marker)
}

/// What may be kept in clear of a login (no credential): the account id and the identity
/// token's claims (email, plan, account), for the sandbox's `auth.json`.
pub fn public_part(tokens: &Tokens) -> Value {
    json!({"account_id": tokens.account_id, "id_claims": tokens.id_token.as_deref().and_then(claims)})
}

/// The `auth.json` a sandbox gets: ChatGPT mode, placeholder tokens (the identity token keeps the
/// real one's claims — email, plan, account — with a far `exp`), the real account id. `public`
/// is [`public_part`].
pub fn placeholder_auth_json(public: &Value, marker: &str, now: DateTime<Utc>) -> String {
    let mut id_claims = public.get("id_claims").filter(|c| c.is_object()).cloned().unwrap_or_else(|| json!({}));
    id_claims["exp"] = json!(FAR_FUTURE);
    json!({
        "auth_mode": "chatgpt",
        "OPENAI_API_KEY": null,
        "tokens": {
            "id_token": placeholder_jwt(&id_claims, &format!("{marker}-id")),
            "access_token": access_placeholder(marker),
            "refresh_token": format!("{marker}-refresh"),
            "account_id": public.get("account_id"),
        },
        "last_refresh": now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    })
    .to_string()
}

/// What the proxy answers a sandbox's own refresh request with: the placeholders of its
/// `auth.json` again (they never expire), as the token endpoint would shape them.
pub fn placeholder_token_answer(public: &Value, marker: &str) -> String {
    let file: Value = serde_json::from_str(&placeholder_auth_json(public, marker, Utc::now())).unwrap_or(Value::Null);
    json!({
        "access_token": file["tokens"]["access_token"],
        "refresh_token": file["tokens"]["refresh_token"],
        "id_token": file["tokens"]["id_token"],
        "token_type": "Bearer",
        "expires_in": FAR_FUTURE - Utc::now().timestamp(),
    })
    .to_string()
}

/// A per-agent marker (`agenthold-login-…`, see `logins::placeholder`).
pub fn marker(seed: &str, agent_id: AgentId) -> String {
    super::placeholder(seed, agent_id, super::kinds::LoginKind::ChatgptLogin)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: Value) -> String {
        format!("{}.{}.sig", b64(&json!({"alg": "RS256"})), b64(&claims))
    }

    fn auth_json() -> String {
        json!({"auth_mode": "chatgpt", "OPENAI_API_KEY": null, "tokens": {
            "id_token": jwt(json!({"email": "a@example.com", "exp": 1_700_000_000})),
            "access_token": jwt(json!({"exp": 1_800_000_000, "sub": "u"})),
            "refresh_token": "rt-REAL-refresh-token",
            "account_id": "acct-1"}, "last_refresh": "2026-11-29T12:34:56.789Z"})
        .to_string()
    }

    #[test]
    fn reads_a_chatgpt_auth_json_and_refuses_others_without_quoting_tokens() {
        let tokens = parse_auth_json(&auth_json()).expect("parses");
        assert_eq!(
            (tokens.refresh_token.as_str(), tokens.account_id.as_deref()),
            ("rt-REAL-refresh-token", Some("acct-1"))
        );
        assert_eq!(expires_at(&tokens.access_token).map(|t| t.timestamp()), Some(1_800_000_000));
        let api_key = json!({"auth_mode": "apikey", "OPENAI_API_KEY": "sk-secret-key"}).to_string();
        let error = parse_auth_json(&api_key).expect_err("api key mode");
        assert!(error.contains("apikey") && !error.contains("sk-secret"), "{error}");
        assert!(parse_auth_json("{not json").expect_err("json").contains("not JSON"));
        let broken = json!({"tokens": {"access_token": "has space in it", "refresh_token": "rt-x-xxxxxx"}}).to_string();
        let error = parse_auth_json(&broken).expect_err("bad token");
        assert!(error.contains("access_token") && !error.contains("space"), "{error}");
    }

    #[test]
    fn a_refresh_rotates_tokens_and_says_which_failures_are_permanent() {
        let old = parse_auth_json(&auth_json()).expect("parses");
        let answer = json!({"access_token": "new-access-token", "refresh_token": "new-refresh"}).to_string();
        let new = after_refresh(&old, 200, answer.as_bytes()).expect("ok");
        assert_eq!((new.access_token.as_str(), new.refresh_token.as_str()), ("new-access-token", "new-refresh"));
        assert_eq!(new.id_token, old.id_token, "kept when not rotated");
        let reused = json!({"error": {"code": "refresh_token_reused", "message": "already used"}}).to_string();
        assert!(
            matches!(after_refresh(&old, 400, reused.as_bytes()), Err(RefreshError::Permanent(r)) if r.contains("refresh_token_reused"))
        );
        assert!(matches!(after_refresh(&old, 401, b""), Err(RefreshError::Permanent(_))));
        assert!(matches!(after_refresh(&old, 503, b"busy"), Err(RefreshError::Transient(_))));
        assert!(matches!(after_refresh(&old, 200, b"{}"), Err(RefreshError::Transient(_))));
        assert_eq!(refresh_body("rt")["client_id"], CLIENT_ID);
    }

    #[test]
    fn the_sandbox_s_auth_json_holds_placeholders_that_never_expire() {
        let tokens = parse_auth_json(&auth_json()).expect("parses");
        let text = placeholder_auth_json(&public_part(&tokens), "agenthold-login-abc", Utc::now());
        assert!(!text.contains("rt-REAL") && !text.contains(&tokens.access_token), "{text}");
        let file: Value = serde_json::from_str(&text).expect("json");
        let access = file["tokens"]["access_token"].as_str().expect("access");
        assert_eq!(access, access_placeholder("agenthold-login-abc"));
        assert_eq!(claims(access).expect("claims")["exp"], FAR_FUTURE);
        let id = file["tokens"]["id_token"].as_str().expect("id");
        assert_eq!(claims(id).expect("claims")["email"], "a@example.com");
        assert_eq!(
            (file["auth_mode"].as_str(), file["tokens"]["account_id"].as_str()),
            (Some("chatgpt"), Some("acct-1"))
        );
        assert!(access.bytes().all(|b| b.is_ascii_graphic()));
    }
}
