//! The verbs API: libibverbs' objects and calls, over the host/NIC ABI only (registers,
//! doorbells and rings in host memory; see `docs/abi.md`).

use crate::device::Device;
use crate::error::Error;
use roce_abi::{
    self as abi, reg, CmdEntry, CmdOp, CmdStatus, Cqe, DeviceAttr, EventStatus, RecvWqe, SendWqe,
};
use roce_core::engine::QPN_BASE;
use roce_core::memory::AccessFlags;
use roce_core::num::{Lkey, Psn, Qkey, Qpn, Rkey};
use roce_core::transport::{
    AckTimeout, AddressVector, Mtu, QpAttr, QpState, QpType, RecvWr, RetryCount, RnrTimer,
    SendFlags, SendWr, Sge, SrAttr, WcStatus, WorkCompletion,
};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::{Rc, Weak};

mod mw;
mod srq;
pub use mw::{inc_rkey, MemoryWindow, MwBindInfo};
pub use srq::{SharedReceiveQueue, SrqAttr};
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromZeros, IntoBytes};

/// Result of a verb.
pub type Result<T> = std::result::Result<T, Error>;

/// How many times the driver lets the device run while it waits for a command.
const COMMAND_SPINS: usize = 100_000;
/// log2 of the command-queue depth.
const CMDQ_LOG_DEPTH: u8 = 4;

pub(crate) struct Ctx {
    pub(crate) dev: Rc<dyn Device>,
    cmdq_base: u64,
    cmdq_pi: Cell<u32>,
    /// QUERY_DEVICE's answer, kept current when this context changes the port.
    pub(crate) attr: Cell<DeviceAttr>,
    qps: RefCell<HashMap<u32, Weak<QpInner>>>,
    /// QP contexts the NIC keeps in host memory (`set_icm`): their number.
    icm_entries: Cell<Option<u32>>,
}

impl Ctx {
    /// Runs one command and waits for its status.
    pub(crate) fn exec(&self, op: CmdOp, entry: &mut CmdEntry) -> Result<()> {
        entry.opcode = zerocopy::little_endian::U16::new(op as u16);
        self.exec_raw(entry)
    }

    /// Runs the command in `entry` (opcode already set) and waits for its status.
    fn exec_raw(&self, entry: &mut CmdEntry) -> Result<()> {
        let op = CmdOp::from_u16(entry.opcode.get());
        let mem = self.dev.memory();
        let pi = self.cmdq_pi.get();
        let addr = self.cmdq_base
            + u64::from(pi & ((1 << CMDQ_LOG_DEPTH) - 1)) * size_of::<CmdEntry>() as u64;
        entry.token = U32::new(pi);
        entry.status = U32::new(CmdStatus::Pending as u32);
        mem.write(addr, entry.as_bytes())
            .map_err(|e| Error::Dma { addr: e.addr })?;
        let pi = pi.wrapping_add(1);
        self.cmdq_pi.set(pi);
        self.dev.write_reg(reg::CMDQ_PI, pi);
        for _ in 0..COMMAND_SPINS {
            mem.read(addr, entry.as_mut_bytes())
                .map_err(|e| Error::Dma { addr: e.addr })?;
            match CmdStatus::from_u32(entry.status.get()) {
                Some(CmdStatus::Pending) => self.dev.progress(),
                Some(CmdStatus::Ok) => return Ok(()),
                Some(status) => {
                    return Err(Error::Command {
                        opcode: entry.opcode.get(),
                        op,
                        status,
                    })
                }
                None => return Err(Error::BadResponse("unknown command status")),
            }
        }
        Err(Error::CommandTimeout {
            opcode: entry.opcode.get(),
        })
    }

    fn exec_handle(&self, op: CmdOp, handle: u32) -> Result<CmdEntry> {
        let mut e = CmdEntry::default();
        abi::set_payload(
            &mut e,
            &abi::HandleArg {
                handle: U32::new(handle),
            },
        );
        self.exec(op, &mut e)?;
        Ok(e)
    }
}

/// An opened device (`struct ibv_context`).
#[derive(Clone)]
pub struct Context {
    pub(crate) ctx: Rc<Ctx>,
}

impl Context {
    /// Opens a device: checks its identity and ABI version, and sets up the command queue.
    pub fn open(dev: Rc<dyn Device>) -> Result<Self> {
        let id = dev.read_reg(reg::DEVICE_ID);
        if id != abi::DEVICE_ID {
            return Err(Error::NotARoceDevice { device_id: id });
        }
        let version = abi::Version(dev.read_reg(reg::VERSION));
        if version.major() != abi::ABI_MAJOR {
            return Err(Error::AbiMismatch {
                major: version.major(),
            });
        }
        let depth = 1usize << CMDQ_LOG_DEPTH;
        let base = dev.memory().alloc(depth * size_of::<CmdEntry>(), 64);
        dev.write_reg(reg::CMDQ_BASE_LO, base as u32);
        dev.write_reg(reg::CMDQ_BASE_HI, (base >> 32) as u32);
        dev.write_reg(reg::CMDQ_LOG_DEPTH, u32::from(CMDQ_LOG_DEPTH));
        let cmdq_pi = dev.read_reg(reg::CMDQ_CI);
        let ctx = Ctx {
            dev,
            cmdq_base: base,
            cmdq_pi: Cell::new(cmdq_pi),
            attr: Cell::default(),
            qps: RefCell::default(),
            icm_entries: Cell::new(None),
        };
        let mut e = CmdEntry::default();
        ctx.exec(CmdOp::QueryDevice, &mut e)?;
        ctx.attr.set(abi::payload(&e));
        Ok(Self { ctx: Rc::new(ctx) })
    }

    /// A device register (the clock, for the RDMA CM's timers).
    pub(crate) fn read_reg(&self, offset: u32) -> u32 {
        self.ctx.dev.read_reg(offset)
    }

    /// `ibv_query_device` (and the port's addresses).
    pub fn query_device(&self) -> DeviceAttr {
        let mut attr = self.ctx.attr.get();
        if let Some(n) = self.ctx.icm_entries.get() {
            attr.max_qp = U32::new(n);
        }
        attr
    }

    /// Gives the NIC host memory for `entries` QP contexts (its ICM, `docs/scale.md`),
    /// before the first QP: it then holds that many QPs and caches the busy ones on
    /// chip. QPs created after this ring their doorbells through doorbell records.
    pub fn set_icm(&self, entries: u32) -> Result<()> {
        let len = entries as usize * abi::ICM_ENTRY_LEN;
        let mem = self.ctx.dev.memory();
        let addr = mem.alloc(len.max(1), 4096);
        let mut e = CmdEntry::default();
        abi::set_payload(
            &mut e,
            &abi::IcmArg {
                addr: U64::new(addr),
                entries: U32::new(entries),
                reserved: U32::new(0),
            },
        );
        if let Err(err) = self.ctx.exec(CmdOp::SetIcm, &mut e) {
            mem.free(addr, len.max(1));
            return Err(err);
        }
        self.ctx.icm_entries.set(Some(entries));
        Ok(())
    }

    /// The port's active path MTU.
    pub fn active_mtu(&self) -> Mtu {
        Mtu::from_u8(self.ctx.attr.get().active_mtu).unwrap_or(Mtu::Mtu1024)
    }

    /// The port's GID (index 0) and MAC.
    pub fn port_addr(&self) -> ([u8; 16], [u8; 6]) {
        let a = self.ctx.attr.get();
        (a.gid, a.mac)
    }

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&self) -> Result<ProtectionDomain> {
        let mut e = CmdEntry::default();
        self.ctx.exec(CmdOp::AllocPd, &mut e)?;
        Ok(ProtectionDomain {
            inner: Rc::new(PdInner {
                ctx: self.ctx.clone(),
                pdn: e.out.get(),
            }),
        })
    }

    /// `ibv_create_cq` with room for at least `cqe` completions.
    pub fn create_cq(&self, cqe: usize) -> Result<CompletionQueue> {
        let log = ring_log(cqe, self.ctx.attr.get().max_log_depth)?;
        let ring_len = (1usize << log) * size_of::<Cqe>();
        let ring = self.ctx.dev.memory().alloc(ring_len, 64);
        let mut e = CmdEntry::default();
        abi::set_payload(
            &mut e,
            &abi::CreateCqArg {
                ring: U64::new(ring),
                log_depth: log,
                reserved: [0; 7],
            },
        );
        if let Err(err) = self.ctx.exec(CmdOp::CreateCq, &mut e) {
            self.ctx.dev.memory().free(ring, ring_len);
            return Err(err);
        }
        Ok(CompletionQueue {
            ctx: self.ctx.clone(),
            cqn: e.out.get(),
            ring,
            log,
            ci: Cell::new(0),
        })
    }

    /// Runs a command built by the caller (diagnostics and ABI tests); the entry comes
    /// back with the device's results.
    pub fn raw_command(&self, opcode: u16, entry: &mut CmdEntry) -> Result<()> {
        match CmdOp::from_u16(opcode) {
            Some(op) => self.ctx.exec(op, entry),
            None => {
                // Unknown to this driver too: send it as is and report the status.
                let mut e = *entry;
                e.opcode = zerocopy::little_endian::U16::new(opcode);
                let r = self.ctx.exec_raw(&mut e);
                *entry = e;
                r
            }
        }
    }

    /// Reads and clears the device's async events (`ibv_get_async_event`, polled).
    pub fn take_events(&self) -> AsyncEvents {
        let status = EventStatus(self.ctx.dev.read_reg(reg::EVENT_STATUS));
        let events = AsyncEvents {
            cq_error: status
                .cq_error()
                .then(|| self.ctx.dev.read_reg(reg::EVENT_CQN)),
            qp_fatal: status
                .qp_fatal()
                .then(|| Qpn::new(self.ctx.dev.read_reg(reg::EVENT_QPN))),
            srq_limit: status
                .srq_limit()
                .then(|| self.ctx.dev.read_reg(reg::EVENT_SRQN)),
        };
        self.ctx.dev.write_reg(reg::EVENT_STATUS, status.0);
        events
    }
}

/// Async events the device reported since the last look.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AsyncEvents {
    /// `IBV_EVENT_CQ_ERR`: this CQ overflowed.
    pub cq_error: Option<u32>,
    /// `IBV_EVENT_QP_FATAL`: this QP went to the error state on its own.
    pub qp_fatal: Option<Qpn>,
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`: this SRQN fell below its armed limit (which
    /// disarmed; `SharedReceiveQueue::arm_limit` arms it again).
    pub srq_limit: Option<u32>,
}

fn ring_log(entries: usize, max_log: u8) -> Result<u8> {
    let log = entries.max(1).next_power_of_two().trailing_zeros();
    if log > u32::from(max_log) {
        return Err(Error::InvalidArgument(
            "queue deeper than the device allows",
        ));
    }
    Ok(log as u8)
}

struct PdInner {
    ctx: Rc<Ctx>,
    pdn: u32,
}

impl Drop for PdInner {
    fn drop(&mut self) {
        let _ = self.ctx.exec_handle(CmdOp::DeallocPd, self.pdn);
    }
}

/// A protection domain (`struct ibv_pd`).
#[derive(Clone)]
pub struct ProtectionDomain {
    inner: Rc<PdInner>,
}

impl ProtectionDomain {
    /// `ibv_reg_mr` over a fresh, zeroed buffer of `len` bytes in host memory.
    pub fn reg_mr(&self, len: usize, access: AccessFlags) -> Result<MemoryRegion> {
        self.new_mr(CmdOp::RegMr, len, access)
    }

    /// A fresh, zeroed buffer of `len` bytes and the MR command `op` over it: REG_MR
    /// registers it with `access`; ALLOC_MR (fast registration) tells the NIC only the
    /// length, `addr` and `access` 0, and REG_MR work requests register it later.
    fn new_mr(&self, op: CmdOp, len: usize, access: AccessFlags) -> Result<MemoryRegion> {
        let ctx = &self.inner.ctx;
        let addr = ctx.dev.memory().alloc(len.max(1), 64);
        let mut e = CmdEntry::default();
        let now = op == CmdOp::RegMr;
        abi::set_payload(
            &mut e,
            &abi::RegMrArg {
                pd: U32::new(self.inner.pdn),
                access: U32::new(access.bits()),
                addr: U64::new(if now { addr } else { 0 }),
                length: U64::new(len as u64),
                ..Default::default()
            },
        );
        if let Err(err) = ctx.exec(op, &mut e) {
            ctx.dev.memory().free(addr, len.max(1));
            return Err(err);
        }
        let arg: abi::RegMrArg = abi::payload(&e);
        Ok(MemoryRegion {
            ctx: ctx.clone(),
            _pd: self.inner.clone(),
            addr,
            len,
            lkey: Cell::new(Lkey(arg.lkey.get())),
            rkey: Cell::new(Rkey(arg.rkey.get())),
        })
    }

    /// Starts building a QP (`ibv_create_qp`).
    pub fn create_qp<'a>(
        &'a self,
        qp_type: QpType,
        send_cq: &'a CompletionQueue,
        recv_cq: &'a CompletionQueue,
    ) -> QpBuilder<'a> {
        QpBuilder {
            pd: self,
            qp_type,
            send_cq,
            recv_cq,
            max_send_wr: 64,
            max_recv_wr: 64,
            sq_sig_all: false,
            max_inline_data: 0,
            srq: None,
            gsi: false,
        }
    }

    /// Starts building the port's GSI QP (QP1, ABI 1.2): a UD QP numbered 1 that
    /// carries management datagrams (the CM's MADs); bring it to RTS with the GSI Q_Key
    /// (`Qkey::GSI`). One per port.
    pub fn create_gsi_qp<'a>(
        &'a self,
        send_cq: &'a CompletionQueue,
        recv_cq: &'a CompletionQueue,
    ) -> QpBuilder<'a> {
        QpBuilder {
            gsi: true,
            ..self.create_qp(QpType::Ud, send_cq, recv_cq)
        }
    }
}

/// A registered memory region (`struct ibv_mr`) and the buffer it covers.
pub struct MemoryRegion {
    ctx: Rc<Ctx>,
    _pd: Rc<PdInner>,
    addr: u64,
    len: usize,
    /// The keys change when a fast-registration MR is registered again (REG_MR).
    lkey: Cell<Lkey>,
    rkey: Cell<Rkey>,
}

impl MemoryRegion {
    /// Start address.
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for a zero-length region.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Local key.
    pub fn lkey(&self) -> Lkey {
        self.lkey.get()
    }
    /// Remote key.
    pub fn rkey(&self) -> Rkey {
        self.rkey.get()
    }
    /// A scatter/gather element for `len` bytes at `offset`.
    pub fn sge(&self, offset: usize, len: u32) -> Sge {
        Sge {
            addr: self.addr + offset as u64,
            length: len,
            lkey: self.lkey.get(),
        }
    }
    /// Writes `data` at `offset` (the application filling its buffer).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        self.ctx
            .dev
            .memory()
            .write(self.addr + offset as u64, data)
            .map_err(|e| Error::Dma { addr: e.addr })
    }
    /// Reads `buf.len()` bytes at `offset`.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result<()> {
        self.check(offset, buf.len())?;
        self.ctx
            .dev
            .memory()
            .read(self.addr + offset as u64, buf)
            .map_err(|e| Error::Dma { addr: e.addr })
    }
    /// The whole buffer's contents.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len];
        let _ = self.read(0, &mut v);
        v
    }
    fn check(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::InvalidArgument("access beyond the memory region")),
        }
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        if self
            .ctx
            .exec_handle(CmdOp::DeregMr, self.lkey.get().0)
            .is_ok()
        {
            self.ctx.dev.memory().free(self.addr, self.len.max(1));
        }
    }
}

/// A completion queue (`struct ibv_cq`).
pub struct CompletionQueue {
    ctx: Rc<Ctx>,
    cqn: u32,
    ring: u64,
    log: u8,
    ci: Cell<u32>,
}

impl CompletionQueue {
    /// The CQ number.
    pub fn cqn(&self) -> u32 {
        self.cqn
    }

    /// `ibv_poll_cq`: fills `wcs` with up to `wcs.len()` completions, oldest first, and
    /// returns the part it filled (empty when there were none).
    pub fn poll<'w>(&self, wcs: &'w mut [WorkCompletion]) -> Result<&'w mut [WorkCompletion]> {
        let mem = self.ctx.dev.memory();
        let mut n = 0;
        while n < wcs.len() {
            let ci = self.ci.get();
            let addr = self.ring + u64::from(ci & ((1 << self.log) - 1)) * size_of::<Cqe>() as u64;
            let mut cqe = Cqe::new_zeroed();
            mem.read(addr, cqe.as_mut_bytes())
                .map_err(|e| Error::Dma { addr: e.addr })?;
            if !abi::cqe_valid(cqe.owner, ci, self.log) {
                break;
            }
            let wc = cqe.to_wc().map_err(|e| Error::BadResponse(e.0))?;
            self.retire(&wc);
            wcs[n] = wc;
            n += 1;
            self.ci.set(ci.wrapping_add(1));
        }
        if n > 0 {
            self.ctx.dev.write_reg(reg::cq_db(self.cqn), self.ci.get());
        }
        Ok(&mut wcs[..n])
    }

    /// Polls, letting the device run, until `n` completions have arrived or `spins`
    /// rounds passed without one.
    pub fn wait(&self, n: usize, spins: usize) -> Result<Vec<WorkCompletion>> {
        let mut out = Vec::with_capacity(n);
        let mut buf = [WorkCompletion::default(); 16];
        let mut idle = 0;
        while out.len() < n && idle < spins {
            let want = (n - out.len()).min(buf.len());
            let got = self.poll(&mut buf[..want])?;
            if got.is_empty() {
                self.ctx.dev.progress();
                idle += 1;
            } else {
                idle = 0;
                out.extend_from_slice(got);
            }
        }
        Ok(out)
    }

    /// Frees the queue slots the completion accounts for.
    fn retire(&self, wc: &WorkCompletion) {
        let qp = self
            .ctx
            .qps
            .borrow()
            .get(&wc.qp_num.value())
            .and_then(Weak::upgrade);
        if let Some(qp) = qp {
            if (wc.opcode as u8) < 128 {
                let mut sq = qp.sq_signaled.borrow_mut();
                if wc.status == WcStatus::Success {
                    // A signaled success also completes the unsignaled WRs before it.
                    while let Some(signaled) = sq.pop_front() {
                        if signaled {
                            break;
                        }
                    }
                } else {
                    // Errors and flushes complete every WR with its own CQE.
                    sq.pop_front();
                }
            } else {
                let rq = qp
                    .srq
                    .as_ref()
                    .map_or(&qp.rq_outstanding, |s| &s.outstanding);
                rq.set(rq.get().saturating_sub(1));
            }
        }
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        if self.ctx.exec_handle(CmdOp::DestroyCq, self.cqn).is_ok() {
            self.ctx
                .dev
                .memory()
                .free(self.ring, (1usize << self.log) * size_of::<Cqe>());
        }
    }
}

/// Builder of a queue pair.
pub struct QpBuilder<'a> {
    pd: &'a ProtectionDomain,
    qp_type: QpType,
    send_cq: &'a CompletionQueue,
    recv_cq: &'a CompletionQueue,
    max_send_wr: usize,
    max_recv_wr: usize,
    sq_sig_all: bool,
    max_inline_data: u32,
    srq: Option<&'a SharedReceiveQueue>,
    gsi: bool,
}

impl<'a> QpBuilder<'a> {
    /// Send queue depth (`cap.max_send_wr`).
    pub fn max_send_wr(mut self, n: usize) -> Self {
        self.max_send_wr = n;
        self
    }
    /// Receive queue depth (`cap.max_recv_wr`).
    pub fn max_recv_wr(mut self, n: usize) -> Self {
        self.max_recv_wr = n;
        self
    }
    /// Every send WR completes, signaled or not (`sq_sig_all`).
    pub fn sq_sig_all(mut self, on: bool) -> Self {
        self.sq_sig_all = on;
        self
    }
    /// Largest inline send (`cap.max_inline_data`, at most `abi::MAX_INLINE_DATA`);
    /// the QP gets at least this much ([`QueuePair::max_inline_data`]). A QP that
    /// may send inline is not put on the RC fast path.
    pub fn max_inline_data(mut self, n: u32) -> Self {
        self.max_inline_data = n;
        self
    }
    /// Receives come from `srq` (`ibv_qp_init_attr.srq`): the QP has no receive queue
    /// of its own, and it stays off the RC fast path.
    pub fn srq(mut self, srq: &'a SharedReceiveQueue) -> Self {
        self.srq = Some(srq);
        self
    }

    /// Creates the QP in the RESET state.
    pub fn build(self) -> Result<QueuePair> {
        let ctx = &self.pd.inner.ctx;
        let max_log = ctx.attr.get().max_log_depth;
        let (sq_log, rq_log) = (
            ring_log(self.max_send_wr, max_log)?,
            ring_log(self.max_recv_wr, max_log)?,
        );
        if (self.max_inline_data != 0 || self.gsi)
            && abi::Version(ctx.dev.read_reg(reg::VERSION)).minor() < 2
        {
            // An older NIC would take an inline WQE for an empty one, and has no QP1.
            return Err(Error::InvalidArgument(
                "max_inline_data or GSI: the device's ABI is older than 1.2",
            ));
        }
        let mem = ctx.dev.memory();
        let sq_len = (1usize << sq_log) * size_of::<SendWqe>();
        let rq_len = (1usize << rq_log) * size_of::<RecvWqe>();
        let (sq_ring, rq_ring) = (mem.alloc(sq_len, 64), mem.alloc(rq_len, 64));
        // With an ICM, doorbells go through a record in host memory (any QP index).
        let db_record = match ctx.icm_entries.get() {
            Some(_) if !self.gsi => mem.alloc(DB_RECORD_LEN, 8),
            _ => 0,
        };
        let mut e = CmdEntry::default();
        abi::set_payload(
            &mut e,
            &abi::CreateQpArg {
                pd: U32::new(self.pd.inner.pdn),
                send_cq: U32::new(self.send_cq.cqn),
                recv_cq: U32::new(self.recv_cq.cqn),
                qp_type: if self.gsi {
                    abi::QPT_GSI
                } else {
                    self.qp_type as u8
                },
                sq_log_depth: sq_log,
                rq_log_depth: rq_log,
                sq_sig_all: u8::from(self.sq_sig_all),
                sq_ring: U64::new(sq_ring),
                rq_ring: U64::new(rq_ring),
                max_inline_data: U32::new(self.max_inline_data),
                srqn: U32::new(self.srq.map_or(0, |s| s.srqn())),
                db_record: U64::new(db_record),
            },
        );
        if let Err(err) = ctx.exec(CmdOp::CreateQp, &mut e) {
            mem.free(sq_ring, sq_len);
            mem.free(rq_ring, rq_len);
            if db_record != 0 {
                mem.free(db_record, DB_RECORD_LEN);
            }
            return Err(err);
        }
        let qpn = Qpn::new(e.out.get());
        let max_inline = abi::payload::<abi::CreateQpArg>(&e).max_inline_data.get();
        let index = if self.gsi {
            reg::GSI_QP_INDEX
        } else {
            qpn.value().wrapping_sub(QPN_BASE)
        };
        let (sq_pi, rq_pi) = match db_record {
            0 => (
                ctx.dev.read_reg(reg::sq_db(index)),
                ctx.dev.read_reg(reg::rq_db(index)),
            ),
            _ => (0, 0),
        };
        let inner = Rc::new(QpInner {
            ctx: ctx.clone(),
            _pd: self.pd.inner.clone(),
            qpn,
            index,
            qp_type: self.qp_type,
            sq_sig_all: self.sq_sig_all,
            max_inline,
            srq: self.srq.map(|s| s.inner.clone()),
            state: Cell::new(QpState::Reset),
            sq_ring,
            sq_log,
            sq_pi: Cell::new(sq_pi),
            sq_signaled: RefCell::default(),
            rq_ring,
            rq_log,
            rq_pi: Cell::new(rq_pi),
            rq_outstanding: Cell::new(0),
            db_record,
        });
        ctx.qps
            .borrow_mut()
            .insert(qpn.value(), Rc::downgrade(&inner));
        Ok(QueuePair { inner })
    }
}

struct QpInner {
    ctx: Rc<Ctx>,
    _pd: Rc<PdInner>,
    qpn: Qpn,
    index: u32,
    qp_type: QpType,
    sq_sig_all: bool,
    /// `cap.max_inline_data` as the NIC granted it.
    max_inline: u32,
    /// The SRQ its receives come from (kept alive while the QP is).
    srq: Option<Rc<srq::SrqInner>>,
    state: Cell<QpState>,
    sq_ring: u64,
    sq_log: u8,
    sq_pi: Cell<u32>,
    /// Posted send WRs not yet retired by a completion: whether each was signaled.
    sq_signaled: RefCell<VecDeque<bool>>,
    rq_ring: u64,
    rq_log: u8,
    rq_pi: Cell<u32>,
    rq_outstanding: Cell<u32>,
    /// Host address of the doorbell record (0: the doorbell registers).
    db_record: u64,
}

/// Bytes of a doorbell record: the send and the receive producer index.
const DB_RECORD_LEN: usize = 8;

impl QpInner {
    /// Tells the NIC the send (`rq` false) or receive queue's producer index is `pi`:
    /// the doorbell register, or the record then `QP_DB`.
    fn ring(&self, rq: bool, pi: u32) -> Result<()> {
        if self.db_record == 0 {
            let db = if rq {
                reg::rq_db(self.index)
            } else {
                reg::sq_db(self.index)
            };
            self.ctx.dev.write_reg(db, pi);
            return Ok(());
        }
        let at = self.db_record + if rq { 4 } else { 0 };
        self.ctx
            .dev
            .memory()
            .write(at, &pi.to_le_bytes())
            .map_err(|e| Error::Dma { addr: e.addr })?;
        self.ctx.dev.write_reg(reg::QP_DB, self.index);
        Ok(())
    }
}

impl Drop for QpInner {
    fn drop(&mut self) {
        self.ctx.qps.borrow_mut().remove(&self.qpn.value());
        if self
            .ctx
            .exec_handle(CmdOp::DestroyQp, self.qpn.value())
            .is_ok()
        {
            let mem = self.ctx.dev.memory();
            mem.free(self.sq_ring, (1usize << self.sq_log) * size_of::<SendWqe>());
            mem.free(self.rq_ring, (1usize << self.rq_log) * size_of::<RecvWqe>());
            if self.db_record != 0 {
                mem.free(self.db_record, DB_RECORD_LEN);
            }
        }
    }
}

/// What a peer needs to connect to a QP: exchanged out of band, as perftest and the
/// pingpong examples do over TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpEndpoint {
    pub qpn: Qpn,
    pub psn: Psn,
    pub gid: [u8; 16],
    pub mac: [u8; 6],
}

/// Connection parameters, with perftest's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectOptions {
    pub mtu: Mtu,
    /// Remote access this QP grants as responder.
    pub access: AccessFlags,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub traffic_class: u8,
    /// The source GID's index in the port's table (`ah_attr.grh.sgid_index`): it must
    /// be of the same IP version as the peer's GID.
    pub sgid_index: u8,
    pub qkey: Qkey,
    /// RC: selective repeat instead of Go-Back-N. Both ends must set it (it is not
    /// negotiated on the wire; see `docs/selective-repeat.md`).
    pub selective_repeat: Option<SrAttr>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            mtu: Mtu::Mtu1024,
            access: AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            traffic_class: 0,
            sgid_index: 0,
            qkey: Qkey(0x1111_1111),
            selective_repeat: None,
        }
    }
}

/// A queue pair (`struct ibv_qp`).
#[derive(Clone)]
pub struct QueuePair {
    inner: Rc<QpInner>,
}

impl QueuePair {
    /// The device context the QP lives in.
    pub(crate) fn ctx(&self) -> &Ctx {
        &self.inner.ctx
    }

    /// QP number.
    pub fn qpn(&self) -> Qpn {
        self.inner.qpn
    }

    /// What a peer needs to connect to this QP (rust-ibverbs' `endpoint()`): its number,
    /// the port's GID (index 0) and MAC, and `psn`, the first PSN this QP will send (the
    /// one to pass as `local_psn` to [`QueuePair::connect`]).
    pub fn endpoint(&self, psn: Psn) -> QpEndpoint {
        let a = self.inner.ctx.attr.get();
        QpEndpoint {
            qpn: self.inner.qpn,
            psn,
            gid: a.gid,
            mac: a.mac,
        }
    }
    /// Transport type.
    pub fn qp_type(&self) -> QpType {
        self.inner.qp_type
    }
    /// The state after the last successful `modify` (a QP may since have gone to ERR
    /// on its own; `query` asks the device).
    pub fn state(&self) -> QpState {
        self.inner.state.get()
    }
    /// The largest inline send the NIC granted (`ibv_qp_init_attr.cap.max_inline_data`
    /// after `ibv_create_qp`).
    pub fn max_inline_data(&self) -> u32 {
        self.inner.max_inline
    }
    /// Send WRs posted and not yet completed.
    pub fn send_outstanding(&self) -> usize {
        self.inner.sq_signaled.borrow().len()
    }

    /// `ibv_modify_qp`.
    pub fn modify(&self, attr: &QpAttr) -> Result<()> {
        let mut e = CmdEntry::default();
        abi::set_payload(&mut e, &abi::QpAttrArg::from_attr(self.inner.qpn, attr));
        self.inner.ctx.exec(CmdOp::ModifyQp, &mut e)?;
        if let Some(s) = attr.qp_state {
            self.inner.state.set(s);
        }
        Ok(())
    }

    /// `ibv_query_qp`: state, path MTU, PSNs, remote QPN, access flags, Q_Key, and
    /// selective repeat when it is on.
    pub fn query(&self) -> Result<QpAttr> {
        let e = self
            .inner
            .ctx
            .exec_handle(CmdOp::QueryQp, self.inner.qpn.value())?;
        let arg: abi::QpAttrArg = abi::payload(&e);
        arg.to_attr().map_err(|e| Error::BadResponse(e.0))
    }

    /// Moves the QP RESET -> INIT -> RTR -> RTS towards `remote` (RC and UC), or to RTS
    /// with its Q_Key (UD), with `local_psn` as its first send PSN.
    pub fn connect(&self, remote: &QpEndpoint, local_psn: Psn, o: &ConnectOptions) -> Result<()> {
        let ud = self.inner.qp_type == QpType::Ud;
        let mut init = QpAttr::to_state(QpState::Init);
        init.pkey_index = Some(0);
        init.port_num = Some(1);
        if ud {
            init.qkey = Some(o.qkey);
        } else {
            init.qp_access_flags = Some(o.access);
        }
        self.modify(&init)?;

        let mut rtr = QpAttr::to_state(QpState::Rtr);
        if !ud {
            rtr.path_mtu = Some(o.mtu);
            rtr.dest_qp_num = Some(remote.qpn);
            rtr.rq_psn = Some(remote.psn);
            rtr.ah_attr = Some(AddressVector {
                dmac: remote.mac,
                dgid: remote.gid,
                hop_limit: 64,
                traffic_class: o.traffic_class,
                sgid_index: o.sgid_index,
                ..AddressVector::default()
            });
            if self.inner.qp_type == QpType::Rc {
                // Like perftest, ask for no more than the device has.
                rtr.max_dest_rd_atomic = Some(
                    o.max_dest_rd_atomic
                        .min(self.inner.ctx.attr.get().max_qp_rd_atom),
                );
                rtr.min_rnr_timer = RnrTimer::new(o.min_rnr_timer);
                rtr.selective_repeat = o.selective_repeat;
            }
        }
        self.modify(&rtr)?;

        let mut rts = QpAttr::to_state(QpState::Rts);
        rts.sq_psn = Some(local_psn);
        if self.inner.qp_type == QpType::Rc {
            rts.timeout = AckTimeout::new(o.timeout);
            rts.retry_cnt = RetryCount::new(o.retry_cnt);
            rts.rnr_retry = RetryCount::new(o.rnr_retry);
            let max_rd = self.inner.ctx.attr.get().max_qp_rd_atom;
            rts.max_rd_atomic = Some(o.max_rd_atomic.min(max_rd));
        }
        self.modify(&rts)
    }

    /// `ibv_post_send` of one work request.
    pub fn post_send(&self, wr: &SendWr) -> Result<()> {
        self.post_send_list(core::slice::from_ref(wr))
    }

    /// `ibv_post_send` of a list: every WQE is written, then one doorbell rings for all
    /// of them. On an error, the WRs before the failing one are posted (as `bad_wr`
    /// reports in libibverbs) and the error says which.
    pub fn post_send_list(&self, wrs: &[SendWr]) -> Result<()> {
        let mut posted = 0;
        let result = wrs.iter().try_for_each(|wr| {
            self.write_send_wqe(wr)?;
            posted += 1;
            Ok(())
        });
        if posted > 0 {
            let q = &self.inner;
            q.ring(false, q.sq_pi.get())?;
        }
        result
    }

    fn write_send_wqe(&self, wr: &SendWr) -> Result<()> {
        let q = &self.inner;
        let state = q.state.get();
        if matches!(state, QpState::Reset | QpState::Init | QpState::Rtr) {
            return Err(Error::InvalidState {
                verb: "post_send",
                state,
            });
        }
        if (q.qp_type == QpType::Ud) != wr.ud.is_some() {
            return Err(Error::InvalidArgument(
                "a UD QP needs a destination, and only a UD QP",
            ));
        }
        let depth = 1usize << q.sq_log;
        if q.sq_signaled.borrow().len() >= depth {
            return Err(Error::QueueFull { queue: "send" });
        }
        let pi = q.sq_pi.get();
        let addr = q.sq_ring + u64::from(pi & (depth as u32 - 1)) * size_of::<SendWqe>() as u64;
        let mut wqe = SendWqe::from_wr(wr);
        if wr.send_flags.contains(SendFlags::INLINE) {
            wqe.set_inline(&self.inline_bytes(wr)?)
                .map_err(|abi::DecodeError(what)| Error::InvalidArgument(what))?;
        }
        q.ctx
            .dev
            .memory()
            .write(addr, wqe.as_bytes())
            .map_err(|e| Error::Dma { addr: e.addr })?;
        let signaled = q.sq_sig_all
            || wr
                .send_flags
                .contains(roce_core::transport::SendFlags::SIGNALED);
        q.sq_signaled.borrow_mut().push_back(signaled);
        q.sq_pi.set(pi.wrapping_add(1));
        Ok(())
    }

    /// An inline WR's payload, copied now from the memory its SGEs name (no L_Key is
    /// checked, as libibverbs does): the buffers may be reused once `post_send` returns.
    fn inline_bytes(&self, wr: &SendWr) -> Result<Vec<u8>> {
        if !wr.op.opcode().can_inline() {
            return Err(Error::InvalidArgument(
                "inline data on an operation that sends none",
            ));
        }
        let len: u64 = wr.sg_list.iter().map(|s| u64::from(s.length)).sum();
        if len > u64::from(self.inner.max_inline) {
            return Err(Error::InvalidArgument(
                "inline data longer than the QP's max_inline_data",
            ));
        }
        let mut data = vec![0u8; len as usize];
        let mut at = 0;
        for s in &wr.sg_list {
            let n = s.length as usize;
            self.inner
                .ctx
                .dev
                .memory()
                .read(s.addr, &mut data[at..at + n])
                .map_err(|e| Error::Dma { addr: e.addr })?;
            at += n;
        }
        Ok(data)
    }

    /// `ibv_post_recv` of one work request.
    pub fn post_recv(&self, wr: &RecvWr) -> Result<()> {
        let q = &self.inner;
        if q.state.get() == QpState::Reset {
            return Err(Error::InvalidState {
                verb: "post_recv",
                state: QpState::Reset,
            });
        }
        if q.srq.is_some() {
            return Err(Error::InvalidArgument(
                "post_recv: the QP receives from an SRQ (post to the SRQ)",
            ));
        }
        let depth = 1u32 << q.rq_log;
        if q.rq_outstanding.get() >= depth {
            return Err(Error::QueueFull { queue: "receive" });
        }
        let pi = q.rq_pi.get();
        let addr = q.rq_ring + u64::from(pi & (depth - 1)) * size_of::<RecvWqe>() as u64;
        let wqe = RecvWqe::from_wr(wr);
        q.ctx
            .dev
            .memory()
            .write(addr, wqe.as_bytes())
            .map_err(|e| Error::Dma { addr: e.addr })?;
        q.rq_outstanding.set(q.rq_outstanding.get() + 1);
        q.rq_pi.set(pi.wrapping_add(1));
        q.ring(true, pi.wrapping_add(1))
    }
}
