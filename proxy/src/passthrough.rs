//! The check on a pass-through tunnel's first bytes, before any of them reaches the upstream: a
//! TLS ClientHello must name the CONNECT host in its SNI (not another site on the same CDN, not
//! nothing) and must not carry Encrypted Client Hello (which would hide the name). On port 443
//! the bytes must be TLS; on other ports a client that does not start with TLS is passed as is.
//! Bounded by [`MAX_HELLO_BYTES`] and [`PEEK_TIMEOUT`]; the bytes read are handed back to be
//! forwarded unchanged.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::clienthello::{self, HelloError, MAX_HELLO_BYTES};
use crate::host::{Host, Target, parse_host};

/// How long a client has to send its whole ClientHello: on port 443 from the moment the tunnel
/// is open, on other ports from its first byte.
pub const PEEK_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a pass-through tunnel was closed before anything was forwarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The SNI names another host.
    SniMismatch,
    /// No SNI for a named host (or an SNI for an address target).
    SniMissing,
    /// Encrypted Client Hello.
    Ech,
    /// Not TLS on port 443.
    NotTls,
    /// Not a well-formed ClientHello, too large, or too slow.
    BadHello,
}

impl Refusal {
    /// The decision logged.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::SniMismatch => "sni-mismatch",
            Refusal::SniMissing => "sni-missing",
            Refusal::Ech => "ech-refused",
            Refusal::NotTls => "not-tls",
            Refusal::BadHello => "bad-client-hello",
        }
    }
}

/// Whether a parsed ClientHello fits a tunnel to `target`.
pub fn judge(hello: &clienthello::ClientHello, target: &Target) -> Result<(), Refusal> {
    if hello.ech {
        return Err(Refusal::Ech);
    }
    match (&target.host, &hello.sni) {
        (Host::Name(name), Some(sni)) => match parse_host(sni) {
            Ok(Host::Name(sni)) if &sni == name => Ok(()),
            _ => Err(Refusal::SniMismatch),
        },
        (Host::Name(_), None) => Err(Refusal::SniMissing),
        // An address target: a name in the SNI would pick a site at that address (a CDN's).
        (Host::Ip(_), Some(_)) => Err(Refusal::SniMismatch),
        (Host::Ip(_), None) => Ok(()),
    }
}

/// Reads the client's first bytes from `client` and checks them for a tunnel to `target`.
/// Returns the bytes read (to forward first), or why the tunnel is refused.
pub async fn inspect<R: AsyncRead + Unpin>(client: &mut R, target: &Target) -> Result<Vec<u8>, Refusal> {
    inspect_within(client, target, PEEK_TIMEOUT).await
}

/// [`inspect`] with another time bound.
pub async fn inspect_within<R: AsyncRead + Unpin>(
    client: &mut R,
    target: &Target,
    within: Duration,
) -> Result<Vec<u8>, Refusal> {
    let require_tls = target.port == 443;
    let mut buf = Vec::with_capacity(4096);
    // Port 443: TLS clients speak first, so the whole hello is bounded in time. Other ports may
    // carry protocols where the server speaks first: the first byte may take as long as it
    // takes (the tunnel's idle timeout still applies).
    let first = async { (&mut *client).take(4096).read_buf(&mut buf).await.map_err(|_| Refusal::BadHello) };
    let deadline = require_tls.then(|| tokio::time::Instant::now() + within);
    let n = match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, first).await.map_err(|_| Refusal::BadHello)??,
        None => first.await?,
    };
    if n == 0 {
        return Ok(buf);
    }
    if !clienthello::looks_like_tls(&buf) {
        return if require_tls { Err(Refusal::NotTls) } else { Ok(buf) };
    }
    let rest = async {
        loop {
            match clienthello::parse(&buf) {
                Ok(hello) => return judge(&hello, target),
                Err(HelloError::Incomplete) => {}
                // A first byte like TLS's, but not TLS: off port 443 it passes like any protocol.
                Err(HelloError::NotTls) => return if require_tls { Err(Refusal::NotTls) } else { Ok(()) },
                Err(HelloError::Malformed(_) | HelloError::TooLarge) => return Err(Refusal::BadHello),
            }
            let room = MAX_HELLO_BYTES.saturating_sub(buf.len()).min(4096);
            if room == 0 {
                return Err(Refusal::BadHello);
            }
            let room = u64::try_from(room).unwrap_or(4096);
            match (&mut *client).take(room).read_buf(&mut buf).await {
                Ok(0) | Err(_) => return Err(Refusal::BadHello),
                Ok(_) => {}
            }
        }
    };
    let deadline = deadline.unwrap_or_else(|| tokio::time::Instant::now() + within);
    tokio::time::timeout_at(deadline, rest).await.map_err(|_| Refusal::BadHello)??;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clienthello::tests::{hello_bytes, sni};
    use crate::host::parse_authority;

    fn target(s: &str) -> Target {
        parse_authority(s, None).expect("test target")
    }

    async fn inspect_bytes(bytes: &[u8], to: &str) -> Result<Vec<u8>, Refusal> {
        let mut reader = bytes;
        inspect(&mut reader, &target(to)).await
    }

    #[tokio::test]
    async fn the_sni_must_name_the_connect_host() {
        let good = hello_bytes(&[(0, sni(&[(0, "Registry.NPMjs.org.")]))], 100);
        assert_eq!(inspect_bytes(&good, "registry.npmjs.org:443").await, Ok(good.clone()), "bytes handed back whole");
        let other = hello_bytes(&[(0, sni(&[(0, "www.cloudflare.com")]))], 16_384);
        assert_eq!(inspect_bytes(&other, "registry.npmjs.org:443").await, Err(Refusal::SniMismatch));
        let none = hello_bytes(&[(0x000a, vec![0, 2, 0, 29])], 16_384);
        assert_eq!(inspect_bytes(&none, "registry.npmjs.org:443").await, Err(Refusal::SniMissing));
        assert_eq!(inspect_bytes(&none, "192.0.1.7:443").await, Ok(none.clone()), "an address target: no name");
        assert_eq!(inspect_bytes(&good, "192.0.1.7:443").await, Err(Refusal::SniMismatch));
        let ech =
            hello_bytes(&[(0, sni(&[(0, "registry.npmjs.org")])), (crate::clienthello::EXT_ECH, vec![0; 8])], 16_384);
        assert_eq!(inspect_bytes(&ech, "registry.npmjs.org:443").await, Err(Refusal::Ech));
        let bad_name = hello_bytes(&[(0, sni(&[(0, "registry.npmjs.org..")]))], 16_384);
        assert_eq!(inspect_bytes(&bad_name, "registry.npmjs.org:443").await, Err(Refusal::SniMismatch));
    }

    #[tokio::test]
    async fn other_protocols_only_off_port_443() {
        let http = b"GET / HTTP/1.1\r\nHost: registry.npmjs.org\r\n\r\n";
        assert_eq!(inspect_bytes(http, "registry.npmjs.org:443").await, Err(Refusal::NotTls));
        assert_eq!(inspect_bytes(http, "registry.npmjs.org:8080").await, Ok(http.to_vec()));
        let tls_like = b"\x16\x02not tls at all";
        assert_eq!(inspect_bytes(tls_like, "registry.npmjs.org:8080").await, Ok(tls_like.to_vec()));
        assert_eq!(inspect_bytes(tls_like, "registry.npmjs.org:443").await, Err(Refusal::NotTls));
        let other = hello_bytes(&[(0, sni(&[(0, "www.cloudflare.com")]))], 16_384);
        assert_eq!(inspect_bytes(&other, "registry.npmjs.org:8443").await, Err(Refusal::SniMismatch), "TLS anywhere");
        assert_eq!(inspect_bytes(b"", "registry.npmjs.org:443").await, Ok(Vec::new()), "closed at once");
        let truncated = hello_bytes(&[(0, sni(&[(0, "registry.npmjs.org")]))], 16_384);
        assert_eq!(inspect_bytes(&truncated[..20], "registry.npmjs.org:443").await, Err(Refusal::BadHello));
    }

    #[tokio::test]
    async fn a_slow_hello_is_cut_off() {
        let within = Duration::from_millis(300);
        let (mut client, mut proxy_side) = tokio::io::duplex(64);
        let hello = hello_bytes(&[(0, sni(&[(0, "registry.npmjs.org")]))], 16_384);
        tokio::io::AsyncWriteExt::write_all(&mut client, &hello[..10]).await.expect("write");
        let started = tokio::time::Instant::now();
        let verdict = inspect_within(&mut proxy_side, &target("registry.npmjs.org:443"), within).await;
        assert_eq!(verdict, Err(Refusal::BadHello));
        assert!(started.elapsed() >= within && started.elapsed() < within * 10, "{:?}", started.elapsed());
        // Port 443 and nothing at all: cut off as well.
        let (_client, mut silent) = tokio::io::duplex(64);
        assert_eq!(
            inspect_within(&mut silent, &target("registry.npmjs.org:443"), within).await,
            Err(Refusal::BadHello)
        );
    }
}
