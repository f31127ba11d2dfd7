//! The `codex` harness: OpenAI's Codex through its ACP adapter `codex-acp`
//! (`@agentclientprotocol/codex-acp`, which runs `codex app-server`). codex-acp sends its mode's
//! approval policy and sandbox with every turn (configuration cannot change them), and its
//! default mode `agent` lets an automatic reviewer approve edits: every session is put in mode
//! `read-only` instead, in which Codex asks before it edits files or runs anything that needs
//! more than reading, so each of those comes to agenthold's gate. An `OPENAI_API_KEY` (a
//! secret's placeholder) signs it in on its own (`DEFAULT_AUTH_REQUEST`).

use serde_json::json;

use super::{HarnessAdapter, Launch, LaunchContext, Profile};
use crate::logins::kinds::LoginKind;

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
