//! The port's verbs (ABI 1.1): its addresses and MTU, the GID table, priority flow
//! control, DCQCN for the port and per QP, and the counters. libibverbs reads most of
//! these (`ibv_query_port`, `ibv_query_gid_ex`, `rdma statistic`) and leaves setting
//! them to the kernel and the NIC's tools; here the driver sets them through the same
//! command queue.

use crate::error::Error;
use crate::verbs::{Context, Ctx, QueuePair, Result};
use roce_abi::counters::{port_counter_values, port_counters_from};
use roce_abi::{
    self as abi, reg, CcArg, CmdEntry, CmdOp, CounterScope, DcbArg, EtsArg, GidArg, PortArg,
    QpCcArg, QueryCountersArg, RuntimeCounters, PORT_COUNTERS, QP_COUNTERS,
};
use roce_core::cc::{CcConfig, QpCcInfo};
use roce_core::dcb::EtsConfig;
use roce_core::engine::{DcbConfig, GidEntry, GidType};
use roce_core::num::Qpn;
use roce_core::transport::{Counters, Mtu};
use zerocopy::little_endian::{U16, U32, U64};

/// The port's attributes (`struct ibv_port_attr`, the parts this NIC has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortAttr {
    /// The port's Ethernet address.
    pub mac: [u8; 6],
    /// The largest path MTU a QP may use.
    pub active_mtu: Mtu,
    /// Entries in the GID table.
    pub gid_tbl_len: u16,
}

/// The port's counters: the engine's (Linux rxe's names, mlx5's for congestion control)
/// and the firmware runtime's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    pub engine: Counters,
    pub runtime: RuntimeCounters,
}

impl PortCounters {
    /// Every counter with its name, in the ABI's order (`rdma statistic`'s view).
    pub fn named(&self) -> impl Iterator<Item = (&'static str, u64)> {
        PORT_COUNTERS
            .iter()
            .copied()
            .zip(port_counter_values(&self.engine, &self.runtime))
    }
}

impl core::ops::AddAssign for PortCounters {
    /// Counter by counter (totals over several NICs).
    fn add_assign(&mut self, other: Self) {
        let a = port_counter_values(&self.engine, &self.runtime);
        let b = port_counter_values(&other.engine, &other.runtime);
        let sum: Vec<u64> = a.iter().zip(b).map(|(x, y)| x + y).collect();
        (self.engine, self.runtime) = port_counters_from(&sum);
    }
}

impl Ctx {
    /// Runs a command whose payload is `arg`; returns the entry the device answered.
    fn exec_arg<T: zerocopy::IntoBytes + zerocopy::Immutable>(
        &self,
        op: CmdOp,
        arg: &T,
    ) -> Result<CmdEntry> {
        let mut e = CmdEntry::default();
        abi::set_payload(&mut e, arg);
        self.exec(op, &mut e)?;
        Ok(e)
    }

    /// QUERY_COUNTERS of a whole set, into a buffer in host memory.
    fn query_counter_set(&self, scope: CounterScope, handle: u32, len: usize) -> Result<Vec<u64>> {
        let mem = self.dev.memory();
        let bytes = 8 * len;
        let addr = mem.alloc(bytes, 8);
        let arg = QueryCountersArg {
            scope: scope as u8,
            handle: U32::new(handle),
            first: U16::new(0),
            count: U16::new(len as u16),
            addr: U64::new(addr),
            ..QueryCountersArg::default()
        };
        let result = self.exec_arg(CmdOp::QueryCounters, &arg).and_then(|e| {
            let mut raw = vec![0u8; bytes];
            mem.read(addr, &mut raw)
                .map_err(|e| Error::Dma { addr: e.addr })?;
            // A device with fewer counters than this driver knows leaves the rest zero.
            let have = (e.out.get() as usize).min(len);
            Ok(raw
                .chunks_exact(8)
                .take(have)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect())
        });
        mem.free(addr, bytes);
        result
    }
}

impl Context {
    /// `ibv_query_port`.
    pub fn query_port(&self) -> Result<PortAttr> {
        let e = self.ctx.exec_arg(CmdOp::QueryPort, &PortArg::default())?;
        let p: PortArg = abi::payload(&e);
        Ok(PortAttr {
            mac: p.mac,
            active_mtu: p.mtu().map_err(|e| Error::BadResponse(e.0))?,
            gid_tbl_len: self.query_device().gid_tbl_len.get().max(1),
        })
    }

    /// Gives the port another Ethernet address (a unicast one). QPs already connected
    /// send from it at once; their peers must learn it as they would an address change.
    pub fn set_port_mac(&self, mac: [u8; 6]) -> Result<()> {
        let arg = PortArg {
            mask: U32::new(PortArg::MAC),
            mac,
            ..PortArg::default()
        };
        self.ctx.exec_arg(CmdOp::ModifyPort, &arg)?;
        self.update_attr(|a| a.mac = mac);
        Ok(())
    }

    /// Sets the port's active MTU: the largest path MTU `modify_qp` accepts from now on.
    pub fn set_active_mtu(&self, mtu: Mtu) -> Result<()> {
        let arg = PortArg {
            mask: U32::new(PortArg::MTU),
            active_mtu: mtu as u8,
            ..PortArg::default()
        };
        self.ctx.exec_arg(CmdOp::ModifyPort, &arg)?;
        self.update_attr(|a| a.active_mtu = mtu as u8);
        Ok(())
    }

    /// `ibv_query_gid_ex`: the GID table entry at `index` (`None`: empty).
    pub fn query_gid(&self, index: u8) -> Result<Option<GidEntry>> {
        let arg = GidArg {
            index: U16::new(u16::from(index)),
            ..GidArg::default()
        };
        let e = self.ctx.exec_arg(CmdOp::QueryGid, &arg)?;
        abi::payload::<GidArg>(&e)
            .to_entry()
            .map_err(|e| Error::BadResponse(e.0))
    }

    /// Writes (or, with `None`, clears) the GID table entry at `index`. A QP whose
    /// address vector names an entry that is gone sends nothing until it is modified.
    /// A RoCEv1 entry ([`GidEntry::roce_v1`]) makes the QPs sending from it speak
    /// RoCEv1.
    pub fn set_gid(&self, index: u8, entry: Option<GidEntry>) -> Result<()> {
        let v1 = entry.is_some_and(|e| e.gid_type == GidType::Roce);
        if v1 && abi::Version(self.ctx.dev.read_reg(reg::VERSION)).minor() < 4 {
            return Err(Error::InvalidArgument(
                "set_gid: the device's ABI is older than 1.4 (no RoCEv1 entries)",
            ));
        }
        self.ctx
            .exec_arg(CmdOp::ModifyGid, &GidArg::from_entry(index, entry.as_ref()))?;
        if index == 0 {
            self.update_attr(|a| a.gid = entry.map_or([0; 16], |e| e.gid));
        }
        Ok(())
    }

    /// The device's ABI minor version.
    fn abi_minor(&self) -> u16 {
        abi::Version(self.ctx.dev.read_reg(reg::VERSION)).minor()
    }

    fn query_dcb_arg(&self) -> Result<DcbArg> {
        let e = self.ctx.exec_arg(CmdOp::QueryDcb, &DcbArg::default())?;
        Ok(abi::payload::<DcbArg>(&e))
    }

    /// The port's Data Center Bridging settings (QUERY_DCB; on an ABI 1.6 NIC also
    /// QUERY_ETS, for the priority assignment table).
    pub fn query_dcb(&self) -> Result<DcbConfig> {
        let mut dcb = self
            .query_dcb_arg()?
            .apply(&DcbConfig::default())
            .map_err(|e| Error::BadResponse(e.0))?;
        if self.abi_minor() >= 6 {
            dcb.ets = self.query_ets()?;
        }
        Ok(dcb)
    }

    /// Bytes of the NIC's receive buffer that the PFC thresholds divide (QUERY_DCB's
    /// `rx_buffer`, ABI 1.5): XOFF must not be above it, and what is left above XOFF is
    /// a lossless priority's headroom. Not every NIC has the same: the SoC's is 16 KiB,
    /// the software models' and the RTL DCB block's 64 KiB.
    pub fn dcb_rx_buffer(&self) -> Result<u32> {
        if self.abi_minor() < 5 {
            return Err(Error::InvalidArgument(
                "dcb_rx_buffer: the device's ABI is older than 1.5 (no receive buffer size)",
            ));
        }
        Ok(self.query_dcb_arg()?.rx_buffer.get())
    }

    /// The port's transmission selection (QUERY_ETS, ABI 1.6): the priority assignment
    /// table, strict classes and shares.
    pub fn query_ets(&self) -> Result<EtsConfig> {
        if self.abi_minor() < 6 {
            return Err(Error::InvalidArgument(
                "query_ets: the device's ABI is older than 1.6 (no QUERY_ETS)",
            ));
        }
        let e = self.ctx.exec_arg(CmdOp::QueryEts, &EtsArg::default())?;
        abi::payload::<EtsArg>(&e)
            .to_config()
            .map_err(|e| Error::BadResponse(e.0))
    }

    /// Sets the port's whole transmission selection (MODIFY_ETS, ABI 1.6), the
    /// priority assignment table included: several priorities may share a traffic
    /// class. Refused (`BadParam`, nothing changed) when it breaks 802.1Qaz's rules.
    pub fn set_ets(&self, ets: &EtsConfig) -> Result<()> {
        if self.abi_minor() < 6 {
            return Err(Error::InvalidArgument(
                "set_ets: the device's ABI is older than 1.6 (no MODIFY_ETS)",
            ));
        }
        self.ctx
            .exec_arg(CmdOp::ModifyEts, &EtsArg::from_config(ets))
            .map(|_| ())
    }

    /// Sets the port's whole Data Center Bridging configuration at once (as DCBX
    /// hands it over): PFC per priority, ETS, the PCP and DSCP to priority maps (ABI
    /// 1.3), the PFC thresholds and the priority-to-PCP egress map (1.5; a 1.3 or 1.4
    /// NIC is sent the 1.3 fields only, an older one refuses the mask bits it does not
    /// know, `BadParam`) and the priority assignment table (1.6, MODIFY_ETS). Refused
    /// (and nothing changed) when a map entry is above 7, the ETS shares break
    /// 802.1Qaz's rules, or the thresholds do not fit the NIC's receive buffer
    /// ([`Context::dcb_rx_buffer`]). Before 1.6 the NIC's traffic classes are its
    /// priorities, so several priorities in one class are refused here.
    ///
    /// On 1.6 it takes two commands: MODIFY_ETS (the table with the shares), then
    /// MODIFY_DCB (everything, the same shares included); if the NIC refuses the
    /// second, the ETS it had is put back, so a refusal still changes nothing.
    pub fn set_dcb(&self, dcb: &DcbConfig) -> Result<()> {
        let minor = self.abi_minor();
        let mut arg = DcbArg::from_config(dcb, 0);
        if minor < 5 {
            arg.mask = U32::new(arg.mask.get() & !(DcbArg::PFC_THRESHOLDS | DcbArg::PCP_EGRESS));
        }
        if minor < 6 {
            if !dcb.ets.one_class_per_priority() {
                return Err(Error::InvalidArgument(
                    "set_dcb: the device's ABI is older than 1.6 (one priority per traffic class, no MODIFY_ETS)",
                ));
            }
            return self.ctx.exec_arg(CmdOp::ModifyDcb, &arg).map(|_| ());
        }
        let old = self.query_ets()?;
        self.set_ets(&dcb.ets)?;
        self.ctx
            .exec_arg(CmdOp::ModifyDcb, &arg)
            .map(|_| ())
            .inspect_err(|_| {
                // Best effort: the ETS the NIC ran a moment ago is valid there.
                let _ = self.set_ets(&old);
            })
    }

    /// Turns PFC on for the priorities whose bits are set (bit `p` for priority `p`) and
    /// off for the others.
    pub fn set_pfc(&self, priorities: u8) -> Result<()> {
        let arg = DcbArg {
            mask: U32::new(DcbArg::PFC),
            pfc_enable: priorities,
            ..DcbArg::default()
        };
        self.ctx.exec_arg(CmdOp::ModifyDcb, &arg).map(|_| ())
    }

    /// The port's congestion control (DCQCN) settings.
    pub fn query_cc(&self) -> Result<CcConfig> {
        let e = self.ctx.exec_arg(CmdOp::QueryCc, &CcArg::default())?;
        abi::payload::<CcArg>(&e)
            .to_config()
            .map_err(|e| Error::BadResponse(e.0))
    }

    /// Sets the port's congestion control: the notification point, the reaction point
    /// for QPs created from now on, and DCQCN's parameters for every QP.
    pub fn set_cc(&self, cc: &CcConfig) -> Result<()> {
        self.ctx
            .exec_arg(CmdOp::ModifyCc, &CcArg::from_config(cc))
            .map(|_| ())
    }

    /// The port's counters (`rdma statistic show`).
    pub fn query_counters(&self) -> Result<PortCounters> {
        let v = self
            .ctx
            .query_counter_set(CounterScope::Port, 0, PORT_COUNTERS.len())?;
        let (engine, runtime) = port_counters_from(&v);
        Ok(PortCounters { engine, runtime })
    }

    fn update_attr(&self, f: impl FnOnce(&mut abi::DeviceAttr)) {
        let mut a = self.ctx.attr.get();
        f(&mut a);
        self.ctx.attr.set(a);
    }
}

impl QueuePair {
    /// Switches DCQCN's reaction point for this QP (the port's setting is the default
    /// for new QPs): on, its frames carry ECT(0), CNPs for it cut its rate and its data
    /// is paced. The rate restarts at line rate either way.
    pub fn set_cc(&self, rp: bool) -> Result<()> {
        let arg = QpCcArg {
            qpn: U32::new(self.qpn().value()),
            flags: if rp { QpCcArg::RP } else { 0 },
            ..QpCcArg::default()
        };
        self.ctx().exec_arg(CmdOp::ModifyQpCc, &arg).map(|_| ())
    }

    /// The QP's congestion state and counters: whether its reaction point is on, its
    /// current and target rate, alpha, and mlx5's CNP and ECN counters for it.
    pub fn query_cc(&self) -> Result<QpCcInfo> {
        self.ctx().query_qp_cc(self.qpn())
    }
}

impl Context {
    /// [`QueuePair::query_cc`] by QP number (for a monitor that does not own the QP).
    pub fn query_qp_cc(&self, qpn: Qpn) -> Result<QpCcInfo> {
        self.ctx.query_qp_cc(qpn)
    }
}

impl Ctx {
    fn query_qp_cc(&self, qpn: Qpn) -> Result<QpCcInfo> {
        let qpn = qpn.value();
        let arg = QpCcArg {
            qpn: U32::new(qpn),
            ..QpCcArg::default()
        };
        let s: QpCcArg = abi::payload(&self.exec_arg(CmdOp::QueryQpCc, &arg)?);
        let c = self.query_counter_set(CounterScope::Qp, qpn, QP_COUNTERS.len())?;
        let at = |name: &str| {
            QP_COUNTERS
                .iter()
                .position(|n| *n == name)
                .and_then(|i| c.get(i).copied())
                .unwrap_or(0)
        };
        Ok(QpCcInfo {
            rp_enabled: s.flags & QpCcArg::RP != 0,
            rate: s.rate.get(),
            target_rate: s.target_rate.get(),
            alpha: s.alpha.get(),
            rp_cnp_handled: at("rp_cnp_handled"),
            np_cnp_sent: at("np_cnp_sent"),
            np_ecn_marked_roce_packets: at("np_ecn_marked_roce_packets"),
        })
    }
}
