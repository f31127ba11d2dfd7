//! The proxy's own CA: making it (`ca init`), loading it, and minting a leaf per intercepted host
//! (a fresh key each, cached for its lifetime). The CA is `pathlen:0` and name-constrained to the
//! hosts it was made for, so its key is worthless for any other domain.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agenthold_plumbing::tls;
use parking_lot::Mutex;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, GeneralSubtree, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, NameConstraints, SerialNumber,
};
use rustls::ServerConfig;
use rustls::client::danger::ServerCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

/// The hosts a CA made by `ca init` covers unless told otherwise: the provider hosts the
/// secret presets inject into, and the two public git hosts a `git_token` secret most often
/// names (any other git host: `--host`).
pub const PRESET_HOSTS: &[&str] = &[
    "api.anthropic.com",
    "api.openai.com",
    "chatgpt.com",
    "auth.openai.com",
    "openrouter.ai",
    "mcp.agenthold.internal",
    "github.com",
    "gitlab.com",
];

const LEAF_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);
const LEAF_RENEW_BEFORE: Duration = Duration::from_secs(24 * 3600);
const CA_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
const BACKDATE: Duration = Duration::from_secs(3600);

/// Why the CA could not be made, loaded or used.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// A file could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// Which file.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The certificate or key is not usable.
    #[error("the CA {0} is not usable")]
    Invalid(&'static str),
    /// A leaf for this host does not verify under the CA (outside its name constraints, or the
    /// key does not belong to the certificate).
    #[error("the CA does not cover {0} (its name constraints or key do not allow a certificate for it)")]
    DoesNotCover(String),
    /// Certificate generation failed.
    #[error("certificate generation failed")]
    Generate,
}

fn distinguished_name() -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "agenthold");
    dn.push(DnType::CommonName, "agenthold egress proxy CA");
    dn
}

fn ca_key_usages() -> Vec<KeyUsagePurpose> {
    vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign]
}

fn offset(at: SystemTime) -> time::OffsetDateTime {
    time::OffsetDateTime::from(at)
}

fn random_serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] &= 0x7f;
    SerialNumber::from_slice(&bytes)
}

/// Writes `ca.pem` and `ca-key.pem` (mode 0600) into `dir` unless both exist. Returns whether
/// it made them. `hosts` are the name constraints (DNS subtrees).
pub fn init(dir: &Path, hosts: &[String]) -> Result<bool, CaError> {
    let cert_path = dir.join("ca.pem");
    let key_path = dir.join("ca-key.pem");
    match (cert_path.exists(), key_path.exists()) {
        (true, true) => return Ok(false),
        (false, false) => {}
        _ => return Err(CaError::Invalid("directory holds only one of ca.pem and ca-key.pem")),
    }
    let io = |what: &str| {
        let what = what.to_owned();
        move |source| CaError::Io { what, source }
    };
    std::fs::create_dir_all(dir).map_err(io("creating the CA directory"))?;
    let (cert_pem, key_pem) = generate(hosts)?;
    let mut key_file = std::fs::OpenOptions::new();
    key_file.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut key_file, 0o600);
    key_file.open(&key_path).and_then(|mut f| f.write_all(key_pem.as_bytes())).map_err(io("writing ca-key.pem"))?;
    std::fs::write(&cert_path, cert_pem).map_err(io("writing ca.pem"))?;
    Ok(true)
}

/// A new CA certificate and key (PEM) constrained to `hosts`.
pub fn generate(hosts: &[String]) -> Result<(String, String), CaError> {
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name();
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = ca_key_usages();
    params.name_constraints = Some(NameConstraints {
        permitted_subtrees: hosts.iter().map(|h| GeneralSubtree::DnsName(h.clone())).collect(),
        excluded_subtrees: Vec::new(),
    });
    let now = SystemTime::now();
    params.not_before = offset(now - BACKDATE);
    params.not_after = offset(now + CA_LIFETIME);
    params.serial_number = Some(random_serial());
    let key = KeyPair::generate().map_err(|_| CaError::Generate)?;
    let cert = params.self_signed(&key).map_err(|_| CaError::Generate)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A leaf certificate ready to serve, with when to make a new one.
struct Leaf {
    config: Arc<ServerConfig>,
    cert: CertificateDer<'static>,
    renew_at: SystemTime,
}

/// A loaded CA and its leaf cache.
pub struct Ca {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    cert: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
    leaves: Mutex<HashMap<String, Leaf>>,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ca { .. }")
    }
}

impl Ca {
    /// Loads `cert` and `key` (PEM). The certificate must have been made by [`init`]/[`generate`]
    /// (its subject is fixed); [`Ca::check_covers`] proves the pair works for a host.
    pub fn load(cert: &Path, key: &Path) -> Result<Self, CaError> {
        let cert_pem = std::fs::read(cert)
            .map_err(|source| CaError::Io { what: format!("reading {}", cert.display()), source })?;
        let key_pem =
            std::fs::read(key).map_err(|source| CaError::Io { what: format!("reading {}", key.display()), source })?;
        Self::from_pem(cert_pem, key_pem)
    }

    /// Builds a CA from PEM bytes.
    pub fn from_pem(cert_pem: Vec<u8>, key_pem: Vec<u8>) -> Result<Self, CaError> {
        let cert = CertificateDer::from_pem_slice(&cert_pem).map_err(|_| CaError::Invalid("certificate"))?;
        let key_text = std::str::from_utf8(&key_pem).map_err(|_| CaError::Invalid("key"))?;
        let key = KeyPair::from_pem(key_text).map_err(|_| CaError::Invalid("key"))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name();
        params.key_usages = ca_key_usages();
        let issuer = Issuer::new(params, key);
        Ok(Self { cert_pem, key_pem, cert, issuer, leaves: Mutex::new(HashMap::new()) })
    }

    /// Whether this CA was loaded from exactly these bytes (so a reload can keep its cache).
    pub fn same_files(&self, cert_pem: &[u8], key_pem: &[u8]) -> bool {
        self.cert_pem == cert_pem && crate::secret::constant_time_eq(&self.key_pem, key_pem)
    }

    /// The CA certificate (DER).
    pub fn cert(&self) -> &CertificateDer<'static> {
        &self.cert
    }

    /// Mints (or reuses) a leaf for `host` and checks that a client trusting only this CA
    /// accepts it. Run for every intercepted host when a configuration is loaded.
    pub fn check_covers(&self, host: &str) -> Result<(), CaError> {
        let leaf_der = self.mint(host)?.1;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.cert.clone()).map_err(|_| CaError::Invalid("certificate"))?;
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), tls::provider())
            .build()
            .map_err(|_| CaError::Invalid("certificate"))?;
        let name = ServerName::try_from(host.to_owned()).map_err(|_| CaError::DoesNotCover(host.to_owned()))?;
        verifier
            .verify_server_cert(&leaf_der, &[], &name, &[], UnixTime::now())
            .map_err(|_| CaError::DoesNotCover(host.to_owned()))?;
        Ok(())
    }

    /// The TLS server configuration for `host` (ALPN `http/1.1` only), minting a leaf with a
    /// fresh key when there is none or it is near its end.
    pub fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, CaError> {
        Ok(self.mint(host)?.0)
    }

    /// Drops cached leaves for hosts not in `keep`.
    pub fn retain(&self, keep: &dyn Fn(&str) -> bool) {
        self.leaves.lock().retain(|host, _| keep(host));
    }

    fn mint(&self, host: &str) -> Result<(Arc<ServerConfig>, CertificateDer<'static>), CaError> {
        let now = SystemTime::now();
        if let Some(leaf) = self.leaves.lock().get(host)
            && leaf.renew_at > now
        {
            return Ok((leaf.config.clone(), leaf.cert.clone()));
        }
        let mut params =
            CertificateParams::new(vec![host.to_owned()]).map_err(|_| CaError::DoesNotCover(host.to_owned()))?;
        params.distinguished_name = DistinguishedName::new();
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.not_before = offset(now - BACKDATE);
        params.not_after = offset(now + LEAF_LIFETIME);
        params.serial_number = Some(random_serial());
        let key = KeyPair::generate().map_err(|_| CaError::Generate)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(|_| CaError::Generate)?;
        let der = cert.der().clone();
        let key_der = PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let config = tls::server_config(vec![der.clone()], key_der, &[tls::HTTP_1_1]).map_err(|_| CaError::Generate)?;
        let config = Arc::new(config);
        self.leaves.lock().insert(
            host.to_owned(),
            Leaf { config: config.clone(), cert: der.clone(), renew_at: now + LEAF_LIFETIME - LEAF_RENEW_BEFORE },
        );
        Ok((config, der))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_verify_inside_the_constraints_only() {
        let (cert, key) = generate(&["api.anthropic.com".to_owned(), "chatgpt.com".to_owned()]).expect("generate");
        let ca = Ca::from_pem(cert.into_bytes(), key.into_bytes()).expect("load");
        ca.check_covers("api.anthropic.com").expect("covered");
        ca.check_covers("ab.chatgpt.com").expect("subtree covered");
        assert!(matches!(ca.check_covers("evil.example"), Err(CaError::DoesNotCover(_))));
        assert!(matches!(ca.check_covers("api.openai.com"), Err(CaError::DoesNotCover(_))));
    }

    #[test]
    fn a_key_of_another_ca_does_not_verify() {
        let (cert, _) = generate(&["api.anthropic.com".to_owned()]).expect("generate");
        let (_, other_key) = generate(&["api.anthropic.com".to_owned()]).expect("generate");
        let ca = Ca::from_pem(cert.into_bytes(), other_key.into_bytes()).expect("load");
        assert!(ca.check_covers("api.anthropic.com").is_err());
    }

    #[test]
    fn init_writes_a_private_key_once() {
        let dir = std::env::temp_dir().join(format!("agenthold-proxy-ca-{}", rand::random::<u64>()));
        assert!(init(&dir, &["api.anthropic.com".to_owned()]).expect("init"));
        let before = std::fs::read(dir.join("ca.pem")).expect("ca.pem");
        assert!(!init(&dir, &["other.example".to_owned()]).expect("second init"));
        assert_eq!(std::fs::read(dir.join("ca.pem")).expect("ca.pem"), before);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("ca-key.pem")).expect("key").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
