//! The one-line-per-frame text summary of `roce decode`, in the spirit of tshark's.

use crate::json::Decoded;
use roce_core::wire::aeth::Syndrome;
use roce_core::wire::L3Repr;
use std::fmt::Write;

/// `   3  0.000012  10.0.0.1 -> 10.0.0.2  RoCEv2 RC_SEND_FIRST QP=0x45 PSN=1234 ...`;
/// a frame that did not decode gives its error name and detail.
pub fn line(index: usize, secs: f64, result: Result<&Decoded<'_>, (&str, String)>) -> String {
    let mut s = format!("{index:5} {secs:11.6}  ");
    let p = match result {
        Ok(p) => p,
        Err((name, detail)) => {
            let _ = write!(s, "[not decoded: {name}: {detail}]");
            return s;
        }
    };
    let h = &p.headers;
    let (src, dst, version) = match &h.l3 {
        L3Repr::Ipv4(ip) => (ip.src.to_string(), ip.dst.to_string(), "RoCEv2"),
        L3Repr::Ipv6(ip) => (ip.src.to_string(), ip.dst.to_string(), "RoCEv2"),
        L3Repr::Grh(g) => (g.src.to_string(), g.dst.to_string(), "RoCEv1"),
    };
    let b = &h.bth;
    let _ = write!(
        s,
        "{src} \u{2192} {dst}  {version} {} QP={:#x} PSN={}",
        b.opcode.name().unwrap_or("UNKNOWN"),
        b.dest_qp.value(),
        b.psn
    );
    for (on, name) in [
        (b.ack_req, "AckReq"),
        (b.se, "SE"),
        (b.becn, "BECN"),
        (b.fecn, "FECN"),
    ] {
        if on {
            let _ = write!(s, " {name}");
        }
    }
    let e = &h.ext;
    if let Some(r) = e.reth {
        let _ = write!(s, " VA={:#x} R_Key={:#x} len={}", r.va, r.rkey.0, r.dma_len);
    }
    if let Some(a) = e.aeth {
        let what = match a.syndrome {
            Syndrome::Ack(c) => format!("ACK credits={}", c.code()),
            Syndrome::RnrNak(t) => format!("RNR-NAK timer={}", t.code()),
            Syndrome::Nak(n) => format!("NAK {n:?}"),
            Syndrome::Reserved(b) => format!("reserved syndrome {b:#x}"),
        };
        let _ = write!(s, " {what} MSN={}", a.msn);
    }
    if let Some(a) = e.atomic_eth {
        let _ = write!(
            s,
            " VA={:#x} R_Key={:#x} swap/add={:#x} cmp={:#x}",
            a.va, a.rkey.0, a.swap_add, a.compare
        );
    }
    if let Some(a) = e.atomic_ack_eth {
        let _ = write!(s, " orig={:#x}", a.orig_rem_data);
    }
    if let Some(i) = e.immdt {
        let _ = write!(s, " imm={:#010x}", i.imm);
    }
    if let Some(i) = e.ieth {
        let _ = write!(s, " inv_R_Key={:#x}", i.rkey.0);
    }
    if let Some(d) = e.deth {
        let _ = write!(s, " Q_Key={:#x} srcQP={:#x}", d.qkey.0, d.src_qp.value());
    }
    let _ = write!(s, " payload={}", p.payload.len());
    if !p.pad.is_empty() {
        let _ = write!(s, "+{}pad", p.pad.len());
    }
    let _ = write!(s, " ICRC={:#010x}", p.icrc);
    s
}
