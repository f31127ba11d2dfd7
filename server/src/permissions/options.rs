//! Choosing the harness's permission option for a verdict by the option's `kind`, never by its
//! id (ids differ between harnesses and versions; ACP.md §1.6).

use agent_client_protocol::v1::schema::{PermissionOption, PermissionOptionKind};

use super::policy::Answer;

/// How many offered kinds an error lists.
const MAX_KINDS_LISTED: usize = 8;

/// A settled answer to send to the harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Let the call run.
    Allow,
    /// Refuse it.
    Deny,
}

impl Answer {
    /// The verdict to send for this answer; `None` for `ask` (a person decides first).
    pub fn verdict(self) -> Option<Verdict> {
        match self {
            Self::Allow => Some(Verdict::Allow),
            Self::Deny => Some(Verdict::Deny),
            Self::Ask => None,
        }
    }
}

/// The harness offered no option of a fitting kind; the caller answers `cancelled`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the harness offered no {wanted} option (kinds offered: {offered})")]
pub struct NoFittingOption {
    /// `allow` or `reject`.
    pub wanted: &'static str,
    /// The kinds the harness offered, comma-separated (`none` if none).
    pub offered: String,
}

impl NoFittingOption {
    /// The stable machine-readable code.
    pub fn code(&self) -> &'static str {
        "NO_FITTING_OPTION"
    }
}

/// The option to select for `verdict`: `allow_once`, else `allow_always`, for Allow;
/// `reject_once`, else `reject_always`, for Deny. The first offered option of a kind wins.
pub fn choose_option(verdict: Verdict, options: &[PermissionOption]) -> Result<&PermissionOption, NoFittingOption> {
    let (preferred, fallback, wanted) = match verdict {
        Verdict::Allow => (PermissionOptionKind::AllowOnce, PermissionOptionKind::AllowAlways, "allow"),
        Verdict::Deny => (PermissionOptionKind::RejectOnce, PermissionOptionKind::RejectAlways, "reject"),
    };
    let of_kind = |kind: PermissionOptionKind| options.iter().find(|option| option.kind == kind);
    of_kind(preferred).or_else(|| of_kind(fallback)).ok_or_else(|| NoFittingOption { wanted, offered: kinds(options) })
}

fn kinds(options: &[PermissionOption]) -> String {
    if options.is_empty() {
        return "none".to_owned();
    }
    let names: Vec<String> = options
        .iter()
        .take(MAX_KINDS_LISTED)
        .map(|option| match serde_json::to_value(option.kind) {
            Ok(serde_json::Value::String(name)) => name,
            _ => "unknown".to_owned(),
        })
        .collect();
    let mut listed = names.join(", ");
    if options.len() > MAX_KINDS_LISTED {
        listed.push_str(", …");
    }
    listed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn options(value: serde_json::Value) -> Vec<PermissionOption> {
        serde_json::from_value(value).expect("options parse")
    }

    fn chosen(verdict: Verdict, offered: &[PermissionOption]) -> String {
        choose_option(verdict, offered).expect("fits").option_id.to_string()
    }

    #[test]
    fn ids_that_lie_are_ignored() {
        let lying = options(json!([
            {"optionId": "allow", "name": "Allow", "kind": "reject_once"},
            {"optionId": "reject", "name": "Reject", "kind": "allow_once"},
        ]));
        assert_eq!(chosen(Verdict::Allow, &lying), "reject");
        assert_eq!(chosen(Verdict::Deny, &lying), "allow");
    }

    #[test]
    fn once_is_preferred_then_always() {
        let claude = options(json!([
            {"optionId": "allow-with-updates", "name": "Always", "kind": "allow_always"},
            {"optionId": "allow-once", "name": "Once", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ]));
        assert_eq!(chosen(Verdict::Allow, &claude), "allow-once");
        assert_eq!(chosen(Verdict::Deny, &claude), "reject");
        let always_only = options(json!([
            {"optionId": "a", "name": "Always", "kind": "allow_always"},
            {"optionId": "r", "name": "Never", "kind": "reject_always"},
        ]));
        assert_eq!(chosen(Verdict::Allow, &always_only), "a");
        assert_eq!(chosen(Verdict::Deny, &always_only), "r");
    }

    #[test]
    fn codex_offers_two_reject_once_options_and_the_first_wins() {
        let codex = options(json!([
            {"optionId": "allow_once", "name": "Yes", "kind": "allow_once"},
            {"optionId": "allow_for_session", "name": "Session", "kind": "allow_always"},
            {"optionId": "decline", "name": "No", "kind": "reject_once"},
            {"optionId": "cancel", "name": "Cancel", "kind": "reject_once"},
        ]));
        assert_eq!(chosen(Verdict::Deny, &codex), "decline");
    }

    #[test]
    fn nothing_fitting_is_a_clear_error() {
        let only_allow = options(json!([{"optionId": "once", "name": "Once", "kind": "allow_once"}]));
        let error = choose_option(Verdict::Deny, &only_allow).expect_err("no reject");
        assert_eq!(error.to_string(), "the harness offered no reject option (kinds offered: allow_once)");
        assert_eq!(error.code(), "NO_FITTING_OPTION");
        let error = choose_option(Verdict::Allow, &[]).expect_err("nothing");
        assert!(error.to_string().contains("kinds offered: none"));
    }

    #[test]
    fn answers_map_to_verdicts() {
        assert_eq!(Answer::Allow.verdict(), Some(Verdict::Allow));
        assert_eq!(Answer::Deny.verdict(), Some(Verdict::Deny));
        assert_eq!(Answer::Ask.verdict(), None);
    }
}
