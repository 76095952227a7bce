//! perftest's `-R` (`--rdma_cm`): no TCP at all. As captured between two perftest 4.5
//! over rxe (`ib_write_bw -R`), the client makes an RC connection through RDMA CM
//! (REQ/REP/RTU on QP1) to the test's port, and the messages of the TCP exchange go
//! over it as SENDs, one message per SEND, the client sending first in each step; the
//! test's own QP is connected by a *second* CM connection to the same port (the server
//! still listens there), and after the test the client disconnects both, the test's
//! first. [`CmChannel`] is that control connection and the CM agent both share.

use super::{Role, Station};
use crate::perf::check;
use anyhow::{bail, Context as _, Result};
use roce_core::cm::ConnId;
use roce_core::memory::AccessFlags;
use roce_core::transport::{
    QpType, RecvWr, SendFlags, SendWr, WcOpcode, WcStatus, WorkCompletion, WrOp,
};
use roce_host::rdma_cm::{init_qp, CmAgent, RdmaCmEvent};
use roce_host::{CompletionQueue, MemoryRegion, QueuePair};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Bytes per message buffer (perftest's longest message over CM is 56 bytes).
const SLOT: usize = 64;
/// Receives kept posted on the control QP.
const RECVS: usize = 4;
/// How long the peer may keep us waiting for any one step.
const STEP: Duration = Duration::from_secs(60);
/// How long a server waits for its client.
const LISTEN: Duration = Duration::from_secs(150);

/// The control connection of a perftest `-R` run.
pub struct CmChannel<'a> {
    st: &'a Station,
    cm: CmAgent,
    qp: QueuePair,
    cq: CompletionQueue,
    mr: MemoryRegion,
    client: bool,
    /// The peer's GID and the CM port.
    peer: [u8; 16],
    port: u16,
    ctrl: ConnId,
    test: Option<ConnId>,
    /// Connect requests and disconnections seen while waiting for something else.
    events: VecDeque<RdmaCmEvent>,
    /// Messages received and not yet taken.
    inbox: VecDeque<Vec<u8>>,
    /// Disconnecting: the control QP's receives flush when it goes to ERR.
    closing: bool,
}

impl<'a> CmChannel<'a> {
    /// The client connects to `port` at the peer's address (retrying while its server
    /// is not listening yet); the server listens on `port` and accepts the first
    /// connection.
    pub fn open(st: &'a Station, role: &Role, port: u16) -> Result<Self> {
        let mut cm = CmAgent::new(&st.ctx)?;
        let pd = st.ctx.alloc_pd()?;
        let cq = st.ctx.create_cq(2 * RECVS + 4)?;
        let qp = pd
            .create_qp(QpType::Rc, &cq, &cq)
            .max_send_wr(4)
            .max_recv_wr(RECVS)
            .build()?;
        init_qp(&qp)?;
        let mr = pd.reg_mr((RECVS + 1) * SLOT, AccessFlags::LOCAL_WRITE)?;
        for i in 0..RECVS {
            let wr =
                RecvWr::new(i as u64).sge(mr.addr() + (i * SLOT) as u64, SLOT as u32, mr.lkey());
            qp.post_recv(&wr)?;
        }
        let (client, peer, ctrl) = match role {
            Role::Client(host) => {
                let ip: std::net::Ipv4Addr = host
                    .parse()
                    .with_context(|| format!("-R needs the peer's IPv4 address, not {host:?}"))?;
                let peer = roce_core::transport::ipv4_gid(ip.octets());
                let t0 = Instant::now();
                // The peer's server may not be up yet (no ARP answer, or REJ "invalid
                // service ID"): try again for a while, as over TCP.
                let id = loop {
                    match connect(st, &mut cm, &qp, peer, port) {
                        Ok(id) => break id,
                        Err(e) if t0.elapsed() > STEP => return Err(e),
                        Err(_) => std::thread::sleep(Duration::from_millis(300)),
                    }
                };
                (true, peer, id)
            }
            Role::Server => {
                cm.listen(port)?;
                let id = next_request(st, &mut cm, &mut VecDeque::new(), LISTEN)?;
                let peer = cm.peer_gid(id).context("the connect request is gone")?;
                cm.accept(id, &qp)?;
                (false, peer, id)
            }
        };
        Ok(Self {
            st,
            cm,
            qp,
            cq,
            mr,
            client,
            peer,
            port,
            ctrl,
            test: None,
            events: VecDeque::new(),
            inbox: VecDeque::new(),
            closing: false,
        })
    }

    /// One step of the exchange: the client sends `mine` and takes the server's
    /// message; the server takes the client's, then answers with `mine`. Both messages
    /// are of the same length.
    pub fn exchange(&mut self, mine: &[u8]) -> Result<Vec<u8>> {
        if mine.len() > SLOT {
            bail!("a {}-byte message does not fit a receive", mine.len());
        }
        let theirs = if self.client {
            self.send(mine)?;
            self.recv()?
        } else {
            let m = self.recv()?;
            self.send(mine)?;
            m
        };
        if theirs.len() != mine.len() {
            bail!(
                "the peer's message is {} bytes, ours {} (the exchanges are out of step)",
                theirs.len(),
                mine.len()
            );
        }
        Ok(theirs)
    }

    /// Connects the test's QP (in RESET or INIT) by a second CM connection to the same
    /// port: the client sends the REQ, the server accepts the next connect request.
    pub fn connect_test_qp(&mut self, qp: &QueuePair) -> Result<()> {
        let id = if self.client {
            let t0 = Instant::now();
            loop {
                match connect(self.st, &mut self.cm, qp, self.peer, self.port) {
                    Ok(id) => break id,
                    Err(e) if t0.elapsed() > STEP => return Err(e),
                    Err(_) => std::thread::sleep(Duration::from_millis(300)),
                }
            }
        } else {
            let id = next_request(self.st, &mut self.cm, &mut self.events, STEP)?;
            self.cm.accept(id, qp)?;
            id
        };
        self.test = Some(id);
        Ok(())
    }

    /// Ends the run as perftest does: the client disconnects the test's connection,
    /// then the control connection, each waited for; the server waits for both.
    pub fn close(&mut self) -> Result<()> {
        self.closing = true;
        let ids: Vec<ConnId> = self.test.iter().copied().chain([self.ctrl]).collect();
        for id in ids {
            if self.client {
                self.cm.disconnect(id)?;
            }
            let t0 = Instant::now();
            while !self
                .events
                .iter()
                .any(|e| *e == RdmaCmEvent::Disconnected { id })
            {
                if t0.elapsed() > STEP {
                    bail!("rdma_disconnect: connection {} never closed", id.0);
                }
                self.run()?;
            }
        }
        Ok(())
    }

    /// Posts `mine` as one SEND and waits for its completion.
    fn send(&mut self, mine: &[u8]) -> Result<()> {
        let at = RECVS * SLOT;
        self.mr.write(at, mine)?;
        let wr = SendWr::new(u64::MAX, WrOp::Send)
            .sge(
                self.mr.addr() + at as u64,
                mine.len() as u32,
                self.mr.lkey(),
            )
            .flags(SendFlags::SIGNALED);
        self.qp.post_send(&wr)?;
        let t0 = Instant::now();
        while self.qp.send_outstanding() > 0 {
            if t0.elapsed() > STEP {
                bail!("our message was not acknowledged in {} s", STEP.as_secs());
            }
            self.run()?;
        }
        Ok(())
    }

    /// The peer's next message.
    fn recv(&mut self) -> Result<Vec<u8>> {
        let t0 = Instant::now();
        loop {
            if let Some(m) = self.inbox.pop_front() {
                return Ok(m);
            }
            if t0.elapsed() > STEP {
                bail!("the peer sent nothing for {} s", STEP.as_secs());
            }
            self.run()?;
        }
    }

    /// Runs the NIC and the CM once; takes the control QP's completions (receives into
    /// the inbox, each receive posted again) and keeps the CM's events.
    fn run(&mut self) -> Result<()> {
        self.st.progress();
        self.cm.progress()?;
        while let Some(e) = self.cm.poll_event() {
            match e {
                RdmaCmEvent::Rejected { reason, .. } => bail!("rdma_cm: rejected ({reason})"),
                RdmaCmEvent::Unreachable { .. } => bail!("rdma_cm: the peer is unreachable"),
                RdmaCmEvent::Established { .. } => {}
                other => self.events.push_back(other),
            }
        }
        let mut wcs = [WorkCompletion::default(); 4];
        loop {
            let got = self.cq.poll(&mut wcs)?;
            if got.is_empty() {
                return Ok(());
            }
            for wc in got.iter() {
                if self.closing && wc.status == WcStatus::WrFlushErr {
                    continue;
                }
                check(wc).context("the control connection")?;
                if wc.opcode != WcOpcode::Recv {
                    continue;
                }
                let at = wc.wr_id as usize * SLOT;
                let mut m = vec![0u8; wc.byte_len as usize];
                self.mr.read(at, &mut m)?;
                self.inbox.push_back(m);
                let wr = RecvWr::new(wc.wr_id).sge(
                    self.mr.addr() + at as u64,
                    SLOT as u32,
                    self.mr.lkey(),
                );
                self.qp.post_recv(&wr)?;
            }
        }
    }
}

/// `rdma_connect` of `qp` to `port` at `peer`, waited for until ESTABLISHED.
fn connect(
    st: &Station,
    cm: &mut CmAgent,
    qp: &QueuePair,
    peer: [u8; 16],
    port: u16,
) -> Result<ConnId> {
    cm.add_neighbour(peer, st.resolve_gid(&peer)?);
    let id = cm.connect(qp, peer, port, &[])?;
    let t0 = Instant::now();
    loop {
        st.progress();
        cm.progress()?;
        while let Some(e) = cm.poll_event() {
            match e {
                RdmaCmEvent::Established { id: got } if got == id => return Ok(id),
                RdmaCmEvent::Rejected { reason, .. } => bail!("rdma_connect: rejected ({reason})"),
                RdmaCmEvent::Unreachable { .. } => bail!("rdma_connect: the peer is unreachable"),
                _ => {}
            }
        }
        if t0.elapsed() > STEP {
            bail!("rdma_connect: no answer in {} s", STEP.as_secs());
        }
    }
}

/// The next connect request (one kept in `pending` first), its requester's next hop
/// resolved.
fn next_request(
    st: &Station,
    cm: &mut CmAgent,
    pending: &mut VecDeque<RdmaCmEvent>,
    timeout: Duration,
) -> Result<ConnId> {
    let t0 = Instant::now();
    loop {
        if let Some(i) = pending
            .iter()
            .position(|e| matches!(e, RdmaCmEvent::ConnectRequest { .. }))
        {
            if let Some(RdmaCmEvent::ConnectRequest { id, .. }) = pending.remove(i) {
                let peer = cm.peer_gid(id).context("the connect request is gone")?;
                cm.add_neighbour(peer, st.resolve_gid(&peer)?);
                return Ok(id);
            }
        }
        if t0.elapsed() > timeout {
            bail!("rdma_listen: no connect request in {} s", timeout.as_secs());
        }
        st.progress();
        cm.progress()?;
        while let Some(e) = cm.poll_event() {
            pending.push_back(e);
        }
    }
}
