//! Lexical path handling for policies: making a harness's path absolute against the work
//! folder, resolving `.` and `..` without touching the disk, and asking whether a path lies
//! under the work folder; and the bounded, deduplicated set of paths a call touches.

/// `path` made absolute and normalized: a relative path is joined to `workdir`; empty, `.` and
/// `..` segments are resolved lexically (`..` at the root stays at the root); a `file://`
/// prefix is dropped. The result starts with `/` and has no trailing `/` (except the root).
pub fn absolute(path: &str, workdir: &str) -> String {
    let path = path.strip_prefix("file://").unwrap_or(path);
    let mut segments: Vec<&str> = Vec::new();
    if !path.starts_with('/') {
        push_segments(&mut segments, workdir);
    }
    push_segments(&mut segments, path);
    join(&segments)
}

/// `workdir` normalized the same way (a relative one is taken from the root).
pub fn normalized_workdir(workdir: &str) -> String {
    absolute(workdir, "/")
}

/// Whether the normalized `path` is `workdir` itself or inside it (both normalized).
pub fn is_under(path: &str, workdir: &str) -> bool {
    if workdir == "/" {
        return true;
    }
    match path.strip_prefix(workdir) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

/// The most paths one call keeps.
pub const MAX_PATHS: usize = 256;

/// The longest path kept (Linux's `PATH_MAX`); a longer one is dropped.
pub const MAX_PATH_BYTES: usize = 4096;

/// A call's paths as they are found: made absolute against the work folder, deduplicated, in
/// order of discovery, at most [`MAX_PATHS`]. Whatever does not fit is dropped and recorded.
#[derive(Debug, Clone)]
pub struct BoundedPaths {
    workdir: String,
    paths: Vec<String>,
    truncated: bool,
}

impl BoundedPaths {
    /// An empty set resolving relative paths against `workdir`.
    pub fn new(workdir: &str) -> Self {
        Self { workdir: normalized_workdir(workdir), paths: Vec::new(), truncated: false }
    }

    /// Adds `path` (ignored when blank). Returns `false` once the set is full, so callers can
    /// stop looking.
    pub fn add(&mut self, path: &str) -> bool {
        if self.paths.len() >= MAX_PATHS {
            self.truncated = true;
            return false;
        }
        if path.trim().is_empty() {
            return true;
        }
        if path.len() > MAX_PATH_BYTES || path.contains('\0') {
            self.truncated = true;
            return true;
        }
        let path = absolute(path, &self.workdir);
        if !self.paths.contains(&path) {
            self.paths.push(path);
        }
        true
    }

    /// Whether no more paths fit.
    pub fn is_full(&self) -> bool {
        self.paths.len() >= MAX_PATHS
    }

    /// The paths, and whether any were dropped.
    pub fn finish(self) -> (Vec<String>, bool) {
        (self.paths, self.truncated)
    }
}

fn push_segments<'a>(segments: &mut Vec<&'a str>, path: &'a str) {
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
}

fn join(segments: &[&str]) -> String {
    if segments.is_empty() {
        return "/".to_owned();
    }
    let mut joined = String::with_capacity(segments.iter().map(|s| s.len() + 1).sum());
    for segment in segments {
        joined.push('/');
        joined.push_str(segment);
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_join_the_work_folder() {
        assert_eq!(absolute("src/main.rs", "/home/agent"), "/home/agent/src/main.rs");
        assert_eq!(absolute("./notes.txt", "/home/agent/"), "/home/agent/notes.txt");
        assert_eq!(absolute("", "/home/agent"), "/home/agent");
    }

    #[test]
    fn dots_resolve_lexically() {
        assert_eq!(absolute("../../etc/passwd", "/home/agent"), "/etc/passwd");
        assert_eq!(absolute("/home/agent/../../../../etc", "/x"), "/etc");
        assert_eq!(absolute("/a/./b//c/", "/x"), "/a/b/c");
        assert_eq!(absolute("/..", "/x"), "/");
        assert_eq!(absolute("file:///home/agent/a/../b", "/x"), "/home/agent/b");
    }

    #[test]
    fn workdir_is_normalized() {
        assert_eq!(normalized_workdir("/home/agent/"), "/home/agent");
        assert_eq!(normalized_workdir("home/agent"), "/home/agent");
        assert_eq!(normalized_workdir(""), "/");
    }

    #[test]
    fn bounded_paths_dedup_and_cap() {
        let mut paths = BoundedPaths::new("/w");
        assert!(paths.add("a"));
        assert!(paths.add("/w/a"));
        assert!(paths.add("  "));
        assert!(paths.add(&"x".repeat(MAX_PATH_BYTES + 1)));
        let (kept, truncated) = paths.clone().finish();
        assert_eq!(kept, vec!["/w/a".to_owned()]);
        assert!(truncated, "the overlong path was dropped");
        for i in 0..MAX_PATHS * 2 {
            if !paths.add(&format!("f{i}")) {
                break;
            }
        }
        assert!(paths.is_full());
        let (kept, truncated) = paths.finish();
        assert_eq!(kept.len(), MAX_PATHS);
        assert!(truncated);
    }

    #[test]
    fn under_means_the_folder_or_inside_it() {
        assert!(is_under("/home/agent", "/home/agent"));
        assert!(is_under("/home/agent/x", "/home/agent"));
        assert!(!is_under("/home/agentx", "/home/agent"));
        assert!(!is_under("/home", "/home/agent"));
        assert!(is_under("/etc", "/"));
    }
}
