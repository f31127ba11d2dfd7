//! A tool call as a policy sees it: its effect, the paths it touches, its command and its URL,
//! derived from a `session/request_permission`'s `toolCall` whatever harness sent it, and
//! bounded so that no input can make it large.

use serde::Serialize;
use serde_json::Value;

use super::effect::Effect;
use super::paths::BoundedPaths;
use super::raw_input;

/// The longest command line kept; a longer one is cut and the call marked `truncated`.
pub const MAX_COMMAND_BYTES: usize = 32 * 1024;

/// The longest URL kept; a longer one is cut and the call marked `truncated`.
pub const MAX_URL_BYTES: usize = 4096;

/// The largest `rawInput` given as a JSON string that is parsed.
const MAX_RAW_INPUT_TEXT_BYTES: usize = 1024 * 1024;

/// How many `locations` and `content` items are looked at, at most.
const MAX_ITEMS_SCANNED: usize = 4096;

/// What a tool call does, as derived by the server (recorded on the `permission` event).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Call {
    /// The portable effect of the call's `kind`; `None` for `think`, `switch_mode`, `other`,
    /// unknown or missing kinds.
    pub effect: Option<Effect>,
    /// Absolute, normalized paths the call touches, in order of discovery, without duplicates:
    /// from `locations`, `diff` content items, then `rawInput`.
    pub paths: Vec<String>,
    /// The command line, for commands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The URL, for fetches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The URL's host (lower case, without user info or port).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Whether anything was dropped or cut to keep the call bounded; such a call is never
    /// allowed by a policy (see `decision`).
    pub truncated: bool,
}

impl Call {
    /// Derives the call from a `toolCall` object as the harness sent it; relative paths are
    /// taken from `workdir`. Never fails: what cannot be read is left out.
    pub fn derive(tool_call: &Value, workdir: &str) -> Self {
        let effect = Effect::of_kind(tool_call.get("kind").and_then(Value::as_str));
        let mut paths = BoundedPaths::new(workdir);
        add_location_paths(tool_call, &mut paths);
        add_diff_paths(tool_call, &mut paths);
        let found = match tool_call.get("rawInput") {
            Some(Value::String(text)) => read_raw_input_text(text, effect, &mut paths),
            Some(raw_input) => raw_input::read(raw_input, &mut paths),
            None => raw_input::Found::default(),
        };
        let (paths, mut truncated) = paths.finish();
        let command = found.command.map(|command| cut(command, MAX_COMMAND_BYTES, &mut truncated));
        let url = found.url.map(|url| cut(url, MAX_URL_BYTES, &mut truncated));
        let host = url.as_deref().and_then(host_of);
        Self { effect, paths, command, url, host, truncated }
    }
}

fn add_location_paths(tool_call: &Value, paths: &mut BoundedPaths) {
    let locations = tool_call.get("locations").and_then(Value::as_array);
    for location in locations.into_iter().flatten().take(MAX_ITEMS_SCANNED) {
        if let Some(path) = location.get("path").and_then(Value::as_str)
            && !paths.add(path)
        {
            return;
        }
    }
}

fn add_diff_paths(tool_call: &Value, paths: &mut BoundedPaths) {
    let content = tool_call.get("content").and_then(Value::as_array);
    for item in content.into_iter().flatten().take(MAX_ITEMS_SCANNED) {
        if item.get("type").and_then(Value::as_str) != Some("diff") {
            continue;
        }
        if let Some(path) = item.get("path").and_then(Value::as_str)
            && !paths.add(path)
        {
            return;
        }
    }
}

/// A `rawInput` sent as a string: JSON inside it is read as usual; otherwise it is patch text,
/// or the command line of an exec call.
fn read_raw_input_text(text: &str, effect: Option<Effect>, paths: &mut BoundedPaths) -> raw_input::Found {
    let trimmed = text.trim_start();
    if text.len() <= MAX_RAW_INPUT_TEXT_BYTES
        && (trimmed.starts_with('{') || trimmed.starts_with('['))
        && let Ok(parsed) = serde_json::from_str::<Value>(text)
    {
        return raw_input::read(&parsed, paths);
    }
    raw_input::add_patch_paths(text, paths);
    let command = (effect == Some(Effect::Exec) && !text.trim().is_empty()).then(|| text.to_owned());
    raw_input::Found { command, url: None }
}

/// `text` cut to at most `max` bytes on a character boundary, noting any cut in `truncated`.
fn cut(mut text: String, max: usize, truncated: &mut bool) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        *truncated = true;
    }
    text
}

/// The host of `scheme://[user@]host[:port]/…`, lower case; `None` without a scheme.
fn host_of(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = if let Some(bracketed) = host_port.strip_prefix('[') {
        bracketed.split(']').next().unwrap_or_default()
    } else {
        host_port.split(':').next().unwrap_or_default()
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// Random JSON shaped like what harnesses send, from a seeded PRNG (for property tests).
#[cfg(test)]
pub(crate) mod random_json {
    use serde_json::{Map, Value};

    /// SplitMix64: small, seedable, good enough to shake out panics.
    pub(crate) struct Rng(u64);

    impl Rng {
        pub(crate) fn new(seed: u64) -> Self {
            Self(seed)
        }

        pub(crate) fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }

        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    const KEYS: &[&str] = &[
        "kind",
        "title",
        "locations",
        "content",
        "rawInput",
        "path",
        "line",
        "type",
        "file_path",
        "filePath",
        "command",
        "cmd",
        "argv",
        "args",
        "changes",
        "edits",
        "patch",
        "patchText",
        "diff",
        "url",
        "uri",
        "move_path",
        "update",
        "paths",
        "effect",
        "answer",
        "outside_workdir",
        "rules",
        "default",
        "cwd",
    ];

    const STRINGS: &[&str] = &[
        "",
        "/",
        "..",
        ".",
        "../../..",
        "/home/agent/x.rs",
        "relative/../../y",
        "file:///etc/passwd",
        "edit",
        "execute",
        "read",
        "search",
        "fetch",
        "delete",
        "move",
        "think",
        "other",
        "diff",
        "bash",
        "-lc",
        "-c",
        "rm -rf /",
        "git *",
        "**/.env",
        "/etc/*",
        "/a/b**",
        "*",
        "**",
        "?",
        "allow",
        "deny",
        "ask",
        "exec",
        "write",
        "network",
        "https://user@[::1]:80/x",
        "http://",
        "://",
        "*** Begin Patch\n*** Add File: a\n",
        "--- a/x\n+++ b/y\n",
        "é\u{0}ü",
        "\u{10FFFF}",
        "{\"command\": [\"ls\"]}",
        "[",
        "\t\n ",
    ];

    /// A random value, at most `depth` levels deep.
    pub(crate) fn value(rng: &mut Rng, depth: usize) -> Value {
        let choice = if depth == 0 { rng.below(5) } else { rng.below(8) };
        match choice {
            0 => Value::Null,
            1 => Value::Bool(rng.below(2) == 0),
            2 => Value::from(rng.next() as i64),
            3 | 4 => Value::from(string(rng)),
            5 => Value::Array((0..rng.below(6)).map(|_| value(rng, depth - 1)).collect()),
            _ => {
                let mut object = Map::new();
                for _ in 0..rng.below(7) {
                    object.insert(rng.pick(KEYS).to_owned(), value(rng, depth - 1));
                }
                Value::Object(object)
            }
        }
    }

    fn string(rng: &mut Rng) -> String {
        match rng.below(10) {
            0 => rng.pick(STRINGS).repeat(rng.below(2_000)),
            1 => {
                let parts: Vec<&str> = (0..rng.below(8)).map(|_| rng.pick(STRINGS)).collect();
                parts.join(if rng.below(2) == 0 { "/" } else { " " })
            }
            _ => rng.pick(STRINGS).to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const WORKDIR: &str = "/home/agent";

    fn derive(tool_call: Value) -> Call {
        Call::derive(&tool_call, WORKDIR)
    }

    #[test]
    fn claude_code_write() {
        let call = derive(json!({
            "toolCallId": "toolu_1", "kind": "edit", "title": "Write /home/agent/notes.txt",
            "locations": [{"path": "/home/agent/notes.txt"}],
            "content": [{"type": "diff", "path": "/home/agent/notes.txt", "oldText": null, "newText": "hi"}],
            "rawInput": {"file_path": "/home/agent/notes.txt", "content": "hi"},
        }));
        assert_eq!(call.effect, Some(Effect::Write));
        assert_eq!(call.paths, ["/home/agent/notes.txt"]);
        assert_eq!(call.command, None);
        assert!(!call.truncated);
    }

    #[test]
    fn claude_code_bash() {
        let call = derive(
            json!({"kind": "execute", "title": "`rm -rf /`", "rawInput": {"command": "rm -rf /", "description": "x"}}),
        );
        assert_eq!(call.effect, Some(Effect::Exec));
        assert_eq!(call.command.as_deref(), Some("rm -rf /"));
        assert!(call.paths.is_empty());
    }

    #[test]
    fn codex_exec_and_patch() {
        let call = derive(
            json!({"kind": "execute", "rawInput": {"command": ["bash", "-lc", "git push"], "cwd": "/home/agent"}}),
        );
        assert_eq!(call.command.as_deref(), Some("git push"));
        assert!(call.paths.is_empty(), "the cwd is not a path the call touches");
        let call = derive(json!({"kind": "edit", "rawInput": {"changes": {"src/main.rs": {"type": "update"}}}}));
        assert_eq!(call.paths, ["/home/agent/src/main.rs"]);
    }

    #[test]
    fn opencode_edit_with_diff_content() {
        let call = derive(json!({
            "kind": "edit", "title": "edit",
            "content": [{"type": "content", "content": {"type": "text", "text": "x"}}, {"type": "diff", "path": "/home/agent/b.ts", "newText": ""}],
            "rawInput": {"filePath": "/home/agent/a.ts"},
        }));
        assert_eq!(call.paths, ["/home/agent/b.ts", "/home/agent/a.ts"]);
    }

    #[test]
    fn relative_and_dotted_paths_are_resolved() {
        let call = derive(
            json!({"kind": "read", "locations": [{"path": "../../etc/shadow", "line": 3}, {"path": "./src/../Cargo.toml"}]}),
        );
        assert_eq!(call.paths, ["/etc/shadow", "/home/agent/Cargo.toml"]);
    }

    #[test]
    fn fetch_keeps_url_and_host() {
        let call = derive(json!({"kind": "fetch", "rawInput": {"url": "https://user:pw@Docs.RS:443/x?y#z"}}));
        assert_eq!(call.effect, Some(Effect::Network));
        assert_eq!(call.url.as_deref(), Some("https://user:pw@Docs.RS:443/x?y#z"));
        assert_eq!(call.host.as_deref(), Some("docs.rs"));
        assert_eq!(host_of("http://[::1]:8080/"), Some("::1".to_owned()));
        assert_eq!(host_of("example.com"), None);
        assert_eq!(host_of("https:///x"), None);
    }

    #[test]
    fn raw_input_as_a_string() {
        let call = derive(json!({"kind": "execute", "rawInput": "{\"command\": \"ls\"}"}));
        assert_eq!(call.command.as_deref(), Some("ls"));
        let call = derive(json!({"kind": "execute", "rawInput": "make test"}));
        assert_eq!(call.command.as_deref(), Some("make test"));
        let call = derive(json!({"kind": "edit", "rawInput": "*** Begin Patch\n*** Add File: a.txt\n*** End Patch"}));
        assert_eq!(call.paths, ["/home/agent/a.txt"]);
        assert_eq!(call.command, None);
    }

    #[test]
    fn missing_or_odd_fields_give_an_empty_call() {
        assert_eq!(derive(json!(null)), Call::default());
        assert_eq!(derive(json!("toolCall")), Call::default());
        assert_eq!(derive(json!({"kind": 5, "locations": "x", "content": {}, "rawInput": 3})), Call::default());
        let think = derive(json!({"kind": "think", "rawInput": {"file_path": "/a"}}));
        assert_eq!(think.effect, None);
        assert_eq!(think.paths, ["/a"], "paths are kept even without an effect");
    }

    #[test]
    fn ten_thousand_locations_are_capped() {
        let locations: Vec<Value> = (0..10_000).map(|i| json!({"path": format!("/f/{i}")})).collect();
        let call = derive(json!({"kind": "read", "locations": locations}));
        assert_eq!(call.paths.len(), crate::permissions::paths::MAX_PATHS);
        assert!(call.truncated);
    }

    #[test]
    fn huge_raw_input_is_bounded() {
        let big = "y".repeat(5 * 1024 * 1024);
        let call = derive(json!({
            "kind": "execute",
            "rawInput": {"command": format!("echo {big}"), "file_path": big.clone(), "url": format!("https://h/{big}"), "content": big},
        }));
        assert_eq!(call.command.as_ref().map(String::len), Some(MAX_COMMAND_BYTES));
        assert!(call.url.as_ref().is_some_and(|url| url.len() <= MAX_URL_BYTES));
        assert!(call.paths.is_empty(), "an overlong path is dropped, not cut");
        assert!(call.truncated);
    }

    #[test]
    fn cuts_on_a_character_boundary() {
        let mut truncated = false;
        assert_eq!(cut("ééé".to_owned(), 3, &mut truncated), "é");
        assert!(truncated);
    }

    #[test]
    fn derive_never_panics_on_random_shapes() {
        let mut rng = random_json::Rng::new(0x5EED_0010);
        for _ in 0..3_000 {
            let mut tool_call = random_json::value(&mut rng, 5);
            if let Value::Object(object) = &mut tool_call
                && rng.below(2) == 0
            {
                object.insert("kind".into(), json!(["edit", "execute", "read", "fetch"][rng.below(4)]));
                object.insert("rawInput".into(), random_json::value(&mut rng, 4));
            }
            let workdir = ["/home/agent", "", "rel/dir", "/", "/a/../.."][rng.below(5)];
            let call = Call::derive(&tool_call, workdir);
            assert!(call.paths.len() <= crate::permissions::paths::MAX_PATHS);
            assert!(
                call.paths.iter().all(|path| path.starts_with('/') && !path.split('/').any(|s| s == ".." || s == "."))
            );
            assert!(call.command.as_ref().is_none_or(|command| command.len() <= MAX_COMMAND_BYTES));
            assert!(call.url.as_ref().is_none_or(|url| url.len() <= MAX_URL_BYTES));
        }
    }

    #[test]
    fn serializes_for_the_permission_event() {
        let call = derive(json!({"kind": "execute", "rawInput": {"command": "ls"}}));
        assert_eq!(
            serde_json::to_value(&call).expect("serializes"),
            json!({"effect": "exec", "paths": [], "command": "ls", "truncated": false})
        );
    }
}
