//! The client's address, as the login throttle counts it: the connection's peer, unless that peer
//! is one of the operator's trusted reverse proxies (`AGENTHOLD_TRUSTED_PROXIES`), in which case
//! the right-most address in `X-Forwarded-For` that is not itself a trusted proxy. Without
//! trusted proxies the header is ignored: anyone can write it.

use std::net::IpAddr;

use axum::http::HeaderMap;
use ipnet::IpNet;

pub use crate::config::auth::parse_trusted;

/// The client's address for a connection from `peer`.
pub fn of(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |addr: &IpAddr| trusted.iter().any(|net| net.contains(addr));
    if !is_trusted(&peer) {
        return peer;
    }
    // Every X-Forwarded-For line, in order, as one list: the right-most hop was added by the
    // proxy nearest to us; walk left past the trusted ones.
    let hops: Vec<IpAddr> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .take(64)
        .map(|hop| hop.parse::<IpAddr>().ok())
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default();
    hops.into_iter().rev().find(|hop| !is_trusted(hop)).unwrap_or(peer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append("x-forwarded-for", value.parse().expect("header"));
        }
        headers
    }

    #[test]
    fn the_header_counts_only_from_a_trusted_proxy() {
        let trusted = vec![parse_trusted("10.0.0.0/8").expect("net"), parse_trusted("192.0.2.7").expect("ip")];
        let client: IpAddr = "198.51.100.4".parse().expect("ip");
        let proxy: IpAddr = "10.1.2.3".parse().expect("ip");
        // From an untrusted peer, the header is anyone's writing: ignored.
        assert_eq!(of(client, &headers(&["203.0.113.9"]), &trusted), client);
        assert_eq!(of(client, &headers(&["203.0.113.9"]), &[]), client);
        // Through a trusted proxy: the right-most untrusted hop (a spoofed left part is skipped).
        assert_eq!(of(proxy, &headers(&["203.0.113.9, 198.51.100.4"]), &trusted), client);
        assert_eq!(of(proxy, &headers(&["203.0.113.9", "198.51.100.4, 192.0.2.7"]), &trusted), client);
        // Nothing usable: the peer itself.
        assert_eq!(of(proxy, &headers(&[]), &trusted), proxy);
        assert_eq!(of(proxy, &headers(&["not an address"]), &trusted), proxy);
        assert_eq!(of(proxy, &headers(&["10.9.9.9"]), &trusted), proxy);
        assert!(parse_trusted("example.com").is_err());
        assert_eq!(parse_trusted(" ::1 ").expect("v6").to_string(), "::1/128");
    }
}
