//! A real sandbox uses the egress proxy (issue 7, the check): with `AGENTHOLD_PROXY_ADDR` set,
//! sandboxd trusts the proxy's CA and the harness gets the proxy environment; fakeagent's
//! `fetch` inside a real Docker sandbox goes through the real `agenthold-proxy` (listening on the
//! host, reached at `host.docker.internal`) to a loopback HTTPS stand-in for `api.anthropic.com`
//! (the test-only upstream override), which receives the real secret value in `x-api-key`
//! although the sandbox only holds the placeholder. Detaching the secret takes the host away
//! within seconds. Docker driver only: local sandboxes do not use the proxy.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use agenthold_server::ids::AgentId;
use agenthold_server::secrets::master_key::MasterKey;

use crate::support::proxy::{DEADLINE, Proxy, StandIn};
use crate::support::secrets::{admin, attach_anthropic_secret, database};
use crate::support::skip::skip_unless_docker;
use crate::support::{TestServer, last_run_output};

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const TURN: Duration = Duration::from_secs(120);
/// What the stand-in answers, to recognise its body in the tool output.
const STAND_IN_BODY: &str = "stand-in says hello";

/// The text of the last `fetch` tool call's result in `events`, and its `rawOutput`.
fn last_fetch(events: &[Value]) -> Option<(String, Value)> {
    let ids: Vec<&Value> = events
        .iter()
        .filter(|e| e["payload"]["sessionUpdate"] == "tool_call" && e["payload"]["kind"] == "fetch")
        .map(|e| &e["payload"]["toolCallId"])
        .collect();
    let id = ids.last()?;
    events
        .iter()
        .rev()
        .find(|e| e["payload"]["sessionUpdate"] == "tool_call_update" && &&e["payload"]["toolCallId"] == id)
        .map(|e| {
            let text = e["payload"]["content"][0]["content"]["text"].as_str().unwrap_or_default().to_owned();
            (text, e["payload"]["rawOutput"].clone())
        })
}

/// A server whose sandboxes use a real proxy on the host, with `api.anthropic.com` mapped to a
/// loopback stand-in (the test-only upstream override).
struct Proxied {
    server: TestServer,
    proxy: Proxy,
    stand_in: StandIn,
    /// The proxy's port on the host.
    port: u16,
    /// `host.docker.internal:<port>`.
    proxy_addr: String,
    dir: std::path::PathBuf,
}

impl Proxied {
    async fn start() -> Self {
        Self::start_on(|dir| Box::pin(StandIn::start(dir, STAND_IN_BODY))).await
    }

    /// With the stand-in `stand_in` makes (in the directory it is given).
    async fn start_on(
        stand_in: impl for<'a> FnOnce(&'a std::path::Path) -> futures_util::future::BoxFuture<'a, StandIn>,
    ) -> Self {
        let dir = std::env::temp_dir().join(format!("agenthold-sbxproxy-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("dir");
        let stand_in = stand_in(&dir).await;
        let overrides = json!({"api.anthropic.com:443": {"addr": stand_in.addr.to_string(), "ca_cert": stand_in.root}});
        // The proxy first, on a port of its own choosing (no race for a port picked ahead), on the
        // file the server will write.
        let config = dir.join("proxy.json");
        let proxy = Proxy::start(&config, "0.0.0.0:0", dir.join("proxy.log"));
        let port = proxy.port();
        let proxy_addr = format!("host.docker.internal:{port}");
        let server = TestServer::start_with(&[
            ("AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES", &overrides.to_string()),
            ("AGENTHOLD_PROXY_ADDR", &proxy_addr),
            ("AGENTHOLD_PROXY_CONFIG_FILE", config.to_str().expect("utf-8 path")),
        ])
        .await;
        let started = Instant::now();
        while !config.exists() {
            assert!(started.elapsed() < DEADLINE, "the server never wrote {}", config.display());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self { server, proxy, stand_in, port, proxy_addr, dir }
    }

    /// The agent's proxy username and password, as its harness gets them.
    async fn credentials(&self, agent: &str) -> (String, String) {
        let pool = database(&self.server).await;
        let key = MasterKey::from_file(&self.server.data_dir.join("master.key")).expect("the server's master key");
        let agent_id = AgentId(agent.parse().expect("uuid"));
        let env = agenthold_server::proxy_feed::sandbox_proxy_env(&pool, &key, agent_id, &self.proxy_addr)
            .await
            .expect("the proxy environment");
        let url = env.iter().find(|(k, _)| k == "HTTPS_PROXY").map(|(_, v)| v.clone()).expect("HTTPS_PROXY");
        url.strip_prefix("http://")
            .and_then(|rest| rest.rsplit_once('@'))
            .and_then(|(creds, _)| creds.split_once(':'))
            .map(|(u, p)| (u.to_owned(), p.to_owned()))
            .expect("http://user:password@host:port")
    }
}

impl Drop for Proxied {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn a_sandbox_fetch_reaches_the_provider_through_the_proxy_with_the_real_value() {
    if skip_unless_docker("local sandboxes do not use the egress proxy") {
        return;
    }
    let setup = Proxied::start().await;
    let (server, proxy, stand_in) = (&setup.server, &setup.proxy, &setup.stand_in);
    let agent = server.create_agent(json!({})).await;
    let (_, value) = attach_anthropic_secret(server, &agent).await;
    let attach = format!("/api/v1/agents/{agent}/secrets/ANTHROPIC_API_KEY");
    let (_, password) = setup.credentials(&agent).await;

    // The fetch, from inside the real sandbox, with the placeholder the sandbox holds.
    let session = server.create_session(&agent).await;
    let fetch = "fetch https://api.anthropic.com/v1/messages x-api-key:$ANTHROPIC_API_KEY";
    server.prompt(&session, fetch).await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let (text, raw) = last_fetch(&events).expect("a fetch tool call");
    assert_eq!(raw["status"], 200, "{text}\n\nproxy log:\n{}", proxy.log());
    assert!(text.starts_with("HTTP/1.1 200") && text.contains(STAND_IN_BODY), "{text}");
    assert_eq!(stand_in.seen.lock().expect("seen").clone(), [Some(value.clone())], "the real value, in x-api-key");

    // The sandbox's environment: the placeholder, the trust variables; never the value. (The
    // proxy URLs hold the proxy password: kept out of the events.)
    // Also: sandboxd put the CA (0644) in the full bundle, once.
    let ca = "/usr/local/share/ca-certificates/agenthold-proxy.crt";
    let script = format!(
        "run env | grep -v -i -E '^https?_proxy=' | sort; echo ca-mode=$(stat -c %a {ca}); \
         echo bundle-holds-ca=$(grep -c -F \"$(sed -n 2p {ca})\" /etc/ssl/certs/ca-certificates.crt)"
    );
    server.prompt(&session, &script).await;
    let events = server.wait_turns(&session, 2, TURN).await;
    let env = last_run_output(&events);
    let placeholder = env
        .lines()
        .find_map(|l| l.strip_prefix("ANTHROPIC_API_KEY="))
        .expect("ANTHROPIC_API_KEY in the sandbox")
        .to_owned();
    assert_ne!(placeholder, value);
    assert!(!env.contains(&value), "the value is in the sandbox's environment");
    for line in [
        "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
        "NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/agenthold-proxy.crt",
        "NODE_USE_ENV_PROXY=1",
        "ca-mode=644",
        "bundle-holds-ca=1",
    ] {
        assert!(env.lines().any(|l| l == line), "{line} missing from:\n{env}");
    }

    // Detach: within seconds the same fetch is refused by the proxy (403).
    assert_eq!(admin(server, "DELETE", &attach, json!({})).await.0, 204);
    let detached = Instant::now();
    let mut turns = 2;
    let refused = loop {
        server.prompt(&session, fetch).await;
        turns += 1;
        let events = server.wait_turns(&session, turns, TURN).await;
        let (text, raw) = last_fetch(&events).expect("a fetch tool call");
        if raw["status"] == 403 {
            // The proxy refuses either the CONNECT itself, or (when the reload lands between the
            // CONNECT and the request) the request inside the intercepted tunnel: both are its
            // answer, never the stand-in's (which only ever says 200).
            let by_proxy = raw["fromProxy"] == true || text.contains("agenthold-proxy:");
            assert!(by_proxy, "{text}");
            break text;
        }
        assert!(detached.elapsed() < DEADLINE, "the sandbox still reaches api.anthropic.com: {text}");
    };
    println!("after detaching, the fetch was refused within {:?}: {refused}", detached.elapsed());
    // Until the proxy reloaded, fetches still went through (with the real value, never the
    // placeholder); once refused, nothing more reaches the stand-in.
    let seen = stand_in.seen.lock().expect("seen").clone();
    assert!(
        seen.iter().all(|k| k.as_deref() == Some(value.as_str())),
        "{} requests, not all with the value",
        seen.len()
    );
    server.prompt(&session, fetch).await;
    let events = server.wait_turns(&session, turns + 1, TURN).await;
    assert_eq!(last_fetch(&events).expect("a fetch tool call").1["status"], 403);
    assert_eq!(stand_in.seen.lock().expect("seen").len(), seen.len(), "the stand-in was reached after the refusal");
    // The harness was restarted once idle: its environment no longer holds the variable.
    server.prompt(&session, "run env | grep -v -i -E '^https?_proxy='").await;
    let env = last_run_output(&server.wait_turns(&session, turns + 2, TURN).await);
    assert!(env.contains("HOME="), "{env}");
    assert!(!env.contains("ANTHROPIC_API_KEY="), "the detached secret's variable is still set:\n{env}");

    // Neither the value nor the proxy password anywhere in the events or logs.
    let all = serde_json::to_string(&server.events(&session).await).expect("json");
    assert!(!all.contains(&value), "the value is in the session's events");
    assert!(!all.contains(&password), "the proxy password is in the session's events");
    assert!(!server.log().contains(&value) && !server.log().contains(&password), "secret in the server's log");
    assert!(!proxy.log().contains(&value), "the value is in the proxy's log");
}

#[tokio::test]
async fn without_a_proxy_address_sandboxes_get_neither_the_ca_nor_the_proxy_environment() {
    if skip_unless_docker("a Docker sandbox's CA and proxy environment") {
        return;
    }
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "run env | sort; ls /usr/local/share/ca-certificates/").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let env = last_run_output(&events);
    for name in ["HTTPS_PROXY=", "https_proxy=", "NODE_EXTRA_CA_CERTS=", "CODEX_CA_CERTIFICATE=", "NODE_USE_ENV_PROXY="]
    {
        assert!(!env.lines().any(|l| l.starts_with(name)), "{name} set without AGENTHOLD_PROXY_ADDR:\n{env}");
    }
    assert!(!env.contains("agenthold-proxy.crt"), "the CA was installed:\n{env}");
    let container = server.container(&agent);
    let (ok, container_env) = crate::support::docker::docker(&[
        "inspect",
        "--format",
        "{{range .Config.Env}}{{println .}}{{end}}",
        &container,
    ]);
    assert!(ok, "docker inspect");
    assert!(container_env.contains("AGENTHOLD_TUNNEL_URL="), "{container_env}");
    assert!(!container_env.contains("AGENTHOLD_PROXY_CA_PEM"), "{container_env}");
    let (ok, label) = crate::support::docker::docker(&[
        "inspect",
        "--format",
        "{{index .Config.Labels \"agenthold.proxy-ca\"}}",
        &container,
    ]);
    assert!(ok && (label.is_empty() || label == "<no value>"), "the proxy CA label: {label:?}");
}

/// A raw `CONNECT api.anthropic.com:443` with `user:password`, sent from inside a sandbox with
/// bash's `/dev/tcp`; prints the proxy's status line.
fn raw_connect_script(proxy_port: u16, user: &str, password: &str) -> String {
    format!(
        "run bash -c 'auth=$(printf %s {user}:{password} | base64 -w0); \
         exec 3<>/dev/tcp/host.docker.internal/{proxy_port}; \
         printf \"CONNECT api.anthropic.com:443 HTTP/1.1\\r\\nHost: api.anthropic.com:443\\r\\nProxy-Authorization: Basic %s\\r\\n\\r\\n\" \"$auth\" >&3; \
         head -n 1 <&3 | tr -d \"\\r\"'"
    )
}

#[tokio::test]
async fn a_sandboxs_proxy_credentials_work_from_its_own_address_only() {
    if skip_unless_docker("local sandboxes do not use the egress proxy") {
        return;
    }
    let setup = Proxied::start().await;
    let (server, proxy, port) = (&setup.server, &setup.proxy, setup.port);
    let config = setup.dir.join("proxy.json");
    let a = server.create_agent(json!({"name": "a"})).await;
    attach_anthropic_secret(server, &a).await;
    let b = server.create_agent(json!({"name": "b"})).await;
    let (session_a, session_b) = (server.create_session(&a).await, server.create_session(&b).await);
    let (user, password) = setup.credentials(&a).await;

    // From A: admitted (the tunnel to the secret's host opens).
    server.prompt(&session_a, &raw_connect_script(port, &user, &password)).await;
    let from_a = last_run_output(&server.wait_turns(&session_a, 1, TURN).await);
    assert!(from_a.trim().starts_with("HTTP/1.1 200"), "{from_a}\n{}", proxy.log());
    // The proxy's file names A's address (its network holder's) as its only source.
    let (ok, a_ip) = crate::support::docker::docker(&[
        "inspect",
        "--format",
        "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
        &server.network_holder(&a),
    ]);
    assert!(ok, "inspect");
    let file: Value = serde_json::from_slice(&std::fs::read(&config).expect("read")).expect("json");
    let entry =
        file["sandboxes"].as_array().expect("sandboxes").iter().find(|s| s["username"] == user.as_str()).cloned();
    assert_eq!(entry.expect("A's entry")["source_addrs"], json!([a_ip]));

    // The same credentials from B: refused as unknown (407), whatever B holds.
    server.prompt(&session_b, &raw_connect_script(port, &user, &password)).await;
    let from_b = last_run_output(&server.wait_turns(&session_b, 1, TURN).await);
    assert!(from_b.trim().starts_with("HTTP/1.1 407"), "{from_b}");
}

/// The provider's stream ends early (the stand-in declares 1000 bytes, sends 100 and closes):
/// the real proxy logs and reports the cut for the agent's sandbox, and when the harness then
/// fails the turn (fakeagent's `error terminated`, as a Node harness says it), the turn's error is
/// `PROVIDER_STREAM_ENDED`: "the provider's stream ended early: …" with what the proxy saw, and
/// the harness's own words after it.
#[tokio::test]
async fn a_provider_stream_cut_short_is_named_in_the_failed_turn() {
    if skip_unless_docker("local sandboxes do not use the egress proxy") {
        return;
    }
    let setup = Proxied::start_on(|dir| Box::pin(StandIn::cutting(dir))).await;
    let (server, proxy) = (&setup.server, &setup.proxy);
    let agent = server.create_agent(json!({})).await;
    attach_anthropic_secret(server, &agent).await;
    let session = server.create_session(&agent).await;
    server
        .prompt(&session, "fetch https://api.anthropic.com/v1/messages x-api-key:$ANTHROPIC_API_KEY\nerror terminated")
        .await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let errors: Vec<&Value> = events.iter().filter(|e| e["type"] == "error").collect();
    assert_eq!(errors.len(), 1, "one error: {events:?}");
    let error = errors[0];
    assert_eq!(error["payload"]["code"], "PROVIDER_STREAM_ENDED", "{error}\n\nproxy log:\n{}", proxy.log());
    let message = error["payload"]["message"].as_str().expect("message");
    assert!(message.starts_with("the provider's stream ended early: "), "{message}");
    assert!(message.contains("api.anthropic.com") && message.contains("after 100 of 1000 bytes"), "{message}");
    assert!(message.ends_with("(the harness said: terminated)"), "{message}");
    assert_eq!(error["payload"]["rpc_error"]["message"], "terminated", "{error}");
    let turn_end = events.iter().find(|e| e["type"] == "turn_end").expect("the turn ended");
    assert_eq!(turn_end["payload"]["stop_reason"], "error");
    assert!(error["seq"].as_i64() < turn_end["seq"].as_i64(), "the error comes before the end: {events:?}");
    let log = proxy.log();
    assert!(log.contains("cut-short") && log.contains("bytes_sent=100"), "{log}");
}

/// The variables the harness and the terminal must share: the proxy's, the CA's, and an attached
/// secret's placeholder.
const SHARED_VARS: &str = "^(HTTPS?_PROXY|https?_proxy|NO_PROXY|no_proxy|NODE_USE_ENV_PROXY|NODE_EXTRA_CA_CERTS|SSL_CERT_FILE|\
REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|CODEX_CA_CERTIFICATE|GIT_SSL_CAINFO|PIP_CERT|CARGO_HTTP_CAINFO|ANTHROPIC_API_KEY)=";

/// A shell line printing `names=<the shared variables' names>` and `sum=<a hash of their values>`
/// (the values hold the proxy password: never printed).
fn shared_vars_line() -> String {
    format!(
        "V='{SHARED_VARS}'; echo \"names=$(env | grep -E \"$V\" | cut -d= -f1 | sort | tr '\\n' ,)\"; \
         echo \"sum=$(env | grep -E \"$V\" | sort | sha256sum | cut -c1-16)\""
    )
}

/// Types `lines` into a shell terminal of the agent (then `exit`) and returns what it printed.
async fn in_terminal(server: &TestServer, agent: &str, lines: &[String]) -> String {
    let url = format!("{}/api/v1/agents/{agent}/terminal", server.url.replace("http://", "ws://"));
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert("authorization", format!("Bearer {}", server.token).parse().expect("header"));
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.expect("the terminal opens");
    socket.send(Message::Text(r#"{"type":"resize","cols":250,"rows":50}"#.into())).await.expect("resize");
    for line in lines.iter().map(String::as_str).chain(["exit"]) {
        socket.send(Message::Binary(format!("{line}\n").into_bytes().into())).await.expect("input");
    }
    let mut output = Vec::new();
    while let Ok(Some(Ok(message))) = tokio::time::timeout(TURN, socket.next()).await {
        match message {
            Message::Binary(bytes) => output.extend_from_slice(&bytes),
            Message::Close(_) => break,
            _ => {}
        }
    }
    String::from_utf8_lossy(&output).into_owned()
}

/// The value after `key` on an output line (not the typed command's echo, which holds `$(`; a
/// terminal's line may start with control sequences).
fn printed<'a>(output: &'a str, key: &str) -> Option<&'a str> {
    output
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.contains("$("))
        .find_map(|l| l.split_once(key).map(|(_, value)| value))
}

/// Issue 32: a person in the web terminal reaches what the agent reaches. The terminal's shell
/// gets exactly the harness's proxy variables, CA variables and secret placeholders (same names,
/// same values), and its proxy credentials open a tunnel to an allowed host (the secret's) while
/// the proxy refuses one outside the agent's egress.
#[tokio::test]
async fn the_terminal_gets_the_harness_s_proxy_ca_and_placeholders() {
    if skip_unless_docker("local sandboxes do not use the egress proxy") {
        return;
    }
    let setup = Proxied::start().await;
    let server = &setup.server;
    let agent = server.create_agent(json!({})).await;
    let (_, value) = attach_anthropic_secret(server, &agent).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, &format!("run {}", shared_vars_line())).await;
    let harness = last_run_output(&server.wait_turns(&session, 1, TURN).await);
    let names = printed(&harness, "names=").expect("the harness's names");
    assert_eq!(
        names,
        "ANTHROPIC_API_KEY,CARGO_HTTP_CAINFO,CODEX_CA_CERTIFICATE,CURL_CA_BUNDLE,GIT_SSL_CAINFO,HTTPS_PROXY,HTTP_PROXY,\
         NODE_EXTRA_CA_CERTS,NODE_USE_ENV_PROXY,NO_PROXY,PIP_CERT,REQUESTS_CA_BUNDLE,SSL_CERT_FILE,http_proxy,https_proxy,\
         no_proxy,",
        "{harness}"
    );

    // The proxy's answer to a CONNECT with the terminal's own HTTPS_PROXY credentials.
    let connect = |host: &str| {
        format!(
            "p=${{HTTPS_PROXY#http://}}; c=${{p%@*}}; hp=${{p##*@}}; exec 3<>/dev/tcp/${{hp%:*}}/${{hp##*:}}; \
             printf 'CONNECT {host}:443 HTTP/1.1\\r\\nHost: {host}:443\\r\\nProxy-Authorization: Basic %s\\r\\n\\r\\n' \
             \"$(printf %s \"$c\" | base64 -w0)\" >&3; echo \"{host}=$(head -n 1 <&3 | tr -d '\\r')\"; exec 3<&-"
        )
    };
    let output =
        in_terminal(server, &agent, &[shared_vars_line(), connect("api.anthropic.com"), connect("example.com")]).await;
    assert_eq!(printed(&output, "names="), Some(names), "the terminal's variables:\n{output}");
    assert_eq!(printed(&output, "sum="), printed(&harness, "sum="), "the same values as the harness's:\n{output}");
    let allowed = printed(&output, "api.anthropic.com=").expect("the proxy's answer");
    assert!(allowed.starts_with("HTTP/1.1 200"), "the secret's host: {allowed}\n{output}");
    let refused = printed(&output, "example.com=").expect("the proxy's answer");
    assert!(refused.starts_with("HTTP/1.1 403"), "a host outside the egress: {refused}\n{output}");
    assert!(!output.contains(&value), "the real value reached the terminal");
}
