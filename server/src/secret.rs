//! Secret strings: the workspace's one type ([`agenthold_secret::Secret`], built on `secrecy`),
//! shared with the proxy and the CLI. `Debug` and `Display` redact the value; read it with
//! [`Secret::expose`] only where it is used.

pub use agenthold_secret::Secret;
