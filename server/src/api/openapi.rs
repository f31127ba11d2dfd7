//! `GET /api/v1/openapi.json`: the API's OpenAPI 3.1 document, generated with `utoipa` from the
//! route table's handlers' own annotations (`#[utoipa::path]`) and their request and response types
//! (`ToSchema`). Each operation declares the access it needs as `x-agenthold-access`; from that
//! one declaration this module derives its security requirements (a bearer token, or the session
//! cookie — with `X-CSRF-Token` when it changes something) and the error answers every operation
//! of that access shares (401, 403, 404; with the request limits of `api::limits`, 413 and 503;
//! 500). The path parameters of each template are filled in here too. The authorization tests read their expectations from the document (which lists
//! exactly the router's routes: both come from `api::operations`).

use serde::Serialize;
use utoipa::openapi::path::{Operation, Parameter, ParameterBuilder, ParameterIn, PathItem};
use utoipa::openapi::schema::OneOfBuilder;
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{
    ContentBuilder, KnownFormat, ObjectBuilder, Ref, RefOr, Required, ResponseBuilder, SchemaFormat, Type,
};
use utoipa::{Modify, OpenApi};

/// What an operation needs, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Nothing.
    Public,
    /// A signed-in user (acting on its own things).
    SignedIn,
    /// The viewer role in the resource's workspace.
    Viewer,
    /// The operator role.
    Operator,
    /// The admin role.
    Admin,
    /// The server admin.
    ServerAdmin,
}

impl Access {
    /// Every access, weakest first.
    const ALL: [Self; 6] = [Self::Public, Self::SignedIn, Self::Viewer, Self::Operator, Self::Admin, Self::ServerAdmin];

    /// Parses the document's `x-agenthold-access`.
    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|access| access.as_str() == raw)
    }

    /// The document's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::SignedIn => "signed-in",
            Self::Viewer => "viewer",
            Self::Operator => "operator",
            Self::Admin => "admin",
            Self::ServerAdmin => "server-admin",
        }
    }
}

/// The name of the extension that holds an operation's [`Access`].
pub const ACCESS_EXTENSION: &str = "x-agenthold-access";

/// The document's skeleton (its info, shared schemas and tags): `api::operations` adds every
/// operation, [`Derived`] the rest.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "agenthold",
        description = "Roles are per workspace: viewer < operator < admin. A resource in a workspace the caller \
            does not belong to answers 404; one it can see but not act on answers 403. Every error answer is \
            `{\"error\": {\"code\", \"message\"}}`. Generated from the server's handlers; see docs/api.md.",
    ),
    components(schemas(super::error::ErrorBody, crate::events::NoticeCode)),
    tags(
        (name = "meta", description = "The web page, health, this document"),
        (name = "auth", description = "Browser sessions"),
        (name = "me", description = "The caller: its workspaces, API tokens and provider logins"),
        (name = "users", description = "Users (the server admin)"),
        (name = "workspaces", description = "Workspaces, members and roles, the audit log"),
        (name = "secrets", description = "Secrets (values write-only) and their attachment to agents"),
        (name = "agents", description = "Agents, their sandboxes, terminals and logins"),
        (name = "sessions", description = "Sessions, prompts and turns, the event log and its stream"),
        (name = "permissions", description = "Questions waiting for a person (the approvals inbox)"),
        (name = "triggers", description = "Prompts nobody types: schedules, webhooks and agents prompting agents (docs/triggers.md)"),
    ),

)]
pub(crate) struct ApiDoc;

/// Fills in what follows from each operation's access and path: security requirements, the
/// shared error answers, path parameters.
struct Derived;

/// The error answers operations share, by status: (status, component name, description).
const SHARED_ERRORS: [(&str, &str, &str); 7] = [
    ("401", "Unauthorized", "`UNAUTHORIZED`: missing or invalid credentials."),
    (
        "403",
        "Forbidden",
        "`FORBIDDEN`: the caller can see the resource but its role does not allow this; `CSRF_REJECTED`: a \
         session cookie without its `X-CSRF-Token` on a request that changes something; `ORIGIN_REJECTED`: a \
         cookie-authenticated WebSocket from another origin.",
    ),
    ("404", "NotFound", "`NOT_FOUND`: no such resource, or one in a workspace the caller does not belong to."),
    ("413", "PayloadTooLarge", "`PAYLOAD_TOO_LARGE`: the body is over `AGENTHOLD_MAX_BODY_BYTES`."),
    ("500", "Internal", "`INTERNAL`: anything else (logged by the server; the message is generic)."),
    (
        "503",
        "Unavailable",
        "`DATABASE_UNAVAILABLE`: Postgres does not answer (with `Retry-After`); `SERVER_BUSY`: every request \
         slot is taken (with `Retry-After`); `REQUEST_TIMEOUT`: the request took longer than \
         `AGENTHOLD_REQUEST_TIMEOUT_SECS`.",
    ),
    (
        "503",
        "Busy",
        "`SERVER_BUSY`: every request slot is taken (with `Retry-After`); `REQUEST_TIMEOUT`: the request took \
         longer than `AGENTHOLD_REQUEST_TIMEOUT_SECS`.",
    ),
];

impl Modify for Derived {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("An API token (`POST /api/v1/tokens`)"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "session",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                crate::auth::SESSION_COOKIE,
                "A browser session (`POST /api/v1/auth/login`)",
            ))),
        );
        components.add_security_scheme(
            "csrf",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-CSRF-Token",
                "The `csrf_token` of the browser session's login answer; with the session cookie, every request \
                 that changes something sends it",
            ))),
        );
        for (_, name, description) in SHARED_ERRORS {
            let content = ContentBuilder::new().schema(Some(Ref::from_schema_name("Error"))).build();
            let response = ResponseBuilder::new().description(description).content("application/json", content);
            components.responses.insert(name.to_owned(), RefOr::T(response.build()));
        }
        for (template, item) in openapi.paths.paths.iter_mut() {
            for (method, operation) in operations(item) {
                let access = operation
                    .extensions
                    .as_ref()
                    .and_then(|extensions| extensions.get(ACCESS_EXTENSION))
                    .and_then(|value| value.as_str())
                    .and_then(Access::parse)
                    // A handler without it is a mistake the tests build the document to catch.
                    .unwrap_or_else(|| panic!("{method} {template} declares no {ACCESS_EXTENSION}"));
                shorten_summary(operation);
                derive_security(operation, access, method);
                derive_errors(operation, access, method, template);
                add_path_parameters(operation, template);
            }
        }
    }
}

/// The item's operations with their methods.
fn operations(item: &mut PathItem) -> impl Iterator<Item = (&'static str, &mut Operation)> {
    [
        ("get", item.get.as_mut()),
        ("put", item.put.as_mut()),
        ("post", item.post.as_mut()),
        ("delete", item.delete.as_mut()),
        ("patch", item.patch.as_mut()),
    ]
    .into_iter()
    .filter_map(|(method, operation)| operation.map(|operation| (method, operation)))
}

/// The summary is the handler's doc comment: its first sentence stays the summary, and the
/// whole of it (lines joined) becomes the description.
fn shorten_summary(operation: &mut Operation) {
    let Some(text) = operation.summary.take() else { return };
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let first = first_sentence(&text);
    // More than the one sentence (and its full stop): the whole text is the description.
    if text.len() > first.len() + 1 {
        operation.description = Some(match operation.description.take() {
            Some(more) => format!("{text}\n\n{more}"),
            None => text.clone(),
        });
    }
    operation.summary = Some(first);
}

/// Up to the first `.`, `:` or `;` outside parentheses that ends a sentence.
fn first_sentence(text: &str) -> String {
    let mut depth = 0usize;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '.' | ':' | ';' if depth == 0 && chars.peek().is_none_or(|(_, next)| *next == ' ') => {
                return text[..i].to_owned();
            }
            _ => {}
        }
    }
    text.trim_end_matches('.').to_owned()
}

/// Public operations need nothing; the others a bearer token, or the session cookie (and, when
/// they change something, its CSRF token).
fn derive_security(operation: &mut Operation, access: Access, method: &str) {
    if access == Access::Public {
        operation.security = Some(Vec::new());
        return;
    }
    let none = Vec::<String>::new;
    let session = SecurityRequirement::new("session", none());
    let session = if method == "get" { session } else { session.add("csrf", none()) };
    operation.security = Some(vec![SecurityRequirement::new("bearer", none()), session]);
}

/// The error answers that follow from the access, the method and the route: 401 for all but
/// public operations; 403 where a role is checked, where a session cookie needs its CSRF token (a
/// change) and where a WebSocket checks the page's origin; 404 where the resource's workspace
/// must be the caller's; 413 where there is a body; 500 everywhere; 503 everywhere (the request
/// limits), with `DATABASE_UNAVAILABLE` where the route needs Postgres (`api::limits`). Where an
/// operation answers a status of its own too, the two are merged.
fn derive_errors(operation: &mut Operation, access: Access, method: &str, template: &str) {
    let websocket = operation.responses.responses.contains_key("101");
    let role_checked = matches!(access, Access::Operator | Access::Admin | Access::ServerAdmin);
    let signed_in = access != Access::Public;
    let needs_database = super::limits::needs_database(template);
    let applies = |name: &str| match name {
        "Unauthorized" => signed_in,
        "Forbidden" => signed_in && (role_checked || method != "get" || websocket),
        "NotFound" => matches!(access, Access::Viewer | Access::Operator | Access::Admin),
        "PayloadTooLarge" => operation.request_body.is_some(),
        "Unavailable" => needs_database,
        "Busy" => !needs_database,
        _ => true,
    };
    let shared: Vec<_> = SHARED_ERRORS.into_iter().filter(|(_, name, _)| applies(name)).collect();
    for (status, name, description) in shared {
        match operation.responses.responses.get_mut(status) {
            None => {
                operation.responses.responses.insert(status.to_owned(), RefOr::Ref(Ref::from_response_name(name)));
            }
            Some(RefOr::T(own)) => merge(own, description),
            Some(RefOr::Ref(_)) => {}
        }
    }
}

/// An operation's own answer for a status also stands for a shared one: the descriptions joined,
/// and a body that is not the error body may be one.
fn merge(own: &mut utoipa::openapi::Response, shared: &str) {
    own.description = format!("{}; {shared}", own.description.trim_end_matches('.'));
    let error = RefOr::Ref(Ref::from_schema_name("Error"));
    match own.content.get_mut("application/json") {
        None => {
            own.content.insert("application/json".to_owned(), ContentBuilder::new().schema(Some(error)).build());
        }
        Some(content) => {
            let is_error = matches!(&content.schema, Some(RefOr::Ref(r)) if r.ref_location.ends_with("/Error"));
            if let Some(schema) = content.schema.take().filter(|_| !is_error) {
                content.schema = Some(OneOfBuilder::new().item(schema).item(error).into());
            } else {
                content.schema = Some(error);
            }
        }
    }
}

/// Declares every `{name}` of the template the operation does not declare itself: ids are
/// UUIDs, `seq` an integer, anything else a string.
fn add_path_parameters(operation: &mut Operation, template: &str) {
    let parameters = operation.parameters.get_or_insert_with(Vec::new);
    for name in template.split('{').skip(1).filter_map(|rest| rest.split_once('}')).map(|(name, _)| name) {
        if parameters.iter().any(|p| p.name == name && p.parameter_in == ParameterIn::Path) {
            continue;
        }
        parameters.push(path_parameter(name));
    }
    if parameters.is_empty() {
        operation.parameters = None;
    }
}

fn path_parameter(name: &str) -> Parameter {
    let schema = match name {
        "seq" => {
            ObjectBuilder::new().schema_type(Type::Integer).format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        }
        "env_name" => ObjectBuilder::new().schema_type(Type::String),
        _ => ObjectBuilder::new().schema_type(Type::String).format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid))),
    };
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .schema(Some(schema))
        .build()
}

/// The document.
pub fn document() -> serde_json::Value {
    let (_, mut document) = super::operations().split_for_parts();
    Derived.modify(&mut document);
    serde_json::to_value(document).unwrap_or_default()
}

/// The document as served: made once.
static SERVED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| document().to_string());

/// This document (generated from the server's handlers and types).
#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    operation_id = "openapi",
    tag = "meta",
    responses((status = 200, description = "The OpenAPI 3.1 document", body = Object)),
    extensions(("x-agenthold-access" = json!(Access::Public))),
)]
pub async fn serve() -> impl axum::response::IntoResponse {
    ([(axum::http::header::CONTENT_TYPE, "application/json")], SERVED.as_str())
}

#[cfg(test)]
mod tests {
    use super::first_sentence;

    #[test]
    fn a_summary_is_the_first_sentence_outside_parentheses() {
        assert_eq!(first_sentence("Shows an agent."), "Shows an agent");
        assert_eq!(first_sentence("Deletes an agent: its sandbox. More."), "Deletes an agent");
        assert_eq!(first_sentence("Changes it (admins; role first): rest"), "Changes it (admins; role first)");
        assert_eq!(first_sentence("Uses `a.b` here. Then"), "Uses `a.b` here");
    }
}
