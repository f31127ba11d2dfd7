//! `login`: gets a token — the one given (`--token`, `AGENTHOLD_TOKEN`, stdin), or a new API token
//! made by signing in with a username and password — checks it with `GET /api/v1/me`, and stores
//! it with the server's URL (and CA file) in the login file ([`crate::credentials`]).
//!
//! Signing in goes the way a browser does: `POST /api/v1/auth/login` answers a session cookie and
//! a CSRF token, `POST /api/v1/tokens` with both makes the API token, and `POST
//! /api/v1/auth/logout` ends the browser session again. The password, the cookie and the CSRF
//! token are [`Secret`]s like the token.

use std::path::Path;

use anyhow::Context;
use serde_json::{Value, json};

use crate::api::Client;
use crate::cli::LoginArgs;
use crate::commands::{Target, read_stdin};
use crate::credentials::{self, Credentials};
use crate::error::Failure;
use crate::output::{self, Printer};
use crate::secret::{Secret, Token};

/// Runs `login` against `target` and writes `credentials_path`.
pub async fn login(
    target: Target,
    given: Option<Token>,
    args: LoginArgs,
    credentials_path: &Path,
    printer: Printer,
) -> Result<(), Failure> {
    let endpoint = target.endpoint.clone();
    let ca_file = match &target.options.ca_file {
        Some(path) => Some(std::path::absolute(path).with_context(|| format!("resolving {}", path.display()))?),
        None => None,
    };
    let token = match (&args.username, given) {
        (Some(username), _) => {
            let password = first_line_of_stdin("the password").await?;
            let anonymous = Client::new(target.endpoint.clone(), None, target.options.clone())?;
            make_token(&anonymous, username, &password, &args.token_name).await?
        }
        (None, Some(token)) => token,
        (None, None) => {
            let line = first_line_of_stdin("a token").await?;
            crate::secret::parse_token(line.expose())
                .map_err(|e| Failure::Usage(format!("login: the token on stdin: {e}")))?
        }
    };
    let client = Client::new(target.endpoint, Some(token.clone()), target.options)?;
    let me = client.call("GET", "/api/v1/me", None).await?.context("GET /api/v1/me: an empty answer")?;
    credentials::save(credentials_path, &Credentials { url: endpoint.to_string(), token, ca_file })?;
    let answer = json!({"url": endpoint.to_string(), "username": me["username"], "credentials": credentials_path});
    let text = |v: &Value| {
        format!(
            "logged in to {} as {}; credentials in {}",
            output::scalar(&v["url"]),
            output::scalar(&v["username"]),
            output::scalar(&v["credentials"])
        )
    };
    printer.print(Some(answer), text, "")
}

/// The first line of stdin without its line ending, as a secret; an empty one is bad usage.
async fn first_line_of_stdin(what: &str) -> Result<Secret, Failure> {
    let all = Secret::new(read_stdin().await?);
    let line = all.expose().lines().next().unwrap_or_default();
    if line.is_empty() {
        return Err(Failure::Usage(format!("login: expected {what} on the first line of stdin")));
    }
    Ok(Secret::new(line))
}

/// Signs in as `username`, makes an API token named `name`, and signs the browser session out.
async fn make_token(client: &Client, username: &str, password: &Secret, name: &str) -> Result<Token, Failure> {
    let body = json!({"username": username, "password": password.expose()});
    let reply = client.send("POST", "/api/v1/auth/login", Some(&body)).await?;
    if reply.status != 200 {
        return Err(Failure::from_response(reply.status, &reply.body));
    }
    let cookie = reply.cookie.clone().context("the sign-in answer set no session cookie")?;
    let answer = reply.json()?.unwrap_or_default();
    let csrf = answer["csrf_token"].as_str().context("the sign-in answer has no csrf_token")?;
    let csrf = Secret::new(csrf);
    let session = [("Cookie", &cookie), ("X-CSRF-Token", &csrf)];
    let made = client.send_with("POST", "/api/v1/tokens", Some(&json!({"name": name})), &session).await;
    // The browser session is not needed any more, whatever happened.
    let _ = client.send_with("POST", "/api/v1/auth/logout", None, &session).await;
    let made = made?;
    if made.status != 201 {
        return Err(Failure::from_response(made.status, &made.body));
    }
    let made = made.json()?.unwrap_or_default();
    let token = made["token"].as_str().context("the new token is missing from the answer")?;
    crate::secret::parse_token(token).map_err(|e| anyhow::anyhow!("the new token: {e}").into())
}
