//! The `fetch` script command (and the `mcp` command's transport, [`request`]): one HTTPS GET, through `HTTPS_PROXY` when set (a `CONNECT`
//! with `Proxy-Authorization: Basic` from the proxy URL's userinfo), TLS with rustls trusting
//! the roots in `SSL_CERT_FILE` (the public web roots when unset). Bounded: [`TIMEOUT`] for the
//! whole request, [`MAX_BODY`] bytes of body read, [`MAX_HEAD`] bytes of response head. Every
//! failure is an `Err` with a message, never a panic.
//!
//! Hand-written on purpose, not reqwest (which the server uses): what the sandbox tests read is
//! the egress proxy's refusal of a `CONNECT` — its status and its `agenthold-proxy: …` reason —
//! and reqwest reports a refused tunnel as a bare "unsuccessful tunnel" error, without either.
//! (reqwest's blocking client would also add 1.8 MB to this 2.6 MB binary.)

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs as _};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agenthold_plumbing::tls::{self, ClientTls};
use base64::Engine as _;
use rustls::pki_types::ServerName;

/// The whole request's time limit.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// The most body read.
pub const MAX_BODY: usize = 1024 * 1024;
/// The most response head (status line and headers) read, from the proxy or the server.
pub const MAX_HEAD: usize = 64 * 1024;

/// What came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status line, e.g. `HTTP/1.1 200 OK`.
    pub status_line: String,
    /// The status code.
    pub status: u16,
    /// The body (at most [`MAX_BODY`] bytes, de-chunked).
    pub body: Vec<u8>,
    /// Whether the answer came from the proxy refusing the `CONNECT`.
    pub from_proxy: bool,
}

/// A parsed `https://` or `http://` URL.
struct Url {
    host: String,
    port: u16,
    path: String,
    userinfo: Option<String>,
}

fn parse_url(url: &str, scheme: &str, default_port: u16) -> Result<Url, String> {
    let rest = url
        .get(..scheme.len())
        .filter(|s| s.eq_ignore_ascii_case(scheme))
        .map(|_| &url[scheme.len()..])
        .ok_or_else(|| format!("not a {scheme} URL: {url}"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u.to_owned()), h),
        None => (None, authority),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || hostport.starts_with('[') => {
            (h, p.parse().map_err(|_| format!("bad port in {url}"))?)
        }
        _ => (hostport, default_port),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || host.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return Err(format!("no host in {url}"));
    }
    if path.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return Err(format!("bad path in {url}"));
    }
    Ok(Url { host: host.to_owned(), port, path: path.to_owned(), userinfo })
}

/// Replaces `$NAME` with the variable's value (empty when unset).
pub fn expand(value: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let len = after
            .char_indices()
            .take_while(|(j, c)| c.is_ascii_alphabetic() || *c == '_' || (*j > 0 && c.is_ascii_digit()))
            .count();
        if len == 0 {
            out.push('$');
        } else {
            out.push_str(&env(&after[..len]).unwrap_or_default());
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A stream whose every read and write gives up at the deadline.
struct Deadlined<S> {
    inner: S,
    socket: TcpStream,
    deadline: Instant,
}

impl<S> Deadlined<S> {
    fn arm(&self) -> std::io::Result<()> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"));
        }
        self.socket.set_read_timeout(Some(left))?;
        self.socket.set_write_timeout(Some(left))
    }
}

impl<S: Read> Read for Deadlined<S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.arm()?;
        self.inner.read(buf)
    }
}

impl<S: Write> Write for Deadlined<S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.arm()?;
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.arm()?;
        self.inner.flush()
    }
}

/// One GET of `url` (`https://` only) with the given headers (values already expanded);
/// `env` reads `HTTPS_PROXY`/`https_proxy` and `SSL_CERT_FILE`.
pub fn get(url: &str, headers: &[(String, String)], env: &dyn Fn(&str) -> Option<String>) -> Result<Response, String> {
    if parse_url(url, "https://", 443).is_err() {
        return Err(format!("not a https:// URL: {url}"));
    }
    request("GET", url, headers, None, env)
}

/// One request: `https://` through `HTTPS_PROXY` when set (TLS trusting `SSL_CERT_FILE`), or
/// `http://` straight to the host (a server on the sandbox's own host, e.g. the `local`
/// driver's). `body` is sent with its `Content-Length`.
pub fn request(
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: Option<&[u8]>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Response, String> {
    request_within(TIMEOUT, method, url, headers, body, env)
}

/// [`request`] with a time limit of its own (an MCP call that waits on the server, for one).
pub fn request_within(
    limit: Duration,
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: Option<&[u8]>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Response, String> {
    let deadline = Instant::now() + limit;
    let (target, tls) = match parse_url(url, "https://", 443) {
        Ok(target) => (target, true),
        Err(_) => (parse_url(url, "http://", 80).map_err(|_| format!("not an http(s) URL: {url}"))?, false),
    };
    for (name, value) in headers {
        let bad = |s: &str| s.contains(['\r', '\n', '\0']);
        if name.is_empty() || bad(name) || name.contains([':', ' ']) || bad(value) {
            return Err(format!("bad header {name:?}"));
        }
    }
    let proxy = env("https_proxy").or_else(|| env("HTTPS_PROXY")).filter(|p| !p.is_empty() && tls);
    let proxy = proxy.map(|p| parse_url(&p, "http://", 80)).transpose().map_err(|e| format!("HTTPS_PROXY: {e}"))?;
    let (dial_host, dial_port) = match &proxy {
        Some(p) => (p.host.clone(), p.port),
        None => (target.host.clone(), target.port),
    };
    let socket = connect(&dial_host, dial_port, deadline)?;
    let mut plain = Deadlined { inner: socket.try_clone().map_err(|e| e.to_string())?, socket, deadline };
    if let Some(proxy) = &proxy {
        let authority = format!("{}:{}", bracket(&target.host), target.port);
        let mut request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
        if let Some(userinfo) = &proxy.userinfo {
            let (user, pass) = userinfo.split_once(':').unwrap_or((userinfo, ""));
            let credentials = format!("{}:{}", percent_decode(user), percent_decode(pass));
            let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
            request.push_str(&format!("Proxy-Authorization: Basic {encoded}\r\n"));
        }
        request.push_str("\r\n");
        plain.write_all(request.as_bytes()).map_err(|e| format!("to the proxy: {e}"))?;
        let (head, leftover) = read_head(&mut plain).map_err(|e| format!("from the proxy: {e}"))?;
        let (status_line, status, fields) = parse_head(&head)?;
        if !(200..300).contains(&status) {
            let body = read_body(&mut plain, leftover, &fields);
            return Ok(Response { status_line, status, body, from_proxy: true });
        }
    }
    let default_port = if tls { 443 } else { 80 };
    let mut head = format!(
        "{method} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: fakeagent\r\nAccept: */*\r\nConnection: close\r\n",
        target.path,
        if target.port == default_port {
            bracket(&target.host)
        } else {
            format!("{}:{}", bracket(&target.host), target.port)
        }
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut message = head.into_bytes();
    message.extend_from_slice(body.unwrap_or_default());
    if !tls {
        plain.write_all(&message).map_err(|e| format!("to {}: {e}", target.host))?;
        let (head, leftover) = read_head(&mut plain).map_err(|e| format!("from {}: {e}", target.host))?;
        let (status_line, status, fields) = parse_head(&head)?;
        let body = read_body(&mut plain, leftover, &fields);
        return Ok(Response { status_line, status, body, from_proxy: false });
    }
    let config = client_config(env)?;
    let name = ServerName::try_from(target.host.clone()).map_err(|e| format!("{}: {e}", target.host))?;
    let connection = rustls::ClientConnection::new(config, name).map_err(|e| format!("TLS: {e}"))?;
    let socket = plain.socket.try_clone().map_err(|e| e.to_string())?;
    let mut tls = Deadlined { inner: rustls::StreamOwned::new(connection, plain.inner), socket, deadline };
    tls.write_all(&message).map_err(|e| format!("TLS to {}: {e}", target.host))?;
    let (head, leftover) = read_head(&mut tls).map_err(|e| format!("from {}: {e}", target.host))?;
    let (status_line, status, fields) = parse_head(&head)?;
    let body = read_body(&mut tls, leftover, &fields);
    Ok(Response { status_line, status, body, from_proxy: false })
}

fn bracket(host: &str) -> String {
    if host.contains(':') { format!("[{host}]") } else { host.to_owned() }
}

fn connect(host: &str, port: u16, deadline: Instant) -> Result<TcpStream, String> {
    let addrs = (host, port).to_socket_addrs().map_err(|e| format!("resolving {host}: {e}"))?;
    let mut last = format!("{host} has no address");
    for addr in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("connecting to {host}:{port}: timed out"));
        }
        match TcpStream::connect_timeout(&addr, left) {
            Ok(socket) => return Ok(socket),
            Err(e) => last = format!("connecting to {host}:{port}: {e}"),
        }
    }
    Err(last)
}

fn client_config(env: &dyn Fn(&str) -> Option<String>) -> Result<Arc<rustls::ClientConfig>, String> {
    let client = match env("SSL_CERT_FILE").filter(|f| !f.is_empty()) {
        Some(file) => {
            let origin = format!("SSL_CERT_FILE {file}");
            let certs = tls::pem::read_certs(Path::new(&file)).map_err(|e| format!("SSL_CERT_FILE {e}"))?;
            ClientTls::no_roots().trust_usable(&origin, certs).map_err(|e| e.to_string())?
        }
        None => ClientTls::public_roots(),
    };
    Ok(Arc::new(client.build().map_err(|e| e.to_string())?))
}

/// Reads up to the blank line; returns the head and whatever came after it.
fn read_head(stream: &mut impl Read) -> std::io::Result<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(std::io::Error::other("the response head is too long"));
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed before a response"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

type Head = (String, u16, Vec<(String, String)>);

fn parse_head(head: &str) -> Result<Head, String> {
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default().to_owned();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not an HTTP response: {status_line:?}"))?;
    let fields = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok((status_line, status, fields))
}

/// The body: `Content-Length` bytes, or to the end (de-chunked if chunked), at most
/// [`MAX_BODY`]; a read error (a timeout, a close without TLS close_notify) ends it.
fn read_body(stream: &mut impl Read, mut body: Vec<u8>, fields: &[(String, String)]) -> Vec<u8> {
    let field = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let length = field("content-length").and_then(|v| v.parse::<usize>().ok());
    let limit = length.unwrap_or(usize::MAX).min(MAX_BODY);
    let chunked = field("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let mut chunk = [0u8; 16 * 1024];
    while body.len() < limit && !(chunked && body.ends_with(b"0\r\n\r\n")) {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    body.truncate(limit);
    if chunked { dechunk(&body) } else { body }
}

fn dechunk(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = raw;
    while let Some(end) = rest.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&rest[..end]);
        let Ok(size) = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16) else { break };
        if size == 0 {
            break;
        }
        let data = &rest[end + 2..];
        let take = size.min(data.len());
        out.extend_from_slice(&data[..take]);
        rest = data.get(take + 2..).unwrap_or_default();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_expand_and_urls_parse() {
        let env = |name: &str| (name == "KEY").then(|| "v4l".to_owned());
        assert_eq!(expand("$KEY", &env), "v4l");
        assert_eq!(expand("Bearer $KEY!", &env), "Bearer v4l!");
        assert_eq!(expand("$MISSING-$ $1", &env), "-$ $1");
        let url = parse_url("https://api.example.com/v1/messages", "https://", 443).expect("parses");
        assert_eq!((url.host.as_str(), url.port, url.path.as_str()), ("api.example.com", 443, "/v1/messages"));
        let proxy = parse_url("http://sbx-1:p%40ss@host.docker.internal:3128", "http://", 80).expect("parses");
        assert_eq!((proxy.host.as_str(), proxy.port), ("host.docker.internal", 3128));
        assert_eq!(percent_decode(proxy.userinfo.as_deref().unwrap_or_default()), "sbx-1:p@ss");
        assert!(parse_url("ftp://x", "https://", 443).is_err());
        assert!(parse_url("https://:443/", "https://", 443).is_err());
        assert!(parse_url("https://h:notaport/", "https://", 443).is_err());
        assert_eq!(dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"), b"abcde");
    }

    #[test]
    fn errors_are_reported_not_panics() {
        let none = |_: &str| None;
        assert!(get("http://example.com/", &[], &none).is_err());
        assert!(get("https://example.com/", &[("x\r\ny".into(), "v".into())], &none).is_err());
        let proxy = |name: &str| (name == "HTTPS_PROXY").then(|| "http://127.0.0.1:1".to_owned());
        let err = get("https://example.com/", &[], &proxy).expect_err("nothing listens on port 1");
        assert!(err.contains("127.0.0.1:1"), "{err}");
    }
}
