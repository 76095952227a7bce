//! The `abi` target's world: the firmware runtime (`roce_firmware::runtime::Nic`, with
//! the firmware's own capacities) over a HAL whose host memory knows what the host has
//! registered and checks every DMA access against it.
//!
//! Host memory has four arenas: the kernel's (the command queue), the victim tenant's,
//! the hostile tenant's, and the kernel's QUERY_COUNTERS buffers (beyond any command
//! queue, [`COUNTERS`]). What the NIC may touch is read from the NIC's own replies:
//! each command entry it writes back with status OK (`REG_MR`, `CREATE_CQ`, ...) adds or
//! removes a window in [`Shadow`]. A DMA access must then be
//! * a ring access: the command queue (read, write), a live QP's send ring (read), its
//!   receive ring only when it has no SRQ (read; a QP on an SRQ never touches its own
//!   receive ring), a live SRQ's ring (read), a live CQ's ring (write); or
//! * while the datapath is receiving or transmitting a frame, an access to a live memory
//!   region (a write only with `LOCAL_WRITE`), of the victim's PD only for a victim frame
//!   and of another PD only for a hostile frame. A frame is the victim's when its BTH
//!   names a victim QP and it has no DETH (the victim's QPs are RC; UD frames are the
//!   hostile tenant's, whatever QPN they name). Transmit-side reads happen before the
//!   frame exists, so they are judged when the datapath is handed the frame, by the
//!   reads its payload is made of ([`TxReads`]).
//!
//! Anything else panics at the access.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use crate::mw::{self, Limit};
use crate::port::PortModel;
use roce_core::engine::{PortConfig, QPN_BASE};
use roce_core::memory::{range_within, AccessFlags, Dma, DmaError, MemoryWindow};
use roce_core::num::Qpn;
use roce_core::transport::ipv4_gid;
use roce_core::wire;
use roce_firmware::abi::{self, reg, CmdEntry, CmdOp, CmdStatus};
use roce_firmware::config::FirmwareNic;
use roce_firmware::hal::{Datapath, Hal, QpMap, RegFile};
use roce_firmware::runtime::MAX_LOG_DEPTH;
use zerocopy::{FromBytes, IntoBytes};

/// The kernel's arena: the command queue.
pub const KERNEL: u64 = 0x1_0000_0000;
/// The victim tenant's arena: its rings and memory regions.
pub const VICTIM: u64 = 0x2_0000_0000;
/// The hostile tenant's arena: its rings and memory regions go here, wherever its
/// commands ask (see [`confine`]).
pub const HOSTILE: u64 = 0x3_0000_0000;
/// Bytes of each arena.
pub const ARENA: usize = 64 * 1024;
/// log2 of the command queue's depth.
pub const CMDQ_LOG: u8 = 4;
/// Where the kernel places QUERY_COUNTERS' buffers (see [`admit`]): an arena of their
/// own, beyond the largest command queue a `CMDQ_LOG_DEPTH` can make (the NIC takes at
/// most `MAX_LOG_DEPTH`). Inside the kernel's arena a depth bug let the queue cover a
/// buffer, and the NIC ran counter values as commands the kernel never admitted; one
/// destroyed the victim's QPs, and the checks that assume the kernel's filter (the
/// victim alone, the MAC's `Busy`) failed on a NIC that did what it was told.
pub const COUNTERS: u64 = KERNEL + ((size_of::<CmdEntry>() as u64) << MAX_LOG_DEPTH);
/// Bytes of the counters arena: [`admit`] places a buffer of up to 63 counters at most
/// 0x7000 in.
const COUNTERS_ARENA: usize = 0x8000;

/// The port's MAC and GID: the datapath loops frames back, so QPs talk to QPs of the
/// same NIC.
pub const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0A];
pub fn gid() -> [u8; 16] {
    ipv4_gid([10, 0, 0, 10])
}

/// An address in the hostile arena: where the kernel would place whatever a tenant asks
/// for (it allocates rings and pins only the tenant's own pages).
pub fn confine(addr: u64) -> u64 {
    HOSTILE + addr % ARENA as u64
}

/// Who a datapath call is working for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ctx {
    /// No frame: only ring accesses are allowed.
    Idle,
    /// Receiving a frame, the victim's or not, what a request through a memory window
    /// may touch (`mw::verdict`) and which part of a message the frame is.
    Rx {
        victim: bool,
        limit: Option<Limit>,
        part: Part,
    },
    /// Building frames to transmit (their reads: [`TX_READS`]).
    Tx,
}

/// Which part of a multi-packet RDMA WRITE a received frame is: a middle or last
/// packet carries no RETH and is placed at the cursor the responder's QP holds, so it is
/// judged by the message that cursor belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// Any other frame: judged by its own verdict.
    Whole,
    /// The first packet of a multi-packet WRITE to QP `.0`: judged by its own verdict,
    /// and, once it places data, the message QP `.0` continues ([`HostMem::messages`]).
    First(u32),
    /// A middle or last packet of a WRITE to QP `.0`: judged by the message that QP
    /// continues.
    Rest(u32),
}

thread_local! {
    /// Set by the datapath, read by the memory: the two are separate halves of the HAL
    /// (the runtime holds both at once through `Hal::split`).
    static CTX: Cell<Ctx> = const { Cell::new(Ctx::Idle) };
    /// The reads of the transmit context, written by the memory, judged by the datapath.
    static TX_READS: RefCell<TxReads> = RefCell::new(TxReads::default());
}

/// Leaves the current context.
fn leave() {
    CTX.set(Ctx::Idle);
}

/// The region reads of a transmit context, in order: their bytes, and for each its length
/// and whether it lay in a region of the victim's PD or of another.
///
/// One context may read for several frames and send only the last: the engine builds a
/// frame by reading its payload just before handing it over, and abandons one whose
/// gather fails (a key refused or a read faulting at a later SGE, after earlier SGEs
/// were read), then goes on to another QP's frame in the same call. So a frame carries
/// exactly the latest reads whose bytes are its payload; what was read before went
/// nowhere. (Marking the whole context flagged a victim frame after a hostile send
/// abandoned on its second SGE: found minimizing an `abi` campaign crash.) A failed
/// read gives the NIC no bytes and is not logged.
#[derive(Default)]
struct TxReads {
    bytes: Vec<u8>,
    reads: Vec<(usize, bool, bool)>,
}

impl TxReads {
    fn clear(&mut self) {
        self.bytes.clear();
        self.reads.clear();
    }

    fn push(&mut self, data: &[u8], victim: bool, hostile: bool) {
        self.bytes.extend_from_slice(data);
        self.reads.push((data.len(), victim, hostile));
    }

    /// Whether a frame with `payload` carries victim and hostile memory: judged by the
    /// latest reads when their bytes are exactly the payload, else (a payload not
    /// simply read, or no payload parsed) by every read of the context.
    fn owners(&self, payload: Option<&[u8]>) -> (bool, bool) {
        let own = payload.and_then(|p| {
            let (mut n, mut k) = (0, self.reads.len());
            while n < p.len() && k > 0 {
                k -= 1;
                n += self.reads[k].0;
            }
            (n == p.len() && self.bytes.ends_with(p)).then_some(k)
        });
        let used = &self.reads[own.unwrap_or(0)..];
        (used.iter().any(|r| r.1), used.iter().any(|r| r.2))
    }
}

/// A memory region the NIC has confirmed.
#[derive(Clone, Copy, Debug)]
pub struct Mr {
    pub lkey: u32,
    pub pd: u32,
    pub addr: u64,
    pub len: u64,
    pub access: AccessFlags,
}

/// A ring: base and bytes.
#[derive(Clone, Copy, Debug)]
pub struct Ring {
    pub addr: u64,
    pub len: u64,
}

impl Ring {
    fn new(addr: u64, log: u8, entry: usize) -> Self {
        Self {
            addr,
            len: (entry as u64) << log.min(31),
        }
    }
    fn holds(&self, addr: u64, len: usize) -> bool {
        range_within(self.addr, self.len, addr, len as u64)
    }
}

/// A QP the NIC has confirmed.
#[derive(Clone, Copy, Debug)]
pub struct QpRings {
    pub qpn: u32,
    pub pd: u32,
    pub qp_type: u8,
    pub sq: Ring,
    pub sq_log: u8,
    pub rq: Ring,
    pub rq_log: u8,
    /// Its SRQ (0: none, receives come from `rq`).
    pub srqn: u32,
}

/// The index of QP `qpn`'s doorbell pair: `QPN - QPN_BASE`, the GSI QP's its own.
pub fn doorbell_index(qpn: u32) -> u32 {
    if qpn == Qpn::GSI.value() {
        reg::GSI_QP_INDEX
    } else {
        qpn.wrapping_sub(QPN_BASE)
    }
}

/// An SRQ the NIC has confirmed, with the limit the host last armed.
#[derive(Clone, Copy, Debug)]
pub struct Srq {
    pub srqn: u32,
    pub pd: u32,
    pub ring: Ring,
    pub log: u8,
    pub limit: u32,
}

/// What the host has registered, as the NIC acknowledged it.
#[derive(Clone, Debug, Default)]
pub struct Shadow {
    pub pds: Vec<u32>,
    pub mrs: Vec<Mr>,
    pub cqs: Vec<(u32, Ring, u8)>,
    pub qps: Vec<QpRings>,
    pub srqs: Vec<Srq>,
    /// Doorbell records (`CreateQpArg::db_record`, 8 bytes each) of every CREATE_QP the
    /// host issued: memory it configured for the NIC to read, like a ring. Noted when
    /// the command is issued, since the NIC reads the record while creating the QP;
    /// kept after a failed create or a destroy (a read of it still only reaches memory
    /// the host pointed the NIC at).
    pub db_records: Vec<Ring>,
    /// Host buffers QUERY_COUNTERS commands named (8 bytes per counter wanted): memory
    /// the kernel gave the NIC to write, noted when the command is issued.
    pub counter_bufs: Vec<Ring>,
    /// The port's configuration as set, checked against every answer.
    pub port: PortModel,
    /// The victim's PD and QPNs (fixed at setup).
    pub victim_pd: Option<u32>,
    pub victim_cq: Option<u32>,
    pub victim_qps: Vec<u32>,
    /// The victim's memory windows as it bound them (`mw::check_bindings`).
    pub victim_windows: Vec<MemoryWindow>,
}

impl Shadow {
    /// Notes a REG_MR work request a QP of PD `pd` is given: the region it would
    /// register may be used from then on (until the MR is deregistered), whether or not
    /// the NIC accepts it (if it refuses, no access through it happens anyway).
    pub fn note_fast_reg(&mut self, pd: u32, w: &abi::SendWqe) {
        self.mrs.push(Mr {
            lkey: w.rkey.get(),
            pd,
            addr: w.remote_addr.get(),
            len: w.compare.get(),
            access: AccessFlags::from_bits(w.remote_qkey.get()).unwrap_or(AccessFlags::NONE),
        });
    }

    /// Notes the host memory a command about to be issued gives the NIC: a CREATE_QP's
    /// doorbell record, a QUERY_COUNTERS' buffer.
    pub fn note_buffers(&mut self, e: &CmdEntry) {
        match CmdOp::from_u16(e.opcode.get()) {
            Some(CmdOp::CreateQp) => {
                let at = abi::payload::<abi::CreateQpArg>(e).db_record.get();
                if at != 0 {
                    self.db_records.push(Ring::new(at, 0, 8));
                }
            }
            Some(CmdOp::QueryCounters) => {
                let a = abi::payload::<abi::QueryCountersArg>(e);
                self.counter_bufs.push(Ring {
                    addr: a.addr.get(),
                    len: 8 * u64::from(a.count.get()),
                });
            }
            _ => {}
        }
    }

    /// Applies a command entry the NIC wrote back, checking what the NIC answered where
    /// the host knows the answer: the GSI QP is QP1 and there is at most one; an SRQ's
    /// QUERY_SRQ reports the depth it was created with and the limit last armed (or 0:
    /// the limit event disarms it).
    fn apply(&mut self, e: &CmdEntry, counters: Option<&[u64]>) {
        self.port.check(e, counters);
        if e.status.get() != CmdStatus::Ok as u32 {
            return;
        }
        let out = e.out.get();
        let handle = abi::payload::<abi::HandleArg>(e).handle.get();
        match CmdOp::from_u16(e.opcode.get()) {
            Some(CmdOp::AllocPd) => self.pds.push(out),
            Some(CmdOp::DeallocPd) => self.pds.retain(|&p| p != handle),
            Some(CmdOp::RegMr) => {
                let a = abi::payload::<abi::RegMrArg>(e);
                self.mrs.push(Mr {
                    lkey: out,
                    pd: a.pd.get(),
                    addr: a.addr.get(),
                    len: a.length.get(),
                    access: AccessFlags::from_bits(a.access.get()).unwrap_or(AccessFlags::NONE),
                });
            }
            // A fast-registration MR's every key (the tag is the low byte) goes with it.
            Some(CmdOp::DeregMr) => self.mrs.retain(|m| m.lkey >> 8 != handle >> 8),
            Some(CmdOp::CreateCq) => {
                let a = abi::payload::<abi::CreateCqArg>(e);
                let ring = Ring::new(a.ring.get(), a.log_depth, size_of::<abi::Cqe>());
                self.cqs.push((out, ring, a.log_depth));
            }
            Some(CmdOp::DestroyCq) => self.cqs.retain(|c| c.0 != handle),
            Some(CmdOp::CreateQp) => {
                let a = abi::payload::<abi::CreateQpArg>(e);
                let gsi = Qpn::GSI.value();
                assert_eq!(
                    a.qp_type == abi::QPT_GSI,
                    out == gsi,
                    "CREATE_QP of type {} gave QPN {out}",
                    a.qp_type
                );
                assert!(
                    out != gsi || self.qps.iter().all(|q| q.qpn != gsi),
                    "a second GSI QP was created"
                );
                self.qps.push(QpRings {
                    qpn: out,
                    pd: a.pd.get(),
                    qp_type: a.qp_type,
                    sq: Ring::new(a.sq_ring.get(), a.sq_log_depth, size_of::<abi::SendWqe>()),
                    sq_log: a.sq_log_depth,
                    rq: Ring::new(a.rq_ring.get(), a.rq_log_depth, size_of::<abi::RecvWqe>()),
                    rq_log: a.rq_log_depth,
                    srqn: a.srqn.get(),
                });
            }
            Some(CmdOp::DestroyQp) => self.qps.retain(|q| q.qpn != handle),
            Some(CmdOp::CreateSrq) => {
                let a = abi::payload::<abi::CreateSrqArg>(e);
                self.srqs.push(Srq {
                    srqn: out,
                    pd: a.pd.get(),
                    ring: Ring::new(a.ring.get(), a.log_depth, size_of::<abi::RecvWqe>()),
                    log: a.log_depth,
                    limit: a.srq_limit.get(),
                });
            }
            Some(CmdOp::ModifySrq) => {
                let a = abi::payload::<abi::SrqAttrArg>(e);
                let srq = self.srqs.iter_mut().find(|s| s.srqn == a.srqn.get());
                srq.expect("MODIFY_SRQ succeeded on no live SRQ").limit = a.srq_limit.get();
            }
            Some(CmdOp::QuerySrq) => {
                let a = abi::payload::<abi::SrqAttrArg>(e);
                let s = self.srqs.iter().find(|s| s.srqn == a.srqn.get());
                let s = s.expect("QUERY_SRQ succeeded on no live SRQ");
                assert_eq!(a.max_wr.get(), 1 << s.log, "QUERY_SRQ's max_wr");
                assert!(
                    a.srq_limit.get() == s.limit || a.srq_limit.get() == 0,
                    "QUERY_SRQ's limit {}, armed {}",
                    a.srq_limit.get(),
                    s.limit
                );
            }
            Some(CmdOp::DestroySrq) => self.srqs.retain(|s| s.srqn != handle),
            _ => {}
        }
    }

    pub fn is_victim_qp(&self, qpn: u32) -> bool {
        self.victim_qps.contains(&qpn)
    }

    /// Whether SRQN `srqn` is a live SRQ of the victim's PD.
    pub fn is_victim_srq(&self, srqn: u32) -> bool {
        self.srqs
            .iter()
            .any(|s| s.srqn == srqn && Some(s.pd) == self.victim_pd)
    }
}

/// Host memory: the four arenas, the shadow, and the command queue's place (read from
/// the registers the host wrote).
#[derive(Clone)]
pub struct HostMem {
    arenas: [(u64, Vec<u8>); 4],
    pub shadow: Shadow,
    cmdq: Ring,
    /// Per QP, the verdict of the multi-packet WRITE whose first packet it last placed
    /// (`None`: not through a window): the message its middle and last packets continue.
    /// A first packet counts only once it places data, because only then did the
    /// responder take its RETH: a first packet with a PSN before the expected one is a
    /// duplicate, answered with an ACK and not executed again, and one after it is
    /// out of sequence and dropped (roce-facts §6.3, rxe `check_psn`/`duplicate_request`),
    /// whatever its RETH says. A first packet always places data (its payload is one
    /// MTU), so the first access made while it is received is its own. Judging by PSN
    /// order instead failed twice: a resent last packet after a refused out-of-sequence
    /// first, and a message resent from its first packet with another RETH while the
    /// responder, RNR-NAKing the last packet, still held the original's cursor (both
    /// found by the `abi` campaign).
    messages: Vec<(u32, Option<Limit>)>,
}

impl HostMem {
    /// The host set the command queue's depth register to `log` (the NIC takes at most
    /// `MAX_LOG_DEPTH`): the queue's window follows.
    pub fn set_cmdq_log(&mut self, log: u32) {
        let log = log.min(u32::from(MAX_LOG_DEPTH)) as u8;
        self.cmdq = Ring::new(KERNEL, log, size_of::<CmdEntry>());
    }
}

impl HostMem {
    fn new() -> Self {
        Self {
            arenas: [
                (KERNEL, vec![0; ARENA]),
                (VICTIM, vec![0; ARENA]),
                (HOSTILE, vec![0; ARENA]),
                (COUNTERS, vec![0; COUNTERS_ARENA]),
            ],
            shadow: Shadow::default(),
            cmdq: Ring::new(KERNEL, CMDQ_LOG, size_of::<CmdEntry>()),
            messages: Vec::new(),
        }
    }

    /// The verdict of the message QP `qpn` continues (none placed yet: no limit).
    fn message(&self, qpn: u32) -> Option<Limit> {
        self.messages.iter().find(|m| m.0 == qpn).and_then(|m| m.1)
    }

    /// A first packet placed data (see [`HostMem::messages`]): QP `qpn` continues its
    /// message from now on.
    fn opened(&mut self, qpn: u32, limit: Option<Limit>) {
        match self.messages.iter_mut().find(|m| m.0 == qpn) {
            Some(m) => m.1 = limit,
            None => self.messages.push((qpn, limit)),
        }
    }

    fn slice(&self, addr: u64, len: usize) -> Option<&[u8]> {
        self.arenas.iter().find_map(|(base, v)| {
            let off = usize::try_from(addr.checked_sub(*base)?).ok()?;
            v.get(off..off.checked_add(len)?)
        })
    }

    fn slice_mut(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        self.arenas.iter_mut().find_map(|(base, v)| {
            let off = usize::try_from(addr.checked_sub(*base)?).ok()?;
            v.get_mut(off..off.checked_add(len)?)
        })
    }

    /// The host's own access (no checks); `None` outside every arena.
    pub fn get(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        self.slice(addr, len).map(<[u8]>::to_vec)
    }

    /// The host's own write (no checks); false outside every arena.
    pub fn put(&mut self, addr: u64, data: &[u8]) -> bool {
        match self.slice_mut(addr, data.len()) {
            Some(s) => {
                s.copy_from_slice(data);
                true
            }
            None => false,
        }
    }

    fn ring_allows(&self, addr: u64, len: usize, write: bool) -> bool {
        let s = &self.shadow;
        self.cmdq.holds(addr, len)
            || (write && s.cqs.iter().any(|c| c.1.holds(addr, len)))
            || (!write
                && s.qps
                    .iter()
                    .any(|q| q.sq.holds(addr, len) || (q.srqn == 0 && q.rq.holds(addr, len)))
                || (!write && s.srqs.iter().any(|q| q.ring.holds(addr, len)))
                || (!write && s.db_records.iter().any(|d| d.holds(addr, len)))
                || (write && s.counter_bufs.iter().any(|d| d.holds(addr, len))))
    }

    /// Panics unless the access is allowed (see the module doc); returns whether it lies
    /// in a region of the victim's PD and of another (neither for a ring access).
    fn check(&self, addr: u64, len: usize, write: bool) -> (bool, bool) {
        if len == 0 || self.ring_allows(addr, len, write) {
            return (false, false);
        }
        let what = if write { "write" } else { "read" };
        let ctx = CTX.get();
        let victim_pd = self.shadow.victim_pd;
        let mut owners = self
            .shadow
            .mrs
            .iter()
            .filter(|m| range_within(m.addr, m.len, addr, len as u64))
            .filter(|m| !write || m.access.contains(AccessFlags::LOCAL_WRITE))
            .map(|m| Some(m.pd) == victim_pd);
        let (victim, hostile) = (owners.clone().any(|v| v), owners.any(|v| !v));
        let ok = match ctx {
            Ctx::Idle => false,
            Ctx::Rx { victim: true, .. } => victim,
            Ctx::Rx { victim: false, .. } => hostile,
            Ctx::Tx => victim || hostile,
        };
        if let Ctx::Rx { limit, part, .. } = ctx {
            let limit = match part {
                Part::Rest(qpn) => self.message(qpn),
                Part::Whole | Part::First(_) => limit,
            };
            if let Some(limit) = limit {
                assert!(
                    limit.allows(addr, len),
                    "DMA {what} of [{addr:#x}, +{len:#x}) for a request through a memory \
                 window: the window allows {limit:?} (`fuzz/src/mw.rs`)"
                );
            }
        }
        assert!(
            ok,
            "DMA {what} of [{addr:#x}, +{len:#x}) in {ctx:?}: not a ring, and no live \
             region of the right tenant allows it; shadow {:?}",
            self.shadow
        );
        // (The arenas are disjoint, so no access is in both tenants' regions.)
        (victim, hostile)
    }

    /// Learns from a command entry the NIC has written back: called after a write into
    /// the command queue, it reads the entry whose status word the write is (the NIC
    /// writes an entry back in three writes, the 4-byte status word last, so the entry
    /// is then complete).
    ///
    /// Only a write of exactly that word counts. (QUERY_COUNTERS buffers lie beyond any
    /// queue, [`COUNTERS`]; when they could overlap it, skipping every write inside a
    /// counters buffer hid commands the NIC ran from such slots.)
    fn observe(&mut self, addr: u64, len: usize) {
        const ENTRY: u64 = size_of::<CmdEntry>() as u64;
        const STATUS: u64 = core::mem::offset_of!(CmdEntry, status) as u64;
        if len != 4 || !self.cmdq.holds(addr, len) {
            return;
        }
        let slot = addr - (addr - self.cmdq.addr) % ENTRY;
        if addr != slot + STATUS {
            return;
        }
        let entry = self.slice(slot, ENTRY as usize);
        if let Some(e) = entry.and_then(|b| CmdEntry::read_from_bytes(b).ok()) {
            // The counters a QUERY_COUNTERS wrote before its status.
            let counters = PortModel::counters_written(&e).and_then(|(at, n)| {
                let bytes = self.get(at, 8 * n)?;
                let word = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
                Some(bytes.chunks_exact(8).map(word).collect::<Vec<_>>())
            });
            self.shadow.apply(&e, counters.as_deref());
        }
    }
}

impl Dma for HostMem {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let (victim, hostile) = self.check(addr, buf.len(), false);
        let len = buf.len();
        // A failed read gives the NIC no bytes, so none can reach a frame: not logged.
        let src = self.slice(addr, len).ok_or(DmaError { addr, len })?;
        buf.copy_from_slice(src);
        if CTX.get() == Ctx::Tx {
            TX_READS.with_borrow_mut(|r| r.push(src, victim, hostile));
        }
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        self.check(addr, data.len(), true);
        if let Ctx::Rx {
            limit,
            part: Part::First(qpn),
            ..
        } = CTX.get()
        {
            self.opened(qpn, limit);
        }
        let len = data.len();
        let dst = self.slice_mut(addr, len).ok_or(DmaError { addr, len })?;
        dst.copy_from_slice(data);
        self.observe(addr, len);
        Ok(())
    }
}

/// Whether a frame is the victim's (see the module doc), given the victim's QPNs.
fn victim_frame(victim_qps: &[u32], frame: &[u8]) -> bool {
    wire::parse_unverified(frame).is_ok_and(|p| {
        p.headers().ext.deth.is_none() && victim_qps.contains(&p.bth().dest_qp.value())
    })
}

/// The port, looped back: every frame sent is received again, in order.
#[derive(Clone, Default)]
pub struct LoopPort {
    frames: VecDeque<Vec<u8>>,
    /// The victim's QPNs, to classify frames (a copy of the shadow's).
    pub victim_qps: Vec<u32>,
}

/// Frames the port holds before it pushes back.
const PORT_FRAMES: usize = 8;

impl LoopPort {
    fn classify(&self, frame: &[u8]) -> bool {
        victim_frame(&self.victim_qps, frame)
    }

    /// What a received frame may touch when it opens a request through a memory
    /// window (`mw::verdict`), and which part of a WRITE it is.
    fn judge(frame: &[u8]) -> (Option<Limit>, Part) {
        let Ok(p) = wire::parse_unverified(frame) else {
            return (None, Part::Whole);
        };
        let info = p.info();
        let qpn = p.dest_qp().value();
        let part = match (info.operation, info.position) {
            (wire::opcode::Operation::RdmaWrite, pos) if !pos.starts() => Part::Rest(qpn),
            (wire::opcode::Operation::RdmaWrite, pos) if !pos.ends() => Part::First(qpn),
            _ => Part::Whole,
        };
        (mw::verdict(&p), part)
    }
}

impl Datapath for LoopPort {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        if CTX.get() == Ctx::Tx {
            let payload = wire::parse_unverified(frame).ok().map(|p| p.payload());
            let (victim, hostile) = TX_READS.with_borrow(|r| r.owners(payload));
            let mine = self.classify(frame);
            assert!(
                !(mine && hostile),
                "a victim frame carries hostile memory: {frame:02x?}"
            );
            assert!(
                mine || !victim,
                "a hostile frame carries victim memory: {frame:02x?}"
            );
        }
        CTX.set(Ctx::Idle);
        if self.frames.len() >= PORT_FRAMES {
            return false;
        }
        self.frames.push_back(frame.to_vec());
        true
    }

    fn can_transmit(&self) -> bool {
        leave();
        TX_READS.with_borrow_mut(TxReads::clear);
        CTX.set(Ctx::Tx);
        self.frames.len() < PORT_FRAMES
    }

    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        leave();
        let f = self.frames.pop_front()?;
        let dst = buf.get_mut(..f.len())?;
        dst.copy_from_slice(&f);
        let (limit, part) = Self::judge(&f);
        CTX.set(Ctx::Rx {
            victim: self.classify(&f),
            limit,
            part,
        });
        Some(f.len())
    }
}

/// The HAL: registers, host memory, the looped port, a clock.
#[derive(Clone)]
pub struct FuzzHal {
    /// Written by the host only through [`FuzzHal::host_write`], which latches doorbells.
    regs: RegFile,
    /// A queue doorbell was written since the runtime last looked: the pending bit the
    /// hardware and the other HALs keep (`reg::is_queue_doorbell`). Without it the
    /// runtime read every QP's doorbells at each of the ~60 polls of an input, work no
    /// platform does.
    doorbell: bool,
    pub mem: HostMem,
    pub port: LoopPort,
    pub clock: u64,
}

impl FuzzHal {
    /// The host's MMIO write, as `RegFile::host_write`; a queue doorbell also sets the
    /// pending bit.
    pub fn host_write(&mut self, offset: u32, value: u32) {
        self.doorbell |= reg::is_queue_doorbell(offset);
        self.regs.host_write(offset, value);
    }

    /// The host's MMIO read.
    pub fn host_read(&self, offset: u32) -> u32 {
        self.regs.host_read(offset)
    }
}

impl Hal for FuzzHal {
    type Dma = HostMem;
    type Datapath = LoopPort;

    fn reg_read(&mut self, offset: u32) -> u32 {
        // The command queue's window follows what the host configured.
        self.regs.nic_read(offset)
    }
    fn reg_write(&mut self, offset: u32, value: u32) {
        self.regs.nic_write(offset, value);
    }
    fn dma(&mut self) -> &mut HostMem {
        leave();
        &mut self.mem
    }
    fn datapath(&mut self) -> &mut LoopPort {
        &mut self.port
    }
    fn split(&mut self) -> (&mut HostMem, &mut LoopPort) {
        (&mut self.mem, &mut self.port)
    }
    fn now(&mut self) -> u64 {
        self.clock
    }
    fn take_doorbells(&mut self) -> bool {
        core::mem::replace(&mut self.doorbell, false)
    }
    fn take_rung_qps(&mut self, rung: &mut QpMap) -> bool {
        self.regs.take_rung_qps(rung)
    }
}

/// The NIC under test: the firmware's capacities.
pub type Nic = FirmwareNic<FuzzHal>;

/// A booted NIC with the command queue configured.
pub fn boot() -> Nic {
    let hal = FuzzHal {
        regs: RegFile::new(),
        doorbell: true,
        mem: HostMem::new(),
        port: LoopPort::default(),
        clock: 0,
    };
    let cfg = PortConfig::new(MAC, gid());
    let mut nic = Nic::new(hal, cfg);
    nic.hal().mem.shadow.port = PortModel::boot(&cfg);
    let hal = nic.hal();
    hal.host_write(reg::CMDQ_BASE_LO, KERNEL as u32);
    hal.host_write(reg::CMDQ_BASE_HI, (KERNEL >> 32) as u32);
    hal.host_write(reg::CMDQ_LOG_DEPTH, u32::from(CMDQ_LOG));
    nic
}

/// The host side: the kernel's command queue and each tenant's rings.
#[derive(Clone, Debug, Default)]
pub struct Host {
    /// The kernel's producer index of the command queue.
    pub cmdq_pi: u32,
    /// Per QP: send and receive producer indices.
    pub sq_pi: Vec<(u32, u32, u32)>,
    /// Per CQ: consumer index.
    pub cq_ci: Vec<(u32, u32)>,
    /// Per SRQ: producer index.
    pub srq_pi: Vec<(u32, u32)>,
}

impl Host {
    /// Writes a command at the kernel's producer index and rings the doorbell (the NIC
    /// runs it at its next poll). False when the slot is outside the kernel's memory
    /// (the host itself moved the queue).
    pub fn command(&mut self, nic: &mut Nic, e: &CmdEntry) -> bool {
        let hal = nic.hal();
        let log = hal.host_read(reg::CMDQ_LOG_DEPTH).min(15);
        let mask = (1u32 << log) - 1;
        let addr = KERNEL + u64::from(self.cmdq_pi & mask) * size_of::<CmdEntry>() as u64;
        if !hal.mem.put(addr, e.as_bytes()) {
            return false;
        }
        self.cmdq_pi = self.cmdq_pi.wrapping_add(1);
        hal.host_write(reg::CMDQ_PI, self.cmdq_pi);
        true
    }

    /// Runs one command to completion and returns the entry as the NIC wrote it back.
    pub fn run(&mut self, nic: &mut Nic, op: CmdOp, fill: impl FnOnce(&mut CmdEntry)) -> CmdEntry {
        let mut e = CmdEntry::default();
        e.opcode.set(op as u16);
        fill(&mut e);
        let slot = self.cmdq_pi & ((1 << CMDQ_LOG) - 1);
        assert!(self.command(nic, &e), "setup command outside the queue");
        nic.poll();
        let addr = KERNEL + u64::from(slot) * size_of::<CmdEntry>() as u64;
        let bytes = nic.hal().mem.get(addr, size_of::<CmdEntry>());
        bytes
            .and_then(|b| CmdEntry::read_from_bytes(&b).ok())
            .expect("the entry")
    }

    /// Runs a command that must succeed; returns its `out`.
    pub fn ok(&mut self, nic: &mut Nic, op: CmdOp, fill: impl FnOnce(&mut CmdEntry)) -> u32 {
        let e = self.run(nic, op, fill);
        assert_eq!(
            CmdStatus::from_u32(e.status.get()),
            Some(CmdStatus::Ok),
            "{op:?}"
        );
        e.out.get()
    }

    /// The producer indices of QP `qpn` (created on first use).
    pub fn pis(&mut self, qpn: u32) -> &mut (u32, u32, u32) {
        if let Some(i) = self.sq_pi.iter().position(|p| p.0 == qpn) {
            return &mut self.sq_pi[i];
        }
        self.sq_pi.push((qpn, 0, 0));
        self.sq_pi.last_mut().expect("just pushed")
    }

    /// Writes a send WQE at QP `q`'s producer index and rings its doorbell.
    pub fn post_send(&mut self, nic: &mut Nic, q: &QpRings, wqe: &abi::SendWqe) {
        let pi = self.pis(q.qpn).1;
        let addr = slot(q.sq.addr, q.sq_log, pi, size_of::<abi::SendWqe>());
        nic.hal().mem.put(addr, wqe.as_bytes());
        self.pis(q.qpn).1 = pi.wrapping_add(1);
        let db = reg::sq_db(doorbell_index(q.qpn));
        nic.hal().host_write(db, pi.wrapping_add(1));
    }

    /// Writes a receive WQE at QP `q`'s producer index and rings its doorbell.
    pub fn post_recv(&mut self, nic: &mut Nic, q: &QpRings, wqe: &abi::RecvWqe) {
        let pi = self.pis(q.qpn).2;
        let addr = slot(q.rq.addr, q.rq_log, pi, size_of::<abi::RecvWqe>());
        nic.hal().mem.put(addr, wqe.as_bytes());
        self.pis(q.qpn).2 = pi.wrapping_add(1);
        let db = reg::rq_db(doorbell_index(q.qpn));
        nic.hal().host_write(db, pi.wrapping_add(1));
    }

    /// Writes a receive WQE at SRQ `s`'s producer index and rings its doorbell.
    pub fn post_srq_recv(&mut self, nic: &mut Nic, s: &Srq, wqe: &abi::RecvWqe) {
        let pi = self.srq_pi(s.srqn);
        let addr = slot(s.ring.addr, s.log, *pi, size_of::<abi::RecvWqe>());
        *pi = pi.wrapping_add(1);
        let pi = *pi;
        nic.hal().mem.put(addr, wqe.as_bytes());
        nic.hal().host_write(reg::srq_db(s.srqn), pi);
    }

    /// The producer index of SRQ `srqn` (created on first use).
    pub fn srq_pi(&mut self, srqn: u32) -> &mut u32 {
        let i = match self.srq_pi.iter().position(|p| p.0 == srqn) {
            Some(i) => i,
            None => {
                self.srq_pi.push((srqn, 0));
                self.srq_pi.len() - 1
            }
        };
        &mut self.srq_pi[i].1
    }

    /// Takes every valid CQE from CQ `cqn` (ring `ring`, depth `2^log`) and writes the
    /// consumer index back.
    pub fn poll_cq(&mut self, nic: &mut Nic, cqn: u32, ring: u64, log: u8) -> Vec<abi::Cqe> {
        let i = match self.cq_ci.iter().position(|c| c.0 == cqn) {
            Some(i) => i,
            None => {
                self.cq_ci.push((cqn, 0));
                self.cq_ci.len() - 1
            }
        };
        let mut ci = self.cq_ci[i].1;
        let mut out = Vec::new();
        loop {
            let addr = slot(ring, log, ci, size_of::<abi::Cqe>());
            let Some(cqe) = nic
                .hal()
                .mem
                .get(addr, size_of::<abi::Cqe>())
                .and_then(|b| abi::Cqe::read_from_bytes(&b).ok())
            else {
                break;
            };
            if !abi::cqe_valid(cqe.owner, ci, log) {
                break;
            }
            out.push(cqe);
            ci = ci.wrapping_add(1);
        }
        self.cq_ci[i].1 = ci;
        nic.hal().host_write(reg::cq_db(cqn), ci);
        out
    }
}

/// Address of ring slot `index`.
pub fn slot(ring: u64, log: u8, index: u32, size: usize) -> u64 {
    let mask = (1u32 << log.min(31)) - 1;
    ring.wrapping_add(u64::from(index & mask) * size as u64)
}

/// The kernel's check of a tenant's command: the hostile tenant may not name the
/// victim's PD, CQ, QPs, SRQs, memory regions or windows, nor connect a QP to a victim QP (RoCE does not
/// authenticate an RC sender, so a QP that knows a victim's QPN, PSN and R_Key may
/// legitimately write there: that is the wire's trust model, not the NIC's isolation);
/// and what it places in memory (regions, rings) lands in its own arena ([`confine`]).
/// The port's commands are the kernel's own; of them it passes on a tenant's
/// MODIFY_QP_CC only for the tenant's QPs, and it places QUERY_COUNTERS' buffers at
/// [`COUNTERS`]. Returns false for a command the kernel refuses; rewrites addresses in place.
pub fn admit(e: &mut CmdEntry, s: &Shadow) -> bool {
    use roce_core::transport::AttrMask;
    let victim_pd = |pd: u32| s.victim_pd == Some(pd);
    let victim_cq = |cq: u32| s.victim_cq == Some(cq);
    let victim_mr = |lkey: u32| s.mrs.iter().any(|m| m.lkey == lkey && victim_pd(m.pd));
    let handle = abi::payload::<abi::HandleArg>(e).handle.get();
    match CmdOp::from_u16(e.opcode.get()) {
        Some(CmdOp::DeallocPd) => !victim_pd(handle),
        Some(CmdOp::DeregMr) => !victim_mr(handle),
        Some(CmdOp::DestroyCq) => !victim_cq(handle),
        Some(CmdOp::DestroyQp) => !s.is_victim_qp(handle),
        Some(CmdOp::RegMr) => {
            let mut a = abi::payload::<abi::RegMrArg>(e);
            a.addr.set(confine(a.addr.get()));
            abi::set_payload(e, &a);
            !victim_pd(a.pd.get())
        }
        Some(CmdOp::CreateCq) => {
            let mut a = abi::payload::<abi::CreateCqArg>(e);
            a.ring.set(confine(a.ring.get()));
            abi::set_payload(e, &a);
            true
        }
        Some(CmdOp::CreateQp) => {
            let mut a = abi::payload::<abi::CreateQpArg>(e);
            a.sq_ring.set(confine(a.sq_ring.get()));
            a.rq_ring.set(confine(a.rq_ring.get()));
            if a.db_record.get() != 0 {
                a.db_record.set(confine(a.db_record.get()));
            }
            abi::set_payload(e, &a);
            !victim_pd(a.pd.get())
                && !victim_cq(a.send_cq.get())
                && !victim_cq(a.recv_cq.get())
                && !s.is_victim_srq(a.srqn.get())
        }
        Some(CmdOp::CreateSrq) => {
            let mut a = abi::payload::<abi::CreateSrqArg>(e);
            a.ring.set(confine(a.ring.get()));
            abi::set_payload(e, &a);
            !victim_pd(a.pd.get())
        }
        Some(CmdOp::ModifySrq) => !s.is_victim_srq(abi::payload::<abi::SrqAttrArg>(e).srqn.get()),
        Some(CmdOp::ModifyQpCc) => !s.is_victim_qp(abi::payload::<abi::QpCcArg>(e).qpn.get()),
        Some(CmdOp::QueryCounters) => {
            let mut a = abi::payload::<abi::QueryCountersArg>(e);
            a.addr.set(COUNTERS + a.addr.get() % 0x7000);
            abi::set_payload(e, &a);
            true
        }
        Some(CmdOp::DestroySrq) => !s.is_victim_srq(handle),
        Some(CmdOp::AllocMw) => !victim_pd(abi::payload::<abi::AllocMwArg>(e).pd.get()),
        Some(CmdOp::AllocMr) => !victim_pd(abi::payload::<abi::RegMrArg>(e).pd.get()),
        // Any key of a window names it (the tag is ignored).
        Some(CmdOp::DeallocMw) => !s
            .victim_windows
            .iter()
            .any(|w| w.rkey.0 >> 8 == handle >> 8),
        Some(CmdOp::ModifyQp) => {
            let a = abi::payload::<abi::QpAttrArg>(e);
            let to_victim = a.attr_mask.get() & AttrMask::DEST_QPN.bits() != 0
                && s.is_victim_qp(a.dest_qp_num.get());
            !s.is_victim_qp(a.qpn.get()) && !to_victim
        }
        // Queries change nothing; an unknown opcode is the NIC's to refuse.
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::TxReads;

    fn reads(list: &[(&[u8], bool, bool)]) -> TxReads {
        let mut r = TxReads::default();
        for &(data, victim, hostile) in list {
            r.push(data, victim, hostile);
        }
        r
    }

    #[test]
    fn a_frame_carries_only_the_reads_its_payload_is_made_of() {
        // A hostile gather read one SGE, then faulted (not logged); the victim's frame
        // was read next, in two pieces.
        let r = reads(&[
            (&[9; 4], false, true),
            (&[1, 2], true, false),
            (&[3], true, false),
        ]);
        assert_eq!(r.owners(Some(&[1, 2, 3])), (true, false));
        // No payload: no memory.
        assert_eq!(r.owners(Some(&[])), (false, false));
    }

    #[test]
    fn a_payload_not_simply_read_is_judged_by_every_read() {
        let r = reads(&[(&[9; 4], false, true), (&[1, 2], true, false)]);
        // Same length as the last read, other bytes; a length no suffix of reads makes;
        // no payload parsed.
        assert_eq!(r.owners(Some(&[1, 7])), (true, true));
        assert_eq!(r.owners(Some(&[9, 1, 2])), (true, true));
        assert_eq!(r.owners(None), (true, true));
        // A hostile frame whose payload ends with the victim's read carries it.
        assert_eq!(r.owners(Some(&[9, 9, 9, 9, 1, 2])), (true, true));
    }
}
