//! Webhook templates: text with `{{ path }}` placeholders that a delivery's JSON body fills in.
//! A path is dot-separated object keys and array indexes (`pull_request.head.ref`,
//! `commits.0.message`); `{{ . }}` is the whole body. Strings are inserted as they are, other
//! values as compact JSON. A path the body lacks refuses the delivery, naming the path.

use serde_json::Value;

/// Longest template accepted, in bytes.
pub const MAX_TEMPLATE_BYTES: usize = 16 * 1024;
/// Longest prompt a template may make, in bytes.
pub const MAX_RENDERED_BYTES: usize = 256 * 1024;

/// A parsed template.
#[derive(Debug, Clone)]
pub struct Template(Vec<Part>);

#[derive(Debug, Clone)]
enum Part {
    Text(String),
    /// A path (empty: the whole body).
    Field(Vec<String>),
}

/// Why a delivery's body could not fill the template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The body has no value at this path.
    #[error("the body has no field {0:?}")]
    Missing(String),
    /// The prompt would be too long.
    #[error("the prompt the template makes is over {MAX_RENDERED_BYTES} bytes")]
    TooLong,
}

impl Template {
    /// Parses a template: every `{{` must be closed by `}}` around a path.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.len() > MAX_TEMPLATE_BYTES {
            return Err(format!("the template is over {MAX_TEMPLATE_BYTES} bytes"));
        }
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_owned()));
            }
            let after = &rest[open + 2..];
            let close = after.find("}}").ok_or_else(|| "a \"{{\" is not closed by \"}}\"".to_owned())?;
            let path = after[..close].trim();
            parts.push(Part::Field(parse_path(path)?));
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        if parts.is_empty() {
            return Err("the template is empty".to_owned());
        }
        Ok(Self(parts))
    }

    /// Fills the template in from `body`.
    pub fn render(&self, body: &Value) -> Result<String, RenderError> {
        let mut out = String::new();
        for part in &self.0 {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Field(path) => {
                    let value = lookup(body, path).ok_or_else(|| RenderError::Missing(path_name(path)))?;
                    match value {
                        Value::String(text) => out.push_str(text),
                        other => out.push_str(&other.to_string()),
                    }
                }
            }
            if out.len() > MAX_RENDERED_BYTES {
                return Err(RenderError::TooLong);
            }
        }
        Ok(out)
    }
}

fn parse_path(path: &str) -> Result<Vec<String>, String> {
    if path == "." {
        return Ok(Vec::new());
    }
    let segments: Vec<String> = path.split('.').map(str::to_owned).collect();
    let valid = |s: &String| {
        !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '$' | '@' | ':'))
    };
    if segments.iter().all(valid) {
        Ok(segments)
    } else {
        Err(format!("{{{{ {path} }}}} is not a path (keys and indexes joined by dots, or \".\")"))
    }
}

fn path_name(path: &[String]) -> String {
    if path.is_empty() { ".".to_owned() } else { path.join(".") }
}

fn lookup<'a>(body: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(body, |value, segment| match value {
        Value::Object(map) => map.get(segment),
        Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fields_are_filled_in() {
        let template =
            Template::parse("PR #{{ number }} by {{sender.login}}: {{ commits.1.id }} {{ draft }}").expect("t");
        let body =
            json!({"number": 7, "sender": {"login": "ana"}, "commits": [{"id": "a"}, {"id": "b"}], "draft": false});
        assert_eq!(template.render(&body).expect("render"), "PR #7 by ana: b false");
        let whole = Template::parse("got {{ . }}").expect("t");
        assert_eq!(whole.render(&json!({"a": [1]})).expect("render"), "got {\"a\":[1]}");
    }

    #[test]
    fn a_missing_field_is_named() {
        let template = Template::parse("{{ pull_request.title }}").expect("t");
        let error = template.render(&json!({"pull_request": {}})).expect_err("missing");
        assert_eq!(error, RenderError::Missing("pull_request.title".to_owned()));
        assert!(error.to_string().contains("pull_request.title"));
        assert!(Template::parse("{{ a.0 }}").expect("t").render(&json!({"a": []})).is_err());
        assert!(Template::parse("{{ a.b }}").expect("t").render(&json!({"a": "text"})).is_err());
    }

    #[test]
    fn bad_templates_are_refused() {
        assert!(Template::parse("{{ open").is_err());
        assert!(Template::parse("{{ a..b }}").is_err());
        assert!(Template::parse("{{ }}").is_err());
        assert!(Template::parse("").is_err());
        assert!(Template::parse(&"x".repeat(MAX_TEMPLATE_BYTES + 1)).is_err());
        assert!(Template::parse("plain text, no fields").is_ok());
    }

    #[test]
    fn the_prompt_is_bounded() {
        let template = Template::parse("{{ a }}{{ a }}").expect("t");
        let big = "x".repeat(MAX_RENDERED_BYTES / 2 + 1);
        assert_eq!(template.render(&json!({"a": big})), Err(RenderError::TooLong));
    }
}
