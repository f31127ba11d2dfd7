//! A turn's usage as agenthold reports it, the same whichever harness ran it (Claude Code, Codex
//! and OpenCode all speak ACP's shapes, each filling a different part): the tokens of the
//! `session/prompt` answer's `usage` (input, output, cached reads and writes, thoughts, total)
//! and the session's cost as the harness last reported it in a `usage_update` (ACP's `cost:
//! {amount, currency}`, cumulative for the session). The raw `usage` stays beside it in
//! `turn_end`; the store keeps these per turn for the agent's totals.
//!
//! Bounded and pure: counts are whole numbers below 2^53, an amount a finite number from 0 to
//! 10^9, a currency 1–8 letters; anything else is left out, never guessed.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The largest count kept (JSON numbers above it lose precision in JavaScript).
const MAX_COUNT: u64 = (1 << 53) - 1;
/// The largest cost amount kept.
const MAX_AMOUNT: f64 = 1e9;

/// Tokens of one turn (absent: the harness did not say).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Tokens {
    /// Input tokens (including cached ones, as ACP counts them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<u64>,
    /// Output tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<u64>,
    /// Input tokens read from the provider's cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_read: Option<u64>,
    /// Input tokens written to the provider's cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_write: Option<u64>,
    /// Reasoning tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought: Option<u64>,
    /// All of them, as the harness counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
}

/// An amount of money in a currency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Cost {
    /// The amount.
    pub amount: f64,
    /// Its currency (`USD`).
    pub currency: String,
}

/// The tokens of a `session/prompt` answer's `usage` (`None` when it names none).
pub fn tokens(usage: &Value) -> Option<Tokens> {
    let count = |name: &str| usage.get(name).and_then(Value::as_u64).filter(|n| *n <= MAX_COUNT);
    let tokens = Tokens {
        input: count("inputTokens"),
        output: count("outputTokens"),
        cached_read: count("cachedReadTokens"),
        cached_write: count("cachedWriteTokens"),
        thought: count("thoughtTokens"),
        total: count("totalTokens"),
    };
    (tokens != Tokens::default()).then_some(tokens)
}

/// The session's cost so far in a `usage_update` (`None`: the update is of another kind, or has
/// none that reads).
pub fn session_cost(update: &Value) -> Option<Cost> {
    if update.get("sessionUpdate").and_then(Value::as_str) != Some("usage_update") {
        return None;
    }
    let cost = update.get("cost")?;
    let amount =
        cost.get("amount").and_then(Value::as_f64).filter(|a| a.is_finite() && (0.0..=MAX_AMOUNT).contains(a))?;
    let currency = cost.get("currency").and_then(Value::as_str)?;
    let fine = (1..=8).contains(&currency.len()) && currency.chars().all(|c| c.is_ascii_alphabetic());
    fine.then(|| Cost { amount, currency: currency.to_ascii_uppercase() })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_harness_s_usage_reads_the_same() {
        // As Claude Code, Codex and OpenCode answer session/prompt (web/test/fixtures).
        let claude =
            json!({"inputTokens":5151,"totalTokens":5161,"outputTokens":10,"cachedReadTokens":0,"cachedWriteTokens":0});
        let codex = json!({"inputTokens":35644,"totalTokens":35654,"outputTokens":10,"thoughtTokens":0,"cachedReadTokens":0,"cachedWriteTokens":0});
        let opencode = json!({"inputTokens":122,"totalTokens":127,"outputTokens":5});
        let read = |v: &Value| tokens(v).expect("tokens");
        assert_eq!(
            read(&claude),
            Tokens {
                input: Some(5151),
                output: Some(10),
                cached_read: Some(0),
                cached_write: Some(0),
                thought: None,
                total: Some(5161)
            }
        );
        assert_eq!(read(&codex).thought, Some(0));
        assert_eq!(
            read(&opencode),
            Tokens { input: Some(122), output: Some(5), total: Some(127), ..Tokens::default() }
        );
        assert_eq!(
            serde_json::to_value(read(&opencode)).expect("json"),
            json!({"input": 122, "output": 5, "total": 127}),
            "what the harness did not say is left out"
        );
        assert_eq!(tokens(&json!({"inputTokens": -1, "outputTokens": "5", "totalTokens": 1e300})), None);
        assert_eq!(tokens(&json!(null)), None);
    }

    #[test]
    fn the_session_cost_comes_from_a_usage_update_and_is_bounded() {
        let update = json!({"sessionUpdate":"usage_update","size":1000000,"used":122,"cost":{"amount":0.000609,"currency":"USD"}});
        assert_eq!(session_cost(&update), Some(Cost { amount: 0.000609, currency: "USD".into() }));
        let usd = |amount: Value, currency: &str| {
            session_cost(&json!({"sessionUpdate": "usage_update", "cost": {"amount": amount, "currency": currency}}))
        };
        assert_eq!(usd(json!(1), "eur"), Some(Cost { amount: 1.0, currency: "EUR".into() }));
        assert_eq!(usd(json!(-1), "USD"), None);
        assert_eq!(usd(json!(1e12), "USD"), None);
        assert_eq!(usd(json!("1"), "USD"), None);
        assert_eq!(usd(json!(1), ""), None);
        assert_eq!(usd(json!(1), "US DOLLARS"), None);
        assert_eq!(session_cost(&json!({"sessionUpdate": "usage_update", "used": 5})), None);
        assert_eq!(
            session_cost(&json!({"sessionUpdate": "agent_message_chunk", "cost": {"amount": 1, "currency": "USD"}})),
            None
        );
    }
}
