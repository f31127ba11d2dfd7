//! Who is calling, and what they may do. A caller is a user, identified by an API token
//! (`Authorization: Bearer`, stored hashed, revocable) or a browser session (an HttpOnly,
//! SameSite=Strict cookie; state-changing requests must echo its CSRF token in `X-CSRF-Token`). What a user may do to a resource depends
//! on their role in the resource's workspace: `viewer` reads, `operator` also acts on sessions
//! and terminals, `admin` also administers agents and members. A resource in a workspace the
//! caller does not belong to answers 404, so ids cannot be probed; one the caller can see but
//! not act on answers 403. A cookie-authenticated WebSocket upgrade must come from the server's
//! own origin ([`origin`]). How a request's caller is found (the extractor) and checked against a
//! workspace is the API's (`crate::api::principal`).

pub mod bootstrap;
pub mod client_address;
pub mod origin;
pub mod passwords;
pub mod recheck;

/// The failed-login throttle's decision (the store applies it where it counts the failures).
pub use crate::store::login_throttle as throttle;

use uuid::Uuid;

use crate::store;
use crate::store::users::Role;

/// Name of the browser session cookie (on a plain-HTTP server).
pub const SESSION_COOKIE: &str = "agenthold_session";
/// Its name when the public URL is `https://`: the `__Host-` prefix makes browsers accept it
/// only with `Secure`, `Path=/` and no `Domain`, so neither a plain-HTTP page nor a sibling
/// subdomain can set or overwrite it.
pub const SECURE_SESSION_COOKIE: &str = "__Host-agenthold_session";

/// The session cookie's name and attributes for a server whose public URL is `public_url`.
pub fn session_cookie(public_url: Option<&str>) -> (&'static str, &'static str) {
    if public_url.is_some_and(|url| url.starts_with("https://")) {
        (SECURE_SESSION_COOKIE, "HttpOnly; Secure; SameSite=Strict; Path=/")
    } else {
        (SESSION_COOKIE, "HttpOnly; SameSite=Strict; Path=/")
    }
}
/// Header a cookie-authenticated state-changing request must carry (the session's CSRF token).
pub const CSRF_HEADER: &str = "x-csrf-token";

/// How a caller proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Credential {
    /// An API token (`Authorization: Bearer`).
    Token(Uuid),
    /// A browser session cookie.
    Session(Uuid),
}

/// What the re-check of an open socket found ([`Principal::still_holds`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// It may go on.
    Holds,
    /// The token or session was revoked or expired.
    Revoked,
    /// The user left the workspace or no longer has the role the socket needs.
    AccessEnded,
}

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The user.
    pub user_id: Uuid,
    /// The token or session used.
    pub credential: Credential,
    /// A browser session's CSRF token (`None` for API tokens): `GET /api/v1/me` tells the page,
    /// which keeps it in memory only, so a reload does not need a new sign-in.
    pub csrf_token: Option<String>,
}

impl Principal {
    /// Whether the token or session is still valid (open WebSockets check this and close once
    /// it is revoked or expired). Sockets of one credential share an answer ([`recheck`]).
    pub async fn still_valid(&self, pool: &sqlx::PgPool) -> bool {
        if let Some(valid) = recheck::recent(self.credential, std::time::Instant::now()) {
            return valid;
        }
        let check = async {
            match self.credential {
                Credential::Token(id) => store::tokens::is_valid(pool, id).await,
                Credential::Session(id) => store::browser_sessions::is_valid(pool, id).await,
            }
        };
        // A database hiccup (an error, or no answer within half a second) does not close a
        // stream, nor hold it up.
        match tokio::time::timeout(std::time::Duration::from_millis(500), check).await {
            Ok(Ok(valid)) => {
                recheck::record(self.credential, valid, std::time::Instant::now());
                valid
            }
            Ok(Err(_)) | Err(_) => true,
        }
    }

    /// Whether an open socket may go on: its credential still valid, and its user still holding
    /// at least `needed` in `workspace_id` (re-checked at each use, not only when it opened: a
    /// member removed or demoted a second ago loses the socket). A database hiccup keeps it open.
    pub async fn still_holds(&self, pool: &sqlx::PgPool, workspace_id: Uuid, needed: Role) -> Standing {
        if !self.still_valid(pool).await {
            return Standing::Revoked;
        }
        let now = std::time::Instant::now();
        let role = match recheck::recent_role(self.user_id, workspace_id, now) {
            Some(role) => role,
            None => {
                let read = store::users::role_in(pool, self.user_id, workspace_id);
                match tokio::time::timeout(std::time::Duration::from_millis(500), read).await {
                    Ok(Ok(role)) => {
                        recheck::record_role(self.user_id, workspace_id, role, now);
                        role
                    }
                    Ok(Err(_)) | Err(_) => return Standing::Holds,
                }
            }
        };
        match role {
            Some(role) if role >= needed => Standing::Holds,
            _ => Standing::AccessEnded,
        }
    }
}
