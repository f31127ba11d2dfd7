//! The Kubernetes driver against recorded API exchanges (`server/tests/data/kube/*.json`, built
//! from the Kubernetes API reference: no API server runs here). Each test replays one recording
//! and checks the requests the driver made: method, path, query, and what matters in each body.

use std::time::Duration;

use agenthold_server::ids::AgentId;
use agenthold_server::sandbox::ObjectKind;
use agenthold_server::sandbox::kubernetes::KubeDriver;
use agenthold_server::sandbox::kubernetes::manifests::{Settings, parse_labels};
use agenthold_server::sandbox::{SandboxDriver, SandboxSpec, SandboxStatus};
use agenthold_server::secret::Secret;
use serde_json::{Value, json};

use crate::support::kube_replay::Replay;

const NS: &str = "sandboxes";
const AGENT: &str = "0190a6c2-1234-7abc-8def-0123456789ab";
const CORE: &str = "/api/v1/namespaces/sandboxes";
const NET: &str = "/apis/networking.k8s.io/v1/namespaces/sandboxes";
const TOKEN: &str = "a-sandbox-token-4f1d9c";

fn agent() -> AgentId {
    AGENT.parse().expect("agent id")
}

fn pod_path() -> String {
    format!("{CORE}/pods/agenthold-{AGENT}")
}

fn settings(proxy: bool) -> Settings {
    Settings {
        instance: "agenthold".to_owned(),
        tools_image: "agenthold/tools:test".to_owned(),
        storage_class: Some("fast".to_owned()),
        home_size: "10Gi".to_owned(),
        server_labels: parse_labels(agenthold_server::config::KUBE_SERVER_LABELS).expect("labels"),
        tunnel_port: 7701,
        proxy: proxy.then(|| (parse_labels(agenthold_server::config::KUBE_SERVER_LABELS).expect("labels"), 3128)),
        proxy_ca: proxy.then(|| ("-----BEGIN CERTIFICATE-----\nproxy-ca\n".to_owned(), "0011223344556677".to_owned())),
        // Resolved by the driver for the Pods' hosts files (the test host resolves `localhost`).
        proxy_addr: proxy.then(|| "localhost:3128".to_owned()),
    }
}

fn driver(replay: &Replay, proxy: bool) -> KubeDriver {
    KubeDriver::new(replay.client(), NS.to_owned(), settings(proxy))
        .expect("valid settings")
        .with_waits(Duration::from_secs(5), Duration::from_millis(10))
}

fn spec() -> SandboxSpec {
    SandboxSpec {
        agent_id: agent(),
        image: "agenthold/test:latest".to_owned(),
        tunnel_url: "ws://localhost:7701/tunnel".to_owned(),
        tunnel_ca_pem: None,
        token: Secret::new(TOKEN),
        cpus: 1.5,
        memory_mib: 768,
        pids_limit: 256,
        disk_mib: None,
    }
}

/// The Pod a request created, checked for what every sandbox Pod must have.
fn check_pod(pod: &Value) {
    assert_eq!(pod["metadata"]["name"], format!("agenthold-{AGENT}"));
    assert_eq!(pod["metadata"]["labels"], json!({"agenthold.instance": "agenthold", "agenthold.agent": AGENT}));
    let spec = &pod["spec"];
    assert_eq!(spec["restartPolicy"], "Never");
    assert_eq!(spec["automountServiceAccountToken"], false);
    let sandbox = &spec["containers"][0];
    assert_eq!(sandbox["image"], "agenthold/test:latest");
    assert_eq!(sandbox["resources"]["limits"], json!({"cpu": "1500m", "memory": "768Mi"}));
    let token = sandbox["env"].as_array().expect("env").iter().find(|e| e["name"] == "AGENTHOLD_SANDBOX_TOKEN");
    assert_eq!(
        token.expect("the token variable")["valueFrom"]["secretKeyRef"],
        json!({"name": format!("agenthold-token-{AGENT}"), "key": "token", "optional": false})
    );
    assert_eq!(spec["volumes"][0]["persistentVolumeClaim"]["claimName"], format!("agenthold-home-{AGENT}"));
    assert_eq!(spec["initContainers"][0]["image"], "agenthold/tools:test");
    assert!(!pod.to_string().contains(TOKEN), "the token is not in the Pod spec");
}

#[tokio::test]
async fn create_makes_the_claim_secret_policy_then_the_pod_and_start_leaves_it() {
    let replay = Replay::start("create.json").await;
    let driver = driver(&replay, true);
    let handle = driver.create(spec()).await.expect("created");
    assert_eq!(handle, format!("agenthold-{AGENT}"));
    driver.start(agent()).await.expect("started");
    assert_eq!(driver.source_addr(agent()).await.expect("address"), Some("10.42.1.17".parse().expect("ip")));

    let seen = replay.seen();
    let pod_at = seen.iter().position(|s| s.method == "POST" && s.path == format!("{CORE}/pods"));
    let others_at = seen.iter().rposition(|s| s.method == "POST" && s.path != format!("{CORE}/pods"));
    assert!(others_at < pod_at, "the Pod is made last: {seen:#?}");

    let claim = replay.body("POST", &format!("{CORE}/persistentvolumeclaims"));
    assert_eq!(claim["metadata"]["name"], format!("agenthold-home-{AGENT}"));
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "10Gi");
    assert_eq!(claim["spec"]["storageClassName"], "fast");
    assert_eq!(claim["spec"]["accessModes"], json!(["ReadWriteOnce"]));

    let secret = replay.body("POST", &format!("{CORE}/secrets"));
    assert_eq!(secret["metadata"]["name"], format!("agenthold-token-{AGENT}"));
    assert_eq!(secret["data"]["token"], "YS1zYW5kYm94LXRva2VuLTRmMWQ5Yw==", "base64 of the token");
    let inputs: Value =
        serde_json::from_str(secret["metadata"]["annotations"]["agenthold.sandbox"].as_str().expect("inputs"))
            .expect("JSON");
    assert_eq!(inputs["memory_mib"], 768);

    let policy = replay.body("POST", &format!("{NET}/networkpolicies"));
    assert_eq!(policy["spec"]["podSelector"]["matchLabels"]["agenthold.agent"], AGENT);
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(policy["spec"]["ingress"], json!([]));
    let ports: Vec<Value> =
        policy["spec"]["egress"].as_array().expect("egress").iter().map(|rule| rule["ports"].clone()).collect();
    assert_eq!(
        ports,
        vec![json!([{"protocol": "TCP", "port": 7701}]), json!([{"protocol": "TCP", "port": 3128}]),],
        "no DNS: the cluster's resolver forwards any name"
    );

    let pod = replay.body("POST", &format!("{CORE}/pods"));
    check_pod(&pod);
    // The names it needs are in its hosts file; its resolver answers nothing.
    assert_eq!(pod["spec"]["dnsPolicy"], "None");
    assert_eq!(pod["spec"]["dnsConfig"]["nameservers"], json!(["127.0.0.1"]));
    let aliases = pod["spec"]["hostAliases"].as_array().expect("host aliases");
    assert!(
        aliases
            .iter()
            .any(|a| a["hostnames"] == json!(["localhost"]) && a["ip"].as_str().is_some_and(|ip| !ip.is_empty())),
        "{aliases:?}"
    );
    let env = pod["spec"]["containers"][0]["env"].as_array().expect("env").clone();
    assert!(env.iter().any(|e| e["name"] == "AGENTHOLD_PROXY_CA_PEM"), "the proxy CA is handed over");
    assert_eq!(pod["metadata"]["annotations"]["agenthold.proxy-ca"], "0011223344556677");
    replay.finish();
}

#[tokio::test]
async fn create_over_existing_objects_keeps_the_claim_and_replaces_the_rest() {
    let replay = Replay::start("create_conflict.json").await;
    let driver = driver(&replay, false);
    driver.create(spec()).await.expect("created despite 409s");
    let secret = replay.body("PUT", &format!("{CORE}/secrets/agenthold-token-{AGENT}"));
    assert_eq!(secret["data"]["token"], "YS1zYW5kYm94LXRva2VuLTRmMWQ5Yw==", "the new token replaces the old");
    let policy = replay.body("PUT", &format!("{NET}/networkpolicies/agenthold-{AGENT}"));
    assert_eq!(policy["spec"]["egress"].as_array().map(Vec::len), Some(1), "no proxy rule without a proxy, no DNS");
    let deleted = replay.body("DELETE", &pod_path());
    assert_eq!(deleted["gracePeriodSeconds"], 0, "the old Pod goes at once");
    let posts: Vec<Value> = replay
        .seen()
        .into_iter()
        .filter(|s| s.method == "POST" && s.path == format!("{CORE}/pods"))
        .map(|s| s.body)
        .collect();
    assert_eq!(posts.len(), 2);
    check_pod(&posts[1]);
    assert!(
        !replay.seen().iter().any(|s| s.method == "PUT" && s.path.contains("persistentvolumeclaims")),
        "an existing home claim is never touched"
    );
    replay.finish();
}

#[tokio::test]
async fn sleep_deletes_the_pod_and_wake_makes_it_again_from_the_secret() {
    let replay = Replay::start("sleep_wake.json").await;
    let driver = driver(&replay, false);
    driver.stop(agent()).await.expect("stopped");
    assert_eq!(replay.body("DELETE", &pod_path())["gracePeriodSeconds"], 5);
    assert_eq!(driver.status(agent()).await.expect("status"), SandboxStatus::Stopped);
    driver.start(agent()).await.expect("started");
    let pod = replay.body("POST", &format!("{CORE}/pods"));
    check_pod(&pod);
    // Made from the inputs recorded in the Secret, not from anything the server kept.
    assert_eq!(pod["spec"]["containers"][0]["resources"]["requests"], json!({"cpu": "375m", "memory": "768Mi"}));
    assert!(
        !replay.seen().iter().any(|s| s.path.contains("persistentvolumeclaims") || s.path.contains("networkpolicies")),
        "sleep and wake leave the claim and the policy alone"
    );
    replay.finish();
}

#[tokio::test]
async fn waking_a_pod_that_ended_deletes_it_first() {
    let replay = Replay::start("start_after_failure.json").await;
    let driver = driver(&replay, false);
    driver.start(agent()).await.expect("started");
    assert_eq!(replay.body("DELETE", &pod_path())["gracePeriodSeconds"], 0);
    check_pod(&replay.body("POST", &format!("{CORE}/pods")));
    replay.finish();
}

#[tokio::test]
async fn status_follows_the_pod_phase_and_a_missing_pod() {
    let replay = Replay::start("status.json").await;
    let driver = driver(&replay, false);
    let mut statuses = Vec::new();
    for _ in 0..7 {
        statuses.push(driver.status(agent()).await.expect("status"));
    }
    use SandboxStatus::{Missing, Running, Stale, Stopped};
    assert_eq!(statuses, vec![Running, Running, Stopped, Stopped, Stopped, Stale, Missing]);
    replay.finish();
}

#[tokio::test]
async fn destroy_deletes_everything_and_already_gone_is_fine() {
    let replay = Replay::start("destroy.json").await;
    let driver = driver(&replay, false);
    driver.destroy(agent()).await.expect("destroyed");
    assert_eq!(replay.body("DELETE", &pod_path())["gracePeriodSeconds"], 0);
    replay.finish();
}

#[tokio::test]
async fn a_forbidden_call_says_which_permission_is_missing() {
    let replay = Replay::start("forbidden.json").await;
    let driver = driver(&replay, false);
    let error = driver.status(agent()).await.expect_err("forbidden").to_string();
    assert!(error.contains("403 Forbidden"), "{error}");
    assert!(error.contains("read the sandbox Pod"), "{error}");
    assert!(error.contains("namespace sandboxes"), "{error}");
    assert!(error.contains("service account"), "{error}");
    assert!(error.contains("cannot get resource \"pods\""), "{error}");
    let error = driver.stop(agent()).await.expect_err("forbidden").to_string();
    assert!(error.contains("delete the sandbox Pod") && error.contains("403 Forbidden"), "{error}");
    replay.finish();
}

#[tokio::test]
async fn an_oom_kill_is_read_from_the_container_state() {
    let replay = Replay::start("oom.json").await;
    let driver = driver(&replay, false);
    let mut found = Vec::new();
    for _ in 0..4 {
        found.push(driver.oom_killed(agent()).await.expect("asked"));
    }
    assert_eq!(found, vec![true, true, false, false]);
    replay.finish();
}

#[tokio::test]
async fn the_orphan_sweep_lists_and_removes_the_labelled_objects() {
    let replay = Replay::start("orphans.json").await;
    let driver = driver(&replay, false);
    let mut objects = driver.labelled_objects().await.expect("listed");
    objects.sort_by_key(|o| o.kind.as_str());
    let kinds: Vec<(ObjectKind, &str)> = objects.iter().map(|o| (o.kind, o.name.as_str())).collect();
    let (pod, claim, secret) =
        (format!("agenthold-{AGENT}"), format!("agenthold-home-{AGENT}"), format!("agenthold-token-{AGENT}"));
    assert_eq!(
        kinds,
        vec![
            (ObjectKind::Container, pod.as_str()),
            (ObjectKind::Network, pod.as_str()),
            (ObjectKind::Secret, secret.as_str()),
            (ObjectKind::Volume, claim.as_str()),
        ]
    );
    assert!(objects.iter().all(|o| o.agent_id == agent() && o.created.is_some()));
    let lists: Vec<Vec<String>> = replay
        .seen()
        .iter()
        .filter(|s| s.method == "GET")
        .map(|s| crate::support::kube_replay::pairs(s.query.as_deref()))
        .collect();
    assert_eq!(lists.len(), 4);
    assert!(
        lists.iter().all(|q| q == &["labelSelector=agenthold.instance=agenthold,agenthold.agent".to_owned()]),
        "only this instance's agent objects: {lists:?}"
    );
    for object in &objects {
        driver.remove_object(object).await.expect("removed (or gone already)");
    }
    replay.finish();
}

#[tokio::test]
async fn bad_settings_are_refused_without_a_panic() {
    let replay = Replay::start("destroy.json").await;
    let mut bad = settings(false);
    bad.instance = "Not_A_Name".to_owned();
    assert!(KubeDriver::new(replay.client(), NS.to_owned(), bad).is_err());
    let mut bad = settings(false);
    bad.home_size = "ten gigs".to_owned();
    let error = KubeDriver::new(replay.client(), NS.to_owned(), bad).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(error.contains("AGENTHOLD_KUBE_HOME_SIZE"), "{error}");
    assert!(KubeDriver::new(replay.client(), String::new(), settings(false)).is_err());
}
