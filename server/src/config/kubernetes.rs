//! The Kubernetes driver's settings (docs/kubernetes.md): the defaults of its flags. The driver
//! checks them and builds its own settings from the configuration (its `Settings::of`).

/// The labels of the server's Pods in deploy/kubernetes (the egress proxy runs beside the server,
/// in the same Pod).
pub const KUBE_SERVER_LABELS: &str = "app.kubernetes.io/name=agenthold,app.kubernetes.io/component=server";
