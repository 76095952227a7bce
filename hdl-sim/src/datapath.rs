//! Whole frames in, verdicts out: the RTL datapath as a function.

use std::path::PathBuf;

use crate::meta::{RxError, RxMeta};
use crate::sim::{DataWidth, RtlSim, Shaping, SimError};

/// Environment variable: when set to a directory, every [`RtlDatapath`]
/// writes an FST waveform there (`rtl-<width>-<n>.fst`).
pub const TRACE_DIR_ENV: &str = "ROCE_HDL_SIM_FST_DIR";

/// What the RTL made of one received frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxVerdict {
    /// the metadata record
    pub meta: RxMeta,
    /// the bytes the payload stream carried for this frame (empty when
    /// `meta.stream_len` is 0)
    pub payload: Vec<u8>,
}

impl RxVerdict {
    /// `None` for a good RoCE packet.
    pub fn error(&self) -> Option<RxError> {
        self.meta.error
    }

    pub fn is_ok(&self) -> bool {
        self.meta.error.is_none()
    }
}

/// The Verilated RX parser and TX ICRC inserter behind a frame-level API.
///
/// ```no_run
/// use roce_hdl_sim::{DataWidth, RtlDatapath};
/// let mut dp = RtlDatapath::new(DataWidth::W512)?;
/// # let frame = [0u8; 60];
/// let v = dp.rx(&frame)?;
/// println!("{:?} {} payload bytes", v.error(), v.payload.len());
/// # Ok::<(), roce_hdl_sim::SimError>(())
/// ```
#[derive(Debug)]
pub struct RtlDatapath {
    sim: RtlSim,
    /// cycles allowed per frame beyond its beat count before giving up
    slack: u64,
}

impl RtlDatapath {
    /// A datapath at `width`. Writes a waveform when [`TRACE_DIR_ENV`] is set.
    pub fn new(width: DataWidth) -> Result<RtlDatapath, SimError> {
        let sim = match std::env::var_os(TRACE_DIR_ENV) {
            Some(dir) => {
                use std::sync::atomic::{AtomicU64, Ordering};
                static N: AtomicU64 = AtomicU64::new(0);
                let n = N.fetch_add(1, Ordering::Relaxed);
                let path = PathBuf::from(dir).join(format!(
                    "rtl-{}-{}-{n}.fst",
                    width.bits(),
                    std::process::id()
                ));
                RtlSim::with_trace(width, &path)?
            }
            None => RtlSim::new(width)?,
        };
        Ok(RtlDatapath { sim, slack: 1000 })
    }

    /// A datapath that writes an FST waveform to `path`.
    pub fn with_trace(width: DataWidth, path: &std::path::Path) -> Result<RtlDatapath, SimError> {
        Ok(RtlDatapath {
            sim: RtlSim::with_trace(width, path)?,
            slack: 1000,
        })
    }

    pub fn width(&self) -> DataWidth {
        self.sim.width()
    }

    /// Random idle cycles at the inputs and back-pressure at the outputs.
    pub fn set_shaping(&mut self, shaping: Shaping) {
        self.sim.set_shaping(shaping);
    }

    /// The cycle-level simulator underneath.
    pub fn sim(&mut self) -> &mut RtlSim {
        &mut self.sim
    }

    /// Parses one frame (Ethernet, no FCS).
    pub fn rx(&mut self, frame: &[u8]) -> Result<RxVerdict, SimError> {
        Ok(self
            .rx_batch(&[frame])?
            .pop()
            .expect("one verdict per frame"))
    }

    /// Streams frames back to back (subject to the shaping) and returns one
    /// verdict per frame, in order.
    pub fn rx_batch(&mut self, frames: &[&[u8]]) -> Result<Vec<RxVerdict>, SimError> {
        let mut budget = self.slack;
        for f in frames {
            self.sim.push_rx_frame(f);
            budget += self.slack + self.sim.width().beats(f.len()) as u64;
        }
        let start = self.sim.cycle();
        let mut verdicts = Vec::with_capacity(frames.len());
        while verdicts.len() < frames.len() {
            let Some(meta) = self.sim.pop_rx_meta()? else {
                if self.sim.cycle() - start > budget {
                    return Err(SimError::Timeout {
                        cycles: budget,
                        waiting_for: "RX metadata record",
                    });
                }
                self.sim.tick();
                continue;
            };
            let meta = meta.value;
            let payload = if meta.stream_len > 0 {
                loop {
                    if let Some(p) = self.sim.pop_rx_payload() {
                        break p.value;
                    }
                    if self.sim.cycle() - start > budget {
                        return Err(SimError::Timeout {
                            cycles: budget,
                            waiting_for: "RX payload packet",
                        });
                    }
                    self.sim.tick();
                }
            } else {
                Vec::new()
            };
            verdicts.push(RxVerdict { meta, payload });
        }
        Ok(verdicts)
    }

    /// Appends the ICRC to a frame built without it.
    pub fn tx(&mut self, frame: &[u8]) -> Result<Vec<u8>, SimError> {
        Ok(self
            .tx_batch(&[frame])?
            .pop()
            .expect("one frame out per frame in"))
    }

    /// Streams frames through the TX ICRC inserter; one output frame each.
    pub fn tx_batch(&mut self, frames: &[&[u8]]) -> Result<Vec<Vec<u8>>, SimError> {
        let mut budget = self.slack;
        for f in frames {
            self.sim.push_tx_frame(f);
            budget += self.slack + 2 * self.sim.width().beats(f.len()) as u64;
        }
        let start = self.sim.cycle();
        let mut out = Vec::with_capacity(frames.len());
        while out.len() < frames.len() {
            match self.sim.pop_tx_frame() {
                Some(f) => out.push(f.value),
                None => {
                    if self.sim.cycle() - start > budget {
                        return Err(SimError::Timeout {
                            cycles: budget,
                            waiting_for: "TX frame",
                        });
                    }
                    self.sim.tick();
                }
            }
        }
        Ok(out)
    }
}

impl RxVerdict {
    /// The RTL's metadata as roce-core's plain headers (None for a frame it rejected),
    /// so software that prints or checks headers treats both decoders alike.
    pub fn headers(&self) -> Option<roce_core::wire::Headers> {
        use crate::meta::L3Kind;
        use roce_core::num::{Msn, Psn, Qkey, Qpn, Rkey};
        use roce_core::wire::{aeth, atomic, bth, cnp, deth, ethernet, imm, ipv4, ipv6, reth, udp};
        use roce_core::wire::{ExtHeaders, Headers, L3Repr, Opcode};
        let m = &self.meta;
        if m.error.is_some() {
            return None;
        }
        let ip = &m.ip;
        let l3 = match m.l3_kind {
            L3Kind::Ipv4 => L3Repr::Ipv4(ipv4::Ipv4Repr {
                src: ip.src_v4(),
                dst: ip.dst_v4(),
                dscp: ip.dscp,
                ecn: ip.ecn,
                ident: ip.id,
                dont_frag: ip.flags & 0b010 != 0,
                more_frags: ip.flags & 0b001 != 0,
                frag_offset: ip.frag_offset,
                ttl: ip.ttl,
                protocol: ip.protocol,
            }),
            L3Kind::Ipv6 | L3Kind::Grh => {
                let v6 = ipv6::Ipv6Repr {
                    src: ip.src_v6(),
                    dst: ip.dst_v6(),
                    dscp: ip.dscp,
                    ecn: ip.ecn,
                    flow_label: ip.flow_label,
                    next_header: ip.protocol,
                    hop_limit: ip.ttl,
                };
                if m.l3_kind == L3Kind::Grh {
                    L3Repr::Grh(v6)
                } else {
                    L3Repr::Ipv6(v6)
                }
            }
            L3Kind::None => return None,
        };
        let vlan = m.vlan.map(|t| ethernet::VlanRepr {
            pcp: t.pcp,
            dei: t.dei,
            vid: t.vid,
            ethertype: m.ethertype,
        });
        let b = &m.bth;
        let e = &m.ext;
        Some(Headers {
            eth: ethernet::EthernetRepr {
                dst: ethernet::MacAddr(m.eth_dst),
                src: ethernet::MacAddr(m.eth_src),
                ethertype: if vlan.is_some() {
                    ethernet::ETHERTYPE_VLAN
                } else {
                    m.ethertype
                },
            },
            vlan,
            l3,
            udp: m.udp.map(|u| udp::UdpRepr {
                src_port: u.sport,
                dst_port: u.dport,
                checksum: u.checksum,
            }),
            bth: bth::BthRepr {
                opcode: Opcode(b.opcode),
                se: b.se,
                migreq: b.migreq,
                pad_count: b.padcnt,
                tver: b.tver,
                pkey: b.pkey,
                fecn: b.fecn,
                becn: b.becn,
                resv6: b.resv6,
                dest_qp: Qpn::new(b.destqp),
                ack_req: b.ackreq,
                resv7: b.resv7,
                psn: Psn::new(b.psn),
            },
            ext: ExtHeaders {
                reth: e.reth.map(|r| reth::RethRepr {
                    va: r.va,
                    rkey: Rkey(r.rkey),
                    dma_len: r.dmalen,
                }),
                aeth: e.aeth.map(|a| aeth::AethRepr {
                    syndrome: aeth::Syndrome::from_byte(a.syndrome),
                    msn: Msn::new(a.msn),
                }),
                atomic_eth: e.atomiceth.map(|a| atomic::AtomicEthRepr {
                    va: a.va,
                    rkey: Rkey(a.rkey),
                    swap_add: a.swap_add,
                    compare: a.compare,
                }),
                atomic_ack_eth: e
                    .atomicacketh
                    .map(|v| atomic::AtomicAckEthRepr { orig_rem_data: v }),
                immdt: e.immdt.map(|v| imm::ImmDtRepr { imm: v }),
                ieth: e.ieth.map(|v| imm::IethRepr { rkey: Rkey(v) }),
                deth: e.deth.map(|d| deth::DethRepr {
                    qkey: Qkey(d.qkey),
                    src_qp: Qpn::new(d.srcqp),
                }),
                cnp: e.cnp.map(|r| cnp::CnpRepr { reserved: r }),
            },
        })
    }
}
