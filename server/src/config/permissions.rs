//! The permission posture agents run with when they name none (`AGENTHOLD_DEFAULT_POSTURE`):
//! the posture's names and aliases — `autonomous`, `guarded` or `approval` — and their parser.
//! Which posture is in force, and what it answers, is the permissions module's.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How far an agent may go on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Posture {
    /// Every request is approved (alias `auto-approve`); only the server's own rules can refuse.
    Autonomous,
    /// A policy (server rules, then the agent's rules and default) answers each request.
    Guarded,
    /// A person answers every request (alias `ask`).
    Approval,
}

/// The names accepted by [`Posture::parse`], canonical names first.
pub const ACCEPTED_POSTURES: &[&str] = &["autonomous", "guarded", "approval", "auto-approve", "ask"];

/// The longest part of a rejected value an error repeats back.
const MAX_ECHOED_CHARS: usize = 64;

/// Why a posture could not be parsed or resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PostureError {
    /// The value is not a posture name.
    #[error("unknown posture {value:?}; accepted: autonomous (or auto-approve), guarded, approval (or ask)")]
    Unknown {
        /// The rejected value (cut to a short prefix).
        value: String,
    },
    /// The resolved posture is `autonomous` and the server forbids it.
    #[error("this server forbids the autonomous posture; choose guarded or approval")]
    AutonomousForbidden,
}

impl PostureError {
    /// The stable machine-readable code for API answers.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unknown { .. } => "INVALID_POSTURE",
            Self::AutonomousForbidden => "AUTONOMOUS_FORBIDDEN",
        }
    }
}

impl Posture {
    /// Parses a posture name or alias (exact, lower case).
    pub fn parse(value: &str) -> Result<Self, PostureError> {
        match value {
            "autonomous" | "auto-approve" => Ok(Self::Autonomous),
            "guarded" => Ok(Self::Guarded),
            "approval" | "ask" => Ok(Self::Approval),
            other => Err(PostureError::Unknown { value: other.chars().take(MAX_ECHOED_CHARS).collect() }),
        }
    }

    /// The canonical name (what is stored and shown).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Autonomous => "autonomous",
            Self::Guarded => "guarded",
            Self::Approval => "approval",
        }
    }
}

/// The flag's parser: a posture name or alias.
pub(super) fn parse_posture(value: &str) -> Result<Posture, String> {
    Posture::parse(value).map_err(|e| e.to_string())
}

impl fmt::Display for Posture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Posture {
    type Err = PostureError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Self::parse(value)
    }
}

impl Serialize for Posture {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Posture {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Self::parse(&name).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_names_and_aliases() {
        assert_eq!(Posture::parse("autonomous"), Ok(Posture::Autonomous));
        assert_eq!(Posture::parse("auto-approve"), Ok(Posture::Autonomous));
        assert_eq!(Posture::parse("guarded"), Ok(Posture::Guarded));
        assert_eq!(Posture::parse("approval"), Ok(Posture::Approval));
        assert_eq!(Posture::parse("ask"), Ok(Posture::Approval));
        for name in ACCEPTED_POSTURES {
            assert!(Posture::parse(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn canonical_names_round_trip() {
        for posture in [Posture::Autonomous, Posture::Guarded, Posture::Approval] {
            assert_eq!(Posture::parse(posture.as_str()), Ok(posture));
            assert_eq!(posture.to_string(), posture.as_str());
            assert_eq!(serde_json::to_value(posture).expect("serializes"), json!(posture.as_str()));
        }
        let aliased: Posture = serde_json::from_value(json!("ask")).expect("alias deserializes");
        assert_eq!(aliased, Posture::Approval);
    }

    #[test]
    fn unknown_names_the_value_and_the_accepted_ones() {
        let error = Posture::parse("yolo").expect_err("unknown");
        assert_eq!(error.code(), "INVALID_POSTURE");
        let message = error.to_string();
        assert!(message.contains("\"yolo\""), "{message}");
        for name in ["autonomous", "auto-approve", "guarded", "approval", "ask"] {
            assert!(message.contains(name), "{message} lacks {name}");
        }
        assert!(Posture::parse("Guarded").is_err(), "names are exact");
        assert!(Posture::parse("").is_err());
        assert!(serde_json::from_value::<Posture>(json!("nope")).is_err());
    }

    #[test]
    fn unknown_value_is_echoed_only_in_part() {
        let huge = "x".repeat(100_000);
        let error = Posture::parse(&huge).expect_err("unknown");
        assert!(error.to_string().len() < 300);
    }
}
