//! The `claude-code` harness: Claude Code through its ACP adapter `claude-agent-acp`
//! (`@agentclientprotocol/claude-agent-acp`). It starts its sessions in mode `auto`, in which it
//! asks no permission at all; every session is put in mode `default` instead, so that each edit,
//! command and fetch comes to agenthold's gate as `session/request_permission`.

use super::{HarnessAdapter, Launch, LaunchContext, Profile};
use crate::logins::kinds::LoginKind;

/// The `claude-code` adapter.
pub struct ClaudeCode;

impl HarnessAdapter for ClaudeCode {
    fn name(&self) -> &'static str {
        "claude-code"
    }

    fn validate(&self, command: Option<&[String]>) -> Result<(), String> {
        super::no_command(self.name(), "claude-agent-acp", command)
    }

    fn launch(&self, context: &LaunchContext<'_>) -> Result<Launch, String> {
        let mut env = vec![
            // No telemetry, error reports or auto-update: only the provider's API leaves.
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".to_owned(), "1".to_owned()),
            ("DISABLE_AUTOUPDATER".to_owned(), "1".to_owned()),
            // It runs in a sandbox (Claude Code hides some modes from root otherwise).
            ("IS_SANDBOX".to_owned(), "1".to_owned()),
        ];
        if let Some(model) = super::model(context) {
            env.push(("ANTHROPIC_MODEL".to_owned(), model));
        }
        Ok(Launch { argv: vec!["claude-agent-acp".to_owned()], env })
    }

    fn profile(&self) -> Profile {
        Profile {
            label: "Claude Code",
            models: &["claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"],
            secrets: &[("anthropic", "ANTHROPIC_API_KEY")],
            provider_hosts: &["api.anthropic.com"],
            login_dir: Some(".claude"),
            install: Some("npm install -g @agentclientprotocol/claude-agent-acp@0.101.0"),
            session_mode: Some("default"),
            development_only: false,
            in_base_image: true,
            account_logins: &[LoginKind::ClaudeSubscription, LoginKind::AnthropicApiKey],
            idle_mib: 330,
            warm_up_turn: false,
        }
    }

    /// `claude /login` (seed 003): the Claude Code CLI's own sign-in.
    fn terminal_login(&self, _method_id: &str) -> Option<Vec<String>> {
        Some(vec!["claude".to_owned(), "/login".to_owned()])
    }
}
