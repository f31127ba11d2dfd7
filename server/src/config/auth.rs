//! Who the server believes about where a request comes from: the public URL browsers use (its
//! origin is the only one a cookie-authenticated WebSocket upgrade may come from) and the reverse
//! proxies whose `X-Forwarded-For` counts. The parsers of both settings; the checks that use them
//! are the auth module's.

use std::net::IpAddr;

use axum::http::Uri;
use ipnet::IpNet;

/// Parses `AGENTHOLD_PUBLIC_URL` into the origin browsers send (`scheme://host[:port]`,
/// lower case, without a default port or a path).
pub fn parse_public_url(url: &str) -> Result<String, String> {
    origin_of(url).ok_or_else(|| format!("{url:?} is not an http:// or https:// URL"))
}

/// `scheme://host[:port]`, lower case, default ports dropped; `None` unless http(s) with a host.
pub fn origin_of(url: &str) -> Option<String> {
    let uri: Uri = url.trim().parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let host = uri.host()?.to_ascii_lowercase();
    if host.is_empty() {
        return None;
    }
    Some(match uri.port_u16() {
        Some(port) if port != default_port => format!("{scheme}://{host}:{port}"),
        _ => format!("{scheme}://{host}"),
    })
}

/// Reads one trusted proxy: an address (`10.0.0.5`) or a network (`10.0.0.0/8`).
pub fn parse_trusted(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{text:?} is neither an IP address nor a network (10.0.0.0/8)"))
}
