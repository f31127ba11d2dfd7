//! `agenthold-proxy`: the sandboxes' egress proxy.
//!
//! Not built yet: the egress proxy (placeholder swapping, per-sandbox credentials, its own CA)
//! is its own issue. Until then this binary only says so, so that nobody mistakes it for a
//! working boundary.

fn main() {
    eprintln!("agenthold-proxy: not implemented yet; sandboxes have no egress proxy in this build");
    std::process::exit(2);
}
