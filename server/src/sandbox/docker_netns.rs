//! The network holder: a small container per agent whose only work is to keep the agent's network
//! namespace (its interface on the agent's network, its address, the embedded DNS resolver and
//! `/etc/hosts`) alive while the sandbox sleeps. The sandbox joins it (`container:` network mode),
//! so starting a sleeping sandbox skips Docker's network setup for the new namespace: ~80 ms
//! instead of ~260 ms on this machine (docs/benchmarks.md, "The network holder"), and the
//! sandbox keeps one address for its life (the egress proxy's record of it never changes).
//!
//! It runs `sandboxd hold` from the tools volume (so any image the sandbox runs will do), as
//! `nobody`, with every capability dropped, `no-new-privileges`, a read-only root, a few processes
//! and a little memory; what it costs the host is its `containerd-shim` (~4 MiB, docs/operations.md).
//!
//! The engine records the holder's id in the sandbox: a holder removed behind the server's back
//! leaves the sandbox unable to start, so the driver takes such a sandbox as stale (made again,
//! around the same home, on a new holder); a holder that stopped is started again before the
//! sandbox, and a sandbox still running in a dead holder's namespace (which has only a loopback
//! left) is restarted.

use std::collections::HashMap;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{CreateContainerOptions, ListContainersOptions};

use super::DriverError;
use super::docker::{engine, remove_container, start_container, status_of};
use crate::ids::AgentId;

/// The label saying what a container of an agent is for ([`NETNS_ROLE`]; sandboxes have none).
pub const ROLE_LABEL: &str = "agenthold.role";
/// The [`ROLE_LABEL`] of network holders.
pub const NETNS_ROLE: &str = "netns";
/// Memory a holder may use (it uses well under 1 MiB).
const MEMORY_BYTES: i64 = 16 * 1024 * 1024;
/// Processes a holder may run (one, and the runtime's own threads).
const PIDS_LIMIT: i64 = 8;
/// The user a holder runs as (`nobody`, by number: the image need not name it).
const USER: &str = "65534:65534";

/// What a holder is made from.
#[derive(Debug, Clone)]
pub struct HolderSpec {
    /// Its image (the sandbox's, or the server's default for a ready one).
    pub image: String,
    /// The tools volume it runs `sandboxd hold` from.
    pub tools: String,
    /// The agent's network.
    pub network: String,
    /// The gateway of the agent's network (`host.docker.internal` names it when confined).
    pub gateway: Option<String>,
    /// Whether the network is confined (egress only through the proxy).
    pub confined: bool,
}

/// A holder as the engine has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HolderState {
    /// None exists.
    Missing,
    /// It exists; `running` says whether it runs; `confined` is the egress it was made for.
    Present { id: String, running: bool, confined: bool },
}

/// The name of an agent's holder.
pub fn holder_name(instance: &str, agent_id: AgentId) -> String {
    format!("{instance}-netns-{agent_id}")
}

/// The `/etc/hosts` entry naming the host: on a confined network only the network's own gateway
/// is reachable; otherwise Docker's `host-gateway`.
pub fn host_entry(gateway: Option<&str>, confined: bool) -> String {
    match (gateway, confined) {
        (Some(gateway), true) => format!("host.docker.internal:{gateway}"),
        _ => "host.docker.internal:host-gateway".to_owned(),
    }
}

/// The network mode of a sandbox joining the holder `id`.
pub fn joined(id: &str) -> String {
    format!("container:{id}")
}

/// The container a holder is: `sandboxd hold` on the agent's network, with nothing it does not
/// need; `labels` (the agent's, and [`super::docker_networks::ready_labels`] for a ready one) get
/// its role, tools and egress added.
pub fn holder_body(spec: &HolderSpec, mut labels: HashMap<String, String>, tools_dir: &str) -> ContainerCreateBody {
    labels.insert(ROLE_LABEL.to_owned(), NETNS_ROLE.to_owned());
    labels.insert(super::docker::TOOLS_LABEL.to_owned(), spec.tools.clone());
    labels.insert(super::docker::EGRESS_LABEL.to_owned(), if spec.confined { "confined" } else { "open" }.to_owned());
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        entrypoint: Some(vec![format!("{tools_dir}/sandboxd"), "hold".to_owned()]),
        cmd: Some(vec![]),
        user: Some(USER.to_owned()),
        working_dir: Some("/".to_owned()),
        env: Some(vec![]),
        labels: Some(labels),
        host_config: Some(HostConfig {
            mounts: Some(vec![Mount {
                target: Some(tools_dir.to_owned()),
                source: Some(spec.tools.clone()),
                typ: Some(MountType::VOLUME),
                read_only: Some(true),
                ..Default::default()
            }]),
            network_mode: Some(spec.network.clone()),
            extra_hosts: Some(vec![host_entry(spec.gateway.as_deref(), spec.confined)]),
            memory: Some(MEMORY_BYTES),
            memory_swap: Some(MEMORY_BYTES),
            pids_limit: Some(PIDS_LIMIT),
            cap_drop: Some(vec!["ALL".to_owned()]),
            security_opt: Some(vec!["no-new-privileges:true".to_owned()]),
            readonly_rootfs: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The holder `name` as the engine has it.
pub async fn inspect(docker: &Docker, name: &str) -> Result<HolderState, DriverError> {
    match docker.inspect_container(name, None).await {
        Ok(info) => {
            let confined = info
                .config
                .and_then(|c| c.labels)
                .and_then(|l| l.get(super::docker::EGRESS_LABEL).cloned())
                .is_none_or(|egress| egress == "confined");
            Ok(HolderState::Present {
                id: info.id.unwrap_or_default(),
                running: info.state.and_then(|s| s.running).unwrap_or(false),
                confined,
            })
        }
        Err(error) if status_of(&error) == Some(404) => Ok(HolderState::Missing),
        Err(error) => Err(engine(error)),
    }
}

/// The holder exists (made if `known`, what [`inspect`] said, is missing); returns its id and
/// whether it runs. A sandbox may be made to join it before it runs, but starts only once it does.
pub async fn ensure_made(
    docker: &Docker,
    name: &str,
    known: HolderState,
    spec: &HolderSpec,
    labels: HashMap<String, String>,
    tools_dir: &str,
) -> Result<(String, bool), DriverError> {
    match known {
        HolderState::Present { id, running, .. } => Ok((id, running)),
        HolderState::Missing => {
            let options = CreateContainerOptions { name: Some(name.to_owned()), ..Default::default() };
            match docker.create_container(Some(options), holder_body(spec, labels, tools_dir)).await {
                Ok(created) => Ok((created.id, false)),
                Err(error) if status_of(&error) == Some(404) => Err(DriverError::ImageNotFound(spec.image.clone())),
                // Made meanwhile (a wake and a sweep, two replicas): take that one.
                Err(error) if status_of(&error) == Some(409) => match inspect(docker, name).await? {
                    HolderState::Present { id, running, .. } => Ok((id, running)),
                    HolderState::Missing => Err(engine(error)),
                },
                Err(error) => Err(engine(error)),
            }
        }
    }
}

/// The holder exists and runs; returns its id.
pub async fn ensure_running(
    docker: &Docker,
    name: &str,
    spec: &HolderSpec,
    labels: HashMap<String, String>,
    tools_dir: &str,
) -> Result<String, DriverError> {
    let known = inspect(docker, name).await?;
    let (id, running) = ensure_made(docker, name, known, spec, labels, tools_dir).await?;
    if !running {
        start_container(docker, &id).await?;
    }
    Ok(id)
}

/// At start: removes the holders an earlier process of this replica (`replica`, or one made before
/// ready holders were labelled with theirs) made ready for agents that have no sandbox (none took
/// them, or the sandbox was never made: it is made again with a holder when the agent wakes), so
/// that their ready networks can go too. Another replica's are its own: one of its agents may be
/// being made on one now. Returns how many went.
pub async fn remove_untaken_ready(
    docker: &Docker,
    instance: &str,
    replica: Option<&str>,
) -> Result<usize, DriverError> {
    let options = ListContainersOptions {
        all: true,
        filters: Some(HashMap::from([(
            "label".to_owned(),
            vec![
                format!("agenthold.instance={instance}"),
                format!("{ROLE_LABEL}={NETNS_ROLE}"),
                format!("{}=true", super::docker_networks::READY_LABEL),
            ],
        )])),
        ..Default::default()
    };
    let mut removed = 0;
    for holder in docker.list_containers(Some(options)).await.map_err(engine)? {
        let labels = holder.labels.unwrap_or_default();
        let maker = labels.get(super::docker_networks::REPLICA_LABEL).map(String::as_str);
        if maker.is_some_and(|maker| Some(maker) != replica) {
            continue;
        }
        let agent = labels.get("agenthold.agent").and_then(|a| a.parse::<AgentId>().ok());
        let (Some(agent_id), Some(id)) = (agent, holder.id) else { continue };
        let sandbox = format!("{instance}-{agent_id}");
        match docker.inspect_container(&sandbox, None).await {
            Ok(_) => continue,
            Err(error) if status_of(&error) == Some(404) => {}
            Err(error) => return Err(engine(error)),
        }
        remove_container(docker, &id).await?;
        removed += 1;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(confined: bool) -> HolderSpec {
        HolderSpec {
            image: "agenthold/test:latest".to_owned(),
            tools: "ah-tools-0123".to_owned(),
            network: "ah-net-x".to_owned(),
            gateway: Some("10.213.0.1".to_owned()),
            confined,
        }
    }

    #[test]
    fn a_holder_runs_sandboxd_hold_as_nobody_with_nothing_it_does_not_need() {
        let body = holder_body(&spec(true), HashMap::new(), "/opt/agenthold");
        assert_eq!(body.entrypoint, Some(vec!["/opt/agenthold/sandboxd".to_owned(), "hold".to_owned()]));
        assert_eq!(body.user.as_deref(), Some("65534:65534"));
        assert_eq!(body.env, Some(vec![]), "no environment: no token, no secret");
        let host = body.host_config.expect("host config");
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_owned()]));
        assert_eq!(host.cap_add, None);
        assert_eq!(host.security_opt, Some(vec!["no-new-privileges:true".to_owned()]));
        assert_eq!(host.readonly_rootfs, Some(true));
        assert_eq!(host.network_mode.as_deref(), Some("ah-net-x"));
        assert_eq!(host.extra_hosts, Some(vec!["host.docker.internal:10.213.0.1".to_owned()]));
        assert_eq!(host.memory, Some(MEMORY_BYTES));
        assert_eq!(host.memory_swap, Some(MEMORY_BYTES));
        assert_eq!(host.pids_limit, Some(PIDS_LIMIT));
        let mounts = host.mounts.expect("mounts");
        assert_eq!(mounts.len(), 1, "the tools only: never the agent's home");
        assert_eq!(mounts[0].read_only, Some(true));
        assert_eq!(mounts[0].source.as_deref(), Some("ah-tools-0123"));
    }

    #[test]
    fn a_holders_labels_say_its_role_tools_egress_and_whether_it_is_ready() {
        let agent = HashMap::from([("agenthold.agent".to_owned(), "a".to_owned())]);
        let mut ready = agent.clone();
        ready.extend(super::super::docker_networks::ready_labels(Some("r1")));
        let labels = holder_body(&spec(false), ready, "/t").labels.expect("labels");
        assert_eq!(labels.get(ROLE_LABEL).map(String::as_str), Some(NETNS_ROLE));
        assert_eq!(labels.get("agenthold.agent").map(String::as_str), Some("a"));
        assert_eq!(labels.get(super::super::docker::TOOLS_LABEL).map(String::as_str), Some("ah-tools-0123"));
        assert_eq!(labels.get(super::super::docker::EGRESS_LABEL).map(String::as_str), Some("open"));
        assert_eq!(labels.get(super::super::docker_networks::READY_LABEL).map(String::as_str), Some("true"));
        assert_eq!(labels.get(super::super::docker_networks::REPLICA_LABEL).map(String::as_str), Some("r1"));
        let labels = holder_body(&spec(true), agent, "/t").labels.expect("labels");
        assert_eq!(labels.get(super::super::docker::EGRESS_LABEL).map(String::as_str), Some("confined"));
        assert!(!labels.contains_key(super::super::docker_networks::READY_LABEL));
    }

    #[test]
    fn the_host_is_the_gateway_only_when_confined() {
        assert_eq!(host_entry(Some("10.0.0.1"), true), "host.docker.internal:10.0.0.1");
        assert_eq!(host_entry(Some("10.0.0.1"), false), "host.docker.internal:host-gateway");
        assert_eq!(host_entry(None, true), "host.docker.internal:host-gateway");
        assert_eq!(joined("abc"), "container:abc");
    }
}
