//! Where the server is: `http://host[:port][/prefix]` parsed once, and the paths and
//! WebSocket URLs built from it (path segments percent-encoded).

use std::fmt;

/// A parsed base URL. Only plain `http` is supported (no TLS in this client).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or address as written (IPv6 without brackets).
    pub host: String,
    /// TCP port (80 when the URL gives none).
    pub port: u16,
    /// Path prefix without a trailing slash (`""` for the root).
    pub prefix: String,
}

impl Endpoint {
    /// Parses `http://host[:port][/prefix]`.
    pub fn parse(url: &str) -> Result<Self, String> {
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest,
            Some((scheme, _)) => {
                return Err(format!("unsupported URL scheme {scheme:?} in {url:?}: only http:// is supported"));
            }
            None => return Err(format!("not a URL: {url:?} (expected http://host:port)")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(format!("credentials in the URL are not supported: {url:?} (use AGENTHOLD_TOKEN)"));
        }
        if path.contains(['?', '#']) {
            return Err(format!("the URL must not carry a query or fragment: {url:?}"));
        }
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            let (host, after) = bracketed.split_once(']').ok_or_else(|| format!("bad IPv6 address in {url:?}"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| format!("bad port in {url:?}"))?),
            };
            (host, port)
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(format!("no host in {url:?}"));
        }
        let port = match port {
            None => 80,
            Some(p) => p.parse::<u16>().map_err(|_| format!("bad port {p:?} in {url:?}"))?,
        };
        Ok(Self { host: host.to_owned(), port, prefix: path.trim_end_matches('/').to_owned() })
    }

    /// The `Host` header value.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        if self.port == 80 { host } else { format!("{host}:{}", self.port) }
    }

    /// `host:port` for connecting.
    pub fn socket_addr(&self) -> (String, u16) {
        (self.host.clone(), self.port)
    }

    /// The request target for an API path (which starts with `/`).
    pub fn target(&self, path: &str) -> String {
        format!("{}{path}", self.prefix)
    }

    /// The `ws://` URL for an API path.
    pub fn ws_url(&self, path: &str) -> String {
        format!("ws://{}{}", self.host_header(), self.target(path))
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://{}{}", self.host_header(), self.prefix)
    }
}

/// Percent-encodes one path segment (everything but RFC 3986 unreserved characters).
pub fn segment(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for byte in raw.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests fail loudly on unexpected values")]
mod tests {
    use super::*;

    #[test]
    fn parses_host_port_and_prefix() {
        let e = Endpoint::parse("http://127.0.0.1:7700").unwrap();
        assert_eq!((e.host.as_str(), e.port, e.prefix.as_str()), ("127.0.0.1", 7700, ""));
        assert_eq!(e.ws_url("/api/v1/x"), "ws://127.0.0.1:7700/api/v1/x");
        let e = Endpoint::parse("http://example.org/agenthold/").unwrap();
        assert_eq!((e.port, e.prefix.as_str()), (80, "/agenthold"));
        assert_eq!(e.host_header(), "example.org");
        assert_eq!(e.target("/healthz"), "/agenthold/healthz");
        let e = Endpoint::parse("http://[::1]:7700").unwrap();
        assert_eq!((e.host.as_str(), e.host_header()), ("::1", "[::1]:7700".to_owned()));
    }

    #[test]
    fn rejects_what_it_cannot_speak() {
        assert!(Endpoint::parse("https://x").is_err());
        assert!(Endpoint::parse("127.0.0.1:7700").is_err());
        assert!(Endpoint::parse("http://:7700").is_err());
        assert!(Endpoint::parse("http://x:port").is_err());
        assert!(Endpoint::parse("http://u:p@x").is_err());
    }

    #[test]
    fn encodes_segments() {
        assert_eq!(segment("abc-123"), "abc-123");
        assert_eq!(segment("a b/c?"), "a%20b%2Fc%3F");
    }
}
