//! QP contexts as bytes, for a context store outside the engine (`docs/scale.md`): the
//! firmware keeps a few QPs resident in the engine's slots (its context cache) and the
//! others in an ICM area in host memory. [`Engine::evict_qp`] writes a QP's whole state
//! into [`QP_CTX_LEN`] bytes and frees its slot; [`Engine::restore_qp`] checks such bytes
//! (a CRC, every enumerated field, the PD and CQs it names) and makes the QP resident
//! again. Nothing is lost: a QP is evictable only while none of its WQEs has started
//! (those the engine fetched are handed back: the host rings still hold them) and no
//! response is under way; a message half received is stored where it stands.
//!
//! Layout (little endian, version 2: 1 plus `max_inline_data` and the SRQ after
//! `sq_sig_all`): the QP context field by field, its DCQCN state,
//! its selective-repeat records, the responder's replay ring, zeros, and a CRC-32 of
//! everything before it in the last four bytes.

use super::{Engine, NoDma, QPN_BASE};
use crate::cc::QpCc;
use crate::memory::{AccessFlags, Pd};
use crate::num::{Msn, Psn, Qkey, Qpn, Rkey};
use crate::transport::{
    AckOut, AckTimeout, AddressVector, Completer, CurOp, Error, Instant, Mtu, Qp, QpState, QpType,
    RdRes, Requester, Responder, SrqHandle,
};
use crate::wire::aeth::Syndrome;

/// Bytes of one QP context in the store, CRC included.
pub const QP_CTX_LEN: usize = 960;

/// Version byte at offset 0.
const VERSION: u8 = 2;

/// Most replay-ring entries a context holds (the engine's `RD` may not exceed it).
pub const MAX_CTX_RD: usize = 16;

/// What [`Engine::evict_qp`] handed back: WQEs the engine had fetched but not started.
/// The host's rings still hold them; the caller fetches them again after a restore
/// (moves its consumer indexes back by these counts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Evicted {
    /// Send WQEs, the newest of the send queue's fetched ones.
    pub sq_wqes: u16,
    /// Receive WQEs, the newest fetched.
    pub rq_wqes: u16,
}

/// A context's bytes did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtxError;

/// Writes fields one after another; running past the end is remembered, not a panic.
pub(crate) struct Put<'a> {
    buf: &'a mut [u8],
    at: usize,
    overflow: bool,
}

impl<'a> Put<'a> {
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Self {
            buf,
            at: 0,
            overflow: false,
        }
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        let end = self.at.saturating_add(b.len());
        match self.buf.get_mut(self.at..end) {
            Some(d) => d.copy_from_slice(b),
            None => self.overflow = true,
        }
        self.at = end;
    }
    pub(crate) fn u8(&mut self, v: u8) {
        self.bytes(&[v]);
    }
    pub(crate) fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.bytes(&v.to_le_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    pub(crate) fn opt_u64(&mut self, v: Option<u64>) {
        self.bool(v.is_some());
        self.u64(v.unwrap_or(0));
    }
}

/// Reads what [`Put`] wrote; every read checks the length and every flag its range.
pub(crate) struct Get<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Get<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, at: 0 }
    }
    pub(crate) fn bytes<const N: usize>(&mut self) -> Result<[u8; N], CtxError> {
        let end = self.at.saturating_add(N);
        let b = self.buf.get(self.at..end).ok_or(CtxError)?;
        self.at = end;
        b.try_into().map_err(|_| CtxError)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, CtxError> {
        Ok(self.bytes::<1>()?[0])
    }
    pub(crate) fn bool(&mut self) -> Result<bool, CtxError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(CtxError),
        }
    }
    pub(crate) fn u16(&mut self) -> Result<u16, CtxError> {
        Ok(u16::from_le_bytes(self.bytes()?))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, CtxError> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, CtxError> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }
    pub(crate) fn opt_u64(&mut self) -> Result<Option<u64>, CtxError> {
        let some = self.bool()?;
        let v = self.u64()?;
        Ok(some.then_some(v))
    }
}

fn put_av(w: &mut Put<'_>, av: &AddressVector) {
    w.bytes(&av.dmac);
    w.bytes(&av.dgid);
    w.u8(av.sgid_index);
    w.u8(av.hop_limit);
    w.u8(av.traffic_class);
    w.u32(av.flow_label);
    w.u8(av.sl);
    w.bool(av.vlan_id.is_some());
    w.u16(av.vlan_id.unwrap_or(0));
}

fn get_av(r: &mut Get<'_>) -> Result<AddressVector, CtxError> {
    let dmac = r.bytes()?;
    let dgid = r.bytes()?;
    let (sgid_index, hop_limit, traffic_class) = (r.u8()?, r.u8()?, r.u8()?);
    let flow_label = r.u32()?;
    let sl = r.u8()?;
    let tagged = r.bool()?;
    let vid = r.u16()?;
    Ok(AddressVector {
        dmac,
        dgid,
        sgid_index,
        hop_limit,
        traffic_class,
        flow_label,
        sl,
        vlan_id: tagged.then_some(vid),
    })
}

fn put_qp(w: &mut Put<'_>, qp: &Qp) {
    w.u32(qp.qpn.value());
    w.u8(qp.qp_type as u8);
    w.u8(qp.state as u8);
    w.bool(qp.sq_sig_all);
    w.u8(qp.max_inline);
    w.bool(qp.srq.is_some());
    w.u16(qp.srq.map_or(0, |h| h.0));
    w.u16(qp.pd.index());
    w.u16(qp.send_cq);
    w.u16(qp.recv_cq);
    w.u32(qp.access.bits());
    w.u16(qp.pkey_index);
    w.u16(qp.pkey);
    w.u32(qp.qkey.0);
    put_av(w, &qp.av);
    w.u8(qp.mtu as u8);
    w.u32(qp.dest_qpn.value());
    w.u8(qp.timeout.code());
    for v in [
        qp.retry_cnt,
        qp.rnr_retry,
        qp.min_rnr_timer,
        qp.max_rd_atomic,
        qp.max_dest_rd_atomic,
    ] {
        w.u8(v);
    }
    w.u16(qp.udp_sport);
    let q = &qp.req;
    w.u32(q.psn.value());
    w.u32(q.max_psn.value());
    w.u16(q.wqe_idx);
    w.u32(q.pkt_idx);
    w.u8(q.rd_atomic);
    w.u32(q.noack_pkts);
    w.bool(q.fastpath);
    w.bool(q.rewound);
    let c = &qp.comp;
    w.u32(c.psn.value());
    w.u8(c.retry_left);
    w.u8(c.rnr_left);
    w.bool(c.started_retry);
    w.opt_u64(c.retrans_at.map(Instant::as_nanos));
    w.opt_u64(c.rnr_at.map(Instant::as_nanos));
    let s = &qp.resp;
    w.u32(s.epsn.value());
    w.u32(s.msn.value());
    w.bool(s.nak_sent);
    w.bool(s.drop_msg);
    w.u8(s.cur as u8);
    w.u64(s.va);
    w.u32(s.rkey.0);
    w.u32(s.resid);
    w.u32(s.length);
    w.u32(s.recv_off);
    w.bool(s.pending.is_some());
    let ack = s.pending.unwrap_or(AckOut {
        syndrome: Syndrome::ACK,
        psn: Psn::ZERO,
    });
    w.u8(ack.syndrome.to_byte());
    w.u32(ack.psn.value());
    w.bool(s.fatal_nak);
    w.u8(s.res_head);
}

fn get_qp(r: &mut Get<'_>) -> Result<Qp, CtxError> {
    let qpn = Qpn::new(r.u32()?);
    let qp_type = QpType::from_u8(r.u8()?).ok_or(CtxError)?;
    let state = QpState::from_u8(r.u8()?).ok_or(CtxError)?;
    let sq_sig_all = r.bool()?;
    let max_inline = r.u8()?;
    if u32::from(max_inline) > crate::transport::MAX_INLINE_DATA {
        return Err(CtxError);
    }
    let has_srq = r.bool()?;
    let srq = r.u16().map(|h| has_srq.then_some(SrqHandle(h)))?;
    let pd = Pd::from_index(r.u16()?);
    let (send_cq, recv_cq) = (r.u16()?, r.u16()?);
    let access = AccessFlags::from_bits(r.u32()?).ok_or(CtxError)?;
    let (pkey_index, pkey) = (r.u16()?, r.u16()?);
    let qkey = Qkey(r.u32()?);
    let av = get_av(r)?;
    let mtu = Mtu::from_u8(r.u8()?).ok_or(CtxError)?;
    let dest_qpn = Qpn::new(r.u32()?);
    let timeout = AckTimeout::new(r.u8()?).ok_or(CtxError)?;
    let [retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic, max_dest_rd_atomic] =
        r.bytes::<5>()?;
    let udp_sport = r.u16()?;
    let req = Requester {
        psn: Psn::new(r.u32()?),
        max_psn: Psn::new(r.u32()?),
        wqe_idx: r.u16()?,
        pkt_idx: r.u32()?,
        rd_atomic: r.u8()?,
        noack_pkts: r.u32()?,
        fastpath: r.bool()?,
        rewound: r.bool()?,
    };
    let comp = Completer {
        psn: Psn::new(r.u32()?),
        retry_left: r.u8()?,
        rnr_left: r.u8()?,
        started_retry: r.bool()?,
        retrans_at: r.opt_u64()?.map(Instant::from_nanos),
        rnr_at: r.opt_u64()?.map(Instant::from_nanos),
    };
    let epsn = Psn::new(r.u32()?);
    let msn = Msn::new(r.u32()?);
    let (nak_sent, drop_msg) = (r.bool()?, r.bool()?);
    let cur = match r.u8()? {
        x if x == CurOp::None as u8 => CurOp::None,
        x if x == CurOp::Send as u8 => CurOp::Send,
        x if x == CurOp::Write as u8 => CurOp::Write,
        _ => return Err(CtxError),
    };
    let va = r.u64()?;
    let rkey = Rkey(r.u32()?);
    let (resid, length, recv_off) = (r.u32()?, r.u32()?, r.u32()?);
    let has_pending = r.bool()?;
    let syndrome = Syndrome::from_byte(r.u8()?);
    let ack_psn = Psn::new(r.u32()?);
    let resp = Responder {
        epsn,
        msn,
        nak_sent,
        drop_msg,
        cur,
        va,
        rkey,
        resid,
        length,
        recv_off,
        pending: has_pending.then_some(AckOut {
            syndrome,
            psn: ack_psn,
        }),
        fatal_nak: r.bool()?,
        res_head: r.u8()?,
        done_owed: false,
    };
    Ok(Qp {
        qpn,
        qp_type,
        state,
        sq_sig_all,
        max_inline,
        srq,
        pd,
        send_cq,
        recv_cq,
        access,
        pkey_index,
        pkey,
        qkey,
        av,
        mtu,
        dest_qpn,
        timeout,
        retry_cnt,
        rnr_retry,
        min_rnr_timer,
        max_rd_atomic,
        max_dest_rd_atomic,
        udp_sport,
        req,
        comp,
        resp,
    })
}

fn put_res(w: &mut Put<'_>, res: &RdRes) {
    let (tag, a, b, c, d, e) = match *res {
        RdRes::Free => (0, 0, 0, 0, 0, 0),
        RdRes::Read {
            first_psn,
            last_psn,
            va,
            len,
            rkey,
        } => (1, first_psn.value(), last_psn.value(), va, len, rkey.0),
        RdRes::Atomic { psn, orig } => (2, psn.value(), 0, orig, 0, 0),
    };
    w.u8(tag);
    w.u32(a);
    w.u32(b);
    w.u64(c);
    w.u32(d);
    w.u32(e);
}

fn get_res(r: &mut Get<'_>) -> Result<RdRes, CtxError> {
    let tag = r.u8()?;
    let (a, b, c, d, e) = (r.u32()?, r.u32()?, r.u64()?, r.u32()?, r.u32()?);
    Ok(match tag {
        0 => RdRes::Free,
        1 => RdRes::Read {
            first_psn: Psn::new(a),
            last_psn: Psn::new(b),
            va: c,
            len: d,
            rkey: Rkey(e),
        },
        2 => RdRes::Atomic {
            psn: Psn::new(a),
            orig: c,
        },
        _ => return Err(CtxError),
    })
}

/// CRC-32 of a context's bytes before its last four.
fn crc(body: &[u8]) -> u32 {
    roce_crc32::hash(body)
}

impl<
        const QPS: usize,
        const CQS: usize,
        const PDS: usize,
        const MRS: usize,
        const SQ: usize,
        const RQ: usize,
        const CQE: usize,
        const RD: usize,
    > Engine<QPS, CQS, PDS, MRS, SQ, RQ, CQE, RD>
{
    // A context must hold the whole replay ring.
    const RD_FITS: () = assert!(RD <= MAX_CTX_RD);

    /// Whether QP `qpn` is resident and may be evicted now: none of its send WQEs has
    /// started (nothing in flight, nothing done and waiting for CQ room), no READ
    /// response or atomic ACK is queued, it owes its peer no ACK, NAK, SACK or CNP
    /// (those go out first: a stored QP sends nothing until something brings it back),
    /// it holds no WQE taken from an SRQ (only its own ring's can be handed back), and
    /// no SEND the fast path finished waits for its MSG_DONE.
    ///
    /// A message half received does not pin the QP: the context holds where it stands
    /// (`cur`, the WRITE's address, key and bytes left, the bytes placed in the receive
    /// WQE), and the partly filled receive WQE is handed back with the others (the host
    /// ring still holds it; it comes back first, and the next packet goes on at the
    /// offset). A QP whose peer gave up mid-message would otherwise hold its line for
    /// ever.
    pub fn qp_evictable(&self, qpn: Qpn) -> bool {
        let Some(s) = self.slot(qpn) else {
            return false;
        };
        let (Some(Some(qp)), Some(q)) = (self.qps.get(s), self.queues.get(s)) else {
            return false;
        };
        let owes = qp.resp.pending.is_some()
            || q.sr.sacks_owed()
            || self.cc.get(s).is_some_and(QpCc::cnp_pending);
        q.sq.iter().all(|w| !w.started)
            && qp.req.wqe_idx == 0
            && qp.req.pkt_idx == 0
            && !qp.resp.done_owed
            && q.out.is_empty()
            && !owes
            && (qp.srq.is_none() || q.rq.is_empty())
    }

    /// Whether resident QP `qpn` holds send WQEs (started or not): a cache makes room
    /// for a QP with new work by evicting one without any first.
    pub fn qp_has_sends(&self, qpn: Qpn) -> bool {
        self.slot(qpn)
            .and_then(|s| self.queues.get(s))
            .is_some_and(|q| !q.sq.is_empty())
    }

    /// Resident QPs.
    pub fn resident_qps(&self) -> usize {
        self.qps.iter().take(self.hi).flatten().count()
    }

    /// Writes QP `qpn`'s state into `out` and frees its slot; the QP keeps its PD, CQ
    /// and SRQ references (it still exists). Fails with `Busy` unless
    /// [`Engine::qp_evictable`].
    pub fn evict_qp(&mut self, qpn: Qpn, out: &mut [u8; QP_CTX_LEN]) -> Result<Evicted, Error> {
        let () = Self::RD_FITS;
        if !self.qp_evictable(qpn) {
            return Err(if self.slot(qpn).is_some() {
                Error::Busy { what: "QP" }
            } else {
                Error::NoSuchQp(qpn)
            });
        }
        let slot = self.slot(qpn).ok_or(Error::NoSuchQp(qpn))?;
        let (Some(Some(qp)), Some(q), Some(cc)) =
            (self.qps.get(slot), self.queues.get(slot), self.cc.get(slot))
        else {
            return Err(Error::NoSuchQp(qpn));
        };
        out.fill(0);
        let mut w = Put::new(&mut out[..QP_CTX_LEN - 4]);
        w.u8(VERSION);
        put_qp(&mut w, qp);
        cc.save(&mut w);
        q.sr.save(&mut w);
        w.u8(RD as u8);
        for r in &q.res {
            put_res(&mut w, r);
        }
        if w.overflow {
            return Err(Error::TableFull {
                table: "QP context",
            });
        }
        let sum = crc(&out[..QP_CTX_LEN - 4]);
        out[QP_CTX_LEN - 4..].copy_from_slice(&sum.to_le_bytes());
        let handed_back = Evicted {
            sq_wqes: u16::try_from(q.sq.len()).unwrap_or(u16::MAX),
            rq_wqes: u16::try_from(q.rq.len()).unwrap_or(u16::MAX),
        };
        self.free_slot(slot);
        Ok(handed_back)
    }

    /// Makes QP `qpn` resident again from what [`Engine::evict_qp`] wrote. Fails with
    /// `TableFull` when no slot is free, and with `InvalidAttribute`-free
    /// [`Error::BadContext`] when the bytes are not a context of `qpn` (wrong CRC,
    /// version or QPN, a field out of range, a PD or CQ that does not exist).
    ///
    /// `now` is when it comes back: the DCQCN timers that fell due while it was stored
    /// (alpha decay, rate increase) run first, period by period, so a CNP or a packet
    /// sent right after meets the state a QP that stayed resident would have.
    pub fn restore_qp(
        &mut self,
        qpn: Qpn,
        ctx: &[u8; QP_CTX_LEN],
        now: Instant,
    ) -> Result<(), Error> {
        let () = Self::RD_FITS;
        if self.slot(qpn).is_some() {
            return Err(Error::Busy { what: "QP" });
        }
        let bad = Error::BadContext(qpn);
        let (body, sum) = ctx.split_at(QP_CTX_LEN - 4);
        if sum != crc(body).to_le_bytes() {
            return Err(bad);
        }
        let mut r = Get::new(body);
        if r.u8() != Ok(VERSION) {
            return Err(bad);
        }
        let qp = get_qp(&mut r).map_err(|_| bad)?;
        let mut cc = QpCc::load(&mut r).map_err(|_| bad)?;
        let mut queues = super::QpQueues::<SQ, RQ, RD>::new();
        queues.sr.load(&mut r).map_err(|_| bad)?;
        if r.u8() != Ok(RD as u8) {
            return Err(bad);
        }
        for res in queues.res.iter_mut() {
            *res = get_res(&mut r).map_err(|_| bad)?;
        }
        let cqs_ok = [qp.send_cq, qp.recv_cq]
            .iter()
            .all(|&c| matches!(self.cqs.slots.get(usize::from(c)), Some(Some(_))));
        let srq_ok = qp.srq.is_none_or(|h| self.srqs.query(h).is_ok());
        if qp.qpn != qpn || !self.mem.pd_exists(qp.pd) || !cqs_ok || !srq_ok {
            return Err(bad);
        }
        let slot = self
            .free_slot_for(qpn)
            .ok_or(Error::TableFull { table: "QP" })?;
        let now = self.clock(now);
        cc.handle_timeout(&self.cfg.cc, now.as_nanos());
        let (Some(s), Some(q), Some(c)) = (
            self.qps.get_mut(slot),
            self.queues.get_mut(slot),
            self.cc.get_mut(slot),
        ) else {
            return Err(Error::TableFull { table: "QP" });
        };
        *s = Some(qp);
        *q = queues;
        *c = cc;
        self.hi = self.hi.max(slot + 1);
        self.cc_any |= cc.rp_on();
        self.update_tx_hdr(slot);
        // Whatever it owes (an ACK, a timer) is looked at again.
        self.with_qp(slot, Instant::ZERO, &mut NoDma, |_, _, _| ());
        Ok(())
    }

    /// The slot for a new resident QP `qpn`: its own (`(qpn - QPN_BASE) mod QPS`, where
    /// lookups look first) if free, else the first free one.
    pub(super) fn free_slot_for(&self, qpn: Qpn) -> Option<usize> {
        let home = home_slot(qpn, QPS);
        if matches!(self.qps.get(home), Some(None)) {
            return Some(home);
        }
        self.qps.iter().position(Option::is_none)
    }
}

/// Where QP `qpn` sits when it can: slot `(qpn - QPN_BASE) mod qps` (a cache in front
/// of the engine uses the same rule for its own lines).
pub fn home_slot(qpn: Qpn, qps: usize) -> usize {
    (qpn.value().wrapping_sub(QPN_BASE) as usize) % qps.max(1)
}
