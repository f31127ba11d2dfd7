//! `fetch` against a real (loopback) CONNECT proxy and HTTPS server: the proxy sees `Basic`
//! credentials from the proxy URL, the server sees the expanded header, TLS trusts exactly
//! `SSL_CERT_FILE`, a refused CONNECT is reported, and the body is bounded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agenthold_plumbing::tls::server_config;
use agenthold_sandboxd::fakeagent::fetch::{self, MAX_BODY};
use rustls::pki_types::PrivateKeyDer;

/// A loopback HTTPS server for `localhost` answering every request with `body`, recording the
/// request heads; and the PEM file of its root.
fn https_server(body: Vec<u8>) -> (u16, PathBuf, Arc<Mutex<Vec<String>>>) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let root_key = rcgen::KeyPair::generate().unwrap();
    let root = params.self_signed(&root_key).unwrap();
    let issuer = rcgen::Issuer::new(params, root_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf =
        rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap().signed_by(&leaf_key, &issuer).unwrap();
    let file = std::env::temp_dir().join(format!("fakeagent-fetch-root-{}-{}.pem", std::process::id(), body.len()));
    std::fs::write(&file, root.pem()).unwrap();
    let leaf_key = PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let config = Arc::new(server_config(vec![leaf.der().clone()], leaf_key, &[]).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&heads);
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let connection = rustls::ServerConnection::new(Arc::clone(&config)).unwrap();
            let mut tls = rustls::StreamOwned::new(connection, stream);
            let Some(head) = read_head(&mut tls) else { continue };
            record.lock().unwrap().push(head);
            let header = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
            let _ = tls.write_all(header.as_bytes()).and_then(|()| tls.write_all(&body));
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    (port, file, heads)
}

fn read_head(stream: &mut impl Read) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// A CONNECT proxy that tunnels to 127.0.0.1 when the credentials are `user:p@ss`, and answers
/// 403 otherwise; records the `Proxy-Authorization` values.
fn connect_proxy() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    std::thread::spawn(move || {
        for mut client in listener.incoming().map_while(Result::ok) {
            let Some(head) = read_head(&mut client) else { continue };
            let target_port: u16 =
                head.split_whitespace().nth(1).and_then(|a| a.rsplit_once(':')).unwrap().1.parse().unwrap();
            let auth = BufReader::new(head.as_bytes())
                .lines()
                .map_while(Result::ok)
                .find_map(|l| l.strip_prefix("Proxy-Authorization: ").map(str::to_owned))
                .unwrap_or_default();
            record.lock().unwrap().push(auth.clone());
            // "user:p@ss" in base64.
            if auth != "Basic dXNlcjpwQHNz" {
                let body = "refused by the test proxy";
                let _ = write!(client, "HTTP/1.1 403 Forbidden\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                continue;
            }
            let upstream = TcpStream::connect(("127.0.0.1", target_port)).unwrap();
            client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").unwrap();
            let (mut c2, mut u2) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
            std::thread::spawn(move || std::io::copy(&mut c2, &mut u2));
            let (mut c, mut u) = (client, upstream);
            std::thread::spawn(move || std::io::copy(&mut u, &mut c));
        }
    });
    (port, seen)
}

fn env_of(vars: Vec<(&'static str, String)>) -> impl Fn(&str) -> Option<String> {
    move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())
}

#[test]
fn a_fetch_goes_through_the_proxy_with_basic_credentials_and_the_expanded_header() {
    let (server, root, heads) = https_server(b"hello from the server".to_vec());
    let (proxy, auths) = connect_proxy();
    let env = env_of(vec![
        ("HTTPS_PROXY", format!("http://user:p%40ss@127.0.0.1:{proxy}")),
        ("SSL_CERT_FILE", root.display().to_string()),
        ("KEY", "placeholder-123".to_owned()),
    ]);
    let headers = vec![("x-api-key".to_owned(), fetch::expand("$KEY", &env))];
    let url = format!("https://localhost:{server}/v1/messages");
    let response = fetch::get(&url, &headers, &env).unwrap();
    assert_eq!((response.status, response.from_proxy), (200, false), "{}", response.status_line);
    assert_eq!(response.body, b"hello from the server");
    assert_eq!(auths.lock().unwrap().clone(), ["Basic dXNlcjpwQHNz"]);
    let head = heads.lock().unwrap()[0].clone();
    assert!(head.starts_with("GET /v1/messages HTTP/1.1\r\n"), "{head}");
    assert!(head.contains("\r\nx-api-key: placeholder-123\r\n"), "{head}");

    // Another root in SSL_CERT_FILE: the server's certificate is not trusted.
    let (_, other_root, _) = https_server(vec![b'x'; 3]);
    let untrusting = env_of(vec![
        ("HTTPS_PROXY", format!("http://user:p%40ss@127.0.0.1:{proxy}")),
        ("SSL_CERT_FILE", other_root.display().to_string()),
    ]);
    let err = fetch::get(&url, &[], &untrusting).unwrap_err();
    assert!(err.contains("UnknownIssuer") || err.contains("certificate"), "{err}");
    std::fs::remove_file(root).ok();
    std::fs::remove_file(other_root).ok();
}

#[test]
fn a_refused_connect_is_reported_and_a_big_body_is_cut_at_the_bound() {
    let (server, root, _) = https_server(vec![b'a'; MAX_BODY + 4096]);
    let (proxy, _) = connect_proxy();
    let url = format!("https://localhost:{server}/");
    let wrong = env_of(vec![("HTTPS_PROXY", format!("http://user:wrong@127.0.0.1:{proxy}"))]);
    let refused = fetch::get(&url, &[], &wrong).unwrap();
    assert_eq!((refused.status, refused.from_proxy), (403, true));
    assert_eq!(refused.body, b"refused by the test proxy");

    let right = env_of(vec![
        ("https_proxy", format!("http://user:p%40ss@127.0.0.1:{proxy}")),
        ("SSL_CERT_FILE", root.display().to_string()),
    ]);
    let big = fetch::get(&url, &[], &right).unwrap();
    assert_eq!(big.status, 200);
    assert_eq!(big.body.len(), MAX_BODY);
    std::fs::remove_file(root).ok();
}
