//! Webhook signatures, in two schemes, both HMAC-SHA256 under the webhook's secret and compared
//! in constant time:
//!
//! - **Standard Webhooks** (standardwebhooks.com): `webhook-id`, `webhook-timestamp` (Unix
//!   seconds) and `webhook-signature: v1,<base64>` (space-separated, any may match), the MAC of
//!   `{id}.{timestamp}.{body}`. The timestamp must be within [`TOLERANCE`] of the server's clock,
//!   so a captured request cannot be replayed later, nor under another id.
//! - **GitHub's** (also Gitea's, Forgejo's and many others'): `X-Hub-Signature-256:
//!   sha256=<hex>`, the MAC of the raw body alone. It signs no time and no id, so the caller
//!   guards replays by remembering the signatures it accepted ([`replay_keys`]).

use hex::FromHex as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header that carries GitHub's signature.
pub const HEADER: &str = "x-hub-signature-256";
/// The Standard Webhooks headers: the message id, its time, its signatures.
pub const STANDARD_ID: &str = "webhook-id";
/// See [`STANDARD_ID`].
pub const STANDARD_TIMESTAMP: &str = "webhook-timestamp";
/// See [`STANDARD_ID`].
pub const STANDARD_SIGNATURE: &str = "webhook-signature";
/// How far a Standard Webhooks timestamp may be from the server's clock (either way).
pub const TOLERANCE: std::time::Duration = std::time::Duration::from_secs(300);
/// The longest Standard Webhooks signature header read.
const MAX_STANDARD_HEADER: usize = 4096;

/// Why a signature was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No `X-Hub-Signature-256` header.
    #[error("the request is not signed (X-Hub-Signature-256 is missing)")]
    Missing,
    /// Not `sha256=` followed by 64 hex digits.
    #[error("X-Hub-Signature-256 is not \"sha256=\" followed by 64 hex digits")]
    Malformed,
    /// Well-formed, but not the body's signature under this webhook's secret.
    #[error("the signature does not match the body")]
    Wrong,
    /// Standard Webhooks: the id or timestamp header is missing or unreadable.
    #[error("webhook-signature needs webhook-id and webhook-timestamp (Unix seconds)")]
    Incomplete,
    /// Standard Webhooks: the timestamp is too far from the server's clock (a replay, or a
    /// sender's clock off by more than five minutes).
    #[error("webhook-timestamp is more than five minutes from the server's time")]
    Stale,
}

/// A Standard Webhooks delivery's headers.
#[derive(Debug, Clone, Copy)]
pub struct Standard<'a> {
    /// `webhook-id`.
    pub id: Option<&'a str>,
    /// `webhook-timestamp`.
    pub timestamp: Option<&'a str>,
    /// `webhook-signature`.
    pub signature: &'a str,
}

/// The `webhook-signature` value for `body` sent as message `id` at `timestamp` (`v1,<base64>`).
pub fn sign_standard(secret: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    use base64::Engine;
    let mut mac = mac(secret);
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()))
}

/// Checks a Standard Webhooks delivery at `now` (Unix seconds); its message id when it holds.
pub fn verify_standard<'a>(
    secret: &[u8],
    headers: Standard<'a>,
    body: &[u8],
    now: i64,
) -> Result<&'a str, SignatureError> {
    use base64::Engine;
    let id = headers.id.filter(|id| !id.trim().is_empty()).ok_or(SignatureError::Incomplete)?;
    let timestamp: i64 = headers.timestamp.and_then(|t| t.trim().parse().ok()).ok_or(SignatureError::Incomplete)?;
    if headers.signature.len() > MAX_STANDARD_HEADER {
        return Err(SignatureError::Malformed);
    }
    let tolerance = i64::try_from(TOLERANCE.as_secs()).unwrap_or(i64::MAX);
    if now.abs_diff(timestamp) > tolerance.unsigned_abs() {
        return Err(SignatureError::Stale);
    }
    let mut any = false;
    for candidate in headers.signature.split_whitespace() {
        let Some(encoded) = candidate.strip_prefix("v1,") else { continue };
        let Ok(expected) = base64::engine::general_purpose::STANDARD.decode(encoded) else { continue };
        any = true;
        let mut mac = mac(secret);
        mac.update(format!("{id}.{timestamp}.").as_bytes());
        mac.update(body);
        if mac.verify_slice(&expected).is_ok() {
            return Ok(id);
        }
    }
    Err(if any { SignatureError::Wrong } else { SignatureError::Malformed })
}

/// What an accepted delivery is remembered by, so that it is accepted once: its delivery id
/// and, for GitHub's scheme (which signs no id and no time), its signature — a replay of the same
/// body under a new delivery id is refused too. Hashed (32 bytes each), never the body.
pub fn replay_keys(delivery_id: &str, github_signature: Option<&str>) -> Vec<Vec<u8>> {
    use sha2::Digest;
    let mut keys = vec![sha2::Sha256::digest(format!("id:{delivery_id}").as_bytes()).to_vec()];
    if let Some(signature) = github_signature {
        let normalized = signature.trim().to_ascii_lowercase();
        keys.push(sha2::Sha256::digest(format!("sig:{normalized}").as_bytes()).to_vec());
    }
    keys
}

fn mac(secret: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    <Hmac<Sha256> as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!("HMAC accepts any key length"))
}

/// The header value for `body` under `secret` (`sha256=<hex>`).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = mac(secret);
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Checks the header value (`None`: absent) against `body` under `secret`.
pub fn verify(secret: &[u8], body: &[u8], header: Option<&str>) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let digits = header.trim().strip_prefix("sha256=").ok_or(SignatureError::Malformed)?;
    let expected = <[u8; 32]>::from_hex(digits).map_err(|_| SignatureError::Malformed)?;
    let mut mac = mac(secret);
    mac.update(body);
    mac.verify_slice(&expected).map_err(|_| SignatureError::Wrong)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_s_documented_example() {
        // docs.github.com, "Validating webhook deliveries": secret "It's a Secret to Everybody",
        // payload "Hello, World!".
        let header = sign(b"It's a Secret to Everybody", b"Hello, World!");
        assert_eq!(header, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17");
        assert_eq!(verify(b"It's a Secret to Everybody", b"Hello, World!", Some(&header)), Ok(()));
        assert_eq!(
            verify(b"It's a Secret to Everybody", b"Hello, World!", Some(&header.to_uppercase())),
            Err(SignatureError::Malformed),
            "the prefix is lowercase"
        );
    }

    #[test]
    fn standard_webhooks_sign_id_time_and_body_and_refuse_stale_times() {
        let (secret, body, now) = (b"whsec-key".as_slice(), b"{\"a\":1}".as_slice(), 1_700_000_000_i64);
        let signature = sign_standard(secret, "msg_1", now, body);
        let headers = |id, ts: String, sig| Standard {
            id: Some(id),
            timestamp: Some(Box::leak(ts.into_boxed_str())),
            signature: sig,
        };
        assert_eq!(verify_standard(secret, headers("msg_1", now.to_string(), &signature), body, now + 10), Ok("msg_1"));
        // Any of several signatures (a rotated key beside the new one).
        let several = format!("v1,AAAA {signature}");
        assert_eq!(verify_standard(secret, headers("msg_1", now.to_string(), &several), body, now), Ok("msg_1"));
        // Another id, time or body under the same signature: refused.
        for (id, ts, body) in [("msg_2", now, body), ("msg_1", now + 1, body), ("msg_1", now, b"{}".as_slice())] {
            assert_eq!(
                verify_standard(secret, headers(id, ts.to_string(), &signature), body, now),
                Err(SignatureError::Wrong),
                "{id} {ts}"
            );
        }
        // A captured request replayed six minutes later: refused for its time.
        assert_eq!(
            verify_standard(secret, headers("msg_1", now.to_string(), &signature), body, now + 360),
            Err(SignatureError::Stale)
        );
        let missing = Standard { id: None, timestamp: Some("1"), signature: &signature };
        assert_eq!(verify_standard(secret, missing, body, now), Err(SignatureError::Incomplete));
        assert_eq!(
            verify_standard(secret, headers("msg_1", "soon".into(), &signature), body, now),
            Err(SignatureError::Incomplete)
        );
        assert_eq!(
            verify_standard(secret, headers("msg_1", now.to_string(), "v2,abc"), body, now),
            Err(SignatureError::Malformed)
        );
        // The spec's example (standardwebhooks.com): key = base64-decoded "whsec_" secret.
        use base64::Engine;
        let key = base64::engine::general_purpose::STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("b64");
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign_standard(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn replays_are_keyed_by_id_and_by_github_signature() {
        let a = replay_keys("d-1", Some("sha256=ABC"));
        assert_eq!(a.len(), 2);
        assert_eq!(a[1], replay_keys("d-2", Some("sha256=abc"))[1], "the same signature under another id");
        assert_ne!(a[0], replay_keys("d-2", None)[0]);
        assert_eq!(replay_keys("d-1", None), vec![a[0].clone()]);
    }

    #[test]
    fn tampered_unsigned_and_malformed_are_refused() {
        let header = sign(b"s3cret", b"{\"a\":1}");
        assert_eq!(verify(b"s3cret", b"{\"a\":2}", Some(&header)), Err(SignatureError::Wrong));
        assert_eq!(verify(b"other", b"{\"a\":1}", Some(&header)), Err(SignatureError::Wrong));
        assert_eq!(verify(b"s3cret", b"{\"a\":1}", None), Err(SignatureError::Missing));
        assert_eq!(verify(b"s3cret", b"x", Some("sha1=abc")), Err(SignatureError::Malformed));
        assert_eq!(verify(b"s3cret", b"x", Some("sha256=zz")), Err(SignatureError::Malformed));
        let non_ascii = format!("sha256={}é", "0".repeat(62));
        assert_eq!(verify(b"s3cret", b"x", Some(&non_ascii)), Err(SignatureError::Malformed));
    }
}
