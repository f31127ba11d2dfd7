//! Portable effects — `read`, `write`, `exec`, `network` — and how an ACP tool call's `kind`
//! maps to one (ARCHITECTURE §7), so one policy holds whichever harness an agent runs.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a tool call does, as a policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Reads or searches files.
    Read,
    /// Edits, deletes or moves files.
    Write,
    /// Runs a command.
    Exec,
    /// Reaches the network.
    Network,
}

impl Effect {
    /// The effect's name in rules and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Exec => "exec",
            Self::Network => "network",
        }
    }

    /// The effect of an ACP tool `kind`: `read`/`search` → read; `edit`/`delete`/`move` → write;
    /// `execute` → exec; `fetch` → network. `think`, `switch_mode`, `other`, anything unknown
    /// and a missing kind have no single honest effect: `None`, which only a policy's default
    /// answers. Surrounding blanks and letter case are ignored.
    pub fn of_kind(kind: Option<&str>) -> Option<Self> {
        let kind = kind?.trim();
        if kind.len() > 32 {
            return None;
        }
        match kind.to_ascii_lowercase().as_str() {
            "read" | "search" => Some(Self::Read),
            "edit" | "delete" | "move" => Some(Self::Write),
            "execute" => Some(Self::Exec),
            "fetch" => Some(Self::Network),
            _ => None,
        }
    }
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_acp_kind_maps_as_the_architecture_says() {
        let table = [
            ("read", Some(Effect::Read)),
            ("search", Some(Effect::Read)),
            ("edit", Some(Effect::Write)),
            ("delete", Some(Effect::Write)),
            ("move", Some(Effect::Write)),
            ("execute", Some(Effect::Exec)),
            ("fetch", Some(Effect::Network)),
            ("think", None),
            ("switch_mode", None),
            ("other", None),
        ];
        for (kind, effect) in table {
            assert_eq!(Effect::of_kind(Some(kind)), effect, "{kind}");
        }
    }

    #[test]
    fn unknown_or_missing_kind_has_no_effect() {
        assert_eq!(Effect::of_kind(None), None);
        assert_eq!(Effect::of_kind(Some("")), None);
        assert_eq!(Effect::of_kind(Some("exec")), None, "the ACP name is execute");
        assert_eq!(Effect::of_kind(Some("teleport")), None);
        assert_eq!(Effect::of_kind(Some(&"edit".repeat(10_000))), None);
    }

    #[test]
    fn kind_ignores_case_and_blanks() {
        assert_eq!(Effect::of_kind(Some(" Edit ")), Some(Effect::Write));
        assert_eq!(Effect::of_kind(Some("EXECUTE")), Some(Effect::Exec));
    }

    #[test]
    fn names_round_trip_through_json() {
        for effect in [Effect::Read, Effect::Write, Effect::Exec, Effect::Network] {
            let value = serde_json::to_value(effect).expect("serializes");
            assert_eq!(value, serde_json::json!(effect.as_str()));
            assert_eq!(serde_json::from_value::<Effect>(value).expect("parses"), effect);
        }
    }
}
