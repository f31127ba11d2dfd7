//! Validated identifiers and values that cross the API edge: handlers and the store only see
//! these, never raw strings.

use serde::{Deserialize, Serialize};
use std::fmt;
use uuid::Uuid;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(value_type = uuid::Uuid))]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A fresh random id.
            pub fn new() -> Self {
                Self(Uuid::new_v4())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl std::str::FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }
    };
}

uuid_id!(
    /// An agent.
    AgentId
);
uuid_id!(
    /// A session (agenthold's, not the harness's ACP session id).
    SessionId
);
uuid_id!(
    /// A turn: one prompt and everything up to its `turn_end`.
    TurnId
);

/// A position in a session's event log: 0 is "before the first event".
pub type Seq = i64;

/// An agent's name: 1–64 characters of `a-z`, `0-9`, `-`, `_`, `.`, starting with a letter or digit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct AgentName(String);

impl AgentName {
    /// Checks a name.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let valid_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c);
        let starts_well = raw.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if raw.is_empty() || raw.len() > 64 || !starts_well || !raw.chars().all(valid_char) {
            return Err(format!(
                "agent name {raw:?} must be 1-64 characters of a-z, 0-9, '-', '_', '.', starting with a letter or digit"
            ));
        }
        Ok(Self(raw.to_owned()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_names_are_checked() {
        assert!(AgentName::parse("demo-1.a_b").is_ok());
        for bad in ["", "-x", "Upper", "a b", "ä", &"x".repeat(65)] {
            assert!(AgentName::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
