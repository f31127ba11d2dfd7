//! Reads fakeagent's settings from the environment (`FAKEAGENT_*`, `HOME`).

use std::path::PathBuf;

/// What fakeagent advertises and how it misbehaves, fixed for the life of the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Advertise and serve `session/load` (`agentCapabilities.loadSession`).
    pub load: bool,
    /// Advertise and serve `session/resume` (`agentCapabilities.sessionCapabilities.resume`).
    pub resume: bool,
    /// A request method that is never answered (`FAKEAGENT_HANG_ON`), for timeout tests.
    pub hang_on: Option<String>,
    /// Where each session's history lives, one `<sessionId>.jsonl` per session.
    pub state_dir: PathBuf,
    /// A login method (`FAKEAGENT_REQUIRE_AUTH`) that must be `authenticate`d before any session
    /// opens (advertised in `authMethods`); `None`: no authentication needed.
    pub require_auth: Option<String>,
    /// `session/load` answers first and replays the history after (`FAKEAGENT_REPLAY_LATE=1`), as
    /// some agents do.
    pub replay_late: bool,
    /// Log every request handled on stderr (`FAKEAGENT_STDERR=1`), as chatty agents do.
    pub stderr: bool,
}

impl Config {
    /// Reads the process environment. Unknown capability names are reported on stderr and
    /// ignored.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok();
        let (config, unknown) = Self::from_vars(
            var("FAKEAGENT_CAPS").as_deref(),
            var("FAKEAGENT_HANG_ON").as_deref(),
            var("FAKEAGENT_STATE_DIR").as_deref(),
            var("HOME").as_deref(),
        );
        for name in unknown {
            eprintln!("fakeagent: ignoring unknown capability {name:?} in FAKEAGENT_CAPS");
        }
        let on = |name: &str| var(name).is_some_and(|v| v == "1");
        Config {
            require_auth: var("FAKEAGENT_REQUIRE_AUTH").filter(|m| !m.is_empty()),
            replay_late: on("FAKEAGENT_REPLAY_LATE"),
            stderr: on("FAKEAGENT_STDERR"),
            ..config
        }
    }

    /// Builds a config from the raw variable values; also returns the capability names it did
    /// not recognise.
    pub fn from_vars(
        caps: Option<&str>,
        hang_on: Option<&str>,
        state_dir: Option<&str>,
        home: Option<&str>,
    ) -> (Self, Vec<String>) {
        let mut load = false;
        let mut resume = false;
        let mut unknown = Vec::new();
        for cap in caps.unwrap_or("load,resume").split(',').map(str::trim) {
            match cap {
                "load" => load = true,
                "resume" => resume = true,
                "none" | "" => {}
                other => unknown.push(other.to_owned()),
            }
        }
        let state_dir = match (state_dir, home) {
            (Some(dir), _) if !dir.is_empty() => PathBuf::from(dir),
            (_, Some(home)) if !home.is_empty() => PathBuf::from(home).join(".fakeagent").join("sessions"),
            _ => std::env::temp_dir().join("fakeagent-sessions"),
        };
        let hang_on = hang_on.filter(|m| !m.is_empty()).map(str::to_owned);
        (Config { load, resume, hang_on, state_dir, require_auth: None, replay_late: false, stderr: false }, unknown)
    }
}

/// `FAKEAGENT_STDERR_LINES`: how many numbered lines fakeagent writes to stderr as it starts
/// (from a thread of their own: it serves meanwhile); 0 when unset or not a number.
pub fn stderr_lines() -> u64 {
    std::env::var("FAKEAGENT_STDERR_LINES").ok().and_then(|n| n.trim().parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_to_load_and_resume_under_home() {
        let (c, unknown) = Config::from_vars(None, None, None, Some("/h"));
        assert!(c.load && c.resume);
        assert!(unknown.is_empty());
        assert_eq!(c.state_dir, PathBuf::from("/h/.fakeagent/sessions"));
        assert_eq!(c.hang_on, None);
    }

    #[test]
    fn parses_caps_list() {
        let (c, unknown) = Config::from_vars(Some("none"), Some("session/new"), Some("/s"), None);
        assert!(!c.load && !c.resume);
        assert_eq!(c.hang_on.as_deref(), Some("session/new"));
        assert_eq!(c.state_dir, PathBuf::from("/s"));
        assert!(unknown.is_empty());
        let (c, unknown) = Config::from_vars(Some(" resume , bogus"), None, None, Some("/h"));
        assert!(!c.load && c.resume);
        assert_eq!(unknown, vec!["bogus".to_owned()]);
    }
}
