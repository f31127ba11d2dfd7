//! Webhooks against the running server (docs/triggers.md): a signed delivery starts a turn
//! whose prompt the template made; unsigned, wrongly signed, replayed, oversized and
//! template-failing deliveries start nothing and are listed with why; the secret is shown once;
//! the origin of each prompt event (user, token, schedule, webhook) is recorded.

use std::time::Duration;

use agenthold_server::triggers::signature::sign;
use serde_json::{Value, json};

use crate::openapi::check;
use crate::support::{TestServer, of_type, texts};

const LIMIT: usize = 4096;

/// Posts a delivery: `secret` signs `body` (or `signature` overrides it; `""`: unsigned).
async fn deliver(
    server: &TestServer,
    hook: &str,
    body: &Value,
    signature: Option<&str>,
    delivery: Option<&str>,
) -> (u16, Value) {
    let mut headers = vec![("x-github-event", "pull_request".to_owned())];
    if let Some(signature) = signature.filter(|s| !s.is_empty()) {
        headers.push(("x-hub-signature-256", signature.to_owned()));
    }
    if let Some(delivery) = delivery {
        headers.push(("x-github-delivery", delivery.to_owned()));
    }
    let (status, _, answer) = server.raw_with_headers("POST", hook, None, &headers, body.clone()).await;
    (status, answer)
}

fn code(answer: &Value) -> Option<&str> {
    answer["error"]["code"].as_str()
}

#[tokio::test]
async fn signed_deliveries_start_turns_and_bad_ones_start_nothing() {
    let limit = LIMIT.to_string();
    let server = TestServer::start_with(&[("AGENTHOLD_WEBHOOK_MAX_BODY_BYTES", &limit)]).await;
    let agent = server.create_agent(json!({})).await;

    let (status, bad) =
        server.post(&format!("/api/v1/agents/{agent}/webhooks"), json!({"name": "bad", "template": "{{ open"})).await;
    assert_eq!((status, code(&bad)), (400, Some("INVALID_TEMPLATE")), "{bad}");
    let template = "text PR {{ pull_request.title }} by {{ sender.login }}";
    let (status, created) =
        server.post(&format!("/api/v1/agents/{agent}/webhooks"), json!({"name": "github", "template": template})).await;
    assert_eq!(status, 201, "{created}");
    let secret = created["secret"].as_str().expect("the secret, once").to_owned();
    let id = created["webhook"]["id"].as_str().expect("id").to_owned();
    let hook = created["webhook"]["path"].as_str().expect("path").to_owned();
    assert_eq!(hook, format!("/api/v1/hooks/{id}"));
    // Never shown again.
    let (_, shown) = server.get(&format!("/api/v1/webhooks/{id}")).await;
    let (_, listed) = server.get(&format!("/api/v1/agents/{agent}/webhooks")).await;
    for view in [&shown, &listed] {
        assert!(!view.to_string().contains(&secret), "{view}");
    }
    assert_eq!(listed["webhooks"][0]["id"], id.as_str());

    let body = json!({"action": "opened", "pull_request": {"title": "fix-the-thing"}, "sender": {"login": "ana"}});
    let signed = sign(secret.as_bytes(), body.to_string().as_bytes());

    // Refused, nothing started.
    let (status, answer) = deliver(&server, &hook, &body, None, Some("d-unsigned")).await;
    assert_eq!((status, code(&answer)), (401, Some("SIGNATURE_MISSING")), "{answer}");
    let tampered = json!({"action": "opened", "pull_request": {"title": "rm -rf"}, "sender": {"login": "ana"}});
    let (status, answer) = deliver(&server, &hook, &tampered, Some(&signed), Some("d-tampered")).await;
    assert_eq!((status, code(&answer)), (401, Some("SIGNATURE_INVALID")), "{answer}");
    let other_key = sign(b"not the secret", body.to_string().as_bytes());
    let (status, answer) = deliver(&server, &hook, &body, Some(&other_key), Some("d-other-key")).await;
    assert_eq!((status, code(&answer)), (401, Some("SIGNATURE_INVALID")), "{answer}");
    let (status, answer) = deliver(&server, &hook, &body, Some(&signed), None).await;
    assert_eq!((status, code(&answer)), (400, Some("DELIVERY_ID_MISSING")), "{answer}");
    let big = json!({"pull_request": {"title": "x".repeat(LIMIT)}, "sender": {"login": "ana"}});
    let big_signed = sign(secret.as_bytes(), big.to_string().as_bytes());
    let (status, answer) = deliver(&server, &hook, &big, Some(&big_signed), Some("d-big")).await;
    assert_eq!((status, code(&answer)), (413, Some("PAYLOAD_TOO_LARGE")), "{answer}");
    // Without a Content-Length (chunked), reading stops at the limit.
    let chunked = chunked_delivery(&server, &hook, &"x".repeat(LIMIT * 4), &signed, "d-chunked").await;
    assert!(chunked.starts_with("HTTP/1.1 413"), "{chunked}");
    let lacking = json!({"action": "opened", "sender": {"login": "ana"}});
    let lacking_signed = sign(secret.as_bytes(), lacking.to_string().as_bytes());
    let (status, answer) = deliver(&server, &hook, &lacking, Some(&lacking_signed), Some("d-lacking")).await;
    assert_eq!((status, code(&answer)), (422, Some("TEMPLATE_FIELD_MISSING")), "{answer}");
    assert!(answer["error"]["message"].as_str().is_some_and(|m| m.contains("pull_request.title")), "{answer}");
    let (_, sessions) = server.get(&format!("/api/v1/agents/{agent}/sessions")).await;
    assert_eq!(sessions["sessions"], json!([]), "nothing started");
    let unknown = format!("/api/v1/hooks/{}", uuid::Uuid::new_v4());
    assert_eq!(deliver(&server, &unknown, &body, Some(&signed), Some("d-x")).await.0, 404);

    // Signed: a turn starts with the template's prompt, attributed to the webhook.
    let (status, accepted) = deliver(&server, &hook, &body, Some(&signed), Some("d-1")).await;
    assert_eq!(status, 202, "{accepted}");
    let session = accepted["session_id"].as_str().expect("session").to_owned();
    let events = server.wait_turns(&session, 1, Duration::from_secs(90)).await;
    assert!(texts(&events).contains(&"PR fix-the-thing by ana".to_owned()), "{events:#?}");
    let prompt = &of_type(&events, "prompt")[0]["payload"];
    assert_eq!(prompt["origin"], json!({"kind": "webhook", "id": id, "delivery_id": accepted["delivery"]}));
    assert_eq!(prompt["turn_id"], accepted["turn_id"]);

    // The same delivery again: a replay.
    let (status, answer) = deliver(&server, &hook, &body, Some(&signed), Some("d-1")).await;
    assert_eq!((status, code(&answer)), (409, Some("REPLAYED")), "{answer}");
    let (_, sessions) = server.get(&format!("/api/v1/agents/{agent}/sessions")).await;
    assert_eq!(sessions["sessions"].as_array().map(Vec::len), Some(1), "only the signed delivery started one");

    // Every delivery is listed with its outcome.
    let (status, list) = server.get(&format!("/api/v1/webhooks/{id}/deliveries")).await;
    assert_eq!(status, 200, "{list}");
    // The answers are the document's.
    let doc = agenthold_server::api::openapi::document();
    check(&doc, "get", "/api/v1/webhooks/{id}/deliveries", status, &list);
    check(&doc, "post", "/api/v1/agents/{id}/webhooks", 201, &created);
    check(&doc, "get", "/api/v1/webhooks/{id}", 200, &shown);
    check(&doc, "get", "/api/v1/agents/{id}/webhooks", 200, &listed);
    check(&doc, "post", "/api/v1/hooks/{id}", 202, &accepted);
    check(&doc, "post", "/api/v1/hooks/{id}", 409, &answer);
    let mut outcomes: Vec<(String, String, i64)> = list["deliveries"]
        .as_array()
        .expect("deliveries")
        .iter()
        .map(|d| {
            let code = d["code"].as_str().unwrap_or("-").to_owned();
            (d["delivery_id"].as_str().unwrap_or("").to_owned(), code, d["status"].as_i64().unwrap_or(0))
        })
        .collect();
    outcomes.sort();
    let expected: Vec<(String, String, i64)> = [
        ("", "DELIVERY_ID_MISSING", 400),
        ("d-1", "-", 202),
        ("d-1", "REPLAYED", 409),
        ("d-big", "PAYLOAD_TOO_LARGE", 413),
        ("d-chunked", "PAYLOAD_TOO_LARGE", 413),
        ("d-lacking", "TEMPLATE_FIELD_MISSING", 422),
        ("d-other-key", "SIGNATURE_INVALID", 401),
        ("d-tampered", "SIGNATURE_INVALID", 401),
        ("d-unsigned", "SIGNATURE_MISSING", 401),
    ]
    .into_iter()
    .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c))
    .collect();
    assert_eq!(outcomes, expected, "{list:#}");
    let accepted_row =
        list["deliveries"].as_array().and_then(|d| d.iter().find(|d| d["outcome"] == "accepted")).expect("accepted");
    assert_eq!(accepted_row["turn_id"], accepted["turn_id"]);
    assert_eq!(accepted_row["session_id"], session.as_str());
    assert!(!server.log().contains(&secret), "the secret is never logged");

    // A named session: deliveries append to it.
    let named = server.create_session(&agent).await;
    let (status, created) = server
        .post(
            &format!("/api/v1/agents/{agent}/webhooks"),
            json!({"name": "named", "template": "text {{ n }}", "session_id": named}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let (secret, hook) = (
        created["secret"].as_str().expect("secret").to_owned(),
        created["webhook"]["path"].as_str().expect("path").to_owned(),
    );
    let body = json!({"n": 1});
    let (status, accepted) =
        deliver(&server, &hook, &body, Some(&sign(secret.as_bytes(), body.to_string().as_bytes())), Some("n-1")).await;
    assert_eq!((status, accepted["session_id"].as_str()), (202, Some(named.as_str())), "{accepted}");
    server.wait_turns(&named, 1, Duration::from_secs(90)).await;

    // Audited with who set it up.
    let (_, me) = server.get("/api/v1/me").await;
    let workspace = me["workspaces"][0]["workspace_id"].as_str().expect("workspace").to_owned();
    let (_, audit) = server.get(&format!("/api/v1/workspaces/{workspace}/audit")).await;
    let created_records: Vec<&Value> =
        audit["records"].as_array().expect("records").iter().filter(|r| r["action"] == "webhook.created").collect();
    assert_eq!(created_records.len(), 2, "{audit}");
    assert!(created_records.iter().all(|r| r["actor_user_id"] == me["id"]));
    assert!(!audit.to_string().contains(&secret));
    assert_eq!(server.delete(&format!("/api/v1/webhooks/{id}")).await.0, 204);
    let (status, answer) =
        deliver(&server, &format!("/api/v1/hooks/{id}"), &json!({}), Some("sha256=00"), Some("z")).await;
    assert_eq!(status, 404, "{answer}");
}

#[tokio::test]
async fn prompts_from_a_person_and_from_a_token_carry_their_origin() {
    let server = TestServer::start().await;
    let password = "a long enough password";
    let (status, user) = server.post("/api/v1/users", json!({"username": "uma", "password": password})).await;
    assert_eq!(status, 201, "{user}");
    let (status, cookie, login) = server
        .raw_with_headers("POST", "/api/v1/auth/login", None, &[], json!({"username": "uma", "password": password}))
        .await;
    assert_eq!(status, 200, "{login}");
    let cookie = cookie.split(';').next().unwrap_or_default().to_owned();
    let headers = [("cookie", cookie), ("x-csrf-token", login["csrf_token"].as_str().expect("csrf").to_owned())];
    let call = |method: &'static str, path: String, body: Value| {
        let headers = headers.clone();
        let server = &server;
        async move { server.raw_with_headers(method, &path, None, &headers, body).await }
    };
    let (status, _, agent) =
        call("POST", "/api/v1/agents".to_owned(), json!({"name": "mine", "harness": "fake"})).await;
    assert_eq!(status, 201, "{agent}");
    let agent = agent["id"].as_str().expect("id").to_owned();
    let (_, _, session) = call("POST", format!("/api/v1/agents/{agent}/sessions"), json!({})).await;
    let session = session["id"].as_str().expect("id").to_owned();
    // In a browser: the person.
    let (status, _, _) = call("POST", format!("/api/v1/sessions/{session}/prompt"), json!({"text": "text one"})).await;
    assert_eq!(status, 202);
    server.wait_turns_as(&session, 1, &headers).await;
    // With an API token: the token, and its user.
    let (status, _, token) = call("POST", "/api/v1/tokens".to_owned(), json!({"name": "ci"})).await;
    assert_eq!(status, 201, "{token}");
    let secret = token["token"].as_str().expect("token").to_owned();
    let (status, _, _) = server
        .raw_with_headers(
            "POST",
            &format!("/api/v1/sessions/{session}/prompt"),
            Some(&secret),
            &[],
            json!({"text": "text two"}),
        )
        .await;
    assert_eq!(status, 202);
    let events = server.wait_turns_as(&session, 2, &headers).await;
    let origins: Vec<Value> = of_type(&events, "prompt").iter().map(|e| e["payload"]["origin"].clone()).collect();
    assert_eq!(
        origins,
        vec![
            json!({"kind": "user", "id": user["id"]}),
            json!({"kind": "token", "id": token["id"], "user_id": user["id"]})
        ]
    );
}

impl TestServer {
    /// Waits for `turns` turn ends, reading the log with a browser session's headers.
    async fn wait_turns_as(&self, session: &str, turns: usize, headers: &[(&str, String)]) -> Vec<Value> {
        let deadline = std::time::Instant::now() + Duration::from_secs(90);
        loop {
            let path = format!("/api/v1/sessions/{session}/events?limit=1000");
            let (_, _, page) = self.raw_with_headers("GET", &path, None, headers, json!({})).await;
            let events = page["events"].as_array().cloned().unwrap_or_default();
            if of_type(&events, "turn_end").len() >= turns {
                return events;
            }
            assert!(std::time::Instant::now() < deadline, "{events:#?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A delivery sent in chunks, without a Content-Length: the answer's status line and headers.
async fn chunked_delivery(server: &TestServer, hook: &str, body: &str, signature: &str, delivery: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = server.url.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address).await.expect("connecting");
    let head = format!(
        "POST {hook} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\nX-Hub-Signature-256: {signature}\r\nX-Delivery-Id: {delivery}\r\n\
         Connection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    for chunk in body.as_bytes().chunks(1024) {
        // The server may answer and close before the whole body is sent.
        if stream.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).await.is_err()
            || stream.write_all(chunk).await.is_err()
            || stream.write_all(b"\r\n").await.is_err()
        {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_triggered_turn_is_gated_by_the_agent_s_posture() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({"posture": "approval"})).await;
    let (status, created) = server
        .post(&format!("/api/v1/agents/{agent}/webhooks"), json!({"name": "ci", "template": "ask execute {{ cmd }}"}))
        .await;
    assert_eq!(status, 201, "{created}");
    let secret = created["secret"].as_str().expect("secret").to_owned();
    let hook = created["webhook"]["path"].as_str().expect("path").to_owned();
    let body = json!({"cmd": "make"});
    let signed = sign(secret.as_bytes(), body.to_string().as_bytes());
    let (status, accepted) = deliver(&server, &hook, &body, Some(&signed), Some("g-1")).await;
    assert_eq!(status, 202, "{accepted}");
    let session = accepted["session_id"].as_str().expect("session").to_owned();
    // The approval posture asks a person, whoever prompted.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let question = loop {
        let events = server.events(&session).await;
        if let Some(question) = of_type(&events, "permission").first() {
            break question["payload"]["permission_id"].as_str().expect("id").to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "no question: {events:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (status, answer) =
        server.post(&format!("/api/v1/permissions/{question}/answer"), json!({"decision": "deny"})).await;
    assert_eq!(status, 200, "{answer}");
    let events = server.wait_turns(&session, 1, Duration::from_secs(60)).await;
    let resolved = of_type(&events, "permission_resolved");
    assert_eq!(resolved[0]["payload"]["option_kind"], "reject_once", "{resolved:?}");
}

/// Posts a Standard Webhooks delivery: `id`, `timestamp` and `signature` headers.
async fn deliver_standard(
    server: &TestServer,
    hook: &str,
    body: &Value,
    id: &str,
    at: i64,
    signature: &str,
) -> (u16, Value) {
    let headers = vec![
        ("webhook-id", id.to_owned()),
        ("webhook-timestamp", at.to_string()),
        ("webhook-signature", signature.to_owned()),
    ];
    let (status, _, answer) = server.raw_with_headers("POST", hook, None, &headers, body.clone()).await;
    (status, answer)
}

#[tokio::test]
async fn deliveries_cannot_be_replayed_and_refusals_cannot_wipe_the_history() {
    use agenthold_server::triggers::signature::sign_standard;
    use base64::Engine;
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let (status, created) = server
        .post(&format!("/api/v1/agents/{agent}/webhooks"), json!({"name": "ci", "template": "text {{ n }}"}))
        .await;
    assert_eq!(status, 201, "{created}");
    let secret = created["secret"].as_str().expect("secret").to_owned();
    let id = created["webhook"]["id"].as_str().expect("id").to_owned();
    let hook = created["webhook"]["path"].as_str().expect("path").to_owned();

    // GitHub's scheme signs the body only: the same body and signature under a new delivery id is
    // a replay.
    let body = json!({"n": 1});
    let signed = sign(secret.as_bytes(), body.to_string().as_bytes());
    let (status, accepted) = deliver(&server, &hook, &body, Some(&signed), Some("g-1")).await;
    assert_eq!(status, 202, "{accepted}");
    let session = accepted["session_id"].as_str().expect("session").to_owned();
    server.wait_turns(&session, 1, Duration::from_secs(90)).await;
    let (status, answer) = deliver(&server, &hook, &body, Some(&signed), Some("g-2-new-id")).await;
    assert_eq!((status, code(&answer)), (409, Some("REPLAYED")), "{answer}");

    // A flood of unsigned posts: recorded up to the per-minute cap, then 429 and only counted; the
    // accepted delivery stays in the history and its id stays refused.
    let mut statuses = std::collections::BTreeMap::new();
    for n in 0..200 {
        let (status, _) = deliver(&server, &hook, &json!({"n": n}), None, Some(&format!("flood-{n}"))).await;
        *statuses.entry(status).or_insert(0) += 1;
    }
    assert_eq!(statuses.get(&401), Some(&60), "{statuses:?}");
    assert_eq!(statuses.get(&429), Some(&140), "{statuses:?}");
    // The accepted id is still refused as a replay (the flood pruned nothing), and so is its
    // signed body under a new id.
    let (status, answer) = deliver(&server, &hook, &body, Some(&signed), Some("g-1")).await;
    assert_eq!((status, code(&answer)), (409, Some("REPLAYED")), "{answer}");
    let (_, list) = server.get(&format!("/api/v1/webhooks/{id}/deliveries")).await;
    let deliveries = list["deliveries"].as_array().expect("deliveries");
    assert!(deliveries.iter().any(|d| d["outcome"] == "accepted" && d["delivery_id"] == "g-1"), "{list}");
    let unsigned = deliveries.iter().filter(|d| d["code"] == "SIGNATURE_MISSING").count();
    assert_eq!(unsigned, 60, "recorded up to the cap: {list}");

    // Standard Webhooks (on a second webhook): id,
    // timestamp and body signed together; a replay, another id, or a stale time is refused.
    let (_, created) = server
        .post(&format!("/api/v1/agents/{agent}/webhooks"), json!({"name": "std", "template": "text {{ n }}"}))
        .await;
    let standard = created["standard_secret"].as_str().expect("standard secret").to_owned();
    let key = base64::engine::general_purpose::STANDARD
        .decode(standard.strip_prefix("whsec_").expect("whsec_"))
        .expect("base64");
    let hook = created["webhook"]["path"].as_str().expect("path").to_owned();
    let now = chrono::Utc::now().timestamp();
    let body = json!({"n": 2});
    let signature = sign_standard(&key, "msg_1", now, body.to_string().as_bytes());
    let (status, accepted) = deliver_standard(&server, &hook, &body, "msg_1", now, &signature).await;
    assert_eq!(status, 202, "{accepted}");
    let session = accepted["session_id"].as_str().expect("session").to_owned();
    server.wait_turns(&session, 1, Duration::from_secs(90)).await;
    let (status, answer) = deliver_standard(&server, &hook, &body, "msg_1", now, &signature).await;
    assert_eq!((status, code(&answer)), (409, Some("REPLAYED")), "{answer}");
    let (status, answer) = deliver_standard(&server, &hook, &body, "msg_2", now, &signature).await;
    assert_eq!((status, code(&answer)), (401, Some("SIGNATURE_INVALID")), "another id: {answer}");
    let old = now - 360;
    let stale = sign_standard(&key, "msg_3", old, body.to_string().as_bytes());
    let (status, answer) = deliver_standard(&server, &hook, &body, "msg_3", old, &stale).await;
    assert_eq!((status, code(&answer)), (401, Some("SIGNATURE_EXPIRED")), "{answer}");
}
