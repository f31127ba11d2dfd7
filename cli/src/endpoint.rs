//! Where the server is: `http[s]://host[:port][/prefix]` parsed once, and the URLs of API
//! paths and WebSockets (`ws://`, `wss://`) built from it; path segments percent-encoded.

use std::fmt;

use reqwest::Url;

/// A parsed base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `http://host[:port]` or `https://…`, no path.
    origin: String,
    /// Path prefix without a trailing slash (`""` for the root).
    prefix: String,
    /// Host name or address (IPv6 without brackets).
    host: String,
    /// TCP port (the scheme's default when the URL gives none).
    port: u16,
    /// `https`.
    tls: bool,
}

impl Endpoint {
    /// Parses `http[s]://host[:port][/prefix]`.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let url =
            Url::parse(raw.trim()).map_err(|e| format!("not a URL: {raw:?} ({e}; expected http[s]://host:port)"))?;
        let tls = match url.scheme() {
            "http" => false,
            "https" => true,
            scheme => return Err(format!("unsupported URL scheme {scheme:?} in {raw:?}: use http:// or https://")),
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!("credentials in the URL are not supported: {raw:?} (use a token)"));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(format!("the URL must not carry a query or fragment: {raw:?}"));
        }
        let host = match url.host_str() {
            Some(host) if !host.is_empty() => host.trim_start_matches('[').trim_end_matches(']').to_owned(),
            _ => return Err(format!("no host in {raw:?}")),
        };
        let port = url.port_or_known_default().ok_or_else(|| format!("no port in {raw:?}"))?;
        let origin = url.origin().ascii_serialization();
        Ok(Self { origin, prefix: url.path().trim_end_matches('/').to_owned(), host, port, tls })
    }

    /// Whether the server speaks TLS (`https://`, `wss://`).
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The host name or address (IPv6 without brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The full URL of an API path (which starts with `/`, query included).
    pub fn url(&self, path: &str) -> String {
        format!("{}{}{path}", self.origin, self.prefix)
    }

    /// The `ws://` or `wss://` URL of an API path.
    pub fn ws_url(&self, path: &str) -> String {
        let url = self.url(path);
        match url.strip_prefix("https://") {
            Some(rest) => format!("wss://{rest}"),
            None => format!("ws://{}", url.trim_start_matches("http://")),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.origin, self.prefix)
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
        assert_eq!((e.host(), e.port(), e.is_tls()), ("127.0.0.1", 7700, false));
        assert_eq!(e.url("/api/v1/x?after=1"), "http://127.0.0.1:7700/api/v1/x?after=1");
        assert_eq!(e.ws_url("/api/v1/x"), "ws://127.0.0.1:7700/api/v1/x");
        let e = Endpoint::parse("https://Example.org/agenthold/").unwrap();
        assert_eq!((e.port(), e.is_tls()), (443, true));
        assert_eq!(e.to_string(), "https://example.org/agenthold");
        assert_eq!(e.url("/healthz"), "https://example.org/agenthold/healthz");
        assert_eq!(e.ws_url("/s"), "wss://example.org/agenthold/s");
        let e = Endpoint::parse("http://[::1]:7700").unwrap();
        assert_eq!((e.host(), e.to_string()), ("::1", "http://[::1]:7700".to_owned()));
        assert_eq!(Endpoint::parse("http://x").unwrap().port(), 80);
    }

    #[test]
    fn rejects_what_it_cannot_speak() {
        for bad in [
            "ftp://x",
            "127.0.0.1:7700",
            "localhost:7700",
            "http://:7700",
            "http://x:port",
            "http://u:p@x",
            "http://x/?a",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn encodes_segments() {
        assert_eq!(segment("abc-123"), "abc-123");
        assert_eq!(segment("a b/c?"), "a%20b%2Fc%3F");
    }
}
