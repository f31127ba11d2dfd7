//! An agent's permission posture — `autonomous`, `guarded` or `approval` — and how the one in
//! force is resolved from the agent, the server and the built-in default. The posture's type,
//! names and aliases live with the setting that names one (`config::permissions`), re-exported
//! here.

pub use crate::config::permissions::{ACCEPTED_POSTURES, Posture, PostureError};

/// The posture in force: the agent's own, else the server's default, else `autonomous` (the
/// sandbox is the boundary). `autonomous` on a server that forbids it is an error, wherever it
/// came from — so a server forbidding it should also set a default.
pub fn resolve(
    agent: Option<Posture>,
    server_default: Option<Posture>,
    forbid_autonomous: bool,
) -> Result<Posture, PostureError> {
    let posture = agent.or(server_default).unwrap_or(Posture::Autonomous);
    if forbid_autonomous && posture == Posture::Autonomous {
        return Err(PostureError::AutonomousForbidden);
    }
    Ok(posture)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_agent_then_server_then_autonomous() {
        use Posture::*;
        assert_eq!(resolve(Some(Guarded), Some(Approval), false), Ok(Guarded));
        assert_eq!(resolve(None, Some(Approval), false), Ok(Approval));
        assert_eq!(resolve(None, None, false), Ok(Autonomous));
        assert_eq!(resolve(Some(Autonomous), Some(Guarded), false), Ok(Autonomous));
    }

    #[test]
    fn forbidden_autonomous_fails_wherever_it_comes_from() {
        use Posture::*;
        for (agent, server) in [(Some(Autonomous), Some(Guarded)), (None, Some(Autonomous)), (None, None)] {
            let error = resolve(agent, server, true).expect_err("forbidden");
            assert_eq!(error, PostureError::AutonomousForbidden);
            assert_eq!(error.code(), "AUTONOMOUS_FORBIDDEN");
        }
        assert_eq!(resolve(Some(Approval), Some(Autonomous), true), Ok(Approval));
        assert_eq!(resolve(None, Some(Guarded), true), Ok(Guarded));
    }
}
