//! [`Secret`]: the one type that holds a secret value in every agenthold crate — a token, a
//! password, a provider credential, a database URL with a password. Built on `secrecy`: the
//! bytes are wiped when dropped; `Debug` and `Display` never show the value; equality runs in
//! time independent of where two values differ; the value is read only with [`Secret::expose`],
//! where it goes on the wire, into a header marked sensitive, or into a file meant to hold it.

use std::fmt;
use std::str::FromStr;

use secrecy::{ExposeSecret, SecretString};

/// A secret string.
#[derive(Clone)]
pub struct Secret(SecretString);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(SecretString::from(value.into()))
    }

    /// The value itself; call only where it is used, never to log it.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.expose().is_empty()
    }

    /// Whether `other` equals this value, in time independent of where they differ (the length
    /// is not hidden).
    pub fn matches(&self, other: &[u8]) -> bool {
        constant_time_eq(self.expose().as_bytes(), other)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([REDACTED])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[REDACTED]")
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.matches(other.expose().as_bytes())
    }
}

impl Eq for Secret {}

impl FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self::new(s))
    }
}

impl<'de> serde::Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::new)
    }
}

/// Compares two byte strings without an early exit on the first difference (the length is not
/// hidden).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints_the_value_and_compares_whole_values() {
        let secret = Secret::new("sk-ant-real");
        assert_eq!(format!("{secret:?} {secret}"), "Secret([REDACTED]) [REDACTED]");
        assert!(!format!("{:?}", Some(secret.clone())).contains("real"));
        assert_eq!(secret.expose(), "sk-ant-real");
        assert!(secret.matches(b"sk-ant-real"));
        assert!(!secret.matches(b"sk-ant-reaL"));
        assert!(!secret.matches(b"sk-ant"));
        assert_eq!(secret, "sk-ant-real".parse::<Secret>().unwrap_or_else(|e| match e {}));
        let parsed: Secret = serde_json::from_str("\"from-json\"").expect("a JSON string");
        assert_eq!(parsed.expose(), "from-json");
    }
}
