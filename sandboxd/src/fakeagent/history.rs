//! Session history on disk: `<state dir>/<sessionId>.jsonl`, one `session/update` `update`
//! object per line, in the order they were sent. `session/load` replays it.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The history file of `session_id`, or `None` if the id could not name a file safely (it
/// must be non-empty ASCII letters, digits, `-`, `_` or `.`, and not start with `.`).
pub fn path(state_dir: &Path, session_id: &str) -> Option<PathBuf> {
    let safe = !session_id.is_empty()
        && session_id.len() <= 200
        && !session_id.starts_with('.')
        && session_id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    safe.then(|| state_dir.join(format!("{session_id}.jsonl")))
}

/// Creates the (empty) history file of a new session, and the state directory if needed.
pub fn create(path: &Path) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new().create(true).append(true).open(path).map(drop)
}

/// Reads every update recorded in a history file. Lines that are not JSON (a torn write) are
/// skipped.
pub fn read(path: &Path) -> io::Result<Vec<Value>> {
    let mut updates = Vec::new();
    for line in BufReader::new(File::open(path)?).split(b'\n') {
        let line = line?;
        if let Ok(update) = serde_json::from_slice::<Value>(&line) {
            updates.push(update);
        }
    }
    Ok(updates)
}

/// Appends updates to one session's history for the length of a prompt turn.
pub struct Recorder {
    file: Option<File>,
}

impl Recorder {
    /// Opens the history for appending. If it cannot be opened, a line goes to stderr and the
    /// turn runs without recording.
    pub fn open(path: &Path) -> Self {
        let file = create(path)
            .and_then(|()| OpenOptions::new().append(true).open(path))
            .map_err(|e| eprintln!("fakeagent: cannot record history in {}: {e}", path.display()))
            .ok();
        Recorder { file }
    }

    /// A recorder that records nothing (the session id cannot name a file).
    pub fn disabled() -> Self {
        Recorder { file: None }
    }

    /// Appends one update as one line.
    pub fn append(&mut self, update: &Value) {
        if self.file.is_some() {
            let mut line = update.to_string().into_bytes();
            line.push(b'\n');
            self.append_lines(&line);
        }
    }

    /// Appends whole lines (each an update's JSON and a newline) at once.
    pub fn append_lines(&mut self, block: &[u8]) {
        if let Some(file) = &mut self.file
            && let Err(e) = file.write_all(block)
        {
            eprintln!("fakeagent: cannot record history: {e}");
            self.file = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_ids_that_are_not_plain_file_names() {
        let dir = Path::new("/s");
        assert_eq!(path(dir, "fa-12ab"), Some(PathBuf::from("/s/fa-12ab.jsonl")));
        for bad in ["", "../x", "a/b", ".hidden", "a b"] {
            assert_eq!(path(dir, bad), None, "{bad:?}");
        }
    }
}
