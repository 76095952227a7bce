//! The Verilated RX datapath (`hdl-sim/`) as a [`Decoder`]: `roce decode --datapath rtl`.

use crate::decode::{Decoded, Decoder, Failure};
use anyhow::anyhow;
use roce_hdl_sim::{DataWidth, RtlDatapath, RxVerdict};
use std::path::Path;

/// The RTL RX datapath on a 512-bit bus, optionally writing an FST waveform.
pub struct Rtl {
    dp: RtlDatapath,
    verdict: Option<RxVerdict>,
}

impl Rtl {
    pub fn new(waves: Option<&Path>) -> anyhow::Result<Self> {
        let width = DataWidth::W512;
        let dp = match waves {
            Some(w) => RtlDatapath::with_trace(width, w),
            None => RtlDatapath::new(width),
        };
        Ok(Self {
            dp: dp.map_err(|e| anyhow!("the RTL datapath: {e}"))?,
            verdict: None,
        })
    }
}

impl Decoder for Rtl {
    fn decode<'a>(&'a mut self, frame: &'a [u8]) -> anyhow::Result<Result<Decoded<'a>, Failure>> {
        let v = self
            .dp
            .rx(frame)
            .map_err(|e| anyhow!("the RTL datapath: {e}"))?;
        let v = self.verdict.insert(v);
        Ok(verdict(v, frame))
    }
}

/// What the RTL made of a frame, in the decoder's terms.
fn verdict<'a>(v: &'a RxVerdict, frame: &'a [u8]) -> Result<Decoded<'a>, Failure> {
    if let Some(e) = v.error() {
        return Err(Failure {
            name: e.name(),
            detail: format!("the RTL datapath reports {}", e.name()),
        });
    }
    let m = &v.meta;
    let headers = v.headers().ok_or(Failure {
        name: "unsupported_ethertype",
        detail: "no network header".into(),
    })?;
    let trailer = frame.len().saturating_sub(m.trailer_len as usize);
    Ok(Decoded {
        headers,
        ip_length: m.ip.length,
        ip_checksum: m.ip.checksum,
        udp_length: m.udp.map_or(0, |u| u.length),
        payload: &v.payload,
        pad: m.pad_bytes(),
        icrc: m.icrc,
        trailer: frame.get(trailer..).unwrap_or(&[]),
    })
}
