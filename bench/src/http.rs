//! A minimal HTTP/1.1 client over a plain `TcpStream`, enough for the few REST calls the
//! benchmarks make: one request per connection (`Connection: close`), JSON in and out,
//! `Content-Length` or chunked responses.

use anyhow::{Context, Result, bail};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A response: status code and body parsed as JSON (`Null` when empty).
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The body, parsed as JSON; `Null` when there is none.
    pub body: Value,
}

/// Sends one request to `addr` (`host:port`) and reads the whole response.
pub async fn request(addr: &str, method: &str, path: &str, token: &str, body: Option<&Value>) -> Result<Response> {
    let mut stream = TcpStream::connect(addr).await.with_context(|| format!("connecting to {addr}"))?;
    stream.set_nodelay(true)?;
    let payload = match body {
        Some(body) => serde_json::to_vec(body)?,
        None => Vec::new(),
    };
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: application/json\r\nConnection: close\r\nContent-Length: {}\r\n",
        payload.len()
    );
    if body.is_some() {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str("\r\n");
    let mut message = head.into_bytes();
    message.extend_from_slice(&payload);
    stream.write_all(&message).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.with_context(|| format!("reading the response to {method} {path}"))?;
    parse(&raw).with_context(|| format!("{method} {path}"))
}

fn parse(raw: &[u8]) -> Result<Response> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").context("no end of headers in the response")?;
    let head = std::str::from_utf8(&raw[..split]).context("response headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line {status_line:?}"))?;
    let mut chunked = false;
    let mut length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        } else if name.eq_ignore_ascii_case("content-length") {
            length = value.parse::<usize>().ok();
        }
    }
    let rest = &raw[split + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else {
        let end = length.unwrap_or(rest.len()).min(rest.len());
        rest[..end].to_vec()
    };
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()))
    };
    Ok(Response { status, body })
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n").context("truncated chunked body")?;
        let size_text = std::str::from_utf8(&rest[..line_end])?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .with_context(|| format!("bad chunk size {size_text:?}"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        if rest.len() < size {
            bail!("truncated chunk");
        }
        body.extend_from_slice(&rest[..size]);
        rest = rest.get(size + 2..).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_length_and_chunked_bodies() {
        let plain = parse(b"HTTP/1.1 201 Created\r\ncontent-length: 8\r\n\r\n{\"a\":1}\n").expect("plain");
        assert_eq!(plain.status, 201);
        assert_eq!(plain.body["a"], 1);
        let chunked =
            parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:2}\r\n0\r\n\r\n")
                .expect("chunked");
        assert_eq!(chunked.body["a"], 2);
        let empty = parse(b"HTTP/1.1 204 No Content\r\n\r\n").expect("empty");
        assert_eq!(empty.body, Value::Null);
    }
}
