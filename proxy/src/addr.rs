//! Which destination addresses the proxy refuses, whatever name led to them: a pure function
//! of the address (and whether private ranges are refused), applied after resolution to every
//! address a name resolves to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is refused. The text goes into the 403 body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 127/8, ::1.
    Loopback,
    /// 10/8, 172.16/12, 192.168/16, fc00::/7.
    Private,
    /// 169.254/16 (cloud metadata at 169.254.169.254), fe80::/10.
    LinkLocal,
    /// 0.0.0.0/8, ::.
    Unspecified,
    /// 224/4, ff00::/8, 255.255.255.255.
    Multicast,
    /// 100.64/10 (carrier-grade NAT).
    SharedAddressSpace,
    /// Documentation, benchmarking, IETF protocol and reserved ranges (192.0.0/24, 192.0.2/24,
    /// 198.18/15, 198.51.100/24, 203.0.113/24, 240/4, 2001:db8::/32).
    Reserved,
    /// One of the proxy's own addresses.
    Proxy,
}

impl Refusal {
    /// A short phrase for the 403 body and the log.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Loopback => "a loopback address",
            Refusal::Private => "a private address",
            Refusal::LinkLocal => "a link-local address (cloud metadata lives there)",
            Refusal::Unspecified => "an unspecified address",
            Refusal::Multicast => "a multicast or broadcast address",
            Refusal::SharedAddressSpace => "a carrier-grade NAT address",
            Refusal::Reserved => "a reserved address",
            Refusal::Proxy => "the proxy's own address",
        }
    }
}

/// Whether `ip` may be dialled. `deny_private` refuses the private and shared ranges too;
/// loopback, link-local, unspecified, multicast, reserved and `own` addresses are always refused.
pub fn check(ip: IpAddr, deny_private: bool, own: &[IpAddr]) -> Result<(), Refusal> {
    check_allowing(ip, deny_private, own, &[])
}

/// [`check`], with `allowed`: private, shared or reserved addresses that may be dialled all the
/// same (an operator's mirror); never a loopback, link-local, unspecified, multicast or `own` one.
pub fn check_allowing(ip: IpAddr, deny_private: bool, own: &[IpAddr], allowed: &[IpAddr]) -> Result<(), Refusal> {
    let ip = canonical(ip);
    let refusal = match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    };
    match refusal {
        Some(Refusal::Private | Refusal::SharedAddressSpace) if !deny_private => {}
        Some(Refusal::Private | Refusal::SharedAddressSpace | Refusal::Reserved)
            if allowed.iter().any(|a| canonical(*a) == ip) => {}
        Some(refusal) => return Err(refusal),
        None => {}
    }
    if own.iter().any(|o| canonical(*o) == ip) {
        return Err(Refusal::Proxy);
    }
    Ok(())
}

/// The IPv4 address behind an IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`),
/// NAT64 (`64:ff9b::/96`) or 6to4 (`2002::/16`) IPv6 address; other addresses unchanged.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = v6.segments();
    let o = v6.octets();
    if s[..6] == [0, 0, 0, 0, 0, 0] && !(s[6] == 0 && s[7] <= 1) {
        return Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    None
}

fn classify_v4(ip: Ipv4Addr) -> Option<Refusal> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, _, _) => Refusal::Unspecified,
        (127, _, _) => Refusal::Loopback,
        (10, _, _) | (192, 168, _) => Refusal::Private,
        (172, 16..=31, _) => Refusal::Private,
        (169, 254, _) => Refusal::LinkLocal,
        (100, 64..=127, _) => Refusal::SharedAddressSpace,
        (224..=239, _, _) => Refusal::Multicast,
        (255, 255, 255) if ip == Ipv4Addr::BROADCAST => Refusal::Multicast,
        (240..=255, _, _) => Refusal::Reserved,
        (192, 0, 0) | (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Refusal::Reserved,
        (198, 18..=19, _) => Refusal::Reserved,
        _ => return None,
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<Refusal> {
    let s = ip.segments();
    if ip.is_unspecified() {
        Some(Refusal::Unspecified)
    } else if ip.is_loopback() {
        Some(Refusal::Loopback)
    } else if s[0] & 0xfe00 == 0xfc00 {
        Some(Refusal::Private)
    } else if s[0] & 0xffc0 == 0xfe80 || s[0] & 0xffc0 == 0xfec0 {
        Some(Refusal::LinkLocal)
    } else if s[0] & 0xff00 == 0xff00 {
        Some(Refusal::Multicast)
    } else if s[0] == 0x2001 && s[1] == 0x0db8 {
        Some(Refusal::Reserved)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{Host, parse_host};

    fn verdict(host: &str) -> Result<(), Refusal> {
        match parse_host(host).expect("test host parses") {
            Host::Ip(ip) => check(ip, true, &[]),
            Host::Name(_) => panic!("{host} is not an address"),
        }
    }

    #[test]
    fn every_refused_range_in_every_spelling() {
        let cases: &[(&str, Refusal)] = &[
            ("127.0.0.1", Refusal::Loopback),
            ("127.255.255.254", Refusal::Loopback),
            ("2130706433", Refusal::Loopback),
            ("0177.0.0.1", Refusal::Loopback),
            ("0x7f.0.0.1", Refusal::Loopback),
            ("127.1", Refusal::Loopback),
            ("[::1]", Refusal::Loopback),
            ("[::ffff:127.0.0.1]", Refusal::Loopback),
            ("[::ffff:7f00:1]", Refusal::Loopback),
            ("[::127.0.0.1]", Refusal::Loopback),
            ("[64:ff9b::7f00:1]", Refusal::Loopback),
            ("[2002:7f00:1::]", Refusal::Loopback),
            ("10.0.0.1", Refusal::Private),
            ("172.16.0.1", Refusal::Private),
            ("172.31.255.255", Refusal::Private),
            ("192.168.1.1", Refusal::Private),
            ("[fc00::1]", Refusal::Private),
            ("[fd00:ec2::254]", Refusal::Private),
            ("[::ffff:10.0.0.1]", Refusal::Private),
            ("169.254.169.254", Refusal::LinkLocal),
            ("0251.0376.0251.0376", Refusal::LinkLocal),
            ("2852039166", Refusal::LinkLocal),
            ("0xa9fea9fe", Refusal::LinkLocal),
            ("[::ffff:169.254.169.254]", Refusal::LinkLocal),
            ("[fe80::1]", Refusal::LinkLocal),
            ("0.0.0.0", Refusal::Unspecified),
            ("0", Refusal::Unspecified),
            ("[::]", Refusal::Unspecified),
            ("224.0.0.1", Refusal::Multicast),
            ("255.255.255.255", Refusal::Multicast),
            ("[ff02::1]", Refusal::Multicast),
            ("100.64.0.1", Refusal::SharedAddressSpace),
            ("100.127.255.255", Refusal::SharedAddressSpace),
            ("[::ffff:100.64.0.1]", Refusal::SharedAddressSpace),
            ("192.0.2.1", Refusal::Reserved),
            ("198.18.0.1", Refusal::Reserved),
            ("240.0.0.1", Refusal::Reserved),
            ("[2001:db8::1]", Refusal::Reserved),
        ];
        for (host, expected) in cases {
            assert_eq!(verdict(host), Err(*expected), "{host}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for host in ["1.1.1.1", "8.8.8.8", "172.32.0.1", "100.128.0.1", "[2606:4700::1111]", "[::ffff:1.1.1.1]"] {
            assert_eq!(verdict(host), Ok(()), "{host}");
        }
    }

    #[test]
    fn private_ranges_only_when_allowed_and_never_loopback_or_metadata() {
        let private: IpAddr = "10.1.2.3".parse().expect("addr");
        assert_eq!(check(private, false, &[]), Ok(()));
        let metadata: IpAddr = "169.254.169.254".parse().expect("addr");
        assert_eq!(check(metadata, false, &[]), Err(Refusal::LinkLocal));
        let loopback: IpAddr = "::ffff:127.0.0.1".parse().expect("addr");
        assert_eq!(check(loopback, false, &[]), Err(Refusal::Loopback));
    }

    #[test]
    fn own_addresses_are_refused_in_any_form() {
        let own: IpAddr = "1.2.3.4".parse().expect("addr");
        let mapped: IpAddr = "::ffff:1.2.3.4".parse().expect("addr");
        assert_eq!(check(mapped, true, &[own]), Err(Refusal::Proxy));
        // An operator's mirror: only the named private or reserved address, never loopback,
        // link-local or the proxy's own.
        let mirror: IpAddr = "203.0.113.80".parse().expect("ip");
        let other: IpAddr = "203.0.113.81".parse().expect("ip");
        assert_eq!(check_allowing(mirror, true, &[], &[mirror]), Ok(()));
        assert_eq!(check_allowing(other, true, &[], &[mirror]), Err(Refusal::Reserved));
        let ten: IpAddr = "10.1.2.3".parse().expect("ip");
        assert_eq!(check_allowing(ten, true, &[], &[ten]), Ok(()));
        for never in ["127.0.0.1", "169.254.169.254", "0.0.0.0", "224.0.0.1"] {
            let never: IpAddr = never.parse().expect("ip");
            assert!(check_allowing(never, true, &[], &[never]).is_err(), "{never}");
        }
        assert_eq!(check_allowing(mirror, true, &[mirror], &[mirror]), Err(Refusal::Proxy));
    }
}
