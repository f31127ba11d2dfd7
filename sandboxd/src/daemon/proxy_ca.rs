//! The egress proxy's CA in the sandbox's trust store, installed once at start (before any
//! process runs) when the server hands it over in `AGENTHOLD_PROXY_CA_PEM`: the CA file at
//! [`CA_FILE`] (0644) and the full bundle [`BUNDLE`] made to contain it, by
//! `update-ca-certificates` when the image has it (bounded by [`UPDATE_TIMEOUT`]) and by
//! appending otherwise. Idempotent: a bundle that already holds the CA is left alone. Every path
//! is under a root directory so tests never touch the real `/etc`.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

/// The CA file (relative to the root); `NODE_EXTRA_CA_CERTS` points here.
pub const CA_FILE: &str = "usr/local/share/ca-certificates/agenthold-proxy.crt";
/// The full bundle (relative to the root); `SSL_CERT_FILE` and its kin point here.
pub const BUNDLE: &str = "etc/ssl/certs/ca-certificates.crt";
/// How long `update-ca-certificates` may take before sandboxd appends the CA itself.
pub const UPDATE_TIMEOUT: Duration = Duration::from_secs(30);
/// Where `update-ca-certificates` is looked for (relative to the root).
const UPDATERS: &[&str] = &["usr/sbin/update-ca-certificates", "usr/bin/update-ca-certificates"];

/// The trust variables a harness gets beside the proxy variables (PROXY.md §3.1): every
/// variable that replaces the default store points at the full bundle; only
/// `NODE_EXTRA_CA_CERTS` (additive) points at the lone CA file.
pub fn trust_env() -> Vec<(String, String)> {
    let (ca_file, bundle) = (format!("/{CA_FILE}"), format!("/{BUNDLE}"));
    let mut env = vec![("NODE_EXTRA_CA_CERTS".to_owned(), ca_file)];
    env.extend(
        [
            "SSL_CERT_FILE",
            "REQUESTS_CA_BUNDLE",
            "CURL_CA_BUNDLE",
            "CODEX_CA_CERTIFICATE",
            "GIT_SSL_CAINFO",
            // pip's own setting (it may not read the system store) and cargo's.
            "PIP_CERT",
            "CARGO_HTTP_CAINFO",
        ]
        .into_iter()
        .map(|name| (name.to_owned(), bundle.clone())),
    );
    env
}

/// How the bundle came to hold the CA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installed {
    /// It already did (a restart).
    AlreadyThere,
    /// `update-ca-certificates` rebuilt it.
    Updated,
    /// The CA was appended to it (no updater, or the updater failed or left it out).
    Appended,
}

/// Installs the CA from `AGENTHOLD_PROXY_CA_PEM`, if set, under `/`; a failure is logged and
/// sandboxd goes on (the harness's TLS to the proxy then fails, which its output shows).
pub async fn install_from_env() {
    let Some(pem) = std::env::var("AGENTHOLD_PROXY_CA_PEM").ok().filter(|v| !v.trim().is_empty()) else { return };
    match install(Path::new("/"), &pem, None).await {
        Ok(how) => eprintln!("sandboxd: the egress proxy's CA is trusted ({how:?})"),
        Err(err) => eprintln!("sandboxd: installing the egress proxy's CA: {err}"),
    }
}

/// Installs the CA under `root` (`/` in a sandbox). `updater` overrides the
/// `update-ca-certificates` lookup (tests); `None` looks under the root.
pub async fn install(root: &Path, pem: &str, updater: Option<PathBuf>) -> Result<Installed, String> {
    let certs = agenthold_plumbing::tls::pem::parse_certs("AGENTHOLD_PROXY_CA_PEM", pem).map_err(|e| e.to_string())?;
    let ca_file = root.join(CA_FILE);
    let bundle = root.join(BUNDLE);
    write_ca_file(&ca_file, pem)?;
    if bundle_holds(&bundle, &certs) {
        return Ok(Installed::AlreadyThere);
    }
    let updater = updater.or_else(|| UPDATERS.iter().map(|p| root.join(p)).find(|p| p.is_file()));
    if let Some(updater) = updater {
        run_updater(&updater).await;
        if bundle_holds(&bundle, &certs) {
            return Ok(Installed::Updated);
        }
    }
    append(&bundle, pem)?;
    Ok(Installed::Appended)
}

fn write_ca_file(path: &Path, pem: &str) -> Result<(), String> {
    let shown = path.display();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|err| format!("creating {}: {err}", dir.display()))?;
    }
    std::fs::write(path, ensure_newline(pem)).map_err(|err| format!("writing {shown}: {err}"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
        .map_err(|err| format!("setting the mode of {shown}: {err}"))
}

/// Whether every certificate of the CA is in the bundle (an unreadable bundle holds nothing).
fn bundle_holds(bundle: &Path, certs: &[CertificateDer<'_>]) -> bool {
    let Ok(iter) = CertificateDer::pem_file_iter(bundle) else { return false };
    let held: Vec<CertificateDer<'static>> = iter.filter_map(Result::ok).collect();
    certs.iter().all(|cert| held.iter().any(|h| h.as_ref() == cert.as_ref()))
}

/// Runs the updater with a deadline; its output goes to sandboxd's log (stderr).
async fn run_updater(updater: &Path) {
    let mut command = tokio::process::Command::new(updater);
    command.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::inherit()).kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            eprintln!("sandboxd: running {}: {err}", updater.display());
            return;
        }
    };
    match tokio::time::timeout(UPDATE_TIMEOUT, child.wait()).await {
        Ok(Ok(status)) if status.success() => {}
        Ok(Ok(status)) => eprintln!("sandboxd: {} failed ({status})", updater.display()),
        Ok(Err(err)) => eprintln!("sandboxd: waiting for {}: {err}", updater.display()),
        Err(_) => {
            eprintln!("sandboxd: {} took longer than {UPDATE_TIMEOUT:?}; stopped", updater.display());
            let _ = child.kill().await;
        }
    }
}

fn append(bundle: &Path, pem: &str) -> Result<(), String> {
    let shown = bundle.display();
    if let Some(dir) = bundle.parent() {
        std::fs::create_dir_all(dir).map_err(|err| format!("creating {}: {err}", dir.display()))?;
    }
    let existing = std::fs::read(bundle).unwrap_or_default();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(bundle)
        .map_err(|err| format!("opening {shown}: {err}"))?;
    let mut text = String::new();
    if !existing.is_empty() && !existing.ends_with(b"\n") {
        text.push('\n');
    }
    text.push_str(&ensure_newline(pem));
    file.write_all(text.as_bytes()).map_err(|err| format!("appending to {shown}: {err}"))?;
    let _ = std::fs::set_permissions(bundle, std::fs::Permissions::from_mode(0o644));
    Ok(())
}

fn ensure_newline(pem: &str) -> String {
    let mut text = pem.trim_end().to_owned();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca_pem(name: &str) -> String {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().expect("key");
        params.self_signed(&key).expect("cert").pem()
    }

    fn temp_root(name: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("sandboxd-proxy-ca-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("root");
        root
    }

    fn count(root: &Path, pem: &str) -> usize {
        let bundle = std::fs::read_to_string(root.join(BUNDLE)).expect("bundle");
        let body = pem.lines().nth(1).expect("a PEM body line");
        bundle.matches(body).count()
    }

    #[test]
    fn only_node_extra_ca_certs_points_at_the_lone_ca_file() {
        for (name, value) in trust_env() {
            let expected = if name == "NODE_EXTRA_CA_CERTS" {
                "/usr/local/share/ca-certificates/agenthold-proxy.crt"
            } else {
                "/etc/ssl/certs/ca-certificates.crt"
            };
            assert_eq!(value, expected, "{name}");
        }
        assert_eq!(trust_env().len(), 8);
    }

    #[tokio::test]
    async fn an_image_without_a_store_gets_the_file_and_a_bundle_once() {
        let root = temp_root("bare");
        let pem = ca_pem("agenthold egress test CA");
        let none = Some(root.join("no-updater"));
        assert_eq!(install(&root, &pem, none.clone()).await, Ok(Installed::Appended));
        let mode = std::fs::metadata(root.join(CA_FILE)).expect("ca file").permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
        assert_eq!(count(&root, &pem), 1);
        // A restart does not append again.
        assert_eq!(install(&root, &pem, none).await, Ok(Installed::AlreadyThere));
        assert_eq!(count(&root, &pem), 1);
        std::fs::remove_dir_all(root).ok();
    }

    #[tokio::test]
    async fn an_existing_bundle_keeps_its_roots_and_gains_the_ca() {
        let root = temp_root("existing");
        let other = ca_pem("some public root");
        std::fs::create_dir_all(root.join(BUNDLE).parent().expect("dir")).expect("dirs");
        std::fs::write(root.join(BUNDLE), other.trim_end()).expect("bundle without a final newline");
        let pem = ca_pem("agenthold egress test CA");
        assert_eq!(install(&root, &pem, None).await, Ok(Installed::Appended));
        assert_eq!((count(&root, &other), count(&root, &pem)), (1, 1));
        let parsed = CertificateDer::pem_file_iter(root.join(BUNDLE)).expect("bundle").count();
        assert_eq!(parsed, 2, "both certificates still parse");
        std::fs::remove_dir_all(root).ok();
    }

    #[tokio::test]
    async fn the_updater_is_used_when_present_and_a_failing_one_falls_back() {
        let root = temp_root("updater");
        let pem = ca_pem("agenthold egress test CA");
        // A stand-in for update-ca-certificates: the bundle from the CA directory.
        let updater = root.join("update-ca-certificates");
        let script = format!(
            "#!/bin/sh\nmkdir -p {dir} && cat {root}/usr/local/share/ca-certificates/*.crt > {bundle}\n",
            dir = root.join(BUNDLE).parent().expect("dir").display(),
            root = root.display(),
            bundle = root.join(BUNDLE).display()
        );
        std::fs::write(&updater, script).expect("script");
        std::fs::set_permissions(&updater, std::fs::Permissions::from_mode(0o755)).expect("mode");
        assert_eq!(install(&root, &pem, Some(updater.clone())).await, Ok(Installed::Updated));
        assert_eq!(count(&root, &pem), 1);

        let root2 = temp_root("failing");
        let failing = root2.join("update-ca-certificates");
        std::fs::write(&failing, "#!/bin/sh\necho broken >&2\nexit 3\n").expect("script");
        std::fs::set_permissions(&failing, std::fs::Permissions::from_mode(0o755)).expect("mode");
        assert_eq!(install(&root2, &pem, Some(failing)).await, Ok(Installed::Appended));
        assert_eq!(count(&root2, &pem), 1);
        std::fs::remove_dir_all(root).ok();
        std::fs::remove_dir_all(root2).ok();
    }

    #[tokio::test]
    async fn not_a_certificate_is_an_error_and_writes_nothing() {
        let root = temp_root("garbage");
        assert!(install(&root, "not a certificate", None).await.is_err());
        assert!(!root.join(CA_FILE).exists());
        std::fs::remove_dir_all(root).ok();
    }
}
