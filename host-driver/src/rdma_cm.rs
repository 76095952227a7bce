//! An RDMA CM shaped like librdmacm (`rdma_listen`, `rdma_connect`, `rdma_accept`,
//! `rdma_disconnect`, `rdma_get_cm_event`), over the port's GSI QP and the core's CM
//! protocol (`roce_core::cm`): RC connections in the TCP port space (REQ/REP/RTU,
//! DREQ/DREP) and UD "connections" in the UDP port space (SIDR_REQ/SIDR_REP: the
//! passive side's UD QPN and Q_Key, as librdmacm's `RDMA_PS_UDP`). The IP port space's
//! service IDs and the RDMA CM IP header in the REQ's and SIDR_REQ's private data are
//! librdmacm's, so the MADs are the ones rxe's `rdma_cm` exchanges.
//!
//! Address resolution is the caller's, as ARP is the kernel's: [`CmAgent::add_neighbour`]
//! fills the agent's neighbour table (GID to MAC), which `connect` and `accept` read
//! for the peer's next hop. Time comes from the device clock (`CLOCK_LO/HI`); call
//! [`CmAgent::progress`] whenever the NIC has run, as an application calls
//! `rdma_get_cm_event` in its loop.

use crate::error::Error;
use crate::verbs::{CompletionQueue, ConnectOptions, Context, MemoryRegion, QpEndpoint, QueuePair};
use roce_abi::reg;
use roce_core::cm::{eui64_from_mac, CmAddr, CmCallError, CmConfig, CmEvent, CmState, ConnId};
use roce_core::memory::AccessFlags;
use roce_core::num::{Psn, Qkey, Qpn};
use roce_core::transport::{
    AddressVector, Instant, Mtu, QpAttr, QpState, RecvWr, SendFlags, SendWr, UdDest, WcOpcode,
    WcStatus, WorkCompletion, WrOp, GRH_LEN,
};
use roce_core::wire::cm::{
    port_space, rdma_cm_service_id, sidr_status, IpCmHdr, PrivateData, RepRepr, ReqRepr,
    SidrRepRepr, SidrReqRepr,
};
use roce_core::wire::mad::MAD_LEN;
use std::collections::{HashMap, VecDeque};

type Result<T> = core::result::Result<T, Error>;
type Cm = roce_core::cm::Cm<16, 4, 16>;

/// Receive buffers QP1 keeps posted, and send buffers in rotation.
const RECVS: u64 = 16;
const SENDS: u64 = 16;
const SLOT: u64 = (GRH_LEN + MAD_LEN) as u64;
/// RDMA READs and atomics a connection offers to have outstanding in each direction
/// (the NIC's `max_qp_rd_atom`); the REQ/REP exchange lowers it to the peer's offer.
const RD_ATOMIC: u8 = 16;
/// The Q_Key of every UD QP in RDMA CM's UDP port space (Linux `RDMA_UDP_QKEY`): what
/// [`init_ud_qp`] sets and the SIDR_REP announces.
pub const RDMA_UDP_QKEY: Qkey = Qkey(0x0123_4567);
/// A SIDR_REQ's wait for its answer (4.096 us * 2^20, about 4.3 s) and retries: Linux
/// `cma_resolve_ib_udp`'s (`CMA_CM_RESPONSE_TIMEOUT`, `CMA_MAX_CM_RETRIES`).
const SIDR_TIMEOUT: u8 = 20;
const SIDR_RETRIES: u8 = 15;

/// What `rdma_get_cm_event` returns (`enum rdma_cm_event_type`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RdmaCmEvent {
    /// `RDMA_CM_EVENT_CONNECT_REQUEST` (a REQ, or for a UDP-space listener a SIDR_REQ):
    /// answer with [`CmAgent::accept`] or [`CmAgent::reject`]. `private_data` is the
    /// consumer's (after the IP header).
    ConnectRequest {
        id: ConnId,
        port: u16,
        private_data: Vec<u8>,
    },
    /// `RDMA_CM_EVENT_ESTABLISHED`: the QP is in RTS and may send.
    Established { id: ConnId },
    /// `RDMA_CM_EVENT_ESTABLISHED` of a UD id (the SIDR_REP came): `param.ud`, where to
    /// send (the peer's QP, its Q_Key and the address vector to it). The lookup is over:
    /// the id has no connection to disconnect.
    UdEstablished {
        id: ConnId,
        remote_qpn: Qpn,
        remote_qkey: Qkey,
        av: AddressVector,
    },
    /// `RDMA_CM_EVENT_REJECTED`: a REJ's reason, or a SIDR_REP's status.
    Rejected { id: ConnId, reason: u16 },
    /// `RDMA_CM_EVENT_UNREACHABLE`: the peer never answered.
    Unreachable { id: ConnId },
    /// `RDMA_CM_EVENT_DISCONNECTED`: the QP was moved to ERR (its work flushes).
    Disconnected { id: ConnId },
}

/// A connection's local side. `psn` is the starting PSN this side announced (REQ or
/// REP) and the one it expects to *receive* first; it sends from the peer's announced
/// PSN. That is how Linux's CM reads the field (`rdma_init_qp_attr` sets a QP's
/// `rq_psn` to its own `seq_num`, the one its REQ or REP carried, and `ib_cm` gives the
/// passive side the REQ's PSN as its `sq_psn`): captured between two rxe, rping's
/// client sends its first SEND with the REP's starting PSN and the server its READ
/// with the REQ's.
struct Conn {
    qp: Option<QueuePair>,
    /// The peer's GID and, for a passive side, its REQ.
    peer: [u8; 16],
    req: Option<ReqRepr>,
    psn: Psn,
    /// The path MTU the REQ carried (the active side: what it offered).
    mtu: Mtu,
    /// A UD lookup: the SIDR_REQ's service ID (passive side), or 0 on the active side.
    sidr: Option<u64>,
}

/// The port's RDMA CM: its GSI QP, buffers and the CM protocol.
pub struct CmAgent {
    ctx: Context,
    cq: CompletionQueue,
    qp1: QueuePair,
    mr: MemoryRegion,
    cm: Cm,
    gid: [u8; 16],
    neighbours: HashMap<[u8; 16], [u8; 6]>,
    conns: HashMap<ConnId, Conn>,
    events: VecDeque<RdmaCmEvent>,
    sent: u64,
    next_psn: u32,
}

impl CmAgent {
    /// Creates the port's GSI QP (QP1) on `ctx` and starts receiving MADs on it.
    pub fn new(ctx: &Context) -> Result<Self> {
        let pd = ctx.alloc_pd()?;
        let cq = ctx.create_cq(64)?;
        let qp1 = pd.create_gsi_qp(&cq, &cq).build()?;
        let (gid, mac) = ctx.port_addr();
        let me = QpEndpoint {
            qpn: qp1.qpn(),
            psn: Psn::new(0),
            gid,
            mac,
        };
        let gsi = ConnectOptions {
            qkey: Qkey::GSI,
            ..ConnectOptions::default()
        };
        qp1.connect(&me, Psn::new(0), &gsi)?;
        let mr = pd.reg_mr(((RECVS + SENDS) * SLOT) as usize, AccessFlags::LOCAL_WRITE)?;
        for i in 0..RECVS {
            qp1.post_recv(&RecvWr::new(i).sge(mr.addr() + i * SLOT, SLOT as u32, mr.lkey()))?;
        }
        let mut agent = Self {
            ctx: ctx.clone(),
            cq,
            qp1,
            mr,
            cm: Cm::new(CmConfig {
                ca_guid: eui64_from_mac(mac),
                first_comm_id: u32::from_be_bytes([mac[3], mac[4], mac[5], 0]),
            }),
            gid,
            neighbours: HashMap::new(),
            conns: HashMap::new(),
            events: VecDeque::new(),
            sent: 0,
            next_psn: 0,
        };
        agent.next_psn = (agent.now().as_nanos() as u32 ^ 0x5A_5A5A) & 0xFF_FFFF;
        Ok(agent)
    }

    /// Records the next hop of `gid` (what ARP or neighbour discovery found).
    pub fn add_neighbour(&mut self, gid: [u8; 16], mac: [u8; 6]) {
        self.neighbours.insert(gid, mac);
    }

    /// `rdma_listen` on a TCP-port-space port.
    pub fn listen(&mut self, port: u16) -> Result<()> {
        self.cm
            .listen(rdma_cm_service_id(port_space::TCP, port))
            .map_err(|_| Error::InvalidArgument("rdma_listen: no room or already listening"))
    }

    /// `rdma_connect` of the RC QP `qp` (in RESET, or INIT from [`init_qp`]) to `port` at `dst`, with the
    /// consumer's `private_data` (at most 56 bytes) after the RDMA CM IP header.
    pub fn connect(
        &mut self,
        qp: &QueuePair,
        dst: [u8; 16],
        port: u16,
        private_data: &[u8],
    ) -> Result<ConnId> {
        self.neighbour(&dst)?;
        let psn = self.psn();
        let mtu = self.ctx.active_mtu();
        let mut req = ReqRepr::rc(
            rdma_cm_service_id(port_space::TCP, port),
            qp.qpn(),
            psn,
            self.gid,
            dst,
        );
        req.path_mtu = mtu as u8;
        req.responder_resources = RD_ATOMIC;
        req.initiator_depth = RD_ATOMIC;
        req.private_data = ip_private(&self.gid, &dst, private_data)?;
        let now = self.now();
        let to = CmAddr {
            gid: dst,
            sgid_index: 0,
        };
        let id = self
            .cm
            .connect(now, to, req)
            .map_err(|_| Error::InvalidArgument("rdma_connect: no room for a connection"))?;
        self.conns.insert(
            id,
            Conn {
                qp: Some(qp.clone()),
                peer: dst,
                req: None,
                psn,
                mtu,
                sidr: None,
            },
        );
        self.progress()?;
        Ok(id)
    }

    /// `rdma_listen` on a UDP-port-space port: SIDR_REQs for it become connect
    /// requests, answered by [`CmAgent::accept`] with a UD QP.
    pub fn listen_udp(&mut self, port: u16) -> Result<()> {
        self.cm
            .listen(rdma_cm_service_id(port_space::UDP, port))
            .map_err(|_| Error::InvalidArgument("rdma_listen: no room or already listening"))
    }

    /// `rdma_connect` of a UD id: a SIDR_REQ for `port` (UDP port space) at `dst` with
    /// the consumer's `private_data` after the RDMA CM IP header. The answer is
    /// [`RdmaCmEvent::UdEstablished`] (or `Rejected` with the SIDR status, or
    /// `Unreachable`).
    pub fn connect_ud(&mut self, dst: [u8; 16], port: u16, private_data: &[u8]) -> Result<ConnId> {
        self.neighbour(&dst)?;
        let req = SidrReqRepr {
            request_id: 0,
            pkey: 0xFFFF,
            service_id: rdma_cm_service_id(port_space::UDP, port),
            private_data: ip_private(&self.gid, &dst, private_data)?,
        };
        let to = CmAddr {
            gid: dst,
            sgid_index: 0,
        };
        let now = self.now();
        let id = self
            .cm
            .sidr_request(now, to, req, SIDR_TIMEOUT, SIDR_RETRIES)
            .map_err(|_| Error::InvalidArgument("rdma_connect: no room for a lookup"))?;
        self.conns.insert(
            id,
            Conn {
                qp: None,
                peer: dst,
                req: None,
                psn: Psn::new(0),
                mtu: Mtu::Mtu1024,
                sidr: Some(0),
            },
        );
        self.progress()?;
        Ok(id)
    }

    /// `rdma_accept`: brings `qp` (in RESET, or INIT from [`init_qp`]) to RTS towards the requester and sends the
    /// REP; the connection is established when the RTU arrives. The path MTU is the
    /// smaller of the REQ's and the port's; READ/atomic depths follow the REQ's offer
    /// (IBTA 12.7.30: our initiator depth at most its responder resources).
    ///
    /// For a UD connect request (SIDR_REQ), `qp` is a UD QP: it is brought to RTS with
    /// [`RDMA_UDP_QKEY`] if still in RESET, and the SIDR_REP announces its QPN and Q_Key.
    pub fn accept(&mut self, id: ConnId, qp: &QueuePair) -> Result<()> {
        if let Some(service_id) = self.conns.get(&id).and_then(|c| c.sidr) {
            return self.accept_ud(id, service_id, qp);
        }
        let psn = self.psn();
        let conn = self
            .conns
            .get_mut(&id)
            .ok_or(Error::InvalidArgument("rdma_accept: no such request"))?;
        let req = conn
            .req
            .ok_or(Error::InvalidArgument("rdma_accept: not a connect request"))?;
        let peer = conn.peer;
        conn.qp = Some(qp.clone());
        conn.psn = psn;
        let mac = self.neighbour(&peer)?;
        let mtu = Mtu::from_u8(req.path_mtu)
            .ok_or(Error::InvalidArgument(
                "rdma_accept: the REQ's path MTU is invalid",
            ))?
            .min(self.ctx.active_mtu());
        let initiator_depth = req.responder_resources.min(RD_ATOMIC);
        let responder_resources = req.initiator_depth.clamp(1, RD_ATOMIC);
        qp.connect(
            &QpEndpoint {
                qpn: req.local_qpn,
                psn,
                gid: peer,
                mac,
            },
            req.starting_psn,
            &ConnectOptions {
                mtu,
                max_rd_atomic: initiator_depth.max(1),
                max_dest_rd_atomic: responder_resources,
                ..ConnectOptions::default()
            },
        )?;
        let rep = RepRepr {
            local_qpn: qp.qpn(),
            starting_psn: psn,
            responder_resources,
            initiator_depth,
            rnr_retry_count: 7,
            ..RepRepr::default()
        };
        let now = self.now();
        self.cm
            .accept(now, id, rep)
            .map_err(|_| Error::InvalidArgument("rdma_accept: the request is gone"))?;
        self.progress()
    }

    fn accept_ud(&mut self, id: ConnId, service_id: u64, qp: &QueuePair) -> Result<()> {
        if qp.qp_type() != roce_core::transport::QpType::Ud {
            return Err(Error::InvalidArgument(
                "rdma_accept: a UD connect request needs a UD QP",
            ));
        }
        if qp.state() == QpState::Reset {
            init_ud_qp(qp)?;
        }
        self.neighbour(&self.conns.get(&id).map_or([0; 16], |c| c.peer))?;
        let rep = SidrRepRepr {
            status: sidr_status::SUCCESS,
            qpn: qp.qpn(),
            service_id,
            qkey: RDMA_UDP_QKEY,
            ..SidrRepRepr::default()
        };
        self.conns.remove(&id);
        self.cm
            .sidr_reply(id, rep)
            .map_err(|_| Error::InvalidArgument("rdma_accept: the request is gone"))?;
        self.progress()
    }

    /// `rdma_reject` of a connect request (a UD one: SIDR_REP "rejected").
    pub fn reject(&mut self, id: ConnId) -> Result<()> {
        if let Some(Some(service_id)) = self.conns.remove(&id).map(|c| c.sidr) {
            let rep = SidrRepRepr {
                status: sidr_status::REJECT,
                service_id,
                ..SidrRepRepr::default()
            };
            self.cm
                .sidr_reply(id, rep)
                .map_err(|_| Error::InvalidArgument("rdma_reject: no such request"))?;
            return self.progress();
        }
        self.cm
            .reject(
                id,
                roce_core::wire::cm::rej_reason::CONSUMER_DEFINED,
                PrivateData::default(),
            )
            .map_err(|_| Error::InvalidArgument("rdma_reject: no such request"))?;
        self.progress()
    }

    /// `rdma_disconnect`: the QP goes to ERR (its work flushes) and the peer gets a
    /// DREQ. A connection already closing (our DREQ out, or the peer's answered and in
    /// `Timewait`) is not an error: Linux's `rdma_disconnect` tries the DREQ, then the
    /// DREP, and returns 0 when neither applies, so both ends may call it as their run
    /// ends, in either order.
    pub fn disconnect(&mut self, id: ConnId) -> Result<()> {
        if let Some(qp) = self.conns.get(&id).and_then(|c| c.qp.clone()) {
            qp.modify(&QpAttr::to_state(QpState::Err))?;
        }
        let now = self.now();
        match self.cm.disconnect(now, id) {
            Ok(()) | Err(CmCallError::WrongState(CmState::DreqSent | CmState::Timewait)) => {}
            Err(_) => return Err(Error::InvalidArgument("rdma_disconnect: not connected")),
        }
        self.progress()
    }

    /// The peer's GID of a connection (for a connect request: the requester's), as
    /// `rdma_get_peer_addr` gives its address: resolve its next hop before accepting.
    pub fn peer_gid(&self, id: ConnId) -> Option<[u8; 16]> {
        self.conns.get(&id).map(|c| c.peer)
    }

    /// `rdma_get_cm_event` without blocking.
    pub fn poll_event(&mut self) -> Option<RdmaCmEvent> {
        self.events.pop_front()
    }

    /// Moves MADs: sends what the CM has, hands received MADs to it, runs its timers,
    /// and turns its events into [`RdmaCmEvent`]s (moving QPs as librdmacm does).
    pub fn progress(&mut self) -> Result<()> {
        let now = self.now();
        if self.cm.poll_timeout().is_some_and(|t| t <= now) {
            self.cm.handle_timeout(now);
        }
        self.receive(now)?;
        while let Some(e) = self.cm.poll_event() {
            self.on_event(now, e)?;
        }
        self.transmit()
    }

    fn on_event(&mut self, now: Instant, e: CmEvent) -> Result<()> {
        match e {
            CmEvent::ReqReceived { id, from, req } => {
                let data = req.private_data.0;
                self.on_request(id, from.gid, req.service_id, &data, Some(req));
            }
            CmEvent::SidrReqReceived { id, from, req } => {
                let data = req.private_data.0;
                self.on_request(id, from.gid, req.service_id, &data, None);
            }
            CmEvent::SidrRepReceived { id, rep } => {
                let Some(conn) = self.conns.remove(&id) else {
                    return Ok(());
                };
                if rep.status != sidr_status::SUCCESS {
                    self.events.push_back(RdmaCmEvent::Rejected {
                        id,
                        reason: u16::from(rep.status),
                    });
                    return Ok(());
                }
                let av = AddressVector {
                    dmac: self.neighbour(&conn.peer)?,
                    dgid: conn.peer,
                    hop_limit: 64,
                    ..AddressVector::default()
                };
                self.events.push_back(RdmaCmEvent::UdEstablished {
                    id,
                    remote_qpn: rep.qpn,
                    remote_qkey: rep.qkey,
                    av,
                });
            }
            CmEvent::RepReceived { id, rep } => {
                let Some(conn) = self.conns.get(&id) else {
                    return Ok(());
                };
                let (qp, peer, psn, mtu) = (conn.qp.clone(), conn.peer, conn.psn, conn.mtu);
                let mac = self.neighbour(&peer)?;
                if let Some(qp) = qp {
                    qp.connect(
                        &QpEndpoint {
                            qpn: rep.local_qpn,
                            psn,
                            gid: peer,
                            mac,
                        },
                        rep.starting_psn,
                        &ConnectOptions {
                            mtu,
                            max_rd_atomic: rep.responder_resources.clamp(1, RD_ATOMIC),
                            max_dest_rd_atomic: RD_ATOMIC,
                            ..ConnectOptions::default()
                        },
                    )?;
                }
                let _ = self.cm.rtu(id);
                self.events.push_back(RdmaCmEvent::Established { id });
            }
            CmEvent::Established { id } => self.events.push_back(RdmaCmEvent::Established { id }),
            CmEvent::Rejected { id, rej } => {
                self.conns.remove(&id);
                self.events.push_back(RdmaCmEvent::Rejected {
                    id,
                    reason: rej.reason,
                });
            }
            CmEvent::Timeout { id, .. } => {
                self.conns.remove(&id);
                self.events.push_back(RdmaCmEvent::Unreachable { id });
            }
            CmEvent::DreqReceived { id, .. } => {
                if let Some(qp) = self.conns.get(&id).and_then(|c| c.qp.clone()) {
                    qp.modify(&QpAttr::to_state(QpState::Err))?;
                }
                let _ = self.cm.disconnect(now, id);
                self.events.push_back(RdmaCmEvent::Disconnected { id });
            }
            CmEvent::DrepReceived { id } => {
                self.events.push_back(RdmaCmEvent::Disconnected { id });
            }
            CmEvent::TimewaitExit { id } => {
                self.conns.remove(&id);
            }
        }
        Ok(())
    }

    /// A REQ (`req`) or SIDR_REQ (`None`) for a service we listen on: a passive
    /// connection and `RDMA_CM_EVENT_CONNECT_REQUEST` with the consumer's private data.
    fn on_request(
        &mut self,
        id: ConnId,
        peer: [u8; 16],
        service_id: u64,
        private: &[u8],
        req: Option<ReqRepr>,
    ) {
        let user = IpCmHdr::parse(private).map_or(private, |_| &private[IpCmHdr::LEN..]);
        self.events.push_back(RdmaCmEvent::ConnectRequest {
            id,
            port: (service_id & 0xFFFF) as u16,
            private_data: user.to_vec(),
        });
        self.conns.insert(
            id,
            Conn {
                qp: None,
                peer,
                sidr: req.is_none().then_some(service_id),
                req,
                psn: Psn::new(0),
                mtu: Mtu::Mtu1024,
            },
        );
    }

    fn transmit(&mut self) -> Result<()> {
        let mut buf = [0u8; MAD_LEN];
        while let Some((to, len)) = self.cm.poll_transmit(&mut buf) {
            let mac = self.neighbour(&to.gid)?;
            let off = (RECVS + self.sent % SENDS) * SLOT;
            self.sent += 1;
            self.mr.write(off as usize, &buf[..len])?;
            let mut wr = SendWr::new(u64::MAX, WrOp::Send)
                .sge(self.mr.addr() + off, len as u32, self.mr.lkey())
                .flags(SendFlags::SIGNALED);
            wr.ud = Some(UdDest {
                av: AddressVector {
                    dmac: mac,
                    dgid: to.gid,
                    sgid_index: to.sgid_index,
                    hop_limit: 64,
                    ..AddressVector::default()
                },
                remote_qpn: Qpn::new(1),
                remote_qkey: Qkey::GSI,
            });
            self.qp1.post_send(&wr)?;
        }
        Ok(())
    }

    fn receive(&mut self, now: Instant) -> Result<()> {
        let mut wcs = [WorkCompletion::default(); 16];
        loop {
            let got = self.cq.poll(&mut wcs)?;
            if got.is_empty() {
                return Ok(());
            }
            for wc in got.iter() {
                if wc.opcode != WcOpcode::Recv {
                    continue;
                }
                let at = wc.wr_id * SLOT;
                if wc.status == WcStatus::Success && wc.byte_len as usize > GRH_LEN {
                    let mut grh = [0u8; GRH_LEN];
                    self.mr.read(at as usize, &mut grh)?;
                    let mut mad = vec![0u8; wc.byte_len as usize - GRH_LEN];
                    self.mr.read(at as usize + GRH_LEN, &mut mad)?;
                    let from = CmAddr {
                        gid: grh_source(&grh),
                        sgid_index: 0,
                    };
                    self.cm.handle_mad(now, from, &mad);
                }
                let wr =
                    RecvWr::new(wc.wr_id).sge(self.mr.addr() + at, SLOT as u32, self.mr.lkey());
                self.qp1.post_recv(&wr)?;
            }
        }
    }

    fn neighbour(&self, gid: &[u8; 16]) -> Result<[u8; 6]> {
        self.neighbours
            .get(gid)
            .copied()
            .ok_or(Error::InvalidArgument(
                "no neighbour entry for the peer (resolve its address first)",
            ))
    }

    fn psn(&mut self) -> Psn {
        self.next_psn = self
            .next_psn
            .wrapping_mul(1_103_515_245)
            .wrapping_add(12_345)
            & 0xFF_FFFF;
        Psn::new(self.next_psn)
    }

    fn now(&self) -> Instant {
        // Reading LO latches HI.
        let lo = self.ctx.read_reg(reg::CLOCK_LO);
        let hi = self.ctx.read_reg(reg::CLOCK_HI);
        Instant::from_nanos(u64::from(hi) << 32 | u64::from(lo))
    }
}

/// What `rdma_create_qp` does after creating an RC QP: moves it to INIT (P_Key index
/// 0, port 1, the remote access rights connections get), so receives can be posted
/// before `rdma_connect` or `rdma_accept`, as rping and perftest post theirs.
pub fn init_qp(qp: &QueuePair) -> Result<()> {
    let mut init = QpAttr::to_state(QpState::Init);
    init.pkey_index = Some(0);
    init.port_num = Some(1);
    init.qp_access_flags = Some(ConnectOptions::default().access);
    qp.modify(&init)
}

/// What `rdma_create_qp` does for a UD id: INIT (P_Key index 0, port 1, Q_Key
/// [`RDMA_UDP_QKEY`]), RTR, RTS (send PSN 0), so receives and sends can be posted.
pub fn init_ud_qp(qp: &QueuePair) -> Result<()> {
    let opts = ConnectOptions {
        qkey: RDMA_UDP_QKEY,
        ..ConnectOptions::default()
    };
    qp.connect(&qp.endpoint(Psn::new(0)), Psn::new(0), &opts)
}

/// The RDMA CM IP header for an IPv4 or IPv6 pair (IPv4 addresses in the last four
/// bytes after zeros, as the kernel's `cma_hdr` has them), then the consumer's bytes.
fn ip_private<const N: usize>(
    src: &[u8; 16],
    dst: &[u8; 16],
    user: &[u8],
) -> Result<PrivateData<N>> {
    let v4 = |g: &[u8; 16]| {
        (g[..10].iter().all(|&b| b == 0) && g[10] == 0xFF && g[11] == 0xFF)
            .then(|| [g[12], g[13], g[14], g[15]])
    };
    let hdr = match (v4(src), v4(dst)) {
        (Some(s), Some(d)) => IpCmHdr::ipv4(s, 0, d),
        _ => IpCmHdr {
            ip_version: 6,
            src_port: 0,
            src: *src,
            dst: *dst,
        },
    };
    let mut buf = [0u8; N];
    let n = hdr
        .emit(&mut buf)
        .map_err(|_| Error::InvalidArgument("private data"))?;
    buf.get_mut(n..n + user.len())
        .ok_or(Error::InvalidArgument(
            "rdma_connect: too much private data (56 bytes for RC, 180 for UD)",
        ))?
        .copy_from_slice(user);
    Ok(PrivateData(buf))
}

/// The sender's GID from a UD receive's GRH area: an IPv6 header's source, or for
/// IPv4 (20 zero bytes, then the IPv4 header) its source address, IPv4-mapped.
fn grh_source(grh: &[u8; GRH_LEN]) -> [u8; 16] {
    if grh[0] >> 4 == 6 {
        let mut g = [0u8; 16];
        g.copy_from_slice(&grh[8..24]);
        g
    } else {
        roce_core::transport::ipv4_gid([grh[32], grh[33], grh[34], grh[35]])
    }
}
