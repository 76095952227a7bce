//! The one-line-per-frame text of `roce decode`, in the spirit of tshark's summary:
//! `    3    0.000012  10.0.0.1 → 10.0.0.2  RoCEv2 RC_SEND_FIRST QP=0x45 PSN=1234 ...`;
//! a frame that did not decode gives its error name and detail.

use crate::decode::{Decoded, Failure};
use roce_core::wire::aeth::Syndrome;
use roce_core::wire::L3Repr;
use std::io::Write;
use std::time::Duration;

/// One line (with its newline) for frame `index`, `since_first` after the first frame.
pub fn line(
    out: &mut Vec<u8>,
    index: u64,
    since_first: Duration,
    result: &Result<Decoded<'_>, Failure>,
) {
    // Microseconds, rounded, as `{:11.6}` of the seconds would print them.
    let micros = (since_first.as_nanos() + 500) / 1000;
    let _ = write!(
        out,
        "{index:5} {:4}.{:06}  ",
        micros / 1_000_000,
        micros % 1_000_000
    );
    match result {
        Ok(p) => packet(out, p),
        Err(f) => {
            let _ = write!(out, "[not decoded: {}: {}]", f.name, f.detail);
        }
    }
    out.push(b'\n');
}

fn packet(out: &mut Vec<u8>, p: &Decoded<'_>) {
    let h = &p.headers;
    let _ = match &h.l3 {
        L3Repr::Ipv4(ip) => write!(out, "{} \u{2192} {}  RoCEv2", ip.src, ip.dst),
        L3Repr::Ipv6(ip) => write!(out, "{} \u{2192} {}  RoCEv2", ip.src, ip.dst),
        L3Repr::Grh(g) => write!(out, "{} \u{2192} {}  RoCEv1", g.src, g.dst),
    };
    let b = &h.bth;
    let _ = write!(
        out,
        " {} QP={:#x} PSN={}",
        b.opcode.name().unwrap_or("UNKNOWN"),
        b.dest_qp.value(),
        b.psn.value()
    );
    for (on, name) in [
        (b.ack_req, " AckReq"),
        (b.se, " SE"),
        (b.becn, " BECN"),
        (b.fecn, " FECN"),
    ] {
        if on {
            out.extend_from_slice(name.as_bytes());
        }
    }
    let e = &h.ext;
    if let Some(r) = e.reth {
        let _ = write!(
            out,
            " VA={:#x} R_Key={:#x} len={}",
            r.va, r.rkey.0, r.dma_len
        );
    }
    if let Some(a) = e.aeth {
        let _ = match a.syndrome {
            Syndrome::Ack(c) => write!(out, " ACK credits={}", c.code()),
            Syndrome::RnrNak(t) => write!(out, " RNR-NAK timer={}", t.code()),
            Syndrome::Nak(n) => write!(out, " NAK {n:?}"),
            Syndrome::Reserved(b) => write!(out, " reserved syndrome {b:#x}"),
        };
        let _ = write!(out, " MSN={}", a.msn.value());
    }
    if let Some(a) = e.atomic_eth {
        let _ = write!(
            out,
            " VA={:#x} R_Key={:#x} swap/add={:#x} cmp={:#x}",
            a.va, a.rkey.0, a.swap_add, a.compare
        );
    }
    if let Some(a) = e.atomic_ack_eth {
        let _ = write!(out, " orig={:#x}", a.orig_rem_data);
    }
    if let Some(i) = e.immdt {
        let _ = write!(out, " imm={:#010x}", i.imm);
    }
    if let Some(i) = e.ieth {
        let _ = write!(out, " inv_R_Key={:#x}", i.rkey.0);
    }
    if let Some(d) = e.deth {
        let _ = write!(out, " Q_Key={:#x} srcQP={:#x}", d.qkey.0, d.src_qp.value());
    }
    let _ = write!(out, " payload={}", p.payload.len());
    if !p.pad.is_empty() {
        let _ = write!(out, "+{}pad", p.pad.len());
    }
    let _ = write!(out, " ICRC={:#010x}", p.icrc);
}
