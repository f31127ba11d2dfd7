//! [`Secret`]: the workspace's one secret type ([`agenthold_secret`], built on `secrecy`) — here
//! an API token (the [`Token`] alias), a password, a browser session cookie. Its `Debug` never
//! shows the value, the memory is wiped on drop, and the value is read only where it goes on the
//! wire or into the login file. Tokens from the command line are checked by [`parse_token`].

pub use agenthold_secret::Secret;

/// An API token, sent as `Authorization: Bearer`.
pub type Token = Secret;

/// Parses a token from the command line or a file: surrounding whitespace (a newline from
/// `echo`) is dropped; an empty token is refused.
pub fn parse_token(raw: &str) -> Result<Token, String> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err("the token is empty".to_owned());
    }
    if trimmed.chars().any(|c| c.is_control() || c == ' ') {
        return Err("the token holds spaces or control characters".to_owned());
    }
    Ok(Secret::new(trimmed))
}

/// Parses a `--token` / `AGENTHOLD_TOKEN` value like [`parse_token`], except that an empty one
/// stands for "no token" (an empty environment variable) and is filtered out later.
pub fn token_from_arg(raw: &str) -> Result<Token, String> {
    if raw.trim().is_empty() { Ok(Secret::new(String::new())) } else { parse_token(raw) }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests fail loudly on unexpected values")]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let token = parse_token(" ah_secret-value\n").unwrap();
        assert_eq!(token.expose(), "ah_secret-value");
        assert_eq!(format!("{token:?}"), "Secret([REDACTED])");
        assert!(!format!("{:?}", Some(token.clone())).contains("secret"));
        assert!(parse_token(" \n").is_err());
        assert!(parse_token("a b").is_err());
    }
}
