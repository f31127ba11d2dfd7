//! The manifests of `deploy/kubernetes/`, checked offline in the way kubeconform checks them:
//! every YAML document is read into its typed Kubernetes object (k8s-openapi 0.29, the API of
//! Kubernetes 1.33) and written back, and every field of the file must come back unchanged. A
//! field the schema does not have (a typo) is dropped by the round trip and reported; a value of
//! the wrong type fails to read; an unknown kind is refused. Each `kustomization.yaml` must list
//! every manifest of its directory, and only existing ones. The Role must grant exactly the verbs
//! the Kubernetes driver uses.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes")
}

/// Every YAML file under `dir`, sorted.
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Where `original` has something `round_trip` lacks or holds otherwise (`round_trip` may have
/// more: the kinds of nested objects, which the typed structs always write).
fn lost(original: &Value, round_trip: &Value, at: &str, out: &mut Vec<String>) {
    match (original, round_trip) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                let here = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
                match b.get(key) {
                    Some(other) => lost(value, other, &here, out),
                    None => out.push(format!("{here}: not a field of the schema")),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                lost(x, y, &format!("{at}[{i}]"), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(format!("{at}: {a} came back as {b}")),
    }
}

/// Reads one document into the typed object of its kind and back.
fn round_trip<K>(document: &Value) -> Result<Value, String>
where
    K: serde::de::DeserializeOwned + serde::Serialize,
{
    let typed: K = serde_json::from_value(document.clone()).map_err(|e| format!("does not fit the schema: {e}"))?;
    serde_json::to_value(&typed).map_err(|e| e.to_string())
}

/// What is wrong with one manifest document (nothing: empty).
pub fn check_document(document: &Value) -> Vec<String> {
    use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service, ServiceAccount};
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let api_version = document["apiVersion"].as_str().unwrap_or("");
    let kind = document["kind"].as_str().unwrap_or("");
    let back = match (api_version, kind) {
        ("apps/v1", "Deployment") => round_trip::<Deployment>(document),
        ("apps/v1", "StatefulSet") => round_trip::<StatefulSet>(document),
        ("v1", "Service") => round_trip::<Service>(document),
        ("v1", "ServiceAccount") => round_trip::<ServiceAccount>(document),
        ("v1", "ConfigMap") => round_trip::<ConfigMap>(document),
        ("v1", "Secret") => round_trip::<Secret>(document),
        ("v1", "Namespace") => round_trip::<Namespace>(document),
        ("rbac.authorization.k8s.io/v1", "Role") => round_trip::<Role>(document),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => round_trip::<RoleBinding>(document),
        ("networking.k8s.io/v1", "NetworkPolicy") => round_trip::<NetworkPolicy>(document),
        _ => Err(format!("{api_version} {kind}: not a kind these manifests may hold")),
    };
    match back {
        Ok(back) => {
            let mut out = Vec::new();
            lost(document, &back, "", &mut out);
            out
        }
        Err(error) => vec![error],
    }
}

/// A `kustomization.yaml` as far as these manifests use it (anything else is refused).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Kustomization {
    api_version: String,
    kind: String,
    namespace: Option<String>,
    resources: Vec<String>,
}

/// What is wrong with the YAML file `path` (nothing: empty).
fn check_file(path: &Path, text: &str) -> Vec<String> {
    if path.file_name().is_some_and(|n| n == "kustomization.yaml") {
        let kustomization: Kustomization = match serde_saphyr::from_str(text) {
            Ok(k) => k,
            Err(e) => return vec![format!("not a kustomization: {e}")],
        };
        let mut out = Vec::new();
        if (kustomization.api_version.as_str(), kustomization.kind.as_str())
            != ("kustomize.config.k8s.io/v1beta1", "Kustomization")
        {
            out.push("not a kustomize.config.k8s.io/v1beta1 Kustomization".to_owned());
        }
        if kustomization.namespace.as_deref() == Some("") {
            out.push("an empty namespace".to_owned());
        }
        let dir = path.parent().expect("a directory");
        let listed: BTreeSet<&str> = kustomization.resources.iter().map(String::as_str).collect();
        for resource in &listed {
            if !dir.join(resource).is_file() {
                out.push(format!("lists {resource}, which does not exist"));
            }
        }
        for file in yaml_files(dir) {
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if file.parent() == Some(dir) && name != "kustomization.yaml" && !listed.contains(name) {
                out.push(format!("does not list {name}"));
            }
        }
        return out;
    }
    let documents: Vec<Value> = match serde_saphyr::from_multiple(text) {
        Ok(documents) => documents,
        Err(e) => return vec![format!("not YAML: {e}")],
    };
    let mut out = Vec::new();
    for (i, document) in documents.iter().enumerate() {
        let name = document["metadata"]["name"].as_str().unwrap_or("?");
        out.extend(check_document(document).into_iter().map(|p| format!("document {i} ({name}): {p}")));
    }
    if documents.is_empty() {
        out.push("no document".to_owned());
    }
    out
}

#[test]
fn every_manifest_fits_the_kubernetes_schema() {
    let files = yaml_files(&deploy_dir());
    assert!(files.len() >= 7, "the manifests: {files:?}");
    let mut problems = Vec::new();
    let mut documents = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).expect("reading a manifest");
        documents += text.matches("\nkind: ").count() + usize::from(text.starts_with("kind: "));
        problems.extend(check_file(path, &text).into_iter().map(|p| format!("{}: {p}", path.display())));
    }
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(documents >= 9, "{documents} documents");
}

#[test]
fn a_typo_a_wrong_type_or_an_unknown_kind_is_caught() {
    let path = deploy_dir().join("base/server.yaml");
    let text = std::fs::read_to_string(&path).expect("reading server.yaml");
    assert!(check_file(&path, &text).is_empty());
    let broken = [
        ("containerPort: 7700", "containerPrt: 7700", "containerPrt: not a field of the schema"),
        ("  replicas: 1", "  replicas: one", "does not fit the schema"),
        ("readOnlyRootFilesystem: true", "readOnlyRootFilesystem: \"yes\"", "does not fit the schema"),
        ("      serviceAccountName: agenthold", "      serviceAcountName: agenthold", "serviceAcountName"),
        ("kind: Deployment", "kind: Deploymnet", "not a kind these manifests may hold"),
    ];
    for (from, to, expected) in broken {
        assert!(text.contains(from), "server.yaml has {from:?}");
        let problems = check_file(&path, &text.replacen(from, to, 1));
        assert!(problems.iter().any(|p| p.contains(expected)), "{to:?} gave {problems:#?}");
    }
    let kustomization = deploy_dir().join("base/kustomization.yaml");
    let text = std::fs::read_to_string(&kustomization).expect("reading kustomization.yaml");
    let problems = check_file(&kustomization, &text.replace("  - service.yaml\n", "  - servce.yaml\n"));
    assert!(problems.iter().any(|p| p.contains("servce.yaml, which does not exist")), "{problems:#?}");
    assert!(problems.iter().any(|p| p.contains("does not list service.yaml")), "{problems:#?}");
    let problems = check_file(&kustomization, &text.replace("namespace:", "namespaces:"));
    assert!(problems.iter().any(|p| p.contains("unknown field")), "{problems:#?}");
}

#[test]
fn the_role_grants_exactly_the_verbs_the_driver_uses() {
    let text = std::fs::read_to_string(deploy_dir().join("base/rbac.yaml")).expect("reading rbac.yaml");
    let documents: Vec<Value> = serde_saphyr::from_multiple(&text).expect("YAML");
    let role: k8s_openapi::api::rbac::v1::Role =
        serde_json::from_value(documents.into_iter().find(|d| d["kind"] == "Role").expect("a Role")).expect("a Role");
    let mut granted = BTreeSet::new();
    for rule in role.rules.unwrap_or_default() {
        for group in rule.api_groups.unwrap_or_default() {
            for resource in rule.resources.clone().unwrap_or_default() {
                for verb in &rule.verbs {
                    granted.insert(format!("{group}/{resource}:{verb}"));
                }
            }
        }
    }
    // server/src/sandbox/kubernetes/mod.rs: get_opt (get), list, create, replace (update), delete.
    let used: BTreeSet<String> = [
        "/pods:get",
        "/pods:list",
        "/pods:create",
        "/pods:delete",
        "/persistentvolumeclaims:list",
        "/persistentvolumeclaims:create",
        "/persistentvolumeclaims:delete",
        "/secrets:get",
        "/secrets:list",
        "/secrets:create",
        "/secrets:update",
        "/secrets:delete",
        "networking.k8s.io/networkpolicies:list",
        "networking.k8s.io/networkpolicies:create",
        "networking.k8s.io/networkpolicies:update",
        "networking.k8s.io/networkpolicies:delete",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(granted, used);
}
