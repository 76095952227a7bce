//! `roce encode`'s input: packet objects (`packet-json.md`) made into frames. Every
//! derived field that is left out is computed; every field that is given is written as
//! given, so that deliberately broken frames can be made.

use anyhow::{anyhow, bail, Result};
use roce_core::num::{Msn, Psn, Qkey, Qpn, Rkey};
use roce_core::wire::aeth::{AethRepr, Syndrome};
use roce_core::wire::atomic::{AtomicAckEthRepr, AtomicEthRepr};
use roce_core::wire::bth::BthRepr;
use roce_core::wire::cnp::CnpRepr;
use roce_core::wire::deth::DethRepr;
use roce_core::wire::ethernet::{EthernetRepr, MacAddr, VlanRepr};
use roce_core::wire::icrc::compute as icrc_compute;
use roce_core::wire::imm::{IethRepr, ImmDtRepr};
use roce_core::wire::ipv4::{self, Ipv4Repr};
use roce_core::wire::ipv6::{self, Ipv6Repr};
use roce_core::wire::reth::RethRepr;
use roce_core::wire::udp::{self, UdpRepr};
use roce_core::wire::{emit_with, ExtHeaders, Headers, L3Repr, Opcode};
use serde_json::{Map, Value};
use std::net::{Ipv4Addr, Ipv6Addr};

/// A JSON object with its path, for precise error messages.
struct Obj<'a> {
    map: &'a Map<String, Value>,
    path: String,
}

impl<'a> Obj<'a> {
    fn new(v: &'a Value, path: &str) -> Result<Self> {
        let map = v
            .as_object()
            .ok_or_else(|| anyhow!("{path}: expected an object"))?;
        Ok(Self {
            map,
            path: path.to_string(),
        })
    }
    fn name(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }
    fn obj(&self, key: &str) -> Result<Option<Obj<'a>>> {
        self.get(key)
            .map(|v| Obj::new(v, &self.name(key)))
            .transpose()
    }
    fn req_obj(&self, key: &str) -> Result<Obj<'a>> {
        self.obj(key)?
            .ok_or_else(|| anyhow!("missing field {}", self.name(key)))
    }
    /// An optional unsigned integer no larger than `max`.
    fn uint(&self, key: &str, max: u64) -> Result<Option<u64>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let n = v
            .as_u64()
            .ok_or_else(|| anyhow!("{}: expected an unsigned integer", self.name(key)))?;
        if n > max {
            bail!("{}: {n} is larger than {max}", self.name(key));
        }
        Ok(Some(n))
    }
    fn req(&self, key: &str, max: u64) -> Result<u64> {
        self.uint(key, max)?
            .ok_or_else(|| anyhow!("missing field {}", self.name(key)))
    }
    fn flag(&self, key: &str) -> Result<bool> {
        Ok(self.req(key, 1)? == 1)
    }
    fn string(&self, key: &str) -> Result<Option<&'a str>> {
        self.get(key)
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| anyhow!("{}: expected a string", self.name(key)))
            })
            .transpose()
    }
    fn req_str(&self, key: &str) -> Result<&'a str> {
        self.string(key)?
            .ok_or_else(|| anyhow!("missing field {}", self.name(key)))
    }
    fn bytes(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.string(key)?
            .map(|s| crate::hex::parse(s).map_err(|e| anyhow!("{}: {e}", self.name(key))))
            .transpose()
    }
    fn parsed<T: std::str::FromStr>(&self, key: &str) -> Result<T> {
        let s = self.req_str(key)?;
        s.parse()
            .map_err(|_| anyhow!("{}: cannot parse {s:?}", self.name(key)))
    }
}

fn mac(o: &Obj<'_>, key: &str) -> Result<MacAddr> {
    let s = o.req_str(key)?;
    let parts: Vec<_> = s.split([':', '-']).collect();
    let mut a = [0u8; 6];
    if parts.len() != 6 {
        bail!("{}: {s:?} is not a MAC address", o.name(key));
    }
    for (d, p) in a.iter_mut().zip(parts) {
        // One or two hex digits (`from_str_radix` alone takes "0dd" or "+d").
        let digits = (1..=2).contains(&p.len()) && p.bytes().all(|c| c.is_ascii_hexdigit());
        *d = u8::from_str_radix(p, 16)
            .ok()
            .filter(|_| digits)
            .ok_or_else(|| anyhow!("{}: {s:?} is not a MAC address", o.name(key)))?;
    }
    Ok(MacAddr(a))
}

/// Fields written as given after `emit` computed the derived ones.
#[derive(Default)]
struct Overrides {
    ethertype: Option<u16>,
    ip_length: Option<u16>,
    ip_checksum: Option<u16>,
    udp_length: Option<u16>,
    icrc_wire: Option<[u8; 4]>,
}

/// The frame of one line of `roce encode`'s input: `None` for an empty line or a decode
/// line of a frame that did not decode (`"ok": false`).
pub fn frame_from_line(line: &str) -> Result<Option<Vec<u8>>> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let v: Value = serde_json::from_str(line)?;
    if v.get("ok") == Some(&Value::Bool(false)) {
        return Ok(None);
    }
    json_to_frame(&v).map(Some)
}

/// Builds a frame from a packet object: either bare, or a decode line with `packet`.
pub fn json_to_frame(v: &Value) -> Result<Vec<u8>> {
    let top = Obj::new(v, "")?;
    let p = match top.obj("packet")? {
        Some(p) => p,
        None => top,
    };
    let mut ov = Overrides::default();
    let eth_o = p.req_obj("eth")?;
    let eth = EthernetRepr {
        dst: mac(&eth_o, "dst")?,
        src: mac(&eth_o, "src")?,
        ethertype: 0,
    };
    ov.ethertype = eth_o.uint("ethertype", 0xFFFF)?.map(|e| e as u16);
    let vlan = match eth_o.obj("vlan")? {
        Some(t) => Some(VlanRepr {
            pcp: t.req("pcp", 7)? as u8,
            dei: t.flag("dei")?,
            vid: t.req("vid", 0xFFF)? as u16,
            ethertype: 0,
        }),
        None => None,
    };
    let (l3, udp) = if let Some(g) = p.obj("grh")? {
        (L3Repr::Grh(ipv6_repr(&g, &mut ov)?), None)
    } else {
        let ip = p.req_obj("ip")?;
        let l3 = match ip.req("version", 15)? {
            4 => {
                ov.ip_length = ip.uint("total_length", 0xFFFF)?.map(|n| n as u16);
                ov.ip_checksum = ip.uint("header_checksum", 0xFFFF)?.map(|n| n as u16);
                L3Repr::Ipv4(Ipv4Repr {
                    src: ip.parsed::<Ipv4Addr>("src")?,
                    dst: ip.parsed::<Ipv4Addr>("dst")?,
                    dscp: ip.req("dscp", 63)? as u8,
                    ecn: ip.req("ecn", 3)? as u8,
                    ident: ip.req("id", 0xFFFF)? as u16,
                    dont_frag: ip.flag("df")?,
                    more_frags: ip.uint("mf", 1)? == Some(1),
                    frag_offset: ip.uint("frag_offset", 0x1FFF)?.unwrap_or(0) as u16,
                    ttl: ip.req("ttl", 255)? as u8,
                    protocol: ip.req("protocol", 255)? as u8,
                })
            }
            6 => L3Repr::Ipv6(ipv6_repr(&ip, &mut ov)?),
            n => bail!("ip.version: {n} is neither 4 nor 6"),
        };
        let u = p.req_obj("udp")?;
        ov.udp_length = u.uint("length", 0xFFFF)?.map(|n| n as u16);
        let udp = UdpRepr {
            src_port: u.req("sport", 0xFFFF)? as u16,
            dst_port: u.req("dport", 0xFFFF)? as u16,
            checksum: u.req("checksum", 0xFFFF)? as u16,
        };
        (l3, Some(udp))
    };
    let b = p.req_obj("bth")?;
    // The name is derived: given with the number, it must name the same opcode (the
    // wire has no room for a contradiction).
    let name = b.string("opcode_name")?;
    let by_name = name
        .map(|n| {
            Opcode::from_name(n).ok_or_else(|| anyhow!("bth.opcode_name: unknown opcode {n:?}"))
        })
        .transpose()?;
    let opcode = match (b.uint("opcode", 255)?, by_name) {
        (Some(op), Some(named)) if named != Opcode(op as u8) => bail!(
            "bth.opcode_name {:?} is opcode {}, but bth.opcode is {op}",
            name.unwrap_or_default(),
            named.0
        ),
        (Some(op), _) => Opcode(op as u8),
        (None, Some(op)) => op,
        (None, None) => bail!("missing field bth.opcode"),
    };
    let payload = p.bytes("payload_hex")?.unwrap_or_default();
    if let Some(info) = opcode.info().filter(|i| !i.payload && !payload.is_empty()) {
        bail!("payload_hex: {} carries no payload", info.name);
    }
    if let Some(n) = p.uint("payload_len", u64::MAX)? {
        if n != payload.len() as u64 {
            bail!(
                "payload_len {n} disagrees with payload_hex ({} bytes)",
                payload.len()
            );
        }
    }
    let pad = match p.bytes("pad_hex")? {
        Some(pad) => pad,
        None => vec![0; payload.len().wrapping_neg() & 3],
    };
    let bth = BthRepr {
        opcode,
        se: b.flag("se")?,
        migreq: b.flag("migreq")?,
        pad_count: b
            .uint("padcnt", 3)?
            .map_or(pad.len() as u8 & 3, |n| n as u8),
        tver: b.req("tver", 15)? as u8,
        pkey: b.req("pkey", 0xFFFF)? as u16,
        fecn: b.flag("fecn")?,
        becn: b.flag("becn")?,
        resv6: b.uint("resv6", 0x3F)?.unwrap_or(0) as u8,
        dest_qp: Qpn::new(b.req("destqp", 0xFF_FFFF)? as u32),
        ack_req: b.flag("ackreq")?,
        resv7: b.uint("resv7", 0x7F)?.unwrap_or(0) as u8,
        psn: Psn::new(b.req("psn", 0xFF_FFFF)? as u32),
    };
    let ext = ext_headers(&p)?;
    ov.icrc_wire = icrc_given(&p)?;

    let headers = Headers {
        eth,
        vlan,
        l3,
        udp,
        bth,
        ext,
    };
    let body_len = payload.len() + pad.len();
    let mut frame = vec![0u8; headers.frame_len(body_len).map_err(|e| anyhow!("{e}"))?];
    let layout = emit_with(&headers, body_len, &mut frame, |body| {
        body[..payload.len()].copy_from_slice(&payload);
        body[payload.len()..].copy_from_slice(&pad);
    })
    .map_err(|e| anyhow!("{e}"))?;

    // Fields given explicitly are written as given; those that depend on them (the IPv4
    // checksum, the ICRC) are computed again unless given too.
    if let Some(t) = ov.ethertype {
        frame[layout.l3 - 2..layout.l3].copy_from_slice(&t.to_be_bytes());
    }
    if let Some(n) = ov.ip_length {
        match l3 {
            L3Repr::Ipv4(_) => {
                let mut ip = ipv4::Packet::new_unchecked(&mut frame[layout.l3..]);
                ip.set_total_len(n);
                ip.fill_checksum();
            }
            L3Repr::Ipv6(_) | L3Repr::Grh(_) => {
                ipv6::Packet::new_unchecked(&mut frame[layout.l3..]).set_payload_len(n)
            }
        }
    }
    if let Some(c) = ov.ip_checksum {
        ipv4::Packet::new_unchecked(&mut frame[layout.l3..]).set_checksum(c);
    }
    if let (Some(n), Some(at)) = (ov.udp_length, layout.udp) {
        udp::Datagram::new_unchecked(&mut frame[at..]).set_len(n);
    }
    let crc = match ov.icrc_wire {
        Some(w) => w,
        None => icrc_compute(l3.icrc_kind(), &frame[layout.l3..layout.icrc])
            .map_err(|_| anyhow!("cannot compute the ICRC"))?
            .to_le_bytes(),
    };
    frame[layout.icrc..layout.icrc + 4].copy_from_slice(&crc);
    frame.extend(p.bytes("eth_trailer_hex")?.unwrap_or_default());
    Ok(frame)
}

fn ipv6_repr(ip: &Obj<'_>, ov: &mut Overrides) -> Result<Ipv6Repr> {
    ov.ip_length = ip.uint("payload_length", 0xFFFF)?.map(|n| n as u16);
    Ok(Ipv6Repr {
        src: ip.parsed::<Ipv6Addr>("src")?,
        dst: ip.parsed::<Ipv6Addr>("dst")?,
        dscp: ip.req("dscp", 63)? as u8,
        ecn: ip.req("ecn", 3)? as u8,
        flow_label: ip.req("flow_label", 0xF_FFFF)? as u32,
        next_header: ip.req("next_header", 255)? as u8,
        hop_limit: ip.req("hop_limit", 255)? as u8,
    })
}

fn ext_headers(p: &Obj<'_>) -> Result<ExtHeaders> {
    let mut e = ExtHeaders::default();
    let u32max = u64::from(u32::MAX);
    if let Some(r) = p.obj("reth")? {
        e.reth = Some(RethRepr {
            va: r.req("va", u64::MAX)?,
            rkey: Rkey(r.req("rkey", u32max)? as u32),
            dma_len: r.req("dmalen", u32max)? as u32,
        });
    }
    if let Some(a) = p.obj("aeth")? {
        e.aeth = Some(AethRepr {
            syndrome: Syndrome::from_byte(a.req("syndrome", 255)? as u8),
            msn: Msn::new(a.req("msn", 0xFF_FFFF)? as u32),
        });
    }
    if let Some(a) = p.obj("atomiceth")? {
        e.atomic_eth = Some(AtomicEthRepr {
            va: a.req("va", u64::MAX)?,
            rkey: Rkey(a.req("rkey", u32max)? as u32),
            swap_add: a.req("swap_add", u64::MAX)?,
            compare: a.req("compare", u64::MAX)?,
        });
    }
    if let Some(a) = p.obj("atomicacketh")? {
        e.atomic_ack_eth = Some(AtomicAckEthRepr {
            orig_rem_data: a.req("orig_rem_data", u64::MAX)?,
        });
    }
    if let Some(i) = p.obj("immdt")? {
        e.immdt = Some(ImmDtRepr {
            imm: i.req("imm", u32max)? as u32,
        });
    }
    if let Some(i) = p.obj("ieth")? {
        e.ieth = Some(IethRepr {
            rkey: Rkey(i.req("rkey", u32max)? as u32),
        });
    }
    if let Some(d) = p.obj("deth")? {
        e.deth = Some(DethRepr {
            qkey: Qkey(d.req("qkey", u32max)? as u32),
            src_qp: Qpn::new(d.req("srcqp", 0xFF_FFFF)? as u32),
        });
    }
    if let Some(c) = p.obj("cnp")? {
        let mut reserved = [0u8; 16];
        if let Some(r) = c.bytes("reserved_hex")? {
            if r.len() != 16 {
                bail!("cnp.reserved_hex: expected 16 bytes, got {}", r.len());
            }
            reserved.copy_from_slice(&r);
        }
        e.cnp = Some(CnpRepr { reserved });
    }
    Ok(e)
}

/// The ICRC trailer if `icrc` or `icrc_wire_hex` is given (they must agree).
fn icrc_given(p: &Obj<'_>) -> Result<Option<[u8; 4]>> {
    let from_value = match p.string("icrc")? {
        Some(s) => {
            let v = u32::from_str_radix(s.trim_start_matches("0x"), 16)
                .map_err(|_| anyhow!("icrc: {s:?} is not a 32-bit hex value"))?;
            Some(v.to_le_bytes())
        }
        None => None,
    };
    let from_wire = match p.bytes("icrc_wire_hex")? {
        Some(b) => Some(
            <[u8; 4]>::try_from(b.as_slice())
                .map_err(|_| anyhow!("icrc_wire_hex: expected 4 bytes"))?,
        ),
        None => None,
    };
    match (from_value, from_wire) {
        (Some(a), Some(b)) if a != b => bail!("icrc and icrc_wire_hex disagree"),
        (a, b) => Ok(a.or(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::frame_from_line;

    /// An RC SEND ONLY with its derived fields left out (`fuzz/seeds/encode`).
    const SEND_ONLY: &str = r#"{"bth":{"ackreq":1,"becn":0,"destqp":5280088,"fecn":0,"migreq":0,"opcode":4,"pkey":65535,"psn":758920,"se":0,"tver":0},"eth":{"dst":"02:aa:bb:cc:dd:3e","src":"02:11:22:33:44:88","vlan":null},"ip":{"df":1,"dscp":26,"dst":"10.0.0.2","ecn":2,"id":1,"protocol":17,"src":"10.0.0.1","ttl":64,"version":4},"payload_hex":"","udp":{"checksum":0,"dport":4791,"sport":61951}}"#;

    fn with_name(name: &str) -> String {
        SEND_ONLY.replace(
            r#""opcode":4,"#,
            &format!(r#""opcode":4,"opcode_name":"{name}","#),
        )
    }

    #[test]
    fn a_mac_address_has_two_hex_digits_per_byte() {
        let dst = r#""dst":"02:aa:bb:cc:dd:3e""#;
        assert!(frame_from_line(&SEND_ONLY.replace(dst, r#""dst":"2-AA-bb-CC-dd-3E""#)).is_ok());
        // The encode fuzz target's find: "0dd" was read as 0xdd.
        for bad in ["02:aa:bb:cc:0dd:3e", "02:aa:bb:cc:+d:3e", "02:aa:bb:cc::3e"] {
            let line = SEND_ONLY.replace(dst, &format!(r#""dst":"{bad}""#));
            let err = format!("{:#}", frame_from_line(&line).unwrap_err());
            assert!(err.contains("eth.dst"), "{bad}: {err}");
        }
    }

    #[test]
    fn no_payload_on_an_opcode_that_carries_none() {
        // The encode fuzz target's find: an ACK with a payload was encoded, and decode
        // then refused the frame.
        let ack = SEND_ONLY
            .replace(r#""opcode":4"#, r#""opcode":17"#)
            .replace(
                r#""payload_hex":"""#,
                r#""aeth":{"msn":1,"syndrome":31},"payload_hex":"ce""#,
            );
        let err = format!("{:#}", frame_from_line(&ack).unwrap_err());
        assert!(err.contains("payload_hex"), "{err}");
        let empty = ack.replace(r#""payload_hex":"ce""#, r#""payload_hex":"""#);
        assert!(frame_from_line(&empty).unwrap().is_some());
    }

    #[test]
    fn an_opcode_name_must_agree_with_the_opcode() {
        assert!(frame_from_line(SEND_ONLY).unwrap().is_some());
        assert!(frame_from_line(&with_name("RC_SEND_ONLY"))
            .unwrap()
            .is_some());
        // The encode fuzz target's find: a mangled name beside a valid number was ignored.
        for name in ["RC_SEN,_ONLY", "RC_SEND_FIRST"] {
            let err = format!("{:#}", frame_from_line(&with_name(name)).unwrap_err());
            assert!(err.contains("bth.opcode_name"), "{name}: {err}");
        }
    }
}
