//! Signing in inside one sandbox (issue 9, part 5): the login methods the harness advertised are
//! shown on the agent with the command each runs; `terminal?login=<id>` (agent admins) runs it in
//! the agent's terminal; the login stays on the home volume across sleep; the agent is then marked
//! "credentials inside sandbox". fakeagent offers `fake-login` (`fakeagent --login`) because the
//! server advertises terminal logins.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::secrets::{admin, call, make_user};
use crate::support::{TestServer, last_run_output};

const TURN: Duration = Duration::from_secs(120);

/// Opens the terminal with `query` as `token`; the HTTP status of a refusal, or what it printed.
async fn terminal(server: &TestServer, agent: &str, query: &str, token: &str) -> Result<String, u16> {
    let url = format!("{}/api/v1/agents/{agent}/terminal{query}", server.url.replace("http://", "ws://"));
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert("authorization", format!("Bearer {token}").parse().expect("header"));
    let mut socket = match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => socket,
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => return Err(response.status().as_u16()),
        Err(error) => panic!("opening the terminal: {error}"),
    };
    socket.send(Message::Text(r#"{"type":"resize","cols":100,"rows":30}"#.into())).await.expect("resize");
    let mut output = Vec::new();
    while let Ok(Some(Ok(message))) = tokio::time::timeout(Duration::from_secs(30), socket.next()).await {
        match message {
            Message::Binary(bytes) => output.extend_from_slice(&bytes),
            Message::Close(_) => break,
            _ => {}
        }
    }
    Ok(String::from_utf8_lossy(&output).into_owned())
}

#[tokio::test]
async fn a_login_method_runs_in_the_terminal_and_the_login_stays_in_the_sandbox() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    // Before the harness ever started, nothing is known.
    assert_eq!(terminal(&server, &agent, "?login=fake-login", &server.token).await.err(), Some(400));
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text hello").await;
    server.wait_turns(&session, 1, TURN).await;

    let (_, view) = admin(&server, "GET", &format!("/api/v1/agents/{agent}"), json!({})).await;
    let methods = view["login_methods"].as_array().expect("login_methods");
    let fake = methods.iter().find(|m| m["id"] == "fake-login").expect("fake-login advertised");
    assert_eq!(fake["terminal"][1], "--login", "{view}");
    assert!(fake["terminal"][0].as_str().is_some_and(|p| p.ends_with("/fakeagent")), "{view}");
    assert_eq!(view["credentials_inside_sandbox"], false, "{view}");

    // Operators may open a shell, not sign the agent in; an unknown method is refused.
    let (_, team) = admin(&server, "GET", "/api/v1/me", json!({})).await;
    let workspace = team["workspaces"][0]["workspace_id"].as_str().expect("workspace").to_owned();
    let operator = make_user(&server, "slop").await;
    let path = format!("/api/v1/workspaces/{workspace}/members/{}", operator.id);
    assert_eq!(call(&server, "PUT", &path, &server.token, json!({"role": "operator"})).await.0, 204);
    assert_eq!(terminal(&server, &agent, "?login=fake-login", &operator.token).await.err(), Some(403));
    assert_eq!(terminal(&server, &agent, "?login=nope", &server.token).await.err(), Some(400));
    assert_eq!(terminal(&server, &agent, "?bogus=1", &server.token).await.err(), Some(400));

    let printed = terminal(&server, &agent, "?login=fake-login", &server.token).await.expect("the login ran");
    assert!(printed.contains("fakeagent: signed in"), "{printed:?}");
    let (_, view) = admin(&server, "GET", &format!("/api/v1/agents/{agent}"), json!({})).await;
    assert_eq!(view["credentials_inside_sandbox"], true, "{view}");
    assert!(view["sandbox_login_at"].is_string(), "{view}");

    // The login is on the home volume: still there after sleep and wake.
    assert_eq!(server.post(&format!("/api/v1/agents/{agent}/sleep"), json!({})).await.0, 200);
    server.prompt(&session, "run cat ~/.fakeagent/login").await;
    let events = server.wait_turns(&session, 2, TURN).await;
    assert!(last_run_output(&events).contains("signed in"), "{events:?}");
    let (status, log) = admin(&server, "GET", &format!("/api/v1/workspaces/{workspace}/audit"), json!({})).await;
    assert_eq!(status, 200);
    assert!(log["records"].as_array().into_iter().flatten().any(|r| r["action"] == "agent.sandbox_login"), "{log}");
}

/// The server signing a harness in on its own (seed 003's `AutoAuthenticator`): fakeagent with
/// `FAKEAGENT_REQUIRE_AUTH` refuses sessions until `authenticate`d; the fake adapter's `fake-key`
/// method may be called when `FAKEAGENT_AUTH_OK` is in the harness's environment (standing in for
/// an attached key). Without it the session fails with the harness's reason.
#[tokio::test]
async fn a_harness_that_asks_to_sign_in_is_signed_in_by_the_server_when_it_holds_the_key() {
    let server = TestServer::start().await;
    let env = json!({"FAKEAGENT_REQUIRE_AUTH": "fake-key", "FAKEAGENT_AUTH_OK": "1"});
    let agent = server.create_agent(json!({ "env": env })).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text signed in").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let end = events.iter().find(|e| e["type"] == "turn_end").expect("turn_end");
    assert_eq!(end["payload"]["stop_reason"], "end_turn", "{events:?}");
    assert!(events.iter().any(|e| e["type"] == "notice" && e["payload"]["code"] == "AUTHENTICATED"), "{events:?}");

    let without = server.create_agent(json!({"env": {"FAKEAGENT_REQUIRE_AUTH": "fake-key"}})).await;
    let session = server.create_session(&without).await;
    server.prompt(&session, "text never").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let error = events.iter().find(|e| e["type"] == "error").expect("an error");
    assert_eq!(error["payload"]["code"], "SESSION_START_FAILED", "{events:?}");
    assert!(error["payload"]["message"].as_str().is_some_and(|m| m.contains("authentication required")), "{error}");
}
