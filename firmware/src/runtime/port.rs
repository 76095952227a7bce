//! The port's configuration commands (ABI 1.1): addresses and MTU, the GID table,
//! priority flow control, DCQCN for the port and per QP, and the counter sets. Each one
//! reads or changes the engine's `PortConfig` (or a QP's congestion state) and, like
//! every command, changes nothing when it fails.

use super::{status_of, Nic};
use crate::abi::counters::{port_counter_values, qp_counter_values};
use crate::abi::{
    self, CcArg, CmdEntry, CmdOp, CmdStatus, CounterScope, DcbArg, GidArg, PortArg, QpCcArg,
    QueryCountersArg,
};
use crate::hal::Hal;
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
        let mut cfg = *self.engine.config();
        match op {
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
            }
            CmdOp::ModifyPort => {
                let arg = abi::payload::<PortArg>(e);
                let mask = arg.mask.get();
                if mask & !PortArg::ALL != 0 {
                    return CmdStatus::BadParam;
                }
                if mask & PortArg::MAC != 0 {
                    let Ok(mac) = arg.unicast_mac() else {
                        return CmdStatus::BadParam;
                    };
                    cfg.mac = mac;
                }
                if mask & PortArg::MTU != 0 {
                    let Ok(mtu) = arg.mtu() else {
                        return CmdStatus::BadParam;
                    };
                    cfg.active_mtu = mtu;
                }
                self.engine.set_config(cfg);
            }
            CmdOp::QueryGid => {
                let Ok(index) = abi::payload::<GidArg>(e).table_index() else {
                    return CmdStatus::BadParam;
                };
                if usize::from(index) >= roce_core::engine::GID_TABLE_LEN {
                    return CmdStatus::BadParam;
                }
                abi::set_payload(e, &GidArg::from_entry(index, cfg.gids.get(index)));
            }
            CmdOp::ModifyGid => {
                let arg = abi::payload::<GidArg>(e);
                let (Ok(index), Ok(entry)) = (arg.table_index(), arg.to_entry()) else {
                    return CmdStatus::BadParam;
                };
                if cfg.gids.set(index, entry).is_err() {
                    return CmdStatus::BadParam;
                }
                self.engine.set_config(cfg);
            }
            CmdOp::QueryDcb => abi::set_payload(e, &DcbArg::from_config(&cfg.dcb)),
            CmdOp::ModifyDcb => {
                let Ok(dcb) = abi::payload::<DcbArg>(e).apply(&cfg.dcb) else {
                    return CmdStatus::BadParam;
                };
                cfg.dcb = dcb;
                self.engine.set_config(cfg);
            }
            CmdOp::QueryCc => abi::set_payload(e, &CcArg::from_config(&cfg.cc)),
            CmdOp::ModifyCc => {
                let Ok(cc) = abi::payload::<CcArg>(e).to_config() else {
                    return CmdStatus::BadParam;
                };
                cfg.cc = cc;
                self.engine.set_config(cfg);
            }
            CmdOp::QueryQpCc => {
                let qpn = Qpn::new(abi::payload::<QpCcArg>(e).qpn.get());
                let Some(info) = self.engine.qp_cc(qpn) else {
                    return CmdStatus::BadHandle;
                };
                abi::set_payload(e, &QpCcArg::from_info(qpn, &info));
            }
            CmdOp::ModifyQpCc => {
                let arg = abi::payload::<QpCcArg>(e);
                let Ok(rp) = arg.rp() else {
                    return CmdStatus::BadParam;
                };
                if let Err(err) = self.engine.set_qp_cc(Qpn::new(arg.qpn.get()), rp) {
                    return status_of(&err);
                }
            }
            CmdOp::QueryCounters => return self.query_counters(e),
            _ => return CmdStatus::BadOpcode,
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
                port = port_counter_values(self.engine.counters(), &self.counters);
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
