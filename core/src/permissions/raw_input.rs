//! Reading what a tool call touches out of a harness's `rawInput`, whose shape differs per
//! harness and tool (ACP.md §3). Generous by design; every shape below is optional:
//!
//! - paths under the keys in [`PATH_KEYS`] (a string or an array of strings) at the top level,
//!   in each item of `edits`, and in `changes` (an object keyed by path, as Codex's patches
//!   are, or an array of objects), including a change's nested `kind`/`update` (`move_path`);
//! - paths named by patch text (`*** Add/Update/Delete File:`, `*** Move to:`, and a unified
//!   diff's `---`/`+++` header pair) under the keys in [`PATCH_KEYS`] or inside a command;
//! - the command from `command`, `cmd` or `argv` (a string, or an array joined with spaces;
//!   `[sh, -c, script]`-style arrays give the script), plus a string `args` array after a string
//!   `command` (the ACP terminal shape); a `rawInput` that is itself an array of strings is a
//!   command;
//! - the URL from `url`, `uri` or `href`.

use serde_json::{Map, Value};

use super::paths::BoundedPaths;

/// Keys whose string (or array of strings) value is a path.
pub const PATH_KEYS: &[&str] = &[
    "file_path",
    "filePath",
    "filepath",
    "path",
    "paths",
    "notebook_path",
    "notebookPath",
    "dir_path",
    "dirPath",
    "directory",
    "file",
    "files",
    "filename",
    "fileName",
    "move_path",
    "movePath",
    "new_path",
    "newPath",
    "old_path",
    "oldPath",
    "source_path",
    "sourcePath",
    "destination_path",
    "destinationPath",
    "target_path",
    "targetPath",
    "target_file",
    "targetFile",
    // OpenCode's `external_directory` permission.
    "parentDir",
    "parent_dir",
    "directories",
];

/// Keys whose string value may be patch text naming files.
pub const PATCH_KEYS: &[&str] = &["patch", "patchText", "patch_text", "input", "diff", "unified_diff"];

/// Keys holding a command.
const COMMAND_KEYS: &[&str] = &["command", "cmd", "argv"];

/// Keys holding a URL.
const URL_KEYS: &[&str] = &["url", "uri", "href"];

/// Shells whose `-c` script is the real command.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "fish"];

/// How many items of one array are looked at, at most.
const MAX_ITEMS_SCANNED: usize = 4096;

/// What `rawInput` says beyond paths.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Found {
    /// The command line, unbounded (the caller cuts it).
    pub command: Option<String>,
    /// The URL, unbounded (the caller cuts it).
    pub url: Option<String>,
}

/// Reads an object-shaped (or array-shaped) `rawInput`, adding its paths to `paths`.
pub fn read(raw_input: &Value, paths: &mut BoundedPaths) -> Found {
    match raw_input {
        Value::Object(object) => read_object(object, paths),
        Value::Array(items) => {
            let command = command_of_array(items);
            if let Some(command) = &command {
                add_patch_paths(command, paths);
            }
            Found { command, url: None }
        }
        _ => Found::default(),
    }
}

/// Adds the paths that patch text names (see the module documentation).
pub fn add_patch_paths(text: &str, paths: &mut BoundedPaths) {
    const MARKERS: &[&str] = &["*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "];
    let mut previous_minus: Option<&str> = None;
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(path) = MARKERS.iter().find_map(|marker| line.strip_prefix(marker))
            && !paths.add(path.trim())
        {
            return;
        }
        if let Some(plus) = line.strip_prefix("+++ ")
            && let Some(minus) = previous_minus.take()
        {
            for path in [minus, plus].into_iter().filter_map(diff_header_path) {
                if !paths.add(path) {
                    return;
                }
            }
        }
        previous_minus = line.strip_prefix("--- ");
    }
}

fn read_object(object: &Map<String, Value>, paths: &mut BoundedPaths) -> Found {
    add_keyed_paths(object, paths);
    // `edits` (Claude Code's MultiEdit), `files` (OpenCode's edit permission: `filePath`,
    // `movePath`, `patch` per file).
    let items = ["edits", "files"].into_iter().filter_map(|key| object.get(key).and_then(Value::as_array));
    for item in items.flatten().take(MAX_ITEMS_SCANNED) {
        if let Some(edit) = item.as_object() {
            add_keyed_paths(edit, paths);
            for key in PATCH_KEYS {
                if let Some(text) = edit.get(*key).and_then(Value::as_str) {
                    add_patch_paths(text, paths);
                }
            }
        }
    }
    match object.get("changes") {
        Some(Value::Object(changes)) => {
            for (path, change) in changes.iter().take(MAX_ITEMS_SCANNED) {
                if !paths.add(path) {
                    break;
                }
                add_change_paths(change, paths);
            }
        }
        Some(Value::Array(changes)) => {
            for change in changes.iter().take(MAX_ITEMS_SCANNED) {
                add_change_paths(change, paths);
            }
        }
        _ => {}
    }
    for key in PATCH_KEYS {
        if let Some(text) = object.get(*key).and_then(Value::as_str) {
            add_patch_paths(text, paths);
        }
    }
    let command = command_of_object(object);
    if let Some(command) = &command
        && command.contains("*** Begin Patch")
    {
        add_patch_paths(command, paths);
    }
    let url = URL_KEYS.iter().find_map(|key| object.get(*key).and_then(Value::as_str)).map(str::to_owned);
    Found { command, url }
}

fn add_change_paths(change: &Value, paths: &mut BoundedPaths) {
    let Some(change) = change.as_object() else { return };
    add_keyed_paths(change, paths);
    for nested in ["kind", "update"] {
        if let Some(inner) = change.get(nested).and_then(Value::as_object) {
            add_keyed_paths(inner, paths);
        }
    }
}

fn add_keyed_paths(object: &Map<String, Value>, paths: &mut BoundedPaths) {
    for path in PATH_KEYS.iter().flat_map(|key| strings(object.get(*key))) {
        if !paths.add(path) {
            return;
        }
    }
}

/// A string value, or the strings of an array value.
fn strings(value: Option<&Value>) -> impl Iterator<Item = &str> {
    let single = value.and_then(Value::as_str);
    let items = value.and_then(Value::as_array).into_iter().flatten().take(MAX_ITEMS_SCANNED);
    single.into_iter().chain(items.filter_map(Value::as_str))
}

/// The path in a unified diff header (`a/src/x.rs`, `b/src/x.rs\t2024-…`), if not `/dev/null`.
fn diff_header_path(header: &str) -> Option<&str> {
    let path = header.split('\t').next().unwrap_or(header).trim();
    if path.is_empty() || path == "/dev/null" {
        return None;
    }
    Some(path.strip_prefix("a/").or_else(|| path.strip_prefix("b/")).unwrap_or(path))
}

fn command_of_object(object: &Map<String, Value>) -> Option<String> {
    for key in COMMAND_KEYS {
        match object.get(*key) {
            Some(Value::String(command)) => {
                let args = object.get("args").and_then(Value::as_array).map(|args| join_strings(args));
                return Some(match args {
                    Some(args) if !args.is_empty() => format!("{command} {args}"),
                    _ => command.clone(),
                });
            }
            Some(Value::Array(items)) => {
                if let Some(command) = command_of_array(items) {
                    return Some(command);
                }
            }
            _ => {}
        }
    }
    None
}

/// An argv array as one line; `[bash, -lc, script]` gives the script.
fn command_of_array(items: &[Value]) -> Option<String> {
    if let [Value::String(shell), Value::String(flag), Value::String(script)] = items
        && is_shell(shell)
        && is_command_flag(flag)
    {
        return Some(script.clone());
    }
    let joined = join_strings(items);
    (!joined.is_empty()).then_some(joined)
}

fn join_strings(items: &[Value]) -> String {
    let mut joined = String::new();
    for item in items.iter().take(MAX_ITEMS_SCANNED).filter_map(Value::as_str) {
        if !joined.is_empty() {
            joined.push(' ');
        }
        joined.push_str(item);
    }
    joined
}

fn is_shell(program: &str) -> bool {
    let name = program.rsplit('/').next().unwrap_or(program);
    SHELLS.contains(&name)
}

fn is_command_flag(flag: &str) -> bool {
    flag.len() >= 2
        && flag.starts_with('-')
        && flag.ends_with('c')
        && flag[1..].chars().all(|c| c.is_ascii_alphabetic())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths_of(raw_input: Value) -> (Vec<String>, Found) {
        let mut paths = BoundedPaths::new("/home/agent");
        let found = read(&raw_input, &mut paths);
        (paths.finish().0, found)
    }

    #[test]
    fn claude_code_shapes() {
        let (paths, found) = paths_of(json!({"file_path": "/home/agent/a.txt", "content": "hi"}));
        assert_eq!(paths, ["/home/agent/a.txt"]);
        assert_eq!(found.command, None);
        let (paths, _) = paths_of(json!({"file_path": "/x/y.rs", "edits": [{"old_string": "a", "new_string": "b"}]}));
        assert_eq!(paths, ["/x/y.rs"]);
        let (paths, _) = paths_of(json!({"notebook_path": "n.ipynb", "new_source": ""}));
        assert_eq!(paths, ["/home/agent/n.ipynb"]);
        let (paths, found) = paths_of(json!({"command": "git status", "description": "status"}));
        assert!(paths.is_empty());
        assert_eq!(found.command.as_deref(), Some("git status"));
        let (_, found) = paths_of(json!({"url": "https://example.com/x", "prompt": "summarize"}));
        assert_eq!(found.url.as_deref(), Some("https://example.com/x"));
        let (paths, _) = paths_of(json!({"pattern": "fn main", "path": "src"}));
        assert_eq!(paths, ["/home/agent/src"]);
    }

    #[test]
    fn codex_shapes() {
        let (_, found) = paths_of(json!({"command": ["bash", "-lc", "cargo test"], "cwd": "/home/agent"}));
        assert_eq!(found.command.as_deref(), Some("cargo test"));
        let (_, found) = paths_of(json!({"command": ["/bin/zsh", "-c", "ls -la"]}));
        assert_eq!(found.command.as_deref(), Some("ls -la"));
        let (_, found) = paths_of(json!({"command": ["git", "push", "--force"]}));
        assert_eq!(found.command.as_deref(), Some("git push --force"));
        let (_, found) = paths_of(json!(["rm", "-rf", "target"]));
        assert_eq!(found.command.as_deref(), Some("rm -rf target"));
        let (paths, _) = paths_of(json!({
            "changes": {
                "/home/agent/src/a.rs": {"type": "update", "unified_diff": "", "move_path": "/home/agent/src/b.rs"},
                "notes.md": {"add": {"content": "x"}},
                "/etc/old": {"update": {"move_path": "/etc/new"}},
            },
            "reason": "edit",
        }));
        assert_eq!(
            paths,
            ["/home/agent/src/a.rs", "/home/agent/src/b.rs", "/home/agent/notes.md", "/etc/old", "/etc/new"]
        );
        let (paths, _) =
            paths_of(json!({"changes": [{"path": "x.rs", "kind": {"type": "update", "move_path": "y.rs"}}]}));
        assert_eq!(paths, ["/home/agent/x.rs", "/home/agent/y.rs"]);
    }

    /// As OpenCode 1.x sends them (`packages/opencode/src/acp/permission.ts`): the permission's
    /// metadata is the `rawInput`.
    #[test]
    fn opencode_permission_shapes() {
        let (paths, _) = paths_of(json!({"files": [
            {"filePath": "/home/agent/src/a.ts", "relativePath": "src/a.ts", "patch": "--- a/src/a.ts\n+++ b/src/a.ts\n"},
            {"filePath": "/home/agent/old.ts", "movePath": "/tmp/new.ts"},
            7,
        ]}));
        assert_eq!(paths, ["/home/agent/src/a.ts", "/home/agent/old.ts", "/tmp/new.ts"]);
        let (paths, _) = paths_of(json!({"filepath": "src/x.ts", "diff": "--- a/src/x.ts\n+++ b/src/x.ts\n"}));
        assert_eq!(paths, ["/home/agent/src/x.ts"]);
        let (paths, _) =
            paths_of(json!({"description": "read /etc", "parentDir": "/etc", "directories": ["/etc", "/var"]}));
        assert_eq!(paths, ["/etc", "/var"]);
        let (paths, found) = paths_of(json!({"command": "rm -rf dist", "description": "clean"}));
        assert_eq!((paths.len(), found.command.as_deref()), (0, Some("rm -rf dist")));
    }

    #[test]
    fn apply_patch_text_names_its_files() {
        let patch = "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n*** Move to: src/new.rs\n\
                     *** Add File: /tmp/x\n+hi\n*** Delete File: ../outside.txt\n*** End Patch";
        let (paths, _) = paths_of(json!({"patch": patch}));
        assert_eq!(paths, ["/home/agent/src/lib.rs", "/home/agent/src/new.rs", "/tmp/x", "/home/outside.txt"]);
        let (paths, found) = paths_of(json!({"command": ["apply_patch", patch]}));
        assert_eq!(paths.len(), 4);
        assert!(found.command.is_some_and(|c| c.starts_with("apply_patch")));
        let (paths, _) = paths_of(json!({"patchText": patch}));
        assert_eq!(paths.len(), 4);
    }

    #[test]
    fn unified_diff_headers_come_in_pairs() {
        let diff = "--- a/src/x.rs\t2024-01-01\n+++ b/src/x.rs\n@@ -1 +1 @@\n--- not a header\n-- sql\n\
                    --- /dev/null\n+++ b/new.txt\n";
        let (paths, _) = paths_of(json!({"diff": diff}));
        assert_eq!(paths, ["/home/agent/src/x.rs", "/home/agent/new.txt"]);
    }

    #[test]
    fn opencode_shapes() {
        let (paths, _) = paths_of(json!({"filePath": "/home/agent/a.ts", "oldString": "a", "newString": "b"}));
        assert_eq!(paths, ["/home/agent/a.ts"]);
        let (_, found) = paths_of(json!({"command": "npm test", "description": "tests"}));
        assert_eq!(found.command.as_deref(), Some("npm test"));
        let (_, found) = paths_of(json!({"url": "https://docs.rs", "format": "markdown"}));
        assert_eq!(found.url.as_deref(), Some("https://docs.rs"));
    }

    #[test]
    fn acp_terminal_shape_joins_args() {
        let (_, found) = paths_of(json!({"command": "git", "args": ["commit", "-m", "x"]}));
        assert_eq!(found.command.as_deref(), Some("git commit -m x"));
    }

    #[test]
    fn odd_values_are_ignored() {
        let (paths, found) = paths_of(json!({"file_path": 7, "paths": ["a", 3, null], "command": {"x": 1}, "url": []}));
        assert_eq!(paths, ["/home/agent/a"]);
        assert_eq!(found, Found::default());
        assert_eq!(paths_of(json!(null)).1, Found::default());
        assert_eq!(paths_of(json!([])).1, Found::default());
        let (_, found) = paths_of(json!({"command": ["bash", "-x", "y"]}));
        assert_eq!(found.command.as_deref(), Some("bash -x y"), "only -c flags unwrap");
    }
}
