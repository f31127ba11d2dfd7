//! The OpenAPI document: it is a valid OpenAPI 3.1 document (checked against the OpenAPI
//! Initiative's own JSON Schema for 3.1, vendored in `tests/data`, with the `jsonschema` crate;
//! each of its schemas a valid JSON Schema 2020-12), and real answers of the running server — for
//! a sample of routes, errors included — match the schemas it gives for their status. Objects are
//! checked strictly: a field the document does not list fails. The route coverage and the
//! authorization matrix that read the document are in `people.rs`.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::support::TestServer;

const OPENAPI_31_SCHEMA: &str = include_str!("../data/openapi-3.1-schema.json");
const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

fn document() -> Value {
    agenthold_server::api::openapi::document()
}

#[test]
fn the_document_is_valid_openapi_3_1() {
    let document = document();
    assert!(document["openapi"].as_str().is_some_and(|v| v.starts_with("3.1.")), "{}", document["openapi"]);
    let schema: Value = serde_json::from_str(OPENAPI_31_SCHEMA).expect("the vendored schema");
    let validator = jsonschema::draft202012::new(&schema).expect("the OpenAPI 3.1 schema compiles");
    let errors: Vec<String> = validator.iter_errors(&document).map(|e| format!("{}: {e}", e.instance_path())).collect();
    assert!(errors.is_empty(), "not a valid OpenAPI 3.1 document: {errors:#?}");
    // The check has teeth: a broken copy fails it.
    let mut broken = document.clone();
    broken["paths"]["/healthz"]["get"]["responses"]["200"] = json!({"content": {}});
    assert!(!validator.is_valid(&broken), "a response without a description passed");

    // That schema leaves Schema Objects to JSON Schema: each must be a valid 2020-12 schema.
    for (name, schema) in document["components"]["schemas"].as_object().expect("schemas") {
        // A Rust alias (`Seq = i64`) shows up as a component named `i64` unless annotated.
        assert!(name.starts_with(|c: char| c.is_ascii_uppercase()), "components.schemas.{name}: a Rust alias?");
        let errors: Vec<String> =
            jsonschema::draft202012::meta::validate(schema).err().into_iter().map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "components.schemas.{name}: {errors:?}");
    }
    // And every schema the document holds compiles, references included.
    let root = with_components(json!({}), &document);
    jsonschema::draft202012::new(&root).expect("the components compile");

    let mut ids = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let id = operation["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path}: no operationId"));
            ids.push(id.to_owned());
            let responses = operation["responses"].as_object().expect("responses");
            assert!(responses.contains_key("500"), "{method} {path}: no 500");
            if operation["security"] != json!([]) {
                assert!(responses.contains_key("401"), "{method} {path}: no 401");
            }
            // Every error answer is the one error body (readiness answers its own status).
            let errors = responses.iter().filter(|(status, _)| status.as_str() >= "400" && path != "/readyz");
            for (status, response) in errors {
                let response = resolve(&document, response);
                let schema = &response["content"]["application/json"]["schema"];
                assert_eq!(schema["$ref"], "#/components/schemas/Error", "{method} {path} {status}");
            }
            // Every path parameter is declared.
            for name in path.split('{').skip(1).filter_map(|rest| rest.split_once('}')).map(|(name, _)| name) {
                let declared = operation["parameters"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(|p| p["name"] == name && p["in"] == "path"));
                assert!(declared, "{method} {path}: {{{name}}} is not declared");
            }
        }
    }
    let count = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), count, "operationIds are unique");
}

/// A `$ref` to a response component, followed.
fn resolve<'a>(document: &'a Value, value: &'a Value) -> &'a Value {
    match value["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/responses/")) {
        Some(name) => &document["components"]["responses"][name],
        None => value,
    }
}

/// `schema` as a root schema that can resolve the document's `#/components/...` references,
/// with every object schema closed: a property the document does not list is an error.
fn with_components(schema: Value, document: &Value) -> Value {
    let mut components = document["components"].clone();
    if let Some(schemas) = components["schemas"].as_object_mut() {
        close(schemas);
    }
    json!({"$schema": DIALECT, "allOf": [redirect(schema, false)], "components": components})
}

/// Adds a closed copy of every schema (`<name>.closed`: no property beyond those it lists) and
/// points every reference at it — except a reference directly under `allOf` (a Rust
/// `#[serde(flatten)]`): the extending schema's closed copy closes over all its parts instead
/// (`unevaluatedProperties` sees the properties every part evaluated).
fn close(schemas: &mut Map<String, Value>) {
    let names: Vec<String> = schemas.keys().cloned().collect();
    for name in names {
        let schema = schemas.remove(&name).unwrap_or_default();
        schemas.insert(name.clone(), redirect(schema, false));
        let closed =
            json!({"allOf": [{"$ref": format!("#/components/schemas/{name}")}], "unevaluatedProperties": false});
        schemas.insert(format!("{name}.closed"), closed);
    }
}

/// Rewrites references: directly under `allOf` they stay (an extension), elsewhere they go to
/// the closed copy.
fn redirect(value: Value, in_all_of: bool) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| {
                    let value = match (key.as_str(), &value) {
                        ("$ref", Value::String(r)) if !in_all_of && r.starts_with("#/components/schemas/") => {
                            json!(format!("{r}.closed"))
                        }
                        ("allOf", Value::Array(items)) => {
                            Value::Array(items.iter().cloned().map(redirect_all_of_item).collect())
                        }
                        _ => redirect(value, false),
                    };
                    (key, value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(|item| redirect(item, false)).collect()),
        other => other,
    }
}

fn redirect_all_of_item(item: Value) -> Value {
    match item {
        Value::Object(map) if map.contains_key("$ref") => redirect(Value::Object(map), true),
        other => redirect(other, false),
    }
}

/// Checks a real answer against the document's schema for its operation and status.
pub(crate) fn check(document: &Value, method: &str, template: &str, status: u16, body: &Value) {
    let operation = &document["paths"][template][method];
    assert!(operation.is_object(), "{method} {template} is not in the document");
    let response = operation["responses"]
        .get(status.to_string())
        .unwrap_or_else(|| panic!("{method} {template} answered {status}, which the document does not list: {body}"));
    let response = resolve(document, response);
    match response["content"].get("application/json") {
        None => assert!(body.is_null(), "{method} {template} {status}: the document gives no body, got {body}"),
        Some(content) => {
            let root = with_components(content["schema"].clone(), document);
            let validator = jsonschema::draft202012::new(&root).expect("the schema compiles");
            let errors: Vec<String> =
                validator.iter_errors(body).map(|e| format!("{}: {e}", e.instance_path())).collect();
            assert!(
                errors.is_empty(),
                "{method} {template} {status} does not match the document: {errors:#?}\n{body:#}"
            );
        }
    }
}

#[tokio::test]
async fn real_answers_match_the_documents_schemas() {
    let server = TestServer::start().await;
    let document = document();
    let doc = &document;

    let (status, body) = server.get("/healthz").await;
    check(doc, "get", "/healthz", status, &body);
    let (status, body) = server.get("/readyz").await;
    check(doc, "get", "/readyz", status, &body);
    let (status, body) = server.get("/api/v1/openapi.json").await;
    check(doc, "get", "/api/v1/openapi.json", status, &body);
    assert_eq!(body, document, "the server serves the document");

    let (status, body) = server.get("/api/v1/me").await;
    assert_eq!(status, 200);
    check(doc, "get", "/api/v1/me", status, &body);
    // The check has teeth: a field the document does not list, one missing, one of the wrong
    // type, a nested one undocumented, a status not documented — each fails it.
    let mut undocumented = body.clone();
    undocumented["surprise"] = json!(1);
    let mut missing = body.clone();
    missing.as_object_mut().map(|me| me.remove("username"));
    let mut wrong_type = body.clone();
    wrong_type["server_admin"] = json!("yes");
    let mut nested = body.clone();
    nested["workspaces"][0]["surprise"] = json!(1);
    for bad in [undocumented, missing, wrong_type, nested] {
        let failed = std::panic::catch_unwind(|| check(doc, "get", "/api/v1/me", 200, &bad)).is_err();
        assert!(failed, "{bad} passed");
    }
    assert!(std::panic::catch_unwind(|| check(doc, "get", "/api/v1/me", 418, &body)).is_err());

    // Tokens.
    let (status, token) = server.post("/api/v1/tokens", json!({"name": "doc"})).await;
    assert_eq!(status, 201, "{token}");
    check(doc, "post", "/api/v1/tokens", status, &token);
    let (status, body) = server.get("/api/v1/tokens").await;
    check(doc, "get", "/api/v1/tokens", status, &body);
    let (status, body) = server.delete(&format!("/api/v1/tokens/{}", token["id"].as_str().expect("id"))).await;
    assert_eq!(status, 204);
    check(doc, "delete", "/api/v1/tokens/{id}", status, &body);

    // Workspaces and their audit log.
    let (status, workspace) = server.post("/api/v1/workspaces", json!({"name": "doc"})).await;
    check(doc, "post", "/api/v1/workspaces", status, &workspace);
    let ws = workspace["id"].as_str().expect("id").to_owned();
    let (status, body) = server.get("/api/v1/workspaces").await;
    check(doc, "get", "/api/v1/workspaces", status, &body);

    // Agents.
    let (status, agent) =
        server.post("/api/v1/agents", json!({"name": "doc", "harness": "fake", "workspace_id": ws})).await;
    assert_eq!(status, 201, "{agent}");
    check(doc, "post", "/api/v1/agents", status, &agent);
    let agent_id = agent["id"].as_str().expect("id").to_owned();
    let (status, body) = server.get("/api/v1/agents").await;
    check(doc, "get", "/api/v1/agents", status, &body);
    let (status, body) = server.get(&format!("/api/v1/agents/{agent_id}")).await;
    assert_eq!(status, 200, "{body}");
    check(doc, "get", "/api/v1/agents/{id}", status, &body);

    // Secrets.
    let secret = json!({"name": "doc", "preset": "anthropic", "value": "sk-ant-doc"});
    let (status, body) = server.post(&format!("/api/v1/workspaces/{ws}/secrets"), secret).await;
    check(doc, "post", "/api/v1/workspaces/{id}/secrets", status, &body);
    let secret_id = body["id"].as_str().expect("id").to_owned();
    let (status, body) = server
        .raw_with_headers(
            "PUT",
            &format!("/api/v1/agents/{agent_id}/secrets/ANTHROPIC_API_KEY"),
            Some(&server.token),
            &[],
            json!({"secret_id": secret_id}),
        )
        .await
        .without_cookie();
    check(doc, "put", "/api/v1/agents/{id}/secrets/{env_name}", status, &body);
    let (status, body) = server.get(&format!("/api/v1/workspaces/{ws}/secrets")).await;
    check(doc, "get", "/api/v1/workspaces/{id}/secrets", status, &body);
    let (status, body) = server.get(&format!("/api/v1/agents/{agent_id}")).await;
    check(doc, "get", "/api/v1/agents/{id}", status, &body);

    // Sessions, a turn, the event log.
    let (status, session) = server.post(&format!("/api/v1/agents/{agent_id}/sessions"), json!({})).await;
    check(doc, "post", "/api/v1/agents/{id}/sessions", status, &session);
    let session_id = session["id"].as_str().expect("id").to_owned();
    let (status, body) = server.get(&format!("/api/v1/agents/{agent_id}/sessions")).await;
    check(doc, "get", "/api/v1/agents/{id}/sessions", status, &body);
    let (status, body) =
        server.post(&format!("/api/v1/sessions/{session_id}/prompt"), json!({"text": "text hello"})).await;
    assert_eq!(status, 202, "{body}");
    check(doc, "post", "/api/v1/sessions/{id}/prompt", status, &body);
    server.wait_turns(&session_id, 1, Duration::from_secs(90)).await;
    let (status, body) = server.get(&format!("/api/v1/sessions/{session_id}")).await;
    check(doc, "get", "/api/v1/sessions/{id}", status, &body);
    let (status, body) = server.get(&format!("/api/v1/sessions/{session_id}/events?after=0")).await;
    assert!(body["events"].as_array().is_some_and(|e| !e.is_empty()), "{body}");
    check(doc, "get", "/api/v1/sessions/{id}/events", status, &body);
    let (status, body) = server.get(&format!("/api/v1/sessions/{session_id}/events/1/payload")).await;
    check(doc, "get", "/api/v1/sessions/{id}/events/{seq}/payload", status, &body);
    let (status, body) = server.post(&format!("/api/v1/sessions/{session_id}/cancel"), json!({})).await;
    assert_eq!(status, 409, "{body}");
    check(doc, "post", "/api/v1/sessions/{id}/cancel", status, &body);

    // Changing an agent; users and members.
    let (status, body) = server
        .raw_with_headers(
            "PATCH",
            &format!("/api/v1/agents/{agent_id}"),
            Some(&server.token),
            &[],
            json!({"model": "m"}),
        )
        .await
        .without_cookie();
    assert_eq!(status, 200, "{body}");
    check(doc, "patch", "/api/v1/agents/{id}", status, &body);
    let (status, user) =
        server.post("/api/v1/users", json!({"username": "docs", "password": "a long enough password"})).await;
    check(doc, "post", "/api/v1/users", status, &user);
    let member = format!("/api/v1/workspaces/{ws}/members/{}", user["id"].as_str().expect("id"));
    let (status, body) = server
        .raw_with_headers("PUT", &member, Some(&server.token), &[], json!({"role": "viewer"}))
        .await
        .without_cookie();
    assert_eq!(status, 204, "{body}");
    check(doc, "put", "/api/v1/workspaces/{id}/members/{user_id}", status, &body);
    let (status, body) = server.get(&format!("/api/v1/workspaces/{ws}/members")).await;
    assert_eq!(body["members"].as_array().map(Vec::len), Some(2), "{body}");
    check(doc, "get", "/api/v1/workspaces/{id}/members", status, &body);
    // An agent whose harness cannot start is in `error`, with its reason (both documented).
    let broken =
        server.create_agent(json!({"workspace_id": ws, "harness": "command", "command": ["no-such-acp"]})).await;
    let broken_session = server.create_session(&broken).await;
    server.prompt(&broken_session, "hello").await;
    server.wait_turns(&broken_session, 1, Duration::from_secs(90)).await;
    let (status, body) = server.get(&format!("/api/v1/agents/{broken}")).await;
    assert_eq!((body["state"].as_str(), body["state_reason"].is_string()), (Some("error"), true), "{body}");
    check(doc, "get", "/api/v1/agents/{id}", status, &body);

    // A question waiting for a person, and its answer.
    let asking = server.create_agent(json!({"workspace_id": ws, "posture": "approval"})).await;
    let asking_session = server.create_session(&asking).await;
    server.prompt(&asking_session, "ask execute make").await;
    let started = std::time::Instant::now();
    let question = loop {
        let (status, body) = server.get("/api/v1/permissions").await;
        check(doc, "get", "/api/v1/permissions", status, &body);
        if let Some(id) = body["permissions"][0]["id"].as_str() {
            break id.to_owned();
        }
        assert!(started.elapsed() < Duration::from_secs(90), "no question");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (status, body) = server.get(&format!("/api/v1/permissions/{question}")).await;
    check(doc, "get", "/api/v1/permissions/{id}", status, &body);
    let answer = format!("/api/v1/permissions/{question}/answer");
    let (status, body) = server.post(&answer, json!({"decision": "allow"})).await;
    assert_eq!(status, 200, "{body}");
    check(doc, "post", "/api/v1/permissions/{id}/answer", status, &body);
    let (status, body) = server.post(&answer, json!({"decision": "allow"})).await;
    assert_eq!(status, 409, "{body}");
    check(doc, "post", "/api/v1/permissions/{id}/answer", status, &body);

    // The rest of what a signed-in user reads.
    let (status, body) = server.get("/api/v1/permissions?state=all").await;
    assert!(body["permissions"].as_array().is_some_and(|p| !p.is_empty()), "{body}");
    check(doc, "get", "/api/v1/permissions", status, &body);
    let (status, body) = server.get("/api/v1/me/providers").await;
    check(doc, "get", "/api/v1/me/providers", status, &body);
    let (status, body) = server.get(&format!("/api/v1/workspaces/{ws}/audit")).await;
    assert!(body["records"].as_array().is_some_and(|r| !r.is_empty()), "{body}");
    check(doc, "get", "/api/v1/workspaces/{id}/audit", status, &body);

    // Error answers.
    let (status, body) = server.get(&format!("/api/v1/agents/{}", uuid::Uuid::new_v4())).await;
    assert_eq!(status, 404);
    check(doc, "get", "/api/v1/agents/{id}", status, &body);
    let (status, body) = server.post("/api/v1/agents", json!({"name": "x"})).await;
    assert_eq!(status, 400);
    check(doc, "post", "/api/v1/agents", status, &body);
    let (status, body) =
        server.post("/api/v1/agents", json!({"name": "doc", "harness": "fake", "workspace_id": ws})).await;
    assert_eq!(status, 409, "{body}");
    check(doc, "post", "/api/v1/agents", status, &body);
    let (status, _, body) = server.raw_with_headers("GET", "/api/v1/me", None, &[], json!({})).await;
    assert_eq!(status, 401);
    check(doc, "get", "/api/v1/me", status, &body);
    let (status, body) = server.get(&format!("/api/v1/workspaces/{ws}/audit?limit=0")).await;
    assert_eq!(status, 400);
    check(doc, "get", "/api/v1/workspaces/{id}/audit", status, &body);
    for (template, path) in [
        ("/api/v1/sessions/{id}/stream", format!("/api/v1/sessions/{session_id}/stream")),
        ("/api/v1/permissions/stream", "/api/v1/permissions/stream".to_owned()),
    ] {
        let (status, body) = server.get(&path).await;
        assert_eq!((status, body["error"]["code"].as_str()), (400, Some("NOT_A_WEBSOCKET")), "{body}");
        check(doc, "get", template, status, &body);
    }
    for query in ["limit=abc", "surprise=1", "state=some"] {
        let (status, body) = server.get(&format!("/api/v1/permissions?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        check(doc, "get", "/api/v1/permissions", status, &body);
    }
}

/// The status and body of a `raw_with_headers` answer.
trait WithoutCookie {
    fn without_cookie(self) -> (u16, Value);
}

impl WithoutCookie for (u16, String, Value) {
    fn without_cookie(self) -> (u16, Value) {
        (self.0, self.2)
    }
}

#[tokio::test]
async fn an_oversized_body_answers_413_as_documented() {
    let server = TestServer::start_with(&[("AGENTHOLD_MAX_BODY_BYTES", "1024")]).await;
    let document = document();
    let agent = server.create_agent(json!({})).await;
    let big = json!({"name": "x".repeat(2048)});
    // A body parsed at once, and one read whole to be parsed once the role is checked.
    for (method, template, path) in [
        ("post", "/api/v1/tokens", "/api/v1/tokens".to_owned()),
        ("post", "/api/v1/agents/{id}/sessions", format!("/api/v1/agents/{agent}/sessions")),
        ("patch", "/api/v1/agents/{id}", format!("/api/v1/agents/{agent}")),
    ] {
        let (status, _, body) =
            server.raw_with_headers(&method.to_uppercase(), &path, Some(&server.token), &[], big.clone()).await;
        assert_eq!((status, body["error"]["code"].as_str()), (413, Some("PAYLOAD_TOO_LARGE")), "{path}: {body}");
        check(&document, method, template, status, &body);
    }
}
