//! The injection decision for one request on an intercepted host, and the scrubbing of its
//! response headers. Pure functions over header maps: the placeholder is replaced only in the
//! one header of a matching rule, only when that header occurs once with exactly the expected
//! value; any other credential header, a second copy, or a value that is not this sandbox's
//! placeholder refuses the whole request.

use hyper::HeaderMap;
use hyper::header::{HeaderName, HeaderValue};

use crate::policy::{CREDENTIAL_HEADERS, Rule};

/// Why a request on an intercepted host was refused (the text goes into the 403 body; it names
/// headers, never values).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum InjectRefusal {
    /// A credential header no rule for this path puts a value into.
    #[error("the {0} header is not allowed on this host and path (the proxy supplies credentials here)")]
    Unexpected(HeaderName),
    /// The rule's header appears more than once.
    #[error("the {0} header appears more than once")]
    Duplicate(HeaderName),
    /// The rule's header does not hold exactly this sandbox's placeholder.
    #[error("the {0} header does not hold this sandbox's placeholder")]
    NotPlaceholder(HeaderName),
}

/// Applies the rules for this host (`rules`) to a request for `path`: returns the indices (into
/// `rules`) of the rules whose value was put in.
pub fn apply(headers: &mut HeaderMap, rules: &[&Rule], path: &str) -> Result<Vec<usize>, InjectRefusal> {
    // Per header, the matching rule with the longest prefix.
    let mut chosen: Vec<(HeaderName, usize)> = Vec::new();
    for (index, rule) in rules.iter().enumerate() {
        if !path.starts_with(rule.path_prefix.as_str()) {
            continue;
        }
        match chosen.iter_mut().find(|(name, _)| name == rule.header) {
            Some(entry) if rules[entry.1].path_prefix.len() < rule.path_prefix.len() => entry.1 = index,
            Some(_) => {}
            None => chosen.push((rule.header.clone(), index)),
        }
    }
    let mut names: Vec<HeaderName> = CREDENTIAL_HEADERS.iter().map(|n| HeaderName::from_static(n)).collect();
    for rule in rules {
        if !names.contains(&rule.header) {
            names.push(rule.header.clone());
        }
    }
    let mut plan = Vec::new();
    for name in &names {
        let count = headers.get_all(name).iter().count();
        if count == 0 {
            continue;
        }
        let Some((_, index)) = chosen.iter().find(|(n, _)| n == name) else {
            return Err(InjectRefusal::Unexpected(name.clone()));
        };
        if count > 1 {
            return Err(InjectRefusal::Duplicate(name.clone()));
        }
        let rule = rules[*index];
        let sent = headers.get(name).map(HeaderValue::as_bytes).unwrap_or_default();
        if !crate::secret::constant_time_eq(sent, rule.expected.as_bytes()) {
            return Err(InjectRefusal::NotPlaceholder(name.clone()));
        }
        plan.push(*index);
    }
    for index in &plan {
        let rule = rules[*index];
        headers.insert(rule.header.clone(), rule.replacement.clone());
    }
    Ok(plan)
}

/// Replaces every occurrence of any of `rules`' real values in response headers by the
/// placeholder. Returns how many header values were changed.
pub fn scrub(headers: &mut HeaderMap, rules: &[&Rule]) -> usize {
    let mut changed = 0;
    for value in headers.values_mut() {
        let mut bytes = value.as_bytes().to_vec();
        let mut hit = false;
        for rule in rules {
            let secret = rule.value.expose().as_bytes();
            if !secret.is_empty() && contains(&bytes, secret) {
                bytes = replace_all(&bytes, secret, rule.placeholder.as_bytes());
                hit = true;
            }
        }
        if hit {
            changed += 1;
            *value = HeaderValue::from_bytes(&bytes).unwrap_or_else(|_| HeaderValue::from_static("[scrubbed]"));
        }
    }
    changed
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn replace_all(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;

    fn rule(header: &'static str, prefix: &str, bearer: bool, placeholder: &str, value: &str) -> Rule {
        let (expected, replacement) = if bearer {
            (format!("Bearer {placeholder}"), format!("Bearer {value}"))
        } else {
            (placeholder.to_owned(), value.to_owned())
        };
        Rule {
            host: "api.anthropic.com".into(),
            port: 443,
            path_prefix: prefix.into(),
            header: HeaderName::from_static(header),
            placeholder: placeholder.into(),
            expected: HeaderValue::from_str(&expected).expect("value"),
            replacement: {
                let mut v = HeaderValue::from_str(&replacement).expect("value");
                v.set_sensitive(true);
                v
            },
            value: Secret::new(value),
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).expect("value"));
        }
        map
    }

    #[test]
    fn the_placeholder_is_replaced_in_its_header_only() {
        let r = rule("x-api-key", "/v1/", false, "ph-aaaaaaaa", "sk-real");
        let mut h = headers(&[("x-api-key", "ph-aaaaaaaa"), ("x-other", "ph-aaaaaaaa")]);
        assert_eq!(apply(&mut h, &[&r], "/v1/messages"), Ok(vec![0]));
        assert_eq!(h["x-api-key"], "sk-real");
        assert!(h["x-api-key"].is_sensitive());
        assert_eq!(h["x-other"], "ph-aaaaaaaa");
    }

    #[test]
    fn bearer_format() {
        let r = rule("authorization", "/", true, "ph-bbbbbbbb", "sk-real");
        let mut h = headers(&[("authorization", "Bearer ph-bbbbbbbb")]);
        assert_eq!(apply(&mut h, &[&r], "/v1/responses"), Ok(vec![0]));
        assert_eq!(h["authorization"], "Bearer sk-real");
        let mut raw = headers(&[("authorization", "ph-bbbbbbbb")]);
        assert!(matches!(apply(&mut raw, &[&r], "/v1"), Err(InjectRefusal::NotPlaceholder(_))));
    }

    #[test]
    fn refusals() {
        let r = rule("x-api-key", "/v1/", false, "ph-aaaaaaaa", "sk-real");
        let cases: Vec<(HeaderMap, &str)> = vec![
            (headers(&[("x-api-key", "ph-aaaaaaaa"), ("x-api-key", "ph-aaaaaaaa")]), "/v1/messages"),
            (headers(&[("x-api-key", "sk-attacker")]), "/v1/messages"),
            (headers(&[("x-api-key", "ph-aaaaaaaa"), ("authorization", "Bearer sk-attacker")]), "/v1/messages"),
            (headers(&[("authorization", "Bearer ph-aaaaaaaa")]), "/v1/messages"),
            (headers(&[("x-api-key", "ph-aaaaaaaa")]), "/v2/other"),
            (headers(&[("cookie", "session=1")]), "/v1/messages"),
            (headers(&[("x-api-key", "ph-aaaaaaaa ")]), "/v1/messages"),
        ];
        for (mut h, path) in cases {
            let before = h.clone();
            assert!(apply(&mut h, &[&r], path).is_err(), "{before:?} {path}");
            assert_eq!(h, before, "a refused request is not modified");
        }
        let mut none = headers(&[("anthropic-version", "2023-06-01")]);
        assert_eq!(apply(&mut none, &[&r], "/v1/messages"), Ok(vec![]));
    }

    #[test]
    fn response_headers_are_scrubbed() {
        let r = rule("x-api-key", "/", false, "ph-aaaaaaaa", "sk-real");
        let mut h = headers(&[("x-echo", "key=sk-real;again=sk-real"), ("x-fine", "ok")]);
        assert_eq!(scrub(&mut h, &[&r]), 1);
        assert_eq!(h["x-echo"], "key=ph-aaaaaaaa;again=ph-aaaaaaaa");
        assert_eq!(h["x-fine"], "ok");
    }
}
