//! Values that must never be printed: real credentials and proxy passwords — the workspace's one
//! type ([`agenthold_secret::Secret`], built on `secrecy`): redacted in `Debug`/`Display`,
//! compared in constant time ([`Secret::matches`]), and turned into bytes only at the one place a
//! value is put into a header.

pub use agenthold_secret::{Secret, constant_time_eq};
