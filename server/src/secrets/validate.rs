//! Checks at the API edge for everything secrets take in: a secret's name and value, the
//! environment variable a secret is attached under, and the rule that keeps credentials out of
//! an agent's plain `env` (names that look like credentials must use a secret). Error messages
//! never repeat a value.

use crate::secret::Secret;

/// Most bytes a secret value may have (an HTTP header value).
pub const MAX_VALUE_BYTES: usize = 8192;

/// Checks a value: 1–8192 bytes of printable ASCII (spaces inside allowed), no control
/// characters (CR, LF, tab, NUL, DEL, …), no surrounding spaces. The value becomes part of an
/// HTTP header, where a CR or LF would split the request.
pub fn value(raw: String) -> Result<Secret, &'static str> {
    let value = Secret::new(raw);
    let text = value.expose();
    if text.is_empty() {
        return Err("the value is empty");
    }
    if text.len() > MAX_VALUE_BYTES {
        return Err("the value is longer than 8192 bytes");
    }
    if text.chars().any(char::is_control) {
        return Err("the value contains a control character (CR, LF, tab, NUL, …); a value goes into an HTTP header");
    }
    if !text.is_ascii() {
        return Err("the value contains a non-ASCII character; a value goes into an HTTP header");
    }
    if text.starts_with(' ') || text.ends_with(' ') {
        return Err("the value starts or ends with a space");
    }
    Ok(value)
}

/// Checks a secret's name: 1–64 characters of letters, digits, `-`, `_`, `.`, starting with a
/// letter or digit.
pub fn secret_name(raw: &str) -> Result<String, String> {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    let starts_well = raw.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    if raw.is_empty() || raw.len() > 64 || !starts_well || !raw.chars().all(valid_char) {
        return Err(format!(
            "secret name {raw:?} must be 1-64 characters of letters, digits, '-', '_', '.', starting with a letter or digit"
        ));
    }
    Ok(raw.to_owned())
}

/// Variables the server, the proxy set-up or the system own: a secret cannot take their name.
const RESERVED_ENV: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "NODE_USE_ENV_PROXY",
    "NODE_EXTRA_CA_CERTS",
    "NODE_OPTIONS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "CODEX_CA_CERTIFICATE",
    "PATH",
    "HOME",
    "USER",
    "SHELL",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
];

/// Checks the variable a secret is attached under: `[A-Z_][A-Z0-9_]*`, at most 128 characters,
/// not `AGENTHOLD_*` and not a variable the proxy set-up or the system owns.
pub fn secret_env_name(raw: &str) -> Result<String, String> {
    let mut chars = raw.chars();
    let shaped = chars.next().is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && raw.len() <= 128;
    if !shaped {
        return Err(format!(
            "environment variable {raw:?}: a secret's variable is [A-Z_][A-Z0-9_]*, at most 128 characters"
        ));
    }
    if raw.starts_with("AGENTHOLD_") || RESERVED_ENV.contains(&raw) {
        return Err(format!("environment variable {raw}: reserved for the server, the proxy or the system"));
    }
    Ok(raw.to_owned())
}

/// Last words of a variable's name that mark a credential (`OPENAI_API_KEY`, `GITHUB_TOKEN`, …).
const CREDENTIAL_LAST_WORDS: &[&str] =
    &["KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS"];
/// Words that mark a credential anywhere in a name (`AWS_SECRET_ACCESS_KEY`, `DB_PASSWORD_RAW`).
const CREDENTIAL_ANY_WORDS: &[&str] = &["SECRET", "PASSWORD", "PASSWD"];

/// Whether a plain environment variable's name looks like it holds a credential: split at `_`
/// (case-insensitively), its last word is KEY, APIKEY, TOKEN, SECRET, PASSWORD, PASSWD,
/// PASSPHRASE, CREDENTIAL or CREDENTIALS, or any word is SECRET, PASSWORD or PASSWD, or the name
/// ends in PASSWORD (`PGPASSWORD`). Otherwise whole words only: `TOKENIZERS_PARALLELISM`,
/// `MAX_TOKENS` and `KEYBOARD_LAYOUT` are fine.
pub fn looks_like_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let words: Vec<&str> = upper.split('_').filter(|w| !w.is_empty()).collect();
    words.last().is_some_and(|last| CREDENTIAL_LAST_WORDS.contains(last))
        || words.iter().any(|w| CREDENTIAL_ANY_WORDS.contains(w))
        || upper.ends_with("PASSWORD")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_header_safe() {
        assert_eq!(value("sk-ant-api03-abc_DEF".into()).expect("valid").expose(), "sk-ant-api03-abc_DEF");
        assert!(value("a b".into()).is_ok());
        assert!(value("x".repeat(MAX_VALUE_BYTES)).is_ok());
        for bad in ["", "a\r\nb", "a\nb", "a\rb", "a\tb", "a\0b", "a\x7fb", " a", "a ", "ä", "a\u{85}b"] {
            assert!(value(bad.into()).is_err(), "{bad:?}");
        }
        assert!(value("x".repeat(MAX_VALUE_BYTES + 1)).is_err());
    }

    #[test]
    fn names_and_variables_are_checked() {
        assert!(secret_name("anthropic-prod.1").is_ok());
        for bad in ["", "-x", "a b", "ä", &"x".repeat(65)] {
            assert!(secret_name(bad).is_err(), "{bad:?}");
        }
        assert!(secret_env_name("ANTHROPIC_API_KEY").is_ok());
        assert!(secret_env_name("_X1").is_ok());
        for bad in ["", "1X", "lower", "A-B", "AGENTHOLD_TOKEN", "HTTPS_PROXY", "PATH", &"X".repeat(129)] {
            assert!(secret_env_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn credential_looking_names_are_recognised_by_whole_words() {
        for name in [
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "openrouter_api_key",
            "GITHUB_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "CLIENT_SECRET",
            "DB_PASSWORD",
            "PGPASSWORD_X_PASSWORD",
            "KEY",
            "TOKEN",
            "SERVICE_APIKEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "SECRET_SAUCE",
            "PGPASSWORD",
        ] {
            assert!(looks_like_credential(name), "{name}");
        }
        for name in [
            "FAKEAGENT_CAPS",
            "FAKEAGENT_HANG_ON",
            "TOKENIZERS_PARALLELISM",
            "MAX_TOKENS",
            "KEYBOARD_LAYOUT",
            "PUBLIC_KEY_PATH",
            "MONKEY",
            "RUST_LOG",
        ] {
            assert!(!looks_like_credential(name), "{name}");
        }
    }
}
