//! The `opencode` harness: OpenCode's native ACP mode (`opencode acp`, npm `opencode-ai`). Its
//! permission configuration asks before edits, commands and fetches, so that each comes to
//! agenthold's gate; the agent's model (`provider/model`) goes into the same configuration.

use serde_json::json;

use super::{HarnessAdapter, Launch, LaunchContext, Profile};

/// The `opencode` adapter.
pub struct OpenCode;

impl HarnessAdapter for OpenCode {
    fn name(&self) -> &'static str {
        "opencode"
    }

    fn validate(&self, command: Option<&[String]>) -> Result<(), String> {
        super::no_command(self.name(), "opencode acp", command)
    }

    fn launch(&self, context: &LaunchContext<'_>) -> Result<Launch, String> {
        let mut config = json!({
            "permission": {"edit": "ask", "bash": "ask", "webfetch": "ask"},
            "autoupdate": false,
            "share": "disabled",
        });
        if let Some(model) = super::model(context) {
            config["model"] = json!(model);
        }
        let env = vec![
            ("OPENCODE_CONFIG_CONTENT".to_owned(), config.to_string()),
            ("OPENCODE_DISABLE_AUTOUPDATE".to_owned(), "1".to_owned()),
        ];
        Ok(Launch { argv: vec!["opencode".to_owned(), "acp".to_owned()], env })
    }

    fn profile(&self) -> Profile {
        Profile {
            label: "OpenCode",
            models: &["anthropic/claude-sonnet-4-5", "openai/gpt-5", "openrouter/anthropic/claude-sonnet-4.5"],
            secrets: &[
                ("anthropic", "ANTHROPIC_API_KEY"),
                ("openai", "OPENAI_API_KEY"),
                ("openrouter", "OPENROUTER_API_KEY"),
            ],
            provider_hosts: &["api.anthropic.com", "api.openai.com", "openrouter.ai"],
            login_dir: Some(".local/share/opencode"),
            install: Some("npm install -g opencode-ai@1.18.33"),
            session_mode: None,
            development_only: false,
            in_base_image: true,
            // Its own login file covers many providers: no account logins (seed 003).
            account_logins: &[],
            idle_mib: 530,
            // Its first prompt in a process boots per-process services first (its file watcher,
            // file finder, project copy: ~0.7 s measured); a pooled one spends that before the claim.
            warm_up_turn: true,
        }
    }
}
