//! `roce rping`: librdmacm's `rping`, either end, connected through RDMA CM
//! (`roce_host::rdma_cm`) over the NIC's QP1, so the REQ/REP/RTU and DREQ/DREP MADs are
//! the ones the kernel's `rdma_cm` exchanges with it.
//!
//! The loop (librdmacm `examples/rping.c`), per ping: the client fills its *start*
//! buffer with `"rdma-ping-%d: "` and letters (`A`..`z` from a first letter that moves
//! one on each ping, a NUL at the end) and SENDs its address, R_Key and length (16
//! bytes, big-endian: `struct rping_rdma_info`); the server RDMA READs that buffer,
//! SENDs "go ahead", the client SENDs its *sink* buffer's address, the server RDMA
//! WRITEs what it read (up to and including the NUL) there and SENDs "go ahead" again.
//! rping's `-V` compares the two buffers on the client. After the count the client
//! disconnects (DREQ), which ends the server.
//!
//! Both our ends check the data: the client compares its buffers as `-V` does; the
//! server checks that what it read is exactly what the rping rule makes for that ping.

use super::{LinkArgs, OnOff, Role, Station};
use crate::perf::check;
use anyhow::{bail, Context as _, Result};
use roce_core::cm::ConnId;
use roce_core::memory::AccessFlags;
use roce_core::num::Rkey;
use roce_core::transport::{QpType, RecvWr, SendFlags, SendWr, WcOpcode, WorkCompletion, WrOp};
use roce_host::rdma_cm::{CmAgent, RdmaCmEvent};
use roce_host::{CompletionQueue, MemoryRegion, QueuePair};
use std::time::{Duration, Instant};

/// `sizeof(stringify(INT_MAX)) + sizeof(RPING_MSG_FMT)`: rping's smallest buffer.
pub const MIN_SIZE: usize = 11 + 15;
/// rping's `RPING_BUFSIZE - 1`: its largest.
pub const MAX_SIZE: usize = 64 * 1024 - 1;
/// `struct rping_rdma_info`: buf (u64), rkey (u32), size (u32), big-endian.
const INFO_LEN: usize = 16;
/// How long the peer may keep us waiting for any one step.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server waits for its client.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(150);

/// `roce rping` options (rping's letters where it has them).
#[derive(clap::Args, Debug, Clone)]
pub struct RpingArgs {
    /// Listen for the peer's client (rping -s); `--port` is the RDMA CM port.
    #[arg(long, conflicts_with = "client")]
    pub server: bool,
    /// Connect to the peer's rping server at this IPv4 address (rping -c -a).
    #[arg(long)]
    pub client: Option<std::net::Ipv4Addr>,
    /// Pings (rping -C); 0 runs until the peer disconnects (as a server only).
    #[arg(short = 'C', long, default_value_t = 10)]
    pub count: usize,
    /// Ping data size (rping -S), 26..65535.
    #[arg(short = 'S', long, default_value_t = 64)]
    pub size: usize,
    /// Print each ping's data (rping -v).
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// The RC fast path (`docs/fastpath.md`).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub fastpath: OnOff,
    #[command(flatten)]
    pub link: LinkArgs,
}

/// What ping `n` carries from a client: rping's `rping_test_client` fill.
pub fn ping_data(n: usize, size: usize) -> Vec<u8> {
    let mut b = format!("rdma-ping-{n}: ").into_bytes();
    // The first letter moves on by one per ping, over 'A'..='z' (58 letters).
    let mut c = b'A' + (n % 58) as u8;
    while b.len() < size {
        b.push(c);
        c = if c >= b'z' { b'A' } else { c + 1 };
    }
    b.truncate(size);
    if let Some(last) = b.last_mut() {
        *last = 0;
    }
    b
}

fn info(addr: u64, rkey: Rkey, size: usize) -> [u8; INFO_LEN] {
    let mut m = [0u8; INFO_LEN];
    m[..8].copy_from_slice(&addr.to_be_bytes());
    m[8..12].copy_from_slice(&rkey.0.to_be_bytes());
    m[12..].copy_from_slice(&(size as u32).to_be_bytes());
    m
}

fn parse_info(m: &[u8]) -> Result<(u64, Rkey, u32)> {
    if m.len() != INFO_LEN {
        bail!("received {} bytes, rping_rdma_info is {INFO_LEN}", m.len());
    }
    let u32_at = |i: usize| u32::from_be_bytes([m[i], m[i + 1], m[i + 2], m[i + 3]]);
    let addr = u64::from(u32_at(0)) << 32 | u64::from(u32_at(4));
    Ok((addr, Rkey(u32_at(8)), u32_at(12)))
}

/// Runs one rping, printing rping's `-v` lines and a summary to `out`.
pub fn run(args: &RpingArgs, out: &mut impl std::io::Write) -> Result<usize> {
    let role = match (args.client, args.server) {
        (Some(ip), false) => Role::Client(ip.to_string()),
        (None, true) => Role::Server,
        _ => bail!("give --server or --client ADDR"),
    };
    if !(MIN_SIZE..=MAX_SIZE).contains(&args.size) {
        bail!(
            "size {}: rping's range is {MIN_SIZE}..={MAX_SIZE}",
            args.size
        );
    }
    if args.count == 0 && role != Role::Server {
        bail!("the client needs a count (-C)");
    }
    let st = Station::open(&args.link, args.fastpath)?;
    let mut ep = Endpoint::new(&st, args.size)?;
    let pings = match &role {
        Role::Client(ip) => {
            let ip: std::net::Ipv4Addr = ip.parse()?;
            ep.client(ip, args, out)?
        }
        Role::Server => ep.server(args, out)?,
    };
    writeln!(
        out,
        "rping {}: {pings} pings of {} B, data checked, retransmitted packets {}",
        role.name(),
        args.size,
        st.retransmits()?
    )?;
    writeln!(out, "{}", st.path_counters()?)?;
    Ok(pings)
}

/// One rping end: the CM agent, the connection's QP, and rping's buffers in one region
/// (receive info, send info, the RDMA buffer and, for a client, the start buffer).
struct Endpoint<'a> {
    st: &'a Station,
    cm: CmAgent,
    cq: CompletionQueue,
    qp: QueuePair,
    mr: MemoryRegion,
    size: usize,
}

const RECV_AT: usize = 0;
const SEND_AT: usize = INFO_LEN;
const RDMA_AT: usize = 2 * INFO_LEN;

impl<'a> Endpoint<'a> {
    fn new(st: &'a Station, size: usize) -> Result<Self> {
        let cm = CmAgent::new(&st.ctx)?;
        let pd = st.ctx.alloc_pd()?;
        let cq = st.ctx.create_cq(64)?;
        let qp = pd
            .create_qp(QpType::Rc, &cq, &cq)
            .max_send_wr(16)
            .max_recv_wr(2)
            .build()?;
        roce_host::rdma_cm::init_qp(&qp)?;
        let mr = pd.reg_mr(
            RDMA_AT + 2 * size,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
        )?;
        Ok(Self {
            st,
            cm,
            cq,
            qp,
            mr,
            size,
        })
    }

    fn start_at(&self) -> usize {
        RDMA_AT + self.size
    }

    fn post_recv(&self) -> Result<()> {
        let a = self.mr.addr() + RECV_AT as u64;
        Ok(self
            .qp
            .post_recv(&RecvWr::new(0).sge(a, INFO_LEN as u32, self.mr.lkey()))?)
    }

    fn post(&self, op: WrOp, at: usize, len: usize) -> Result<()> {
        let wr = SendWr::new(at as u64, op)
            .sge(self.mr.addr() + at as u64, len as u32, self.mr.lkey())
            .flags(SendFlags::SIGNALED);
        Ok(self.qp.post_send(&wr)?)
    }

    /// SENDs `struct rping_rdma_info` for the buffer at `at`.
    fn send_info(&self, at: usize) -> Result<()> {
        let m = info(self.mr.addr() + at as u64, self.mr.rkey(), self.size);
        self.mr.write(SEND_AT, &m)?;
        self.post(WrOp::Send, SEND_AT, INFO_LEN)
    }

    /// Runs the NIC and the CM until `want` is true of an event (which it returns).
    fn cm_event(
        &mut self,
        what: &str,
        timeout: Duration,
        want: impl Fn(&RdmaCmEvent) -> bool,
    ) -> Result<RdmaCmEvent> {
        let t0 = Instant::now();
        loop {
            self.st.progress();
            self.cm.progress()?;
            while let Some(e) = self.cm.poll_event() {
                if want(&e) {
                    return Ok(e);
                }
                match e {
                    RdmaCmEvent::Rejected { reason, .. } => bail!("{what}: rejected ({reason})"),
                    RdmaCmEvent::Unreachable { .. } => bail!("{what}: the peer is unreachable"),
                    _ => {}
                }
            }
            if t0.elapsed() > timeout {
                bail!("{what}: no answer in {} s", timeout.as_secs());
            }
        }
    }

    /// The next completion other than a SEND's, running the NIC and the CM; `None` when
    /// the peer disconnected instead.
    fn next_wc(&mut self, what: &str) -> Result<Option<WorkCompletion>> {
        let t0 = Instant::now();
        let mut wcs = [WorkCompletion::default(); 1];
        loop {
            if let Some(wc) = self.cq.poll(&mut wcs)?.first().copied() {
                check(&wc).with_context(|| what.to_string())?;
                if wc.opcode != WcOpcode::Send {
                    return Ok(Some(wc));
                }
                continue;
            }
            self.st.progress();
            self.cm.progress()?;
            if let Some(e) = self.cm.poll_event() {
                match e {
                    RdmaCmEvent::Disconnected { .. } => return Ok(None),
                    // The server's RTU: it may come after the client's first SEND.
                    RdmaCmEvent::Established { .. } => {}
                    other => bail!("{what}: unexpected {other:?}"),
                }
            }
            if t0.elapsed() > STEP_TIMEOUT {
                bail!("{what}: nothing for {} s", STEP_TIMEOUT.as_secs());
            }
        }
    }

    /// Waits for a completion of `op` (the peer must not disconnect first).
    fn expect(&mut self, op: WcOpcode, what: &str) -> Result<WorkCompletion> {
        match self.next_wc(what)? {
            Some(wc) if wc.opcode == op => Ok(wc),
            Some(wc) => bail!("{what}: a {:?} completion came instead", wc.opcode),
            None => bail!("{what}: the peer disconnected"),
        }
    }

    /// A received `rping_rdma_info` (the receive is posted again at once, as rping does).
    fn recv_info(&mut self, what: &str) -> Result<Option<(u64, Rkey, u32)>> {
        let Some(wc) = self.next_wc(what)? else {
            return Ok(None);
        };
        if wc.opcode != WcOpcode::Recv {
            bail!("{what}: a {:?} completion came instead", wc.opcode);
        }
        let mut m = vec![0u8; wc.byte_len as usize];
        self.mr.read(RECV_AT, &mut m)?;
        self.post_recv()?;
        parse_info(&m).map(Some)
    }

    fn client(
        &mut self,
        ip: std::net::Ipv4Addr,
        args: &RpingArgs,
        out: &mut impl std::io::Write,
    ) -> Result<usize> {
        let gid = roce_core::transport::ipv4_gid(ip.octets());
        self.post_recv()?;
        // The peer's server may not be up yet (no ARP answer, or REJ "invalid service
        // ID" from its CM): try again for a while, as the TCP exchanges do.
        let t0 = Instant::now();
        let id = loop {
            match self.try_connect(gid, args.link.port) {
                Ok(id) => break id,
                Err(e) if t0.elapsed() > STEP_TIMEOUT => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(300)),
            }
        };
        for n in 0..args.count {
            let data = ping_data(n, self.size);
            self.mr.write(self.start_at(), &data)?;
            self.send_info(self.start_at())?;
            self.recv_info(&format!("ping {n}: go ahead after the READ"))?
                .context("the server disconnected")?;
            self.mr.write(RDMA_AT, &vec![0u8; self.size])?;
            self.send_info(RDMA_AT)?;
            self.recv_info(&format!("ping {n}: go ahead after the WRITE"))?
                .context("the server disconnected")?;
            let mut got = vec![0u8; self.size];
            self.mr.read(RDMA_AT, &mut got)?;
            if got != data {
                bail!("ping {n}: data mismatch (the server's WRITE differs from what it read)");
            }
            if args.verbose {
                writeln!(out, "ping data: {}", text(&got))?;
            }
        }
        self.cm.disconnect(id)?;
        self.cm_event("rdma_disconnect", STEP_TIMEOUT, |e| {
            matches!(e, RdmaCmEvent::Disconnected { .. })
        })?;
        Ok(args.count)
    }

    /// Resolves the peer's MAC, sends the REQ and waits for the connection.
    fn try_connect(&mut self, gid: [u8; 16], port: u16) -> Result<ConnId> {
        let mac = self.st.resolve_gid(&gid)?;
        self.cm.add_neighbour(gid, mac);
        self.cm.connect(&self.qp, gid, port, &[])?;
        match self.cm_event("rdma_connect", STEP_TIMEOUT, |e| {
            matches!(e, RdmaCmEvent::Established { .. })
        })? {
            RdmaCmEvent::Established { id } => Ok(id),
            other => bail!("rdma_connect: {other:?}"),
        }
    }

    fn server(&mut self, args: &RpingArgs, out: &mut impl std::io::Write) -> Result<usize> {
        self.cm.listen(args.link.port)?;
        let id = match self.cm_event("rdma_listen", LISTEN_TIMEOUT, |e| {
            matches!(e, RdmaCmEvent::ConnectRequest { .. })
        })? {
            RdmaCmEvent::ConnectRequest { id, .. } => id,
            other => bail!("rdma_listen: {other:?}"),
        };
        let peer = self
            .cm
            .peer_gid(id)
            .context("the connect request is gone")?;
        let mac = self.st.resolve_gid(&peer)?;
        self.cm.add_neighbour(peer, mac);
        self.post_recv()?;
        self.post_recv()?;
        self.cm.accept(id, &self.qp)?;
        let mut n = 0;
        // rping's server waits for the first RECV, not for ESTABLISHED: the client may
        // send as soon as it has our REP.
        while let Some((addr, rkey, len)) = self.recv_info(&format!("ping {n}: source"))? {
            if len as usize != self.size {
                bail!(
                    "ping {n}: the client's buffer is {len} bytes, not {}",
                    self.size
                );
            }
            self.post(
                WrOp::RdmaRead {
                    remote_addr: addr,
                    rkey,
                },
                RDMA_AT,
                len as usize,
            )?;
            self.expect(WcOpcode::RdmaRead, &format!("ping {n}: READ"))?;
            let mut got = vec![0u8; self.size];
            self.mr.read(RDMA_AT, &mut got)?;
            if got != ping_data(n, self.size) {
                bail!("ping {n}: read {:?}, not what rping sends", text(&got));
            }
            if args.verbose {
                writeln!(out, "server ping data: {}", text(&got))?;
            }
            self.post(WrOp::Send, SEND_AT, INFO_LEN)?;
            let (addr, rkey, _) = self
                .recv_info(&format!("ping {n}: sink"))?
                .context("the client disconnected before its sink")?;
            // rping writes strlen + 1 bytes: the string and its NUL.
            let len = got
                .iter()
                .position(|&b| b == 0)
                .map_or(got.len(), |p| p + 1);
            self.post(
                WrOp::RdmaWrite {
                    remote_addr: addr,
                    rkey,
                },
                RDMA_AT,
                len,
            )?;
            self.expect(WcOpcode::RdmaWrite, &format!("ping {n}: WRITE"))?;
            self.post(WrOp::Send, SEND_AT, INFO_LEN)?;
            n += 1;
            if args.count != 0 && n > args.count {
                bail!("the client pinged more than {} times", args.count);
            }
        }
        if args.count != 0 && n != args.count {
            bail!("the client disconnected after {n} of {} pings", args.count);
        }
        Ok(n)
    }
}

/// A ping buffer as rping prints it (`%s`: up to the NUL).
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b.split(|&c| c == 0).next().unwrap_or_default()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_data_follows_rpings_fill() {
        // From rping.c's rping_test_client: ping 0 starts its letters at 'A', ping 1 at 'B'.
        let p0 = ping_data(0, 64);
        assert_eq!(p0.len(), 64);
        assert_eq!(
            &p0[..63],
            b"rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"
        );
        assert_eq!(p0[63], 0);
        assert!(ping_data(1, 64).starts_with(b"rdma-ping-1: BCD"));
        // The letters wrap from 'z' back to 'A'; ping 57 starts at 'z', ping 58 at 'A'.
        assert!(ping_data(57, 64).starts_with(b"rdma-ping-57: zABC"));
        assert!(ping_data(58, 64).starts_with(b"rdma-ping-58: ABC"));
    }

    #[test]
    fn info_is_big_endian_addr_rkey_size() {
        let m = info(0x0102_0304_0506_0708, Rkey(0x1122_3344), 64);
        assert_eq!(
            m,
            [1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 64]
        );
        assert_eq!(
            parse_info(&m).unwrap(),
            (0x0102_0304_0506_0708, Rkey(0x1122_3344), 64)
        );
        assert!(parse_info(&m[..15]).is_err());
    }
}
