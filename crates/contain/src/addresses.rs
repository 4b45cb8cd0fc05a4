//! Addresses of this computer and of private networks, which the gateway does not reach for an
//! agent: the drafts' fetches and the egress proxy refuse them unless the user named them.

use std::net::IpAddr;

/// Whether an address is one of this computer's or of a private network: the gateway does
/// not fetch from there for an agent (its dashboard, a router's admin page, a cloud's metadata).
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || a == 0
                || a >= 240
                || (a == 192 && b == 0 && v4.octets()[2] == 0)
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (18..20).contains(&b))
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_internal(IpAddr::V4(v4)))
                || embedded_v4(v6).is_some_and(|v4| is_internal(IpAddr::V4(v4)))
        }
    }
}

/// The IPv4 address inside NAT64 (`64:ff9b::/96`), 6to4 (`2002::/16`) and the old
/// IPv4-compatible (`::a.b.c.d`) forms.
fn embedded_v4(v6: std::net::Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    let s = v6.segments();
    let join = |hi: u16, lo: u16| std::net::Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || s[..6] == [0; 6] {
        Some(join(s[6], s[7]))
    } else if s[0] == 0x2002 {
        Some(join(s[1], s[2]))
    } else {
        None
    }
}
