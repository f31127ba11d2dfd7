//! How replicas prove a call to each other: each request is signed — an HMAC-SHA256, under a key
//! derived from the master key every replica shares, of its time, a fresh random nonce, its path
//! and its body — and a receiver takes it only within [`WINDOW`] of its own clock and only once (a
//! replay of a captured request, even on the replicas' own network, is refused). The nonce makes
//! two calls alike in all else (the same command for the same agent within a second: a cancel
//! sent again, two prompts' nudges) two requests, each taken. Nothing secret travels: not the key,
//! not a reusable bearer credential.

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
/// The header with its nonce (32 lowercase hex digits, random per request).
pub const NONCE_HEADER: &str = "x-agenthold-replica-nonce";
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

    fn mac(&self, timestamp: i64, nonce: &str, path: &str, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0[..])
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        mac.update(format!("{timestamp}\n{nonce}\n{path}\n").as_bytes());
        mac.update(body);
        mac
    }

    /// Signs a request to `path` with `body` at `timestamp`, under a fresh nonce.
    pub fn sign(&self, timestamp: i64, path: &str, body: &[u8]) -> Signed {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let signature = hex::encode(self.mac(timestamp, &nonce, path, body).finalize().into_bytes());
        Signed { nonce, signature }
    }

    /// Checks a request at `now` (Unix seconds; `seen_at` the monotonic clock for the replay
    /// guard): why it is refused, if it is.
    pub fn verify(
        &self,
        headers: Headers<'_>,
        path: &str,
        body: &[u8],
        now: i64,
        seen_at: Instant,
    ) -> Result<(), &'static str> {
        let (Some(timestamp), Some(nonce), Some(signature)) = (headers.timestamp, headers.nonce, headers.signature)
        else {
            return Err("a replica's signed request is required");
        };
        let timestamp: i64 = timestamp.trim().parse().map_err(|_| "the request's time is unreadable")?;
        if now.abs_diff(timestamp) > WINDOW.as_secs() {
            return Err("the request's time is too far from this replica's clock");
        }
        if nonce.len() != 32 || !nonce.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err("the nonce is not 32 lowercase hex digits");
        }
        let expected = <[u8; 32]>::from_hex(signature.trim()).map_err(|_| "the signature is not 64 hex digits")?;
        self.mac(timestamp, nonce, path, body).verify_slice(&expected).map_err(|_| "the signature does not match")?;
        if !first_sight(&expected, seen_at) {
            return Err("the request was seen before (a replay)");
        }
        Ok(())
    }
}

/// A request's signature and the nonce signed with it (sent as [`NONCE_HEADER`] and
/// [`SIGNATURE_HEADER`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The nonce.
    pub nonce: String,
    /// The signature, lowercase hex.
    pub signature: String,
}

/// A received request's signing headers, as sent (each `None` when missing).
#[derive(Debug, Clone, Copy, Default)]
pub struct Headers<'a> {
    /// [`TIMESTAMP_HEADER`].
    pub timestamp: Option<&'a str>,
    /// [`NONCE_HEADER`].
    pub nonce: Option<&'a str>,
    /// [`SIGNATURE_HEADER`].
    pub signature: Option<&'a str>,
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

    fn headers<'a>(timestamp: &'a str, signed: &'a Signed) -> Headers<'a> {
        Headers { timestamp: Some(timestamp), nonce: Some(&signed.nonce), signature: Some(&signed.signature) }
    }

    #[test]
    fn a_signed_request_is_taken_once_within_its_window() {
        let (key, now, mono) = (key(1), 1_700_000_000_i64, Instant::now());
        let body = br#"{"command":"destroy"}"#;
        let path = "/internal/v1/agents/a/commands";
        let signed = key.sign(now, path, body);
        let at = now.to_string();
        assert_eq!(key.verify(headers(&at, &signed), path, body, now + 5, mono), Ok(()));
        assert_eq!(
            key.verify(headers(&at, &signed), path, body, now + 5, mono),
            Err("the request was seen before (a replay)")
        );
        let fresh = key.sign(now, "/p", b"x");
        for (ts, path, body, at) in
            [(now + 1, "/p", b"x".as_slice(), now), (now, "/q", b"x", now), (now, "/p", b"y", now)]
        {
            let ts = ts.to_string();
            assert_eq!(key.verify(headers(&ts, &fresh), path, body, at, mono), Err("the signature does not match"));
        }
        let other_nonce = Signed { nonce: "0".repeat(32), ..fresh.clone() };
        assert_eq!(key.verify(headers(&at, &other_nonce), "/p", b"x", now, mono), Err("the signature does not match"));
        assert_eq!(
            key.verify(headers(&at, &fresh), "/p", b"x", now + 31, mono),
            Err("the request's time is too far from this replica's clock")
        );
        let other = super::tests::key(2).sign(now, "/p", b"x");
        assert_eq!(key.verify(headers(&at, &other), "/p", b"x", now, mono), Err("the signature does not match"));
        let missing = Headers { nonce: None, ..headers(&at, &fresh) };
        assert_eq!(key.verify(missing, "/p", b"x", now, mono), Err("a replica's signed request is required"));
        let bad_nonce = Signed { nonce: "not hex".to_owned(), ..fresh.clone() };
        assert!(key.verify(headers(&at, &bad_nonce), "/p", b"x", now, mono).is_err());
        assert!(key.verify(headers("soon", &fresh), "/p", b"x", now, mono).is_err());
    }

    /// The same command for the same agent twice within a second (a cancel sent again, two
    /// prompts' nudges): two requests, each signed under its own nonce, both taken.
    #[test]
    fn two_calls_alike_in_the_same_second_are_both_taken() {
        let (key, now, mono) = (key(3), 1_700_000_100_i64, Instant::now());
        let (path, body) = ("/internal/v1/agents/b/commands", br#"{"command":"cancel"}"#.as_slice());
        let (first, second) = (key.sign(now, path, body), key.sign(now, path, body));
        assert_ne!(first, second);
        let at = now.to_string();
        assert_eq!(key.verify(headers(&at, &first), path, body, now, mono), Ok(()));
        assert_eq!(key.verify(headers(&at, &second), path, body, now, mono), Ok(()));
    }
}
