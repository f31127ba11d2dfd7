//! Values that must never be printed: real credentials and proxy passwords. [`Secret`] redacts
//! itself in `Debug`/`Display`, is compared in constant time, and is only turned into bytes at
//! the one place a value is put into a header.

use std::fmt;

use serde::Deserialize;

/// A secret string. `Debug` and `Display` print `[redacted]`.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself. Callers put it into a header marked sensitive and nowhere else.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `other` equals this value, in time independent of where they differ.
    pub fn matches(&self, other: &[u8]) -> bool {
        constant_time_eq(self.0.as_bytes(), other)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
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
    fn debug_and_display_redact() {
        let s = Secret::new("sk-ant-real");
        assert_eq!(format!("{s:?} {s}"), "[redacted] [redacted]");
        assert!(s.matches(b"sk-ant-real"));
        assert!(!s.matches(b"sk-ant-reaL"));
        assert!(!s.matches(b"sk-ant"));
    }
}
