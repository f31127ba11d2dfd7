//! How replicas prove a call to each other: each request is signed — an HMAC-SHA256, under a key
//! derived from the master key every replica shares, of its time, path and body — and a receiver
//! takes it only within [`WINDOW`] of its own clock and only once (a replay of a captured request,
//! even on the replicas' own network, is refused). Nothing secret travels: not the key, not a
//! reusable bearer credential.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use hex::FromHex as _;
use hmac::{Hmac, Mac};
use parking_lot::Mutex;
use sha2::Sha256;

/// The header with the request's time (Unix seconds).
pub const TIMESTAMP_HEADER: &str = "x-agenthold-replica-timestamp";
/// The header with its signature (lowercase hex).
pub const SIGNATURE_HEADER: &str = "x-agenthold-replica-signature";
/// How far a request's time may be from the receiver's clock.
pub const WINDOW: Duration = Duration::from_secs(30);
/// Signatures remembered against replays, at most (past it the oldest are dropped; a flood of
/// valid requests needs the key).
const MAX_SEEN: usize = 100_000;

/// The key replicas sign their calls with.
#[derive(Clone)]
pub struct CallKey(zeroize::Zeroizing<[u8; 32]>);

impl CallKey {
    /// Derived from the master key for this purpose only.
    pub fn derive(master_key: &crate::secrets::master_key::MasterKey) -> Self {
        Self(master_key.derive(b"agenthold replica calls v2"))
    }

    fn mac(&self, timestamp: i64, path: &str, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0[..])
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        mac.update(format!("{timestamp}\n{path}\n").as_bytes());
        mac.update(body);
        mac
    }

    /// The signature of a request to `path` with `body` at `timestamp`.
    pub fn sign(&self, timestamp: i64, path: &str, body: &[u8]) -> String {
        hex::encode(self.mac(timestamp, path, body).finalize().into_bytes())
    }

    /// Checks a request at `now` (Unix seconds; `seen_at` the monotonic clock for the replay
    /// guard): why it is refused, if it is.
    pub fn verify(
        &self,
        timestamp: Option<&str>,
        signature: Option<&str>,
        path: &str,
        body: &[u8],
        now: i64,
        seen_at: Instant,
    ) -> Result<(), &'static str> {
        let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
            return Err("a replica's signed request is required");
        };
        let timestamp: i64 = timestamp.trim().parse().map_err(|_| "the request's time is unreadable")?;
        if now.abs_diff(timestamp) > WINDOW.as_secs() {
            return Err("the request's time is too far from this replica's clock");
        }
        let expected = <[u8; 32]>::from_hex(signature.trim()).map_err(|_| "the signature is not 64 hex digits")?;
        self.mac(timestamp, path, body).verify_slice(&expected).map_err(|_| "the signature does not match")?;
        if !first_sight(&expected, seen_at) {
            return Err("the request was seen before (a replay)");
        }
        Ok(())
    }
}

static SEEN: LazyLock<Mutex<HashMap<Vec<u8>, Instant>>> = LazyLock::new(Mutex::default);

/// Whether `signature` is new within the window (then remembered).
fn first_sight(signature: &[u8], now: Instant) -> bool {
    let mut seen = SEEN.lock();
    // Twice the window: a request seen near one end of it cannot come back near the other.
    seen.retain(|_, at| now.duration_since(*at) < WINDOW * 2);
    if seen.len() >= MAX_SEEN
        && let Some(oldest) = seen.iter().min_by_key(|(_, at)| **at).map(|(key, _)| key.clone())
    {
        seen.remove(&oldest);
    }
    seen.insert(signature.to_vec(), now).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> CallKey {
        CallKey(zeroize::Zeroizing::new([byte; 32]))
    }

    #[test]
    fn a_signed_request_is_taken_once_within_its_window() {
        let (key, now, mono) = (key(1), 1_700_000_000_i64, Instant::now());
        let body = br#"{"command":"destroy"}"#;
        let signature = key.sign(now, "/internal/v1/agents/a/commands", body);
        let check = |ts: i64, sig: &str, path: &str, body: &[u8], at: i64| {
            key.verify(Some(&ts.to_string()), Some(sig), path, body, at, mono)
        };
        assert_eq!(check(now, &signature, "/internal/v1/agents/a/commands", body, now + 5), Ok(()));
        assert_eq!(
            check(now, &signature, "/internal/v1/agents/a/commands", body, now + 5),
            Err("the request was seen before (a replay)")
        );
        let fresh = key.sign(now, "/p", b"x");
        for (ts, path, body, at) in
            [(now + 1, "/p", b"x".as_slice(), now), (now, "/q", b"x", now), (now, "/p", b"y", now)]
        {
            assert_eq!(check(ts, &fresh, path, body, at), Err("the signature does not match"), "{ts} {path}");
        }
        assert_eq!(
            check(now, &fresh, "/p", b"x", now + 31),
            Err("the request's time is too far from this replica's clock")
        );
        let other = super::tests::key(2).sign(now, "/p", b"x");
        assert_eq!(check(now, &other, "/p", b"x", now), Err("the signature does not match"), "another key");
        assert!(key.verify(None, Some(&fresh), "/p", b"x", now, mono).is_err());
        assert!(key.verify(Some("soon"), Some(&fresh), "/p", b"x", now, mono).is_err());
    }
}
