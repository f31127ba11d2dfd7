//! The permission posture agents run with when they name none (`AGENTHOLD_DEFAULT_POSTURE`):
//! the flag's parser. The posture's type, names and aliases are the core's
//! (`agenthold_core::permissions`); which posture is in force, and what it answers, is the
//! permissions module's.

pub use agenthold_core::permissions::Posture;

/// The flag's parser: a posture name or alias.
pub(super) fn parse_posture(value: &str) -> Result<Posture, String> {
    Posture::parse(value).map_err(|e| e.to_string())
}
