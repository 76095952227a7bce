//! The port's configuration commands (ABI 1.1): addresses and MTU, the GID table,
//! priority flow control, DCQCN for the port and per QP, and the counter sets. Each one
//! reads or changes the engine's `PortConfig` (or a QP's congestion state) and, like
//! every command, changes nothing when it fails.

use super::{status_of, FpState, Nic};
use crate::abi::counters::{port_counter_values, qp_counter_values};
use crate::abi::{
    self, CcArg, CmdEntry, CmdOp, CmdStatus, CounterScope, DcbArg, DecodeError, EtsArg, GidArg,
    PortArg, QpCcArg, QueryCountersArg,
};
use crate::hal::{Datapath, Hal};
use roce_core::engine::{DcbConfig, PortConfig};
use roce_core::fastpath::layout;
use roce_core::memory::Dma;
use roce_core::num::Qpn;
use zerocopy::little_endian::U32;

impl<
        H: Hal,
        const QPS: usize,
        const CQS: usize,
        const PDS: usize,
        const MRS: usize,
        const SQ: usize,
        const RQ: usize,
        const CQE: usize,
        const RD: usize,
    > Nic<H, QPS, CQS, PDS, MRS, SQ, RQ, CQE, RD>
{
    /// Executes one of the port's commands.
    pub(super) fn port_command(&mut self, op: CmdOp, e: &mut CmdEntry) -> CmdStatus {
        let cfg = *self.engine.config();
        // PFC thresholds must fit this NIC's receive buffer, not a default one.
        let rx_buffer = self.hal.datapath().rx_buffer_bytes();
        let fits = |dcb: DcbConfig| -> Result<PortConfig, DecodeError> {
            dcb.validate(rx_buffer).map_err(DecodeError)?;
            let mut new = cfg;
            new.dcb = dcb;
            Ok(new)
        };
        let changed = match op {
            CmdOp::QueryPort => {
                abi::set_payload(
                    e,
                    &PortArg {
                        mask: U32::new(PortArg::ALL),
                        mac: cfg.mac,
                        active_mtu: cfg.active_mtu as u8,
                        reserved: 0,
                    },
                );
                return CmdStatus::Ok;
            }
            CmdOp::QueryGid => {
                let Ok(index) = abi::payload::<GidArg>(e).table_index() else {
                    return CmdStatus::BadParam;
                };
                if usize::from(index) >= roce_core::engine::GID_TABLE_LEN {
                    return CmdStatus::BadParam;
                }
                abi::set_payload(e, &GidArg::from_entry(index, cfg.gids.get(index)));
                return CmdStatus::Ok;
            }
            CmdOp::QueryDcb => {
                abi::set_payload(e, &DcbArg::from_config(&cfg.dcb, rx_buffer));
                return CmdStatus::Ok;
            }
            CmdOp::QueryEts => {
                abi::set_payload(e, &EtsArg::from_config(&cfg.dcb.ets));
                return CmdStatus::Ok;
            }
            CmdOp::QueryCc => {
                abi::set_payload(e, &CcArg::from_config(&cfg.cc));
                return CmdStatus::Ok;
            }
            CmdOp::QueryQpCc => return self.query_qp_cc(e),
            CmdOp::ModifyQpCc => return self.modify_qp_cc(e),
            CmdOp::QueryCounters => return self.query_counters(e),
            CmdOp::ModifyPort => modify_port(&cfg, &abi::payload(e)),
            CmdOp::ModifyGid => modify_gid(&cfg, &abi::payload(e)),
            CmdOp::ModifyDcb => abi::payload::<DcbArg>(e).apply(&cfg.dcb).and_then(fits),
            CmdOp::ModifyEts => abi::payload::<EtsArg>(e)
                .to_config()
                .and_then(|ets| fits(DcbConfig { ets, ..cfg.dcb })),
            CmdOp::ModifyCc => abi::payload::<CcArg>(e).to_config().map(|cc| {
                let mut new = cfg;
                new.cc = cc;
                new
            }),
            _ => return CmdStatus::BadOpcode,
        };
        match changed {
            // The engine refuses to change what a connected QP uses (Busy).
            Ok(new) => match self.engine.set_config(new) {
                Ok(()) => {
                    // The fast path matches received frames against the port's MAC
                    // and its GID 0.
                    // and its DCB block (if it has one) sends and honours PFC so.
                    let (_, dp) = self.hal.split();
                    dp.set_dcb(&new.dcb, new.mac);
                    if let Some(fp) = dp.fastpath() {
                        fp.set_port(new.mac, new.gid());
                    }
                    CmdStatus::Ok
                }
                Err(err) => status_of(&err),
            },
            Err(_) => CmdStatus::BadParam,
        }
    }

    fn query_qp_cc(&mut self, e: &mut CmdEntry) -> CmdStatus {
        let qpn = Qpn::new(abi::payload::<QpCcArg>(e).qpn.get());
        let Some(info) = self.engine.qp_cc(qpn) else {
            return CmdStatus::BadHandle;
        };
        abi::set_payload(e, &QpCcArg::from_info(qpn, &info));
        CmdStatus::Ok
    }

    fn modify_qp_cc(&mut self, e: &mut CmdEntry) -> CmdStatus {
        let arg = abi::payload::<QpCcArg>(e);
        let Ok(rp) = arg.rp() else {
            return CmdStatus::BadParam;
        };
        let qpn = Qpn::new(arg.qpn.get());
        if let Err(err) = self.engine.set_qp_cc(qpn, rp) {
            return status_of(&err);
        }
        // Where the fast path has no pacer, the reaction point's is the firmware's: such
        // a QP leaves the fast path (and comes back when it is off again).
        self.fp_refresh(qpn);
        // Where it paces (docs/fastpath.md §2.5), a QP that stays on it takes the new
        // ECN marking (ECT(0) with the reaction point on: the header template and its
        // IPv4 checksum base) and its pacing entry as the engine restarted it.
        if H::FASTPATH_PACES && self.fp_of(qpn) != FpState::Off {
            if let Some(sctx) = self.engine.fastpath_send_ctx(qpn) {
                let b = layout::encode_sctx(&sctx);
                let pace = self.engine.fastpath_pace(qpn);
                if let Some(fp) = self.hal.datapath().fastpath() {
                    // The hardware's context with those bytes changed, as one write
                    // (its PSNs and counts are the hardware's: read back).
                    let mut c = fp.read_sctx(qpn);
                    for (i, (d, s)) in c.iter_mut().zip(b).enumerate() {
                        if matches!(i, 4..=5 | 30..) {
                            *d = s;
                        }
                    }
                    fp.write_sctx(qpn, 0, &c);
                    fp.set_pace(qpn, pace.as_ref());
                }
            }
        }
        CmdStatus::Ok
    }

    /// QUERY_COUNTERS: the wanted slice of a counter set, by DMA into host memory.
    fn query_counters(&mut self, e: &mut CmdEntry) -> CmdStatus {
        let arg = abi::payload::<QueryCountersArg>(e);
        let port;
        let qp;
        let set: &[u64] = match arg.counter_scope() {
            Ok(CounterScope::Port) => {
                // The port sent and received what its fast path handled on its own too
                // (rxe counts every packet; the engine sees only the rest). Its counters
                // are read now: a fast path that runs by itself (the SoC's) may have
                // carried a whole transfer without this firmware polling it once.
                let (_, dp) = self.hal.split();
                if let Some(fp) = dp.fastpath() {
                    [
                        self.counters.fp_ctx_cache_hits,
                        self.counters.fp_ctx_cache_misses,
                    ] = fp.ctx_hits_misses();
                    [
                        self.counters.fp_rx_out_of_seq,
                        self.counters.fp_rx_duplicates,
                    ] = fp.rx_answered();
                    super::set_fp_counters(&mut self.counters.fastpath, fp.counters());
                }
                let mut engine = *self.engine.counters();
                engine.sent_pkts += self.counters.fastpath.tx_frames;
                engine.rcvd_pkts += self.counters.fastpath.rx_handled;
                engine.retransmitted_pkts += self.counters.fastpath.tx_resent;
                engine.out_of_seq_request += self.counters.fp_rx_out_of_seq;
                engine.duplicate_request += self.counters.fp_rx_duplicates;
                port = port_counter_values(&engine, &self.counters);
                &port
            }
            Ok(CounterScope::Qp) => match self.engine.qp_cc(Qpn::new(arg.handle.get())) {
                Some(info) => {
                    qp = qp_counter_values(&info);
                    &qp
                }
                None => return CmdStatus::BadHandle,
            },
            Err(_) => return CmdStatus::BadParam,
        };
        let first = usize::from(arg.first.get());
        let end = first
            .saturating_add(usize::from(arg.count.get()))
            .min(set.len());
        let mut addr = arg.addr.get();
        for v in set.get(first..end).unwrap_or(&[]) {
            if self.hal.dma().write(addr, &v.to_le_bytes()).is_err() {
                self.counters.dma_errors += 1;
                return CmdStatus::BadParam;
            }
            addr = addr.wrapping_add(8);
        }
        e.out = U32::new(set.len() as u32);
        CmdStatus::Ok
    }
}

/// MODIFY_PORT: `cfg` with the fields the mask names changed.
fn modify_port(cfg: &PortConfig, arg: &PortArg) -> Result<PortConfig, DecodeError> {
    let mask = arg.mask.get();
    if mask & !PortArg::ALL != 0 {
        return Err(DecodeError("unknown port mask bits"));
    }
    let mut out = *cfg;
    if mask & PortArg::MAC != 0 {
        out.mac = arg.unicast_mac()?;
    }
    if mask & PortArg::MTU != 0 {
        out.active_mtu = arg.mtu()?;
    }
    Ok(out)
}

/// MODIFY_GID: `cfg` with the entry written or cleared.
fn modify_gid(cfg: &PortConfig, arg: &GidArg) -> Result<PortConfig, DecodeError> {
    let mut out = *cfg;
    out.gids
        .set(arg.table_index()?, arg.to_entry()?)
        .map_err(|_| DecodeError("GID index beyond the table"))?;
    Ok(out)
}
