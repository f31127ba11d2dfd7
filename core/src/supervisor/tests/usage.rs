//! A turn's usage, the same for every harness: `turn_end` keeps the harness's own `usage` and
//! adds `tokens` read from it and `session_cost` — what the session has cost so far, as the
//! harness last reported in a `usage_update` — and the turn's state change carries both for the
//! agent's totals.

use super::*;

fn cost_update(amount: f64) -> String {
    json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-1","update":{
        "sessionUpdate":"usage_update","used":122,"size":1000000,"cost":{"amount":amount,"currency":"USD"}}}})
    .to_string()
        + "\n"
}

#[test]
fn a_turn_end_carries_its_tokens_and_the_session_s_cost_so_far() {
    let mut sim = Sim::new();
    let mut offset = sim.run_until_prompt_sent();
    let update = cost_update(0.0125);
    let effects = sim.stdout(offset, &update);
    offset += update.len() as u64;
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1, "the update is stored as it came: {effects:?}");
    assert_eq!(stored[0].1[0].payload.value()["cost"]["amount"], 0.0125);

    let answer = r#"{"jsonrpc":"2.0","id":"t-3","result":{"stopReason":"end_turn","usage":{"inputTokens":5151,"outputTokens":10,"totalTokens":5161,"cachedReadTokens":4096,"cachedWriteTokens":0}}}"#.to_owned() + "\n";
    let effects = sim.stdout(offset, &answer);
    let stored = persists(&effects);
    let turn_end = stored.iter().flat_map(|p| p.1.iter()).find(|e| e.kind == EventKind::TurnEnd).expect("turn_end");
    assert_eq!(turn_end.payload.value()["usage"]["inputTokens"], 5151, "the harness's own usage is kept");
    assert_eq!(
        turn_end.payload.value()["tokens"],
        json!({"input": 5151, "output": 10, "cached_read": 4096, "cached_write": 0, "total": 5161})
    );
    assert_eq!(turn_end.payload.value()["session_cost"], json!({"amount": 0.0125, "currency": "USD"}));
    let side: Vec<&SideEffect> = stored.iter().flat_map(|p| p.2.iter()).collect();
    let end = side.iter().find_map(|s| match s {
        SideEffect::EndTurn { tokens, session_cost, .. } => Some((tokens.clone(), session_cost.clone())),
        _ => None,
    });
    let (tokens, cost) = end.expect("EndTurn");
    assert_eq!(tokens.and_then(|t| t.cached_read), Some(4096));
    assert_eq!(cost.map(|c| (c.amount, c.currency)), Some((0.0125, "USD".to_owned())));
}

#[test]
fn a_turn_end_without_usage_or_cost_says_nothing_of_them() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let effects = sim.stdout(offset, END_TURN);
    let stored = persists(&effects);
    let turn_end = stored.iter().flat_map(|p| p.1.iter()).find(|e| e.kind == EventKind::TurnEnd).expect("turn_end");
    for key in ["usage", "tokens", "session_cost"] {
        assert!(turn_end.payload.value().get(key).is_none(), "{key}: {}", turn_end.payload);
    }
}
