//! Rebuilds the server when a migration is added or changed: `sqlx::migrate!` embeds the
//! `migrations/` directory at compile time, and cargo does not watch it otherwise (a new
//! migration left a dev build running the old schema).

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
