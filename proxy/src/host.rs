//! Host names and authorities as the proxy sees them: parsed once, normalised (lowercase, one
//! trailing dot dropped, numbers in any spelling turned into the address `getaddrinfo` would
//! make of them), so that allow-lists, injection rules and the address check all look at the
//! same value.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A normalised host: a DNS name (lowercase ASCII, no trailing dot) or an address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Host {
    /// A DNS name.
    Name(String),
    /// An address, however it was spelled (`2130706433`, `0177.0.0.1`, `[::ffff:7f00:1]`).
    Ip(IpAddr),
}

/// Why a host or authority was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Empty, too long, non-ASCII, or a character a DNS name cannot hold.
    #[error("not a valid host name")]
    Invalid,
    /// Looks like a number but is not an address `getaddrinfo` would accept either.
    #[error("a malformed numeric host")]
    MalformedNumeric,
    /// The port is missing, zero or not a number.
    #[error("a missing or invalid port")]
    Port,
}

/// A host and port: the destination a decision is made about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// The normalised host.
    pub host: Host,
    /// The port.
    pub port: u16,
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl Host {
    /// The name, if this is a DNS name.
    pub fn name(&self) -> Option<&str> {
        match self {
            Host::Name(name) => Some(name),
            Host::Ip(_) => None,
        }
    }
}

/// Normalises a host as written in a request, an allow-list or a rule.
pub fn parse_host(raw: &str) -> Result<Host, HostError> {
    if let Some(inner) = raw.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or(HostError::Invalid)?;
        return inner.parse::<Ipv6Addr>().map(|ip| Host::Ip(IpAddr::V6(ip))).map_err(|_| HostError::Invalid);
    }
    if raw.is_empty() || raw.len() > 254 || !raw.is_ascii() {
        return Err(HostError::Invalid);
    }
    let lower = raw.to_ascii_lowercase();
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    if name.is_empty() || name.len() > 253 {
        return Err(HostError::Invalid);
    }
    if let Some(ip) = parse_inet_aton(name) {
        return Ok(Host::Ip(IpAddr::V4(ip)));
    }
    let last = name.rsplit('.').next().unwrap_or(name);
    if last.starts_with(|c: char| c.is_ascii_digit()) && last.chars().all(|c| c.is_ascii_hexdigit() || c == 'x') {
        return Err(HostError::MalformedNumeric);
    }
    for label in name.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(HostError::Invalid);
        }
    }
    Ok(Host::Name(name.to_owned()))
}

/// Parses `host:port` (`[v6]:port`); without a port, `default_port` is used if given.
pub fn parse_authority(raw: &str, default_port: Option<u16>) -> Result<Target, HostError> {
    let (host, port) = if raw.starts_with('[') {
        let end = raw.find(']').ok_or(HostError::Invalid)?;
        let (host, rest) = raw.split_at(end + 1);
        match rest.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if rest.is_empty() => (host, None),
            None => return Err(HostError::Invalid),
        }
    } else {
        match raw.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (raw, None),
        }
    };
    let port = match port {
        Some(port) => parse_port(port)?,
        None => default_port.ok_or(HostError::Port)?,
    };
    Ok(Target { host: parse_host(host)?, port })
}

fn parse_port(raw: &str) -> Result<u16, HostError> {
    if raw.is_empty() || raw.len() > 5 || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HostError::Port);
    }
    match raw.parse::<u16>() {
        Ok(0) | Err(_) => Err(HostError::Port),
        Ok(port) => Ok(port),
    }
}

/// The IPv4 address glibc's `inet_aton` (and so `getaddrinfo`) makes of `s`: one to four parts,
/// each decimal, octal (leading `0`) or hex (`0x`), the last filling the remaining bytes.
pub fn parse_inet_aton(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for part in &parts {
        values.push(parse_number(part)?);
    }
    let (last, init) = values.split_last()?;
    let mut addr: u64 = 0;
    for (i, value) in init.iter().enumerate() {
        if *value > 0xff {
            return None;
        }
        addr |= value << (8 * (3 - i));
    }
    let room_bits = 8 * (4 - init.len());
    if room_bits < 64 && *last >= (1u64 << room_bits) {
        return None;
    }
    addr |= last;
    u32::try_from(addr).ok().map(Ipv4Addr::from)
}

fn parse_number(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
        (hex, 16)
    } else if part.len() > 1 && part.starts_with('0') {
        (&part[1..], 8)
    } else {
        (part, 10)
    };
    if digits.is_empty() {
        // "0x" alone is 0 for inet_aton.
        return (radix == 16).then_some(0);
    }
    if digits.len() > 12 {
        return None;
    }
    u64::from_str_radix(digits, radix).ok().filter(|v| *v <= u64::from(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Host {
        Host::Ip(s.parse().expect("test address"))
    }

    #[test]
    fn numbers_in_every_spelling_become_addresses() {
        assert_eq!(parse_host("2130706433"), Ok(ip("127.0.0.1")));
        assert_eq!(parse_host("0177.0.0.1"), Ok(ip("127.0.0.1")));
        assert_eq!(parse_host("0x7f000001"), Ok(ip("127.0.0.1")));
        assert_eq!(parse_host("0x7F.1"), Ok(ip("127.0.0.1")));
        assert_eq!(parse_host("127.1"), Ok(ip("127.0.0.1")));
        assert_eq!(parse_host("169.254.169.254."), Ok(ip("169.254.169.254")));
        assert_eq!(parse_host("0251.0376.0251.0376"), Ok(ip("169.254.169.254")));
        assert_eq!(parse_host("[::ffff:127.0.0.1]"), Ok(ip("::ffff:127.0.0.1")));
        assert_eq!(parse_host("[::1]"), Ok(ip("::1")));
        assert_eq!(parse_host("0"), Ok(ip("0.0.0.0")));
    }

    #[test]
    fn malformed_numbers_are_not_names() {
        assert_eq!(parse_host("256.1.1.1"), Err(HostError::MalformedNumeric));
        assert_eq!(parse_host("1.2.3.4.5"), Err(HostError::MalformedNumeric));
        assert_eq!(parse_host("089.1.1.1"), Err(HostError::MalformedNumeric));
        assert_eq!(parse_host("4294967296"), Err(HostError::MalformedNumeric));
    }

    #[test]
    fn names_are_lowercased_and_lose_one_trailing_dot() {
        assert_eq!(parse_host("API.Anthropic.COM."), Ok(Host::Name("api.anthropic.com".into())));
        assert_eq!(parse_host("api.anthropic.com.."), Err(HostError::Invalid));
        assert_eq!(parse_host("."), Err(HostError::Invalid));
        assert_eq!(parse_host("exa mple.com"), Err(HostError::Invalid));
        assert_eq!(parse_host("bücher.de"), Err(HostError::Invalid));
        assert_eq!(parse_host("1.2.3.example"), Ok(Host::Name("1.2.3.example".into())));
        assert_eq!(parse_host("[::1"), Err(HostError::Invalid));
    }

    #[test]
    fn authorities() {
        let t = parse_authority("API.openai.com.:443", None).expect("valid");
        assert_eq!(t.to_string(), "api.openai.com:443");
        assert_eq!(parse_authority("example.com", Some(80)).map(|t| t.port), Ok(80));
        assert_eq!(parse_authority("example.com", None), Err(HostError::Port));
        assert_eq!(parse_authority("example.com:0", None), Err(HostError::Port));
        assert_eq!(parse_authority("example.com:+443", None), Err(HostError::Port));
        assert_eq!(parse_authority("[::1]:8443", None).map(|t| t.to_string()), Ok("[::1]:8443".into()));
        assert_eq!(parse_authority("[::1]x", None), Err(HostError::Invalid));
    }
}
