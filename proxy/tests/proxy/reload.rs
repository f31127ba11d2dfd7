//! Configuration reloads: a bad file denies everything (never the previous allow-list) and
//! closes open tunnels; a good file restores access; removing a rule takes effect on the next
//! request of an open intercepted tunnel.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_bad_reload_denies_everything_until_a_good_one_arrives() {
    let setup = Setup::new();
    let si = StandIn::https(&setup.root, &["api.anthropic.com", "registry.example"]).await;
    let good = json!({
        "ca": setup.ca(),
        "sandboxes": [sandbox_a(&["registry.example"])],
        "upstream_overrides": { "api.anthropic.com:443": setup.over(&si), "registry.example:443": setup.over(&si) }
    });
    let without_rules = json!({
        "ca": setup.ca(),
        "sandboxes": [{ "id": "sandbox-a", "username": A_USER, "password": A_PASS, "any_source": true, "allow": ["registry.example"] }],
        "upstream_overrides": { "api.anthropic.com:443": setup.over(&si), "registry.example:443": setup.over(&si) }
    });
    let proxy = TestProxy::start(setup, &good).await;
    let mut tunnel = connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.expect("tunnel");
    let mut client = intercepted(&proxy, "api.anthropic.com:443", "api.anthropic.com", (A_USER, A_PASS)).await;
    assert_eq!(
        send(&mut client, get("api.anthropic.com", "/v1/messages", &[("x-api-key", A_PLACEHOLDER)])).await.status,
        200
    );

    // Valid JSON whose value sits where a number belongs; then a syntax error.
    let mut broken = good.clone();
    broken["sandboxes"][0]["inject"][0]["port"] = json!(A_SECRET);
    for bad in [serde_json::to_vec(&broken).expect("json"), b"{ not json".to_vec()] {
        proxy.write_config(&bad);
        eventually("the bad configuration to deny", || async {
            matches!(connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await, Err(r) if r.status == 403 && r.body.contains("no valid configuration"))
        })
        .await;
        // A tunnel intercepted under the good configuration is refused while none is valid.
        let got = send(&mut client, get("api.anthropic.com", "/v1/messages", &[("x-api-key", A_PLACEHOLDER)])).await;
        assert_eq!(got.status, 403, "{}", got.body);
        proxy.write_config(&serde_json::to_vec(&good).expect("json"));
        eventually("the good configuration to allow again", || async {
            connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.is_ok()
        })
        .await;
    }
    // The tunnel opened before the bad reload was closed by it.
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(DEADLINE, tokio::io::AsyncReadExt::read(&mut tunnel, &mut buf))
        .await
        .expect("closed in time");
    assert!(matches!(read, Ok(0) | Err(_)));
    assert_eq!(si.requests().len(), 1, "nothing was forwarded while denied");
    // Removing the rule: a new intercepted request is refused, the host becomes a plain tunnel.
    proxy.write_config(&serde_json::to_vec(&without_rules).expect("json"));
    eventually("the rule to disappear", || async {
        matches!(connect(proxy.addr, "api.anthropic.com:443", Some((A_USER, A_PASS))).await, Err(r) if r.status == 403)
    })
    .await;
    proxy.stop().await;
}

#[tokio::test]
async fn an_invalid_configuration_at_start_denies() {
    let setup = Setup::new();
    let mut a = sandbox_a(&[]);
    a["inject"][0]["host"] = json!("evil.example"); // outside the CA's name constraints
    let config = json!({ "ca": setup.ca(), "sandboxes": [a] });
    let proxy = TestProxy::start(setup, &config).await;
    let refused = connect(proxy.addr, "api.anthropic.com:443", Some((A_USER, A_PASS))).await.expect_err("denied");
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("no valid configuration"), "{}", refused.body);
    proxy.stop().await;
}

#[tokio::test]
async fn a_sandbox_written_in_is_admitted_by_its_first_request_without_waiting_for_the_poll() {
    let setup = Setup::new();
    let si = StandIn::https(&setup.root, &["registry.example"]).await;
    let overrides = json!({ "registry.example:443": setup.over(&si) });
    let empty = json!({ "ca": setup.ca(), "sandboxes": [], "upstream_overrides": overrides });
    let with_a =
        json!({ "ca": setup.ca(), "sandboxes": [sandbox_a(&["registry.example"])], "upstream_overrides": overrides });
    let proxy = TestProxy::start(setup, &empty).await;
    let refused = connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.expect_err("unknown");
    assert_eq!(refused.status, 407);
    for round in 0..8 {
        // Written in, then asked for at once: well within the poll interval, every time.
        proxy.write_config(&serde_json::to_vec(&with_a).expect("json"));
        let started = std::time::Instant::now();
        let admitted = connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await;
        if let Err(refused) = &admitted {
            panic!("round {round}: {} {} {:?} after the write", refused.status, refused.body, started.elapsed());
        }
        proxy.write_config(&serde_json::to_vec(&empty).expect("json"));
        eventually("the sandbox to be gone again", || async {
            matches!(connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await, Err(r) if r.status == 407)
        })
        .await;
    }
    proxy.stop().await;
}

/// A sandbox the proxy knows, whose entry the server widens (an agent taking a harness the warm
/// pool started: the pool's entry reached agenthold's MCP route only), is allowed the new host by
/// its first request after the write — not after the next poll.
#[tokio::test]
async fn a_sandbox_widened_in_the_file_reaches_the_new_host_without_waiting_for_the_poll() {
    let setup = Setup::new();
    let si = StandIn::https(&setup.root, &["registry.example"]).await;
    let overrides = json!({ "registry.example:443": setup.over(&si) });
    let narrow = json!({ "ca": setup.ca(), "sandboxes": [sandbox_a(&[])], "upstream_overrides": overrides });
    let wide =
        json!({ "ca": setup.ca(), "sandboxes": [sandbox_a(&["registry.example"])], "upstream_overrides": overrides });
    let proxy = TestProxy::start(setup, &narrow).await;
    for round in 0..8 {
        let refused = connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.expect_err("narrow");
        assert_eq!(refused.status, 403, "round {round}: {}", refused.body);
        proxy.write_config(&serde_json::to_vec(&wide).expect("json"));
        let started = std::time::Instant::now();
        if let Err(refused) = connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await {
            panic!("round {round}: {} {} {:?} after the write", refused.status, refused.body, started.elapsed());
        }
        proxy.write_config(&serde_json::to_vec(&narrow).expect("json"));
        eventually("the sandbox to be narrow again", || async {
            matches!(connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await, Err(r) if r.status == 403)
        })
        .await;
    }
    proxy.stop().await;
}
