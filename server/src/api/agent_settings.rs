//! What an agent is made of — harness (with its command and the login method it is signed in
//! with), model, image, environment, limits — checked at the edge, the same way for
//! `POST /api/v1/agents` and `PATCH /api/v1/agents/{id}`, and what a change means for a running
//! agent: a new harness, model or environment restarts the harness once no turn runs; a new login
//! method applies the next time the harness asks to sign in; a new image or new limits apply when
//! the container is made again (`POST /api/v1/agents/{id}/rebuild`, or the next time it is
//! recreated).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use super::error::ApiError;
use crate::error_code::ErrorCode;
use crate::harness::{self, HarnessAdapter};
use crate::permissions::Posture;
use crate::secrets::validate;
use crate::state::AppState;
use crate::store::agents::{AgentRow, AgentSettings};

/// Resource limits (each absent one: the server's, or unchanged).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// CPUs.
    pub(super) cpus: Option<f64>,
    /// Memory, MiB.
    pub(super) memory_mib: Option<i32>,
    /// Processes.
    pub(super) pids: Option<i32>,
    /// Disk space, MiB: the sandbox's home and its writable layer (the files outside the home)
    /// may each hold this much, where the engine can enforce it (docs/security.md, "Disk").
    /// Applies when the container is made again (`rebuild`); a home keeps the size it was made
    /// with.
    pub(super) disk_mib: Option<i32>,
    /// Seconds of activity a turn may take (the time it waits in the queue or for a person does
    /// not count); `0` returns to the server's limit.
    pub(super) turn_seconds: Option<i64>,
    /// Seconds idle before the agent is put to sleep (0: never); `null`: the server's setting.
    #[serde(default, deserialize_with = "present_or_null")]
    #[schema(value_type = Option<i32>)]
    pub(super) auto_sleep_secs: Option<Option<i32>>,
}

/// A field that is present (even `null`) is `Some`.
fn present_or_null<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Option<i32>>, D::Error> {
    Ok(Some(Option::deserialize(deserializer)?))
}

/// The longest turn time limit an agent may set (30 days).
pub const MAX_TURN_SECONDS: i64 = 30 * 24 * 3600;

/// A turn time limit: `None` (absent) keeps `current`, `0` is the server's, else 1 s – 30 days
/// and at most the server's maximum (`AGENTHOLD_MAX_TURN_SECS`).
pub fn check_turn_seconds(
    state: &AppState,
    requested: Option<i64>,
    current: Option<i32>,
) -> Result<Option<i32>, ApiError> {
    let max = state.config.max_turn_secs;
    match requested {
        None => Ok(current),
        Some(0) => Ok(None),
        Some(seconds) if (1..=MAX_TURN_SECONDS).contains(&seconds) && seconds > max => Err(ApiError::bad_request(
            ErrorCode::LimitTooHigh,
            format!("limits.turn_seconds: at most {max} on this server (AGENTHOLD_MAX_TURN_SECS)"),
        )),
        Some(seconds) if (1..=MAX_TURN_SECONDS).contains(&seconds) => Ok(i32::try_from(seconds).ok()),
        Some(_) => Err(ApiError::bad_request(
            ErrorCode::InvalidLimits,
            format!("limits.turn_seconds: 1-{MAX_TURN_SECONDS} seconds, or 0 for the server's limit"),
        )),
    }
}

/// The longest model name accepted.
pub const MAX_MODEL_BYTES: usize = 200;
/// The characters of a model name besides ASCII letters and digits.
pub const MODEL_PUNCTUATION: &str = "-._:/@+";
/// The most plain environment variables an agent may have.
pub const MAX_ENV_VARS: usize = 128;
/// The longest plain environment value (32 KiB).
pub const MAX_ENV_VALUE_BYTES: usize = 32 * 1024;
/// The range of an agent's CPUs (below the server's ceiling too).
pub const CPUS_RANGE: (f64, f64) = (0.05, 256.0);
/// The range of an agent's memory, MiB.
pub const MEMORY_MIB_RANGE: (i32, i32) = (64, 1 << 20);
/// The range of an agent's process limit.
pub const PIDS_RANGE: (i32, i32) = (16, 1 << 20);
/// The range of an agent's disk, MiB.
pub const DISK_MIB_RANGE: (i32, i32) = (64, 1 << 24);
/// The longest auto-sleep time, seconds (a year).
pub const MAX_AUTO_SLEEP_SECS: i32 = 366 * 86_400;

/// The harness adapter `name`, if this server offers it (`fake` only in dev and test mode), with
/// `command` checked by it.
pub fn check_harness(
    state: &AppState,
    name: &str,
    command: Option<&[String]>,
) -> Result<&'static dyn HarnessAdapter, ApiError> {
    let adapter =
        harness::available(name, state.config.mode).map_err(|m| ApiError::bad_request(ErrorCode::UnknownHarness, m))?;
    adapter.validate(command).map_err(|m| ApiError::bad_request(ErrorCode::InvalidCommand, m))?;
    Ok(adapter)
}

/// A posture name (or alias), stored canonical; empty means the server's default. One the
/// server forbids is refused here already.
pub fn check_posture(state: &AppState, posture: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(name) = posture.filter(|p| !p.is_empty()) else { return Ok(None) };
    let posture = Posture::parse(&name).map_err(|e| ApiError::bad_request(ErrorCode::UnknownPosture, e.to_string()))?;
    if posture == Posture::Autonomous && state.config.forbid_autonomous {
        return Err(ApiError::bad_request(
            ErrorCode::AutonomousForbidden,
            "the server forbids the autonomous posture (AGENTHOLD_FORBID_AUTONOMOUS): choose guarded or approval",
        ));
    }
    Ok(Some(posture.as_str().to_owned()))
}

/// A policy (rules and a default, docs/permissions.md), checked and stored in its canonical
/// form; `None` means none.
pub fn check_policy(policy: Option<serde_json::Value>) -> Result<Option<serde_json::Value>, ApiError> {
    let Some(value) = policy else { return Ok(None) };
    let policy = crate::permissions::policy::Policy::parse(&value)
        .map_err(|e| ApiError::bad_request(ErrorCode::InvalidPolicy, e.to_string()))?;
    Ok(Some(policy.to_json()))
}

/// A model name (`claude-sonnet-4-5`, `anthropic/claude-sonnet-4-5`): printable ASCII without
/// spaces or quotes; empty means none.
pub fn check_model(model: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(model) = model.filter(|m| !m.is_empty()) else { return Ok(None) };
    let fine = |c: char| c.is_ascii_alphanumeric() || MODEL_PUNCTUATION.contains(c);
    if model.len() > MAX_MODEL_BYTES || !model.chars().all(fine) {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidModel,
            format!("a model name is at most {MAX_MODEL_BYTES} characters of A-Z a-z 0-9 - . _ : / @ +"),
        ));
    }
    Ok(Some(model))
}

/// The longest login method id accepted (`auth_method`).
pub const MAX_AUTH_METHOD_CHARS: usize = agenthold_core::acp::auth_methods::MAX_NAME_CHARS;

/// The ids of the login methods a harness advertised in its `initialize` answer that the server
/// may pass to `authenticate` (not `terminal` ones: a person runs those).
fn advertised_auth_methods(init: &Value) -> Vec<String> {
    use agenthold_core::acp::auth_methods::{self, MethodKind};
    let methods = auth_methods::read(init).into_iter();
    methods.filter(|m| !matches!(m.kind, MethodKind::Terminal { .. })).map(|m| m.id).collect()
}

/// A login method for the harness to be signed in with (`auth_method`): 1-128 characters
/// without control characters, and one the harness advertised when that is known (`advertised`:
/// its stored `initialize` answer); empty means none.
pub fn check_auth_method(method: Option<String>, advertised: Option<&Value>) -> Result<Option<String>, ApiError> {
    let Some(method) = method.filter(|m| !m.is_empty()) else { return Ok(None) };
    if method.chars().count() > MAX_AUTH_METHOD_CHARS || method.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            ErrorCode::UnknownAuthMethod,
            format!(
                "auth_method: a login method id is 1-{MAX_AUTH_METHOD_CHARS} characters without control characters"
            ),
        ));
    }
    if let Some(init) = advertised {
        let known = advertised_auth_methods(init);
        if !known.contains(&method) {
            let list = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
            return Err(ApiError::bad_request(
                ErrorCode::UnknownAuthMethod,
                format!("auth_method: the harness does not advertise {method:?}; it advertises: {list}"),
            ));
        }
    }
    Ok(Some(method))
}

fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 128
}

/// Plain (non-secret) environment variables: sane names, bounded values, and no name that looks
/// like a credential (those must be secrets).
pub fn check_env(env: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if env.len() > MAX_ENV_VARS {
        return Err(ApiError::bad_request(ErrorCode::InvalidEnv, "at most 128 environment variables"));
    }
    for (key, value) in env {
        if !valid_env_name(key)
            || key.starts_with("AGENTHOLD_")
            || value.len() > MAX_ENV_VALUE_BYTES
            || value.contains('\0')
        {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidEnv,
                format!(
                    "environment variable {key:?}: names are [A-Za-z_][A-Za-z0-9_]* (not AGENTHOLD_*), values at most 32 KiB without NUL"
                ),
            ));
        }
    }
    if let Some(key) = env.keys().find(|key| validate::looks_like_credential(key)) {
        return Err(ApiError::bad_request(
            ErrorCode::UseASecret,
            format!(
                "environment variable {key} looks like a credential (names ending in _KEY, _TOKEN, _SECRET, \
                 _PASSWORD, …): a plain env value is stored in clear and readable in the sandbox. Store it as a \
                 secret (POST /api/v1/workspaces/{{id}}/secrets) and attach it to the agent \
                 (PUT /api/v1/agents/{{id}}/secrets/{key}); the sandbox then only sees a placeholder. See docs/secrets.md"
            ),
        ));
    }
    Ok(())
}

/// Limits within range: cpus 0.05–256, memory 64 MiB–1 TiB, 16–1,048,576 processes, disk
/// 64 MiB–16 TiB.
pub fn check_limits(
    state: &AppState,
    cpus: f64,
    memory_mib: i32,
    pids_limit: i32,
    disk_mib: i32,
) -> Result<(), ApiError> {
    let within = |(low, high): (i32, i32), value: i32| (low..=high).contains(&value);
    if !(CPUS_RANGE.0..=CPUS_RANGE.1).contains(&cpus)
        || !within(MEMORY_MIB_RANGE, memory_mib)
        || !within(PIDS_RANGE, pids_limit)
        || !within(DISK_MIB_RANGE, disk_mib)
    {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidLimits,
            "limits: cpus 0.05-256, memory_mib 64-1048576, pids 16-1048576, disk_mib 64-16777216",
        ));
    }
    // The server's ceilings: one agent must not take the host (a fork bomb, a memory hog).
    let (max_cpus, max_memory, max_pids) = state.config.limit_ceilings();
    let over: Vec<String> = [
        (cpus > max_cpus).then(|| format!("cpus at most {max_cpus}")),
        (memory_mib > max_memory).then(|| format!("memory_mib at most {max_memory}")),
        (pids_limit > max_pids).then(|| format!("pids at most {max_pids}")),
        (disk_mib > state.config.max_disk_mib).then(|| format!("disk_mib at most {}", state.config.max_disk_mib)),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !over.is_empty() {
        return Err(ApiError::bad_request(
            ErrorCode::LimitTooHigh,
            format!(
                "over this server's maximum: {} (AGENTHOLD_MAX_CPUS, _MAX_MEMORY_MIB, _MAX_PIDS, _MAX_DISK_MIB)",
                over.join(", ")
            ),
        ));
    }
    Ok(())
}

/// An auto-sleep time: 0 (never) to a year.
pub fn check_auto_sleep(secs: Option<i32>) -> Result<Option<i32>, ApiError> {
    match secs {
        Some(secs) if !(0..=MAX_AUTO_SLEEP_SECS).contains(&secs) => Err(ApiError::bad_request(
            ErrorCode::InvalidLimits,
            "limits.auto_sleep_secs: 0 (never) to 31622400 (a year)",
        )),
        secs => Ok(secs),
    }
}

/// A Docker image reference (no whitespace, at most 512 bytes).
pub fn check_image(state: &AppState, image: &str) -> Result<(), ApiError> {
    if image.is_empty() || image.len() > 512 || image.chars().any(char::is_whitespace) {
        return Err(ApiError::bad_request(ErrorCode::InvalidImage, "image must be a Docker image reference"));
    }
    if !state.config.image_allowed(image) {
        return Err(ApiError::bad_request(
            ErrorCode::ImageNotAllowed,
            "this server does not allow that image; its operator lists the images agents may use (AGENTHOLD_ALLOWED_IMAGES)",
        ));
    }
    Ok(())
}

/// `PATCH /api/v1/agents/{id}`'s settings part: each field present replaces the current value.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsPatch {
    pub(super) harness: Option<String>,
    pub(super) command: Option<Vec<String>>,
    /// `""` clears it.
    pub(super) model: Option<String>,
    pub(super) env: Option<BTreeMap<String, String>>,
    pub(super) image: Option<String>,
    pub(super) limits: Option<Limits>,
    /// `""` returns to the server's default.
    pub(super) posture: Option<String>,
    /// `null` removes it.
    pub(super) policy: Option<Option<serde_json::Value>>,
    /// `""` clears it.
    pub(super) auth_method: Option<String>,
}

/// When a changed setting reaches the running agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Impact {
    /// The harness restarts once no turn runs (its sessions are loaded again).
    RestartsHarness,
    /// When the sandbox is made again (`POST /api/v1/agents/{id}/rebuild`).
    NeedsRebuild,
    /// At once (the gate's next request, the next sign-in, the idle timer).
    AtOnce,
    /// From the agent's next prompt.
    NextPrompt,
    /// The egress proxy follows within seconds.
    Proxy,
}

/// One setting a change made, and when it reaches the running agent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct FieldChange {
    /// The setting: `harness`, `command`, `model`, `env`, `image`, `limits`, `turn_seconds`,
    /// `auto_sleep_secs`, `posture`, `policy`, `auth_method` or `egress`.
    pub field: String,
    /// When it applies.
    pub impact: Impact,
}

/// What a patch changed, and what that means for the running agent.
#[derive(Debug, Default)]
pub struct Change {
    /// The fields that changed, with their new values (env: names only).
    pub fields: serde_json::Map<String, Value>,
    /// Each changed field and when it applies, in the order above.
    pub impacts: Vec<FieldChange>,
    /// The harness must restart (once no turn runs) to take it.
    pub restarts_harness: bool,
    /// The posture or policy changed: the running harness's gate takes it at once.
    pub gate_changed: bool,
    /// The login method changed: the running harness signs in with it the next time it asks.
    pub auth_method_changed: bool,
    /// The container must be made again (`rebuild`) to take it.
    pub needs_rebuild: bool,
}

/// Applies `patch` to `agent`'s settings, checking every field (a login method against what its
/// running harness advertised, `advertised`, unless the harness changes too); the new settings
/// and what changed.
pub fn apply(
    state: &AppState,
    agent: &AgentRow,
    patch: SettingsPatch,
    advertised: Option<&Value>,
) -> Result<(AgentSettings, Change), ApiError> {
    let harness_name = patch.harness.unwrap_or_else(|| agent.harness.clone());
    let command = match (&patch.command, harness_name == agent.harness) {
        (Some(command), _) => Some(command.clone()),
        (None, true) => agent.command.clone(),
        (None, false) => None,
    };
    let adapter = check_harness(state, &harness_name, command.as_deref())?;
    let model = match patch.model {
        Some(model) => check_model(Some(model))?,
        None => agent.model.clone(),
    };
    let posture = match patch.posture {
        Some(posture) => check_posture(state, Some(posture))?,
        None => agent.posture.clone(),
    };
    let policy = match patch.policy {
        Some(policy) => check_policy(policy)?,
        None => agent.policy.clone(),
    };
    let env: Vec<(String, String)> = match patch.env {
        Some(env) => {
            check_env(&env)?;
            env.into_iter().collect()
        }
        None => agent.env.clone(),
    };
    let image = patch.image.unwrap_or_else(|| agent.image.clone());
    check_image(state, &image)?;
    let auth_method = match patch.auth_method {
        Some(method) => {
            // What the running harness advertised says nothing of a new one.
            let same_harness = harness_name == agent.harness && command == agent.command;
            check_auth_method(Some(method), advertised.filter(|_| same_harness))?
        }
        None => agent.auth_method.clone(),
    };
    let limits = patch.limits.unwrap_or_default();
    let cpus = limits.cpus.unwrap_or(agent.cpus);
    let memory_mib = limits.memory_mib.unwrap_or(agent.memory_mib);
    let pids_limit = limits.pids.unwrap_or(agent.pids_limit);
    let disk_mib = limits.disk_mib.or(agent.disk_mib);
    check_limits(state, cpus, memory_mib, pids_limit, disk_mib.unwrap_or_else(|| state.config.default_disk_mib()))?;
    let turn_timeout_secs = check_turn_seconds(state, limits.turn_seconds, agent.turn_timeout_secs)?;
    let auto_sleep_secs = match limits.auto_sleep_secs {
        Some(secs) => check_auto_sleep(secs)?,
        None => agent.auto_sleep_secs,
    };
    let settings = AgentSettings {
        harness: adapter.name().to_owned(),
        command,
        model,
        posture,
        policy,
        env,
        image,
        cpus,
        memory_mib,
        pids_limit,
        disk_mib,
        turn_timeout_secs,
        auto_sleep_secs,
        auth_method,
    };

    let mut change = Change::default();
    let mut changed = |name: &str, value: Value, restart: bool, rebuild: bool| {
        let impact = match (restart, rebuild, name) {
            (true, _, _) => Impact::RestartsHarness,
            (_, true, _) => Impact::NeedsRebuild,
            (_, _, "turn_seconds") => Impact::NextPrompt,
            _ => Impact::AtOnce,
        };
        change.impacts.push(FieldChange { field: name.to_owned(), impact });
        change.fields.insert(name.to_owned(), value);
        change.restarts_harness |= restart;
        change.needs_rebuild |= rebuild;
    };
    if settings.harness != agent.harness {
        changed("harness", json!(settings.harness), true, false);
    }
    if settings.command != agent.command {
        changed("command", json!(settings.command), true, false);
    }
    if settings.model != agent.model {
        changed("model", json!(settings.model), true, false);
    }
    // The posture and policy need no restart: the running harness's gate takes them at once (its
    // next request, and its questions still waiting); the harness's own mode does not change.
    if settings.policy != agent.policy {
        changed("policy", json!(settings.policy), false, false);
    }
    if settings.posture != agent.posture {
        changed("posture", json!(settings.posture), false, false);
    }
    let sorted = |env: &[(String, String)]| env.iter().cloned().collect::<BTreeMap<_, _>>();
    if sorted(&settings.env) != sorted(&agent.env) {
        changed("env", json!(settings.env.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>()), true, false);
    }
    if settings.image != agent.image {
        changed("image", json!(settings.image), false, true);
    }
    if (settings.cpus, settings.memory_mib, settings.pids_limit, settings.disk_mib)
        != (agent.cpus, agent.memory_mib, agent.pids_limit, agent.disk_mib)
    {
        let limits = json!({"cpus": settings.cpus, "memory_mib": settings.memory_mib, "pids": settings.pids_limit,
            "disk_mib": settings.disk_mib.unwrap_or_else(|| state.config.default_disk_mib())});
        changed("limits", limits, false, true);
    }
    if settings.turn_timeout_secs != agent.turn_timeout_secs {
        // Applies from the agent's next prompt on; no restart, no rebuild.
        changed("turn_seconds", json!(settings.turn_timeout_secs), false, false);
    }
    if settings.auto_sleep_secs != agent.auto_sleep_secs {
        changed("auto_sleep_secs", json!(settings.auto_sleep_secs), false, false);
    }
    if settings.auth_method != agent.auth_method {
        // No restart: the harness is signed in with it the next time it asks.
        changed("auth_method", json!(settings.auth_method), false, false);
    }
    change.gate_changed = settings.policy != agent.policy || settings.posture != agent.posture;
    change.auth_method_changed = settings.auth_method != agent.auth_method;
    Ok((settings, change))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(result: Result<Option<String>, ApiError>) -> String {
        match result {
            Err(ApiError::BadRequest { code: ErrorCode::UnknownAuthMethod, message }) => message,
            other => panic!("expected UNKNOWN_AUTH_METHOD, got {other:?}"),
        }
    }

    #[test]
    fn an_auth_method_is_bounded_and_one_the_running_harness_advertised() {
        assert_eq!(check_auth_method(None, None).ok(), Some(None));
        assert_eq!(check_auth_method(Some(String::new()), None).ok(), Some(None), "empty clears it");
        assert_eq!(
            check_auth_method(Some("any".to_owned()), None).ok(),
            Some(Some("any".to_owned())),
            "nothing known yet"
        );
        refused(check_auth_method(Some("x".repeat(129)), None));
        refused(check_auth_method(Some("a\nb".to_owned()), None));
        let init = json!({"authMethods": [
            {"id": "acme-key", "name": "Key"},
            {"id": "acme-env", "name": "Env", "type": "env_var", "vars": [{"name": "ACME_API_KEY"}]},
            {"id": "acme-login", "name": "Login", "type": "terminal", "args": ["login"]},
        ]});
        assert_eq!(check_auth_method(Some("acme-env".to_owned()), Some(&init)).ok(), Some(Some("acme-env".to_owned())));
        let message = refused(check_auth_method(Some("acme-login".to_owned()), Some(&init)));
        assert!(
            message.ends_with("it advertises: acme-key, acme-env"),
            "a terminal method is run by a person: {message}"
        );
        let message = refused(check_auth_method(Some("x".to_owned()), Some(&json!({}))));
        assert!(message.ends_with("none"), "{message}");
    }
}
