//! The server's side of the tunnel's liveness and version rules: a sandboxd speaking another
//! protocol version is refused with a reason, and a tunnel silent for the configured time is
//! dropped.

use std::time::Duration;

use agenthold_sandboxd::protocol::{Control, PROTOCOL_VERSION};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::TestServer;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A local-driver server whose agent's real sandboxd is gone; returns its sandbox token.
async fn server_without_sandboxd(silent_secs: &str) -> (TestServer, String) {
    let server =
        TestServer::start_with(&[("AGENTHOLD_DRIVER", "local"), ("AGENTHOLD_SILENT_TUNNEL_SECS", silent_secs)]).await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text one").await;
    server.wait_turns(&session, 1, Duration::from_secs(60)).await;
    let sandbox_dir = server.data_dir.join("sandboxes").join(&agent);
    let launch: Value =
        serde_json::from_slice(&std::fs::read(sandbox_dir.join("launch.json")).expect("launch file")).expect("json");
    let token = launch["token"].as_str().expect("token").to_owned();
    let pid: u32 = std::fs::read_to_string(sandbox_dir.join("sandboxd.pid")).expect("pid").trim().parse().expect("pid");
    agenthold_server::sandbox::local::kill_group(pid);
    (server, token)
}

async fn dial(server: &TestServer, token: &str, protocol: u32) -> Socket {
    let url = format!("ws://127.0.0.1:{}/tunnel", server.tunnel_port());
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert("authorization", format!("Bearer {token}").parse().expect("header"));
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.expect("dialing the tunnel");
    let hello = Control::Hello { protocol, version: "test".to_owned(), processes: Vec::new() };
    socket.send(Message::Text(serde_json::to_string(&hello).expect("hello").into())).await.expect("hello");
    socket
}

/// Reads until the server closes; returns the close frame's code and reason, if one came.
async fn closed(socket: &mut Socket, within: Duration) -> Option<(u16, String)> {
    let read = async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Close(frame))) => return frame.map(|f| (u16::from(f.code), f.reason.to_string())),
                Some(Ok(_)) => {}
                None | Some(Err(_)) => return None,
            }
        }
    };
    tokio::time::timeout(within, read).await.expect("the server closes the tunnel")
}

#[tokio::test]
async fn a_sandboxd_of_another_protocol_version_is_refused_with_a_reason() {
    let (server, token) = server_without_sandboxd("45").await;
    let mut socket = dial(&server, &token, PROTOCOL_VERSION + 1).await;
    let (code, reason) = closed(&mut socket, Duration::from_secs(10)).await.expect("a close frame");
    assert_eq!(code, 1002);
    assert!(reason.contains(&format!("tunnel protocol {}", PROTOCOL_VERSION + 1)), "{reason}");
    assert!(server.log().contains("refusing sandboxd: it speaks tunnel protocol"), "a clear log line");
}

#[tokio::test]
async fn a_silent_tunnel_is_dropped() {
    let (server, token) = server_without_sandboxd("2").await;
    let mut socket = dial(&server, &token, PROTOCOL_VERSION).await;
    let started = tokio::time::Instant::now();
    // Answer nothing (the client sends no pings of its own): the server drops the tunnel.
    closed(&mut socket, Duration::from_secs(15)).await;
    let after = started.elapsed();
    assert!(after >= Duration::from_millis(1500), "not before the limit: {after:?}");
    assert!(server.log().contains("dropping the tunnel"), "the server says why");
}
