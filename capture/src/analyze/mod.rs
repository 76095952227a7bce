//! `roce analyze`: what happened on each RoCE connection of a capture.
//!
//! Frames are fed one at a time ([`Analyzer::frame`]); the state kept is per connection
//! and per switch port, bounded whatever the number of frames (event lists stop at
//! [`stream::MAX_EVENTS`], time series coarsen, histograms have fixed precision).
//!
//! A *flow* is one direction of traffic to one QP: (source IP, destination IP,
//! destination QPN). A *connection* pairs the two flows of a QP pair: the flow A→B to QP
//! b and the flow B→A to QP a. The BTH names only the destination QP, so the pairing is
//! found from the traffic: an ACK or response on B→A whose PSN the requests on A→B sent
//! (with random initial PSNs this singles out the QP pair), or the only candidate, or the
//! UD source QP of a DETH. A flow that never pairs (one-way UC or UD, a capture of one
//! direction) is a connection of its own with the peer QP unknown.

pub mod bins;
pub mod hist;
pub mod pfc;
pub mod plot;
pub mod report;
pub mod stream;

use crate::read::{self, Frame, LinkType, Reader};
use bins::Bins;
use roce_core::wire::aeth::{NakCode, Syndrome};
use roce_core::wire::opcode::{Operation, Position, Transport};
use roce_core::wire::pfc::PfcRepr;
use roce_core::wire::{self, L3Repr, Packet};
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::time::Duration;
use stream::{Evidence, Request, RequestKind, Response, ResponseKind, Stream};

/// The shortest local ACK timeout there is: 4.096 us x 2^1 (code 0 is none).
pub const SHORTEST_ACK_TIMEOUT_NS: u64 = 8_192;

/// Analyses every frame of a capture. A corrupt record ends the reading: the analysis
/// holds the frames before it, and the error comes beside it.
pub fn run<R: std::io::Read>(
    reader: &mut Reader<R>,
    options: Options,
) -> (Analyzer, Result<(), read::Error>) {
    let mut a = Analyzer::new(options);
    loop {
        match reader.next_frame() {
            Ok(Some(f)) => a.frame(&f),
            Ok(None) => return (a, Ok(())),
            Err(e) => return (a, Err(e)),
        }
    }
}

/// Choices of the analysis.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Line rate in bits per second, to turn PFC pause quanta into time.
    pub link_bps: u64,
    /// Keep per-connection time lines for [`plot`].
    pub timelines: bool,
    /// The requesters' local ACK timeout, or the least it can be: a resend that nothing
    /// else explains is a timeout when it follows a silence at least this long.
    pub min_ack_timeout_ns: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            link_bps: 100_000_000_000,
            timelines: false,
            min_ack_timeout_ns: SHORTEST_ACK_TIMEOUT_NS,
        }
    }
}

/// Requests and responses held per flow while its partner is not known: once paired,
/// the two flows' events run in capture order; a flow that stays alone this long runs
/// without one.
const MAX_PENDING: usize = 4096;

/// A request or response, held or run.
#[derive(Debug, Clone, Copy)]
enum Event {
    Request(Request),
    Response(Response),
}

impl Event {
    fn frame(&self) -> u64 {
        match self {
            Self::Request(r) => r.frame,
            Self::Response(r) => r.frame,
        }
    }
}

/// Responses of an unpaired flow that a candidate partner's requests explained.
#[derive(Debug, Clone, Copy, Default)]
struct Score {
    answers: u32,
    sent: u32,
}

/// The first width of the bins the peak rates of ECN-CE marks and CNPs are taken over:
/// one millisecond (it doubles as a long capture needs, see `bins`).
const RATE_BIN_NS: u64 = 1_000_000;
/// The first width of a time line's bins (for the figure).
const TIMELINE_BIN_NS: u64 = 1_000;

/// Packets and payload of one opcode in one direction.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpcodeCount {
    pub packets: u64,
    pub payload_bytes: u64,
    /// LAST and ONLY packets of requests and READ responses.
    pub messages: u64,
}

/// Counts of one direction of a connection.
#[derive(Debug, Clone)]
pub struct Traffic {
    pub packets: u64,
    pub payload_bytes: u64,
    pub icrc_errors: u64,
    pub opcodes: BTreeMap<u8, OpcodeCount>,
    pub ecn_ce: u64,
    pub cnps: u64,
    pub ecn_ce_bins: Bins<u64>,
    pub cnp_bins: Bins<u64>,
    /// Responses for which no request stream was found.
    pub unmatched_responses: u64,
}

impl Default for Traffic {
    fn default() -> Self {
        Self {
            packets: 0,
            payload_bytes: 0,
            icrc_errors: 0,
            opcodes: BTreeMap::new(),
            ecn_ce: 0,
            cnps: 0,
            ecn_ce_bins: Bins::new(RATE_BIN_NS),
            cnp_bins: Bins::new(RATE_BIN_NS),
            unmatched_responses: 0,
        }
    }
}

/// One flow: the traffic to one QP from one address.
#[derive(Debug, Clone)]
pub struct Flow {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// The destination QP.
    pub qpn: u32,
    /// The sending QP, once known (from the pairing, or a UD DETH).
    pub src_qp: Option<u32>,
    pub partner: Option<usize>,
    pub transport: Option<Transport>,
    pub first_ns: u64,
    pub last_ns: u64,
    pub traffic: Traffic,
    /// The requests this flow carries, with the responses the partner flow carries.
    pub stream: Stream,
    /// Requests and responses held until the partner is known.
    pending: Option<Vec<Event>>,
    /// While unpaired: how well each candidate partner's requests explained this flow's
    /// responses.
    scores: Vec<(usize, Score)>,
    /// The PSN of the last response scored.
    scores_psn: Option<roce_core::num::Psn>,
    /// The path MTU, once a FIRST or MIDDLE packet showed it.
    pub mtu: Option<u32>,
    pub timeline: Option<Bins<plot::Slot>>,
}

/// Frames that were not RoCE packets of a flow.
#[derive(Debug, Clone, Copy, Default)]
pub struct Totals {
    pub frames: u64,
    pub roce: u64,
    pub icrc_errors: u64,
    /// Frames of other link types (pcapng interfaces that are not Ethernet).
    pub other_link: u64,
    /// Ethernet frames that are neither RoCE nor PFC.
    pub not_roce: u64,
    pub pfc: u64,
    /// RoCE frames captured without their payload (a snap length): headers only.
    pub snapped: u64,
}

/// The analysis of a capture, fed frame by frame.
#[derive(Debug)]
pub struct Analyzer {
    options: Options,
    origin: Option<Duration>,
    pub(crate) last_ns: u64,
    pub(crate) totals: Totals,
    pub(crate) flows: Vec<Flow>,
    index: HashMap<(IpAddr, IpAddr, u32), usize>,
    /// Flows without a partner, by (source, destination).
    unpaired: HashMap<(IpAddr, IpAddr), Vec<usize>>,
    pub(crate) pfc: pfc::Ports,
    /// Room to make a snapped frame whole.
    scratch: Vec<u8>,
}

fn addresses(l3: &L3Repr) -> (IpAddr, IpAddr) {
    match l3 {
        L3Repr::Ipv4(ip) => (ip.src.into(), ip.dst.into()),
        L3Repr::Ipv6(ip) | L3Repr::Grh(ip) => (ip.src.into(), ip.dst.into()),
    }
}

impl Analyzer {
    pub fn new(options: Options) -> Self {
        Self {
            options,
            origin: None,
            last_ns: 0,
            totals: Totals::default(),
            flows: Vec::new(),
            index: HashMap::new(),
            unpaired: HashMap::new(),
            pfc: pfc::Ports::new(options.link_bps),
            scratch: Vec::new(),
        }
    }

    /// Takes one frame into account.
    pub fn frame(&mut self, f: &Frame<'_>) {
        let origin = *self.origin.get_or_insert(f.timestamp);
        let t = f.timestamp.saturating_sub(origin).as_nanos() as u64;
        self.last_ns = self.last_ns.max(t);
        self.totals.frames += 1;
        if f.link != LinkType::ETHERNET {
            self.totals.other_link += 1;
            return;
        }
        if f.snapped() {
            // The headers are there; the ICRC cannot be checked.
            let mut room = std::mem::take(&mut self.scratch);
            match wire::parse_unverified(f.headers_view(&mut room)) {
                Ok(p) => {
                    self.totals.roce += 1;
                    self.totals.snapped += 1;
                    self.packet(t, f.index, &p);
                }
                Err(_) => self.totals.not_roce += 1,
            }
            self.scratch = room;
            return;
        }
        match wire::parse(f.data) {
            Ok(p) => {
                self.totals.roce += 1;
                self.packet(t, f.index, &p);
            }
            Err(wire::Error::IcrcMismatch { .. }) => {
                self.totals.icrc_errors += 1;
                // The headers are sound: count it against its flow.
                if let Ok(p) = wire::parse_unverified(f.data) {
                    let id = self.flow(&p, t);
                    self.flows[id].traffic.icrc_errors += 1;
                }
            }
            Err(_) => match PfcRepr::parse_frame(f.data) {
                Ok((mac, req)) => {
                    self.totals.pfc += 1;
                    self.pfc.frame(t, mac, &req);
                }
                Err(_) => self.totals.not_roce += 1,
            },
        }
    }

    /// The flow of a packet, made on first sight.
    fn flow(&mut self, p: &Packet<'_>, t: u64) -> usize {
        let (src, dst) = addresses(&p.l3());
        let qpn = p.dest_qp().value();
        let next = self.flows.len();
        let id = *self.index.entry((src, dst, qpn)).or_insert(next);
        if id == next {
            self.flows.push(Flow {
                src,
                dst,
                qpn,
                src_qp: None,
                partner: None,
                transport: p.info().transport.into(),
                first_ns: t,
                last_ns: t,
                traffic: Traffic::default(),
                stream: Stream::new(self.options.min_ack_timeout_ns),
                pending: Some(Vec::new()),
                scores: Vec::new(),
                scores_psn: None,
                mtu: None,
                timeline: self.options.timelines.then(|| Bins::new(TIMELINE_BIN_NS)),
            });
            self.unpaired.entry((src, dst)).or_default().push(id);
        }
        id
    }

    fn packet(&mut self, t: u64, frame: u64, p: &Packet<'_>) {
        let id = self.flow(p, t);
        let info = p.info();
        let payload = p.payload().len() as u32;
        let psn = p.psn();
        {
            let f = &mut self.flows[id];
            f.last_ns = t;
            if f.transport.is_none() && info.transport != Transport::Cnp {
                f.transport = Some(info.transport);
            }
            let tr = &mut f.traffic;
            tr.packets += 1;
            tr.payload_bytes += u64::from(payload);
            let c = tr.opcodes.entry(info.opcode.0).or_default();
            c.packets += 1;
            c.payload_bytes += u64::from(payload);
            // Messages are requests' (and READ responses'); an ACK ends nothing.
            let message = !matches!(
                info.operation,
                Operation::Acknowledge | Operation::AtomicAcknowledge | Operation::Cnp
            );
            c.messages += u64::from(message && info.position.ends());
            let ce = p.ecn() == 3;
            let cnp = info.operation == Operation::Cnp;
            if ce {
                tr.ecn_ce += 1;
                *tr.ecn_ce_bins.at(t) += 1;
            }
            if cnp {
                tr.cnps += 1;
                *tr.cnp_bins.at(t) += 1;
            }
            if matches!(info.position, Position::First | Position::Middle) && payload > 0 {
                f.mtu = Some(payload);
            }
            if let Some(line) = &mut f.timeline {
                let slot = line.at(t);
                slot.bytes += u64::from(payload);
                slot.ecn_ce += u64::from(ce);
                slot.cnps += u64::from(cnp);
            }
        }
        if let Some(d) = p.deth() {
            self.pair_ud(id, d.src_qp.value());
        }
        let event = match info.operation {
            Operation::Send
            | Operation::RdmaWrite
            | Operation::RdmaReadRequest
            | Operation::CompareSwap
            | Operation::FetchAdd
                if matches!(info.transport, Transport::Rc | Transport::Uc) =>
            {
                let kind = match info.operation {
                    Operation::RdmaReadRequest => RequestKind::Read {
                        len: p.reth().map_or(0, |r| r.dma_len),
                    },
                    Operation::CompareSwap | Operation::FetchAdd => RequestKind::Atomic,
                    _ => RequestKind::Data,
                };
                Event::Request(Request {
                    psn,
                    t,
                    frame,
                    kind,
                    ack_req: p.ack_req(),
                })
            }
            Operation::Acknowledge | Operation::AtomicAcknowledge | Operation::RdmaReadResponse => {
                let kind = match (info.operation, p.aeth().map(|a| a.syndrome)) {
                    (_, Some(Syndrome::Nak(code))) => ResponseKind::Nak(nak_code(code)),
                    (_, Some(Syndrome::RnrNak(timer))) => ResponseKind::RnrNak {
                        wait_ns: timer.nanos(),
                    },
                    (Operation::RdmaReadResponse, _) => ResponseKind::ReadResponse {
                        starts: info.position.starts(),
                        ends: info.position.ends(),
                    },
                    (Operation::AtomicAcknowledge, _) => ResponseKind::AtomicAck,
                    _ => ResponseKind::Ack,
                };
                Event::Response(Response {
                    psn,
                    t,
                    frame,
                    kind,
                })
            }
            _ => return,
        };
        if let Event::Response(r) = &event {
            if self.flows[id].partner.is_none() {
                self.try_pair(id, r);
            }
        }
        match &mut self.flows[id].pending {
            Some(held) if held.len() < MAX_PENDING => held.push(event),
            Some(_) => {
                // Too long without a partner: the best guess, or none.
                let candidates = self.candidates(id);
                match self.choose(id, &candidates, true) {
                    Some(q) => self.pair(id, q),
                    None => self.release(id),
                }
                self.apply(id, event);
            }
            None => self.apply(id, event),
        }
    }

    /// Runs a request or response through the request stream it belongs to.
    fn apply(&mut self, id: usize, e: Event) {
        match e {
            Event::Request(r) => {
                let mtu = self.mtu(id);
                let f = &mut self.flows[id];
                let sent = f.stream.request(r, mtu);
                if let Some(line) = &mut f.timeline {
                    line.at(r.t).request(&sent);
                }
            }
            Event::Response(r) => match self.flows[id].partner {
                Some(q) => {
                    let s = &mut self.flows[q];
                    s.stream.response(r);
                    let offset = s.stream.offset_of(r.psn);
                    if let Some(line) = &mut s.timeline {
                        line.at(r.t).response(r.kind, offset);
                    }
                }
                None => self.flows[id].traffic.unmatched_responses += 1,
            },
        }
    }

    /// Runs a flow's held events, in capture order with its partner's.
    fn release(&mut self, id: usize) {
        let mut held: Vec<(usize, Event)> = Vec::new();
        for f in std::iter::once(id).chain(self.flows[id].partner) {
            if let Some(events) = self.flows[f].pending.take() {
                held.extend(events.into_iter().map(|e| (f, e)));
            }
        }
        held.sort_by_key(|(_, e)| e.frame());
        for (f, e) in held {
            self.apply(f, e);
        }
    }

    /// The path MTU a flow's connection has shown.
    fn mtu(&self, id: usize) -> Option<u32> {
        let f = &self.flows[id];
        f.mtu.or_else(|| f.partner.and_then(|q| self.flows[q].mtu))
    }

    /// The flows the other way between the same two addresses that have no partner yet.
    fn candidates(&self, id: usize) -> Vec<usize> {
        let f = &self.flows[id];
        self.unpaired
            .get(&(f.dst, f.src))
            .map(|v| v.iter().copied().filter(|&g| g != id).collect())
            .unwrap_or_default()
    }

    /// Weighs response `r` of the unpaired flow `id` as evidence for each candidate
    /// partner, and pairs them when the evidence is clear.
    fn try_pair(&mut self, id: usize, r: &Response) {
        let candidates = self.candidates(id);
        // A responder answers each duplicate request with the same ACK: a PSN counts once.
        let repeated = self.flows[id].scores_psn.replace(r.psn) == Some(r.psn);
        for &g in candidates.iter().filter(|_| !repeated) {
            let e = self.evidence(g, r);
            let scores = &mut self.flows[id].scores;
            let i = match scores.iter().position(|s| s.0 == g) {
                Some(i) => i,
                None => {
                    scores.push((g, Score::default()));
                    scores.len() - 1
                }
            };
            match e {
                Evidence::Answers => scores[i].1.answers += 1,
                Evidence::Sent => scores[i].1.sent += 1,
                Evidence::None => {}
            }
        }
        if let Some(q) = self.choose(id, &candidates, false) {
            self.pair(id, q);
        }
    }

    /// The partner the evidence points to: the only candidate; or one whose requests
    /// its responses answered exactly at least three times, three times as often as any
    /// other's. With `last_chance` (the flow cannot wait longer), the candidate with the
    /// most exact answers, else the most PSNs in range, if there is a single one.
    fn choose(&self, id: usize, candidates: &[usize], last_chance: bool) -> Option<usize> {
        if let [only] = candidates {
            return Some(*only);
        }
        let score = |g: usize| {
            self.flows[id]
                .scores
                .iter()
                .find(|s| s.0 == g)
                .map_or(Score::default(), |s| s.1)
        };
        let unique_best = |key: fn(Score) -> u32| {
            let mut ranked: Vec<(u32, usize)> =
                candidates.iter().map(|&g| (key(score(g)), g)).collect();
            ranked.sort_unstable_by(|a, b| b.cmp(a));
            match ranked.as_slice() {
                [(best, g), rest @ ..] if *best > 0 => {
                    Some((*best, *g, rest.first().map_or(0, |r| r.0)))
                }
                _ => None,
            }
        };
        if let Some((best, g, second)) = unique_best(|s| s.answers) {
            if best >= 3 && second * 3 <= best {
                return Some(g);
            }
            if last_chance && best > second {
                return Some(g);
            }
        }
        if last_chance {
            if let Some((best, g, second)) = unique_best(|s| s.sent) {
                if best > second {
                    return Some(g);
                }
            }
        }
        None
    }

    /// How well flow `g`'s requests, run or held, explain response `r`.
    fn evidence(&self, g: usize, r: &Response) -> Evidence {
        let f = &self.flows[g];
        let held = f.pending.iter().flatten().filter_map(|e| match e {
            Event::Request(q) => Some(Evidence::of(q, r)),
            Event::Response(_) => None,
        });
        held.fold(f.stream.evidence(r), Evidence::max)
    }

    /// A UD DETH names the sending QP: pair with the flow to it, if it names this one.
    fn pair_ud(&mut self, id: usize, src_qp: u32) {
        let f = &mut self.flows[id];
        f.src_qp = Some(src_qp);
        if f.partner.is_some() {
            return;
        }
        let (src, dst, qpn) = (f.src, f.dst, f.qpn);
        if let Some(&q) = self.index.get(&(dst, src, src_qp)) {
            let g = &self.flows[q];
            if g.partner.is_none() && q != id && g.src_qp.is_none_or(|s| s == qpn) {
                self.pair(id, q);
            }
        }
    }

    fn pair(&mut self, a: usize, b: usize) {
        for (x, y) in [(a, b), (b, a)] {
            let qpn = self.flows[y].qpn;
            let f = &mut self.flows[x];
            f.partner = Some(y);
            f.src_qp = Some(qpn);
            f.scores = Vec::new();
            let key = (f.src, f.dst);
            if let Some(v) = self.unpaired.get_mut(&key) {
                v.retain(|&g| g != x);
            }
        }
        self.release(a);
    }

    /// Ends the analysis: closes what is running and gives the report.
    pub fn finish(&mut self) -> report::Report {
        for id in 0..self.flows.len() {
            if self.flows[id].partner.is_none() && !self.flows[id].scores.is_empty() {
                let candidates = self.candidates(id);
                if let Some(q) = self.choose(id, &candidates, true) {
                    self.pair(id, q);
                }
            }
        }
        for id in 0..self.flows.len() {
            self.release(id);
        }
        for f in &mut self.flows {
            f.stream.finish();
        }
        self.pfc.finish(self.last_ns);
        report::Report::new(self)
    }

    /// The connections: flow pairs (or single flows), in order of first appearance.
    pub(crate) fn connections(&self) -> Vec<(usize, Option<usize>)> {
        let mut done = vec![false; self.flows.len()];
        let mut out = Vec::new();
        for (id, f) in self.flows.iter().enumerate() {
            if done[id] {
                continue;
            }
            done[id] = true;
            if let Some(q) = f.partner {
                done[q] = true;
            }
            out.push((id, f.partner));
        }
        out
    }
}

fn nak_code(c: NakCode) -> u8 {
    match c {
        NakCode::PsnSequenceError => 0,
        NakCode::InvalidRequest => 1,
        NakCode::RemoteAccessError => 2,
        NakCode::RemoteOperationalError => 3,
        NakCode::InvalidRdRequest | NakCode::Reserved(_) => 4,
    }
}
