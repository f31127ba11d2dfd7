//! A workspace's members list (`GET /api/v1/workspaces/{id}/members`): its members see who else
//! belongs and in which role since when; outsiders get 404, no credentials 401, a malformed or
//! unknown id 404; role changes keep the joined time and removals take the member off the list
//! (and their access with it). Nothing but id, name, role and time is shown.

use serde_json::{Value, json};

use crate::people::make_user;
use crate::support::TestServer;

/// The list's `(username, role)` pairs.
fn roles(body: &Value) -> Vec<(String, String)> {
    body["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| (m["username"].as_str().expect("name").to_owned(), m["role"].as_str().expect("role").to_owned()))
        .collect()
}

#[tokio::test]
async fn members_see_the_list_and_outsiders_do_not() {
    let server = TestServer::start().await;
    let ivy = make_user(&server, "ivy").await;
    let otto = make_user(&server, "otto").await;
    let (status, workspace) = server.post("/api/v1/workspaces", json!({"name": "team"})).await;
    assert_eq!(status, 201, "{workspace}");
    let ws = workspace["id"].as_str().expect("id").to_owned();
    let list = format!("/api/v1/workspaces/{ws}/members");

    // Only its creator, at first: the admin.
    let (status, body) = server.get(&list).await;
    assert_eq!(status, 200, "{body}");
    let (_, me) = server.get("/api/v1/me").await;
    let creator = me["username"].as_str().expect("username").to_owned();
    assert_eq!(roles(&body), [(creator.clone(), "admin".to_owned())]);
    let first = &body["members"][0];
    assert_eq!(first["user_id"], me["id"]);
    let mut keys: Vec<&str> = first.as_object().expect("member").keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["joined_at", "role", "user_id", "username"], "nothing else about a user is shown");

    // Ivy joins as a viewer: she sees the list too; Otto (no member) does not, nor does anyone
    // without credentials.
    let member = format!("/api/v1/workspaces/{ws}/members/{}", ivy.id);
    assert_eq!(server.put(&member, json!({"role": "viewer"})).await.0, 204);
    let (status, seen) = server.as_user("GET", &list, &ivy.token, json!({})).await;
    assert_eq!(status, 200, "{seen}");
    assert_eq!(roles(&seen), [(creator.clone(), "admin".to_owned()), ("ivy".to_owned(), "viewer".to_owned())]);
    assert_eq!(seen["members"][1]["user_id"].as_str(), Some(ivy.id.as_str()));
    let joined = seen["members"][1]["joined_at"].clone();
    assert!(joined.as_str().is_some_and(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok()), "{joined}");
    let (status, body) = server.as_user("GET", &list, &otto.token, json!({})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("NOT_FOUND")), "{body}");
    assert_eq!(server.anonymous("GET", &list).await, 401);

    // Bad ids: malformed, unknown, and another user's personal workspace.
    assert_eq!(server.get("/api/v1/workspaces/not-a-uuid/members").await.0, 404);
    assert_eq!(server.get(&format!("/api/v1/workspaces/{}/members", uuid::Uuid::new_v4())).await.0, 404);
    let (_, otto_spaces) = server.as_user("GET", "/api/v1/workspaces", &otto.token, json!({})).await;
    let otto_personal = otto_spaces["workspaces"][0]["workspace_id"].as_str().expect("personal").to_owned();
    assert_eq!(server.get(&format!("/api/v1/workspaces/{otto_personal}/members")).await.0, 404);
    let (status, body) =
        server.as_user("GET", &format!("/api/v1/workspaces/{otto_personal}/members"), &otto.token, json!({})).await;
    assert_eq!((status, roles(&body)), (200, vec![("otto".to_owned(), "admin".to_owned())]));

    // A role change keeps the joined time; a removal takes her off the list and out.
    assert_eq!(server.put(&member, json!({"role": "operator"})).await.0, 204);
    let (_, body) = server.get(&list).await;
    assert_eq!(roles(&body)[1], ("ivy".to_owned(), "operator".to_owned()));
    assert_eq!(body["members"][1]["joined_at"], joined, "a role change is not a new membership");
    assert_eq!(server.delete(&member).await.0, 204);
    let (_, body) = server.get(&list).await;
    assert_eq!(roles(&body), [(creator, "admin".to_owned())]);
    assert_eq!(server.as_user("GET", &list, &ivy.token, json!({})).await.0, 404);
}
