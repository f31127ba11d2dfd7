//! An agent's usage (issue 33, item 4): each `turn_end` carries the same `tokens` whatever the
//! harness and the session's cost so far, and `GET /api/v1/agents/{id}/usage` sums tokens and the
//! turns' own costs (each its share of the session's cumulative cost) in total, by day and by
//! session; its window is validated and it is readable by the agent's viewers only.

use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::secrets::{call, make_user};

const TURN: std::time::Duration = std::time::Duration::from_secs(60);

fn turn_ends(events: &[Value]) -> Vec<&Value> {
    events.iter().filter(|e| e["type"] == "turn_end").collect()
}

#[tokio::test]
async fn turns_carry_the_same_tokens_and_the_agent_s_usage_sums_them_with_each_turn_s_cost() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "cost 0.01 USD\nusage 100 20\ntext one").await;
    server.wait_turns(&session, 1, TURN).await;
    server.prompt(&session, "cost 0.025 USD\nusage 50 5\ntext two").await;
    let events = server.wait_turns(&session, 2, TURN).await;
    let ends = turn_ends(&events);
    assert_eq!(ends[0]["payload"]["tokens"], json!({"input": 100, "output": 20, "total": 120}), "{:?}", ends[0]);
    assert_eq!(ends[1]["payload"]["session_cost"], json!({"amount": 0.025, "currency": "USD"}));
    assert_eq!(ends[1]["payload"]["usage"]["inputTokens"], 50, "the harness's own usage is kept");

    // A second session with no cost reported: tokens only.
    let other = server.create_session(&agent).await;
    server.prompt(&other, "usage 7 3\ntext three").await;
    server.wait_turns(&other, 1, TURN).await;

    let (status, usage) = server.get(&format!("/api/v1/agents/{agent}/usage")).await;
    assert_eq!(status, 200, "{usage}");
    let totals = &usage["totals"];
    assert_eq!(
        (totals["turns"].as_i64(), totals["input_tokens"].as_i64(), totals["output_tokens"].as_i64()),
        (Some(3), Some(157), Some(28)),
        "{usage}"
    );
    let usd = totals["cost"]["USD"].as_f64().expect("a cost in USD");
    assert!((usd - 0.025).abs() < 1e-9, "0.01 + (0.025 - 0.01): {usage}");
    let days = usage["by_day"].as_array().expect("days");
    assert_eq!(days.len(), 30, "every day of the default window: {usage}");
    assert_eq!(days[29]["turns"], 3, "today's: {usage}");
    assert_eq!(days[0]["turns"], 0);
    let sessions = usage["by_session"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 2, "{usage}");
    assert_eq!(sessions[0]["session_id"], other.as_str(), "the most recently active first");
    assert_eq!((sessions[0]["turns"].as_i64(), sessions[0]["cost"].as_object().map(|c| c.len())), (Some(1), Some(0)));
    assert_eq!(sessions[1]["turns"], 2);

    let (status, one_day) = server.get(&format!("/api/v1/agents/{agent}/usage?days=1")).await;
    assert_eq!((status, one_day["by_day"].as_array().map(Vec::len)), (200, Some(1)), "{one_day}");
    for bad in ["days=0", "days=367", "days=x", "days=-1"] {
        let (status, body) = server.get(&format!("/api/v1/agents/{agent}/usage?{bad}")).await;
        assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_QUERY")), "{bad}: {body}");
    }

    // Someone outside the agent's workspace learns nothing, not even that it exists.
    let stranger = make_user(&server, "usagestranger").await;
    let (status, body) =
        call(&server, "GET", &format!("/api/v1/agents/{agent}/usage"), &stranger.token, json!({})).await;
    assert_eq!(status, 404, "{body}");
}
