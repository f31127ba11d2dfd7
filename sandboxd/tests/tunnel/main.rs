//! Integration tests of sandboxd: the real binary against a real WebSocket server in the test.
//! Processes are real; tests run with `user: None` (they never create users on the host).

mod garbage;
mod harness;
mod liveness;
mod memory;
mod processes;
mod reaper;
mod reconnect;
mod stdin;
mod terminal;
mod tls;
mod users;
