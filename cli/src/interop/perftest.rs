//! `roce perf TEST --client HOST | --server`: perftest's benchmarks against perftest
//! itself (`ib_write_bw`, `ib_read_lat`, ...) on another machine, over a raw link.
//!
//! perftest 4.5's TCP exchange, as captured between two of its own instances (the client
//! connects and writes first in each step; each side writes its part, then reads the
//! peer's):
//! 1. the version, 16 bytes (`"6.06"` NUL-padded); the page size and the cache-line
//!    size, 4 bytes big-endian each; the MTU enum as text, 2 bytes (`"3\0"` = 1024):
//!    both ends use the smaller;
//! 2. the QP's address, 108 bytes: `"%04x:%04x:%06x:%06x:%08x:%016x:"` (LID, outstanding
//!    reads, QPN, PSN, R_Key, virtual address), 16 x `"%02x:"` (the GID), `"%08x:"` (SRQ
//!    number) and a NUL; then the same message again as a barrier: 3 times in all before
//!    write_bw, read_bw and atomic_bw start, 4 times before the others;
//! 3. after the test: write_bw, read_bw and atomic_bw exchange the address once more,
//!    then 5 x 8 bytes of results (size, iterations, three figures), then the address
//!    again and `"done\0"`; send_bw, read_lat and send_lat the address and `"done\0"`;
//!    write_lat nothing.
//!
//! With `-R` (`rdma_cm`) the same steps go as SENDs over a CM connection of their own
//! (`cm_channel`), with three differences seen in captures of perftest 4.5 against
//! itself over rxe: the address message is the binary `struct pingpong_dest` (56
//! bytes, [`Dest::to_struct`]); one exchange of 56 zero bytes comes before the test's
//! QP is connected (by a second CM connection to the same port) and one after it; and
//! there is no `"done\0"`: the client disconnects both connections instead (write_lat
//! too, which over TCP ends without a word). Every test but atomic_bw has been run this
//! way against perftest over rxe, both roles (`cargo xtask interop`'s `-R` rows).
//!
//! The RDMA side follows perftest's loops: the bandwidth tests keep `tx_depth` requests
//! outstanding to the peer's buffer; write_lat's server writes first and each side
//! writes the iteration number into the last byte of the peer's buffer and waits for
//! the same number in its own; send_lat's client sends first; read_lat reads one at a
//! time. The passive server of write_bw, read_bw, atomic_bw and read_lat only answers.

use super::cm_channel::CmChannel;
use super::{LinkArgs, Oob, Role, Station};
use crate::perf::{check, Test};
use anyhow::{bail, Context as _, Result};
use roce_core::memory::AccessFlags;
use roce_core::num::{Psn, Qpn, Rkey};
use roce_core::transport::{
    Mtu, QpType, RecvWr, SendFlags, SendWr, WcOpcode, WorkCompletion, WrOp,
};
use roce_host::{CompletionQueue, ConnectOptions, MemoryRegion, QpEndpoint, QueuePair};
use std::time::{Duration, Instant};

/// The version perftest 4.5 (Debian 12) announces.
const VERSION: &[u8] = b"6.06";
/// Length of the address message.
const DEST_LEN: usize = 108;
/// Length of the address message over RDMA CM (`sizeof(struct pingpong_dest)`).
const DEST_STRUCT_LEN: usize = 56;

/// The atomic of atomic_bw (`ib_atomic_bw -A`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
#[clap(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Atomic {
    FetchAndAdd,
    CmpAndSwap,
}

/// One wire run's parameters.
#[derive(Clone, Debug)]
pub struct WireParams {
    pub test: Test,
    pub atomic: Atomic,
    pub size: usize,
    pub iters: usize,
    /// The largest path MTU this side asks for (the peer's and the link's may lower it).
    pub mtu: Mtu,
    pub tx_depth: usize,
    pub role: Role,
    pub link: LinkArgs,
    /// The RC fast path on or off.
    pub fastpath: super::OnOff,
    /// perftest's `-I`: SENDs and WRITEs up to this size go inline (0: none).
    pub inline: u32,
    /// perftest's `-R`: connect through RDMA CM, exchange over a CM connection.
    pub rdma_cm: bool,
}

/// What a wire run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WireResult {
    pub mtu: u32,
    /// MB/s (2^20 bytes) for the bandwidth tests (the server: between the barriers).
    pub bw_mb_s: Option<f64>,
    /// Typical (median) and average one-way latency in microseconds.
    pub lat_typical_us: Option<f64>,
    pub lat_avg_us: Option<f64>,
    /// Whether this side checked the data (and it was right), or had nothing to check.
    pub data_checked: bool,
    pub retransmits: u64,
    /// NAK-sequence errors received, duplicate and out-of-sequence requests seen: how
    /// the loss recovery went on each side of the engine.
    pub rcvd_seq_err: u64,
    pub duplicate_request: u64,
    pub out_of_seq_request: u64,
    /// Frames our datapath dropped on receive (bad ICRC, malformed).
    pub rx_dropped: u64,
}

/// A peer's address message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dest {
    pub out_reads: u32,
    pub qpn: u32,
    pub psn: u32,
    pub rkey: u32,
    pub vaddr: u64,
    pub gid: [u8; 16],
}

impl Dest {
    pub fn to_wire(&self) -> Vec<u8> {
        let mut s = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            0, self.out_reads, self.qpn, self.psn, self.rkey, self.vaddr
        );
        for b in self.gid {
            s += &format!("{b:02x}:");
        }
        s += &format!("{:08x}:", 0);
        let mut v = s.into_bytes();
        v.push(0);
        v
    }

    /// `struct pingpong_dest` as perftest's RDMA CM exchange sends it: every field in
    /// network order, at its C offset (LID, outstanding reads, QPN, PSN, R_Key, 4 bytes
    /// of padding, virtual address, GID, SRQ number, GID index).
    pub fn to_struct(&self) -> [u8; DEST_STRUCT_LEN] {
        let mut m = [0u8; DEST_STRUCT_LEN];
        m[4..8].copy_from_slice(&self.out_reads.to_be_bytes());
        m[8..12].copy_from_slice(&self.qpn.to_be_bytes());
        m[12..16].copy_from_slice(&self.psn.to_be_bytes());
        m[16..20].copy_from_slice(&self.rkey.to_be_bytes());
        m[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        m[32..48].copy_from_slice(&self.gid);
        m
    }

    /// Reads [`Dest::to_struct`]'s layout (the padding is ignored: perftest leaves it
    /// uninitialised).
    pub fn parse_struct(m: &[u8]) -> Result<Self> {
        let m: &[u8; DEST_STRUCT_LEN] = m.try_into().map_err(|_| {
            anyhow::anyhow!(
                "the peer's address is {} bytes, not {DEST_STRUCT_LEN}",
                m.len()
            )
        })?;
        let u32_at = |i: usize| u32::from_be_bytes([m[i], m[i + 1], m[i + 2], m[i + 3]]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&m[32..48]);
        Ok(Self {
            out_reads: u32_at(4),
            qpn: u32_at(8),
            psn: u32_at(12),
            rkey: u32_at(16),
            vaddr: u64::from(u32_at(24)) << 32 | u64::from(u32_at(28)),
            gid,
        })
    }

    pub fn parse(m: &[u8]) -> Result<Self> {
        if m.len() != DEST_LEN {
            bail!("the peer's address is {} bytes, not {DEST_LEN}", m.len());
        }
        let text = std::str::from_utf8(m.split(|&b| b == 0).next().unwrap_or(&[]))
            .context("the peer's address is not text")?;
        let f: Vec<&str> = text.split(':').collect();
        if f.len() < 23 {
            bail!("the peer's address {text:?} has {} fields, not 23", f.len());
        }
        let hex =
            |s: &str| u64::from_str_radix(s, 16).with_context(|| format!("{s:?} in {text:?}"));
        let mut gid = [0u8; 16];
        for (i, g) in gid.iter_mut().enumerate() {
            *g = hex(f[6 + i])? as u8;
        }
        Ok(Self {
            out_reads: hex(f[1])? as u32,
            qpn: hex(f[2])? as u32,
            psn: hex(f[3])? as u32,
            rkey: hex(f[4])? as u32,
            vaddr: hex(f[5])?,
            gid,
        })
    }
}

/// Where perftest's messages go: its TCP connection, or (`-R`) a CM connection.
enum Channel<'a> {
    Tcp(Oob),
    Cm(Box<CmChannel<'a>>),
}

impl<'a> Channel<'a> {
    fn open(st: &'a Station, p: &WireParams) -> Result<Self> {
        Ok(if p.rdma_cm {
            Self::Cm(Box::new(CmChannel::open(st, &p.role, p.link.port)?))
        } else {
            Self::Tcp(Oob::open(&p.role, p.link.port)?)
        })
    }

    fn exchange(&mut self, st: &Station, mine: &[u8]) -> Result<Vec<u8>> {
        match self {
            Self::Tcp(t) => t.exchange(st, mine),
            Self::Cm(c) => c.exchange(mine),
        }
    }

    /// Our address message in this channel's encoding.
    fn dest_msg(&self, d: &Dest) -> Vec<u8> {
        match self {
            Self::Tcp(_) => d.to_wire(),
            Self::Cm(_) => d.to_struct().to_vec(),
        }
    }

    fn parse_dest(&self, m: &[u8]) -> Result<Dest> {
        match self {
            Self::Tcp(_) => Dest::parse(m),
            Self::Cm(_) => Dest::parse_struct(m),
        }
    }
}

/// Address exchanges before the test starts (the first carries the data).
fn exchanges_before(test: Test) -> usize {
    match test {
        Test::WriteBw | Test::ReadBw | Test::AtomicBw => 3,
        _ => 4,
    }
}

/// The local side of a run.
struct Local<'a> {
    st: &'a Station,
    qp: QueuePair,
    cq: CompletionQueue,
    mr: MemoryRegion,
    /// Bytes per half of the buffer: [what we send / read into][what the peer targets].
    half: usize,
    remote: Dest,
    /// Largest inline payload (perftest `-I`; 0: none).
    inline: usize,
}

/// How long without any completion before a run is declared stuck.
const STUCK: Duration = Duration::from_secs(60);

impl Local<'_> {
    /// Waits for the next completion.
    fn next_wc(&self) -> Result<WorkCompletion> {
        let mut buf = [WorkCompletion::default()];
        let t0 = Instant::now();
        loop {
            if let [wc] = self.cq.poll(&mut buf)? {
                check(wc)?;
                return Ok(*wc);
            }
            if t0.elapsed() > STUCK {
                bail!("no completion for {} s", STUCK.as_secs());
            }
            self.st.progress();
        }
    }

    fn remote_wr(&self, id: u64, op: WrOp, local_off: usize, len: usize) -> SendWr {
        let wr = SendWr::new(id, op).sge(
            self.mr.addr() + local_off as u64,
            len as u32,
            self.mr.lkey(),
        );
        self.inline_if_small(wr.flags(SendFlags::SIGNALED))
    }

    /// Adds `IBV_SEND_INLINE` to a SEND or WRITE no longer than `-I` (as perftest).
    fn inline_if_small(&self, wr: SendWr) -> SendWr {
        let len: usize = wr.sg_list.iter().map(|s| s.length as usize).sum();
        if self.inline > 0 && len <= self.inline && wr.op.opcode().can_inline() {
            let flags = wr.send_flags;
            wr.flags(flags | SendFlags::INLINE)
        } else {
            wr
        }
    }

    fn write_op(&self, off: u64) -> WrOp {
        WrOp::RdmaWrite {
            remote_addr: self.remote.vaddr + off,
            rkey: Rkey(self.remote.rkey),
        }
    }

    fn read_op(&self) -> WrOp {
        WrOp::RdmaRead {
            remote_addr: self.remote.vaddr,
            rkey: Rkey(self.remote.rkey),
        }
    }

    /// One operation, waited for (outside the timed loops: data checks).
    fn once(&self, op: WrOp, local_off: usize, len: usize) -> Result<WorkCompletion> {
        self.qp
            .post_send(&self.remote_wr(u64::MAX, op, local_off, len))?;
        self.next_wc()
    }

    fn recv_wr(&self, size: usize) -> RecvWr {
        RecvWr::new(0).sge(
            self.mr.addr() + self.half as u64,
            size as u32,
            self.mr.lkey(),
        )
    }

    /// Waits until the byte at `at` of our buffer reads `want`.
    fn wait_byte(&self, at: usize, want: u8) -> Result<()> {
        let t0 = Instant::now();
        let mut b = [0u8];
        loop {
            self.mr.read(at, &mut b)?;
            if b[0] == want {
                return Ok(());
            }
            if t0.elapsed() > STUCK {
                bail!("the peer's write {want} did not arrive");
            }
            self.st.progress();
        }
    }
}

/// write_bw's source bytes: byte i = (i * 31 + 7) ^ (i >> 8), mod 256.
pub fn write_pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i.wrapping_mul(31) + 7) ^ (i >> 8)) as u8)
        .collect()
}

/// Runs one test against a perftest peer; prints perftest-like lines to `out`.
pub fn run(p: &WireParams, out: &mut impl std::io::Write) -> Result<WireResult> {
    if p.rdma_cm && p.test == Test::AtomicBw {
        bail!("-R: atomic_bw's RDMA CM exchange is not checked against perftest here");
    }
    let st = Station::open(&p.link, p.fastpath)?;
    let shape = Shape::of(p);
    let res = Resources::create(&st, p, &shape)?;
    let mut oob = Channel::open(&st, p)?;
    let (l, mtu, my_msg) = handshake(&st, res, &mut oob, p)?;
    let atomic_base = prepare(&l, p, &shape)?;
    for _ in 1..exchanges_before(p.test) {
        oob.exchange(&st, &my_msg)?;
    }
    let t0 = Instant::now();
    let mut lat = timed(&l, p, &shape, atomic_base)?;
    let busy = t0.elapsed();
    let mut r = WireResult {
        mtu: mtu.bytes(),
        // The latency tests check every message as they go.
        data_checked: matches!(p.test, Test::WriteLat | Test::SendLat),
        ..WireResult::default()
    };
    check_data(&l, p, &shape, &mut r)?;
    close(&st, &mut oob, p, &shape, &my_msg, busy, &mut r, out)?;
    if !lat.is_empty() {
        lat.sort_by(f64::total_cmp);
        r.lat_typical_us = Some(lat[lat.len() / 2]);
        r.lat_avg_us = Some(lat.iter().sum::<f64>() / lat.len() as f64);
    }
    // Keep answering a little: the peer's last ACKs or retransmissions.
    let linger = Instant::now();
    while linger.elapsed() < Duration::from_millis(200) {
        st.progress();
    }
    let c = st.ctx.query_counters()?.engine;
    r.retransmits = c.retransmitted_pkts;
    r.rcvd_seq_err = c.rcvd_seq_err;
    r.duplicate_request = c.duplicate_request;
    r.out_of_seq_request = c.out_of_seq_request;
    r.rx_dropped = st.nic.raw_counters().rx_dropped;
    report(p, shape.size, &r, out)?;
    writeln!(out, "{}", st.path_counters()?)?;
    Ok(r)
}

/// The sizes a run works with.
struct Shape {
    /// Bytes per message (8 for atomics).
    size: usize,
    /// Requests outstanding (perftest's `--tx-depth`, at most 64).
    tx_depth: usize,
    /// Receives kept posted.
    rx_depth: usize,
    /// Bytes per half of the buffer.
    half: usize,
    client: bool,
}

impl Shape {
    fn of(p: &WireParams) -> Self {
        let size = if p.test == Test::AtomicBw { 8 } else { p.size };
        Self {
            size,
            tx_depth: p.tx_depth.clamp(1, 64),
            rx_depth: p.iters.clamp(1, 32),
            half: size.max(4096),
            client: matches!(p.role, Role::Client(_)),
        }
    }
}

/// The verbs objects of a run, before the peer is known.
struct Resources {
    qp: QueuePair,
    cq: CompletionQueue,
    mr: MemoryRegion,
    /// Our address message.
    mine: Dest,
    /// The device's READ/atomic resources per QP.
    max_rd: u32,
}

impl Resources {
    /// A CQ, an RC QP and a buffer of two halves: [what we send or read into][what the
    /// peer targets], and the address message that offers the second half.
    fn create(st: &Station, p: &WireParams, s: &Shape) -> Result<Self> {
        let pd = st.ctx.alloc_pd()?;
        let cq = st.ctx.create_cq(2 * s.tx_depth + 8)?;
        let qp = pd
            .create_qp(QpType::Rc, &cq, &cq)
            .max_send_wr(s.tx_depth)
            .max_recv_wr(s.rx_depth)
            .max_inline_data(p.inline)
            .build()?;
        let access = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        let mr = pd.reg_mr(2 * s.half, access)?;
        let max_rd = u32::from(st.ctx.query_device().max_qp_rd_atom);
        let reads = matches!(p.test, Test::ReadBw | Test::ReadLat | Test::AtomicBw);
        let (gid, _) = st.ctx.port_addr();
        let mine = Dest {
            out_reads: if reads { max_rd } else { 1 },
            qpn: qp.qpn().value(),
            psn: super::random_psn(),
            rkey: mr.rkey().0,
            vaddr: mr.addr() + s.half as u64,
            gid,
        };
        Ok(Self {
            qp,
            cq,
            mr,
            mine,
            max_rd,
        })
    }
}

/// perftest's opening exchanges (version, page and cache-line sizes, MTU, address),
/// then the QP connected to the peer's. Returns the run's side, the MTU both ends use,
/// and our address message (the barriers repeat it).
fn handshake<'a>(
    st: &'a Station,
    res: Resources,
    oob: &mut Channel,
    p: &WireParams,
) -> Result<(Local<'a>, Mtu, Vec<u8>)> {
    let mut version = VERSION.to_vec();
    version.resize(16, 0);
    oob.exchange(st, &version)?;
    oob.exchange(st, &4096u32.to_be_bytes())?;
    oob.exchange(st, &64u32.to_be_bytes())?;
    let want_mtu = p.mtu.min(st.active_mtu());
    let theirs = oob.exchange(st, &[b'0' + want_mtu as u8, 0])?;
    let mtu = (theirs[0] as char)
        .to_digit(10)
        .and_then(|d| Mtu::from_u8(d as u8))
        .map_or(want_mtu, |m| m.min(want_mtu));
    if let Channel::Cm(c) = oob {
        // The zero messages around the test QP's CM connection.
        c.exchange(&[0; DEST_STRUCT_LEN])?;
        c.connect_test_qp(&res.qp)?;
        c.exchange(&[0; DEST_STRUCT_LEN])?;
    }
    let my_msg = oob.dest_msg(&res.mine);
    let theirs = oob.exchange(st, &my_msg)?;
    let remote = oob.parse_dest(&theirs)?;
    if let Channel::Tcp(_) = oob {
        let ep = QpEndpoint {
            qpn: Qpn::new(remote.qpn),
            psn: Psn::new(remote.psn),
            gid: remote.gid,
            mac: st.resolve_gid(&remote.gid)?,
        };
        let opts = ConnectOptions {
            mtu,
            max_rd_atomic: remote.out_reads.min(res.max_rd).max(1) as u8,
            max_dest_rd_atomic: res.max_rd as u8,
            ..ConnectOptions::default()
        };
        res.qp.connect(&ep, Psn::new(res.mine.psn), &opts)?;
    }
    let half = res.mr.len() / 2;
    Ok((
        Local {
            st,
            qp: res.qp,
            cq: res.cq,
            mr: res.mr,
            half,
            remote,
            inline: p.inline as usize,
        },
        mtu,
        my_msg,
    ))
}

/// What must be in place before the timed part: receives posted, the WRITE pattern in
/// the buffer; for CMP_AND_SWAP the peer's current value, which it returns.
fn prepare(l: &Local, p: &WireParams, s: &Shape) -> Result<u64> {
    let receiver = p.test == Test::SendLat || (p.test == Test::SendBw && !s.client);
    if receiver {
        for _ in 0..s.rx_depth {
            l.qp.post_recv(&l.recv_wr(s.size))?;
        }
    }
    if s.client && p.test == Test::WriteBw {
        // What the writes carry; tools/rxe-vm/check_write_payload.py checks it on the wire.
        l.mr.write(0, &write_pattern(s.size))?;
    }
    if !(s.client && p.test == Test::AtomicBw && p.atomic == Atomic::CmpAndSwap) {
        return Ok(0);
    }
    // Learn the current value with an atomic add of 0.
    l.once(
        WrOp::AtomicFetchAndAdd {
            remote_addr: l.remote.vaddr,
            rkey: Rkey(l.remote.rkey),
            add: 0,
        },
        0,
        8,
    )?;
    let mut v = [0u8; 8];
    l.mr.read(0, &mut v)?;
    // The NIC stores an atomic's original value in host order, as libibverbs.
    Ok(u64::from_le_bytes(v))
}

/// The timed part, as perftest runs it for the test and this side's role. Returns the
/// one-way latencies measured (microseconds), if the test measures any.
fn timed(l: &Local, p: &WireParams, s: &Shape, atomic_base: u64) -> Result<Vec<f64>> {
    match (p.test, s.client) {
        (Test::WriteBw | Test::ReadBw | Test::AtomicBw | Test::SendBw, true) => {
            bandwidth(l, p, s.size, s.tx_depth, atomic_base)?;
            Ok(Vec::new())
        }
        (Test::SendBw, false) => {
            for i in 0..p.iters {
                let wc = l.next_wc()?;
                if wc.byte_len as usize != s.size {
                    bail!("receive {i}: {} bytes, expected {}", wc.byte_len, s.size);
                }
                if p.iters - i > s.rx_depth {
                    l.qp.post_recv(&l.recv_wr(s.size))?;
                }
            }
            Ok(Vec::new())
        }
        (Test::WriteLat, _) => write_lat(l, p, s),
        (Test::SendLat, _) => send_lat(l, p, s),
        (Test::ReadLat, true) => {
            let mut lat = Vec::with_capacity(p.iters);
            for i in 0..p.iters {
                let t = Instant::now();
                l.qp.post_send(&l.remote_wr(i as u64, l.read_op(), 0, s.size))?;
                l.next_wc()?;
                lat.push(t.elapsed().as_secs_f64() * 1e6);
            }
            Ok(lat)
        }
        // The passive side: the NIC answers while we wait for the peer's message.
        (Test::WriteBw | Test::ReadBw | Test::AtomicBw | Test::ReadLat, false) => Ok(Vec::new()),
    }
}

/// perftest's `run_iter_lat_write`: each side writes the iteration number into the last
/// byte of the peer's buffer and waits for the same number in its own; the server
/// writes first.
fn write_lat(l: &Local, p: &WireParams, s: &Shape) -> Result<Vec<f64>> {
    let poll_at = l.half + s.size - 1;
    let (mut scnt, mut rcnt, mut ccnt) = (0usize, 0usize, 0usize);
    let mut lat = Vec::with_capacity(p.iters);
    let mut t = Instant::now();
    while scnt < p.iters || ccnt < p.iters || rcnt < p.iters {
        // The server waits for nothing before its first write.
        if rcnt < p.iters && (s.client || scnt >= 1) {
            rcnt += 1;
            l.wait_byte(poll_at, rcnt as u8)?;
            lat.push(t.elapsed().as_secs_f64() * 1e6 / 2.0);
            t = Instant::now();
        }
        if scnt < p.iters {
            scnt += 1;
            l.mr.write(s.size - 1, &[scnt as u8])?;
            l.qp.post_send(&l.remote_wr(scnt as u64, l.write_op(0), 0, s.size))?;
        }
        if ccnt < p.iters {
            l.next_wc()?;
            ccnt += 1;
        }
    }
    Ok(lat)
}

/// perftest's send_lat: SENDs back and forth, the client first; every receive is
/// checked for its length.
fn send_lat(l: &Local, p: &WireParams, s: &Shape) -> Result<Vec<f64>> {
    let (mut scnt, mut rcnt) = (0usize, 0usize);
    let mut posted = s.rx_depth;
    let mut lat = Vec::with_capacity(p.iters);
    let mut t = Instant::now();
    while scnt < p.iters || rcnt < p.iters {
        // The client sends first.
        if rcnt < p.iters && (!s.client || scnt >= 1) {
            // The next receive (our own send completions come in between).
            loop {
                let wc = l.next_wc()?;
                if wc.opcode == WcOpcode::Recv {
                    if wc.byte_len as usize != s.size {
                        bail!("receive {rcnt}: {} bytes, expected {}", wc.byte_len, s.size);
                    }
                    break;
                }
            }
            rcnt += 1;
            lat.push(t.elapsed().as_secs_f64() * 1e6 / 2.0);
            t = Instant::now();
            if posted < p.iters {
                l.qp.post_recv(&l.recv_wr(s.size))?;
                posted += 1;
            }
        }
        if scnt < p.iters {
            scnt += 1;
            let wr =
                SendWr::new(scnt as u64, WrOp::Send).sge(l.mr.addr(), s.size as u32, l.mr.lkey());
            // Signal now and then so the send queue drains.
            let wr = if scnt % 8 == 0 || scnt == p.iters {
                wr.flags(SendFlags::SIGNALED)
            } else {
                wr
            };
            let wr = l.inline_if_small(wr);
            l.qp.post_send(&wr)?;
        }
    }
    // The last signaled send's completion.
    let t_end = Instant::now();
    while l.qp.send_outstanding() > 0 && t_end.elapsed() < STUCK {
        let mut buf = [WorkCompletion::default()];
        if let [wc] = l.cq.poll(&mut buf)? {
            check(wc)?;
        } else {
            l.st.progress();
        }
    }
    Ok(lat)
}

/// Data checks after the test. perftest's server registers its buffer for the test's
/// own access only (no read-back after write_bw, no write before read_bw), so: read_bw
/// reads the buffer once more elsewhere and compares with the timed reads' result;
/// write_bw's data is checked on the wire (every packet, resends too, carries
/// `write_pattern` at its offset: tools/rxe-vm/check_write_payload.py) and rxe
/// acknowledged every PSN in order; atomic_bw checked each original value as it came.
fn check_data(l: &Local, p: &WireParams, s: &Shape, r: &mut WireResult) -> Result<()> {
    if s.client && p.test == Test::ReadBw {
        l.mr.write(l.half, &vec![0; s.size])?;
        l.once(l.read_op(), l.half, s.size)?;
        let (mut a, mut b) = (vec![0u8; s.size], vec![0u8; s.size]);
        l.mr.read(0, &mut a)?;
        l.mr.read(l.half, &mut b)?;
        if a != b {
            bail!("read_bw: the timed reads did not return the peer's buffer");
        }
        r.data_checked = true;
    }
    if s.client && p.test == Test::AtomicBw {
        r.data_checked = true;
    }
    Ok(())
}

/// perftest's closing exchanges: the bandwidth tests trade their figures between two
/// more address messages; the others just say "done".
#[allow(clippy::too_many_arguments)]
fn close(
    st: &Station,
    oob: &mut Channel,
    p: &WireParams,
    s: &Shape,
    my_msg: &[u8],
    busy: Duration,
    r: &mut WireResult,
    out: &mut impl std::io::Write,
) -> Result<()> {
    let size = s.size;
    match p.test {
        Test::WriteBw | Test::ReadBw | Test::AtomicBw => {
            oob.exchange(st, my_msg)?;
            // Our figures (the passive server has none: it sends zeros, as perftest's
            // server sends whatever its report holds and the client ignores it).
            let (mb_s, msg_rate) = if s.client {
                let secs = busy.as_secs_f64();
                (
                    (size * p.iters) as f64 / secs / 1048576.0,
                    p.iters as f64 / secs / 1e6,
                )
            } else {
                (0.0, 0.0)
            };
            let mut theirs = Vec::new();
            for v in [
                (size as u64).to_be_bytes(),
                (p.iters as u64).to_be_bytes(),
                mb_s.to_be_bytes(),
                mb_s.to_be_bytes(),
                msg_rate.to_be_bytes(),
            ] {
                theirs.push(oob.exchange(st, &v)?);
            }
            if s.client {
                r.bw_mb_s = Some(mb_s);
            } else {
                // The client's report: size, iterations, peak, average (MB/s), rate.
                let n = u64::from_be_bytes(theirs[1][..].try_into().unwrap_or_default());
                if n != p.iters as u64 {
                    writeln!(out, "note: the client ran {n} iterations, not {}", p.iters)?;
                }
                let avg = f64::from_be_bytes(theirs[3][..].try_into().unwrap_or_default());
                writeln!(out, " the client measured {avg:.3} MB/s")?;
            }
            oob.exchange(st, my_msg)?;
            finish(st, oob)?;
        }
        Test::SendBw | Test::ReadLat | Test::SendLat => {
            if p.test == Test::SendBw {
                r.bw_mb_s = Some((size * p.iters) as f64 / busy.as_secs_f64() / 1048576.0);
            }
            oob.exchange(st, my_msg)?;
            finish(st, oob)?;
        }
        // Over TCP write_lat ends without a word; over RDMA CM the client disconnects.
        Test::WriteLat => {
            if let Channel::Cm(_) = oob {
                finish(st, oob)?;
            }
        }
    }
    Ok(())
}

/// The last step: `"done"` over TCP; over RDMA CM the client disconnects.
fn finish(st: &Station, oob: &mut Channel) -> Result<()> {
    match oob {
        Channel::Tcp(t) => t.exchange(st, b"done\0").map(drop),
        Channel::Cm(c) => c.close(),
    }
}

/// The client's bandwidth loop: `tx_depth` requests outstanding until `iters` complete.
fn bandwidth(l: &Local, p: &WireParams, size: usize, tx_depth: usize, base: u64) -> Result<()> {
    let (mut posted, mut done) = (0usize, 0usize);
    let mut last_fetch: Option<u64> = None;
    let mut buf = vec![WorkCompletion::default(); 16];
    let mut idle = Instant::now();
    if p.test == Test::AtomicBw {
        l.mr.write(0, &vec![0; 8 * tx_depth])?;
    }
    while done < p.iters {
        while posted < p.iters && posted - done < tx_depth {
            let slot = (posted % tx_depth) * 8;
            let wr = match p.test {
                Test::WriteBw => l.remote_wr(posted as u64, l.write_op(0), 0, size),
                Test::ReadBw => l.remote_wr(posted as u64, l.read_op(), 0, size),
                Test::SendBw => l.remote_wr(posted as u64, WrOp::Send, 0, size),
                _ => {
                    let (remote_addr, rkey) = (l.remote.vaddr, Rkey(l.remote.rkey));
                    let op = match p.atomic {
                        Atomic::FetchAndAdd => WrOp::AtomicFetchAndAdd {
                            remote_addr,
                            rkey,
                            add: 1,
                        },
                        Atomic::CmpAndSwap => WrOp::AtomicCmpAndSwp {
                            remote_addr,
                            rkey,
                            compare: base.wrapping_add(posted as u64),
                            swap: base.wrapping_add(posted as u64 + 1),
                        },
                    };
                    l.remote_wr(posted as u64, op, slot, 8)
                }
            };
            l.qp.post_send(&wr)?;
            posted += 1;
        }
        let wcs = l.cq.poll(&mut buf)?;
        if wcs.is_empty() {
            if idle.elapsed() > STUCK {
                bail!("stuck after {done} of {} completions", p.iters);
            }
            l.st.progress();
            continue;
        }
        idle = Instant::now();
        for wc in wcs.iter() {
            check(wc)?;
            if p.test == Test::AtomicBw {
                // The original values come back in order: each one more than the last.
                let k = wc.wr_id as usize;
                let mut v = [0u8; 8];
                l.mr.read((k % tx_depth) * 8, &mut v)?;
                let v = u64::from_le_bytes(v);
                let ok = match p.atomic {
                    Atomic::FetchAndAdd => last_fetch.is_none_or(|prev| v == prev.wrapping_add(1)),
                    Atomic::CmpAndSwap => v == base.wrapping_add(k as u64),
                };
                if !ok {
                    bail!("atomic {k}: original value {v:#x} out of sequence");
                }
                last_fetch = Some(v);
            }
            done += 1;
        }
    }
    Ok(())
}

fn report(
    p: &WireParams,
    size: usize,
    r: &WireResult,
    out: &mut impl std::io::Write,
) -> Result<()> {
    let name = match (p.test, p.atomic) {
        (Test::AtomicBw, Atomic::FetchAndAdd) => "atomic_bw(FETCH_AND_ADD)".to_string(),
        (Test::AtomicBw, Atomic::CmpAndSwap) => "atomic_bw(CMP_AND_SWAP)".to_string(),
        (t, _) => t.name().to_string(),
    };
    writeln!(
        out,
        "{name} {} against perftest: {} x {size} B, MTU {}",
        p.role.name(),
        p.iters,
        r.mtu
    )?;
    if let Some(bw) = r.bw_mb_s {
        writeln!(out, " BW average[MB/sec] {bw:.3}")?;
    }
    if let (Some(t), Some(a)) = (r.lat_typical_us, r.lat_avg_us) {
        writeln!(out, " t_typical[usec] {t:.2}  t_avg[usec] {a:.2}")?;
    }
    writeln!(
        out,
        "interop-result test={name} role={} size={size} iters={} mtu={} bw_mb_s={} lat_us={} data={} retransmits={} rcvd_seq_err={} duplicate_request={} out_of_seq_request={} rx_dropped={}",
        p.role.name(),
        p.iters,
        r.mtu,
        r.bw_mb_s.map_or("-".into(), |v| format!("{v:.3}")),
        r.lat_typical_us.map_or("-".into(), |v| format!("{v:.1}")),
        if r.data_checked { "checked" } else { "n/a" },
        r.retransmits,
        r.rcvd_seq_err,
        r.duplicate_request,
        r.out_of_seq_request,
        r.rx_dropped
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_message_matches_a_captured_one() {
        // ib_read_bw's client in the rxe VM (captured on the bridge, 108 bytes).
        let wire = b"0000:0080:000012:5f2618:00000387:0000559b8ab0e000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:03:00000000:\0";
        assert_eq!(wire.len(), DEST_LEN);
        let d = Dest::parse(wire).unwrap();
        assert_eq!(
            d,
            Dest {
                out_reads: 0x80,
                qpn: 0x12,
                psn: 0x5f2618,
                rkey: 0x387,
                vaddr: 0x559b8ab0e000,
                gid: roce_core::transport::ipv4_gid([10, 77, 0, 3]),
            }
        );
        assert_eq!(d.to_wire(), wire.to_vec());
    }
}
