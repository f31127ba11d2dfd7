//! [`Secret`]: the one type that holds a secret value in the client — an API token (the
//! [`Token`] alias), a password, a browser session cookie — built on `secrecy`. Its `Debug` never
//! shows the value, the memory is wiped on drop, and the value is read only where it goes on the
//! wire or into the login file.

use std::fmt;

use secrecy::{ExposeSecret, SecretString};

/// A secret string. `Debug` prints `Secret([REDACTED])`; the bytes are zeroed when dropped.
#[derive(Clone)]
pub struct Secret(SecretString);

/// An API token, sent as `Authorization: Bearer`.
pub type Token = Secret;

impl Secret {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> Self {
        Self(SecretString::from(token.into()))
    }

    /// Parses a token from the command line or a file: surrounding whitespace (a newline from
    /// `echo`) is dropped; an empty token is refused.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            return Err("the token is empty".to_owned());
        }
        if trimmed.chars().any(|c| c.is_control() || c == ' ') {
            return Err("the token holds spaces or control characters".to_owned());
        }
        Ok(Self::new(trimmed))
    }

    /// Parses a `--token` / `AGENTHOLD_TOKEN` value like [`parse`](Self::parse), except that an
    /// empty one stands for "no token" (an empty environment variable) and is filtered out later.
    pub fn from_arg(raw: &str) -> Result<Self, String> {
        if raw.trim().is_empty() { Ok(Self::new(String::new())) } else { Self::parse(raw) }
    }

    /// Whether the value is empty (see [`from_arg`](Self::from_arg)).
    pub fn is_empty(&self) -> bool {
        self.expose().is_empty()
    }

    /// The value itself: only for the `Authorization` header and the login file.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([REDACTED])")
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.expose() == other.expose()
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests fail loudly on unexpected values")]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let token = Token::parse(" ah_secret-value\n").unwrap();
        assert_eq!(token.expose(), "ah_secret-value");
        assert_eq!(format!("{token:?}"), "Secret([REDACTED])");
        assert!(!format!("{:?}", Some(token.clone())).contains("secret"));
        assert!(Token::parse(" \n").is_err());
        assert!(Token::parse("a b").is_err());
    }
}
