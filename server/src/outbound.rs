//! The server's outbound HTTP client: calls to other replicas ([`crate::replicas::forward`]) and
//! login checks with the providers ([`crate::logins::probe`]). reqwest over rustls with ring
//! (the TLS setup of `agenthold-plumbing`: the public web roots, HTTP/1.1), built once per
//! process ([`client`]); its clones share one pool, so calls to a replica reuse kept-alive
//! connections instead of a TCP handshake each.
//!
//! It follows no redirect (a login check answers for the host it asked, and never sends a key
//! elsewhere) and no `HTTP(S)_PROXY` of the environment (replicas talk on their own network).
//! Each caller bounds its calls in time; answers are read up to a bound ([`read_body`]).
//!
//! Tests stand in for the providers with loopback servers
//! (`AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES`): [`with_stand_ins`] builds a client of their own
//! that resolves each such host to its stand-in and trusts the stand-ins' CAs (for any host: a
//! test's client only).

use std::sync::OnceLock;
use std::time::Duration;

use agenthold_plumbing::tls::{self, ClientTls};

use crate::config::UpstreamOverrides;

/// How long connecting to a replica or a provider may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why there is no client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The TLS configuration (a stand-in's CA).
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// reqwest refused the settings.
    #[error("the HTTP client: {0}")]
    Build(#[from] reqwest::Error),
}

/// The process's client (a clone: cheap, sharing its connections).
pub fn client() -> Result<reqwest::Client, ClientError> {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    if let Some(client) = CLIENT.get() {
        return Ok(client.clone());
    }
    let built = builder(ClientTls::public_roots())?.build()?;
    Ok(CLIENT.get_or_init(|| built).clone())
}

/// A client for tests whose provider hosts are answered by loopback stand-ins (`host:443` →
/// its address, its CA trusted too); without stand-ins, [`client`].
pub fn with_stand_ins(stand_ins: &UpstreamOverrides) -> Result<reqwest::Client, ClientError> {
    if stand_ins.is_empty() {
        return client();
    }
    let mut roots = ClientTls::public_roots();
    for stand_in in stand_ins.values() {
        if let Some(ca) = &stand_in.ca_cert {
            roots = roots.trust_pem_file(ca)?;
        }
    }
    let mut builder = builder(roots)?;
    // The port in the URL (none: 443) gives way to the stand-in's.
    for (authority, stand_in) in stand_ins {
        if let Some(host) = authority.strip_suffix(":443") {
            builder = builder.resolve(host, stand_in.addr);
        }
    }
    Ok(builder.build()?)
}

fn builder(roots: ClientTls) -> Result<reqwest::ClientBuilder, ClientError> {
    let tls = roots.alpn(&[tls::HTTP_1_1]).build()?;
    Ok(reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(concat!("agenthold/", env!("CARGO_PKG_VERSION"))))
}

/// Why an answer's body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// It is longer than the caller takes.
    #[error("the answer is longer than {0} bytes")]
    TooLong(usize),
    /// The connection failed while it was read.
    #[error("reading the answer: {0}")]
    Read(#[from] reqwest::Error),
}

/// The body of `response`, if it is at most `max` bytes.
pub async fn read_body(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, BodyError> {
    if response.content_length().is_some_and(|length| length > max as u64) {
        return Err(BodyError::TooLong(max));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > max {
            return Err(BodyError::TooLong(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpListener;

    use super::*;

    /// A loopback HTTP server that answers each connection's requests with `body`, keeping the
    /// connection; the number of connections it accepted.
    async fn server(body: &'static str) -> (String, tokio::sync::watch::Receiver<usize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        let (accepted_tx, accepted) = tokio::sync::watch::channel(0);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                accepted_tx.send_modify(|n| *n += 1);
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {
                        let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                        if stream.write_all(answer.as_bytes()).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        (url, accepted)
    }

    #[tokio::test]
    async fn calls_reuse_the_connection_and_bodies_are_bounded() {
        let (url, accepted) = server("0123456789").await;
        let http = client().expect("client");
        for _ in 0..3 {
            let response = http.get(&url).send().await.expect("answered");
            assert_eq!(read_body(response, 10).await.expect("read"), b"0123456789");
        }
        assert_eq!(*accepted.borrow(), 1, "one connection for three calls");
        let response = client().expect("the same client").get(&url).send().await.expect("answered");
        assert!(matches!(read_body(response, 9).await, Err(BodyError::TooLong(9))));
    }
}
