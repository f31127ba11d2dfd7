//! Webhook signatures, GitHub's convention (also Gitea's, Forgejo's and many others'): the
//! header `X-Hub-Signature-256: sha256=<hex>`, the lowercase hex HMAC-SHA256 of the raw body
//! under the webhook's secret. Compared in constant time.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header that carries the signature.
pub const HEADER: &str = "x-hub-signature-256";

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
}

fn mac(secret: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    <Hmac<Sha256> as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!("HMAC accepts any key length"))
}

/// The header value for `body` under `secret` (`sha256=<hex>`).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = mac(secret);
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// Checks the header value (`None`: absent) against `body` under `secret`.
pub fn verify(secret: &[u8], body: &[u8], header: Option<&str>) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let hex = header.trim().strip_prefix("sha256=").ok_or(SignatureError::Malformed)?;
    let expected = decode_hex(hex).ok_or(SignatureError::Malformed)?;
    let mut mac = mac(secret);
    mac.update(body);
    mac.verify_slice(&expected).map_err(|_| SignatureError::Wrong)
}

/// 64 hex digits (either case) as 32 bytes.
fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok()).collect()
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
