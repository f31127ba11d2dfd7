//! The harness's own questions: ACP `elicitation/create` in form mode (Claude Code's
//! AskUserQuestion, for one), which reach a person like a permission question and take
//! free-text or option answers. Pure: the request read and checked, a person's answer checked
//! against the requested schema and turned into the harness's response.
//!
//! Only form mode scoped to a session is taken (agenthold advertises `elicitation.form` only);
//! URL mode would send a person to a page the server cannot see.

use agent_client_protocol::v1::schema::{
    CreateElicitationRequest, ElicitationMode, ElicitationPropertySchema, ElicitationSchema, ElicitationScope,
    MultiSelectItems,
};
use serde_json::{Map, Value, json};

use super::{Choice, ChoiceError, is_clear_yes};

/// The most bytes of answer content a person may send (all fields together, as JSON).
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;

/// A readable form elicitation.
#[derive(Debug, Clone, PartialEq)]
pub struct Elicitation {
    /// The harness's session id it is scoped to.
    pub acp_session_id: String,
    /// The tool call it belongs to, if the harness said.
    pub tool_call_id: Option<String>,
    /// What it asks.
    pub message: String,
}

/// Reads an `elicitation/create` request; an error names what is wrong or unsupported.
pub fn parse(params: &Value) -> Result<Elicitation, String> {
    let request: CreateElicitationRequest =
        serde_json::from_value(params.clone()).map_err(|e| format!("unreadable elicitation request: {e}"))?;
    let ElicitationMode::Form(form) = &request.mode else {
        return Err("only form elicitations are supported (the client advertised elicitation.form only)".to_owned());
    };
    let ElicitationScope::Session(scope) = &form.scope else {
        return Err("only elicitations scoped to a session are supported".to_owned());
    };
    Ok(Elicitation {
        acp_session_id: scope.session_id.0.to_string(),
        tool_call_id: scope.tool_call_id.as_ref().map(|id| id.0.to_string()),
        message: request.message.clone(),
    })
}

/// The `permission` event's payload for an elicitation (`kind: "elicitation"`).
pub fn asked(request_id: &Value, permission_id: uuid::Uuid, params: &Value, elicitation: &Elicitation) -> Value {
    json!({
        "kind": "elicitation",
        "request_id": request_id,
        "permission_id": permission_id,
        "message": elicitation.message,
        "requested_schema": params.get("requestedSchema"),
        "tool_call_id": elicitation.tool_call_id,
    })
}

/// The harness's response and the `permission_resolved` payload for `choice` to the elicitation
/// asked with `params` (as stored).
pub fn resolve(
    request_id: &Value,
    permission_id: uuid::Uuid,
    params: &Value,
    choice: &Choice,
    by: Value,
) -> Result<(Value, Value), ChoiceError> {
    let schema: Option<ElicitationSchema> =
        params.get("requestedSchema").cloned().and_then(|s| serde_json::from_value(s).ok());
    let schema = || {
        schema
            .as_ref()
            .ok_or_else(|| ChoiceError("the question's schema is unreadable: it can only be declined".to_owned()))
    };
    let answer = match choice {
        Choice::Content(content) => json!({"action": "accept", "content": check_content(schema()?, content)?}),
        Choice::Reply(text) => json!({"action": "accept", "content": content_from_reply(schema()?, text)?}),
        Choice::Deny | Choice::Decline => json!({"action": "decline"}),
        Choice::Cancelled => json!({"action": "cancel"}),
        Choice::Allow | Choice::AllowForSession | Choice::Option(_) => {
            return Err(ChoiceError(
                "this is the agent's own question: answer it with content (or decline it)".to_owned(),
            ));
        }
    };
    let resolved = json!({
        "kind": "elicitation",
        "request_id": request_id,
        "permission_id": permission_id,
        "action": answer["action"],
        "content": answer.get("content"),
        "by": by,
    });
    Ok((answer, resolved))
}

/// Checks a person's content against the schema: known fields only, required ones present,
/// each of its type and within its bounds and choices.
pub fn check_content(schema: &ElicitationSchema, content: &Map<String, Value>) -> Result<Value, ChoiceError> {
    let size = serde_json::to_vec(content).map_or(usize::MAX, |b| b.len());
    if size > MAX_CONTENT_BYTES {
        return Err(ChoiceError(format!("the answer is {size} bytes; at most {MAX_CONTENT_BYTES}")));
    }
    for name in content.keys() {
        if !schema.properties.contains_key(name) {
            let known: Vec<&str> = schema.properties.keys().map(String::as_str).collect();
            return Err(ChoiceError(format!("unknown field {name:?}; the question asks for: {}", known.join(", "))));
        }
    }
    for name in schema.required.iter().flatten() {
        if !content.contains_key(name) {
            return Err(ChoiceError(format!("field {name:?} is required")));
        }
    }
    for (name, value) in content {
        if let Some(property) = schema.properties.get(name) {
            check_value(property, value).map_err(|why| ChoiceError(format!("field {name:?}: {why}")))?;
        }
    }
    Ok(Value::Object(content.clone()))
}

fn check_value(property: &ElicitationPropertySchema, value: &Value) -> Result<(), String> {
    match property {
        ElicitationPropertySchema::String(s) => {
            let text = value.as_str().ok_or("must be a string")?;
            let chars = text.chars().count();
            if s.min_length.is_some_and(|min| chars < min as usize)
                || s.max_length.is_some_and(|max| chars > max as usize)
            {
                return Err(format!(
                    "must be {}-{} characters",
                    s.min_length.unwrap_or(0),
                    s.max_length.unwrap_or(u32::MAX)
                ));
            }
            let mut choices: Vec<&str> = s.enum_values.iter().flatten().map(String::as_str).collect();
            choices.extend(s.one_of.iter().flatten().map(|o| o.value.as_str()));
            if !choices.is_empty() && !choices.contains(&text) {
                return Err(format!("must be one of: {}", choices.join(", ")));
            }
            Ok(())
        }
        ElicitationPropertySchema::Number(n) => {
            let x = value.as_f64().ok_or("must be a number")?;
            in_range(x, n.minimum, n.maximum)
        }
        ElicitationPropertySchema::Integer(n) => {
            let x = value.as_i64().ok_or("must be an integer")?;
            in_range(x, n.minimum, n.maximum)
        }
        ElicitationPropertySchema::Boolean(_) => {
            value.as_bool().map(drop).ok_or_else(|| "must be true or false".to_owned())
        }
        ElicitationPropertySchema::Array(a) => {
            let items = value.as_array().ok_or("must be a list of strings")?;
            let picked: Vec<&str> =
                items.iter().map(Value::as_str).collect::<Option<_>>().ok_or("must be a list of strings")?;
            let count = picked.len() as u64;
            if a.min_items.is_some_and(|min| count < min) || a.max_items.is_some_and(|max| count > max) {
                return Err(format!(
                    "must pick {}-{} items",
                    a.min_items.unwrap_or(0),
                    a.max_items.unwrap_or(u64::MAX)
                ));
            }
            let choices: Vec<&str> = match &a.items {
                MultiSelectItems::String(s) => s.values.iter().map(String::as_str).collect(),
                MultiSelectItems::Titled(t) => t.options.iter().map(|o| o.value.as_str()).collect(),
                _ => Vec::new(),
            };
            match picked.iter().find(|p| !choices.is_empty() && !choices.contains(p)) {
                Some(bad) => Err(format!("{bad:?} is not one of: {}", choices.join(", "))),
                None => Ok(()),
            }
        }
        // A kind this server does not know: any plain value.
        _ => match value {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(()),
            Value::Array(items) if items.iter().all(Value::is_string) => Ok(()),
            _ => Err("must be a string, a number, true/false or a list of strings".to_owned()),
        },
    }
}

fn in_range<T: PartialOrd + std::fmt::Display + Copy>(x: T, min: Option<T>, max: Option<T>) -> Result<(), String> {
    if min.is_some_and(|m| x < m) || max.is_some_and(|m| x > m) {
        let show = |v: Option<T>| v.map_or_else(String::new, |v| v.to_string());
        return Err(format!("must be between {} and {}", show(min), show(max)));
    }
    Ok(())
}

/// A reply posted to the session while the question waits, as content: it answers a question
/// with one field (its text, or the choice it names, or yes/no); a question with several fields
/// needs the answer route.
fn content_from_reply(schema: &ElicitationSchema, text: &str) -> Result<Value, ChoiceError> {
    let mut fields = schema.properties.iter();
    let (Some((name, property)), None) = (fields.next(), fields.next()) else {
        return Err(ChoiceError(
            "the question has several fields: answer it with POST /api/v1/permissions/{id}/answer and its content"
                .to_owned(),
        ));
    };
    let text = text.trim();
    let value = match property {
        ElicitationPropertySchema::String(s) => {
            let choices = s.enum_values.iter().flatten().map(|v| (v.as_str(), v.as_str()));
            let titled = s.one_of.iter().flatten().map(|o| (o.value.as_str(), o.title.as_str()));
            let all: Vec<(&str, &str)> = choices.chain(titled).collect();
            match all.iter().find(|(v, t)| v.eq_ignore_ascii_case(text) || t.eq_ignore_ascii_case(text)) {
                Some((v, _)) => json!(v),
                None => json!(text),
            }
        }
        ElicitationPropertySchema::Boolean(_) => match text.to_lowercase().as_str() {
            "no" | "n" | "false" | "nope" => json!(false),
            _ if is_clear_yes(text) || text.eq_ignore_ascii_case("true") => json!(true),
            _ => return Err(ChoiceError("the question asks yes or no".to_owned())),
        },
        ElicitationPropertySchema::Integer(_) => {
            json!(text.parse::<i64>().map_err(|_| ChoiceError("the question asks for a whole number".to_owned()))?)
        }
        ElicitationPropertySchema::Number(_) => {
            json!(text.parse::<f64>().map_err(|_| ChoiceError("the question asks for a number".to_owned()))?)
        }
        ElicitationPropertySchema::Array(_) => {
            json!(text.split(',').map(str::trim).filter(|s| !s.is_empty()).collect::<Vec<_>>())
        }
        _ => json!(text),
    };
    let mut content = Map::new();
    content.insert(name.clone(), value);
    check_content(schema, &content)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(schema: Value) -> Value {
        json!({"sessionId": "s1", "mode": "form", "message": "Which release?", "requestedSchema": schema})
    }

    fn one_string() -> Value {
        json!({"type": "object", "properties": {"answer": {"type": "string", "maxLength": 20}}, "required": ["answer"]})
    }

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("an object")
    }

    #[test]
    fn reads_form_requests_and_refuses_url_mode() {
        let parsed = parse(&params(one_string())).expect("parses");
        assert_eq!((parsed.acp_session_id.as_str(), parsed.message.as_str()), ("s1", "Which release?"));
        let url =
            json!({"sessionId": "s1", "mode": "url", "message": "sign in", "url": "https://x", "elicitationId": "e"});
        assert!(parse(&url).expect_err("url mode").contains("form"));
        assert!(parse(&json!({"mode": "form"})).is_err());
    }

    #[test]
    fn content_is_checked_against_the_schema() {
        let p = params(json!({"type": "object", "properties": {
            "name": {"type": "string", "minLength": 2},
            "size": {"type": "integer", "minimum": 1, "maximum": 9},
            "color": {"type": "string", "enum": ["red", "blue"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 1},
            "ok": {"type": "boolean"}}, "required": ["name"]}));
        let id = uuid::Uuid::nil();
        let good = Choice::Content(map(json!({"name": "ab", "size": 3, "color": "red", "tags": ["a"], "ok": true})));
        let (answer, resolved) = resolve(&json!(1), id, &p, &good, json!("u")).expect("valid");
        assert_eq!(answer["action"], "accept");
        assert_eq!(answer["content"]["size"], 3);
        assert_eq!(resolved["kind"], "elicitation");
        for (bad, why) in [
            (json!({"size": 3}), "required"),
            (json!({"name": "a"}), "characters"),
            (json!({"name": "ab", "size": 10}), "between"),
            (json!({"name": "ab", "size": "3"}), "integer"),
            (json!({"name": "ab", "color": "green"}), "one of"),
            (json!({"name": "ab", "tags": ["a", "b"]}), "items"),
            (json!({"name": "ab", "tags": ["c"]}), "not one of"),
            (json!({"name": "ab", "ok": "yes"}), "true or false"),
            (json!({"name": "ab", "extra": 1}), "unknown field"),
        ] {
            let error =
                resolve(&json!(1), id, &p, &Choice::Content(map(bad.clone())), json!("u")).expect_err("invalid");
            assert!(error.0.contains(why), "{bad}: {}", error.0);
        }
        let huge = Choice::Content(map(json!({"name": "x".repeat(MAX_CONTENT_BYTES)})));
        assert!(resolve(&json!(1), id, &p, &huge, json!("u")).is_err());
    }

    #[test]
    fn a_reply_answers_a_one_field_question() {
        let id = uuid::Uuid::nil();
        let (answer, _) =
            resolve(&json!(1), id, &params(one_string()), &Choice::Reply(" Ventura ".into()), json!("u")).expect("ok");
        assert_eq!(answer, json!({"action": "accept", "content": {"answer": "Ventura"}}));
        let choice = params(json!({"type": "object", "properties": {"pick": {"type": "string",
            "oneOf": [{"const": "r1", "title": "Release one"}, {"const": "r2", "title": "Release two"}]}}}));
        let (answer, _) =
            resolve(&json!(1), id, &choice, &Choice::Reply("release TWO".into()), json!("u")).expect("ok");
        assert_eq!(answer["content"]["pick"], "r2");
        assert!(resolve(&json!(1), id, &choice, &Choice::Reply("three".into()), json!("u")).is_err());
        let yes_no = params(json!({"type": "object", "properties": {"go": {"type": "boolean"}}}));
        let (answer, _) = resolve(&json!(1), id, &yes_no, &Choice::Reply("no".into()), json!("u")).expect("ok");
        assert_eq!(answer["content"]["go"], false);
        let two = params(json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}));
        assert!(
            resolve(&json!(1), id, &two, &Choice::Reply("x".into()), json!("u")).expect_err("2").0.contains("several")
        );
    }

    #[test]
    fn decline_cancel_and_wrong_choices() {
        let (id, p) = (uuid::Uuid::nil(), params(one_string()));
        assert_eq!(resolve(&json!(1), id, &p, &Choice::Deny, json!("u")).expect("d").0, json!({"action": "decline"}));
        assert_eq!(
            resolve(&json!(1), id, &p, &Choice::Cancelled, json!("u")).expect("c").0,
            json!({"action": "cancel"})
        );
        assert!(resolve(&json!(1), id, &p, &Choice::Allow, json!("u")).is_err());
        // An unreadable schema can still be declined.
        let broken = json!({"sessionId": "s1", "mode": "form", "message": "?", "requestedSchema": 5});
        assert!(resolve(&json!(1), id, &broken, &Choice::Decline, json!("u")).is_ok());
        assert!(resolve(&json!(1), id, &broken, &Choice::Reply("x".into()), json!("u")).is_err());
    }
}
