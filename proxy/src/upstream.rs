//! Connections to the real destination for intercepted and plain-HTTP requests: a pinned TCP
//! connection, TLS verified against public roots with the vetted host as SNI (for intercepted
//! hosts), and an HTTP/1.1 client on top whose connection task belongs to the caller.

use std::time::Duration;

use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;

use crate::net::{DialError, Network, Pinned, connect_pinned};
use crate::respond::Body;
use crate::server::Owned;

const TLS_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens an HTTP/1.1 connection to `pinned`, over TLS for `tls_host` when given.
pub async fn open(
    network: &dyn Network,
    pinned: &Pinned,
    tls_host: Option<&str>,
    owned: &Owned,
) -> Result<SendRequest<Body>, DialError> {
    let tcp = connect_pinned(network, pinned).await?;
    match tls_host {
        Some(host) => {
            let name = ServerName::try_from(host.to_owned()).map_err(|_| DialError::Connect)?;
            let connector = tokio_rustls::TlsConnector::from(pinned.tls.clone());
            let tls = tokio::time::timeout(TLS_TIMEOUT, connector.connect(name, tcp))
                .await
                .map_err(|_| DialError::Connect)?
                .map_err(|error| {
                    tracing::info!(%host, %error, "upstream TLS handshake failed");
                    DialError::Connect
                })?;
            handshake(TokioIo::new(tls), owned).await
        }
        None => handshake(TokioIo::new(tcp), owned).await,
    }
}

async fn handshake<T>(io: T, owned: &Owned) -> Result<SendRequest<Body>, DialError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, connection) = http1::Builder::new().handshake(io).await.map_err(|_| DialError::Connect)?;
    owned.spawn(async move {
        let _ = connection.with_upgrades().await;
    });
    Ok(sender)
}
