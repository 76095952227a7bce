//! Test traffic nodes: a [`Generator`] of RoCEv2-like frames and a [`Sink`] that counts
//! them. They stand in for NICs until the real engine is plugged in, and exercise the
//! fabric the way one will: through the [`Node`] contract only.

use crate::node::{Node, Priorities};
use crate::queue::Nanos;
use crate::{MIN_FRAME_LEN, WIRE_OVERHEAD};
use roce_core::num::{Psn, Qpn};
use roce_core::wire::bth::BthRepr;
use roce_core::wire::ethernet::{EthernetRepr, MacAddr, VlanRepr};
use roce_core::wire::icrc;
use roce_core::wire::ipv4::Ipv4Repr;
use roce_core::wire::ipv6::Ipv6Repr;
use roce_core::wire::udp::{UdpRepr, ROCEV2_PORT};
use roce_core::wire::{self, ExtHeaders, Headers, L3Repr, Opcode};
use std::net::IpAddr;

/// What a [`Generator`] sends.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratorConfig {
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    /// Both IPv4 or both IPv6.
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    /// Adds an 802.1Q tag (VID 0, priority-tagged) with this PCP.
    pub pcp: Option<u8>,
    pub dscp: u8,
    /// ECN codepoint sent (ECT(0) = 2 by default, as RoCE NICs send).
    pub ecn: u8,
    /// UDP source port of the first flow.
    pub udp_sport: u16,
    /// Frames rotate over `flows` consecutive source ports (ECMP entropy).
    pub flows: u16,
    pub dest_qp: u32,
    /// RDMA payload bytes per frame (RC RDMA WRITE MIDDLE packets).
    pub payload: usize,
    /// Frames to send; `None` sends forever.
    pub count: Option<u64>,
    /// When the first frame may go.
    pub start_ns: Nanos,
    /// Pacing on the wire (bits of frame plus the 24 bytes of overhead per second);
    /// `None` sends whenever the link takes a frame.
    pub rate_bps: Option<u64>,
}

impl GeneratorConfig {
    /// One flow of `payload`-byte frames, ECT(0), DSCP 26 (priority 3), sent forever as
    /// fast as the link allows.
    pub fn new(
        src_mac: MacAddr,
        dst_mac: MacAddr,
        src_ip: IpAddr,
        dst_ip: IpAddr,
        payload: usize,
    ) -> Self {
        Self {
            src_mac,
            dst_mac,
            src_ip,
            dst_ip,
            pcp: None,
            dscp: 26,
            ecn: crate::classify::ECN_ECT0,
            udp_sport: 0xC000,
            flows: 1,
            dest_qp: 0x11,
            payload,
            count: None,
            start_ns: 0,
            rate_bps: None,
        }
    }

    /// The 802.1p priority the fabric gives these frames under the default DSCP map: the
    /// PCP if tagged, else DSCP >> 3. The generator stops when this priority is paused.
    pub fn priority(&self) -> u8 {
        self.pcp.unwrap_or(self.dscp >> 3) & 7
    }
}

/// Sends RoCEv2 RC RDMA WRITE MIDDLE frames out of port 0 with consecutive PSNs,
/// honouring PFC pauses of its priority.
///
/// The frame is built once with `roce_core::wire::emit`; each frame copies it and
/// patches the PSN and UDP source port. The ICRC is kept valid without recomputing it
/// over the payload: for frames of one length a CRC is affine in the message bits, so
/// flipping bit i of a field changes the CRC by a fixed `delta[i]`, computed once.
pub struct Generator {
    cfg: GeneratorConfig,
    template: Vec<u8>,
    priority: u8,
    udp_at: usize,
    psn_at: usize,
    icrc_at: usize,
    template_icrc: u32,
    /// CRC change for flipping each bit of the PSN (bits 0..24) and the source port
    /// (24..40).
    delta: [u32; 40],
    sent: u64,
    /// Wire bits sent since the start (for pacing).
    sent_bits: u64,
    next_at: Nanos,
    waiting: bool,
    received: u64,
}

impl Generator {
    pub fn new(cfg: GeneratorConfig) -> Self {
        assert!(cfg.flows > 0, "a generator needs a flow");
        let l3 = match (cfg.src_ip, cfg.dst_ip) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => L3Repr::Ipv4(Ipv4Repr {
                src,
                dst,
                dscp: cfg.dscp,
                ecn: cfg.ecn,
                ..Ipv4Repr::default()
            }),
            (IpAddr::V6(src), IpAddr::V6(dst)) => L3Repr::Ipv6(Ipv6Repr {
                src,
                dst,
                dscp: cfg.dscp,
                ecn: cfg.ecn,
                ..Ipv6Repr::default()
            }),
            _ => panic!("source and destination IPs must be of one family"),
        };
        let headers = Headers {
            eth: EthernetRepr {
                dst: cfg.dst_mac,
                src: cfg.src_mac,
                ethertype: 0,
            },
            vlan: cfg.pcp.map(|pcp| VlanRepr {
                pcp,
                dei: false,
                vid: 0,
                ethertype: 0,
            }),
            l3,
            udp: Some(UdpRepr {
                src_port: cfg.udp_sport,
                dst_port: ROCEV2_PORT,
                checksum: 0,
            }),
            bth: BthRepr::new(
                Opcode::RC_RDMA_WRITE_MIDDLE,
                Qpn::new(cfg.dest_qp),
                Psn::new(0),
            ),
            ext: ExtHeaders::default(),
        };
        let payload: Vec<u8> = (0..cfg.payload).map(|i| i as u8).collect();
        let mut template = vec![0; crate::MAX_FRAME_LEN];
        let len = wire::emit(&headers, &payload, &mut template).expect("payload fits a frame");
        template.truncate(len);
        let layout = wire::parse(&template).expect("own frame parses").layout();
        let kind = headers.l3.icrc_kind();
        let (l3_at, icrc_at) = (layout.l3, layout.icrc);
        let udp_at = layout.udp.expect("RoCEv2");
        let psn_at = layout.bth + 9;
        let crc = |f: &[u8]| icrc::compute(kind, &f[l3_at..icrc_at]).expect("covered");
        let template_icrc = crc(&template);
        let mut delta = [0u32; 40];
        let mut probe = template.clone();
        for (bit, d) in delta.iter_mut().enumerate() {
            let (byte, mask) = field_bit(bit, udp_at, psn_at);
            probe[byte] ^= mask;
            *d = crc(&probe) ^ template_icrc;
            probe[byte] ^= mask;
        }
        Self {
            priority: cfg.priority(),
            next_at: cfg.start_ns,
            cfg,
            template,
            udp_at,
            psn_at,
            icrc_at,
            template_icrc,
            delta,
            sent: 0,
            sent_bits: 0,
            waiting: false,
            received: 0,
        }
    }

    /// Frames sent so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Length of each frame (without FCS).
    pub fn frame_len(&self) -> usize {
        self.template.len()
    }

    /// Frames received (they are ignored otherwise).
    pub fn received(&self) -> u64 {
        self.received
    }

    /// True once `count` frames are out.
    pub fn done(&self) -> bool {
        self.cfg.count.is_some_and(|c| self.sent >= c)
    }

    /// Writes frame number `seq` into `buf`.
    fn write_frame(&self, seq: u64, buf: &mut [u8]) -> usize {
        let len = self.template.len();
        let f = &mut buf[..len];
        f.copy_from_slice(&self.template);
        let psn = (seq & 0xFF_FFFF) as u32;
        let sport = self
            .cfg
            .udp_sport
            .wrapping_add((seq % u64::from(self.cfg.flows)) as u16);
        f[self.psn_at..self.psn_at + 3].copy_from_slice(&psn.to_be_bytes()[1..]);
        f[self.udp_at..self.udp_at + 2].copy_from_slice(&sport.to_be_bytes());
        // Template PSN is 0, so the flipped PSN bits are those set in `psn`.
        let mut flipped = u64::from(psn) | u64::from(sport ^ self.cfg.udp_sport) << 24;
        let mut crc = self.template_icrc;
        while flipped != 0 {
            crc ^= self.delta[flipped.trailing_zeros() as usize];
            flipped &= flipped - 1;
        }
        f[self.icrc_at..self.icrc_at + 4].copy_from_slice(&crc.to_le_bytes());
        len
    }
}

/// Byte and mask of bit `bit` of the patched fields: PSN bits 0..24 (LSB first), then
/// UDP source port bits 0..16.
fn field_bit(bit: usize, udp_at: usize, psn_at: usize) -> (usize, u8) {
    if bit < 24 {
        (psn_at + 2 - bit / 8, 1 << (bit % 8))
    } else {
        let b = bit - 24;
        (udp_at + 1 - b / 8, 1 << (b % 8))
    }
}

impl Node for Generator {
    fn handle_frame(&mut self, _now: Nanos, _port: usize, _frame: &[u8]) {
        self.received += 1;
    }

    fn poll_transmit(
        &mut self,
        now: Nanos,
        port: usize,
        paused: Priorities,
        buf: &mut [u8],
    ) -> Option<usize> {
        if port != 0 || self.done() || paused.contains(self.priority) {
            return None;
        }
        if now < self.next_at {
            self.waiting = true;
            return None;
        }
        let len = self.write_frame(self.sent, buf);
        self.sent += 1;
        if let Some(rate) = self.cfg.rate_bps {
            self.sent_bits += (len.max(MIN_FRAME_LEN) + WIRE_OVERHEAD) as u64 * 8;
            let elapsed = (u128::from(self.sent_bits) * 1_000_000_000).div_ceil(u128::from(rate));
            self.next_at = self.cfg.start_ns + elapsed as Nanos;
        }
        Some(len)
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        (self.waiting && !self.done()).then_some(self.next_at)
    }

    fn handle_timeout(&mut self, _now: Nanos) {
        self.waiting = false;
    }
}

/// What a [`Sink`] counted, in total or from one source MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SinkStats {
    pub frames: u64,
    /// Frame bytes without FCS.
    pub bytes: u64,
    /// Frames that arrived with ECN = CE.
    pub ce_marked: u64,
    /// Frames that failed `roce_core::wire::parse` (ICRC, checksum, lengths, ...).
    pub bad: u64,
    /// Frames whose PSN was not after the highest seen from the same source
    /// (reordering or duplication).
    pub out_of_order: u64,
    pub first_ns: Option<Nanos>,
    pub last_ns: Option<Nanos>,
}

impl SinkStats {
    fn count(&mut self, now: Nanos, len: usize) {
        self.frames += 1;
        self.bytes += len as u64;
        self.first_ns.get_or_insert(now);
        self.last_ns = Some(now);
    }
}

/// Counts what arrives on any port, per source MAC. Verifying sinks parse every frame
/// (ICRC included) and look at ECN and PSN; counting sinks only count (the fabric
/// benchmark's trivial sink).
pub struct Sink {
    verify: bool,
    total: SinkStats,
    sources: Vec<(MacAddr, SinkStats, Option<Psn>)>,
}

impl Default for Sink {
    fn default() -> Self {
        Self::new()
    }
}

impl Sink {
    /// A sink that parses and checks every frame.
    pub fn new() -> Self {
        Self {
            verify: true,
            total: SinkStats::default(),
            sources: Vec::new(),
        }
    }

    /// A sink that only counts frames and bytes.
    pub fn counting() -> Self {
        Self {
            verify: false,
            ..Self::new()
        }
    }

    /// Everything received.
    pub fn total(&self) -> SinkStats {
        self.total
    }

    /// What came from `src`.
    pub fn from_source(&self, src: MacAddr) -> SinkStats {
        self.sources
            .iter()
            .find(|(m, ..)| *m == src)
            .map_or_else(SinkStats::default, |(_, s, _)| *s)
    }
}

impl Node for Sink {
    fn handle_frame(&mut self, now: Nanos, _port: usize, frame: &[u8]) {
        let src = MacAddr(
            frame
                .get(6..12)
                .and_then(|s| s.try_into().ok())
                .unwrap_or_default(),
        );
        let i = match self.sources.iter().position(|(m, ..)| *m == src) {
            Some(i) => i,
            None => {
                self.sources.push((src, SinkStats::default(), None));
                self.sources.len() - 1
            }
        };
        let (_, stats, highest) = &mut self.sources[i];
        self.total.count(now, frame.len());
        stats.count(now, frame.len());
        if !self.verify {
            return;
        }
        let packet = match wire::parse(frame) {
            Ok(p) => p,
            Err(_) => {
                self.total.bad += 1;
                stats.bad += 1;
                return;
            }
        };
        let ecn = match packet.l3() {
            L3Repr::Ipv4(ip) => ip.ecn,
            L3Repr::Ipv6(ip) | L3Repr::Grh(ip) => ip.ecn,
        };
        if ecn == crate::classify::ECN_CE {
            self.total.ce_marked += 1;
            stats.ce_marked += 1;
        }
        let psn = packet.psn();
        match highest {
            Some(h) if !psn.after(*h) => {
                self.total.out_of_order += 1;
                stats.out_of_order += 1;
            }
            _ => *highest = Some(psn),
        }
    }

    fn poll_transmit(
        &mut self,
        _now: Nanos,
        _port: usize,
        _paused: Priorities,
        _buf: &mut [u8],
    ) -> Option<usize> {
        None
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }

    fn handle_timeout(&mut self, _now: Nanos) {}
}
