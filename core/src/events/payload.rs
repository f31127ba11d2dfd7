//! An event's payload ([`Payload`]): a JSON value the server made, or a harness's `session/update`
//! kept as the text it printed. A streaming harness's every line passes through the supervisor;
//! building a map of each update only to encode it again for the log, and to free it once the
//! watchers have it, was about half of the server's work per line in a flood (docs/benchmarks.md).
//! An update kept as text is parsed only when something reads it.

use std::borrow::Cow;

use serde_json::Value;
use serde_json::value::RawValue;

/// An event's payload.
#[derive(Debug, Clone)]
pub struct Payload {
    /// The value, unless `text` holds the payload.
    value: Value,
    /// The payload as a harness printed it (valid JSON, checked when it was read), not parsed.
    text: Option<Box<RawValue>>,
}

impl Payload {
    /// A payload kept as the JSON text it came as.
    pub fn text(text: Box<RawValue>) -> Self {
        Self { value: Value::Null, text: Some(text) }
    }

    /// The JSON text it came as, when it is kept so (`None`: a value).
    pub fn as_text(&self) -> Option<&str> {
        self.text.as_deref().map(RawValue::get)
    }

    /// The payload as a value (parsed when it is kept as text).
    pub fn value(&self) -> Cow<'_, Value> {
        match &self.text {
            Some(text) => Cow::Owned(parse(text)),
            None => Cow::Borrowed(&self.value),
        }
    }

    /// The payload as a value to change (parsed, and kept parsed, when it was text).
    pub fn value_mut(&mut self) -> &mut Value {
        if let Some(text) = self.text.take() {
            self.value = parse(&text);
        }
        &mut self.value
    }

    /// The payload as a value, taken.
    pub fn into_value(self) -> Value {
        match self.text {
            Some(text) => parse(&text),
            None => self.value,
        }
    }
}

impl From<Value> for Payload {
    fn from(value: Value) -> Self {
        Self { value, text: None }
    }
}

impl PartialEq<Value> for Payload {
    fn eq(&self, other: &Value) -> bool {
        self.value().as_ref() == other
    }
}

/// Its JSON text.
impl std::fmt::Display for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.as_text() {
            Some(text) => f.write_str(text),
            None => self.value.fmt(f),
        }
    }
}

/// The text as a value. It was read as valid JSON; what `Value` still refuses (an unpaired
/// surrogate escape, a number past `f64`) is kept whole as a string rather than lost.
fn parse(text: &RawValue) -> Value {
    serde_json::from_str(text.get()).unwrap_or_else(|_| Value::String(text.get().to_owned()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).expect("valid JSON")
    }

    #[test]
    fn text_is_kept_as_it_came_until_changed() {
        let mut payload = Payload::text(raw(r#"{"sessionUpdate": "agent_message_chunk", "n": 1}"#));
        assert_eq!(payload.as_text(), Some(r#"{"sessionUpdate": "agent_message_chunk", "n": 1}"#));
        assert_eq!(payload.value()["n"], json!(1));
        payload.value_mut()["turn_id"] = json!("t");
        assert_eq!(payload.as_text(), None);
        assert_eq!(payload.into_value(), json!({"sessionUpdate": "agent_message_chunk", "n": 1, "turn_id": "t"}));
    }

    #[test]
    fn a_value_is_no_text() {
        let payload = Payload::from(json!({"code": "x"}));
        assert_eq!(payload.as_text(), None);
        assert_eq!(payload.value()["code"], json!("x"));
        assert_eq!(payload.into_value(), json!({"code": "x"}));
    }

    #[test]
    fn text_a_value_refuses_is_kept_whole() {
        let text = r#"{"t": "\ud800"}"#;
        let payload = Payload::text(raw(text));
        assert_eq!(payload.into_value(), json!(text));
    }
}
