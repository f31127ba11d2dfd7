//! TLS setup: rustls with the ring provider (the crypto stack already in the tree, never a
//! second one such as aws-lc-rs), TLS 1.2 and 1.3 with rustls' safe defaults.
//!
//! - [`ClientTls`]: the servers a client trusts (the public web roots, compiled in so an image
//!   without a CA bundle still works, and/or CAs given as PEM) and the ALPN protocols it offers.
//! - [`server_config`]: a server's certificate chain and key, and the ALPN protocols it accepts.
//! - [`pem`]: certificates and keys read from PEM files or text; PEM without what was asked for
//!   is an error, naming where it came from.

mod client;
pub mod pem;
mod server;

use std::sync::{Arc, OnceLock};

pub use client::ClientTls;
use rustls::crypto::CryptoProvider;
pub use server::server_config;

/// The ALPN name of HTTP/1.1, the only HTTP version agenthold speaks (WebSocket upgrades need
/// it; nothing is built with HTTP/2).
pub const HTTP_1_1: &[u8] = b"http/1.1";

/// The one crypto provider (ring) every configuration is built with.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())).clone()
}

/// Why a TLS configuration could not be made. The messages name the file (or the variable) at
/// fault; callers add what it was for.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// PEM that does not read: a missing file, a broken section.
    #[error("{origin}: {error}")]
    Pem {
        /// Where the PEM came from (a path, a variable's name).
        origin: String,
        /// What went wrong.
        error: rustls_pki_types::pem::Error,
    },
    /// PEM without what was asked for (a certificate, a private key).
    #[error("{origin}: no {wanted} in it")]
    Missing {
        /// Where the PEM came from.
        origin: String,
        /// `PEM certificate`, `PEM private key`, `usable certificate`.
        wanted: &'static str,
    },
    /// A certificate that cannot be a trust anchor.
    #[error("{origin}: a certificate that cannot be trusted: {error}")]
    Untrustable {
        /// Where the certificate came from.
        origin: String,
        /// Why.
        error: rustls::Error,
    },
    /// A certificate chain and a private key that do not go together (or are unusable).
    #[error("the certificate and key do not go together: {0}")]
    Mismatch(rustls::Error),
    /// The provider offers none of the protocol versions (never with ring).
    #[error("TLS setup: {0}")]
    Setup(rustls::Error),
}

#[cfg(test)]
mod tests;
