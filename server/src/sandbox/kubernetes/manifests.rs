//! The Kubernetes objects of one agent's sandbox, built from its inputs (pure: no API calls, unit
//! tested below): the Pod, the home PersistentVolumeClaim, the Secret holding the sandbox token,
//! the NetworkPolicy; and what the driver reads back from the API (the sandbox's status, whether
//! it was OOM-killed, its address).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, HostAlias, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource, Pod, PodDNSConfig, PodDNSConfigOption,
    PodSecurityContext, PodSpec, ResourceRequirements, SeccompProfile, Secret, SecretKeySelector, SecurityContext,
    Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};

use crate::ids::AgentId;
use crate::sandbox::SandboxStatus;
use crate::sandbox::docker::{CAP_ADD, HOME_DIR, TOOLS_DIR};

pub use super::settings::{MAX_INSTANCE_LEN, Settings, check_instance, check_quantity, parse_labels};

/// The label naming the server instance (as on Docker objects).
pub const INSTANCE_LABEL: &str = "agenthold.instance";
/// The label naming the agent (as on Docker objects).
pub const AGENT_LABEL: &str = "agenthold.agent";
/// The Pod annotation naming the version of the Pod settings it was made with.
pub const SPEC_ANNOTATION: &str = "agenthold.spec";
/// The Pod annotation naming the tools image its init container copied sandboxd from.
pub const TOOLS_ANNOTATION: &str = "agenthold.tools";
/// The Pod annotation holding a short hash of the egress proxy's CA it trusts (absent: none).
pub const PROXY_CA_ANNOTATION: &str = "agenthold.proxy-ca";
/// The Pod annotation recording the agent's process limit (Kubernetes cannot apply it per Pod:
/// see docs/kubernetes.md).
pub const PIDS_ANNOTATION: &str = "agenthold.pids-limit";
/// The Secret annotation holding the sandbox's [`SandboxInputs`] (JSON, nothing secret), so that
/// a wake after sleep makes the same Pod again.
pub const INPUTS_ANNOTATION: &str = "agenthold.sandbox";
/// The Secret key holding the sandbox token.
pub const TOKEN_KEY: &str = "token";
/// The version of the Pod settings [`Manifests::pod`] makes: bumped whenever they change, so that
/// Pods made before are recreated (their status is [`SandboxStatus::Stale`]).
pub const SPEC_VERSION: &str = "k2";
/// The resolver a sandbox Pod is given: the loopback address, where nothing listens (a lookup
/// fails at once).
pub const NO_RESOLVER: &str = "127.0.0.1";

/// The hosts-file entries of a Pod: one per address, with its names.
fn host_aliases(hosts: &[(std::net::IpAddr, String)]) -> Vec<HostAlias> {
    let mut by_ip: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (ip, name) in hosts {
        let names = by_ip.entry(ip.to_string()).or_default();
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    by_ip.into_iter().map(|(ip, hostnames)| HostAlias { ip, hostnames: Some(hostnames) }).collect()
}

/// The names a sandbox must resolve: the tunnel URL's host and the proxy's (`host:port`), those
/// that are not addresses already.
pub fn names_to_resolve(tunnel_url: &str, proxy_addr: Option<&str>) -> Vec<String> {
    let tunnel_host = tunnel_url.parse::<axum::http::Uri>().ok().and_then(|uri| uri.host().map(str::to_owned));
    let proxy_host = proxy_addr.and_then(|addr| addr.rsplit_once(':').map(|(host, _)| host.to_owned()));
    let mut names: Vec<String> = [tunnel_host, proxy_host]
        .into_iter()
        .flatten()
        .map(|host| host.trim_start_matches('[').trim_end_matches(']').to_owned())
        .filter(|host| !host.is_empty() && host.parse::<std::net::IpAddr>().is_err())
        .collect();
    names.dedup();
    names
}

/// The sandbox container's name.
pub const SANDBOX_CONTAINER: &str = "sandbox";
/// Where the tools image keeps sandboxd and fakeagent (images/tools/Dockerfile).
pub const TOOLS_IMAGE_DIR: &str = "/agenthold";
/// What one agent's Pod is made from besides the driver's [`Settings`]: kept in its Secret's
/// [`INPUTS_ANNOTATION`] so that waking after a sleep (which deleted the Pod) makes it again.
/// Nothing in it is secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxInputs {
    /// The image.
    pub image: String,
    /// The URL sandboxd dials.
    pub tunnel_url: String,
    /// The CA (PEM) sandboxd trusts for a `wss://` tunnel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel_ca_pem: Option<String>,
    /// CPU limit in cores.
    pub cpus: f64,
    /// Memory limit in MiB.
    pub memory_mib: i32,
    /// Process limit (recorded; see [`PIDS_ANNOTATION`]).
    pub pids_limit: i32,
}

impl From<&crate::sandbox::SandboxSpec> for SandboxInputs {
    fn from(spec: &crate::sandbox::SandboxSpec) -> Self {
        Self {
            image: spec.image.clone(),
            tunnel_url: spec.tunnel_url.clone(),
            tunnel_ca_pem: spec.tunnel_ca_pem.clone(),
            cpus: spec.cpus,
            memory_mib: spec.memory_mib,
            pids_limit: spec.pids_limit,
        }
    }
}

/// Builds an agent's objects.
#[derive(Debug, Clone)]
pub struct Manifests {
    /// The settings every agent's objects share.
    pub settings: Settings,
}

impl Manifests {
    /// The Pod's name (and the NetworkPolicy's).
    pub fn pod_name(&self, agent_id: AgentId) -> String {
        format!("{}-{agent_id}", self.settings.instance)
    }

    /// The home claim's name.
    pub fn claim_name(&self, agent_id: AgentId) -> String {
        format!("{}-home-{agent_id}", self.settings.instance)
    }

    /// The Secret's name.
    pub fn secret_name(&self, agent_id: AgentId) -> String {
        format!("{}-token-{agent_id}", self.settings.instance)
    }

    /// The NetworkPolicy's name.
    pub fn policy_name(&self, agent_id: AgentId) -> String {
        format!("{}-{agent_id}", self.settings.instance)
    }

    /// The labels of every object of the agent (the Docker driver's).
    pub fn labels(&self, agent_id: AgentId) -> BTreeMap<String, String> {
        BTreeMap::from([
            (INSTANCE_LABEL.to_owned(), self.settings.instance.clone()),
            (AGENT_LABEL.to_owned(), agent_id.to_string()),
        ])
    }

    /// `agenthold.instance=<instance>,agenthold.agent`: every agent object of this instance.
    pub fn instance_selector(&self) -> String {
        format!("{INSTANCE_LABEL}={},{AGENT_LABEL}", self.settings.instance)
    }

    fn meta(&self, name: String, agent_id: AgentId) -> ObjectMeta {
        ObjectMeta { name: Some(name), labels: Some(self.labels(agent_id)), ..Default::default() }
    }

    /// The home claim: ReadWriteOnce, of the configured size and storage class.
    pub fn claim(&self, agent_id: AgentId) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: self.meta(self.claim_name(agent_id), agent_id),
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
                storage_class_name: self.settings.storage_class.clone(),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([("storage".to_owned(), Quantity(self.settings.home_size.clone()))])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The Secret holding the token (the Pod refers to it; the token never is in the Pod), and the
    /// sandbox's inputs in an annotation.
    pub fn secret(&self, agent_id: AgentId, token: &str, inputs: &SandboxInputs) -> Secret {
        let mut metadata = self.meta(self.secret_name(agent_id), agent_id);
        let inputs = serde_json::to_string(inputs).unwrap_or_default();
        metadata.annotations = Some(BTreeMap::from([(INPUTS_ANNOTATION.to_owned(), inputs)]));
        Secret {
            metadata,
            type_: Some("Opaque".to_owned()),
            data: Some(BTreeMap::from([(TOKEN_KEY.to_owned(), ByteString(token.as_bytes().to_vec()))])),
            ..Default::default()
        }
    }

    /// The sandbox's NetworkPolicy: no ingress at all; egress to the server's tunnel port and the
    /// egress proxy's port (when sandboxes use it), nothing else — not the cluster DNS, which
    /// would answer (and forward) any name: the Pod finds the server and the proxy in its hosts
    /// file ([`Self::pod`]).
    pub fn network_policy(&self, agent_id: AgentId) -> NetworkPolicy {
        let pods = |labels: &BTreeMap<String, String>| NetworkPolicyPeer {
            pod_selector: Some(LabelSelector { match_labels: Some(labels.clone()), ..Default::default() }),
            ..Default::default()
        };
        let port = |protocol: &str, port: u16| NetworkPolicyPort {
            protocol: Some(protocol.to_owned()),
            port: Some(IntOrString::Int(i32::from(port))),
            ..Default::default()
        };
        let mut egress = vec![NetworkPolicyEgressRule {
            to: Some(vec![pods(&self.settings.server_labels)]),
            ports: Some(vec![port("TCP", self.settings.tunnel_port)]),
        }];
        if let Some((labels, proxy_port)) = &self.settings.proxy {
            egress.push(NetworkPolicyEgressRule {
                to: Some(vec![pods(labels)]),
                ports: Some(vec![port("TCP", *proxy_port)]),
            });
        }
        NetworkPolicy {
            metadata: self.meta(self.policy_name(agent_id), agent_id),
            spec: Some(NetworkPolicySpec {
                pod_selector: Some(LabelSelector { match_labels: Some(self.labels(agent_id)), ..Default::default() }),
                policy_types: Some(vec!["Ingress".to_owned(), "Egress".to_owned()]),
                ingress: Some(Vec::new()),
                egress: Some(egress),
            }),
        }
    }

    /// The annotations saying what a Pod made now is made with (what [`Self::status`] compares).
    fn version_annotations(&self) -> BTreeMap<String, String> {
        let mut annotations = BTreeMap::from([
            (SPEC_ANNOTATION.to_owned(), SPEC_VERSION.to_owned()),
            (TOOLS_ANNOTATION.to_owned(), self.settings.tools_image.clone()),
        ]);
        if let Some((_, hash)) = &self.settings.proxy_ca {
            annotations.insert(PROXY_CA_ANNOTATION.to_owned(), hash.clone());
        }
        annotations
    }

    /// The sandbox Pod: an init container copies sandboxd and fakeagent from the tools image into
    /// an emptyDir mounted read-only at `/opt/agenthold`; sandboxd runs as root with four
    /// capabilities (the Docker driver's), no privilege escalation, the agent's CPU and memory as
    /// limits, the home claim at `/home/agent`, the token from the Secret. No service account
    /// token, no service links, never restarted by the kubelet (the server wakes it). No DNS: the
    /// names it needs (`hosts`: the tunnel's and the proxy's, resolved by the driver) are in its
    /// hosts file, and its resolver points at a local address where nothing answers, so a name
    /// lookup inside fails at once instead of reaching the cluster DNS (a way out: it forwards
    /// outside names).
    pub fn pod(&self, agent_id: AgentId, inputs: &SandboxInputs, hosts: &[(std::net::IpAddr, String)]) -> Pod {
        let mut metadata = self.meta(self.pod_name(agent_id), agent_id);
        let mut annotations = self.version_annotations();
        annotations.insert(PIDS_ANNOTATION.to_owned(), inputs.pids_limit.to_string());
        metadata.annotations = Some(annotations);
        let value = |name: &str, value: &str| EnvVar {
            name: name.to_owned(),
            value: Some(value.to_owned()),
            ..Default::default()
        };
        let mut env = vec![
            value("AGENTHOLD_TUNNEL_URL", &inputs.tunnel_url),
            EnvVar {
                name: "AGENTHOLD_SANDBOX_TOKEN".to_owned(),
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: self.secret_name(agent_id),
                        key: TOKEN_KEY.to_owned(),
                        optional: Some(false),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ];
        if let Some(pem) = &inputs.tunnel_ca_pem {
            env.push(value("AGENTHOLD_TUNNEL_CA_PEM", pem));
        }
        if let Some((pem, _)) = &self.settings.proxy_ca {
            env.push(value("AGENTHOLD_PROXY_CA_PEM", pem));
        }
        let tools_mount = |read_only: bool| VolumeMount {
            name: "tools".to_owned(),
            mount_path: TOOLS_DIR.to_owned(),
            read_only: Some(read_only),
            ..Default::default()
        };
        let drop_all = |add: Vec<String>| Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            add: Some(add).filter(|a| !a.is_empty()),
        };
        let tools = Container {
            name: "tools".to_owned(),
            image: Some(self.settings.tools_image.clone()),
            command: Some(vec![
                "cp".to_owned(),
                format!("{TOOLS_IMAGE_DIR}/sandboxd"),
                format!("{TOOLS_IMAGE_DIR}/fakeagent"),
                format!("{TOOLS_DIR}/"),
            ]),
            volume_mounts: Some(vec![tools_mount(false)]),
            resources: Some(limits("100m", "100m", "64Mi")),
            security_context: Some(SecurityContext {
                run_as_user: Some(65_534),
                run_as_group: Some(65_534),
                run_as_non_root: Some(true),
                allow_privilege_escalation: Some(false),
                read_only_root_filesystem: Some(true),
                capabilities: Some(drop_all(Vec::new())),
                ..Default::default()
            }),
            ..Default::default()
        };
        let (cpu_limit, cpu_request) = cpu_quantities(inputs.cpus);
        let memory = format!("{}Mi", inputs.memory_mib.max(1));
        let sandbox = Container {
            name: SANDBOX_CONTAINER.to_owned(),
            image: Some(inputs.image.clone()),
            command: Some(vec![format!("{TOOLS_DIR}/sandboxd")]),
            working_dir: Some("/".to_owned()),
            env: Some(env),
            resources: Some(limits(&cpu_limit, &cpu_request, &memory)),
            security_context: Some(SecurityContext {
                run_as_user: Some(0),
                run_as_group: Some(0),
                allow_privilege_escalation: Some(false),
                privileged: Some(false),
                capabilities: Some(drop_all(CAP_ADD.iter().map(|c| (*c).to_owned()).collect())),
                ..Default::default()
            }),
            volume_mounts: Some(vec![
                VolumeMount { name: "home".to_owned(), mount_path: HOME_DIR.to_owned(), ..Default::default() },
                tools_mount(true),
            ]),
            ..Default::default()
        };
        Pod {
            metadata,
            spec: Some(PodSpec {
                init_containers: Some(vec![tools]),
                containers: vec![sandbox],
                restart_policy: Some("Never".to_owned()),
                dns_policy: Some("None".to_owned()),
                dns_config: Some(PodDNSConfig {
                    nameservers: Some(vec![NO_RESOLVER.to_owned()]),
                    searches: Some(Vec::new()),
                    options: Some(vec![
                        PodDNSConfigOption { name: Some("ndots".to_owned()), value: Some("1".to_owned()) },
                        PodDNSConfigOption { name: Some("attempts".to_owned()), value: Some("1".to_owned()) },
                        PodDNSConfigOption { name: Some("timeout".to_owned()), value: Some("1".to_owned()) },
                    ]),
                }),
                host_aliases: Some(host_aliases(hosts)).filter(|aliases| !aliases.is_empty()),
                automount_service_account_token: Some(false),
                enable_service_links: Some(false),
                termination_grace_period_seconds: Some(5),
                security_context: Some(PodSecurityContext {
                    seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".to_owned(), ..Default::default() }),
                    ..Default::default()
                }),
                volumes: Some(vec![
                    Volume {
                        name: "home".to_owned(),
                        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                            claim_name: self.claim_name(agent_id),
                            read_only: Some(false),
                        }),
                        ..Default::default()
                    },
                    Volume {
                        name: "tools".to_owned(),
                        empty_dir: Some(EmptyDirVolumeSource {
                            size_limit: Some(Quantity("256Mi".to_owned())),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            status: None,
        }
    }

    /// The sandbox's status from its Pod (`None`: no Pod) and whether its Secret exists (a
    /// sandbox put to sleep has no Pod but keeps its Secret and claim).
    pub fn status(&self, pod: Option<&Pod>, secret_exists: bool) -> SandboxStatus {
        let Some(pod) = pod else {
            return if secret_exists { SandboxStatus::Stopped } else { SandboxStatus::Missing };
        };
        if pod.metadata.deletion_timestamp.is_some() {
            return SandboxStatus::Stopped;
        }
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        let expected = self.version_annotations();
        let compared = [SPEC_ANNOTATION, TOOLS_ANNOTATION, PROXY_CA_ANNOTATION];
        if compared.iter().any(|key| annotations.get(*key) != expected.get(*key)) {
            return SandboxStatus::Stale;
        }
        match pod_phase(pod) {
            // Scheduled, pulling or starting: sandboxd dials in once it runs.
            None | Some("Pending" | "Running" | "Unknown") => SandboxStatus::Running,
            Some(_) => SandboxStatus::Stopped,
        }
    }
}

/// The Pod's phase.
pub fn pod_phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

/// Whether the Pod's containers ended (`Succeeded`/`Failed`): it must be deleted to start again.
pub fn pod_ended(pod: &Pod) -> bool {
    matches!(pod_phase(pod), Some("Succeeded" | "Failed"))
}

/// Whether the kubelet killed the sandbox container for want of memory: its state, or its last
/// state, is `terminated` with reason `OOMKilled`.
pub fn oom_killed(pod: &Pod) -> bool {
    let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.as_ref());
    statuses.into_iter().flatten().filter(|c| c.name == SANDBOX_CONTAINER).any(|c| {
        [c.state.as_ref(), c.last_state.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|state| state.terminated.as_ref())
            .any(|t| t.reason.as_deref() == Some("OOMKilled"))
    })
}

/// The Pod's IP address, once it has one.
pub fn pod_ip(pod: &Pod) -> Option<std::net::IpAddr> {
    pod.status.as_ref().and_then(|s| s.pod_ip.as_deref()).and_then(|ip| ip.parse().ok())
}

/// The sandbox's inputs from its Secret's annotation (`None`: absent or unreadable).
pub fn inputs_of(secret: &Secret) -> Option<SandboxInputs> {
    let annotations = secret.metadata.annotations.as_ref()?;
    serde_json::from_str(annotations.get(INPUTS_ANNOTATION)?).ok()
}

/// The CPU limit and request of `cpus` cores: the limit in millicores (at least 1m), the request a
/// quarter of it (at least 10m, at most the limit), so that idle agents do not reserve whole cores.
pub fn cpu_quantities(cpus: f64) -> (String, String) {
    let millis = if cpus.is_finite() { (cpus * 1000.0).round().clamp(1.0, 1_000_000.0) as i64 } else { 1000 };
    let request = (millis / 4).max(10).min(millis);
    (format!("{millis}m"), format!("{request}m"))
}

/// Requests and limits: memory requested at its limit (a sandbox is never evicted for a
/// neighbour's growth), CPU requested at `cpu_request`.
fn limits(cpu_limit: &str, cpu_request: &str, memory: &str) -> ResourceRequirements {
    ResourceRequirements {
        limits: Some(BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu_limit.to_owned())),
            ("memory".to_owned(), Quantity(memory.to_owned())),
        ])),
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu_request.to_owned())),
            ("memory".to_owned(), Quantity(memory.to_owned())),
        ])),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn manifests(proxy: bool) -> Manifests {
        Manifests {
            settings: Settings {
                instance: "agenthold".to_owned(),
                tools_image: "registry.example/agenthold/tools:1".to_owned(),
                storage_class: Some("fast".to_owned()),
                home_size: "10Gi".to_owned(),
                server_labels: parse_labels("app.kubernetes.io/name=agenthold,app.kubernetes.io/component=server")
                    .expect("labels"),
                tunnel_port: 7701,
                proxy: proxy.then(|| (parse_labels("app.kubernetes.io/name=agenthold").expect("labels"), 3128)),
                proxy_ca: proxy.then(|| ("-----BEGIN CERTIFICATE-----".to_owned(), "abcd".to_owned())),
                proxy_addr: proxy.then(|| "agenthold-proxy:3128".to_owned()),
            },
        }
    }

    fn inputs() -> SandboxInputs {
        SandboxInputs {
            image: "agenthold/test:latest".to_owned(),
            tunnel_url: "ws://agenthold:7701/tunnel".to_owned(),
            tunnel_ca_pem: None,
            cpus: 1.5,
            memory_mib: 768,
            pids_limit: 256,
        }
    }

    fn agent() -> AgentId {
        "0190a6c2-1234-7abc-8def-0123456789ab".parse().expect("agent id")
    }

    #[test]
    fn the_pod_carries_labels_limits_mounts_hardening_and_no_token() {
        let pod = serde_json::to_value(manifests(true).pod(agent(), &inputs(), &[])).expect("json");
        assert_eq!(pod["metadata"]["name"], "agenthold-0190a6c2-1234-7abc-8def-0123456789ab");
        assert_eq!(
            pod["metadata"]["labels"],
            json!({"agenthold.instance": "agenthold", "agenthold.agent": "0190a6c2-1234-7abc-8def-0123456789ab"})
        );
        assert_eq!(pod["metadata"]["annotations"]["agenthold.pids-limit"], "256");
        let spec = &pod["spec"];
        assert_eq!(spec["restartPolicy"], "Never");
        assert_eq!(spec["automountServiceAccountToken"], false);
        let sandbox = &spec["containers"][0];
        assert_eq!(sandbox["resources"]["limits"], json!({"cpu": "1500m", "memory": "768Mi"}));
        assert_eq!(sandbox["resources"]["requests"], json!({"cpu": "375m", "memory": "768Mi"}));
        assert_eq!(sandbox["command"], json!(["/opt/agenthold/sandboxd"]));
        assert_eq!(sandbox["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
        assert_eq!(sandbox["securityContext"]["capabilities"]["add"], json!(["CHOWN", "KILL", "SETGID", "SETUID"]));
        assert_eq!(sandbox["securityContext"]["allowPrivilegeEscalation"], false);
        let token = sandbox["env"].as_array().expect("env").iter().find(|e| e["name"] == "AGENTHOLD_SANDBOX_TOKEN");
        assert_eq!(
            token.expect("token env")["valueFrom"]["secretKeyRef"],
            json!({"name": "agenthold-token-0190a6c2-1234-7abc-8def-0123456789ab", "key": "token", "optional": false})
        );
        assert!(sandbox["env"].as_array().expect("env").iter().any(|e| e["name"] == "AGENTHOLD_PROXY_CA_PEM"));
        let mounts: Vec<(&str, &str, bool)> = sandbox["volumeMounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().unwrap_or(""),
                    m["mountPath"].as_str().unwrap_or(""),
                    m["readOnly"].as_bool().unwrap_or(false),
                )
            })
            .collect();
        assert_eq!(mounts, vec![("home", "/home/agent", false), ("tools", "/opt/agenthold", true)]);
        assert_eq!(
            spec["volumes"][0]["persistentVolumeClaim"]["claimName"],
            "agenthold-home-0190a6c2-1234-7abc-8def-0123456789ab"
        );
        let init = &spec["initContainers"][0];
        assert_eq!(init["image"], "registry.example/agenthold/tools:1");
        assert_eq!(init["command"], json!(["cp", "/agenthold/sandboxd", "/agenthold/fakeagent", "/opt/agenthold/"]));
        assert!(!pod.to_string().contains("s3cret"), "no token anywhere in the Pod");
    }

    #[test]
    fn the_secret_holds_the_token_and_the_inputs_round_trip() {
        let m = manifests(false);
        let secret = m.secret(agent(), "s3cret", &inputs());
        let json = serde_json::to_value(&secret).expect("json");
        assert_eq!(json["data"]["token"], "czNjcmV0");
        assert_eq!(json["type"], "Opaque");
        assert_eq!(inputs_of(&secret), Some(inputs()));
        let mut broken = secret;
        broken.metadata.annotations = Some(BTreeMap::from([(INPUTS_ANNOTATION.to_owned(), "{".to_owned())]));
        assert_eq!(inputs_of(&broken), None);
    }

    #[test]
    fn the_claim_asks_for_the_size_and_class() {
        let claim = serde_json::to_value(manifests(false).claim(agent())).expect("json");
        assert_eq!(claim["spec"]["accessModes"], json!(["ReadWriteOnce"]));
        assert_eq!(claim["spec"]["storageClassName"], "fast");
        assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "10Gi");
    }

    #[test]
    fn the_network_policy_allows_the_tunnel_and_the_proxy_only_not_dns() {
        let policy = serde_json::to_value(manifests(true).network_policy(agent())).expect("json");
        let spec = &policy["spec"];
        assert_eq!(spec["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(spec["ingress"], json!([]));
        assert_eq!(spec["podSelector"]["matchLabels"]["agenthold.agent"], "0190a6c2-1234-7abc-8def-0123456789ab");
        let egress = spec["egress"].as_array().expect("egress");
        assert_eq!(egress.len(), 2);
        assert_eq!(egress[0]["ports"], json!([{"protocol": "TCP", "port": 7701}]));
        assert_eq!(egress[0]["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"], "server");
        assert_eq!(egress[1]["ports"], json!([{"protocol": "TCP", "port": 3128}]));
        assert!(!policy.to_string().contains("53"), "no DNS port: {policy}");
        let without_proxy = serde_json::to_value(manifests(false).network_policy(agent())).expect("json");
        assert_eq!(without_proxy["spec"]["egress"].as_array().map(Vec::len), Some(1));
        assert!(egress.iter().all(|rule| rule.get("to").is_some()), "no rule allows every destination");
    }

    #[test]
    fn a_pod_resolves_only_the_server_and_the_proxy_from_its_hosts_file() {
        let hosts = [
            ("10.96.0.10".parse().expect("ip"), "agenthold".to_owned()),
            ("10.96.0.11".parse().expect("ip"), "agenthold-proxy".to_owned()),
        ];
        let pod = serde_json::to_value(manifests(true).pod(agent(), &inputs(), &hosts)).expect("json");
        let spec = &pod["spec"];
        assert_eq!(spec["dnsPolicy"], "None");
        assert_eq!(spec["dnsConfig"]["nameservers"], json!([NO_RESOLVER]));
        assert_eq!(spec["dnsConfig"]["searches"], json!([]));
        assert_eq!(
            spec["hostAliases"],
            json!([{"ip": "10.96.0.10", "hostnames": ["agenthold"]}, {"ip": "10.96.0.11", "hostnames": ["agenthold-proxy"]}])
        );
        assert_eq!(
            names_to_resolve("ws://agenthold:7701/tunnel", Some("agenthold-proxy.ns.svc:3128")),
            vec!["agenthold".to_owned(), "agenthold-proxy.ns.svc".to_owned()]
        );
        assert_eq!(names_to_resolve("wss://10.0.0.5:7701/tunnel", Some("[fd00::1]:3128")), Vec::<String>::new());
    }

    fn pod_from(value: Value) -> Pod {
        serde_json::from_value(value).expect("a pod")
    }

    #[test]
    fn status_follows_the_phase_the_secret_and_the_annotations() {
        let m = manifests(true);
        assert_eq!(m.status(None, false), SandboxStatus::Missing);
        assert_eq!(m.status(None, true), SandboxStatus::Stopped);
        let made = serde_json::to_value(m.pod(agent(), &inputs(), &[])).expect("json");
        let with_phase = |phase: &str| {
            let mut pod = made.clone();
            pod["status"] = json!({"phase": phase});
            pod_from(pod)
        };
        for (phase, status) in [
            ("Pending", SandboxStatus::Running),
            ("Running", SandboxStatus::Running),
            ("Succeeded", SandboxStatus::Stopped),
            ("Failed", SandboxStatus::Stopped),
        ] {
            assert_eq!(m.status(Some(&with_phase(phase)), true), status, "{phase}");
        }
        let mut deleting = made.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-12-01T10:00:00Z");
        assert_eq!(m.status(Some(&pod_from(deleting)), true), SandboxStatus::Stopped);
        assert_eq!(manifests(false).status(Some(&with_phase("Running")), true), SandboxStatus::Stale, "another CA");
        let mut old = made;
        old["metadata"]["annotations"]["agenthold.spec"] = json!("k0");
        assert_eq!(m.status(Some(&pod_from(old)), true), SandboxStatus::Stale);
    }

    #[test]
    fn oom_is_read_from_the_sandbox_containers_state_or_last_state() {
        let pod = |statuses: Value| pod_from(json!({"status": {"phase": "Failed", "containerStatuses": statuses}}));
        let status = |name: &str, field: &str, reason: &str| {
            json!({"name": name, "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                   field: {"terminated": {"exitCode": 137, "reason": reason}}})
        };
        assert!(oom_killed(&pod(json!([status("sandbox", "state", "OOMKilled")]))));
        assert!(oom_killed(&pod(json!([status("sandbox", "lastState", "OOMKilled")]))));
        assert!(!oom_killed(&pod(json!([status("sandbox", "state", "Error")]))));
        assert!(!oom_killed(&pod(json!([status("tools", "state", "OOMKilled")]))));
        assert!(!oom_killed(&pod_from(json!({}))));
    }

    #[test]
    fn cpu_quantities_are_millicores_with_a_quarter_requested() {
        assert_eq!(cpu_quantities(2.0), ("2000m".to_owned(), "500m".to_owned()));
        assert_eq!(cpu_quantities(0.01), ("10m".to_owned(), "10m".to_owned()));
        assert_eq!(cpu_quantities(f64::NAN), ("1000m".to_owned(), "250m".to_owned()));
    }
}
