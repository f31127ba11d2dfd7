//! The pure mapping from what the database holds to the proxy's configuration file: one sandbox
//! per agent (id, identity, allow-list, injection rules). Fail closed: an agent whose secrets do
//! not open gets no rule, and a rule the proxy could not apply exactly (a format other than
//! `{secret}` / `Bearer {secret}`, a value with a space) is left out rather than loosened.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use super::egress::preset_hosts;
use super::file::{CaPaths, InjectEntry, InjectFormat, ProxyFile, SandboxEntry, ServerRouteEntry, UpstreamOverride};
use super::identity::Identity;
use crate::ids::AgentId;
use crate::secrets::AttachedSecret;
use crate::store::proxy_identities::EgressRow;

/// Everything the file is made from.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// Logged by the proxy.
    pub version: u64,
    /// The CA's files.
    pub ca: CaPaths,
    /// More addresses of the proxy itself.
    pub own_addrs: Vec<IpAddr>,
    /// Private or reserved addresses the proxy may dial all the same.
    pub allow_addrs: Vec<IpAddr>,
    /// Every agent not being deleted.
    pub agents: Vec<AgentInput>,
    /// TEST ONLY: stand-ins.
    pub upstream_overrides: BTreeMap<String, UpstreamOverride>,
    /// agenthold's MCP server through the proxy (agents prompting agents), when offered.
    pub server_route: Option<ServerRouteEntry>,
}

/// One agent.
#[derive(Debug, Clone)]
pub struct AgentInput {
    /// The agent.
    pub agent_id: AgentId,
    /// Its proxy credentials.
    pub identity: Identity,
    /// The addresses its credentials are admitted from ([`super::sources`]).
    pub source_addrs: Vec<IpAddr>,
    /// Admitted from any address (only without addresses; [`super::sources`]).
    pub any_source: bool,
    /// Its allow-list.
    pub egress: EgressRow,
    /// The hosts its harness talks to (its provider's API), allowed as pass-through.
    pub provider_hosts: Vec<String>,
    /// Its attached secrets.
    pub secrets: SecretsInput,
    /// Requests the proxy answers itself for it.
    pub answers: Vec<super::file::AnswerEntry>,
    /// Its MCP credential ([`crate::mcp::credential`]): what the proxy puts in for its
    /// placeholder on the server route.
    pub mcp_credential: Option<crate::secret::Secret>,
    /// A pooled harness's sandbox no agent has claimed yet (the id is the one its agent will
    /// get): no allow-list, no secrets — agenthold's MCP route only ([`pooled`]).
    pub pooled: bool,
}

/// The entry of a pooled harness's sandbox before its claim: its identity, admitted from its
/// address, reaching agenthold's MCP route only (with the credential of the id its agent will
/// get), so the session the pool opens ahead connects to the MCP server the agent's sessions
/// are offered. Nothing else: no host allowed, no secret, no answer.
pub fn pooled(
    agent_id: AgentId,
    identity: Identity,
    source_addr: IpAddr,
    mcp_credential: Option<crate::secret::Secret>,
) -> AgentInput {
    AgentInput {
        agent_id,
        identity,
        source_addrs: vec![source_addr],
        any_source: false,
        egress: EgressRow::default(),
        provider_hosts: Vec::new(),
        secrets: SecretsInput::Attached(Vec::new()),
        answers: Vec::new(),
        mcp_credential,
        pooled: true,
    }
}

/// An agent's attached secrets as read.
#[derive(Debug, Clone)]
pub enum SecretsInput {
    /// Read and opened.
    Attached(Vec<AttachedSecret>),
    /// A value did not open: inject nothing for this agent.
    Unreadable,
}

/// Why a rule was left out (for the log; never a value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The agent.
    pub agent_id: AgentId,
    /// The secret.
    pub secret_id: uuid::Uuid,
    /// Why.
    pub reason: &'static str,
}

/// The configuration file for `inputs`, and the rules left out.
pub fn build_config(inputs: &Inputs) -> (ProxyFile, Vec<Skipped>) {
    let mut skipped = Vec::new();
    let route = inputs.server_route.as_ref();
    let sandboxes = inputs.agents.iter().map(|agent| sandbox(agent, route, &mut skipped)).collect();
    let file = ProxyFile {
        version: inputs.version,
        ca: inputs.ca.clone(),
        deny_private: true,
        own_addrs: inputs.own_addrs.clone(),
        allow_addrs: inputs.allow_addrs.clone(),
        sandboxes,
        upstream_overrides: inputs.upstream_overrides.clone(),
        server_route: inputs.server_route.clone(),
    };
    (file, skipped)
}

fn sandbox(agent: &AgentInput, route: Option<&ServerRouteEntry>, skipped: &mut Vec<Skipped>) -> SandboxEntry {
    let allow: BTreeSet<String> = agent
        .egress
        .allow
        .iter()
        .cloned()
        .chain(agent.egress.presets.iter().flat_map(|p| preset_hosts(p).iter().map(|h| (*h).to_owned())))
        .chain(agent.provider_hosts.iter().cloned())
        .collect();
    let mut inject = Vec::new();
    if let SecretsInput::Attached(secrets) = &agent.secrets {
        let mut seen = BTreeSet::new();
        for secret in secrets {
            // The same secret under two variables shares one placeholder: one rule.
            if !seen.insert(secret.secret_id) {
                continue;
            }
            match rule(secret) {
                Ok(entry) => inject.push(entry),
                Err(reason) => skipped.push(Skipped { agent_id: agent.agent_id, secret_id: secret.secret_id, reason }),
            }
        }
    }
    // agenthold's MCP server: the agent's placeholder becomes its credential, on the route only.
    if let (Some(route), Some(credential)) = (route, &agent.mcp_credential) {
        inject.push(InjectEntry {
            host: route.host.clone(),
            port: 443,
            path_prefix: route.path_prefix.clone(),
            header: "authorization".to_owned(),
            format: InjectFormat::Bearer,
            username: None,
            placeholder: crate::mcp::credential::placeholder(agent.agent_id),
            value: credential.clone(),
        });
    }
    SandboxEntry {
        id: agent.agent_id.to_string(),
        username: agent.identity.username.clone(),
        password: agent.identity.password.clone(),
        source_addrs: agent.source_addrs.clone(),
        any_source: agent.any_source && agent.source_addrs.is_empty(),
        allow: allow.into_iter().collect(),
        inject,
        answer: agent.answers.clone(),
    }
}

fn rule(secret: &AttachedSecret) -> Result<InjectEntry, &'static str> {
    let (format, username) = match secret.rule.format.as_str() {
        "{secret}" => (InjectFormat::Raw, None),
        "Bearer {secret}" => (InjectFormat::Bearer, None),
        other => match crate::secrets::presets::basic_username(other) {
            Some(username) => (InjectFormat::Basic, Some(username.to_owned())),
            None => {
                return Err("the proxy injects only `{secret}`, `Bearer {secret}` and `Basic <user>:{secret}` formats");
            }
        },
    };
    let value = secret.value.expose();
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the proxy injects only values without spaces");
    }
    Ok(InjectEntry {
        host: secret.rule.host.clone(),
        port: secret.rule.port,
        path_prefix: secret.rule.path_prefix.clone(),
        header: secret.rule.header.clone(),
        format,
        username,
        placeholder: secret.placeholder.clone(),
        value: secret.value.clone(),
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::secret::Secret;
    use crate::secrets::presets::{InjectionRule, Preset};

    fn ca() -> CaPaths {
        CaPaths { cert: PathBuf::from("/ca/ca.pem"), key: PathBuf::from("/ca/ca-key.pem") }
    }

    fn attached(preset: Preset, env: &str, value: &str) -> AttachedSecret {
        AttachedSecret {
            secret_id: uuid::Uuid::new_v4(),
            env_name: env.to_owned(),
            placeholder: preset.placeholder(),
            rule: preset.rule().unwrap_or(InjectionRule {
                host: "custom.example.com".into(),
                port: 443,
                path_prefix: "/".into(),
                header: "x-api-token".into(),
                format: "{secret}".into(),
            }),
            value: Secret::new(value),
        }
    }

    fn agent(secrets: SecretsInput, egress: EgressRow) -> AgentInput {
        AgentInput {
            agent_id: AgentId::new(),
            identity: Identity {
                username: format!("sbx-{}", uuid::Uuid::new_v4().simple()),
                password: Secret::new("pw-0123456789"),
            },
            source_addrs: Vec::new(),
            any_source: false,
            egress,
            provider_hosts: Vec::new(),
            secrets,
            answers: Vec::new(),
            mcp_credential: None,
            pooled: false,
        }
    }

    fn inputs(agents: Vec<AgentInput>) -> Inputs {
        Inputs {
            version: 7,
            ca: ca(),
            own_addrs: vec!["203.0.113.7".parse().expect("ip")],
            allow_addrs: Vec::new(),
            agents,
            upstream_overrides: BTreeMap::new(),
            server_route: None,
        }
    }

    fn json(file: &ProxyFile) -> serde_json::Value {
        serde_json::from_slice(&file.to_bytes().expect("serializes")).expect("json")
    }

    #[test]
    fn an_agent_gets_its_identity_allow_list_and_one_rule_per_secret() {
        let anthropic = attached(Preset::Anthropic, "ANTHROPIC_API_KEY", "sk-ant-real-1");
        let openai = attached(Preset::Openai, "OPENAI_API_KEY", "sk-real-2");
        let mut same_again = anthropic.clone();
        same_again.env_name = "CLAUDE_KEY".into();
        let egress = EgressRow {
            allow: vec!["example.com:8443".into(), "pypi.org".into()],
            presets: vec!["package_registries".into()],
        };
        let mut a = agent(SecretsInput::Attached(vec![anthropic.clone(), openai.clone(), same_again]), egress);
        a.provider_hosts = vec!["api.example-provider.com".into()];
        let (file, skipped) = build_config(&inputs(vec![a.clone()]));
        assert!(skipped.is_empty());
        let v = json(&file);
        assert_eq!(v["version"], 7);
        assert_eq!(v["deny_private"], true);
        assert_eq!(v["own_addrs"], serde_json::json!(["203.0.113.7"]));
        assert_eq!(v["ca"]["cert"], "/ca/ca.pem");
        let sandbox = &v["sandboxes"][0];
        assert_eq!(sandbox["id"], a.agent_id.to_string());
        assert_eq!(sandbox["username"], a.identity.username);
        assert_eq!(sandbox["password"], "pw-0123456789");
        assert!(sandbox.get("source_addrs").is_none());
        assert!(sandbox.get("any_source").is_none(), "never implied by an empty list");
        let allow: Vec<&str> = sandbox["allow"].as_array().expect("allow").iter().filter_map(|x| x.as_str()).collect();
        for host in ["example.com:8443", "pypi.org", "registry.npmjs.org", "crates.io", "api.example-provider.com"] {
            assert!(allow.contains(&host), "{host} in {allow:?}");
        }
        assert_eq!(allow.iter().filter(|h| **h == "pypi.org").count(), 1, "deduplicated");
        let inject = sandbox["inject"].as_array().expect("inject");
        assert_eq!(inject.len(), 2, "the same secret twice is one rule");
        assert_eq!(inject[0]["host"], "api.anthropic.com");
        assert_eq!(inject[0]["header"], "x-api-key");
        assert_eq!(inject[0]["format"], "raw");
        assert_eq!(inject[0]["path_prefix"], "/v1/");
        assert_eq!(inject[0]["port"], 443);
        assert_eq!(inject[0]["placeholder"], anthropic.placeholder);
        assert_eq!(inject[0]["value"], "sk-ant-real-1");
        assert_eq!(inject[1]["format"], "bearer");
        assert_eq!(inject[1]["header"], "authorization");
        assert_eq!(inject[1]["value"], "sk-real-2");
        assert!(!format!("{file:?}").contains("sk-ant-real-1"), "Debug redacts values");
        assert!(!format!("{file:?}").contains("pw-0123456789"), "Debug redacts passwords");
    }

    #[test]
    fn an_agent_whose_secrets_do_not_open_gets_no_rule_but_keeps_its_identity() {
        let a = agent(SecretsInput::Unreadable, EgressRow::default());
        let b = agent(SecretsInput::Attached(vec![attached(Preset::Anthropic, "K", "sk-ant-b")]), EgressRow::default());
        let (file, _) = build_config(&inputs(vec![a.clone(), b]));
        assert_eq!(file.sandboxes.len(), 2);
        assert_eq!(file.sandboxes[0].username, a.identity.username);
        assert!(file.sandboxes[0].inject.is_empty());
        assert!(file.sandboxes[0].allow.is_empty());
        assert_eq!(file.sandboxes[1].inject.len(), 1);
    }

    #[test]
    fn rules_the_proxy_cannot_apply_exactly_are_left_out() {
        let mut token = attached(Preset::Custom, "INTERNAL_TOKEN", "tok-123");
        token.rule = InjectionRule {
            host: "llm.example.com".into(),
            port: 8443,
            path_prefix: "/".into(),
            header: "x-api-token".into(),
            format: "Token {secret}".into(),
        };
        let spaced = attached(Preset::Anthropic, "ANTHROPIC_API_KEY", "has a space");
        let fine = attached(Preset::Openrouter, "OPENROUTER_API_KEY", "sk-or-real");
        let a = agent(SecretsInput::Attached(vec![token.clone(), spaced.clone(), fine]), EgressRow::default());
        let (file, skipped) = build_config(&inputs(vec![a]));
        let hosts: Vec<&str> = file.sandboxes[0].inject.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(hosts, ["openrouter.ai"]);
        assert_eq!(skipped.iter().map(|s| s.secret_id).collect::<Vec<_>>(), [token.secret_id, spaced.secret_id]);
        assert!(!format!("{skipped:?}").contains("has a space"));
    }

    #[test]
    fn no_agents_is_a_file_that_denies_everything() {
        let (file, _) = build_config(&inputs(Vec::new()));
        let v = json(&file);
        assert_eq!(v["sandboxes"], serde_json::json!([]));
        assert_eq!(v["upstream_overrides"], serde_json::json!({}));
    }

    #[test]
    fn overrides_and_source_addresses_are_copied() {
        let mut a = agent(SecretsInput::Attached(Vec::new()), EgressRow::default());
        a.source_addrs = vec!["172.30.5.2".parse().expect("ip")];
        let mut i = inputs(vec![a]);
        i.upstream_overrides.insert(
            "api.anthropic.com:443".into(),
            UpstreamOverride { addr: "127.0.0.1:9443".parse().expect("addr"), ca_cert: Some("/tmp/root.pem".into()) },
        );
        let v = json(&build_config(&i).0);
        assert_eq!(v["sandboxes"][0]["source_addrs"], serde_json::json!(["172.30.5.2"]));
        assert_eq!(v["upstream_overrides"]["api.anthropic.com:443"]["addr"], "127.0.0.1:9443");
        assert_eq!(v["upstream_overrides"]["api.anthropic.com:443"]["ca_cert"], "/tmp/root.pem");
    }

    /// What this module writes is what the proxy's own parser reads and its policy accepts.
    #[test]
    fn the_proxy_parses_and_accepts_the_file() {
        let dir = std::env::temp_dir().join(format!("agenthold-feed-ca-{}", uuid::Uuid::new_v4().simple()));
        let hosts: Vec<String> = agenthold_proxy::ca::PRESET_HOSTS.iter().map(|h| (*h).to_owned()).collect();
        agenthold_proxy::ca::init(&dir, &hosts).expect("ca init");
        let ca = CaPaths { cert: dir.join("ca.pem"), key: dir.join("ca-key.pem") };
        let egress = EgressRow { allow: vec!["*.example.com:8443".into()], presets: vec!["package_registries".into()] };
        let a = agent(
            SecretsInput::Attached(vec![
                attached(Preset::Anthropic, "ANTHROPIC_API_KEY", "sk-ant-real-1"),
                attached(Preset::Openai, "OPENAI_API_KEY", "sk-real-2"),
            ]),
            egress,
        );
        let b = agent(
            SecretsInput::Attached(vec![attached(Preset::Anthropic, "ANTHROPIC_API_KEY", "sk-ant-real-3")]),
            EgressRow::default(),
        );
        let mut b = b;
        b.mcp_credential = Some(Secret::new("ahmcp1.b.credential"));
        let mut a = a;
        a.source_addrs = vec!["10.0.0.1".parse().expect("ip")];
        let mut git = attached(Preset::GitToken, "GIT_TOKEN", "ghp_real4");
        git.rule = crate::secrets::presets::git_rule("github.com", Some("oauth2")).expect("git rule");
        let mut c = agent(SecretsInput::Attached(vec![git]), EgressRow::default());
        c.any_source = true;
        let mut i = inputs(vec![a.clone(), b.clone(), c.clone()]);
        i.ca = ca;
        i.server_route = Some(ServerRouteEntry::mcp("127.0.0.1:8080".parse().expect("addr")));
        let bytes = build_config(&i).0.to_bytes().expect("serializes");
        let parsed: agenthold_proxy::config::ConfigFile = serde_json::from_slice(&bytes).expect("the proxy parses it");
        assert_eq!(parsed.sandboxes.len(), 3);
        assert_eq!(parsed.sandboxes[0].inject[1].format, agenthold_proxy::config::Format::Bearer);
        assert_eq!(parsed.sandboxes[0].inject.len(), 2, "no MCP rule without a credential");
        let git = &parsed.sandboxes[2].inject[0];
        assert_eq!((git.format, git.username.as_deref()), (agenthold_proxy::config::Format::Basic, Some("oauth2")));
        assert_eq!(
            (git.host.as_str(), git.path_prefix.as_str(), git.header.as_str()),
            ("github.com", "/", "authorization")
        );
        let mcp = parsed.sandboxes[1].inject.last().expect("the MCP rule");
        assert_eq!(
            (mcp.host.as_str(), mcp.path_prefix.as_str(), mcp.header.as_str()),
            ("mcp.agenthold.internal", "/api/v1/mcp", "authorization")
        );
        assert_eq!(mcp.placeholder, crate::mcp::credential::placeholder(b.agent_id));
        assert_eq!(mcp.value.expose(), "ahmcp1.b.credential");
        assert!(parsed.server_route.is_some());
        let policy = agenthold_proxy::policy::Policy::compile(parsed, None).expect("the proxy accepts it");
        assert_eq!(policy.sandbox_count(), 3);
        let (here, elsewhere) = ("10.0.0.1".parse().expect("ip"), "10.0.0.2".parse().expect("ip"));
        assert!(policy.authenticate(&a.identity.username, b"pw-0123456789", here).is_some());
        assert!(policy.authenticate(&a.identity.username, b"pw-0123456789", elsewhere).is_none());
        assert!(policy.authenticate(&b.identity.username, b"pw-0123456789", here).is_none(), "no address: nowhere");
        assert!(policy.authenticate(&c.identity.username, b"pw-0123456789", elsewhere).is_some(), "any_source");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A pooled harness's sandbox, before its claim: admitted from its address, it reaches
    /// agenthold's MCP route (its placeholder swapped for the credential of the id its agent will
    /// get) and nothing else — no provider, no registry.
    #[test]
    fn a_pooled_sandbox_reaches_the_mcp_route_only() {
        let dir = std::env::temp_dir().join(format!("agenthold-feed-ca-{}", uuid::Uuid::new_v4().simple()));
        let hosts: Vec<String> = agenthold_proxy::ca::PRESET_HOSTS.iter().map(|h| (*h).to_owned()).collect();
        agenthold_proxy::ca::init(&dir, &hosts).expect("ca init");
        let id = AgentId::new();
        let identity = Identity { username: "sbx-pooled".into(), password: Secret::new("pw-pooled-0123") };
        let addr: IpAddr = "10.214.0.9".parse().expect("ip");
        let entry = pooled(id, identity, addr, Some(Secret::new("ahmcp1.pooled.credential")));
        assert!(entry.pooled && entry.egress == EgressRow::default() && entry.provider_hosts.is_empty());
        let mut i = inputs(vec![entry]);
        i.ca = CaPaths { cert: dir.join("ca.pem"), key: dir.join("ca-key.pem") };
        i.server_route = Some(ServerRouteEntry::mcp("127.0.0.1:8080".parse().expect("addr")));
        let (file, skipped) = build_config(&i);
        assert!(skipped.is_empty());
        let v = json(&file);
        assert_eq!(v["sandboxes"][0]["id"], id.to_string());
        assert_eq!(v["sandboxes"][0]["allow"], serde_json::json!([]));
        assert_eq!(v["sandboxes"][0]["source_addrs"], serde_json::json!(["10.214.0.9"]));
        let inject = v["sandboxes"][0]["inject"].as_array().expect("inject");
        assert_eq!(inject.len(), 1, "{inject:?}");
        assert_eq!(inject[0]["host"], "mcp.agenthold.internal");
        assert_eq!(inject[0]["placeholder"], crate::mcp::credential::placeholder(id));
        let parsed: agenthold_proxy::config::ConfigFile =
            serde_json::from_slice(&file.to_bytes().expect("serializes")).expect("the proxy parses it");
        let policy = agenthold_proxy::policy::Policy::compile(parsed, None).expect("the proxy accepts it");
        assert!(policy.authenticate("sbx-pooled", b"pw-pooled-0123", "10.214.0.10".parse().expect("ip")).is_none());
        let sandbox = policy.authenticate("sbx-pooled", b"pw-pooled-0123", addr).expect("admitted from its address");
        let decide = |authority: &str| {
            sandbox.decide_connect(&agenthold_proxy::host::parse_authority(authority, None).expect("authority"))
        };
        assert_eq!(decide("mcp.agenthold.internal:443"), agenthold_proxy::policy::Decision::Intercept);
        for elsewhere in ["api.anthropic.com:443", "registry.npmjs.org:443", "github.com:443"] {
            assert_eq!(decide(elsewhere), agenthold_proxy::policy::Decision::Refuse, "{elsewhere}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
