//! `GET /api/v1/limits`: what an agent's settings are held to on this server — each resource
//! limit's default, least and most (the ranges `agent_settings::check_limits` accepts and this
//! server's ceilings, `AGENTHOLD_MAX_*`), the turn time limit and auto-sleep, the bounds of a
//! model name, plain environment, attached secrets and an egress allow-list (with the presets
//! and the hosts each stands for), and the postures offered. Read from the same constants and
//! configuration the checks use, so a form can tell before sending what the server will say.
//! Nothing secret: any signed-in user may read it.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::agent_settings as settings;
use super::error::ApiError;
use super::openapi::Access;
use crate::auth::Principal;
use crate::permissions::Posture;
use crate::proxy_feed::egress;
use crate::state::AppState;

/// A number an agent may set: what it gets when it sets none, and the least and most accepted.
#[derive(Debug, Serialize, ToSchema)]
pub struct Bounds<T> {
    /// What an agent that sets none gets.
    default: T,
    /// The least accepted.
    min: T,
    /// The most accepted on this server (the wider of the API's range and the server's ceiling
    /// never applies: the smaller one does).
    max: T,
}

/// The resource limits (`limits` of an agent); they apply when its sandbox is made again.
#[derive(Debug, Serialize, ToSchema)]
pub struct ResourceBounds {
    /// CPUs.
    #[schema(inline)]
    cpus: Bounds<f64>,
    /// Memory, MiB.
    #[schema(inline)]
    memory_mib: Bounds<i32>,
    /// Processes.
    #[schema(inline)]
    pids: Bounds<i32>,
    /// Disk, MiB.
    #[schema(inline)]
    disk_mib: Bounds<i32>,
    /// A turn's time limit, seconds (`0` in a change: back to the default).
    #[schema(inline)]
    turn_seconds: Bounds<i64>,
    /// Seconds idle before the agent sleeps (`0`: never).
    #[schema(inline)]
    auto_sleep_secs: Bounds<i64>,
}

/// The bounds of a model name.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelBounds {
    /// The longest, in characters.
    max_chars: usize,
    /// The characters allowed besides ASCII letters and digits.
    punctuation: &'static str,
}

/// The bounds of an agent's plain environment.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnvBounds {
    /// The most variables.
    max_vars: usize,
    /// The longest value, bytes.
    max_value_bytes: usize,
}

/// An egress preset and the hosts it allows.
#[derive(Debug, Serialize, ToSchema)]
pub struct PresetHosts {
    /// Its name (`npm`).
    name: &'static str,
    /// The hosts it allows.
    hosts: &'static [&'static str],
}

/// The bounds of an egress allow-list.
#[derive(Debug, Serialize, ToSchema)]
pub struct EgressBounds {
    /// The most entries.
    max_entries: usize,
    /// The longest entry, characters.
    max_entry_chars: usize,
    /// The presets, in the order the API lists them.
    presets: Vec<PresetHosts>,
}

/// The postures an agent may choose.
#[derive(Debug, Serialize, ToSchema)]
pub struct PostureBounds {
    /// The ones this server accepts (not `autonomous` where `AGENTHOLD_FORBID_AUTONOMOUS`).
    offered: Vec<&'static str>,
    /// What an agent that names none runs with; `null`: none it could run with (it must name
    /// one).
    #[schema(required = true)]
    default: Option<&'static str>,
}

/// What an agent's settings are held to on this server.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentBounds {
    /// The resource limits.
    limits: ResourceBounds,
    /// A model name.
    model: ModelBounds,
    /// The plain environment.
    env: EnvBounds,
    /// The most secrets attached to one agent.
    max_secrets: i64,
    /// An egress allow-list (an agent's or a workspace's default).
    egress: EgressBounds,
    /// The postures.
    posture: PostureBounds,
    /// The longest login method id (`auth_method`).
    max_auth_method_chars: usize,
}

/// What an agent's settings are held to on this server: defaults, least and most of each limit,
/// the bounds of names and lists, the egress presets and the postures offered.
#[utoipa::path(
    get,
    path = "/api/v1/limits",
    operation_id = "agent_limits",
    tag = "agents",
    responses((status = 200, description = "The limits", body = AgentBounds)),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn show(State(state): State<AppState>, _principal: Principal) -> Result<Json<AgentBounds>, ApiError> {
    let config = &state.config;
    let (max_cpus, max_memory, max_pids) = config.limit_ceilings();
    let forbid = config.forbid_autonomous;
    let offered = [Posture::Autonomous, Posture::Guarded, Posture::Approval]
        .into_iter()
        .filter(|p| !(forbid && *p == Posture::Autonomous))
        .map(Posture::as_str)
        .collect();
    let default_posture =
        crate::permissions::posture::resolve(None, config.default_posture, forbid).ok().map(Posture::as_str);
    Ok(Json(AgentBounds {
        limits: ResourceBounds {
            cpus: Bounds {
                default: config.default_cpus,
                min: settings::CPUS_RANGE.0,
                max: max_cpus.min(settings::CPUS_RANGE.1),
            },
            memory_mib: Bounds {
                default: config.default_memory_mib,
                min: settings::MEMORY_MIB_RANGE.0,
                max: max_memory.min(settings::MEMORY_MIB_RANGE.1),
            },
            pids: Bounds {
                default: config.default_pids_limit,
                min: settings::PIDS_RANGE.0,
                max: max_pids.min(settings::PIDS_RANGE.1),
            },
            disk_mib: Bounds {
                default: config.default_disk_mib(),
                min: settings::DISK_MIB_RANGE.0,
                max: config.max_disk_mib.min(settings::DISK_MIB_RANGE.1),
            },
            turn_seconds: Bounds {
                default: i64::try_from(config.turn_timeout_secs).unwrap_or(i64::MAX),
                min: 1,
                max: config.max_turn_secs.min(settings::MAX_TURN_SECONDS),
            },
            auto_sleep_secs: Bounds {
                default: i64::try_from(config.auto_sleep_secs).unwrap_or(i64::MAX),
                min: 0,
                max: i64::from(settings::MAX_AUTO_SLEEP_SECS),
            },
        },
        model: ModelBounds { max_chars: settings::MAX_MODEL_BYTES, punctuation: settings::MODEL_PUNCTUATION },
        env: EnvBounds { max_vars: settings::MAX_ENV_VARS, max_value_bytes: settings::MAX_ENV_VALUE_BYTES },
        max_secrets: crate::store::secrets::MAX_PER_AGENT,
        egress: EgressBounds {
            max_entries: egress::MAX_ALLOW,
            max_entry_chars: egress::MAX_ENTRY_LEN,
            presets: egress::PRESETS
                .iter()
                .map(|&name| PresetHosts { name, hosts: egress::preset_hosts(name) })
                .collect(),
        },
        posture: PostureBounds { offered, default: default_posture },
        max_auth_method_chars: settings::MAX_AUTH_METHOD_CHARS,
    }))
}
