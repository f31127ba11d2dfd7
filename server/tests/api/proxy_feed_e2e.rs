//! The file the server writes drives the real `agenthold-proxy` binary: a request sent with the
//! sandbox's proxy environment (from `proxy_feed::sandbox_proxy_env`) and its placeholder
//! reaches a loopback HTTPS stand-in for `api.anthropic.com` (the test-only upstream override)
//! with the real value in `x-api-key`; after detaching, the proxy refuses the host.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use agenthold_server::ids::AgentId;
use agenthold_server::secrets::master_key::MasterKey;

use crate::support::TestServer;
use crate::support::proxy::{DEADLINE, Proxy, StandIn, read_head};
use crate::support::secrets::{admin, attach_anthropic_secret, database};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// `CONNECT api.anthropic.com:443` through `proxy` with these credentials; the status, and the
/// stream when it is 200.
async fn connect(proxy: &str, user: &str, password: &str) -> (u16, Option<TcpStream>) {
    let mut stream = TcpStream::connect(proxy).await.expect("connect to the proxy");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let head = format!(
        "CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: api.anthropic.com:443\r\nProxy-Authorization: Basic {basic}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("write CONNECT");
    let response = read_head(&mut stream).await.expect("a CONNECT response");
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, (status == 200).then_some(stream))
}

/// Sends `GET /v1/models` with `x-api-key: placeholder` over TLS inside the tunnel, trusting only
/// the proxy's CA; returns the response status.
async fn get_through(stream: TcpStream, proxy_ca: &Path, placeholder: &str) -> u16 {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(proxy_ca).expect("the proxy's CA")).expect("root");
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = ServerName::try_from("api.anthropic.com").expect("name");
    let mut tls =
        tokio::time::timeout(DEADLINE, tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, stream))
            .await
            .expect("TLS in time")
            .expect("TLS with the proxy's leaf for api.anthropic.com");
    let request = format!(
        "GET /v1/models HTTP/1.1\r\nHost: api.anthropic.com\r\nx-api-key: {placeholder}\r\nConnection: close\r\n\r\n"
    );
    tls.write_all(request.as_bytes()).await.expect("write request");
    let head = read_head(&mut tls).await.expect("a response");
    head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[tokio::test]
async fn a_request_with_the_sandbox_environment_gets_the_real_value_through_the_real_proxy() {
    let dir = std::env::temp_dir().join(format!("agenthold-feed-e2e-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("dir");
    let stand_in = StandIn::start(&dir, "ok").await;
    let overrides = json!({"api.anthropic.com:443": {"addr": stand_in.addr.to_string(), "ca_cert": stand_in.root}});
    let server = TestServer::start_with(&[("AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES", &overrides.to_string())]).await;
    let config = server.data_dir.join("proxy.json");
    let agent = server.create_agent(json!({})).await;
    let (_, value) = attach_anthropic_secret(&server, &agent).await;
    let attach = format!("/api/v1/agents/{agent}/secrets/ANTHROPIC_API_KEY");

    // What the harness would get: the proxy environment and the placeholder.
    let pool = database(&server).await;
    let key = MasterKey::from_file(&server.data_dir.join("master.key")).expect("the server's master key");
    let agent_id = AgentId(agent.parse().expect("uuid"));
    let proxy = Proxy::start(&config, "127.0.0.1:0", dir.join("proxy.log"));
    let env = agenthold_server::proxy_feed::sandbox_proxy_env(&pool, &key, agent_id, &proxy.addr)
        .await
        .expect("the proxy environment");
    let url = env.iter().find(|(k, _)| k == "HTTPS_PROXY").map(|(_, v)| v.clone()).expect("HTTPS_PROXY");
    let (user, password) = url
        .strip_prefix("http://")
        .and_then(|rest| rest.rsplit_once('@'))
        .and_then(|(creds, _)| creds.split_once(':'))
        .map(|(u, p)| (u.to_owned(), p.to_owned()))
        .expect("http://user:password@host:port");
    let placeholder = agenthold_server::secrets::sandbox_env(&pool, agent_id)
        .await
        .expect("the placeholder env")
        .into_iter()
        .find(|(name, _)| name == "ANTHROPIC_API_KEY")
        .map(|(_, placeholder)| placeholder)
        .expect("ANTHROPIC_API_KEY");
    let proxy_ca = server.data_dir.join("proxy-ca").join("ca.pem");

    // The proxy follows the server's file: once the rule is in, the stand-in gets the value.
    let start = Instant::now();
    let status = loop {
        if let (200, Some(stream)) = connect(&proxy.addr, &user, &password).await {
            break get_through(stream, &proxy_ca, &placeholder).await;
        }
        assert!(start.elapsed() < DEADLINE, "the proxy never intercepted api.anthropic.com for the sandbox");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status, 200);
    assert_eq!(stand_in.seen.lock().expect("seen").clone(), [Some(value.clone())], "the real value, in x-api-key");

    // A wrong password is refused.
    assert_eq!(connect(&proxy.addr, &user, "not-the-password").await.0, 407);

    // Detach: within seconds the proxy refuses the host for this sandbox.
    assert_eq!(admin(&server, "DELETE", &attach, json!({})).await.0, 204);
    let start = Instant::now();
    loop {
        let (status, _) = connect(&proxy.addr, &user, &password).await;
        if status == 403 {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "the proxy still lets the sandbox reach api.anthropic.com");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("after detaching, the proxy refused the host within {:?}", start.elapsed());
    assert_eq!(stand_in.seen.lock().expect("seen").len(), 1);
    assert!(!server.log().contains(&value) && !server.log().contains(&password), "nothing secret in the server's log");
    let _ = std::fs::remove_dir_all(&dir);
}
