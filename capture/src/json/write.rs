//! `roce decode --json` lines, written straight into a byte buffer.
//!
//! The bytes are those `serde_json` gives for the same object (compact, keys in sorted
//! order, which is how `serde_json::Map` orders them): the interface of `packet-json.md`
//! predates this writer and is kept byte for byte. Writing directly rather than through a
//! `serde_json::Value` is what makes `roce decode --json` several times faster: no map of
//! allocated keys per frame, and hex payloads written without an escaping pass.

use crate::decode::{Decoded, Failure};
use roce_core::wire::L3Repr;
use std::io::Write as _;

/// One line (with its newline) for frame `index`.
pub fn line(out: &mut Vec<u8>, index: u64, result: &Result<Decoded<'_>, Failure>) {
    let mut top = Object::open(out);
    match result {
        Ok(d) => {
            top.uint("index", index);
            top.raw("ok", "true");
            packet(top.object("packet"), d);
        }
        Err(f) => {
            // serde_json's escaping for the free text.
            top.key("detail");
            serde_json::to_writer(&mut *top.out, &f.detail).expect("writing to a Vec");
            top.string("error", f.name);
            top.uint("index", index);
            top.raw("ok", "false");
        }
    }
    top.close();
    out.push(b'\n');
}

/// The packet object; keys in sorted order.
fn packet(mut o: Object<'_>, d: &Decoded<'_>) {
    let h = &d.headers;
    let e = &h.ext;
    if let Some(a) = e.aeth {
        let mut x = o.object("aeth");
        x.uint("msn", a.msn.value().into());
        x.uint("syndrome", a.syndrome.to_byte().into());
        x.close();
    }
    if let Some(a) = e.atomic_ack_eth {
        let mut x = o.object("atomicacketh");
        x.uint("orig_rem_data", a.orig_rem_data);
        x.close();
    }
    if let Some(a) = e.atomic_eth {
        let mut x = o.object("atomiceth");
        x.uint("compare", a.compare);
        x.uint("rkey", a.rkey.0.into());
        x.uint("swap_add", a.swap_add);
        x.uint("va", a.va);
        x.close();
    }
    let b = &h.bth;
    let mut x = o.object("bth");
    x.uint("ackreq", b.ack_req.into());
    x.uint("becn", b.becn.into());
    x.uint("destqp", b.dest_qp.value().into());
    x.uint("fecn", b.fecn.into());
    x.uint("migreq", b.migreq.into());
    x.uint("opcode", b.opcode.0.into());
    x.string("opcode_name", b.opcode.name().unwrap_or("UNKNOWN"));
    x.uint("padcnt", b.pad_count.into());
    x.uint("pkey", b.pkey.into());
    x.uint("psn", b.psn.value().into());
    x.uint("resv6", b.resv6.into());
    x.uint("resv7", b.resv7.into());
    x.uint("se", b.se.into());
    x.uint("tver", b.tver.into());
    x.close();
    if let Some(c) = e.cnp {
        let mut x = o.object("cnp");
        x.hex("reserved_hex", &c.reserved);
        x.close();
    }
    if let Some(dt) = e.deth {
        let mut x = o.object("deth");
        x.uint("qkey", dt.qkey.0.into());
        x.uint("srcqp", dt.src_qp.value().into());
        x.close();
    }
    let mut x = o.object("eth");
    x.display("dst", &h.eth.dst);
    x.uint("ethertype", h.l3.ethertype().into());
    x.display("src", &h.eth.src);
    match h.vlan {
        Some(v) => {
            let mut t = x.object("vlan");
            t.uint("dei", v.dei.into());
            t.uint("pcp", v.pcp.into());
            t.uint("vid", v.vid.into());
            t.close();
        }
        None => x.raw("vlan", "null"),
    }
    x.close();
    o.hex("eth_trailer_hex", d.trailer);
    if let L3Repr::Grh(g) = &h.l3 {
        ipv6(o.object("grh"), g, d.ip_length);
    }
    let mut icrc = [0u8; 10];
    let _ = write!(&mut icrc[..], "{:#010x}", d.icrc);
    o.string(
        "icrc",
        std::str::from_utf8(&icrc).expect("hex digits are ASCII"),
    );
    o.hex("icrc_wire_hex", &d.icrc.to_le_bytes());
    if let Some(i) = e.ieth {
        let mut x = o.object("ieth");
        x.uint("rkey", i.rkey.0.into());
        x.close();
    }
    if let Some(i) = e.immdt {
        let mut x = o.object("immdt");
        x.uint("imm", i.imm.into());
        x.close();
    }
    match &h.l3 {
        L3Repr::Ipv4(ip) => {
            let mut x = o.object("ip");
            x.uint("df", ip.dont_frag.into());
            x.uint("dscp", ip.dscp.into());
            x.display("dst", &ip.dst);
            x.uint("ecn", ip.ecn.into());
            x.uint("header_checksum", d.ip_checksum.into());
            x.uint("id", ip.ident.into());
            x.uint("protocol", ip.protocol.into());
            x.display("src", &ip.src);
            x.uint("total_length", d.ip_length.into());
            x.uint("ttl", ip.ttl.into());
            x.uint("version", 4);
            x.close();
        }
        L3Repr::Ipv6(ip) => ipv6(o.object("ip"), ip, d.ip_length),
        L3Repr::Grh(_) => {}
    }
    o.hex("pad_hex", d.pad);
    o.hex("payload_hex", d.payload);
    o.uint("payload_len", d.payload.len() as u64);
    if let Some(r) = e.reth {
        let mut x = o.object("reth");
        x.uint("dmalen", r.dma_len.into());
        x.uint("rkey", r.rkey.0.into());
        x.uint("va", r.va);
        x.close();
    }
    if let Some(u) = h.udp {
        let mut x = o.object("udp");
        x.uint("checksum", u.checksum.into());
        x.uint("dport", u.dst_port.into());
        x.uint("length", d.udp_length.into());
        x.uint("sport", u.src_port.into());
        x.close();
    }
    o.close();
}

/// The IPv6 shape, for an IPv6 header or a RoCEv1 GRH.
fn ipv6(mut x: Object<'_>, ip: &roce_core::wire::ipv6::Ipv6Repr, length: u16) {
    x.uint("dscp", ip.dscp.into());
    x.display("dst", &ip.dst);
    x.uint("ecn", ip.ecn.into());
    x.uint("flow_label", ip.flow_label.into());
    x.uint("hop_limit", ip.hop_limit.into());
    x.uint("next_header", ip.next_header.into());
    x.uint("payload_length", length.into());
    x.display("src", &ip.src);
    x.uint("version", 6);
    x.close();
}

/// A JSON object being written. Keys must come in sorted order (checked in debug builds);
/// values other than free text need no escaping (numbers, hex, addresses, names).
struct Object<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    #[cfg(debug_assertions)]
    last: &'static str,
}

impl<'a> Object<'a> {
    fn open(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Self {
            out,
            first: true,
            #[cfg(debug_assertions)]
            last: "",
        }
    }

    fn key(&mut self, k: &'static str) {
        #[cfg(debug_assertions)]
        {
            debug_assert!(self.first || self.last < k, "{k} after {}", self.last);
            self.last = k;
        }
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(k.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    fn uint(&mut self, k: &'static str, v: u64) {
        self.key(k);
        self.out
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }

    /// A literal: `true`, `false`, `null`.
    fn raw(&mut self, k: &'static str, v: &str) {
        self.key(k);
        self.out.extend_from_slice(v.as_bytes());
    }

    /// A string that needs no escaping.
    fn string(&mut self, k: &'static str, v: &str) {
        debug_assert!(!v.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20));
        self.key(k);
        self.out.push(b'"');
        self.out.extend_from_slice(v.as_bytes());
        self.out.push(b'"');
    }

    /// A string in its `Display` form (addresses), which needs no escaping.
    fn display(&mut self, k: &'static str, v: &impl std::fmt::Display) {
        self.key(k);
        self.out.push(b'"');
        let _ = write!(self.out, "{v}");
        self.out.push(b'"');
    }

    fn hex(&mut self, k: &'static str, bytes: &[u8]) {
        self.key(k);
        self.out.push(b'"');
        crate::hex::push(self.out, bytes);
        self.out.push(b'"');
    }

    fn object(&mut self, k: &'static str) -> Object<'_> {
        self.key(k);
        Object::open(self.out)
    }

    fn close(self) {
        self.out.push(b'}');
    }
}
