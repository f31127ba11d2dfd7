//! The Kubernetes driver (`AGENTHOLD_DRIVER=kubernetes`, the `kube` crate): per agent one Pod, a
//! PersistentVolumeClaim for `/home/agent`, a Secret holding the sandbox token (the Pod refers to
//! it; the token is never in the Pod spec) and a NetworkPolicy letting the Pod reach only the
//! server's tunnel, the egress proxy and the cluster DNS. The objects are built by the pure
//! [`manifests`] from the driver's [`settings`]; this module makes the API calls.
//!
//! Sleep deletes the Pod and keeps the claim and the Secret (whose annotation records what the
//! Pod is made from); a wake makes the Pod again. Destroy deletes all four. A Pod whose settings
//! version, tools image or proxy CA differ from the server's is [`SandboxStatus::Stale`], made
//! again around the same claim. The cluster configuration comes from the in-cluster service
//! account or a kubeconfig (`kube::Config::infer`). Nothing here was run against a live cluster:
//! it is tested against recorded API exchanges (docs/kubernetes.md says exactly what).

pub mod manifests;
pub mod settings;

use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use self::manifests::{Manifests, SandboxInputs, Settings};
use super::{DriverError, SandboxDriver, SandboxSpec, SandboxStatus};
use super::{Labelled, ObjectKind};
use crate::ids::AgentId;

/// The grace period a sleeping sandbox's Pod is given to stop (the Docker driver's stop timeout).
const STOP_GRACE_SECS: u32 = 5;

/// What to do when an object to create exists already (409 AlreadyExists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnConflict {
    /// Keep it (the home claim: never touched once made).
    Keep,
    /// Replace it with the new one (the Secret with a new token, the policy with new settings).
    Replace,
}

/// The Kubernetes driver.
pub struct KubeDriver {
    client: kube::Client,
    /// The namespace of every sandbox object.
    namespace: String,
    manifests: Manifests,
    /// How long to wait for a deleted Pod to go, or for a new Pod to get its address.
    wait: Duration,
    /// How often to look meanwhile.
    poll: Duration,
}

impl KubeDriver {
    /// Connects with the in-cluster service account or the kubeconfig (`kube::Config::infer`);
    /// the namespace is `namespace`, else the configuration's (the service account's own).
    pub async fn connect(settings: Settings, namespace: Option<String>) -> Result<Self, DriverError> {
        let config = kube::Config::infer().await.map_err(|e| {
            DriverError::Engine(format!(
                "no Kubernetes configuration (neither an in-cluster service account nor a kubeconfig): {e}"
            ))
        })?;
        let namespace = namespace.unwrap_or_else(|| config.default_namespace.clone());
        let client = kube::Client::try_from(config)
            .map_err(|e| DriverError::Engine(format!("making the Kubernetes client: {e}")))?;
        Self::new(client, namespace, settings)
    }

    /// A driver on `client` (tests point one at a recorded API), checking the settings.
    pub fn new(client: kube::Client, namespace: String, settings: Settings) -> Result<Self, DriverError> {
        let invalid = |e: String| DriverError::Engine(format!("Kubernetes driver settings: {e}"));
        manifests::check_instance(&settings.instance).map_err(invalid)?;
        manifests::check_quantity(&settings.home_size)
            .map_err(|e| invalid(format!("AGENTHOLD_KUBE_HOME_SIZE: {e}")))?;
        if namespace.is_empty() {
            return Err(invalid("the namespace is empty".to_owned()));
        }
        Ok(Self {
            client,
            namespace,
            manifests: Manifests { settings },
            wait: Duration::from_secs(30),
            poll: Duration::from_millis(250),
        })
    }

    /// Changes how long the driver waits for a Pod to go or to get an address, and how often it
    /// looks meanwhile.
    #[must_use]
    pub fn with_waits(mut self, wait: Duration, poll: Duration) -> Self {
        self.wait = wait;
        self.poll = poll.max(Duration::from_millis(1));
        self
    }

    /// The namespace sandboxes live in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// A failed API call as a driver error: what was being done, and for a 403 which permission
    /// the service account lacks.
    fn failed(&self, what: &str, error: kube::Error) -> DriverError {
        match error {
            kube::Error::Api(status) if status.code == 403 => DriverError::Engine(format!(
                "Kubernetes refused to {what} in namespace {} (403 Forbidden: {}); the server's service account \
                 needs the permissions of deploy/kubernetes/base/rbac.yaml there",
                self.namespace, status.message
            )),
            kube::Error::Api(status) => DriverError::Engine(format!(
                "Kubernetes could not {what} in namespace {}: {} ({} {})",
                self.namespace, status.message, status.code, status.reason
            )),
            other => DriverError::Engine(format!("Kubernetes could not {what}: {other}")),
        }
    }

    async fn get<K>(&self, name: &str, what: &str) -> Result<Option<K>, DriverError>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        self.api::<K>().get_opt(name).await.map_err(|e| self.failed(what, e))
    }

    /// Creates `object`; one that exists already is kept or replaced.
    async fn create_object<K>(&self, object: &K, on_conflict: OnConflict, what: &str) -> Result<(), DriverError>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        let api = self.api::<K>();
        match api.create(&PostParams::default(), object).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 && on_conflict == OnConflict::Keep => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let name = object.meta().name.clone().unwrap_or_default();
                api.replace(&name, &PostParams::default(), object).await.map(|_| ()).map_err(|e| self.failed(what, e))
            }
            Err(error) => Err(self.failed(what, error)),
        }
    }

    /// Deletes an object (gone already is fine).
    async fn delete<K>(&self, name: &str, params: &DeleteParams, what: &str) -> Result<(), DriverError>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        match self.api::<K>().delete(name, params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(self.failed(what, error)),
        }
    }

    /// Deletes the agent's Pod at once (no grace: the API object goes now, the kubelet stops its
    /// containers after).
    async fn delete_pod_now(&self, agent_id: AgentId) -> Result<(), DriverError> {
        let params = DeleteParams::background().grace_period(0);
        self.delete::<Pod>(&self.manifests.pod_name(agent_id), &params, "delete the sandbox Pod").await
    }

    /// Waits until the agent's Pod is gone (one being deleted keeps its name until it stopped).
    async fn wait_pod_gone(&self, agent_id: AgentId) -> Result<(), DriverError> {
        let deadline = Instant::now() + self.wait;
        let name = self.manifests.pod_name(agent_id);
        loop {
            if self.get::<Pod>(&name, "read the sandbox Pod").await?.is_none() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(DriverError::Engine(format!(
                    "the Pod {name} was still being deleted after {} s",
                    self.wait.as_secs()
                )));
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    /// Makes the agent's Pod from `inputs`. One that exists already is kept when `keep_live` and
    /// it is live; else (ended, being deleted, or made with another token) it is deleted first.
    async fn create_pod(&self, agent_id: AgentId, inputs: &SandboxInputs, keep_live: bool) -> Result<(), DriverError> {
        let hosts = self.hosts_file(inputs).await?;
        let pod = self.manifests.pod(agent_id, inputs, &hosts);
        let api = self.api::<Pod>();
        for attempt in 0..2 {
            match api.create(&PostParams::default(), &pod).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(status)) if status.code == 409 && attempt == 0 => {
                    let existing = self.get::<Pod>(&self.manifests.pod_name(agent_id), "read the sandbox Pod").await?;
                    let live = existing
                        .as_ref()
                        .is_some_and(|p| p.metadata.deletion_timestamp.is_none() && !manifests::pod_ended(p));
                    if live && keep_live {
                        return Ok(());
                    }
                    if existing.as_ref().is_some_and(|p| p.metadata.deletion_timestamp.is_none()) {
                        self.delete_pod_now(agent_id).await?;
                    }
                    self.wait_pod_gone(agent_id).await?;
                }
                Err(error) => return Err(self.failed("create the sandbox Pod", error)),
            }
        }
        Err(DriverError::Engine(format!("the Pod {} exists already", self.manifests.pod_name(agent_id))))
    }

    /// The addresses of the names a sandbox Pod needs (the tunnel's host, the proxy's), resolved
    /// here for its hosts file: the Pod itself has no DNS (docs/kubernetes.md, "DNS").
    async fn hosts_file(&self, inputs: &SandboxInputs) -> Result<Vec<(std::net::IpAddr, String)>, DriverError> {
        let names = manifests::names_to_resolve(&inputs.tunnel_url, self.manifests.settings.proxy_addr.as_deref());
        let mut hosts = Vec::with_capacity(names.len());
        for name in names {
            let found = tokio::net::lookup_host((name.as_str(), 0)).await.ok().and_then(|mut found| found.next());
            let Some(address) = found else {
                return Err(DriverError::Engine(format!(
                    "cannot resolve {name}: a sandbox Pod has no DNS, so the server resolves the tunnel's and the \
                     proxy's names for its hosts file"
                )));
            };
            hosts.push((address.ip(), name));
        }
        Ok(hosts)
    }

    async fn create_inner(&self, spec: SandboxSpec) -> Result<String, DriverError> {
        let agent_id = spec.agent_id;
        let inputs = SandboxInputs::from(&spec);
        let m = &self.manifests;
        // The Pod last: its policy is in place before it runs, its claim and Secret exist.
        let (claim, secret, policy) =
            (m.claim(agent_id), m.secret(agent_id, spec.token.expose(), &inputs), m.network_policy(agent_id));
        tokio::try_join!(
            self.create_object(&claim, OnConflict::Keep, "create the home claim"),
            self.create_object(&secret, OnConflict::Replace, "create the sandbox Secret"),
            self.create_object(&policy, OnConflict::Replace, "create the sandbox NetworkPolicy"),
        )?;
        self.create_pod(agent_id, &inputs, false).await?;
        Ok(m.pod_name(agent_id))
    }

    async fn start_inner(&self, agent_id: AgentId) -> Result<(), DriverError> {
        let name = self.manifests.pod_name(agent_id);
        if let Some(pod) = self.get::<Pod>(&name, "read the sandbox Pod").await? {
            if pod.metadata.deletion_timestamp.is_none() && !manifests::pod_ended(&pod) {
                return Ok(());
            }
            if pod.metadata.deletion_timestamp.is_none() {
                self.delete_pod_now(agent_id).await?;
            }
            self.wait_pod_gone(agent_id).await?;
        }
        let secret_name = self.manifests.secret_name(agent_id);
        let secret = self.get::<Secret>(&secret_name, "read the sandbox Secret").await?.ok_or_else(|| {
            DriverError::Engine(format!("the sandbox Secret {secret_name} is gone: the sandbox must be made again"))
        })?;
        let inputs = manifests::inputs_of(&secret).ok_or_else(|| {
            DriverError::Engine(format!("the sandbox Secret {secret_name} does not say what its Pod is made from"))
        })?;
        self.create_pod(agent_id, &inputs, true).await
    }

    async fn status_inner(&self, agent_id: AgentId) -> Result<SandboxStatus, DriverError> {
        let pod = self.get::<Pod>(&self.manifests.pod_name(agent_id), "read the sandbox Pod").await?;
        let secret_exists = match &pod {
            Some(_) => true,
            None => {
                self.get::<Secret>(&self.manifests.secret_name(agent_id), "read the sandbox Secret").await?.is_some()
            }
        };
        Ok(self.manifests.status(pod.as_ref(), secret_exists))
    }

    async fn source_addr_inner(&self, agent_id: AgentId) -> Result<Option<std::net::IpAddr>, DriverError> {
        // A new Pod has no address until it is scheduled and its network made.
        let deadline = Instant::now() + self.wait;
        let name = self.manifests.pod_name(agent_id);
        loop {
            let Some(pod) = self.get::<Pod>(&name, "read the sandbox Pod").await? else { return Ok(None) };
            if let Some(ip) = manifests::pod_ip(&pod) {
                return Ok(Some(ip));
            }
            if manifests::pod_ended(&pod) || pod.metadata.deletion_timestamp.is_some() {
                return Ok(None);
            }
            if Instant::now() >= deadline {
                return Err(DriverError::Engine(format!(
                    "the Pod {name} had no address after {} s (not scheduled yet?)",
                    self.wait.as_secs()
                )));
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    async fn destroy_inner(&self, agent_id: AgentId) -> Result<(), DriverError> {
        let m = &self.manifests;
        self.delete_pod_now(agent_id).await?;
        let params = DeleteParams::background();
        let (secret, policy, claim) = (m.secret_name(agent_id), m.policy_name(agent_id), m.claim_name(agent_id));
        tokio::try_join!(
            self.delete::<Secret>(&secret, &params, "delete the sandbox Secret"),
            self.delete::<NetworkPolicy>(&policy, &params, "delete the sandbox NetworkPolicy"),
            self.delete::<PersistentVolumeClaim>(&claim, &params, "delete the home claim"),
        )?;
        Ok(())
    }

    async fn labelled_inner(&self) -> Result<Vec<Labelled>, DriverError> {
        let params = ListParams::default().labels(&self.manifests.instance_selector());
        let (pods, claims, secrets, policies) = tokio::try_join!(
            async { self.api::<Pod>().list(&params).await.map_err(|e| self.failed("list the sandbox Pods", e)) },
            async {
                self.api::<PersistentVolumeClaim>()
                    .list(&params)
                    .await
                    .map_err(|e| self.failed("list the home claims", e))
            },
            async { self.api::<Secret>().list(&params).await.map_err(|e| self.failed("list the sandbox Secrets", e)) },
            async {
                self.api::<NetworkPolicy>()
                    .list(&params)
                    .await
                    .map_err(|e| self.failed("list the sandbox NetworkPolicies", e))
            },
        )?;
        let mut found = Vec::new();
        found.extend(pods.items.iter().filter_map(|o| labelled(ObjectKind::Container, &o.metadata)));
        found.extend(claims.items.iter().filter_map(|o| labelled(ObjectKind::Volume, &o.metadata)));
        found.extend(secrets.items.iter().filter_map(|o| labelled(ObjectKind::Secret, &o.metadata)));
        found.extend(policies.items.iter().filter_map(|o| labelled(ObjectKind::Network, &o.metadata)));
        Ok(found)
    }

    async fn remove_object_inner(&self, object: &Labelled) -> Result<(), DriverError> {
        let params = DeleteParams::background();
        let name = &object.name;
        match object.kind {
            ObjectKind::Container => {
                self.delete::<Pod>(name, &params.grace_period(0), "delete an orphaned sandbox Pod").await
            }
            ObjectKind::Volume => {
                self.delete::<PersistentVolumeClaim>(name, &params, "delete an orphaned home claim").await
            }
            ObjectKind::Secret => self.delete::<Secret>(name, &params, "delete an orphaned sandbox Secret").await,
            ObjectKind::Network => {
                self.delete::<NetworkPolicy>(name, &params, "delete an orphaned sandbox NetworkPolicy").await
            }
        }
    }
}

/// An object of the orphan sweep from its metadata (`None` without a readable agent label).
fn labelled(kind: ObjectKind, meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<Labelled> {
    let agent_id = meta.labels.as_ref()?.get(manifests::AGENT_LABEL)?.parse::<AgentId>().ok()?;
    let created = meta.creation_timestamp.as_ref().and_then(|t| {
        chrono::DateTime::from_timestamp(t.0.as_second(), u32::try_from(t.0.subsec_nanosecond()).unwrap_or(0))
    });
    Some(Labelled { kind, name: meta.name.clone()?, agent_id, created, engine: None, made_by: None })
}

impl SandboxDriver for KubeDriver {
    fn kind(&self) -> &'static str {
        "kubernetes"
    }

    fn prepare<'a>(&'a self, _image: &'a str) -> BoxFuture<'a, ()> {
        async move {
            // Says at start, not at the first agent's wake, when the API or a permission is missing.
            let params = ListParams::default().labels(&self.manifests.instance_selector()).limit(1);
            match self.api::<Pod>().list(&params).await {
                Ok(_) => tracing::info!(namespace = %self.namespace, "the Kubernetes API answers"),
                Err(error) => {
                    let error = self.failed("list the sandbox Pods", error);
                    tracing::warn!(%error, "the Kubernetes driver cannot reach the API yet");
                }
            }
        }
        .boxed()
    }

    fn isolated(&self) -> bool {
        true
    }

    fn home_dir(&self, _agent_id: AgentId) -> String {
        super::docker::HOME_DIR.to_owned()
    }

    fn sandbox_user(&self) -> Option<String> {
        Some("agent".to_owned())
    }

    fn tools_dir(&self) -> String {
        super::docker::TOOLS_DIR.to_owned()
    }

    fn create(&self, spec: SandboxSpec) -> BoxFuture<'_, Result<String, DriverError>> {
        self.create_inner(spec).boxed()
    }

    fn start(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        self.start_inner(agent_id).boxed()
    }

    fn stop(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        async move {
            let params = DeleteParams::background().grace_period(STOP_GRACE_SECS);
            self.delete::<Pod>(&self.manifests.pod_name(agent_id), &params, "delete the sandbox Pod").await
        }
        .boxed()
    }

    fn destroy(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        self.destroy_inner(agent_id).boxed()
    }

    fn status(&self, agent_id: AgentId) -> BoxFuture<'_, Result<SandboxStatus, DriverError>> {
        self.status_inner(agent_id).boxed()
    }

    fn remove_container(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        self.delete_pod_now(agent_id).boxed()
    }

    fn source_addr(&self, agent_id: AgentId) -> BoxFuture<'_, Result<Option<std::net::IpAddr>, DriverError>> {
        self.source_addr_inner(agent_id).boxed()
    }

    fn labelled_objects(&self) -> BoxFuture<'_, Result<Vec<Labelled>, DriverError>> {
        self.labelled_inner().boxed()
    }

    fn remove_object<'a>(&'a self, object: &'a Labelled) -> BoxFuture<'a, Result<(), DriverError>> {
        self.remove_object_inner(object).boxed()
    }

    fn oom_killed(&self, agent_id: AgentId) -> BoxFuture<'_, Result<bool, DriverError>> {
        async move {
            let pod = self.get::<Pod>(&self.manifests.pod_name(agent_id), "read the sandbox Pod").await?;
            Ok(pod.as_ref().is_some_and(manifests::oom_killed))
        }
        .boxed()
    }
}
