//! Which frames `roce decode` writes: by QPN, opcode class, decode error, IP address and
//! time. Every option given must hold (AND); the values of one option are alternatives
//! (OR), except IP addresses, each of which must be an end of the frame (so two of them
//! select a conversation).

use crate::decode::{Decoded, Failure};
use crate::read::Frame;
use roce_core::wire::opcode::Operation;
use roce_core::wire::{self, Headers, L3Repr, Opcode};
use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;

/// The frames to keep. The default keeps every frame.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// BTH destination QP (or UD source QP) is one of these.
    pub qpns: Vec<u32>,
    /// The opcode is in one of these classes.
    pub opcodes: Vec<OpcodeClass>,
    /// Only frames that did not decode, of this kind.
    pub error: Option<ErrorClass>,
    /// Each of these is the source or the destination.
    pub ips: Vec<IpNet>,
    /// Time since the first frame of the capture, inclusive.
    pub from: Option<Duration>,
    pub to: Option<Duration>,
}

impl Filter {
    /// Whether the filter keeps a frame decoded as `result`.
    pub fn keeps(
        &self,
        frame: &Frame<'_>,
        since_first: Duration,
        result: &Result<Decoded<'_>, Failure>,
    ) -> bool {
        if self.from.is_some_and(|t| since_first < t) || self.to.is_some_and(|t| since_first > t) {
            return false;
        }
        if let Some(e) = self.error {
            match result {
                Ok(_) => return false,
                Err(f) if !e.matches(f.name) => return false,
                Err(_) => {}
            }
        }
        if self.qpns.is_empty() && self.opcodes.is_empty() && self.ips.is_empty() {
            return true;
        }
        // A frame that failed a late check (the ICRC, say), or was captured headers only,
        // still has readable headers.
        let mut room = Vec::new();
        let headers = match result {
            Ok(d) => d.headers,
            Err(_) => match wire::parse_unverified(frame.headers_view(&mut room)) {
                Ok(p) if frame.link == crate::read::LinkType::ETHERNET => p.headers(),
                _ => return false,
            },
        };
        self.keeps_headers(&headers)
    }

    fn keeps_headers(&self, h: &Headers) -> bool {
        let qpn_ok = self.qpns.is_empty()
            || self.qpns.iter().any(|&q| {
                h.bth.dest_qp.value() == q || h.ext.deth.is_some_and(|d| d.src_qp.value() == q)
            });
        let opcode_ok = self.opcodes.is_empty() || self.opcodes.iter().any(|c| c.matches(h));
        let (src, dst) = match &h.l3 {
            L3Repr::Ipv4(ip) => (IpAddr::V4(ip.src), IpAddr::V4(ip.dst)),
            L3Repr::Ipv6(ip) | L3Repr::Grh(ip) => (IpAddr::V6(ip.src), IpAddr::V6(ip.dst)),
        };
        let ip_ok = self.ips.iter().all(|n| n.contains(src) || n.contains(dst));
        qpn_ok && opcode_ok && ip_ok
    }
}

/// A class of opcodes for `--opcode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpcodeClass {
    /// SEND of any transport.
    Send,
    /// RDMA WRITE.
    Write,
    /// RDMA READ requests and responses.
    Read,
    /// COMPARE_SWAP, FETCH_ADD and their ACKs.
    Atomic,
    /// ACKNOWLEDGE (NAKs included) and ATOMIC ACKNOWLEDGE.
    Ack,
    /// An AETH that is a NAK or an RNR NAK.
    Nak,
    Cnp,
    /// One opcode.
    Exact(Opcode),
}

impl OpcodeClass {
    /// The names `--opcode` takes besides opcode names and numbers.
    pub const NAMES: &'static str = "send, write, read, atomic, ack, nak, cnp";

    fn matches(self, h: &Headers) -> bool {
        let op = h.bth.opcode;
        let operation = op.info().map(|i| i.operation);
        match self {
            Self::Exact(o) => o == op,
            Self::Nak => h
                .ext
                .aeth
                .is_some_and(|a| !matches!(a.syndrome, wire::aeth::Syndrome::Ack(_))),
            _ => operation.is_some_and(|o| self.has(o)),
        }
    }

    fn has(self, o: Operation) -> bool {
        use Operation as O;
        match self {
            Self::Send => o == O::Send,
            Self::Write => o == O::RdmaWrite,
            Self::Read => matches!(o, O::RdmaReadRequest | O::RdmaReadResponse),
            Self::Atomic => matches!(o, O::CompareSwap | O::FetchAdd | O::AtomicAcknowledge),
            Self::Ack => matches!(o, O::Acknowledge | O::AtomicAcknowledge),
            Self::Cnp => o == O::Cnp,
            Self::Nak | Self::Exact(_) => false,
        }
    }
}

impl FromStr for OpcodeClass {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "send" => Self::Send,
            "write" => Self::Write,
            "read" => Self::Read,
            "atomic" => Self::Atomic,
            "ack" => Self::Ack,
            "nak" => Self::Nak,
            "cnp" => Self::Cnp,
            _ => {
                let op = Opcode::from_name(&s.to_ascii_uppercase())
                    .or_else(|| parse_uint(s).and_then(|n| u8::try_from(n).ok()).map(Opcode));
                match op {
                    Some(o) => Self::Exact(o),
                    None => {
                        return Err(format!(
                            "{s:?} is not an opcode class ({}), an opcode name such as \
                             RC_SEND_FIRST, or an opcode number",
                            Self::NAMES
                        ))
                    }
                }
            }
        })
    }
}

/// Which decode failures `--error` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Every frame that did not decode.
    Any,
    /// `icrc_mismatch`.
    Icrc,
    /// Every failure but `icrc_mismatch`.
    Parse,
    /// One error name of `packet-json.md`.
    Named(&'static str),
}

impl ErrorClass {
    fn matches(self, name: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Icrc => name == "icrc_mismatch",
            Self::Parse => name != "icrc_mismatch",
            Self::Named(n) => n == name,
        }
    }
}

impl FromStr for ErrorClass {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "any" => Self::Any,
            "icrc" => Self::Icrc,
            "parse" => Self::Parse,
            _ => match wire::Error::ALL_NAMES.iter().find(|&&n| n == s) {
                Some(n) => Self::Named(n),
                None => {
                    return Err(format!(
                        "{s:?} is not any, icrc, parse or an error name of packet-json.md ({})",
                        wire::Error::ALL_NAMES.join(", ")
                    ))
                }
            },
        })
    }
}

/// An address or a prefix (`10.0.0.1`, `10.0.0.0/24`, `fd00::/64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                masked(u32::from(n).into(), 32, self.prefix)
                    == masked(u32::from(a).into(), 32, self.prefix)
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                masked(u128::from(n), 128, self.prefix) == masked(u128::from(a), 128, self.prefix)
            }
            // An IPv4 address also matches its IPv4-mapped IPv6 form (a RoCE GID).
            (IpAddr::V4(_), IpAddr::V6(a)) => {
                a.to_ipv4_mapped().is_some_and(|a| self.contains(a.into()))
            }
            (IpAddr::V6(_), IpAddr::V4(a)) => self.contains(a.to_ipv6_mapped().into()),
        }
    }
}

/// The top `prefix` bits of a `width`-bit address.
fn masked(a: u128, width: u32, prefix: u8) -> u128 {
    let keep = u32::from(prefix).min(width);
    if keep == 0 {
        0
    } else {
        a >> (width - keep)
    }
}

impl FromStr for IpNet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("{a:?} is not an IPv4 or IPv6 address"))?;
        let width = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => width,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|&n| n <= width)
                .ok_or_else(|| format!("{p:?} is not a prefix length of 0 to {width}"))?,
        };
        Ok(Self { addr, prefix })
    }
}

/// A number in decimal or `0x` hex.
pub fn parse_uint(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// A time such as `1.5` (seconds), `1.5s`, `250ms`, `20us`, `100ns`.
pub fn parse_time(s: &str) -> Result<Duration, String> {
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let scale = match unit {
        "s" => 1e9,
        "ms" => 1e6,
        "us" => 1e3,
        "ns" => 1.0,
        _ => return Err(format!("{s:?}: the unit must be s, ms, us or ns")),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a time (try 1.5, 250ms, 20us)"))?;
    if !(v >= 0.0 && v.is_finite()) {
        return Err(format!("{s:?}: a time must be zero or more"));
    }
    Ok(Duration::from_nanos((v * scale).round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        let n: IpNet = "10.0.0.0/24".parse().unwrap();
        assert!(n.contains("10.0.0.7".parse().unwrap()));
        assert!(!n.contains("10.0.1.7".parse().unwrap()));
        assert!(n.contains("::ffff:10.0.0.9".parse().unwrap()));
        let one: IpNet = "fd00::1".parse().unwrap();
        assert!(one.contains("fd00::1".parse().unwrap()));
        assert!(!one.contains("fd00::2".parse().unwrap()));
        let all: IpNet = "::/0".parse().unwrap();
        assert!(all.contains("fd00::2".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<IpNet>().is_err());
        assert!("10.0.0".parse::<IpNet>().is_err());
    }

    #[test]
    fn opcode_classes_and_times() {
        assert_eq!("write".parse(), Ok(OpcodeClass::Write));
        assert_eq!("RC_SEND_FIRST".parse(), Ok(OpcodeClass::Exact(Opcode(0))));
        assert_eq!(
            "rc_acknowledge".parse(),
            Ok(OpcodeClass::Exact(Opcode(0x11)))
        );
        assert_eq!("0x81".parse(), Ok(OpcodeClass::Exact(Opcode(0x81))));
        assert!("bogus".parse::<OpcodeClass>().is_err());
        assert_eq!(parse_time("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_time("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_time("20us"), Ok(Duration::from_micros(20)));
        assert!(parse_time("-1").is_err());
        assert!(parse_time("5m").is_err());
        assert_eq!(
            "icrc_mismatch".parse(),
            Ok(ErrorClass::Named("icrc_mismatch"))
        );
        assert!("icrc_wrong".parse::<ErrorClass>().is_err());
    }
}
