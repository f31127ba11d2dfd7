//! A TCP gate between a test server and Postgres: open, it forwards every connection; shut, it
//! closes the connections it carries and refuses new ones (its port is closed) — a Postgres
//! outage exactly as the server sees one, without stopping the cluster other tests share.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The gate.
pub struct DbGate {
    port: u16,
    upstream: SocketAddr,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl DbGate {
    /// Opens a gate to the host and port of `database_url`.
    pub async fn start(database_url: &str) -> Self {
        let upstream = host_port(database_url).parse().expect("the database URL's host:port");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binding the gate");
        let port = listener.local_addr().expect("gate addr").port();
        let gate = Self { port, upstream, tasks: Arc::default() };
        gate.serve(listener);
        gate
    }

    /// `database_url` pointed at the gate.
    pub fn url(&self, database_url: &str) -> String {
        database_url.replacen(&host_port(database_url), &format!("127.0.0.1:{}", self.port), 1)
    }

    /// Shuts the gate: open connections are closed, new ones refused.
    pub fn shut(&self) {
        for task in self.tasks.lock().expect("gate").drain(..) {
            task.abort();
        }
    }

    /// Opens it again on the same port.
    pub async fn open(&self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port)).await.expect("rebinding the gate");
        self.serve(listener);
    }

    fn serve(&self, listener: TcpListener) {
        let (upstream, tasks) = (self.upstream, Arc::clone(&self.tasks));
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let pipe = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                let mut tasks = tasks.lock().expect("gate");
                tasks.retain(|task| !task.is_finished());
                tasks.push(pipe);
            }
        });
        self.tasks.lock().expect("gate").push(accept);
    }
}

impl Drop for DbGate {
    fn drop(&mut self) {
        self.shut();
    }
}

/// `host:port` of a `postgres://user@host:port/db` URL.
fn host_port(database_url: &str) -> String {
    let after_scheme = database_url.split_once("://").map_or(database_url, |(_, rest)| rest);
    let authority = after_scheme.split('/').next().unwrap_or(after_scheme);
    authority.rsplit_once('@').map_or(authority, |(_, host)| host).to_owned()
}
