//! An agent's repository (`repo: {url, branch?}` on create): what a valid one is, the folder of
//! the home it is cloned into, the clone's command line, and what a failed clone says. The
//! server runs the clone inside the sandbox (through the egress proxy, with the git credential
//! helper a `git_token` secret configures) before the harness starts, and starts sessions in
//! the folder once it is there (docs/api.md, "An agent for a repository").

/// The longest URL taken.
pub const MAX_URL_BYTES: usize = 2048;
/// The longest branch name taken.
pub const MAX_BRANCH_BYTES: usize = 255;
/// The most of a failed clone's output kept as its reason.
pub const MAX_REASON_BYTES: usize = 1024;

/// A checked repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// `https://host[:port]/path` (no user, password, query or fragment).
    pub url: String,
    /// The branch cloned (`None`: the remote's default).
    pub branch: Option<String>,
    /// The host (lower case), for the egress allow-list.
    pub host: String,
    /// The port (443 unless the URL names one).
    pub port: u16,
    /// The folder of the home it is cloned into: the URL's last path segment without `.git`.
    pub dir: String,
}

impl Repo {
    /// Checks a URL and branch; the error says what is wrong.
    pub fn parse(url: &str, branch: Option<&str>) -> Result<Self, String> {
        if url.len() > MAX_URL_BYTES {
            return Err(format!("repo.url is longer than {MAX_URL_BYTES} bytes"));
        }
        let Some(rest) = url.strip_prefix("https://") else {
            return Err(format!(
                "repo.url {url:?} must start with https:// (the only transport through the egress proxy)"
            ));
        };
        if url.bytes().any(|b| !b.is_ascii_graphic()) {
            return Err("repo.url must be visible ASCII without spaces".to_owned());
        }
        if rest.contains(['?', '#']) {
            return Err("repo.url must not have a query or fragment".to_owned());
        }
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.contains('@') {
            return Err(
                "repo.url must not hold a user or password: attach a git_token secret for its host instead".to_owned()
            );
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => {
                let port: u16 = port
                    .parse()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| format!("repo.url's port {port:?} is not 1-65535"))?;
                (host, port)
            }
            None => (authority, 443),
        };
        let host = host.to_ascii_lowercase();
        if !valid_host(&host) {
            return Err(format!("repo.url's host {host:?} must be a DNS name like github.com (not an address)"));
        }
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        if segments.is_empty() || segments.iter().any(|s| *s == "." || *s == "..") || path.contains('\\') {
            return Err("repo.url must name a repository path, like https://github.com/org/repo.git".to_owned());
        }
        let last = segments[segments.len() - 1];
        let dir = last.strip_suffix(".git").unwrap_or(last);
        let dir_ok = |d: &str| {
            !d.is_empty()
                && d.len() <= 100
                && !d.starts_with('.')
                && !d.starts_with('-')
                && d.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        };
        if !dir_ok(dir) {
            return Err(format!(
                "repo.url's last path segment {last:?} must be a folder name (letters, digits, '-', '_', '.'; \
                 not starting with '.' or '-')"
            ));
        }
        let branch = match branch {
            None => None,
            Some(branch) => Some(check_branch(branch)?.to_owned()),
        };
        Ok(Self { url: url.to_owned(), branch, host, port, dir: dir.to_owned() })
    }

    /// The egress allow-list entry the clone needs (`host` or `host:port`).
    pub fn allow_entry(&self) -> String {
        if self.port == 443 { self.host.clone() } else { format!("{}:{}", self.host, self.port) }
    }

    /// The folder in a home.
    pub fn path_in(&self, home: &str) -> String {
        format!("{}/{}", home.trim_end_matches('/'), self.dir)
    }

    /// The clone's command line, run in the sandbox as the harness's user with the harness's
    /// environment. It is idempotent: a folder that already holds the repository (a clone that
    /// finished before a restart) is left as it is. The clone is made beside the folder
    /// (`.<dir>.partial`) and moved into place only once complete, so nothing but its own
    /// leftovers is ever removed: a folder of that name the agent made itself (not empty, no
    /// `.git`) is left as it is and the clone fails saying so. Options after `--` cannot be taken
    /// for flags.
    pub fn clone_argv(&self, home: &str) -> Vec<String> {
        let script = "set -e; dir=$1; url=$2; shift 2; \
             if [ -d \"$dir/.git\" ]; then echo \"already cloned\"; exit 0; fi; \
             if [ -e \"$dir\" ] && ! rmdir -- \"$dir\" 2>/dev/null; then \
               echo \"$dir exists and is not a git clone: left as it is; move it away and the clone is tried again at the next start\" >&2; exit 3; fi; \
             part=\"$(dirname -- \"$dir\")/.$(basename -- \"$dir\").partial\"; rm -rf -- \"$part\"; \
             git clone --no-progress \"$@\" -- \"$url\" \"$part\" || { status=$?; rm -rf -- \"$part\"; exit $status; }; \
             exec mv -T -- \"$part\" \"$dir\"";
        let mut argv = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            script.to_owned(),
            "agenthold-clone".to_owned(),
            self.path_in(home),
            self.url.clone(),
        ];
        if let Some(branch) = &self.branch {
            argv.push("--branch".to_owned());
            argv.push(branch.clone());
        }
        argv
    }
}

/// A branch name as git's `check-ref-format --branch` takes it, bounded.
pub fn check_branch(branch: &str) -> Result<&str, String> {
    let bad = |why: &str| Err(format!("repo.branch {branch:?} {why}"));
    if branch.is_empty() || branch.len() > MAX_BRANCH_BYTES {
        return bad(&format!("must be 1-{MAX_BRANCH_BYTES} bytes"));
    }
    if branch.bytes().any(|b| b.is_ascii_control() || b" ~^:?*[\\".contains(&b) || !b.is_ascii()) {
        return bad("must be ASCII without spaces, control characters or any of ~ ^ : ? * [ \\");
    }
    if branch.starts_with('-') || branch.starts_with('/') || branch.ends_with('/') || branch.ends_with('.') {
        return bad("must not start with '-' or '/' nor end with '/' or '.'");
    }
    if branch.contains("..") || branch.contains("//") || branch.contains("@{") || branch == "@" {
        return bad("must not hold '..', '//' or '@{' nor be '@'");
    }
    if branch.split('/').any(|c| c.starts_with('.') || c.ends_with(".lock")) {
        return bad("must not have a part starting with '.' or ending with '.lock'");
    }
    Ok(branch)
}

/// What a failed clone says: why it did not run, else its exit and the end of its output (git
/// writes its reason last), bounded by [`MAX_REASON_BYTES`].
pub fn failure_reason(exit_code: Option<i64>, output: &str) -> String {
    let text = output.trim();
    let start = text.len().saturating_sub(MAX_REASON_BYTES - 64);
    let start = (start..=text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(text.len());
    let tail = &text[start..];
    match exit_code {
        Some(code) if tail.is_empty() => format!("git clone exited with status {code}"),
        Some(code) => format!("git clone exited with status {code}: {tail}"),
        None if tail.is_empty() => "git clone did not finish".to_owned(),
        None => format!("git clone did not finish: {tail}"),
    }
}

fn valid_host(host: &str) -> bool {
    let labels: Vec<&str> = host.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    };
    host.len() <= 253
        && labels.len() >= 2
        && labels.iter().all(label_ok)
        && labels.last().is_some_and(|tld| !tld.bytes().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_repositories_are_taken_with_their_folder() {
        let repo = Repo::parse("https://GitHub.com/org/agenthold.git", Some("feature/x-1")).expect("valid");
        assert_eq!((repo.host.as_str(), repo.port, repo.dir.as_str()), ("github.com", 443, "agenthold"));
        assert_eq!(repo.branch.as_deref(), Some("feature/x-1"));
        assert_eq!(repo.allow_entry(), "github.com");
        assert_eq!(repo.path_in("/home/agent/"), "/home/agent/agenthold");
        let other = Repo::parse("https://git.example.com:8443/a/b/tool", None).expect("valid");
        assert_eq!(
            (other.port, other.dir.as_str(), other.allow_entry()),
            (8443, "tool", "git.example.com:8443".to_owned())
        );
        let argv = repo.clone_argv("/home/agent");
        assert_eq!(argv[..2], ["sh", "-c"]);
        assert_eq!(
            argv[4..],
            ["/home/agent/agenthold", "https://GitHub.com/org/agenthold.git", "--branch", "feature/x-1"]
        );
    }

    /// The script itself, run by `sh` against a local repository (git on the test machine's PATH).
    #[test]
    fn the_clone_script_removes_only_its_own_leftovers() {
        use std::process::Command;
        let base = std::env::temp_dir().join(format!("agenthold-clone-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (src, home) = (base.join("src"), base.join("home"));
        std::fs::create_dir_all(&home).expect("home");
        let git = |args: &[&str]| {
            let out = Command::new("git").args(["-c", "user.name=t", "-c", "user.email=t@t"]).args(args).output();
            assert!(out.expect("git runs").status.success(), "git {args:?}");
        };
        git(&["init", "-q", src.to_str().expect("utf-8")]);
        git(&["-C", src.to_str().expect("utf-8"), "commit", "-q", "--allow-empty", "-m", "one"]);
        let repo = Repo::parse("https://example.com/org/tool.git", None).expect("valid");
        let home_str = home.to_str().expect("utf-8");
        let clone = |url: &str| {
            let mut argv = repo.clone_argv(home_str);
            argv[5] = url.to_owned();
            let out = Command::new(&argv[0]).args(&argv[1..]).output().expect("sh runs");
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
            )
        };
        let (dir, partial) = (home.join("tool"), home.join(".tool.partial"));
        let src_url = src.to_str().expect("utf-8");
        // A folder the agent made itself is left as it is, and the clone says why it failed.
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("notes.txt"), "mine").expect("write");
        let (code, out) = clone(src_url);
        assert_eq!(code, Some(3), "{out}");
        assert!(out.contains("exists and is not a git clone"), "{out}");
        assert_eq!(std::fs::read_to_string(dir.join("notes.txt")).ok().as_deref(), Some("mine"));
        std::fs::remove_dir_all(&dir).expect("cleanup");
        // A failed clone leaves nothing; a killed one's leftovers are removed before the next.
        let (code, out) = clone(base.join("nowhere").to_str().expect("utf-8"));
        assert_ne!(code, Some(0), "{out}");
        assert!(!dir.exists() && !partial.exists(), "{out}");
        std::fs::create_dir_all(partial.join(".git")).expect("leftover");
        std::fs::create_dir_all(&dir).expect("an empty folder is taken");
        let (code, out) = clone(src_url);
        assert_eq!(code, Some(0), "{out}");
        assert!(dir.join(".git").is_dir() && !partial.exists(), "{out}");
        // Once cloned, it stays.
        std::fs::write(dir.join("work.txt"), "kept").expect("write");
        let (code, out) = clone(src_url);
        assert_eq!((code, out.trim()), (Some(0), "already cloned"));
        assert!(dir.join("work.txt").is_file());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn anything_else_is_refused_with_a_reason() {
        let long = format!("https://github.com/{}", "a/".repeat(MAX_URL_BYTES));
        for url in [
            "http://github.com/org/repo.git",
            "git@github.com:org/repo.git",
            "ssh://github.com/org/repo",
            "file:///etc",
            "https://user:pw@github.com/org/repo.git",
            "https://ghp_x@github.com/org/repo.git",
            "https://github.com",
            "https://github.com/",
            "https://10.0.0.1/org/repo.git",
            "https://localhost/org/repo.git",
            "https://github.com/org/repo.git?x=1",
            "https://github.com/org/repo#main",
            "https://github.com/org/../..",
            "https://github.com/org/.git",
            "https://github.com/org/-rf",
            "https://github.com/org/re po",
            "https://github.com:0/org/repo",
            "https://github.com:99999/org/repo",
            &long,
        ] {
            let error = Repo::parse(url, None).expect_err(url);
            assert!(error.starts_with("repo.url"), "{url}: {error}");
        }
        for branch in ["", "-x", "a..b", "a b", "a:b", "x.lock", "a/.b", "a/", "/a", "a//b", "@", "a@{1}", "ä", "a\n"]
        {
            assert!(Repo::parse("https://github.com/o/r", Some(branch)).is_err(), "{branch:?}");
        }
        assert!(Repo::parse("https://github.com/o/r", Some(&"b".repeat(256))).is_err());
        assert!(Repo::parse("https://github.com/o/r", Some("main")).is_ok());
    }

    #[test]
    fn a_failure_says_why_in_bounded_words() {
        assert_eq!(
            failure_reason(Some(128), "fatal: Authentication failed\n"),
            "git clone exited with status 128: fatal: Authentication failed"
        );
        assert_eq!(failure_reason(None, ""), "git clone did not finish");
        let long = format!("{}END", "é".repeat(5000));
        let reason = failure_reason(Some(1), &long);
        assert!(reason.len() <= MAX_REASON_BYTES && reason.ends_with("END"), "{}", reason.len());
    }
}
