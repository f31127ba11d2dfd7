//! A terminal whose client stopped reading must not freeze its agent: the tunnel reader never
//! waits for a browser, a stalled terminal is closed (in the server and in sandboxd), and the
//! agent's sessions carry on.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::TestServer;

/// The server's WebSocket send timeout in this test.
const SEND_TIMEOUT_SECS: u64 = 3;

/// Whether a process named `name` runs in the agent's container.
fn runs_in_sandbox(server: &TestServer, agent: &str, name: &str) -> bool {
    let output = std::process::Command::new("docker")
        .args([
            "exec",
            &server.container(agent),
            "sh",
            "-c",
            &format!("for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = {name} ] && exit 0; done; exit 1"),
        ])
        .status()
        .expect("docker exec");
    output.success()
}

#[tokio::test]
async fn a_terminal_that_is_not_read_neither_stalls_the_agent_nor_stays_open() {
    let send_timeout = SEND_TIMEOUT_SECS.to_string();
    let server = TestServer::start_with(&[("AGENTHOLD_WS_SEND_TIMEOUT_SECS", &send_timeout)]).await;
    let agent = server.create_agent(json!({})).await;
    let first = server.create_session(&agent).await;
    server.prompt(&first, "text warm up").await;
    server.wait_turns(&first, 1, Duration::from_secs(90)).await;

    // A terminal flooding output to a client that never reads it.
    let url = format!("{}/api/v1/agents/{agent}/terminal", server.url.replace("http://", "ws://"));
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert("authorization", format!("Bearer {}", server.token).parse().expect("header"));
    let (mut terminal, _) = tokio_tungstenite::connect_async(request).await.expect("opening the terminal");
    terminal.send(Message::Binary(b"yes\n".to_vec().into())).await.expect("input");

    // Another session of the same agent: its turn spans a pause (by then the terminal's reader
    // has long stopped), and each of its events comes within the send timeout of the last.
    let second = server.create_session(&agent).await;
    let mut watcher = server.watch(&second, "0").await;
    let posted = tokio::time::Instant::now();
    server.prompt(&second, "text before the pause\nsleep 2000\ntext after the pause").await;
    let send_timeout = Duration::from_secs(SEND_TIMEOUT_SECS);
    let first_update = loop {
        let event = watcher.next(send_timeout).await.expect("an event within the send timeout");
        if event["type"] == "update" {
            break event;
        }
    };
    let first_after = posted.elapsed();
    assert_eq!(first_update["payload"]["content"]["text"], "before the pause");
    assert!(first_after < send_timeout, "the first update came {first_after:?} after the prompt");
    let rest = watcher.until("turn_end", Duration::from_millis(2000) + send_timeout).await;
    let turn_after = posted.elapsed();
    assert_eq!(crate::support::texts(&rest), ["after the pause"], "{rest:?}");
    eprintln!("with a stalled terminal: first update {first_after:?}, turn end {turn_after:?} after the prompt");

    // The stalled terminal is closed: its shell's `yes` is gone from the sandbox, and the client,
    // reading at last, finds the end of the socket after what was buffered.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while runs_in_sandbox(&server, &agent, "yes") {
        assert!(tokio::time::Instant::now() < deadline, "the terminal's shell still runs; log: {}", server.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let drained = async {
        let mut bytes = 0usize;
        loop {
            match terminal.next().await {
                Some(Ok(Message::Binary(chunk))) => bytes += chunk.len(),
                Some(Ok(Message::Close(frame))) => return (bytes, frame.map(|f| u16::from(f.code))),
                Some(Ok(_)) => {}
                None | Some(Err(_)) => return (bytes, None),
            }
        }
    };
    let (bytes, code) = tokio::time::timeout(Duration::from_secs(30), drained).await.expect("the socket ends");
    assert!(bytes > 0, "the terminal did run yes");
    eprintln!("the stalled terminal ended after {bytes} buffered bytes, close code {code:?}");
    assert!(
        server.log().contains("closing a WebSocket whose client did not read in time")
            || server.log().contains("closing the terminal"),
        "the server says why it closed the terminal"
    );
}

#[tokio::test]
async fn a_terminal_answers_its_client_s_close_at_once_while_output_floods() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let url = format!("{}/api/v1/agents/{agent}/terminal", server.url.replace("http://", "ws://"));
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert("authorization", format!("Bearer {}", server.token).parse().expect("header"));
    let (mut terminal, _) = tokio_tungstenite::connect_async(request).await.expect("opening the terminal");
    terminal.send(Message::Binary(b"yes\n".to_vec().into())).await.expect("input");
    // Read some of the flood, then ask to close.
    let mut read = 0usize;
    while read < 64 * 1024 {
        match tokio::time::timeout(Duration::from_secs(60), terminal.next()).await {
            Ok(Some(Ok(Message::Binary(bytes)))) => read += bytes.len(),
            Ok(Some(Ok(_))) => {}
            other => panic!("the output stopped after {read} bytes: {other:?}"),
        }
    }
    let asked = std::time::Instant::now();
    terminal.send(Message::Close(None)).await.expect("sending the close");
    let answered = loop {
        match tokio::time::timeout(Duration::from_secs(10), terminal.next()).await {
            Ok(Some(Ok(Message::Close(_)))) => break true,
            Ok(Some(Ok(_))) => {}
            Ok(None) | Ok(Some(Err(_))) => break false,
            Err(_) => panic!("no Close came back within 10 s"),
        }
    };
    let took = asked.elapsed();
    eprintln!("the terminal answered the client's Close mid-flood in {took:?}");
    assert!(answered, "the socket ended without the server's Close");
    assert!(took < Duration::from_secs(2), "answered in {took:?}");
}
