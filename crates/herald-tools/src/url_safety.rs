//! Which addresses a fetch may reach: loopback, private, link-local, carrier-grade NAT,
//! unique-local and cloud metadata addresses are refused unless config allows them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is refused, if it is.
pub fn refused(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refused_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return refused_v4(v4);
            }
            if v6.is_loopback() || v6.is_unspecified() {
                Some("a loopback address")
            } else if (v6.segments()[0] & 0xfe00) == 0xfc00 {
                Some("a private (unique local) address")
            } else if (v6.segments()[0] & 0xffc0) == 0xfe80 {
                Some("a link-local address")
            } else if v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
                Some("a cloud metadata address")
            } else {
                None
            }
        }
    }
}

fn refused_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip.is_loopback() || ip.is_unspecified() {
        Some("a loopback address")
    } else if o == [169, 254, 169, 254] || o == [100, 100, 100, 200] {
        Some("a cloud metadata address")
    } else if ip.is_link_local() {
        Some("a link-local address")
    } else if ip.is_private() || (o[0] == 100 && (64..128).contains(&o[1])) {
        Some("a private address")
    } else if ip.is_broadcast() || ip.is_multicast() || o[0] == 0 || o[0] >= 240 {
        Some("a reserved address")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "fd00:ec2::254",
        ] {
            assert!(refused(a.parse().unwrap()).is_some(), "{a}");
        }
        for a in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(refused(a.parse().unwrap()).is_none(), "{a}");
        }
    }
}
