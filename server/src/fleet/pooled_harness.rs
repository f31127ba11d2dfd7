//! Harnesses the warm pool starts ahead (docs/design.md, "Pooled harnesses"): in a pooled
//! sandbox made for a *profile* (a harness, its model, the variables its keys come in), the pool
//! starts the harness, has it answer `initialize` and open a session (`session/new` with the
//! folder and MCP servers the claiming agent's sessions get), so an agent that claims it sends
//! its first prompt to a harness and a session that are already up.
//!
//! The harness is started with what the agent's own start will hold, bound to no one yet:
//! *pool placeholders* in the profile's variables (fresh, shaped like the provider's keys) and a
//! fresh proxy identity that the proxy admits to agenthold's MCP route only (with the MCP
//! credential of the id the agent will get), so the session opened ahead connects to the MCP
//! server the agent's sessions are offered — an unclaimed harness reaches nothing else. At the
//! claim the server binds them to the agent (its secrets are attached under those placeholders,
//! the identity becomes the agent's), then compares the start the agent would have had with the
//! pooled one ([`differences`]): equal, the agent takes the running harness over; not, it says
//! why and the harness is dropped (the sandbox is still the agent's; its first prompt starts the
//! harness the ordinary way).
//!
//! - [`PooledProfile`] and [`parse_profiles`]: `AGENTHOLD_WARM_POOL_HARNESSES`.
//! - [`plan`]: the start of a pooled harness (pure).
//! - [`warm`] (`warm.rs`): starts it over the held tunnel, reads its `initialize` answer, runs a
//!   throwaway turn for a harness that boots services at its first prompt, opens the spare
//!   session; [`Keeper`] reads the tunnel until the claim (a harness that exits or whose tunnel
//!   closes meanwhile is not handed over).
//! - [`targets`]: how many each profile keeps (pure); [`refused_since`]: what the proxy refused
//!   its sandbox before the claim.

mod warm;

use std::collections::BTreeMap;

pub use warm::{Keeper, WarmError, Warmed, warm};

use crate::harness::LaunchContext;
use crate::proxy_feed::Identity;
use crate::store::agents::AgentRow;
use crate::supervisor::sandbox_env::{HarnessStart, Shared};

/// The channel a pooled harness runs on (the first a sandbox has).
pub const CHANNEL: u32 = 1;
/// The most a pooled harness may print before its `initialize` answer ends.
const MAX_INIT_BYTES: usize = 1 << 20;

/// What a pooled harness is started for: agents of this harness and model whose secrets come in
/// exactly these variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PooledProfile {
    /// The harness adapter's name.
    pub harness: String,
    /// The model (`None`: the harness's own default).
    pub model: Option<String>,
    /// The variables its pool placeholders are in, sorted.
    pub variables: Vec<String>,
}

impl PooledProfile {
    /// Whether an agent of `harness` and `model` with secrets attached under `variables` (any
    /// order) may take a harness of this profile.
    pub fn fits(&self, harness: &str, model: Option<&str>, variables: &[String]) -> bool {
        let mut wanted = variables.to_vec();
        wanted.sort();
        wanted.dedup();
        self.harness == harness && self.model.as_deref() == model.filter(|m| !m.is_empty()) && self.variables == wanted
    }
}

impl std::fmt::Display for PooledProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.harness)?;
        if let Some(model) = &self.model {
            write!(f, "@{model}")?;
        }
        if !self.variables.is_empty() {
            write!(f, ":{}", self.variables.join("+"))?;
        }
        Ok(())
    }
}

/// Parses `AGENTHOLD_WARM_POOL_HARNESSES`: profiles separated by commas, each
/// `harness[@model][:VARIABLE[+VARIABLE…]]`; without variables, the first secret preset's
/// variable of the harness (`ANTHROPIC_API_KEY` for `claude-code`). At most 8 profiles.
pub fn parse_profiles(text: &str) -> Result<Vec<PooledProfile>, String> {
    let mut profiles = Vec::new();
    for item in text.split(',').map(str::trim).filter(|item| !item.is_empty()) {
        let (head, variables) = match item.split_once(':') {
            Some((head, variables)) => (head, Some(variables)),
            None => (item, None),
        };
        let (harness, model) = match head.split_once('@') {
            Some((harness, model)) => (harness, Some(model)),
            None => (head, None),
        };
        let adapter = crate::harness::adapter(harness).ok_or_else(|| format!("{item:?}: no harness {harness:?}"))?;
        if harness == "command" {
            return Err(format!("{item:?}: a command harness's program is the agent's own; it cannot be pooled"));
        }
        let model = match model {
            Some(model) if model.is_empty() || model.len() > 200 || model.chars().any(char::is_whitespace) => {
                return Err(format!("{item:?}: a model is a name without spaces, at most 200 characters"));
            }
            model => model.map(str::to_owned),
        };
        let mut variables: Vec<String> = match variables {
            Some(list) => list.split('+').map(str::to_owned).collect(),
            None => adapter.profile().secrets.first().map(|(_, variable)| (*variable).to_owned()).into_iter().collect(),
        };
        for variable in &variables {
            crate::secrets::validate::secret_env_name(variable).map_err(|m| format!("{item:?}: {m}"))?;
        }
        variables.sort();
        variables.dedup();
        let profile = PooledProfile { harness: harness.to_owned(), model, variables };
        if profiles.contains(&profile) {
            return Err(format!("{item:?} is listed twice"));
        }
        profiles.push(profile);
    }
    if profiles.len() > 8 {
        return Err(format!("at most 8 pooled harness profiles ({} given)", profiles.len()));
    }
    Ok(profiles)
}

/// How many pooled harnesses of one profile are kept when demand is high.
pub const MAX_PER_PROFILE: usize = 4;

/// How many pooled harnesses each profile keeps, given how many of its harnesses were claimed
/// in the last minute (`recent`) and what one costs (`idle_mib`), within `budget_mib` for them
/// all. Each profile wants one, and one more for every two claims in the last minute (a claimed
/// harness's replacement takes seconds to start), at most [`MAX_PER_PROFILE`]. The budget goes
/// first to one of each profile, in the order listed, then one more at a time round the
/// profiles that want more; what does not fit is not kept. Pure.
pub fn targets(idle_mib: &[u32], recent: &[usize], budget_mib: u64) -> Vec<usize> {
    let wanted: Vec<usize> = recent.iter().map(|claims| (1 + claims / 2).min(MAX_PER_PROFILE)).collect();
    let mut kept = vec![0; idle_mib.len()];
    let mut left = budget_mib;
    loop {
        let mut added = false;
        for (i, cost) in idle_mib.iter().enumerate() {
            let cost = u64::from(*cost);
            if kept[i] < wanted.get(i).copied().unwrap_or(1) && cost <= left {
                kept[i] += 1;
                left -= cost;
                added = true;
            }
        }
        if !added {
            return kept;
        }
    }
}

/// Where a pooled harness starts.
#[derive(Debug, Clone)]
pub struct PlanContext {
    /// The image of its sandbox.
    pub image: String,
    /// agenthold's tools inside the sandbox.
    pub tools_dir: String,
    /// The home inside the sandbox (the agent's to be).
    pub home_dir: String,
    /// Who it runs as.
    pub user: Option<String>,
    /// The memory its sandbox has (the server's default: Node's heap follows it).
    pub memory_mib: i32,
    /// `host:port` of the egress proxy as the sandbox reaches it (`None`: no proxy).
    pub proxy_addr: Option<String>,
    /// The MCP servers an agent of this id is offered.
    pub mcp_servers: Vec<agent_client_protocol::v1::schema::McpServer>,
}

/// A pooled harness's start, with what it is bound to at the claim.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The profile it was made for.
    pub profile: PooledProfile,
    /// Program, environment (the order it applies in), folder and user.
    pub argv: Vec<String>,
    /// See [`Self::argv`].
    pub env: Vec<(String, String)>,
    /// See [`Self::argv`].
    pub cwd: String,
    /// See [`Self::argv`].
    pub user: Option<String>,
    /// Each profile variable with its pool placeholder.
    pub placeholders: BTreeMap<String, String>,
    /// The proxy identity in its environment (`None`: no proxy).
    pub identity: Option<Identity>,
    /// When it was made (milliseconds since the Unix epoch): anything the proxy refused from
    /// its sandbox's address since then was its.
    pub made_at_ms: u64,
    /// The MCP servers the agent's sessions will be offered (its id is the sandbox's), for the
    /// session opened ahead.
    pub mcp_servers: Vec<agent_client_protocol::v1::schema::McpServer>,
}

impl Plan {
    /// The pool placeholder in `variable`, if the harness has one there.
    pub fn placeholder(&self, variable: &str) -> Option<&str> {
        self.placeholders.get(variable).map(String::as_str)
    }
}

/// The agent a pooled harness is started as: the profile's harness and model, the server's
/// defaults, nothing of anyone's.
fn pool_agent(profile: &PooledProfile, context: &PlanContext) -> AgentRow {
    AgentRow {
        id: crate::ids::AgentId(uuid::Uuid::nil()),
        workspace_id: uuid::Uuid::nil(),
        created_by: None,
        name: String::new(),
        harness: profile.harness.clone(),
        command: None,
        model: profile.model.clone(),
        posture: None,
        policy: None,
        env: Vec::new(),
        image: context.image.clone(),
        driver: "docker".to_owned(),
        engine: crate::sandbox::LOCAL_ENGINE.to_owned(),
        permission_policy: String::new(),
        cpus: 0.0,
        memory_mib: context.memory_mib,
        pids_limit: 0,
        disk_mib: None,
        turn_timeout_secs: None,
        login_user_id: None,
        sandbox_login_at: None,
        auto_sleep_secs: None,
        auth_method: None,
        desired_state: "awake".to_owned(),
        created_at: chrono::Utc::now(),
    }
}

/// The start of a harness of `profile`: the adapter's launch as for an agent with the server's
/// defaults, fresh pool placeholders in the profile's variables (by variable, as an agent's
/// attached secrets come), a fresh proxy identity, the proxy's CA — exactly the order an agent's
/// own start has ([`crate::supervisor::sandbox_env::shared`]).
pub fn plan(profile: &PooledProfile, context: &PlanContext) -> Result<Plan, String> {
    let adapter = crate::harness::adapter(&profile.harness).ok_or("unknown harness")?;
    let presets = adapter.profile().secrets;
    let placeholders: BTreeMap<String, String> = profile
        .variables
        .iter()
        .map(|variable| {
            let preset = presets.iter().find(|(_, v)| v == variable).map(|(preset, _)| *preset).unwrap_or("custom");
            let preset =
                crate::secrets::presets::Preset::parse(preset).unwrap_or(crate::secrets::presets::Preset::Custom);
            (variable.clone(), preset.placeholder())
        })
        .collect();
    let mut env: Vec<(String, String)> = placeholders.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let identity = context.proxy_addr.as_ref().map(|_| crate::proxy_feed::identity::fresh());
    if let (Some(identity), Some(addr)) = (&identity, &context.proxy_addr) {
        env.extend(crate::proxy_feed::identity::proxy_env(identity, addr));
        env.extend(agenthold_sandboxd::daemon::proxy_ca::trust_env());
    }
    let agent = pool_agent(profile, context);
    let launch_context = LaunchContext { agent: &agent, tools_dir: &context.tools_dir, home_dir: &context.home_dir };
    let start = crate::supervisor::sandbox_env::harness_start(&launch_context, Shared { env, logins: Vec::new() })?;
    Ok(Plan {
        profile: profile.clone(),
        argv: start.argv,
        env: start.env,
        cwd: context.home_dir.clone(),
        user: context.user.clone(),
        placeholders,
        identity,
        made_at_ms: u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0),
        mcp_servers: context.mcp_servers.clone(),
    })
}

/// What differs between a pooled harness's start and the one the claiming agent's would be, in
/// words naming variables and settings, never values; empty when they are the same (the
/// environments compared as each process sees them: a later variable wins).
pub fn differences(pooled: &Plan, agent: &HarnessStart, agent_cwd: &str, agent_user: Option<&str>) -> Vec<String> {
    let mut found = Vec::new();
    if pooled.argv != agent.argv {
        found.push("the harness's command".to_owned());
    }
    if pooled.cwd != agent_cwd {
        found.push("the folder it starts in (a repository)".to_owned());
    }
    if pooled.user.as_deref() != agent_user {
        found.push("the user it runs as".to_owned());
    }
    let seen = |env: &[(String, String)]| env.iter().cloned().collect::<BTreeMap<String, String>>();
    let (pooled_env, agent_env) = (seen(&pooled.env), seen(&agent.env));
    let missing: Vec<&str> = agent_env.keys().filter(|k| !pooled_env.contains_key(*k)).map(String::as_str).collect();
    let extra: Vec<&str> = pooled_env.keys().filter(|k| !agent_env.contains_key(*k)).map(String::as_str).collect();
    let changed: Vec<&str> = agent_env
        .iter()
        .filter(|(k, v)| pooled_env.get(*k).is_some_and(|pooled| pooled != *v))
        .map(|(k, _)| k.as_str())
        .collect();
    if !missing.is_empty() {
        found.push(format!("variables the pooled harness lacks: {}", missing.join(", ")));
    }
    if !extra.is_empty() {
        found.push(format!("variables the agent does not have: {}", extra.join(", ")));
    }
    if !changed.is_empty() {
        found.push(format!("variables with other values: {}", changed.join(", ")));
    }
    found
}

/// The requests the proxy refused from `addr` since `since_ms` (`0`: none, or none since): what a
/// pooled harness there reached for before its claim, whose identity reached agenthold's MCP
/// route only. Nothing of it left the proxy. Real harnesses do at start — Claude Code opens
/// connections to its API ahead of use, Codex asks `chatgpt.com` and `github.com`, OpenCode
/// `registry.npmjs.org` — the same requests a cold start makes and is refused (`403`) for, but
/// Claude Code's; the count is audited with the claim. The report counts per address and keeps the first and last time, so
/// requests of an earlier sandbox at the same address count only when the last came since.
pub fn refused_since(report: &agenthold_proxy::cut::Report, addr: std::net::IpAddr, since_ms: u64) -> u64 {
    report.refused.get(&addr.to_string()).filter(|refused| refused.last_at_ms >= since_ms).map_or(0, |r| r.count)
}
#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> PlanContext {
        PlanContext {
            image: "agenthold/base:latest".to_owned(),
            tools_dir: "/opt/agenthold".to_owned(),
            home_dir: "/home/agent".to_owned(),
            user: Some("agent".to_owned()),
            memory_mib: 2048,
            proxy_addr: Some("10.0.0.1:3128".to_owned()),
            mcp_servers: Vec::new(),
        }
    }

    #[test]
    fn profiles_parse_with_their_models_and_variables_and_default_to_the_harness_s_key() {
        let profiles = parse_profiles(
            " claude-code, codex@gpt-5 ,opencode@anthropic/claude-sonnet-4-5:OPENAI_API_KEY+ANTHROPIC_API_KEY",
        )
        .expect("parses");
        assert_eq!(profiles.len(), 3);
        assert_eq!(
            profiles[0],
            PooledProfile { harness: "claude-code".into(), model: None, variables: vec!["ANTHROPIC_API_KEY".into()] }
        );
        assert_eq!(profiles[1].model.as_deref(), Some("gpt-5"));
        assert_eq!(profiles[1].variables, ["OPENAI_API_KEY"]);
        assert_eq!(profiles[2].variables, ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"], "sorted");
        assert_eq!(profiles[2].to_string(), "opencode@anthropic/claude-sonnet-4-5:ANTHROPIC_API_KEY+OPENAI_API_KEY");
        assert_eq!(parse_profiles("").expect("empty"), []);
        assert_eq!(parse_profiles("fake").expect("fake")[0].variables, Vec::<String>::new(), "fake has no preset");
    }

    #[test]
    fn bad_profiles_are_refused_with_the_item_named() {
        for (text, says) in [
            ("nope", "no harness"),
            ("command", "cannot be pooled"),
            ("claude-code@", "a model"),
            ("claude-code@a b", "a model"),
            ("claude-code:lower-case", "\"claude-code:lower-case\""),
            ("claude-code,claude-code", "listed twice"),
            ("fake:A1,fake:A2,fake:A3,fake:A4,fake:A5,fake:A6,fake:A7,fake:A8,fake:A9", "at most 8"),
        ] {
            let error = parse_profiles(text).expect_err(text);
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn a_profile_fits_an_agent_of_its_harness_model_and_exact_variables() {
        let profile = &parse_profiles("opencode@openai/gpt-5:OPENAI_API_KEY+ANTHROPIC_API_KEY").expect("parses")[0];
        let both = ["OPENAI_API_KEY".to_owned(), "ANTHROPIC_API_KEY".to_owned()];
        assert!(profile.fits("opencode", Some("openai/gpt-5"), &both));
        assert!(!profile.fits("opencode", None, &both), "another model");
        assert!(!profile.fits("codex", Some("openai/gpt-5"), &both));
        assert!(!profile.fits("opencode", Some("openai/gpt-5"), &both[..1]), "a variable fewer");
        let bare = &parse_profiles("claude-code").expect("parses")[0];
        assert!(bare.fits("claude-code", Some(""), &["ANTHROPIC_API_KEY".to_owned()]), "an empty model is none");
    }

    #[test]
    fn a_plan_holds_fresh_placeholders_shaped_like_the_keys_and_a_fresh_identity() {
        let profile = &parse_profiles("claude-code").expect("parses")[0];
        let (one, two) = (plan(profile, &context()).expect("plan"), plan(profile, &context()).expect("plan"));
        let placeholder = one.placeholder("ANTHROPIC_API_KEY").expect("a placeholder");
        assert!(placeholder.starts_with("sk-ant-agenthold-"), "{placeholder}");
        assert_ne!(Some(placeholder), two.placeholder("ANTHROPIC_API_KEY"), "never the same twice");
        let env: BTreeMap<_, _> = one.env.iter().cloned().collect();
        assert_eq!(env.get("ANTHROPIC_API_KEY").map(String::as_str), Some(placeholder));
        let identity = one.identity.as_ref().expect("an identity");
        assert!(env["HTTPS_PROXY"].contains(&identity.username), "the proxy variables hold the identity");
        assert_ne!(identity.username, two.identity.as_ref().expect("identity").username);
        assert_eq!(env["NODE_OPTIONS"], "--max-old-space-size=1536", "Node's heap follows the sandbox's memory");
        assert_eq!(one.argv, ["claude-agent-acp"]);
        assert_eq!(one.cwd, "/home/agent");
        let without_proxy = plan(profile, &PlanContext { proxy_addr: None, ..context() }).expect("plan");
        assert!(without_proxy.identity.is_none());
        assert!(!without_proxy.env.iter().any(|(k, _)| k == "HTTPS_PROXY"));
    }

    #[test]
    fn differences_name_what_differs_and_never_a_value() {
        let profile = &parse_profiles("claude-code").expect("parses")[0];
        let pooled = plan(profile, &context()).expect("plan");
        let same =
            HarnessStart { program: None, argv: pooled.argv.clone(), env: pooled.env.clone(), logins: Vec::new() };
        assert!(differences(&pooled, &same, "/home/agent", Some("agent")).is_empty());
        // One variable given twice, the pooled value later (the later wins): the same.
        let mut twice = same.clone();
        twice.env.insert(0, ("ANTHROPIC_API_KEY".to_owned(), "overridden-later".to_owned()));
        assert!(differences(&pooled, &twice, "/home/agent", Some("agent")).is_empty());
        let mut last = same.clone();
        last.env.push(("ANTHROPIC_API_KEY".to_owned(), "wins".to_owned()));
        assert_eq!(
            differences(&pooled, &last, "/home/agent", Some("agent")),
            ["variables with other values: ANTHROPIC_API_KEY"]
        );

        let mut other = same.clone();
        other.env.retain(|(k, _)| k != "ANTHROPIC_API_KEY");
        other.env.push(("GITHUB_TOKEN".to_owned(), "agenthold-git-secretish".to_owned()));
        other.env.push(("ANTHROPIC_MODEL".to_owned(), "claude-opus".to_owned()));
        other.env.retain(|(k, _)| k != "NODE_OPTIONS");
        other.env.push(("NODE_OPTIONS".to_owned(), "--max-old-space-size=96".to_owned()));
        other.argv.push("--flag".to_owned());
        let found = differences(&pooled, &other, "/home/agent/repo", None).join("; ");
        for says in [
            "the harness's command",
            "a repository",
            "the user",
            "lacks: ANTHROPIC_MODEL, GITHUB_TOKEN",
            "does not have: ANTHROPIC_API_KEY",
            "other values: NODE_OPTIONS",
        ] {
            assert!(found.contains(says), "{says}: {found}");
        }
        assert!(!found.contains("secretish") && !found.contains("96") && !found.contains("sk-ant"), "{found}");
    }

    #[test]
    fn each_profile_keeps_one_more_per_two_recent_claims_within_the_budget() {
        // Quiet: one each, when the budget holds them.
        assert_eq!(targets(&[330, 275, 530], &[0, 0, 0], 2048), [1, 1, 1]);
        // Busy Claude Code: 6 claims in the last minute want 4 (the most), which fit.
        assert_eq!(targets(&[330, 275, 530], &[6, 0, 0], 4096), [4, 1, 1]);
        assert_eq!(targets(&[330, 275, 530], &[40, 0, 0], 1 << 20), [4, 1, 1], "never past the most");
        // A small budget: the first of each in order, what fits.
        assert_eq!(targets(&[330, 275, 530], &[0, 0, 0], 700), [1, 1, 0]);
        assert_eq!(targets(&[330, 275, 530], &[6, 6, 0], 1300), [1, 1, 1], "one of each first");
        assert_eq!(targets(&[330, 275, 530], &[6, 6, 0], 1800), [2, 2, 1], "then round the profiles that want more");
        assert_eq!(targets(&[330], &[0], 0), [0], "no budget: none");
        assert_eq!(targets(&[], &[], 4096), Vec::<usize>::new());
    }

    #[test]
    fn refusals_from_the_sandbox_s_address_since_it_was_made_count_and_those_before_do_not() {
        let mut report = agenthold_proxy::cut::Report::default();
        let refused = |at| agenthold_proxy::cut::Refused { count: 3, first_at_ms: at, last_at_ms: at };
        report.refused.insert("10.214.0.2".to_owned(), refused(5_000));
        let addr = "10.214.0.2".parse().expect("ip");
        assert_eq!(refused_since(&report, addr, 4_000), 3);
        assert_eq!(refused_since(&report, addr, 6_000), 0, "an earlier sandbox at the same address");
        assert_eq!(refused_since(&report, "10.214.0.3".parse().expect("ip"), 0), 0);
    }
}
