//! The host side of the self-test: a minimal driver that talks to the NIC only through
//! the ABI (`docs/abi.md`): registers of the window, and rings in its own memory that
//! the NIC reads and writes by DMA. Entries are encoded with `roce_firmware::abi`'s
//! conversions, so the encoding is the ABI's.

use roce_core::engine::QPN_BASE;
use roce_core::memory::Dma;
use roce_core::num::Qpn;
use roce_core::transport::{QpAttr, RecvWr, SendWr, WorkCompletion};
use roce_firmware::abi::{self, reg, CmdEntry, CmdOp, CmdStatus, Cqe, RecvWqe, SendWqe};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromZeros, IntoBytes};

use crate::TestNic;

/// Polls of the NIC before a wait counts as hung.
const POLL_LIMIT: u32 = 100_000;

/// A ring in host memory: base, log2 depth, and the host's index into it.
#[derive(Clone, Copy)]
pub struct Ring {
    pub addr: u64,
    pub log: u8,
    pub index: u32,
}

impl Ring {
    const NONE: Self = Self {
        addr: 0,
        log: 0,
        index: 0,
    };

    fn slot(&self, i: u32, size: usize) -> u64 {
        self.addr + u64::from(i & ((1 << self.log) - 1)) * size as u64
    }
}

/// A completion queue: its number and ring (index = the host's consumer index).
pub struct Cq {
    pub cqn: u32,
    ring: Ring,
}

/// A queue pair: its number and rings (index = the host's producer indices).
pub struct Qp {
    pub qpn: Qpn,
    sq: Ring,
    rq: Ring,
    /// Its doorbell record (`CreateQpArg::db_record`), or 0: doorbell registers.
    db_record: u64,
}

impl Qp {
    /// A placeholder for a table of QPs, before any is created.
    pub const NONE: Self = Self {
        qpn: Qpn::new(0),
        sq: Ring::NONE,
        rq: Ring::NONE,
        db_record: 0,
    };

    /// The doorbell index of the QP: its slot, `qpn - QPN_BASE` (the runtime's mapping).
    fn doorbell_index(&self) -> u32 {
        self.qpn.value() - QPN_BASE
    }
}

/// The host: a bump allocator over its memory and the command queue.
pub struct Host {
    next: u64,
    end: u64,
    cmdq: Ring,
    token: u32,
}

/// Runs the NIC until `done` holds; fails after [`POLL_LIMIT`] polls.
pub fn run_until(nic: &mut TestNic, what: &str, mut done: impl FnMut(&mut TestNic) -> bool) {
    for _ in 0..POLL_LIMIT {
        if done(nic) {
            return;
        }
        crate::probe::poll(nic);
    }
    ensure!(false, "timed out waiting for {=str}", what);
}

impl Host {
    /// A host whose memory is `[base, base + len)`.
    pub fn new(base: u64, len: usize) -> Self {
        Self {
            next: base,
            end: base + len as u64,
            cmdq: Ring {
                addr: 0,
                log: 0,
                index: 0,
            },
            token: 0,
        }
    }

    /// Allocates `len` bytes aligned to `align` (a power of two).
    pub fn alloc(&mut self, len: usize, align: u64) -> u64 {
        let addr = (self.next + align - 1) & !(align - 1);
        ensure!(
            addr + len as u64 <= self.end,
            "host memory exhausted ({=usize} bytes more)",
            len
        );
        self.next = addr + len as u64;
        addr
    }

    // -----------------------------------------------------------------------------------
    // Host memory and registers

    pub fn write(nic: &mut TestNic, addr: u64, data: &[u8]) {
        let ok = nic.hal().mem.inner.write(addr, data).is_ok();
        ensure!(ok, "host write outside host memory at {=u64:#x}", addr);
    }

    pub fn read(nic: &mut TestNic, addr: u64, buf: &mut [u8]) {
        let ok = nic.hal().mem.inner.read(addr, buf).is_ok();
        ensure!(ok, "host read outside host memory at {=u64:#x}", addr);
    }

    pub fn read_u64(nic: &mut TestNic, addr: u64) -> u64 {
        let mut b = [0u8; 8];
        Self::read(nic, addr, &mut b);
        u64::from_le_bytes(b)
    }

    pub fn reg(nic: &mut TestNic, offset: u32) -> u32 {
        nic.hal().regs.host_read(offset)
    }

    pub fn set_reg(nic: &mut TestNic, offset: u32, value: u32) {
        nic.hal().ring(offset, value);
    }

    // -----------------------------------------------------------------------------------
    // Commands

    /// Sets up a command queue of `2^log` entries.
    pub fn enable_cmdq(&mut self, nic: &mut TestNic, log: u8) {
        let addr = self.alloc(core::mem::size_of::<CmdEntry>() << log, 64);
        self.cmdq = Ring {
            addr,
            log,
            index: 0,
        };
        Self::set_reg(nic, reg::CMDQ_BASE_LO, addr as u32);
        Self::set_reg(nic, reg::CMDQ_BASE_HI, (addr >> 32) as u32);
        Self::set_reg(nic, reg::CMDQ_LOG_DEPTH, u32::from(log));
    }

    /// Queues one command, rings `CMDQ_PI`, runs the NIC until it has consumed it, and
    /// returns its status and the entry the NIC wrote back.
    pub fn try_command(
        &mut self,
        nic: &mut TestNic,
        op: CmdOp,
        arg: &[u8],
    ) -> (Option<CmdStatus>, CmdEntry) {
        self.token = self.token.wrapping_add(1);
        let mut e = CmdEntry::new_zeroed();
        e.opcode = U16::new(op as u16);
        e.token = U32::new(self.token);
        e.status = U32::new(CmdStatus::Pending as u32);
        if let Some(dst) = e.payload.get_mut(..arg.len()) {
            dst.copy_from_slice(arg);
        }
        let slot = self
            .cmdq
            .slot(self.cmdq.index, core::mem::size_of::<CmdEntry>());
        Self::write(nic, slot, e.as_bytes());
        self.cmdq.index = self.cmdq.index.wrapping_add(1);
        let pi = self.cmdq.index;
        Self::set_reg(nic, reg::CMDQ_PI, pi);
        run_until(nic, "command", |nic| Self::reg(nic, reg::CMDQ_CI) == pi);
        Self::read(nic, slot, e.as_mut_bytes());
        ensure!(
            e.token.get() == self.token,
            "command token {=u32} came back as {=u32}",
            self.token,
            e.token.get()
        );
        (CmdStatus::from_u32(e.status.get()), e)
    }

    /// [`Host::try_command`] that must succeed.
    pub fn command(&mut self, nic: &mut TestNic, op: CmdOp, arg: &[u8]) -> CmdEntry {
        let (status, e) = self.try_command(nic, op, arg);
        ensure!(
            status == Some(CmdStatus::Ok),
            "command {=u16} failed with status {=u32}",
            op as u16,
            e.status.get()
        );
        e
    }

    pub fn create_cq(&mut self, nic: &mut TestNic, log: u8) -> Cq {
        let addr = self.alloc(core::mem::size_of::<Cqe>() << log, 64);
        let arg = abi::CreateCqArg {
            ring: U64::new(addr),
            log_depth: log,
            ..Default::default()
        };
        let e = self.command(nic, CmdOp::CreateCq, arg.as_bytes());
        Cq {
            cqn: e.out.get(),
            ring: Ring {
                addr,
                log,
                index: 0,
            },
        }
    }

    /// Creates an RC QP with rings of `2^log` entries, both queues completing on `cq`,
    /// ringing through doorbell registers.
    pub fn create_rc_qp(&mut self, nic: &mut TestNic, pd: u32, cq: &Cq, log: u8) -> Qp {
        self.create_rc_qp_with(nic, pd, cq, log, false)
    }

    /// [`Host::create_rc_qp`], ringing through a doorbell record and `QP_DB` when
    /// `record` (required past the doorbell registers' 1,024 QPs).
    pub fn create_rc_qp_with(
        &mut self,
        nic: &mut TestNic,
        pd: u32,
        cq: &Cq,
        log: u8,
        record: bool,
    ) -> Qp {
        let sq = self.alloc(core::mem::size_of::<SendWqe>() << log, 64);
        let rq = self.alloc(core::mem::size_of::<RecvWqe>() << log, 64);
        let db_record = if record { self.alloc(8, 8) } else { 0 };
        let arg = abi::CreateQpArg {
            pd: U32::new(pd),
            send_cq: U32::new(cq.cqn),
            recv_cq: U32::new(cq.cqn),
            qp_type: roce_core::transport::QpType::Rc as u8,
            sq_log_depth: log,
            rq_log_depth: log,
            sq_sig_all: 0,
            sq_ring: U64::new(sq),
            rq_ring: U64::new(rq),
            db_record: U64::new(db_record),
            ..Default::default()
        };
        let e = self.command(nic, CmdOp::CreateQp, arg.as_bytes());
        Qp {
            qpn: Qpn::new(e.out.get()),
            sq: Ring {
                addr: sq,
                log,
                index: 0,
            },
            rq: Ring {
                addr: rq,
                log,
                index: 0,
            },
            db_record,
        }
    }

    pub fn modify_qp(&mut self, nic: &mut TestNic, qp: &Qp, attr: &QpAttr) {
        let arg = abi::QpAttrArg::from_attr(qp.qpn, attr);
        self.command(nic, CmdOp::ModifyQp, arg.as_bytes());
    }

    // -----------------------------------------------------------------------------------
    // Work requests and completions

    /// Writes a send WQE and rings the QP's send doorbell.
    pub fn post_send(nic: &mut TestNic, qp: &mut Qp, wr: &SendWr) {
        let wqe = SendWqe::from_wr(wr);
        let slot = qp.sq.slot(qp.sq.index, core::mem::size_of::<SendWqe>());
        Self::write(nic, slot, wqe.as_bytes());
        qp.sq.index = qp.sq.index.wrapping_add(1);
        if qp.db_record == 0 {
            Self::set_reg(nic, reg::sq_db(qp.doorbell_index()), qp.sq.index);
        } else {
            Self::ring_record(nic, qp);
        }
    }

    /// Writes QP `qp`'s producer indexes into its doorbell record (send, receive), then
    /// its index into `QP_DB`.
    pub fn ring_record(nic: &mut TestNic, qp: &Qp) {
        let mut record = [0u8; 8];
        record[..4].copy_from_slice(&qp.sq.index.to_le_bytes());
        record[4..].copy_from_slice(&qp.rq.index.to_le_bytes());
        Self::write(nic, qp.db_record, &record);
        Self::set_reg(nic, reg::QP_DB, qp.doorbell_index());
    }

    /// Writes a receive WQE and rings the QP's receive doorbell.
    pub fn post_recv(nic: &mut TestNic, qp: &mut Qp, wr: &RecvWr) {
        let wqe = RecvWqe::from_wr(wr);
        let slot = qp.rq.slot(qp.rq.index, core::mem::size_of::<RecvWqe>());
        Self::write(nic, slot, wqe.as_bytes());
        qp.rq.index = qp.rq.index.wrapping_add(1);
        if qp.db_record == 0 {
            Self::set_reg(nic, reg::rq_db(qp.doorbell_index()), qp.rq.index);
        } else {
            Self::ring_record(nic, qp);
        }
    }

    /// Takes the next CQE if the NIC has written it, and tells the NIC (`CQ_DB`).
    pub fn poll_cq(nic: &mut TestNic, cq: &mut Cq) -> Option<WorkCompletion> {
        let slot = cq.ring.slot(cq.ring.index, core::mem::size_of::<Cqe>());
        let mut cqe = Cqe::new_zeroed();
        Self::read(nic, slot, cqe.as_mut_bytes());
        if !abi::cqe_valid(cqe.owner, cq.ring.index, cq.ring.log) {
            return None;
        }
        cq.ring.index = cq.ring.index.wrapping_add(1);
        Self::set_reg(nic, reg::cq_db(cq.cqn), cq.ring.index);
        let wc = cqe.to_wc();
        ensure!(wc.is_ok(), "CQE {=u32} does not decode", cq.ring.index - 1);
        wc.ok()
    }

    /// Runs the NIC until `cq` has a completion, and returns it.
    pub fn wait_cq(nic: &mut TestNic, cq: &mut Cq) -> WorkCompletion {
        let mut got = None;
        run_until(nic, "a completion", |nic| {
            got = Self::poll_cq(nic, cq);
            got.is_some()
        });
        match got {
            Some(wc) => wc,
            None => crate::fail(),
        }
    }
}
