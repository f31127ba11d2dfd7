//! The browser UI: the files `npm run build` writes to `web/dist`, served at `/` (the router's
//! fallback, so every API route wins). A path that names no file gets `index.html` (the UI routes
//! itself), except under `/api/`, which answers the API's JSON 404. Every answer carries a
//! Content-Security-Policy that lets the page load scripts, styles and connections (WebSockets
//! included) from this server only, and images from it or `data:`. `index.html` also gets a fresh
//! nonce per answer (its `__CSP_NONCE__` placeholders, and `style-src 'nonce-…'`): the web
//! terminal (xterm.js) measures and themes itself with `<style>` elements it makes at run time,
//! which carry that nonce; nothing else inline is allowed.

use std::path::{Path, PathBuf};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use crate::state::AppState;

/// What every page of the UI may load.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; \
     frame-ancestors 'none'; form-action 'self'";

/// The policy of `index.html`, with its nonce.
fn policy_with_nonce(nonce: &str) -> String {
    CONTENT_SECURITY_POLICY.replace("style-src 'self';", &format!("style-src 'self' 'nonce-{nonce}';"))
}

/// Shown at `/` when the UI was not built.
const NOT_BUILT: &str = "<!doctype html><meta charset=utf-8><title>agenthold</title>\
<h1>agenthold</h1><p>The browser UI is not built: run <code>make build</code> \
(or <code>npm ci &amp;&amp; npm run build</code> in <code>web/</code>), or point \
<code>AGENTHOLD_WEB_DIR</code> at a built <code>web/dist</code>.</p>";

/// The directory of the built UI.
pub fn web_dir(configured: Option<&Path>) -> PathBuf {
    configured.map(Path::to_path_buf).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../web/dist"))
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// The file a URL path names inside `root`, if the path is plain (no `..`, no hidden parts).
fn resolve(root: &Path, url_path: &str) -> Option<PathBuf> {
    let mut path = root.to_path_buf();
    for part in url_path.split('/').filter(|p| !p.is_empty()) {
        if part.starts_with('.') || part.contains('\\') || part.contains('\0') {
            return None;
        }
        path.push(part);
    }
    Some(path)
}

fn with_headers(response: Response, cache: &'static str) -> Response {
    with_policy(response, cache, HeaderValue::from_static(CONTENT_SECURITY_POLICY))
}

fn with_policy(mut response: Response, cache: &'static str, policy: HeaderValue) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    response
}

/// The browser UI (`web/dist`; other paths outside `/api` get it too).
#[utoipa::path(
    get,
    path = "/",
    operation_id = "index",
    tag = "meta",
    responses((status = 200, description = "The browser UI's page", body = String, content_type = "text/html")),
    extensions(("x-agenthold-access" = json!(super::openapi::Access::Public))),
)]
pub async fn serve(State(state): State<AppState>, request: Request) -> Response {
    let url_path = request.uri().path().to_owned();
    if url_path == "/api" || url_path.starts_with("/api/") {
        return ApiError::NotFound("route").into_response();
    }
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let root = web_dir(state.config.web_dir.as_deref());
    if let Some(path) = resolve(&root, &url_path)
        && path != root
        && path.file_name().is_some_and(|name| name != "index.html")
        && let Ok(bytes) = tokio::fs::read(&path).await
    {
        // Vite names the files under assets/ by their content's hash.
        let cache = if url_path.starts_with("/assets/") { "public, max-age=31536000, immutable" } else { "no-cache" };
        let response = ([(header::CONTENT_TYPE, content_type(&path))], bytes).into_response();
        return with_headers(response, cache);
    }
    // A missing asset is a 404, not the page.
    if url_path.starts_with("/assets/") {
        return with_headers(StatusCode::NOT_FOUND.into_response(), "no-cache");
    }
    let nonce = hex::encode(rand::random::<[u8; 16]>());
    let page = match tokio::fs::read_to_string(root.join("index.html")).await {
        Ok(html) => html.replace("__CSP_NONCE__", &nonce),
        Err(_) => NOT_BUILT.to_owned(),
    };
    let response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response();
    let policy = HeaderValue::from_str(&policy_with_nonce(&nonce)).expect("a header value");
    with_policy(response, "no-cache", policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_paths_resolve() {
        let root = Path::new("/srv/web");
        assert_eq!(resolve(root, "/assets/app.js"), Some(PathBuf::from("/srv/web/assets/app.js")));
        assert_eq!(resolve(root, "/"), Some(PathBuf::from("/srv/web")));
        assert_eq!(resolve(root, "/../etc/passwd"), None);
        assert_eq!(resolve(root, "/assets/..%2f"), None);
        assert_eq!(resolve(root, "/assets/a%2f..%2fb"), Some(PathBuf::from("/srv/web/assets/a%2f..%2fb")));
        assert_eq!(resolve(root, "/.git/config"), None);
        assert_eq!(resolve(root, "/a\\b"), None);
    }
}
