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
//!
//! Codex signed in with an API key fetches its model catalog from chatgpt.com
//! (`GET /backend-api/codex/models`, feature `api_key_model_discovery`, on by default since Codex
//! 0.156), which the egress proxy refuses to an API-key agent: Codex retries until a 5 s deadline,
//! three times while a session opens (about 9 s) and before every turn (about 3 s). So the harness
//! starts through [`CATALOG_CONFIG`], which puts `api_key_model_discovery = false` in the user's
//! `~/.codex/config.toml` (`$CODEX_HOME`) unless that file already says anything about it:
//! Codex then uses the catalog built into it for an API key, as before 0.156. A ChatGPT login is
//! not affected (its catalog comes from chatgpt.com, which its agents may reach). The setting
//! cannot come through codex-acp's `CODEX_CONFIG`: that is per-thread configuration, and the
//! catalog belongs to the `codex app-server` process (checked with codex-acp 2.6.0 / Codex
//! 0.166.0, 2026-12-06).

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

/// The shell script the harness starts through (`/bin/sh -c CATALOG_CONFIG agenthold-codex
/// codex-acp`): unless `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`) already mentions
/// `api_key_model_discovery` (the user's choice then stands, either way), it adds
/// `api_key_model_discovery = false` to the file's `[features]` table: a new file; the line
/// after an existing `[features]` header; or a `[features]` table at the end of a file without
/// one. A file that sets features some other way (dotted keys, an inline table) is left as it is,
/// since a second `[features]` table would make it invalid TOML. Whatever fails, codex-acp
/// still starts (without the setting: only slower).
pub const CATALOG_CONFIG: &str = r#"d="${CODEX_HOME:-$HOME/.codex}"; f="$d/config.toml"
if ! grep -qs api_key_model_discovery "$f"; then
k='api_key_model_discovery = false # agenthold: no model catalog from chatgpt.com with an API key'
[ -d "$d" ] || (umask 077; mkdir -p "$d")
if [ ! -e "$f" ]; then printf '[features]\n%s\n' "$k" > "$f"
elif grep -Eq '^[[:blank:]]*\[[[:blank:]]*features[[:blank:]]*\][[:blank:]]*(#.*)?$' "$f"; then
awk -v k="$k" '{ print } !done && /^[[:blank:]]*\[[[:blank:]]*features[[:blank:]]*\][[:blank:]]*(#.*)?$/ { print k; done = 1 }' "$f" > "$f.agenthold" && cat "$f.agenthold" > "$f"; rm -f "$f.agenthold"
elif ! grep -Eq '^[[:blank:]]*"?features"?[[:blank:]]*[.=]' "$f"; then printf '\n[features]\n%s\n' "$k" >> "$f"
fi
fi 2>/dev/null
exec "$@""#;

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
        Ok(launch_for(super::model(context)))
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
            idle_mib: 275,
            warm_up_turn: false,
        }
    }

    /// `api-key` signs in with `OPENAI_API_KEY` (codex-acp also does it itself through
    /// `DEFAULT_AUTH_REQUEST`).
    fn auto_authenticate(&self) -> &'static [(&'static str, &'static str)] {
        &[("api-key", "OPENAI_API_KEY")]
    }
}

/// The launch for an agent of this model (none: Codex's default): codex-acp through
/// [`CATALOG_CONFIG`], with its configuration and sign-in in the environment.
fn launch_for(model: Option<String>) -> Launch {
    let mut config = json!({
        "check_for_update_on_startup": false,
        "analytics": {"enabled": false},
        "developer_instructions": SANDBOX_INSTRUCTIONS,
    });
    if let Some(model) = model {
        config["model"] = json!(model);
    }
    let env = vec![
        ("CODEX_CONFIG".to_owned(), config.to_string()),
        ("DEFAULT_AUTH_REQUEST".to_owned(), json!({"methodId": "api-key"}).to_string()),
        ("NO_BROWSER".to_owned(), "1".to_owned()),
    ];
    let argv = ["/bin/sh", "-c", CATALOG_CONFIG, "agenthold-codex", "codex-acp"].map(str::to_owned).to_vec();
    Launch { argv, env }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn env<'a>(launch: &'a Launch, name: &str) -> Option<&'a str> {
        launch.env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn codex_acp_starts_through_the_catalog_script_with_its_environment() {
        let launched = launch_for(Some("gpt-x".to_owned()));
        assert_eq!(launched.argv, ["/bin/sh", "-c", CATALOG_CONFIG, "agenthold-codex", "codex-acp"]);
        assert!(CATALOG_CONFIG.ends_with("\nexec \"$@\""), "the script ends by running codex-acp");
        let config: serde_json::Value =
            serde_json::from_str(env(&launched, "CODEX_CONFIG").expect("config")).expect("json");
        assert_eq!(config["model"], "gpt-x");
        assert_eq!(config["developer_instructions"], SANDBOX_INSTRUCTIONS);
        assert!(config.get("features").is_none(), "the catalog setting is not per-thread: {config}");
        assert_eq!(env(&launched, "DEFAULT_AUTH_REQUEST"), Some(r#"{"methodId":"api-key"}"#));
        assert_eq!(env(&launched, "NO_BROWSER"), Some("1"));
        assert_eq!(launched.env.len(), 3);
        let bare = launch_for(None);
        assert_eq!(bare.argv, launched.argv);
        let config: serde_json::Value =
            serde_json::from_str(env(&bare, "CODEX_CONFIG").expect("config")).expect("json");
        assert!(config.get("model").is_none());
    }

    /// A fresh directory under the system's temporary one (no crate for it in the tree).
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "agenthold-codex-{name}-{}-{:x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).expect("scratch directory");
        dir
    }

    /// Runs the launch's script as the sandbox would, with `HOME` at `home` and `true` for
    /// codex-acp; then the config file, if any.
    fn run_script(home: &Path, codex_home: Option<&Path>) -> Option<String> {
        let launched = launch_for(None);
        let mut command = std::process::Command::new(&launched.argv[0]);
        command.args(&launched.argv[1..launched.argv.len() - 1]).arg("true").env("HOME", home).env_remove("CODEX_HOME");
        if let Some(codex_home) = codex_home {
            command.env("CODEX_HOME", codex_home);
        }
        let status = command.status().expect("runs /bin/sh");
        assert!(status.success(), "the script runs the harness: {status}");
        std::fs::read_to_string(
            codex_home.map(Path::to_path_buf).unwrap_or_else(|| home.join(".codex")).join("config.toml"),
        )
        .ok()
    }

    const LINE: &str = "api_key_model_discovery = false # agenthold:";

    #[test]
    fn the_script_turns_api_key_model_discovery_off_in_a_fresh_home() {
        let home = scratch("fresh");
        let written = run_script(&home, None).expect("config written");
        assert!(written.starts_with("[features]\n"), "{written}");
        assert!(written.contains(LINE), "{written}");
        assert_eq!(run_script(&home, None).expect("config"), written, "a second start changes nothing");
        let elsewhere = home.join("elsewhere");
        assert!(run_script(&home, Some(&elsewhere)).expect("in $CODEX_HOME").contains(LINE));
        std::fs::remove_dir_all(&home).ok();
    }

    #[test]
    fn the_script_keeps_the_users_config() {
        let home = scratch("user");
        let codex = home.join(".codex");
        std::fs::create_dir_all(&codex).expect("dir");
        let file = codex.join("config.toml");
        let write = |text: &str| std::fs::write(&file, text).expect("write");

        // The user's own choice, either way, stands.
        write("model = \"gpt-5\"\n[features]\napi_key_model_discovery = true\n");
        assert_eq!(
            run_script(&home, None).expect("config"),
            "model = \"gpt-5\"\n[features]\napi_key_model_discovery = true\n"
        );

        // An existing [features] table gets the line, the rest is kept.
        write(
            "model = \"gpt-5\"\n\n[features] # mine\nweb_search_request = true\n\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n",
        );
        let edited = run_script(&home, None).expect("config");
        assert!(
            edited.starts_with("model = \"gpt-5\"\n\n[features] # mine\napi_key_model_discovery = false # agenthold:"),
            "{edited}"
        );
        assert!(
            edited.ends_with("\nweb_search_request = true\n\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n"),
            "{edited}"
        );
        assert_eq!(edited.matches("[features]").count(), 1);

        // No [features] table: one at the end (after a last line without a newline too).
        write("model = \"gpt-5\"\n[projects.\"/w\"]\ntrust_level = \"trusted\"");
        let appended = run_script(&home, None).expect("config");
        assert!(
            appended.starts_with("model = \"gpt-5\"\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n[features]\n"),
            "{appended}"
        );
        assert!(appended.trim_end().ends_with("with an API key"), "{appended}");

        // Features set another way: a [features] table would be invalid TOML, so no change.
        for other in ["features.web_search_request = true\n", "features = { web_search_request = true }\n"] {
            write(other);
            assert_eq!(run_script(&home, None).expect("config"), other);
        }
        std::fs::remove_dir_all(&home).ok();
    }
}
