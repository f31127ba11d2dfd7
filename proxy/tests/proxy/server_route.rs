//! agenthold's own service through the proxy (`server_route`: the MCP server agents prompt
//! agents through). A sandbox with an injection rule for the reserved host reaches the server
//! over plain HTTP with its placeholder swapped for its credential, under the route's path only;
//! a sandbox without the rule is refused (also when it lists the host in its allow-list: never a
//! byte tunnel to the server), and so is plain HTTP to the host.

use serde_json::json;

use crate::support::*;

const HOST: &str = "mcp.agenthold.internal";
const A_MCP_PLACEHOLDER: &str = "agenthold-mcp-placeholder-a";
const A_MCP_CREDENTIAL: &str = "ahmcp1.sandbox-a-credential";

fn config(setup: &Setup, server: &StandIn, routed: bool) -> serde_json::Value {
    let mut a = sandbox_a(&[]);
    a["inject"].as_array_mut().expect("inject").push(json!({
        "host": HOST, "path_prefix": "/api/v1/mcp", "header": "authorization", "format": "bearer",
        "placeholder": A_MCP_PLACEHOLDER, "value": A_MCP_CREDENTIAL
    }));
    let mut b = sandbox_b();
    b["allow"] = json!([HOST, format!("{HOST}:443")]);
    let mut config = json!({ "ca": setup.ca(), "sandboxes": [a, b] });
    if routed {
        config["server_route"] = json!({ "host": HOST, "addr": server.addr.to_string(), "path_prefix": "/api/v1/mcp" });
    }
    config
}

async fn routed() -> (TestProxy, StandIn) {
    let setup = Setup::new();
    let server = StandIn::plain().await;
    let config = config(&setup, &server, true);
    (TestProxy::start(setup, &config).await, server)
}

#[tokio::test]
async fn the_placeholder_reaches_the_server_as_the_credential_on_its_path_only() {
    let (proxy, server) = routed().await;
    let mut client = intercepted(&proxy, &format!("{HOST}:443"), HOST, (A_USER, A_PASS)).await;
    let bearer = format!("Bearer {A_MCP_PLACEHOLDER}");
    let request = hyper::Request::post("/api/v1/mcp")
        .header("host", HOST)
        .header("authorization", &bearer)
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)))
        .expect("request");
    let got = send(&mut client, request).await;
    assert_eq!(got.status, 200, "{}", got.body);
    let seen = server.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].path, "/api/v1/mcp");
    assert_eq!(seen[0].one("authorization"), Some(format!("Bearer {A_MCP_CREDENTIAL}")), "swapped");
    assert_eq!(seen[0].one("host").as_deref(), Some(HOST));

    // Another path of the server: refused, nothing arrives.
    let got = send(&mut client, get(HOST, "/api/v1/agents", &[("authorization", &bearer)])).await;
    assert_eq!(got.status, 403, "{}", got.body);
    let got = send(&mut client, get(HOST, "/api/v1/hooks/x", &[])).await;
    assert_eq!(got.status, 403, "{}", got.body);
    // Another value in the header: refused.
    let got = send(&mut client, get(HOST, "/api/v1/mcp", &[("authorization", "Bearer ahmcp1.forged")])).await;
    assert_eq!(got.status, 403, "{}", got.body);
    assert_eq!(server.requests().len(), 1, "only the one request reached the server");
    assert!(!got.body.contains(A_MCP_CREDENTIAL));
    proxy.stop().await;
}

#[tokio::test]
async fn a_sandbox_without_the_rule_and_plain_http_never_reach_the_server() {
    let (proxy, server) = routed().await;
    // B lists the host in its allow-list but has no rule: no tunnel, no interception.
    let refused = connect(proxy.addr, &format!("{HOST}:443"), Some((B_USER, B_PASS))).await.expect_err("refused");
    assert_eq!(refused.status, 403, "{}", refused.body);
    // Plain HTTP to the host, from either sandbox.
    for (user, pass) in [(A_USER, A_PASS), (B_USER, B_PASS)] {
        let auth = format!(
            "Basic {}",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, format!("{user}:{pass}"))
        );
        let stream = tokio::net::TcpStream::connect(proxy.addr).await.expect("connect");
        let mut client = http1(stream).await;
        let got =
            send(&mut client, get(HOST, &format!("http://{HOST}/api/v1/mcp"), &[("proxy-authorization", &auth)])).await;
        assert_eq!(got.status, 403, "{user}: {}", got.body);
    }
    assert_eq!(server.accepted.load(std::sync::atomic::Ordering::SeqCst), 0, "nothing reached the server");
    proxy.stop().await;
}

#[tokio::test]
async fn an_open_tunnel_sends_nothing_more_once_the_route_is_gone() {
    let (proxy, server) = routed().await;
    let mut client = intercepted(&proxy, &format!("{HOST}:443"), HOST, (A_USER, A_PASS)).await;
    let bearer = format!("Bearer {A_MCP_PLACEHOLDER}");
    assert_eq!(send(&mut client, get(HOST, "/api/v1/mcp", &[("authorization", &bearer)])).await.status, 200);
    let without = config(&proxy.setup, &server, false);
    proxy.write_config(&serde_json::to_vec(&without).expect("json"));
    let mut last = String::new();
    for _ in 0..200 {
        let got = send(&mut client, get(HOST, "/api/v1/mcp", &[("authorization", &bearer)])).await;
        if got.status == 403 {
            last = got.body;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(last.contains("reconnect"), "the open tunnel is refused once the route is gone: {last:?}");
    let sent = server.requests().len();
    let got = send(&mut client, get(HOST, "/api/v1/mcp", &[("authorization", &bearer)])).await;
    assert_eq!(got.status, 403);
    assert_eq!(server.requests().len(), sent, "nothing more reached the server");
    proxy.stop().await;
}
