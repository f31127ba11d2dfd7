//! The client's one error type and how each failure maps to an exit code.

/// Exit code for an HTTP error answered by the server (and for local failures).
pub const EXIT_FAILURE: u8 = 1;
/// Exit code for bad usage (clap's own choice, kept for our checks too).
pub const EXIT_USAGE: u8 = 2;
/// Exit code when `watch` or `exec` hit their timeout.
pub const EXIT_TIMEOUT: u8 = 3;

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
            Self::Api { .. } | Self::Other(_) => EXIT_FAILURE,
        }
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
}
