//! Why turns fail and the sandbox shows an error, as values: the codes a failed turn's `error`
//! event carries ([`FailureCode`]), a failure as people read it ([`Failure`]), and the ways a
//! wake fails ([`WakeError`]). Codes are named once here and written out only where they leave
//! the core (an event's payload, the observed state's reason); nothing parses them back.

use std::fmt;

/// The code of a failure that ends turns (the `code` of their `error` event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureCode {
    /// The sandbox could not be made or started.
    SandboxStartFailed,
    /// The engine has no room for the sandbox.
    Capacity,
    /// The sandbox did not connect back within the reconnect grace.
    SandboxUnreachable,
    /// The sandbox's container stopped on its own (killed or crashed).
    SandboxExited,
    /// The engine killed the sandbox or its harness at the memory limit.
    OutOfMemory,
    /// The harness could not be launched or did not start.
    HarnessStartFailed,
    /// The harness refused or garbled `initialize`.
    HarnessInitFailed,
    /// The harness did not answer a request (or `Start`) in time.
    HarnessTimeout,
    /// The harness process exited.
    HarnessExited,
    /// The harness printed something that is not ACP.
    HarnessProtocolError,
    /// The harness process was lost (the sandbox restarted).
    HarnessLost,
    /// The harness could not open the turn's session.
    SessionStartFailed,
    /// The turn hit its time limit.
    TurnTimeout,
}

impl FailureCode {
    /// The code as events and the API show it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SandboxStartFailed => "SANDBOX_START_FAILED",
            Self::Capacity => "CAPACITY",
            Self::SandboxUnreachable => "SANDBOX_UNREACHABLE",
            Self::SandboxExited => "SANDBOX_EXITED",
            Self::OutOfMemory => "OUT_OF_MEMORY",
            Self::HarnessStartFailed => "HARNESS_START_FAILED",
            Self::HarnessInitFailed => "HARNESS_INIT_FAILED",
            Self::HarnessTimeout => "HARNESS_TIMEOUT",
            Self::HarnessExited => "HARNESS_EXITED",
            Self::HarnessProtocolError => "HARNESS_PROTOCOL_ERROR",
            Self::HarnessLost => "HARNESS_LOST",
            Self::SessionStartFailed => "SESSION_START_FAILED",
            Self::TurnTimeout => "TURN_TIMEOUT",
        }
    }
}

impl FailureCode {
    /// The code among every error code.
    pub fn error_code(self) -> crate::error_code::ErrorCode {
        use crate::error_code::ErrorCode;
        match self {
            Self::SandboxStartFailed => ErrorCode::SandboxStartFailed,
            Self::Capacity => ErrorCode::Capacity,
            Self::SandboxUnreachable => ErrorCode::SandboxUnreachable,
            Self::SandboxExited => ErrorCode::SandboxExited,
            Self::OutOfMemory => ErrorCode::OutOfMemory,
            Self::HarnessStartFailed => ErrorCode::HarnessStartFailed,
            Self::HarnessInitFailed => ErrorCode::HarnessInitFailed,
            Self::HarnessTimeout => ErrorCode::HarnessTimeout,
            Self::HarnessExited => ErrorCode::HarnessExited,
            Self::HarnessProtocolError => ErrorCode::HarnessProtocolError,
            Self::HarnessLost => ErrorCode::HarnessLost,
            Self::SessionStartFailed => ErrorCode::SessionStartFailed,
            Self::TurnTimeout => ErrorCode::TurnTimeout,
        }
    }
}

impl fmt::Display for FailureCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the sandbox or its harness last failed: `CODE: message` for people, or the message alone
/// when no turn's code names it (a stop that failed, a sandbox that never dialled back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The code of the error event the failed turns got, if any.
    pub code: Option<FailureCode>,
    /// What happened, for people.
    pub message: String,
}

impl Failure {
    /// A failure with a code.
    pub fn coded(code: FailureCode, message: impl Into<String>) -> Self {
        Self { code: Some(code), message: message.into() }
    }

    /// A failure without a code.
    pub fn plain(message: impl Into<String>) -> Self {
        Self { code: None, message: message.into() }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            Some(code) => write!(f, "{code}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Why the wake job failed ([`super::Input::Woken`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WakeError {
    /// The engine has no room for the sandbox (a full subnet pool, no engine with room).
    #[error("CAPACITY: {0}")]
    Capacity(String),
    /// The sandbox could not be made or started; the message is for people.
    #[error("{0}")]
    StartFailed(String),
}

impl WakeError {
    /// The code the waiting turns fail with.
    pub fn code(&self) -> FailureCode {
        match self {
            Self::Capacity(_) => FailureCode::Capacity,
            Self::StartFailed(_) => FailureCode::SandboxStartFailed,
        }
    }

    /// What happened, without the code.
    pub fn message(&self) -> &str {
        match self {
            Self::Capacity(message) | Self::StartFailed(message) => message,
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn each_failure_code_is_the_error_code_of_the_same_text() {
        use FailureCode::*;
        for code in [
            SandboxStartFailed,
            Capacity,
            SandboxUnreachable,
            SandboxExited,
            OutOfMemory,
            HarnessStartFailed,
            HarnessInitFailed,
            HarnessTimeout,
            HarnessExited,
            HarnessProtocolError,
            HarnessLost,
            SessionStartFailed,
            TurnTimeout,
        ] {
            assert_eq!(code.error_code().as_str(), code.as_str());
        }
    }
    use super::*;

    #[test]
    fn failures_read_code_first() {
        assert_eq!(Failure::coded(FailureCode::OutOfMemory, "killed").to_string(), "OUT_OF_MEMORY: killed");
        assert_eq!(Failure::plain("the engine is gone").to_string(), "the engine is gone");
        let full = WakeError::Capacity("no subnet".to_owned());
        assert_eq!(
            (full.code(), full.message(), full.to_string().as_str()),
            (FailureCode::Capacity, "no subnet", "CAPACITY: no subnet")
        );
        let failed = WakeError::StartFailed("no such image".to_owned());
        assert_eq!((failed.code(), failed.to_string().as_str()), (FailureCode::SandboxStartFailed, "no such image"));
    }
}
