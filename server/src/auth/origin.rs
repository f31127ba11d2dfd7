//! The origin check that stops cross-site WebSocket hijacking. Browsers attach cookies to a
//! WebSocket handshake whatever page opens it (SameSite does not cover every case, and a
//! handshake is a GET, which the CSRF check lets through), so a cookie-authenticated upgrade must
//! come from the server's own origin: the configured public URL's (`AGENTHOLD_PUBLIC_URL`), or
//! when unset the origin of the `Host` the browser connected to. Bearer-token upgrades (scripts)
//! are not checked: a page cannot make a browser send someone's token.

use axum::http::request::Parts;
use axum::http::{HeaderMap, header};

use crate::config::auth::origin_of as normalize;
pub use crate::config::auth::parse_public_url;

/// Whether the request asks for a WebSocket upgrade.
pub fn is_websocket_upgrade(parts: &Parts) -> bool {
    parts
        .headers
        .get(header::UPGRADE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim().eq_ignore_ascii_case("websocket"))
}

/// Whether the request's `Origin` is the server's own: `public_origin` (already normalised by
/// [`parse_public_url`]) when configured, else `http://` or `https://` followed by its `Host`.
/// A request without `Origin` (or `Host`) is not.
pub fn is_own_origin(headers: &HeaderMap, public_origin: Option<&str>) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|value| value.to_str().ok()).and_then(normalize) else {
        return false;
    };
    match public_origin {
        Some(public) => origin == public,
        None => {
            let Some(host) = headers.get(header::HOST).and_then(|value| value.to_str().ok()) else {
                return false;
            };
            ["http", "https"].iter().any(|scheme| normalize(&format!("{scheme}://{host}")).as_deref() == Some(&origin))
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(origin: Option<&str>, host: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_str(host).expect("host"));
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, HeaderValue::from_str(origin).expect("origin"));
        }
        headers
    }

    #[test]
    fn the_configured_origin_alone_is_accepted() {
        let public = parse_public_url("HTTPS://Agenthold.Example.com:443/ui/").expect("parses");
        assert_eq!(public, "https://agenthold.example.com");
        let public = Some(public.as_str());
        assert!(is_own_origin(&headers(Some("https://agenthold.example.com"), "internal:7700"), public));
        assert!(!is_own_origin(&headers(Some("http://agenthold.example.com"), "internal:7700"), public));
        assert!(!is_own_origin(&headers(Some("https://evil.example"), "agenthold.example.com"), public));
        assert!(!is_own_origin(&headers(None, "agenthold.example.com"), public));
        assert!(parse_public_url("ftp://x").is_err() && parse_public_url("not a url").is_err());
    }

    #[test]
    fn without_a_setting_the_host_is_the_origin() {
        assert!(is_own_origin(&headers(Some("http://127.0.0.1:7700"), "127.0.0.1:7700"), None));
        assert!(is_own_origin(&headers(Some("https://a.example"), "a.example"), None));
        assert!(!is_own_origin(&headers(Some("http://evil.example:8080"), "127.0.0.1:7700"), None));
        assert!(!is_own_origin(&headers(Some("null"), "127.0.0.1:7700"), None));
        assert!(!is_own_origin(&headers(None, "127.0.0.1:7700"), None));
    }
}
