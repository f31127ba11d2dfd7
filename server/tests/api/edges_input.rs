//! Input the database cannot hold and failures of the engine: clear 400 codes, and no internal
//! error text in answers.

use serde_json::json;

use crate::support::TestServer;
use crate::support::skip::skip_unless_docker;

#[tokio::test]
async fn a_nul_in_a_prompt_is_a_400_with_a_code() {
    let server = TestServer::start_with(&[("AGENTHOLD_DRIVER", "local")]).await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    let (status, body) = server.post(&format!("/api/v1/sessions/{session}/prompt"), json!({"text": "a\u{0}b"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("NUL_CHARACTER")), "{body}");
    let blocks = json!({"prompt": [{"type": "text", "text": "nul \u{0} inside a block"}]});
    let (status, body) = server.post(&format!("/api/v1/sessions/{session}/prompt"), blocks).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("NUL_CHARACTER")), "{body}");
    // Elsewhere too: a name.
    let (status, body) = server.post("/api/v1/workspaces", json!({"name": "nul\u{0}"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("NUL_CHARACTER")), "{body}");
    // An escaped backslash before u0000 is plain text.
    let (status, body) =
        server.post(&format!("/api/v1/sessions/{session}/prompt"), json!({"text": "text \\u0000"})).await;
    assert_eq!(status, 202, "{body}");
}

#[tokio::test]
async fn an_engine_failure_is_answered_with_a_code_and_no_engine_text() {
    if skip_unless_docker("the local driver has no images to fail on") {
        return;
    }
    let server = TestServer::start().await;
    let image = "agenthold/no-such-image:edges-test";
    let agent = server.create_agent(json!({"image": image})).await;
    let (status, body) = server.post(&format!("/api/v1/agents/{agent}/wake"), json!({})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("SANDBOX_FAILED")), "{body}");
    let message = body["error"]["message"].as_str().expect("message");
    for leak in ["no-such-image", "edges-test", "docker", "Docker", "image"] {
        assert!(!message.contains(leak), "the engine's text reached the client: {message}");
    }
    assert!(server.log().contains("no-such-image"), "the detail is logged");
}
