//! The client's one error type and how each failure maps to an exit code.

/// Exit code for an HTTP error answered by the server (and for local failures).
pub const EXIT_FAILURE: u8 = 1;
/// Exit code for bad usage (clap's own choice, kept for our checks too).
pub const EXIT_USAGE: u8 = 2;
/// Exit code when `watch`, `exec`, `prompt --follow` or a request hit their timeout.
pub const EXIT_TIMEOUT: u8 = 3;
/// Exit code of `prompt --follow` when the turn was cancelled (`stop_reason: "cancelled"`).
pub const EXIT_TURN_CANCELLED: u8 = 4;
/// Exit code of `prompt --follow` when the turn ended in an error (`stop_reason: "error"`).
pub const EXIT_TURN_ERROR: u8 = 5;
/// Exit code of `prompt --follow` when the turn stopped for another reason (`max_tokens`,
/// `max_turn_requests`, `refusal`, or one newer than this client).
pub const EXIT_TURN_OTHER: u8 = 6;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The server answered with an error status.
    #[error("HTTP {status} {code}: {message}")]
    Api {
        /// The HTTP status.
        status: u16,
        /// The API's machine-readable code (`NOT_FOUND`, `TURN_IN_PROGRESS`, …), or `HTTP_<status>`
        /// when the body carried none.
        code: String,
        /// The API's message (or the raw body).
        message: String,
    },
    /// A deadline passed.
    #[error("timed out: {0}")]
    Timeout(String),
    /// Bad arguments the parser could not catch.
    #[error("{0}")]
    Usage(String),
    /// A followed turn ended with a stop reason other than `end_turn`.
    #[error("the turn ended: {stop_reason}")]
    TurnEnded {
        /// The `turn_end` event's `stop_reason`.
        stop_reason: String,
    },
    /// Anything else: the connection, a malformed response, local I/O.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl Failure {
    /// Builds an [`Failure::Api`] from a status and the response body (`{"error":{"code","message"}}`
    /// when the server wrote it).
    pub fn from_response(status: u16, body: &[u8]) -> Self {
        let parsed: Option<(String, String)> = serde_json::from_slice::<serde_json::Value>(body).ok().and_then(|v| {
            let error = v.get("error")?;
            let code = error.get("code")?.as_str()?.to_owned();
            let message = error.get("message").and_then(|m| m.as_str()).unwrap_or_default().to_owned();
            Some((code, message))
        });
        match parsed {
            Some((code, message)) => Self::Api { status, code, message },
            None => Self::Api {
                status,
                code: format!("HTTP_{status}"),
                message: String::from_utf8_lossy(body).trim().chars().take(2000).collect(),
            },
        }
    }

    /// The process exit code for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Timeout(_) => EXIT_TIMEOUT,
            Self::Usage(_) => EXIT_USAGE,
            Self::TurnEnded { stop_reason } => stop_exit_code(stop_reason),
            Self::Api { .. } | Self::Other(_) => EXIT_FAILURE,
        }
    }
}

/// The exit code for a turn's stop reason: 0 for `end_turn`, then one code each for
/// `cancelled` and `error`, and one for every other reason.
pub fn stop_exit_code(stop_reason: &str) -> u8 {
    match stop_reason {
        "end_turn" => 0,
        "cancelled" => EXIT_TURN_CANCELLED,
        "error" => EXIT_TURN_ERROR,
        _ => EXIT_TURN_OTHER,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_api_error_body() {
        let f = Failure::from_response(409, br#"{"error":{"code":"TURN_IN_PROGRESS","message":"busy"}}"#);
        assert_eq!(f.to_string(), "HTTP 409 TURN_IN_PROGRESS: busy");
        let f = Failure::from_response(502, b"Bad Gateway\n");
        assert_eq!(f.to_string(), "HTTP 502 HTTP_502: Bad Gateway");
        assert_eq!(f.exit_code(), EXIT_FAILURE);
        assert_eq!(Failure::Timeout("x".into()).exit_code(), EXIT_TIMEOUT);
    }

    #[test]
    fn stop_reasons_map_to_distinct_exit_codes() {
        assert_eq!(stop_exit_code("end_turn"), 0);
        let codes: Vec<u8> = ["cancelled", "error", "max_tokens", "refusal", "max_turn_requests", "something_new"]
            .iter()
            .map(|r| Failure::TurnEnded { stop_reason: (*r).to_owned() }.exit_code())
            .collect();
        assert_eq!(codes, [4, 5, 6, 6, 6, 6]);
        let used = [EXIT_FAILURE, EXIT_USAGE, EXIT_TIMEOUT];
        assert!(codes.iter().all(|c| !used.contains(c)));
    }
}
