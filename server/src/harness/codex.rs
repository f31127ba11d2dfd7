//! The `codex` harness: OpenAI's Codex through its ACP adapter `codex-acp`
//! (`@agentclientprotocol/codex-acp`, which runs `codex app-server`). codex-acp sends its mode's
//! approval policy and sandbox with every turn (configuration cannot change them), and its
//! default mode `agent` lets an automatic reviewer approve edits: every session is put in mode
//! `read-only` instead, in which Codex asks before it edits files or runs anything that needs
//! more than reading, so each of those comes to agenthold's gate. An `OPENAI_API_KEY` (a
//! secret's placeholder) signs it in on its own (`DEFAULT_AUTH_REQUEST`).
//!
//! Codex's own OS sandbox cannot be switched off without switching the gate off too (codex-acp
//! 2.6.0 / Codex 0.166.0, checked 2026-12-01; docs/harnesses.md, "Codex's own sandbox"): under
//! `on-request` (or its `granular` form), the only asking policy left, Codex asks only where its
//! sandbox stops it (or a command looks dangerous), and `untrusted` (ask before anything not known
//! to be read-only) is gone since Codex 0.149.0. Its Linux sandbox is bubblewrap, which needs user
//! namespaces, denied in our containers, so a command it runs inside that sandbox fails ("bwrap:
//! No permissions to create a new namespace").
//! A command it asks to run outside (`sandbox_permissions: "require_escalated"`) comes to the gate
//! first and then runs directly in the container. So the mode stays `read-only` and the
//! developer instructions ([`SANDBOX_INSTRUCTIONS`]) tell the model to ask that way for every
//! command: commands run once allowed, and one run without asking fails closed.

use serde_json::json;

use super::{HarnessAdapter, Launch, LaunchContext, Profile};
use crate::logins::kinds::LoginKind;

/// Codex's developer instructions (`developer_instructions`): its own sandbox cannot start in
/// ours, so every shell command is to be run outside it, which asks agenthold's gate first.
pub const SANDBOX_INSTRUCTIONS: &str = "This session runs inside agenthold's container sandbox, where \
Codex's own sandbox (bubblewrap) cannot start: a command run inside it fails with \"bwrap: No \
permissions to create a new namespace\". Run every shell command, reading ones too, with \
`sandbox_permissions: \"require_escalated\"` and a short `justification`: agenthold's permission \
gate answers each one for the user, and once allowed it runs directly in the container. Do not \
ask in a message first; the gate's question is the question.";

/// The `codex` adapter.
pub struct Codex;

impl HarnessAdapter for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }

    fn validate(&self, command: Option<&[String]>) -> Result<(), String> {
        super::no_command(self.name(), "codex-acp", command)
    }

    fn launch(&self, context: &LaunchContext<'_>) -> Result<Launch, String> {
        let mut config = json!({
            "check_for_update_on_startup": false,
            "analytics": {"enabled": false},
            "developer_instructions": SANDBOX_INSTRUCTIONS,
        });
        if let Some(model) = super::model(context) {
            config["model"] = json!(model);
        }
        let env = vec![
            ("CODEX_CONFIG".to_owned(), config.to_string()),
            ("DEFAULT_AUTH_REQUEST".to_owned(), json!({"methodId": "api-key"}).to_string()),
            ("NO_BROWSER".to_owned(), "1".to_owned()),
        ];
        Ok(Launch { argv: vec!["codex-acp".to_owned()], env })
    }

    fn profile(&self) -> Profile {
        Profile {
            label: "Codex",
            models: &["gpt-5-codex", "gpt-5"],
            secrets: &[("openai", "OPENAI_API_KEY")],
            provider_hosts: &["api.openai.com"],
            login_dir: Some(".codex"),
            install: Some("npm install -g @agentclientprotocol/codex-acp@2.6.0"),
            session_mode: Some("read-only"),
            development_only: false,
            in_base_image: true,
            account_logins: &[LoginKind::ChatgptLogin, LoginKind::ChatgptAccessToken, LoginKind::OpenaiApiKey],
        }
    }

    /// `api-key` signs in with `OPENAI_API_KEY` (codex-acp also does it itself through
    /// `DEFAULT_AUTH_REQUEST`).
    fn auto_authenticate(&self) -> &'static [(&'static str, &'static str)] {
        &[("api-key", "OPENAI_API_KEY")]
    }
}
