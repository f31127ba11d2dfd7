//! A deliberately small HTTP/1.1 client over a tokio `TcpStream`: one request per connection
//! (`Connection: close`), bodies sent with `Content-Length`, responses read with
//! `Content-Length`, `chunked` transfer coding, or up to the end of the connection.

use anyhow::{Context, bail, ensure};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::endpoint::Endpoint;

/// Most bytes of status line plus headers accepted.
const MAX_HEAD_BYTES: u64 = 64 * 1024;
/// Largest response body accepted.
const MAX_BODY_BYTES: u64 = 256 * 1024 * 1024;

/// A response.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header names (lower-cased) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The whole body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of a header (name in lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// A request to send.
#[derive(Debug)]
pub struct Request<'a> {
    /// `GET`, `POST`, `DELETE`, …
    pub method: &'a str,
    /// The request target (path and query), already encoded.
    pub target: &'a str,
    /// Extra headers (`Host`, `Connection` and `Content-Length` are added).
    pub headers: Vec<(&'a str, String)>,
    /// The body, if any.
    pub body: Option<&'a [u8]>,
}

/// Sends one request on a fresh connection and reads the whole response.
pub async fn send(endpoint: &Endpoint, request: &Request<'_>) -> anyhow::Result<Response> {
    let stream =
        TcpStream::connect(endpoint.socket_addr()).await.with_context(|| format!("connecting to {endpoint}"))?;
    stream.set_nodelay(true).ok();
    let mut stream = BufReader::new(stream);
    let head = encode_head(endpoint, request);
    stream.get_mut().write_all(head.as_bytes()).await.context("sending the request")?;
    if let Some(body) = request.body {
        stream.get_mut().write_all(body).await.context("sending the request body")?;
    }
    stream.get_mut().flush().await.context("sending the request")?;
    read_response(&mut stream, request.method == "HEAD").await.context("reading the response")
}

fn encode_head(endpoint: &Endpoint, request: &Request<'_>) -> String {
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
        request.method,
        request.target,
        endpoint.host_header()
    );
    for (name, value) in &request.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    match request.body {
        Some(body) => head.push_str(&format!("Content-Length: {}\r\n", body.len())),
        None if matches!(request.method, "POST" | "PUT" | "PATCH") => head.push_str("Content-Length: 0\r\n"),
        None => {}
    }
    head.push_str("\r\n");
    head
}

/// Reads one line (through `\n`) of at most `*budget` bytes, charging the budget; returns it
/// without the line ending. `None` at a clean end of input.
async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R, budget: &mut u64) -> anyhow::Result<Option<String>> {
    let mut line = Vec::new();
    let n = (&mut *reader).take(*budget).read_until(b'\n', &mut line).await?;
    if n == 0 {
        return Ok(None);
    }
    *budget -= n as u64;
    ensure!(line.ends_with(b"\n"), "response head too long or cut off");
    line.pop();
    if line.ends_with(b"\r") {
        line.pop();
    }
    Ok(Some(String::from_utf8(line).context("response head is not UTF-8")?))
}

/// Reads a response (status, headers, body) from `reader`. `head_request`: a response to
/// `HEAD`, which has no body.
pub async fn read_response<R: AsyncBufRead + Unpin>(reader: &mut R, head_request: bool) -> anyhow::Result<Response> {
    let mut budget = MAX_HEAD_BYTES;
    let (status, headers) = loop {
        let line = read_line(reader, &mut budget).await?.context("connection closed before a response")?;
        let status = parse_status_line(&line)?;
        let mut headers = Vec::new();
        loop {
            let line = read_line(reader, &mut budget).await?.context("connection closed in the response head")?;
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').with_context(|| format!("malformed header line {line:?}"))?;
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
        // Interim responses (100 Continue, 103 Early Hints) are followed by the real one.
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        break (status, headers);
    };
    let mut response = Response { status, headers, body: Vec::new() };
    if head_request || status == 204 || status == 304 || (100..200).contains(&status) {
        return Ok(response);
    }
    let chunked = response
        .header("transfer-encoding")
        .is_some_and(|te| te.rsplit(',').next().is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked")));
    if chunked {
        response.body = read_chunked(reader).await?;
    } else if let Some(length) = content_length(&response.headers)? {
        ensure!(length <= MAX_BODY_BYTES, "response body of {length} bytes is too large");
        let mut body = vec![0; usize::try_from(length)?];
        reader.read_exact(&mut body).await.context("connection closed in the response body")?;
        response.body = body;
    } else {
        let mut body = Vec::new();
        (&mut *reader).take(MAX_BODY_BYTES + 1).read_to_end(&mut body).await?;
        ensure!(body.len() as u64 <= MAX_BODY_BYTES, "response body too large");
        response.body = body;
    }
    Ok(response)
}

fn parse_status_line(line: &str) -> anyhow::Result<u16> {
    let mut parts = line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    ensure!(version.starts_with("HTTP/1."), "not an HTTP/1.x response: {line:?}");
    let code = parts.next().unwrap_or_default();
    ensure!(code.len() == 3, "malformed status line {line:?}");
    code.parse().with_context(|| format!("malformed status line {line:?}"))
}

fn content_length(headers: &[(String, String)]) -> anyhow::Result<Option<u64>> {
    let mut found: Option<u64> = None;
    for (name, value) in headers {
        if name != "content-length" {
            continue;
        }
        for part in value.split(',') {
            let n: u64 = part.trim().parse().with_context(|| format!("malformed Content-Length {value:?}"))?;
            if found.is_some_and(|f| f != n) {
                bail!("conflicting Content-Length headers");
            }
            found = Some(n);
        }
    }
    Ok(found)
}

async fn read_chunked<R: AsyncBufRead + Unpin>(reader: &mut R) -> anyhow::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut budget = 4096;
        let line = read_line(reader, &mut budget).await?.context("connection closed in a chunked body")?;
        let size_text = line.split(';').next().unwrap_or_default().trim();
        let size = u64::from_str_radix(size_text, 16).with_context(|| format!("malformed chunk size {line:?}"))?;
        if size == 0 {
            // Trailers, up to the empty line (a server that just closes is tolerated).
            let mut budget = MAX_HEAD_BYTES;
            while let Some(trailer) = read_line(reader, &mut budget).await? {
                if trailer.is_empty() {
                    break;
                }
            }
            return Ok(body);
        }
        ensure!(body.len() as u64 + size <= MAX_BODY_BYTES, "response body too large");
        let start = body.len();
        body.resize(start + usize::try_from(size)?, 0);
        reader.read_exact(&mut body[start..]).await.context("connection closed in a chunk")?;
        let mut budget = 2;
        let end = read_line(reader, &mut budget).await?.context("connection closed after a chunk")?;
        ensure!(end.is_empty(), "chunk not followed by CRLF");
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests fail loudly on unexpected values")]
mod tests {
    use super::*;

    async fn parse(raw: &[u8]) -> anyhow::Result<Response> {
        let mut reader = BufReader::new(raw);
        read_response(&mut reader, false).await
    }

    #[tokio::test]
    async fn content_length_body() {
        let r = parse(
            b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}trailing",
        )
        .await
        .unwrap();
        assert_eq!(r.status, 201);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.body, b"{\"a\":1}");
    }

    #[tokio::test]
    async fn chunked_body_with_extensions_and_trailers() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\n";
        let r = parse(raw).await.unwrap();
        assert_eq!(r.body, b"Wikipedia in\r\n\r\nchunks.");
    }

    #[tokio::test]
    async fn no_content_and_interim_responses() {
        let r = parse(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n").await.unwrap();
        assert_eq!((r.status, r.body.len()), (204, 0));
    }

    #[tokio::test]
    async fn body_to_end_of_connection() {
        let r = parse(b"HTTP/1.0 200 OK\nServer: x\n\nhello").await.unwrap();
        assert_eq!(r.body, b"hello");
    }

    #[tokio::test]
    async fn malformed_responses_fail() {
        assert!(parse(b"").await.is_err());
        assert!(parse(b"SSH-2.0-OpenSSH\r\n\r\n").await.is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort").await.is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab").await.is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").await.is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n").await.is_err());
    }

    #[test]
    fn request_head() {
        let endpoint = Endpoint::parse("http://127.0.0.1:7700").unwrap();
        let request =
            Request { method: "POST", target: "/x", headers: vec![("Accept", "application/json".into())], body: None };
        assert_eq!(
            encode_head(&endpoint, &request),
            "POST /x HTTP/1.1\r\nHost: 127.0.0.1:7700\r\nConnection: close\r\nAccept: application/json\r\nContent-Length: 0\r\n\r\n"
        );
    }
}
