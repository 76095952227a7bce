//! The communication manager (IBTA vol. 1 chapter 12) as a sans-IO state machine: the
//! CM protocol of Linux's `ib_cm`, without the addressing (RDMA CM's IP ports, address
//! and route resolution live with the caller, `roce-host`'s `rdma_cm`).
//!
//! [`Cm`] keeps a fixed table of communications (connections and SIDR lookups) and of
//! listeners. The caller feeds it every CM MAD that arrives on QP1
//! ([`Cm::handle_mad`], with the sender's address), sends what [`Cm::poll_transmit`]
//! hands out to the address it names (as a UD SEND to QP1 with Q_Key 0x80010000),
//! takes [`Cm::poll_event`]s, and calls [`Cm::handle_timeout`] at
//! [`Cm::poll_timeout`]. Time is passed in, as everywhere in the core.
//!
//! Messages are matched on communication IDs, never on transaction IDs (IBTA
//! §12.6.1); a reply carries the transaction ID of the message it answers, as Linux's
//! CM does. What the state machine does, per message received (Linux `cm.c`'s rules):
//!
//! | message | in state | action |
//! |---|---|---|
//! | REQ | (none) | a listener for its service ID: new communication in `ReqRcvd`, event; none: REJ "invalid service ID" |
//! | REQ | `ReqRcvd` | a duplicate: ignored (the application has not answered yet) |
//! | REQ | `MraReqSent` | a duplicate: MRA sent again |
//! | REQ | `RepSent`, `MraRepRcvd` | a duplicate: REP sent again |
//! | MRA | `ReqSent` / `RepSent` | the matching `Mra*Rcvd`: the retry timer waits the MRA's service timeout |
//! | REJ | before `Established` | the communication ends, event |
//! | REP | `ReqSent`, `MraReqRcvd` | `RepRcvd`, event: the caller readies its QP, then [`Cm::rtu`] |
//! | REP | `Established` | a duplicate (our RTU was lost): RTU sent again |
//! | RTU | `RepSent`, `MraRepRcvd` | `Established`, event |
//! | DREQ | `Established` (or `RepSent`: RTU lost) | `DreqRcvd`, event: the caller stops its QP, then [`Cm::disconnect`] answers DREP |
//! | DREQ | `DreqSent` | both sides disconnect: DREP sent |
//! | DREQ | `Timewait` or none | DREP sent (the peer missed ours) |
//! | DREP | `DreqSent` | `Timewait`, event |
//! | SIDR_REQ | (none) | a listener: new lookup in `SidrReqRcvd`, event; none: SIDR_REP "unsupported" |
//! | SIDR_REP | `SidrReqSent` | the lookup ends, event |
//!
//! A REQ, REP, DREQ or SIDR_REQ left unanswered is sent again after its timeout (4.096
//! us * 2^n of the response timeout it announced, plus an MRA's service timeout),
//! `max_cm_retries` times; then the communication fails with [`CmEvent::Timeout`] (a
//! REP also sends REJ "timeout"). `Timewait` lasts twice the path's local ACK timeout
//! (at least a millisecond), then [`CmEvent::TimewaitExit`] frees the entry.

use crate::num::Qpn;
use crate::transport::Instant;
use crate::wire::cm::{
    rej_reason, sidr_status, CmMsg, CmMsgKind, CommIdsRepr, DreqRepr, MraRepr, PrivateData,
    RejRepr, RepRepr, ReqRepr, SidrRepRepr, SidrReqRepr, ARI_LEN,
};
use crate::wire::mad::MAD_LEN;
use core::time::Duration;
use heapless::Deque;

/// Where a MAD goes or came from: the peer's GID and the local GID index used towards it
/// (the caller turns these into an address vector to QP1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CmAddr {
    pub gid: [u8; 16],
    pub sgid_index: u8,
}

/// A communication (connection or SIDR lookup): its slot in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u16);

/// The states of IBTA §12.9.6 (Linux `enum ib_cm_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmState {
    ReqSent,
    ReqRcvd,
    MraReqSent,
    MraReqRcvd,
    RepSent,
    RepRcvd,
    MraRepSent,
    MraRepRcvd,
    Established,
    DreqSent,
    DreqRcvd,
    Timewait,
    SidrReqSent,
    SidrReqRcvd,
}

/// What happened, for the caller (RDMA CM maps these onto its events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmEvent {
    /// A REQ for a service we listen on (passive side): answer with [`Cm::accept`],
    /// [`Cm::reject`] or [`Cm::mra`].
    ReqReceived {
        id: ConnId,
        from: CmAddr,
        req: ReqRepr,
    },
    /// The passive side accepted (active side): move the QP to RTS, then [`Cm::rtu`]
    /// (or [`Cm::reject`]).
    RepReceived { id: ConnId, rep: RepRepr },
    /// The RTU arrived (passive side): the connection is up.
    Established { id: ConnId },
    /// The peer refused; the communication is gone.
    Rejected { id: ConnId, rej: RejRepr },
    /// No answer after every retry: the communication is gone (a REQ: the peer is
    /// unreachable; a REP: it was rejected with "timeout"; a DREQ: the entry is in
    /// `Timewait` as if the DREP had come).
    Timeout { id: ConnId, state: CmState },
    /// The peer asks to disconnect: stop the QP, then [`Cm::disconnect`] sends the DREP.
    DreqReceived { id: ConnId, dreq: DreqRepr },
    /// Our DREQ was answered; the entry waits in `Timewait`.
    DrepReceived { id: ConnId },
    /// `Timewait` is over: the entry is free.
    TimewaitExit { id: ConnId },
    /// A SIDR_REQ for a service we listen on: answer with [`Cm::sidr_reply`].
    SidrReqReceived {
        id: ConnId,
        from: CmAddr,
        req: SidrReqRepr,
    },
    /// The answer to our SIDR_REQ; the lookup is over.
    SidrRepReceived { id: ConnId, rep: SidrRepRepr },
}

/// Why a CM call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmCallError {
    /// No such communication.
    NoSuchId,
    /// The call does not fit the communication's state.
    WrongState(CmState),
    /// The table (communications or listeners) is full.
    TableFull,
    /// Already listening on that service ID.
    ServiceInUse,
}

/// Settings of the CM: our CA's GUID (what REQ and REP carry) and the first local
/// communication ID (successive communications take the next ones; seed it from
/// something random, so a restarted peer's IDs do not collide with its old ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmConfig {
    pub ca_guid: u64,
    pub first_comm_id: u32,
}

/// The CA GUID Linux derives from a MAC (EUI-64: the universal/local bit flipped,
/// 0xFFFE in the middle), as rxe's `rxe_init_device_param` does.
pub const fn eui64_from_mac(mac: [u8; 6]) -> u64 {
    u64::from_be_bytes([
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xFF,
        0xFE,
        mac[3],
        mac[4],
        mac[5],
    ])
}

/// 4.096 us * 2^code: the unit of every IBTA timeout field (5 bits).
pub fn timeout_duration(code: u8) -> Duration {
    Duration::from_nanos(4096u64 << code.min(31))
}

/// One communication's record.
#[derive(Debug, Clone, Copy)]
struct Conn {
    state: CmState,
    local_id: u32,
    /// The peer's communication ID (SIDR: the request ID).
    remote_id: u32,
    remote_ca_guid: u64,
    peer: CmAddr,
    /// The peer's QP (from its REQ or REP): DREQ names it.
    remote_qpn: Qpn,
    /// Transaction ID of the REQ (or SIDR_REQ) that opened the communication.
    tid: u64,
    /// What this side sent last and may send again on a timeout or a duplicate.
    last: Option<CmMsg>,
    last_tid: u64,
    /// `last` is to go out at the next `poll_transmit`.
    send_pending: bool,
    deadline: Option<Instant>,
    retries_left: u8,
    /// How long to wait for an answer to `last`.
    wait: Duration,
    /// The path's local ACK timeout code (for `Timewait`).
    ack_timeout: u8,
}

/// A message to send that belongs to no communication (a REJ or SIDR_REP for an
/// unknown service, a DREP for an unknown DREQ).
#[derive(Debug, Clone, Copy)]
struct Stateless {
    to: CmAddr,
    tid: u64,
    msg: CmMsg,
}

/// The CM: `N` communications, `L` listeners, `E` queued events.
#[derive(Clone)]
pub struct Cm<const N: usize, const L: usize, const E: usize> {
    cfg: CmConfig,
    conns: [Option<Conn>; N],
    listens: [Option<u64>; L],
    next_id: u32,
    events: Deque<CmEvent, E>,
    stateless: Deque<Stateless, 4>,
    /// Events that did not fit the queue (the caller polls too rarely).
    pub events_dropped: u64,
}

impl<const N: usize, const L: usize, const E: usize> Cm<N, L, E> {
    /// An empty CM.
    pub fn new(cfg: CmConfig) -> Self {
        Self {
            cfg,
            conns: [None; N],
            listens: [None; L],
            next_id: cfg.first_comm_id,
            events: Deque::new(),
            stateless: Deque::new(),
            events_dropped: 0,
        }
    }

    /// The settings.
    pub fn config(&self) -> &CmConfig {
        &self.cfg
    }

    /// A communication's state.
    pub fn state(&self, id: ConnId) -> Option<CmState> {
        Some(self.conn(id)?.state)
    }

    /// Our communication ID of `id` (what the REQ or REP carried).
    pub fn local_comm_id(&self, id: ConnId) -> Option<u32> {
        Some(self.conn(id)?.local_id)
    }

    fn conn(&self, id: ConnId) -> Option<&Conn> {
        self.conns.get(usize::from(id.0))?.as_ref()
    }

    fn conn_mut(&mut self, id: ConnId) -> Result<&mut Conn, CmCallError> {
        self.conns
            .get_mut(usize::from(id.0))
            .and_then(Option::as_mut)
            .ok_or(CmCallError::NoSuchId)
    }

    // ---------------------------------------------------------------------------------
    // Listeners

    /// Takes REQs and SIDR_REQs for `service_id`.
    pub fn listen(&mut self, service_id: u64) -> Result<(), CmCallError> {
        if self.listens.contains(&Some(service_id)) {
            return Err(CmCallError::ServiceInUse);
        }
        let slot = self
            .listens
            .iter_mut()
            .find(|l| l.is_none())
            .ok_or(CmCallError::TableFull)?;
        *slot = Some(service_id);
        Ok(())
    }

    /// Stops listening on `service_id` (communications already opened stay).
    pub fn cancel_listen(&mut self, service_id: u64) {
        for l in &mut self.listens {
            if *l == Some(service_id) {
                *l = None;
            }
        }
    }

    fn listening(&self, service_id: u64) -> bool {
        self.listens.contains(&Some(service_id))
    }

    // ---------------------------------------------------------------------------------
    // Calls

    fn alloc(&mut self, conn: Conn) -> Result<ConnId, CmCallError> {
        let i = self
            .conns
            .iter()
            .position(Option::is_none)
            .ok_or(CmCallError::TableFull)?;
        let id = ConnId(u16::try_from(i).map_err(|_| CmCallError::TableFull)?);
        if let Some(s) = self.conns.get_mut(i) {
            *s = Some(conn);
        }
        Ok(id)
    }

    fn fresh_id(&mut self) -> u32 {
        // Never 0: a REJ's remote ID 0 means "unknown".
        loop {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1);
            let used = self.conns.iter().flatten().any(|c| c.local_id == id);
            if id != 0 && !used {
                return id;
            }
        }
    }

    fn blank(&mut self, state: CmState, peer: CmAddr) -> Conn {
        Conn {
            state,
            local_id: self.fresh_id(),
            remote_id: 0,
            remote_ca_guid: 0,
            peer,
            remote_qpn: Qpn::default(),
            tid: 0,
            last: None,
            last_tid: 0,
            send_pending: false,
            deadline: None,
            retries_left: 0,
            wait: Duration::ZERO,
            ack_timeout: 0,
        }
    }

    /// Sends `req` to `to` (active side): its local communication ID and CA GUID are
    /// filled in here; it is sent again every `remote_cm_response_timeout` until
    /// answered, `max_cm_retries` times.
    pub fn connect(
        &mut self,
        now: Instant,
        to: CmAddr,
        mut req: ReqRepr,
    ) -> Result<ConnId, CmCallError> {
        let mut c = self.blank(CmState::ReqSent, to);
        req.local_comm_id = c.local_id;
        req.local_ca_guid = self.cfg.ca_guid;
        c.tid = (u64::from(self.cfg.first_comm_id) << 32) | u64::from(c.local_id);
        c.ack_timeout = req.primary.local_ack_timeout;
        let wait = timeout_duration(req.remote_cm_response_timeout);
        let tid = c.tid;
        Self::send(&mut c, now, CmMsg::Req(req), tid, wait, req.max_cm_retries);
        self.alloc(c)
    }

    /// Accepts a REQ (passive side) with `rep`; its communication IDs and CA GUID are
    /// filled in here. Sent again until the RTU comes.
    pub fn accept(
        &mut self,
        now: Instant,
        id: ConnId,
        mut rep: RepRepr,
    ) -> Result<(), CmCallError> {
        let guid = self.cfg.ca_guid;
        let c = self.conn_mut(id)?;
        if !matches!(c.state, CmState::ReqRcvd | CmState::MraReqSent) {
            return Err(CmCallError::WrongState(c.state));
        }
        rep.local_comm_id = c.local_id;
        rep.remote_comm_id = c.remote_id;
        rep.local_ca_guid = guid;
        c.state = CmState::RepSent;
        let (tid, wait, retries) = (c.tid, c.wait, c.retries_left);
        Self::send(c, now, CmMsg::Rep(rep), tid, wait, retries);
        Ok(())
    }

    /// Refuses a REQ (passive side) or a REP (active side); the communication ends.
    pub fn reject(
        &mut self,
        id: ConnId,
        reason: u16,
        private_data: PrivateData<{ crate::wire::cm::private_len::REJ }>,
    ) -> Result<(), CmCallError> {
        let c = *self.conn(id).ok_or(CmCallError::NoSuchId)?;
        let message_rejected = match c.state {
            CmState::ReqRcvd | CmState::MraReqSent => CmMsgKind::Req,
            CmState::RepRcvd | CmState::MraRepSent => CmMsgKind::Rep,
            s => return Err(CmCallError::WrongState(s)),
        };
        let rej = RejRepr {
            local_comm_id: c.local_id,
            remote_comm_id: c.remote_id,
            message_rejected,
            reason,
            private_data,
            ..RejRepr::default()
        };
        self.push_stateless(c.peer, c.tid, CmMsg::Rej(rej));
        self.free(id);
        Ok(())
    }

    /// Tells the peer an answer will take up to 4.096 us * 2^`service_timeout` more
    /// (an MRA for its REQ or REP).
    pub fn mra(&mut self, id: ConnId, service_timeout: u8) -> Result<(), CmCallError> {
        let c = self.conn_mut(id)?;
        let (state, kind) = match c.state {
            CmState::ReqRcvd => (CmState::MraReqSent, CmMsgKind::Req),
            CmState::RepRcvd => (CmState::MraRepSent, CmMsgKind::Rep),
            s => return Err(CmCallError::WrongState(s)),
        };
        c.state = state;
        c.last = Some(CmMsg::Mra(MraRepr {
            local_comm_id: c.local_id,
            remote_comm_id: c.remote_id,
            message_mraed: kind,
            service_timeout: service_timeout & 0x1F,
            private_data: PrivateData::default(),
        }));
        c.last_tid = c.tid;
        c.send_pending = true;
        Ok(())
    }

    /// Sends the RTU after a REP (active side): the connection is up.
    pub fn rtu(&mut self, id: ConnId) -> Result<(), CmCallError> {
        let c = self.conn_mut(id)?;
        if !matches!(c.state, CmState::RepRcvd | CmState::MraRepSent) {
            return Err(CmCallError::WrongState(c.state));
        }
        c.state = CmState::Established;
        c.last = Some(CmMsg::Rtu(CommIdsRepr {
            local_comm_id: c.local_id,
            remote_comm_id: c.remote_id,
            private_data: PrivateData::default(),
        }));
        c.last_tid = c.tid;
        c.send_pending = true;
        c.deadline = None;
        Ok(())
    }

    /// Disconnects: from `Established` (or `RepSent`, whose RTU may be lost) a DREQ, sent
    /// again until the DREP; from `DreqRcvd` the DREP, and `Timewait`.
    pub fn disconnect(&mut self, now: Instant, id: ConnId) -> Result<(), CmCallError> {
        let c = self.conn_mut(id)?;
        match c.state {
            CmState::Established | CmState::RepSent | CmState::MraRepRcvd => {
                c.state = CmState::DreqSent;
                let dreq = CmMsg::Dreq(DreqRepr {
                    local_comm_id: c.local_id,
                    remote_comm_id: c.remote_id,
                    remote_qpn: c.remote_qpn,
                    private_data: PrivateData::default(),
                });
                let tid = c.tid ^ 0x8000_0000_0000_0000;
                let wait = c.wait.max(timeout_duration(c.ack_timeout));
                Self::send(c, now, dreq, tid, wait, 15);
            }
            CmState::DreqRcvd => {
                c.last = Some(drep(c));
                c.last_tid = c.tid;
                c.send_pending = true;
                Self::enter_timewait(c, now);
            }
            s => return Err(CmCallError::WrongState(s)),
        }
        Ok(())
    }

    /// Sends a SIDR_REQ (a UD client asks for a service's QP); its request ID is filled
    /// in here. Sent again after `timeout` until answered, `retries` times.
    pub fn sidr_request(
        &mut self,
        now: Instant,
        to: CmAddr,
        mut req: SidrReqRepr,
        timeout: u8,
        retries: u8,
    ) -> Result<ConnId, CmCallError> {
        let mut c = self.blank(CmState::SidrReqSent, to);
        req.request_id = c.local_id;
        c.tid = (u64::from(self.cfg.first_comm_id) << 32) | u64::from(c.local_id);
        let tid = c.tid;
        Self::send(
            &mut c,
            now,
            CmMsg::SidrReq(req),
            tid,
            timeout_duration(timeout),
            retries,
        );
        self.alloc(c)
    }

    /// Answers a SIDR_REQ; the lookup is over.
    pub fn sidr_reply(&mut self, id: ConnId, mut rep: SidrRepRepr) -> Result<(), CmCallError> {
        let c = *self.conn(id).ok_or(CmCallError::NoSuchId)?;
        if c.state != CmState::SidrReqRcvd {
            return Err(CmCallError::WrongState(c.state));
        }
        rep.request_id = c.remote_id;
        self.push_stateless(c.peer, c.tid, CmMsg::SidrRep(rep));
        self.free(id);
        Ok(())
    }

    /// Forgets a communication at once (no message is sent).
    pub fn destroy(&mut self, id: ConnId) {
        self.free(id);
    }

    fn free(&mut self, id: ConnId) {
        if let Some(s) = self.conns.get_mut(usize::from(id.0)) {
            *s = None;
        }
    }

    /// Records `msg` as the last message and arms its retry timer.
    fn send(c: &mut Conn, now: Instant, msg: CmMsg, tid: u64, wait: Duration, retries: u8) {
        c.last = Some(msg);
        c.last_tid = tid;
        c.send_pending = true;
        c.wait = wait;
        c.retries_left = retries;
        c.deadline = Some(now + wait);
    }

    fn enter_timewait(c: &mut Conn, now: Instant) {
        c.state = CmState::Timewait;
        c.retries_left = 0;
        let t = (timeout_duration(c.ack_timeout) * 2).max(Duration::from_millis(1));
        c.deadline = Some(now + t);
    }

    fn push_event(&mut self, e: CmEvent) {
        if self.events.push_back(e).is_err() {
            self.events_dropped += 1;
        }
    }

    fn push_stateless(&mut self, to: CmAddr, tid: u64, msg: CmMsg) {
        // A full queue drops the oldest: these are answers to retransmitted messages,
        // and the peer retries.
        if self.stateless.is_full() {
            self.stateless.pop_front();
        }
        let _ = self.stateless.push_back(Stateless { to, tid, msg });
    }

    // ---------------------------------------------------------------------------------
    // Events in

    /// One MAD from QP1, sent by `from`. MADs that are not CM messages, or that name no
    /// communication and need no answer, are ignored (returns false).
    pub fn handle_mad(&mut self, now: Instant, from: CmAddr, mad: &[u8]) -> bool {
        let Ok((tid, msg)) = CmMsg::parse(mad) else {
            return false;
        };
        match msg {
            CmMsg::Req(req) => self.on_req(now, from, tid, req),
            CmMsg::SidrReq(req) => self.on_sidr_req(from, tid, req),
            CmMsg::Dreq(dreq) => self.on_dreq(now, from, tid, dreq),
            CmMsg::Mra(m) => self.on_mra(now, &m),
            CmMsg::Rej(rej) => self.on_rej(rej),
            CmMsg::Rep(rep) => self.on_rep(rep),
            CmMsg::Rtu(rtu) => self.on_rtu(&rtu),
            CmMsg::Drep(drep) => self.on_drep(now, &drep),
            CmMsg::SidrRep(rep) => self.on_sidr_rep(rep),
        }
    }

    /// The communication whose local ID the peer names (and, when the peer's own ID is
    /// known, that it matches).
    fn find(&self, local: u32, remote: Option<u32>) -> Option<ConnId> {
        self.conns.iter().enumerate().find_map(|(i, c)| {
            let c = c.as_ref()?;
            let sidr = matches!(c.state, CmState::SidrReqSent | CmState::SidrReqRcvd);
            let ok = !sidr && c.local_id == local && remote.is_none_or(|r| r == c.remote_id);
            u16::try_from(i).ok().filter(|_| ok).map(ConnId)
        })
    }

    fn on_req(&mut self, now: Instant, from: CmAddr, tid: u64, req: ReqRepr) -> bool {
        let dup = self.conns.iter_mut().flatten().find(|c| {
            c.remote_id == req.local_comm_id
                && c.remote_ca_guid == req.local_ca_guid
                && !matches!(c.state, CmState::ReqSent | CmState::SidrReqSent)
        });
        if let Some(c) = dup {
            if matches!(
                c.state,
                CmState::MraReqSent | CmState::RepSent | CmState::MraRepRcvd
            ) {
                c.send_pending = true;
            }
            return true;
        }
        if !self.listening(req.service_id) {
            let rej = RejRepr {
                remote_comm_id: req.local_comm_id,
                reason: rej_reason::INVALID_SERVICE_ID,
                ..RejRepr::default()
            };
            self.push_stateless(from, tid, CmMsg::Rej(rej));
            return true;
        }
        let mut c = self.blank(CmState::ReqRcvd, from);
        c.remote_id = req.local_comm_id;
        c.remote_ca_guid = req.local_ca_guid;
        c.remote_qpn = req.local_qpn;
        c.tid = tid;
        c.ack_timeout = req.primary.local_ack_timeout;
        // Our REP waits for the RTU as long as the active side said it may take.
        c.wait = timeout_duration(req.local_cm_response_timeout);
        c.retries_left = req.max_cm_retries;
        let _ = now;
        match self.alloc(c) {
            Ok(id) => self.push_event(CmEvent::ReqReceived { id, from, req }),
            Err(_) => {
                let rej = RejRepr {
                    remote_comm_id: req.local_comm_id,
                    reason: rej_reason::NO_RESOURCES,
                    ..RejRepr::default()
                };
                self.push_stateless(from, tid, CmMsg::Rej(rej));
            }
        }
        true
    }

    fn on_sidr_req(&mut self, from: CmAddr, tid: u64, req: SidrReqRepr) -> bool {
        let dup = self.conns.iter().flatten().any(|c| {
            c.state == CmState::SidrReqRcvd && c.remote_id == req.request_id && c.peer == from
        });
        if dup {
            return true;
        }
        if !self.listening(req.service_id) {
            let rep = SidrRepRepr {
                request_id: req.request_id,
                status: sidr_status::UNSUPPORTED,
                service_id: req.service_id,
                ..SidrRepRepr::default()
            };
            self.push_stateless(from, tid, CmMsg::SidrRep(rep));
            return true;
        }
        let mut c = self.blank(CmState::SidrReqRcvd, from);
        c.remote_id = req.request_id;
        c.tid = tid;
        match self.alloc(c) {
            Ok(id) => self.push_event(CmEvent::SidrReqReceived { id, from, req }),
            Err(_) => {
                let rep = SidrRepRepr {
                    request_id: req.request_id,
                    status: sidr_status::REJECT,
                    service_id: req.service_id,
                    ..SidrRepRepr::default()
                };
                self.push_stateless(from, tid, CmMsg::SidrRep(rep));
            }
        }
        true
    }

    fn on_mra(&mut self, now: Instant, m: &MraRepr) -> bool {
        let Some(id) = self
            .find(m.remote_comm_id, Some(m.local_comm_id))
            .or_else(|| {
                // An MRA for our REQ comes before we know the peer's ID.
                self.find(m.remote_comm_id, Some(0))
            })
        else {
            return false;
        };
        let Ok(c) = self.conn_mut(id) else {
            return false;
        };
        let next = match (c.state, m.message_mraed) {
            (CmState::ReqSent, CmMsgKind::Req) => CmState::MraReqRcvd,
            (CmState::RepSent, CmMsgKind::Rep) => CmState::MraRepRcvd,
            _ => return false,
        };
        c.state = next;
        c.remote_id = m.local_comm_id;
        // The peer answers within its service timeout: one more wait, then retries.
        c.deadline = Some(now + c.wait + timeout_duration(m.service_timeout));
        true
    }

    fn on_rej(&mut self, rej: RejRepr) -> bool {
        let Some(id) = self.find(rej.remote_comm_id, None) else {
            return false;
        };
        let Some(c) = self.conn(id) else {
            return false;
        };
        let pending = matches!(
            c.state,
            CmState::ReqSent
                | CmState::MraReqRcvd
                | CmState::RepSent
                | CmState::MraRepRcvd
                | CmState::RepRcvd
                | CmState::MraRepSent
        );
        if !pending {
            return false;
        }
        self.free(id);
        self.push_event(CmEvent::Rejected { id, rej });
        true
    }

    fn on_rep(&mut self, rep: RepRepr) -> bool {
        let Some(id) = self.find(rep.remote_comm_id, None) else {
            return false;
        };
        let Ok(c) = self.conn_mut(id) else {
            return false;
        };
        match c.state {
            CmState::ReqSent | CmState::MraReqRcvd => {
                c.state = CmState::RepRcvd;
                c.remote_id = rep.local_comm_id;
                c.remote_ca_guid = rep.local_ca_guid;
                c.remote_qpn = rep.local_qpn;
                c.deadline = None;
                self.push_event(CmEvent::RepReceived { id, rep });
                true
            }
            CmState::Established if c.remote_id == rep.local_comm_id => {
                // Our RTU was lost: the peer sends its REP again.
                c.send_pending = true;
                true
            }
            _ => false,
        }
    }

    fn on_rtu(&mut self, rtu: &CommIdsRepr) -> bool {
        let Some(id) = self.find(rtu.remote_comm_id, Some(rtu.local_comm_id)) else {
            return false;
        };
        let Ok(c) = self.conn_mut(id) else {
            return false;
        };
        if !matches!(c.state, CmState::RepSent | CmState::MraRepRcvd) {
            return false;
        }
        c.state = CmState::Established;
        c.deadline = None;
        c.last = None;
        self.push_event(CmEvent::Established { id });
        true
    }

    fn on_dreq(&mut self, now: Instant, from: CmAddr, tid: u64, dreq: DreqRepr) -> bool {
        let found = self.find(dreq.remote_comm_id, Some(dreq.local_comm_id));
        let Some(id) = found else {
            // We do not know it (any more): answer, so the peer stops retrying.
            let rep = CommIdsRepr {
                local_comm_id: dreq.remote_comm_id,
                remote_comm_id: dreq.local_comm_id,
                private_data: PrivateData::default(),
            };
            self.push_stateless(from, tid, CmMsg::Drep(rep));
            return true;
        };
        let Ok(c) = self.conn_mut(id) else {
            return false;
        };
        c.tid = tid;
        match c.state {
            CmState::Established | CmState::RepSent | CmState::MraRepRcvd => {
                c.state = CmState::DreqRcvd;
                c.deadline = None;
                c.last = None;
                self.push_event(CmEvent::DreqReceived { id, dreq });
            }
            CmState::DreqSent | CmState::Timewait => {
                let m = drep(c);
                self.push_stateless(from, tid, m);
            }
            _ => {}
        }
        let _ = now;
        true
    }

    fn on_drep(&mut self, now: Instant, d: &CommIdsRepr) -> bool {
        let Some(id) = self.find(d.remote_comm_id, Some(d.local_comm_id)) else {
            return false;
        };
        let Ok(c) = self.conn_mut(id) else {
            return false;
        };
        if c.state != CmState::DreqSent {
            return false;
        }
        c.last = None;
        c.send_pending = false;
        Self::enter_timewait(c, now);
        self.push_event(CmEvent::DrepReceived { id });
        true
    }

    fn on_sidr_rep(&mut self, rep: SidrRepRepr) -> bool {
        let found = self.conns.iter().position(|c| {
            c.as_ref()
                .is_some_and(|c| c.state == CmState::SidrReqSent && c.local_id == rep.request_id)
        });
        let Some(i) = found else {
            return false;
        };
        let id = ConnId(i as u16);
        self.free(id);
        self.push_event(CmEvent::SidrRepReceived { id, rep });
        true
    }

    // ---------------------------------------------------------------------------------
    // Timers

    /// When [`Cm::handle_timeout`] should run next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.conns.iter().flatten().filter_map(|c| c.deadline).min()
    }

    /// Retries what is due at `now`, fails what ran out of retries, ends `Timewait`s.
    pub fn handle_timeout(&mut self, now: Instant) {
        for i in 0..N {
            let id = ConnId(i as u16);
            let Some(Some(c)) = self.conns.get_mut(i) else {
                continue;
            };
            if c.deadline.is_none_or(|d| d > now) {
                continue;
            }
            if c.state == CmState::Timewait {
                self.free(id);
                self.push_event(CmEvent::TimewaitExit { id });
                continue;
            }
            if c.retries_left > 0 {
                c.retries_left -= 1;
                c.send_pending = true;
                c.deadline = Some(now + c.wait);
                continue;
            }
            let state = c.state;
            match state {
                CmState::DreqSent => {
                    c.last = None;
                    c.send_pending = false;
                    Self::enter_timewait(c, now);
                }
                CmState::RepSent | CmState::MraRepRcvd => {
                    let rej = RejRepr {
                        local_comm_id: c.local_id,
                        remote_comm_id: c.remote_id,
                        message_rejected: CmMsgKind::Rep,
                        reason: rej_reason::TIMEOUT,
                        ari: [0; ARI_LEN],
                        ..RejRepr::default()
                    };
                    let (peer, tid) = (c.peer, c.tid);
                    self.push_stateless(peer, tid, CmMsg::Rej(rej));
                    self.free(id);
                }
                _ => self.free(id),
            }
            self.push_event(CmEvent::Timeout { id, state });
        }
    }

    // ---------------------------------------------------------------------------------
    // Polls

    /// The next MAD to send: written into `buf` (at least 256 bytes), with where it
    /// goes. Answers to unknown communications first, then each communication's
    /// pending message.
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<(CmAddr, usize)> {
        if buf.len() < MAD_LEN {
            return None;
        }
        if let Some(s) = self.stateless.pop_front() {
            let n = s.msg.emit(s.tid, buf).ok()?;
            return Some((s.to, n));
        }
        for c in self.conns.iter_mut().flatten() {
            if !c.send_pending {
                continue;
            }
            c.send_pending = false;
            if let Some(m) = c.last {
                let n = m.emit(c.last_tid, buf).ok()?;
                return Some((c.peer, n));
            }
        }
        None
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        self.events.pop_front()
    }
}

/// The DREP answering `c`'s peer.
fn drep(c: &Conn) -> CmMsg {
    CmMsg::Drep(CommIdsRepr {
        local_comm_id: c.local_id,
        remote_comm_id: c.remote_id,
        private_data: PrivateData::default(),
    })
}
