//! Header hygiene between hops: hop-by-hop headers (and those `Connection` names) are dropped,
//! `Proxy-Authorization` never travels upstream, and whether a request is a WebSocket upgrade.

use hyper::HeaderMap;
use hyper::header::{CONNECTION, HeaderName, UPGRADE};

/// Headers that belong to one hop (and to the proxy), never forwarded.
pub const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
    "proxy-authenticate",
];

/// Whether the headers ask for a WebSocket upgrade (`Upgrade: websocket`).
pub fn is_websocket(headers: &HeaderMap) -> bool {
    let mut upgrades = headers.get_all(UPGRADE).iter();
    matches!((upgrades.next(), upgrades.next()), (Some(v), None) if v.as_bytes().eq_ignore_ascii_case(b"websocket"))
}

/// Removes hop-by-hop headers. With `keep_upgrade`, a WebSocket upgrade keeps
/// `Connection: upgrade` and `Upgrade: websocket`.
pub fn strip_hop_by_hop(headers: &mut HeaderMap, keep_upgrade: bool) {
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|token| HeaderName::from_bytes(token.trim().as_bytes()).ok())
        .collect();
    let upgrade = headers.get(UPGRADE).cloned();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
    if keep_upgrade && let Some(upgrade) = upgrade {
        headers.insert(UPGRADE, upgrade);
        headers.insert(CONNECTION, hyper::header::HeaderValue::from_static("upgrade"));
    }
}
