//! Responses cut short. An intercepted response whose upstream body ends before its declared
//! length or its chunked end — the upstream closed the connection, sent a TLS alert, or closed
//! without `close_notify` — is logged (`decision=cut-short`, with the bytes the client got, the
//! declared length, which side ended it and why), counted (`GET /metrics`), and recorded per
//! sandbox in the report file beside the configuration file ([`REPORT_FILE`]), which agenthold's
//! server reads to name a turn's failure ("the provider's stream ended early"). A client that goes
//! away mid-response is logged and counted too (`ended_by=client`), not reported. The client of a
//! cut response sees its connection end without the response's end, as before. The same report
//! counts, per sandbox, the requests the proxy answered itself ([`Reports::answered`]): the server
//! refreshes a ChatGPT login when a sandbox asks to, at most once a minute. And, per client
//! address, the requests refused for want of known credentials or for a host not allowed
//! ([`Reports::refused`]): a harness the warm pool started reaches agenthold's MCP route only
//! until an agent claims it, and the server audits with the claim what it reached for before.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// The report's file name, beside the configuration file.
pub const REPORT_FILE: &str = "proxy-report.json";
/// At most this many sandboxes are in the report (the oldest cut goes first).
const MAX_SANDBOXES: usize = 4096;

/// Which side ended a response early.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndedBy {
    /// The provider (its connection closed, a TLS alert, a protocol error).
    Upstream,
    /// The sandbox's client went away.
    Client,
}

impl EndedBy {
    fn as_str(self) -> &'static str {
        match self {
            Self::Upstream => "upstream",
            Self::Client => "client",
        }
    }
}

/// One response cut short by its upstream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cut {
    /// When (milliseconds since the Unix epoch).
    pub at_ms: u64,
    /// The upstream host.
    pub host: String,
    /// The request's path (no query).
    pub path: String,
    /// The response's status.
    pub status: u16,
    /// Body bytes the client got.
    pub bytes_sent: u64,
    /// The declared length (`content-length`), if any.
    pub declared_bytes: Option<u64>,
    /// Which side ended it.
    pub ended_by: EndedBy,
    /// Why, in words (never a header value or a body).
    pub reason: String,
}

/// A sandbox's cuts: how many, and the last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxCuts {
    /// How many responses were cut short by their upstream since the proxy started.
    pub count: u64,
    /// The last one.
    pub last: Cut,
}

/// Requests of one sandbox the proxy answered itself (a ChatGPT login's refresh: agenthold's
/// server refreshes the real login when a sandbox asks, at most once a minute).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxAnswered {
    /// How many since the proxy started.
    pub count: u64,
    /// When the last was (milliseconds since the Unix epoch).
    pub last_at_ms: u64,
    /// Its host.
    pub host: String,
    /// Its path (no query).
    pub path: String,
}

/// Requests from one client address refused with `407` (no credentials, or credentials no
/// sandbox in force has) or with `403` for a host its sandbox may not reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    /// How many since the proxy started.
    pub count: u64,
    /// When the first was (milliseconds since the Unix epoch).
    pub first_at_ms: u64,
    /// When the last was.
    pub last_at_ms: u64,
}

/// The report file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Per sandbox id.
    pub cut_short: BTreeMap<String, SandboxCuts>,
    /// Per sandbox id: the requests the proxy answered itself.
    #[serde(default)]
    pub answered: BTreeMap<String, SandboxAnswered>,
    /// Per client address: requests refused for want of known credentials, or to a host not
    /// allowed.
    #[serde(default)]
    pub refused: BTreeMap<String, Refused>,
}

/// The largest report file a reader takes (the report holds at most [`MAX_SANDBOXES`] entries
/// per kind, far below it).
pub const MAX_REPORT_BYTES: u64 = 4 << 20;

impl Report {
    /// Reads a report file (`None`: absent, unreadable, over [`MAX_REPORT_BYTES`] or not a
    /// report).
    pub fn read(path: &Path) -> Option<Self> {
        if std::fs::metadata(path).ok()?.len() > MAX_REPORT_BYTES {
            tracing::warn!(path = %path.display(), "the proxy's report is too large to read");
            return None;
        }
        let bytes = std::fs::read(path).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// The counts and the report, shared by every connection.
#[derive(Debug)]
pub struct Reports {
    path: Option<PathBuf>,
    report: Mutex<Report>,
    /// Held while the file is written (the last writer writes the newest report).
    writing: Arc<Mutex<()>>,
    upstream: AtomicU64,
    client: AtomicU64,
}

impl Reports {
    /// Reports written to `path` (`None`: counted and logged only).
    pub fn new(path: Option<PathBuf>) -> Self {
        Self {
            path,
            report: Mutex::default(),
            writing: Arc::default(),
            upstream: AtomicU64::new(0),
            client: AtomicU64::new(0),
        }
    }

    /// The report beside `config`.
    pub fn beside(config: &Path) -> Self {
        Self::new(Some(config.with_file_name(REPORT_FILE)))
    }

    /// `GET /metrics`: the counts in Prometheus' text format.
    pub fn metrics(&self) -> String {
        format!(
            "# HELP agenthold_proxy_responses_cut_short_total Intercepted responses that ended before their end, by the side that ended them.\n\
             # TYPE agenthold_proxy_responses_cut_short_total counter\n\
             agenthold_proxy_responses_cut_short_total{{ended_by=\"upstream\"}} {}\n\
             agenthold_proxy_responses_cut_short_total{{ended_by=\"client\"}} {}\n",
            self.upstream.load(Ordering::Relaxed),
            self.client.load(Ordering::Relaxed)
        )
    }

    fn record(self: &Arc<Self>, sandbox: &str, cut: Cut) {
        tracing::info!(
            sandbox = %sandbox, host = %cut.host, path = %cut.path, status = cut.status,
            bytes_sent = cut.bytes_sent, declared_bytes = ?cut.declared_bytes, ended_by = cut.ended_by.as_str(),
            reason = %cut.reason, decision = "cut-short", "response cut short"
        );
        let counter = match cut.ended_by {
            EndedBy::Upstream => &self.upstream,
            EndedBy::Client => &self.client,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if cut.ended_by != EndedBy::Upstream {
            return;
        }
        {
            let mut report = self.report.lock();
            let cuts = &mut report.cut_short;
            if !cuts.contains_key(sandbox)
                && cuts.len() >= MAX_SANDBOXES
                && let Some(oldest) = cuts.iter().min_by_key(|(_, c)| c.last.at_ms).map(|(id, _)| id.clone())
            {
                cuts.remove(&oldest);
            }
            let entry = cuts.entry(sandbox.to_owned()).or_insert_with(|| SandboxCuts { count: 0, last: cut.clone() });
            entry.count += 1;
            entry.last = cut;
        }
        self.write();
    }

    /// A request of `sandbox`'s the proxy answered itself (reported; answers are rare).
    pub fn answered(self: &Arc<Self>, sandbox: &str, host: &str, path: &str) {
        let last_at_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        {
            let mut report = self.report.lock();
            let answered = &mut report.answered;
            if !answered.contains_key(sandbox)
                && answered.len() >= MAX_SANDBOXES
                && let Some(oldest) = answered.iter().min_by_key(|(_, a)| a.last_at_ms).map(|(id, _)| id.clone())
            {
                answered.remove(&oldest);
            }
            let entry = answered.entry(sandbox.to_owned()).or_insert_with(|| SandboxAnswered {
                count: 0,
                last_at_ms,
                host: host.to_owned(),
                path: path.to_owned(),
            });
            entry.count += 1;
            entry.last_at_ms = last_at_ms;
            host.clone_into(&mut entry.host);
            path.clone_into(&mut entry.path);
        }
        self.write();
    }

    /// A request from `client` refused (`407`, or `403` for a host not allowed). Recorded at once
    /// for an address the report does not hold yet (the server reads it when a pooled harness is
    /// claimed); after that the file is written at most once a second per address, so a client
    /// cannot make the proxy write without end.
    pub fn refused(self: &Arc<Self>, client: std::net::IpAddr) {
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        let key = client.to_string();
        let write = {
            let mut report = self.report.lock();
            let refused = &mut report.refused;
            if !refused.contains_key(&key)
                && refused.len() >= MAX_SANDBOXES
                && let Some(oldest) = refused.iter().min_by_key(|(_, r)| r.last_at_ms).map(|(ip, _)| ip.clone())
            {
                refused.remove(&oldest);
            }
            match refused.get_mut(&key) {
                Some(entry) => {
                    let stale = now_ms.saturating_sub(entry.last_at_ms) >= 1000;
                    entry.count += 1;
                    entry.last_at_ms = now_ms;
                    stale
                }
                None => {
                    refused.insert(key, Refused { count: 1, first_at_ms: now_ms, last_at_ms: now_ms });
                    true
                }
            }
        };
        if write {
            self.write();
        }
    }

    /// Writes the report file, off the runtime.
    fn write(self: &Arc<Self>) {
        let Some(path) = self.path.clone() else { return };
        let this = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let _writing = this.writing.lock();
            let bytes = match serde_json::to_vec(&*this.report.lock()) {
                Ok(bytes) => bytes,
                Err(_) => return,
            };
            if let Err(error) = write_atomically(&path, &bytes) {
                tracing::warn!(path = %path.display(), %error, "cannot write the proxy's report");
            }
        });
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// What a watched response is.
pub struct Origin {
    /// Where cuts go.
    pub reports: Arc<Reports>,
    /// The sandbox.
    pub sandbox: String,
    /// The upstream host.
    pub host: String,
    /// The path (no query).
    pub path: String,
    /// The status.
    pub status: u16,
    /// `content-length`, if any.
    pub declared: Option<u64>,
}

/// An upstream response body that reports being cut short.
pub struct Watched {
    inner: Incoming,
    origin: Origin,
    sent: u64,
    /// Ended (well or not) and reported if it had to be.
    settled: bool,
}

impl Watched {
    /// Watches `inner`.
    pub fn new(inner: Incoming, origin: Origin) -> Self {
        Self { inner, origin, sent: 0, settled: false }
    }

    fn settle(&mut self, ended_by: EndedBy, reason: String) {
        self.settled = true;
        let at_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        let o = &self.origin;
        let cut = Cut {
            at_ms,
            host: o.host.clone(),
            path: o.path.clone(),
            status: o.status,
            bytes_sent: self.sent,
            declared_bytes: o.declared,
            ended_by,
            reason,
        };
        o.reports.record(&o.sandbox, cut);
    }
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.sent += data.len() as u64;
                }
            }
            Poll::Ready(Some(Err(error))) => {
                let reason = why(error);
                self.settle(EndedBy::Upstream, reason);
            }
            Poll::Ready(None) => self.settled = true,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if !self.settled && !self.inner.is_end_stream() {
            self.settle(EndedBy::Client, "the client went away before the response ended".to_owned());
        }
    }
}

/// Why a body failed, in words: a TLS alert, a close without `close_notify`, a connection closed
/// before the declared length or the chunked end.
pub fn why(error: &hyper::Error) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return match tls {
                rustls::Error::AlertReceived(alert) => format!("the upstream sent a TLS alert ({alert:?})"),
                other => format!("TLS failed ({other})"),
            };
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            if let Some(tls) = io.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
                return match tls {
                    rustls::Error::AlertReceived(alert) => format!("the upstream sent a TLS alert ({alert:?})"),
                    other => format!("TLS failed ({other})"),
                };
            }
            if io.kind() == std::io::ErrorKind::UnexpectedEof {
                return "the upstream closed the connection before the response ended".to_owned();
            }
            return format!("the upstream connection failed ({})", io.kind());
        }
        source = cause.source();
    }
    if error.is_incomplete_message() {
        return "the upstream closed the connection before the response ended".to_owned();
    }
    format!("the upstream failed ({error})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_keeps_the_last_cut_and_the_count_per_sandbox_and_is_bounded() {
        let reports = Arc::new(Reports::new(None));
        let cut = |at_ms, ended_by| Cut {
            at_ms,
            host: "api.anthropic.com".into(),
            path: "/v1/messages".into(),
            status: 200,
            bytes_sent: 100,
            declared_bytes: Some(1000),
            ended_by,
            reason: "r".into(),
        };
        reports.record("a", cut(1, EndedBy::Upstream));
        reports.record("a", cut(2, EndedBy::Upstream));
        reports.record("a", cut(3, EndedBy::Client));
        let report = reports.report.lock().clone();
        assert_eq!(report.cut_short["a"].count, 2);
        assert_eq!(report.cut_short["a"].last.at_ms, 2, "a client's going away is not the provider's cut");
        assert!(reports.metrics().contains("{ended_by=\"upstream\"} 2\n"), "{}", reports.metrics());
        assert!(reports.metrics().contains("{ended_by=\"client\"} 1\n"));
        for i in 0..MAX_SANDBOXES as u64 + 5 {
            reports.record(&format!("s{i}"), cut(10 + i, EndedBy::Upstream));
        }
        let report = reports.report.lock();
        assert_eq!(report.cut_short.len(), MAX_SANDBOXES);
        assert!(!report.cut_short.contains_key("a"), "the oldest went first");
    }

    #[test]
    fn refusals_are_kept_per_client_address_and_bounded() {
        let reports = Arc::new(Reports::new(None));
        let ip: std::net::IpAddr = "10.214.0.2".parse().expect("ip");
        reports.refused(ip);
        reports.refused(ip);
        let entry = reports.report.lock().refused["10.214.0.2"].clone();
        assert_eq!(entry.count, 2);
        assert!(entry.first_at_ms > 0 && entry.first_at_ms <= entry.last_at_ms);
        for i in 0..MAX_SANDBOXES as u32 + 5 {
            reports.refused(std::net::IpAddr::V4(std::net::Ipv4Addr::from(0x0b00_0000 + i)));
        }
        let report = reports.report.lock();
        assert_eq!(report.refused.len(), MAX_SANDBOXES);
        // An older report (without the field) still reads.
        let old: Report = serde_json::from_str(r#"{"cut_short": {}}"#).expect("an older report");
        assert!(old.refused.is_empty());
    }
}
