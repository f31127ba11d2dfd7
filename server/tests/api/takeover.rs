//! The server side of the tunnel protocol, driven by a scripted sandboxd: after a reconnect the
//! server resumes stdout where the stored log ends, and resends a prompt whose stdin frame
//! sandboxd never wrote (lost with a dropped connection) — with the same request id, so the
//! harness answers it once.

use std::time::Duration;

use agenthold_sandboxd::protocol::{Control, DataFrame, DataKind, ProcessState};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use sqlx::Connection;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::{TestServer, texts};

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Dials the tunnel as sandboxd would and says hello; returns the socket and the resume offset.
async fn dial(server: &TestServer, token: &str, hello: &Control) -> (Socket, u64) {
    let url = format!("ws://127.0.0.1:{}/tunnel", server.tunnel_port());
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert("authorization", format!("Bearer {token}").parse().expect("header"));
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.expect("dialing the tunnel");
    socket.send(Message::Text(serde_json::to_string(hello).expect("hello").into())).await.expect("hello");
    loop {
        if let Control::Resume { channels } = next_control(&mut socket).await {
            return (socket, channels.first().map(|r| r.offset).expect("the harness channel is resumed"));
        }
    }
}

async fn next_control(socket: &mut Socket) -> Control {
    loop {
        match tokio::time::timeout(Duration::from_secs(30), socket.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => return serde_json::from_str(text.as_str()).expect("control"),
            Ok(Some(Ok(_))) => {}
            other => panic!("no control message: {other:?}"),
        }
    }
}

/// Kills the agent's real sandboxd (its harness dies with its stdin); returns the sandbox token a
/// scripted one dials with.
fn take_sandboxd_away(server: &TestServer, agent: &str) -> String {
    let sandbox_dir = server.data_dir.join("sandboxes").join(agent);
    let launch: Value =
        serde_json::from_slice(&std::fs::read(sandbox_dir.join("launch.json")).expect("launch file")).expect("json");
    let pid: u32 = std::fs::read_to_string(sandbox_dir.join("sandboxd.pid")).expect("pid").trim().parse().expect("pid");
    agenthold_server::sandbox::local::kill_group(pid);
    launch["token"].as_str().expect("token").to_owned()
}

/// The `Hello` of a scripted sandboxd whose harness on `channel` stands at `stdout_at` (all of
/// it acknowledged) with `stdin_written` bytes written.
fn scripted_hello(channel: u32, stdout_at: u64, stdin_written: u64) -> Control {
    Control::Hello {
        protocol: agenthold_sandboxd::protocol::PROTOCOL_VERSION,
        version: "scripted".to_owned(),
        processes: vec![ProcessState {
            channel,
            pid: Some(4242),
            stdout_acked: stdout_at,
            stdout_end: stdout_at,
            stdin_written,
            stdin_accepted: stdin_written,
            exit: None,
        }],
    }
}

async fn next_stdin(socket: &mut Socket) -> DataFrame {
    loop {
        match tokio::time::timeout(Duration::from_secs(30), socket.next()).await {
            Ok(Some(Ok(Message::Binary(bytes)))) => {
                let frame = DataFrame::decode(bytes).expect("frame");
                if frame.kind == DataKind::Stdin {
                    return frame;
                }
            }
            Ok(Some(Ok(_))) => {}
            other => panic!("no stdin frame: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_prompt_lost_with_the_connection_is_resent_once_and_answered_once() {
    let server = TestServer::start_with(&[("AGENTHOLD_DRIVER", "local")]).await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text one").await;
    server.wait_turns(&session, 1, Duration::from_secs(60)).await;

    // Take the real sandboxd away (its harness dies with its stdin) and stand in for it.
    let token = take_sandboxd_away(&server, &agent);

    let mut db = sqlx::PgConnection::connect(&server.database_url).await.expect("db");
    let agent_uuid: uuid::Uuid = agent.parse().expect("uuid");
    let (channel, offset): (Option<i32>, i64) =
        sqlx::query_as("SELECT harness_channel, harness_stdout_offset FROM sandboxes WHERE agent_id = $1")
            .bind(agent_uuid)
            .fetch_one(&mut db)
            .await
            .expect("sandbox row");
    let channel = u32::try_from(channel.expect("a harness runs")).expect("channel");
    let acp_session: String = sqlx::query_scalar("SELECT acp_session_id FROM sessions WHERE id = $1")
        .bind(session.parse::<uuid::Uuid>().expect("uuid"))
        .fetch_one(&mut db)
        .await
        .expect("session row");
    let stdout_from = u64::try_from(offset).expect("offset");
    let hello = |stdin_written: u64| scripted_hello(channel, stdout_from, stdin_written);

    let (mut socket, resume_from) = dial(&server, &token, &hello(1000)).await;
    assert_eq!(resume_from, stdout_from, "stdout resumes where the stored log ends");
    server.prompt(&session, "text two").await;
    let sent = next_stdin(&mut socket).await;
    assert_eq!((sent.channel, sent.offset), (channel, 1000));
    let request: Value = serde_json::from_slice(&sent.payload).expect("a JSON-RPC line");
    assert_eq!(request["method"], "session/prompt");
    // The connection drops before sandboxd wrote the frame (no StdinWritten).
    drop(socket);

    let (mut socket, resume_from) = dial(&server, &token, &hello(1000)).await;
    assert_eq!(resume_from, stdout_from);
    let resent = next_stdin(&mut socket).await;
    assert_eq!(resent.offset, 1000);
    assert_eq!(resent.payload, sent.payload, "the same request, same id");

    // The harness answers it.
    let output = format!(
        "{}\n{}\n",
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": acp_session,
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "answered once"}}}}),
        json!({"jsonrpc": "2.0", "id": request["id"], "result": {"stopReason": "end_turn"}}),
    );
    let frame =
        DataFrame { kind: DataKind::Stdout, channel, offset: stdout_from, payload: output.clone().into_bytes().into() };
    socket.send(Message::Binary(frame.encode().into())).await.expect("stdout");
    let events = server.wait_turns(&session, 2, Duration::from_secs(30)).await;
    assert_eq!(texts(&events), ["one", "answered once"]);
    // …and the server acknowledges it only after storing it.
    let end = stdout_from + output.len() as u64;
    loop {
        if let Control::Ack { offset, .. } = next_control(&mut socket).await
            && offset == end
        {
            break;
        }
    }
}

/// The warm pool's spare session (docs/design.md, "Pooled harnesses"): what the harness says
/// about it before a session takes it (OpenCode announces its commands right after
/// `session/new`) is stored with its line, survives a takeover, and becomes the taking
/// session's first events — the prompt goes into the spare session, no `session/new`.
#[tokio::test]
async fn updates_for_the_spare_session_are_kept_across_a_takeover_for_the_session_that_takes_it() {
    let server = TestServer::start_with(&[("AGENTHOLD_DRIVER", "local")]).await;
    let agent = server.create_agent(json!({})).await;
    let first = server.create_session(&agent).await;
    server.prompt(&first, "text one").await;
    server.wait_turns(&first, 1, Duration::from_secs(60)).await;

    let token = take_sandboxd_away(&server, &agent);

    // The running harness has a spare session no session of the agent's has taken.
    let mut db = sqlx::PgConnection::connect(&server.database_url).await.expect("db");
    let agent_uuid: uuid::Uuid = agent.parse().expect("uuid");
    let (channel, offset): (Option<i32>, i64) = sqlx::query_as(
        "UPDATE sandboxes SET harness_spare_session = 'spare-1' WHERE agent_id = $1
         RETURNING harness_channel, harness_stdout_offset",
    )
    .bind(agent_uuid)
    .fetch_one(&mut db)
    .await
    .expect("sandbox row");
    let channel = u32::try_from(channel.expect("a harness runs")).expect("channel");
    let stdout_from = u64::try_from(offset).expect("offset");
    let hello = |stdout_at: u64| scripted_hello(channel, stdout_at, 1000);
    let (mut socket, resume_from) = dial(&server, &token, &hello(stdout_from)).await;
    assert_eq!(resume_from, stdout_from);
    let commands = json!({"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "init", "description": "d"}]});
    let line = format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "spare-1", "update": commands}})
    );
    let frame =
        DataFrame { kind: DataKind::Stdout, channel, offset: stdout_from, payload: line.clone().into_bytes().into() };
    socket.send(Message::Binary(frame.encode().into())).await.expect("stdout");
    let end = stdout_from + line.len() as u64;
    loop {
        if let Control::Ack { offset, .. } = next_control(&mut socket).await
            && offset == end
        {
            break;
        }
    }
    let kept: Value = sqlx::query_scalar("SELECT harness_spare_updates FROM sandboxes WHERE agent_id = $1")
        .bind(agent_uuid)
        .fetch_one(&mut db)
        .await
        .expect("sandbox row");
    assert_eq!(kept, json!([commands]), "stored before it was acknowledged");
    assert!(server.events(&first).await.iter().all(|e| e["payload"] != commands), "not the first session's");

    // The link drops; the takeover reads what is stored.
    drop(socket);
    let (mut socket, resume_from) = dial(&server, &token, &hello(end)).await;
    assert_eq!(resume_from, end);
    let second = server.create_session(&agent).await;
    server.prompt(&second, "text two").await;
    let sent = next_stdin(&mut socket).await;
    let request: Value = serde_json::from_slice(&sent.payload).expect("a JSON-RPC line");
    assert_eq!(request["method"], "session/prompt", "no session/new: {request}");
    assert_eq!(request["params"]["sessionId"], "spare-1");
    let answer = format!("{}\n", json!({"jsonrpc": "2.0", "id": request["id"], "result": {"stopReason": "end_turn"}}));
    let frame = DataFrame { kind: DataKind::Stdout, channel, offset: end, payload: answer.into_bytes().into() };
    socket.send(Message::Binary(frame.encode().into())).await.expect("stdout");
    let events = server.wait_turns(&second, 1, Duration::from_secs(30)).await;
    let updates: Vec<&Value> = events.iter().filter(|e| e["type"] == "update").map(|e| &e["payload"]).collect();
    assert_eq!(updates, [&commands], "{events:#?}");
    let (spare, kept): (Option<String>, Value) =
        sqlx::query_as("SELECT harness_spare_session, harness_spare_updates FROM sandboxes WHERE agent_id = $1")
            .bind(agent_uuid)
            .fetch_one(&mut db)
            .await
            .expect("sandbox row");
    assert_eq!((spare, kept), (None, json!([])), "taken once");
}
