//! The per-agent MCP credential: `ahmcp1.<agent id>.<hex HMAC>`, the HMAC-SHA256 of the agent id
//! under a key derived from the master key for this purpose only. Nothing is stored: the server
//! recomputes it to check it (in constant time), it changes when the master key does, and it is
//! never given to a sandbox that uses the egress proxy — those get [`placeholder`], which the
//! proxy swaps for the value. `Debug` of the value redacts (it is a [`Secret`]).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use uuid::Uuid;

use crate::ids::AgentId;
use crate::secret::Secret;
use crate::secrets::master_key::MasterKey;

const PREFIX: &str = "ahmcp1";
const PURPOSE: &[u8] = b"agenthold mcp credential v1";

fn mac(key: &MasterKey, agent: AgentId) -> Hmac<Sha256> {
    let derived = key.derive(PURPOSE);
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&derived[..])
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    mac.update(agent.0.as_bytes());
    mac
}

/// The agent's credential.
pub fn token(key: &MasterKey, agent: AgentId) -> Secret {
    let digest = mac(key, agent).finalize().into_bytes();
    Secret::new(format!("{PREFIX}.{}.{}", agent.0.simple(), hex::encode(digest)))
}

/// What a proxied sandbox holds instead: names the agent, proves nothing.
pub fn placeholder(agent: AgentId) -> String {
    format!("agenthold-mcp-placeholder-{}", agent.0.simple())
}

/// The agent an `Authorization` header's value proves, if it proves one.
pub fn verify(key: &MasterKey, header: &str) -> Option<AgentId> {
    let token = header.strip_prefix("Bearer ").or_else(|| header.strip_prefix("bearer "))?.trim();
    let mut parts = token.split('.');
    let (prefix, id, hex) = (parts.next()?, parts.next()?, parts.next()?);
    if prefix != PREFIX || parts.next().is_some() || id.len() != 32 || hex.len() != 64 {
        return None;
    }
    let agent = AgentId(Uuid::try_parse(id).ok()?);
    let sent: Option<Vec<u8>> =
        (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect();
    mac(key, agent).verify_slice(&sent?).ok()?;
    Some(agent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_proves_its_agent_under_its_key_only() {
        let key = MasterKey::generate();
        let agent = AgentId::new();
        let token = token(&key, agent);
        assert_eq!(verify(&key, &format!("Bearer {}", token.expose())), Some(agent));
        assert_eq!(verify(&MasterKey::generate(), &format!("Bearer {}", token.expose())), None, "another key");
        assert_eq!(verify(&key, token.expose()), None, "not a bearer header");
        let other = AgentId::new();
        let forged = token.expose().replace(&agent.0.simple().to_string(), &other.0.simple().to_string());
        assert_eq!(verify(&key, &format!("Bearer {forged}")), None, "another agent's id with this MAC");
        for bad in [
            "Bearer ",
            "Bearer ahmcp1",
            "Bearer ahmcp1..",
            "Bearer ahmcp1.zz.zz",
            "Bearer ahmcp2.00000000000000000000000000000000.00",
            "Bearer é",
        ] {
            assert_eq!(verify(&key, bad), None, "{bad}");
        }
        assert_eq!(verify(&key, &format!("Bearer {}", placeholder(agent))), None, "the placeholder proves nothing");
        assert!(!format!("{token:?}").contains(&token.expose()[20..]), "Debug redacts");
    }
}
