//! When may a chaos run end a QP with `RETRY_EXC_ERR`? Only when the link spent the
//! requester's whole retry budget: IBTA's `retry_cnt` is at most 7, so under 10 % loss
//! per direction (plus corruption) some timeout episode of a long run sees every retry
//! or its answer lost (each round trip fails with probability ~0.2; 0.2^7 is 1.3e-5 per
//! episode, and a run has thousands). That is the spec's answer, not a bug, but it must
//! be shown, not assumed: a responder that stays silent would end the same way.
//!
//! [`retry_budget_spent_by_link`] shows it from both ends' captures (`Fabric::tap_end`:
//! what each end sends, lost or not, and what is delivered to it). The PSN `p` the
//! requester gave up on is the lowest of its last retry (a burst of sends: it resends
//! from its first unacknowledged PSN, Go-Back-N or the holes of selective repeat). The
//! retry budget starts afresh only on progress (rxe's `reset_retry_counters`, the
//! engine's `acked_to`), so the window starts at the first answer that acknowledged
//! `p - 1` and reached the requester intact: an ACK of `p - 1` or a sequence NAK
//! naming `p` (cumulative), or the last copy of a READ response or the atomic ACK at `p - 1`
//! (taken only in order, and the capture does not say which copy was: seeds 216 and
//! 221). Answers to later PSNs that arrive after it (READ responses and atomic ACKs of
//! later requests, which do not acknowledge an unanswered READ or atomic before them;
//! duplicates) are not progress: seed 200's requester, its READ at `p` never answered,
//! received the answers to its later READ and atomic after its seventh retry, and the
//! first version of this proof, whose window began at the last answer received, found
//! nothing sent after it. In the window the responder's ePSN is at or after `p` (it
//! acknowledged `p - 1`), so `p` is a duplicate or in order there, and IBTA (rxe alike)
//! has the responder answer every copy of it that asks for an acknowledgement. The
//! proof holds when:
//! * the requester sent `p` at least `retry_cnt` times in the window (after the
//!   progress frame in its capture, which may be the same nanosecond: a sequence NAK's
//!   resend, seed 782);
//! * no answer to `p` itself (an ACK, a READ response or an atomic ACK with PSN `p`,
//!   each progress) reached the requester intact in the window; and
//! * every intact copy of `p` with AckReq that reached the responder was followed by
//!   a frame from the responder on that QP pair before the next copy reached it (all of
//!   which the link then lost or corrupted, or the window would have ended).

use roce_capture::Reader;
use roce_core::num::{Psn, Qpn};
use roce_core::wire::aeth::Syndrome;
use roce_core::wire::opcode::Operation;
use roce_core::wire::{parse, Packet};

/// One frame of a QP pair in one end's capture.
struct Seen {
    at: u64,
    /// Sent from this end (else delivered to it).
    sent: bool,
    /// Parsed with a good ICRC: (DestQP, PSN, AckReq).
    bth: Option<(Qpn, Psn, bool)>,
    /// What a response says of its PSN (`None` for a request).
    answer: Option<Answer>,
}

/// What a response says about the requests up to its PSN `q`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// An ACK: everything up to `q` is done.
    Through,
    /// The last READ response or the atomic ACK of a request: everything up to `q` is
    /// done, but the requester takes it only in order (after every earlier response of
    /// its READ, and the answers to the READs and atomics before it).
    Ends,
    /// A READ response that does not end its READ: `q` is answered, the READ is not
    /// (taken only in order too).
    Part,
    /// A NAK (sequence error, SACK, RNR or fatal): everything before `q` is done, `q`
    /// itself is not.
    Before,
}

fn answer(p: &Packet<'_>) -> Option<Answer> {
    let ends = p.info().position.ends();
    match (p.info().operation, p.aeth().map(|a| a.syndrome)) {
        (Operation::Acknowledge, Some(Syndrome::Ack(_))) => Some(Answer::Through),
        (Operation::AtomicAcknowledge, _) => Some(Answer::Ends),
        (Operation::RdmaReadResponse, _) if ends => Some(Answer::Ends),
        (Operation::RdmaReadResponse, _) => Some(Answer::Part),
        (Operation::Acknowledge, Some(_)) => Some(Answer::Before),
        _ => None,
    }
}

/// The frames of an end's pcap (`mac` = that end's MAC) in capture order.
fn frames(pcap: &[u8], mac: [u8; 6]) -> Result<Vec<Seen>, String> {
    let mut r = Reader::new(pcap).map_err(|e| format!("capture: {e}"))?;
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().map_err(|e| format!("capture: {e}"))? {
        let at = u64::try_from(f.timestamp.as_nanos()).unwrap_or(u64::MAX);
        let sent = f.data.get(6..12) == Some(&mac[..]);
        let p = parse(f.data).ok();
        let bth = p.as_ref().map(|p| (p.dest_qp(), p.psn(), p.ack_req()));
        let answer = p.as_ref().and_then(answer);
        out.push(Seen {
            at,
            sent,
            bth,
            answer,
        });
    }
    Ok(out)
}

/// The requester's and responder's side of one QP pair: each end's capture and MAC,
/// and the QPN of its QP.
pub struct End<'a> {
    pub pcap: &'a [u8],
    pub mac: [u8; 6],
    pub qpn: Qpn,
}

/// `Ok` with a one-line account when the captures show that the link, not an end, made
/// the requester's QP give up (see the module's rules); `Err` says which rule failed.
pub fn retry_budget_spent_by_link(
    req: &End<'_>,
    resp: &End<'_>,
    retry_cnt: u8,
) -> Result<String, String> {
    let a = frames(req.pcap, req.mac)?;
    let b = frames(resp.pcap, resp.mac)?;
    judge(&a, &b, (req.qpn, resp.qpn), retry_cnt)
}

/// The rules over the requester's (`a`) and responder's (`b`) frames; `qpns` =
/// (requester's QP, responder's QP).
fn judge(a: &[Seen], b: &[Seen], qpns: (Qpn, Qpn), retry_cnt: u8) -> Result<String, String> {
    let (req, resp) = qpns;
    let on = |s: &Seen, qpn: Qpn| s.bth.is_some_and(|(q, _, _)| q == qpn);
    let sent: Vec<(u64, Psn)> = a
        .iter()
        .filter(|s| s.sent && on(s, resp))
        .filter_map(|s| s.bth.map(|(_, psn, _)| (s.at, psn)))
        .collect();
    let first = last_retry(&sent).ok_or("the requester sent nothing on the QP pair")?;
    // Answers with their place in `a`: the window is "after the progress frame in
    // capture order", not "later in time", because the requester's reaction to an
    // answer (a sequence NAK's resend) leaves in the same nanosecond (seed 782).
    let answers = || {
        a.iter()
            .enumerate()
            .filter(|(_, s)| !s.sent && on(s, req))
            .filter_map(|(i, s)| Some((i, s.at, s.bth?.1, s.answer?)))
    };
    // The last progress. ACKs and NAKs are cumulative: the first that acknowledged
    // `first - 1` is it. A READ response at `first - 1` (the last of its READ, or one in
    // the middle, after which the requester resends the READ's tail from `first`) and
    // an atomic ACK there are progress too, but only a copy that arrived in order was
    // taken, and the capture cannot tell which: seed 221's requester dropped the first
    // copy of a response in the middle (the responses before it were lost) and took a
    // later one; seed 216's dropped the first copy of a READ's last response (one in
    // its middle was missing) and took a later one, and meanwhile rightly dropped the
    // answer to the next READ, at `first`. The window starts at the last such copy;
    // that counts fewer retries, never more.
    let before = first.sub(1);
    let cumulative = answers()
        .find(|&(_, _, psn, ans)| match ans {
            Answer::Through => psn == before,
            Answer::Before => psn == first,
            Answer::Ends | Answer::Part => false,
        })
        .map(|(i, at, _, _)| (i, at));
    let in_order = answers()
        .filter(|&(_, _, psn, ans)| matches!(ans, Answer::Ends | Answer::Part) && psn == before)
        .map(|(i, at, _, _)| (i, at))
        .next_back();
    let progress = cumulative.into_iter().chain(in_order).max();
    let since = progress.map_or(0, |(_, at)| at);
    let after = |i: usize| progress.is_none_or(|(p, _)| i > p);
    if let Some((_, at, _, _)) =
        answers().find(|&(i, _, psn, ans)| after(i) && psn == first && ans != Answer::Before)
    {
        return Err(format!(
            "an answer to PSN {} reached the requester intact at {at} ns, after its last \
             progress (at {since} ns): the requester ignored it",
            first.value()
        ));
    }
    let attempts = a
        .iter()
        .enumerate()
        .filter(|&(i, s)| after(i) && s.sent && on(s, resp))
        .filter(|(_, s)| s.bth.is_some_and(|(_, psn, _)| psn == first))
        .count();
    if attempts < usize::from(retry_cnt) {
        return Err(format!(
            "the requester sent PSN {} only {attempts} times after its last progress \
             (at {since} ns), fewer than retry_cnt {retry_cnt}",
            first.value()
        ));
    }
    // The responder's side: each intact copy of `first` asking for an ACK, then
    // whether the responder sent anything on the pair before the next copy arrived.
    let copies: Vec<usize> = b
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.sent && s.at > since && s.bth == Some((resp, first, true)))
        .map(|(i, _)| i)
        .collect();
    for (k, &i) in copies.iter().enumerate() {
        let end = copies.get(k + 1).copied().unwrap_or(b.len());
        let later = b.get(i + 1..end).unwrap_or(&[]);
        if !later.iter().any(|s| s.sent && on(s, req)) {
            return Err(format!(
                "the responder received PSN {} intact at {} ns (copy {} of {}) and sent \
                 nothing on the QP pair before the next copy: a silent responder",
                first.value(),
                b[i].at,
                k + 1,
                copies.len()
            ));
        }
    }
    Ok(format!(
        "PSN {} sent {attempts} times after the last progress (at {since} ns); {} intact \
         copies reached the responder, each answered, every answer lost or corrupted",
        first.value(),
        copies.len()
    ))
}

/// The PSN the requester gave up on: the lowest of its last burst of sends (`sent`:
/// time and PSN, in order), a burst being sends less than [`BURST_GAP`] apart.
fn last_retry(sent: &[(u64, Psn)]) -> Option<Psn> {
    let mut at = sent.last()?.0;
    let mut first = sent.last()?.1;
    for &(t, psn) in sent.iter().rev() {
        if at.saturating_sub(t) > BURST_GAP {
            break;
        }
        at = t;
        if psn.before(first) {
            first = psn;
        }
    }
    Some(first)
}

/// Sends of one retry are back to back (tens of ns apart on the chaos link); retries
/// are an ACK timeout apart (65.5 us at the least, `AckTimeout` 4).
const BURST_GAP: u64 = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    const A: Qpn = Qpn::new(0x10);
    const B: Qpn = Qpn::new(0x11);

    /// A request to B's QP, or an ACK to A's.
    fn frame(at: u64, sent: bool, qpn: Qpn, psn: u32) -> Seen {
        let answer = (qpn == A).then_some(Answer::Through);
        answered(at, sent, qpn, psn, answer)
    }

    fn answered(at: u64, sent: bool, qpn: Qpn, psn: u32, answer: Option<Answer>) -> Seen {
        Seen {
            at,
            sent,
            bth: Some((qpn, Psn::new(psn), true)),
            answer,
        }
    }

    /// Seed 22's story: the ACK of 1018 reaches the requester, which then sends 1019
    /// seven times; three copies reach the responder, which answers each.
    fn seed_22() -> (Vec<Seen>, Vec<Seen>) {
        let mut a = vec![frame(90, true, B, 1018), frame(100, false, A, 1018)];
        let mut b = vec![frame(95, false, B, 1018), frame(95, true, A, 1018)];
        for k in 0..7u64 {
            let t = 100_000 + 65_536 * k;
            a.push(frame(t, true, B, 1019));
            if k % 2 == 0 && k < 6 {
                b.push(frame(t + 2, false, B, 1019));
                b.push(frame(t + 2, true, A, 1019));
            }
        }
        (a, b)
    }

    /// Seed 200's story: the ACK of 970 reaches the requester, which has a two-packet
    /// READ at 971..972, a READ at 975 and an atomic at 977 outstanding. Seven retries
    /// resend all three, 100 us apart; the responder answers each copy of 971 it gets
    /// (the 1st, 4th and 7th), the link loses every READ response 971, and the answers
    /// to 972, 975 and 977 reach the requester after each retry, the last ones after
    /// the seventh.
    fn seed_200() -> (Vec<Seen>, Vec<Seen>) {
        let mut a = vec![frame(90, true, B, 970), frame(100, false, A, 970)];
        let mut b = vec![frame(95, false, B, 970), frame(95, true, A, 970)];
        for k in 0..7u64 {
            let t = 100_000 * (k + 1);
            for (i, psn) in [971, 975, 977].into_iter().enumerate() {
                a.push(frame(t + 8 * i as u64, true, B, psn));
            }
            if k % 3 == 0 {
                b.push(frame(t + 2, false, B, 971));
                b.push(answered(t + 3, true, A, 971, Some(Answer::Part)));
            }
            a.push(answered(t + 5_000, false, A, 972, Some(Answer::Ends)));
            a.push(answered(t + 5_001, false, A, 975, Some(Answer::Ends)));
            a.push(answered(t + 5_002, false, A, 977, Some(Answer::Ends)));
        }
        (a, b)
    }

    #[test]
    fn answers_to_later_psns_are_not_progress() {
        let (a, b) = seed_200();
        let why = judge(&a, &b, (A, B), 7).expect("the link spent the budget");
        assert!(why.contains("PSN 971 sent 7 times"), "{why}");
        assert!(why.contains("(at 100 ns); 3 intact copies"), "{why}");
    }

    /// Seed 221's story: a READ at 1000..1010. The responses 1000 and 1001 are lost,
    /// so the requester drops 1002 and 1003 as out of order; its retry gets 1000..1002
    /// but 1003 is lost, so it resends the READ's tail from 1003 seven times; the
    /// responder answers each copy that reaches it (the 1st, 3rd and 6th) with a
    /// response in the middle at 1003, and the link loses every one.
    fn seed_221() -> (Vec<Seen>, Vec<Seen>) {
        let part = Some(Answer::Part);
        let mut a = vec![frame(10, true, B, 1000)];
        a.push(answered(50, false, A, 1002, part));
        a.push(answered(51, false, A, 1003, part));
        a.push(frame(20_000, true, B, 1000));
        for psn in 1000..=1002 {
            a.push(answered(20_050 + u64::from(psn), false, A, psn, part));
        }
        let mut b = Vec::new();
        for k in 0..7u64 {
            let t = 100_000 * (k + 1);
            a.push(frame(t, true, B, 1003));
            if matches!(k, 0 | 2 | 5) {
                b.push(frame(t + 2, false, B, 1003));
                b.push(answered(t + 3, true, A, 1003, part));
            }
        }
        a.sort_by_key(|s| s.at);
        (a, b)
    }

    #[test]
    fn a_reads_tail_resent_counts_from_the_response_before_it_taken_in_order() {
        let (a, b) = seed_221();
        let why = judge(&a, &b, (A, B), 7).expect("the link spent the budget");
        assert!(why.contains("PSN 1003 sent 7 times"), "{why}");
        assert!(why.contains("(at 21052 ns); 3 intact copies"), "{why}");
        // An answer to 1003 after the response it follows is still caught.
        let (mut a, b) = seed_221();
        a.push(answered(300_004, false, A, 1003, Some(Answer::Part)));
        a.sort_by_key(|s| s.at);
        let err = judge(&a, &b, (A, B), 7).expect_err("1003 was answered");
        assert!(
            err.contains("at 300004 ns") && err.contains("ignored"),
            "{err}"
        );
    }

    /// Seed 216's story (RTL datapath, selective repeat, QP pair 7): a READ at 245..250,
    /// then a one-packet READ at 251. The response 247 is lost, so the requester drops
    /// 248..250 (the first copy of the last response, 250, at 503 ns) and resends the
    /// READ's tail; the response to 251 arrives at 2,374 ns, while 247 is still missing,
    /// and is rightly dropped too (a later READ's answer does not finish an earlier
    /// READ); 247..250 arrive at 4,431..4,689 ns and finish the READ. Then 251 is sent
    /// seven times, the responder answers the five copies it gets, and the link loses
    /// every answer (in the run, the link's random stream replayed from the seed predicts
    /// each of those losses).
    fn seed_216() -> (Vec<Seen>, Vec<Seen>) {
        let (part, ends) = (Some(Answer::Part), Some(Answer::Ends));
        let mut a = vec![frame(0, true, B, 245), frame(8, true, B, 251)];
        for (at, psn) in [(68, 245), (157, 246), (334, 248), (422, 249)] {
            a.push(answered(at, false, A, psn, part));
        }
        a.push(answered(503, false, A, 250, ends));
        a.push(frame(340, true, B, 247));
        a.push(frame(342, true, B, 251));
        a.push(answered(2_374, false, A, 251, ends));
        for (at, psn) in [(4_431, 247), (4_519, 248), (4_608, 249)] {
            a.push(answered(at, false, A, psn, part));
        }
        a.push(answered(4_689, false, A, 250, ends));
        let mut b = Vec::new();
        for k in 0..7u64 {
            let t = 4_775 + 100_000 * k;
            a.push(frame(t, true, B, 251));
            if matches!(k, 0 | 2 | 3 | 4 | 6) {
                b.push(frame(t + 2, false, B, 251));
                b.push(answered(t + 2, true, A, 251, ends));
            }
        }
        a.sort_by_key(|s| s.at);
        (a, b)
    }

    #[test]
    fn a_reads_last_response_counts_from_its_last_copy() {
        let (a, b) = seed_216();
        let why = judge(&a, &b, (A, B), 7).expect("the link spent the budget");
        assert!(why.contains("PSN 251 sent 7 times"), "{why}");
        assert!(why.contains("(at 4689 ns); 5 intact copies"), "{why}");
        // An answer to 251 after the last copy of the response before it is still
        // caught.
        let (mut a, b) = seed_216();
        a.push(answered(300_004, false, A, 251, Some(Answer::Ends)));
        a.sort_by_key(|s| s.at);
        let err = judge(&a, &b, (A, B), 7).expect_err("251 was answered");
        assert!(
            err.contains("at 300004 ns") && err.contains("ignored"),
            "{err}"
        );
    }

    /// Seed 782's story (software, selective repeat, QP pair 6): the atomic ACK of 409
    /// arrives, then a sequence NAK naming 410 (the responder had 411 first), and the
    /// requester resends 410 in the same nanosecond, its first retry after that
    /// progress; six ACK timeouts resend it again, the responder answers each copy it
    /// gets (the 2nd, 3rd and 5th), and the link loses every answer.
    fn seed_782() -> (Vec<Seen>, Vec<Seen>) {
        let mut a = vec![frame(0, true, B, 409), frame(9, true, B, 410)];
        a.push(answered(339, false, A, 409, Some(Answer::Ends)));
        a.push(answered(356, false, A, 410, Some(Answer::Before)));
        a.push(frame(356, true, B, 410));
        let mut b = vec![frame(5, false, B, 409), frame(5, true, A, 409)];
        for k in 1..7u64 {
            let t = 356 + 4_194_304 * k;
            a.push(frame(t, true, B, 410));
            if matches!(k, 2 | 3 | 5) {
                b.push(frame(t + 2, false, B, 410));
                b.push(answered(t + 2, true, A, 410, Some(Answer::Ends)));
            }
        }
        (a, b)
    }

    #[test]
    fn a_resend_in_the_nanosecond_of_the_progress_counts() {
        let (a, b) = seed_782();
        let why = judge(&a, &b, (A, B), 7).expect("the link spent the budget");
        assert!(why.contains("PSN 410 sent 7 times"), "{why}");
        assert!(why.contains("(at 356 ns); 3 intact copies"), "{why}");
        // A copy sent in that nanosecond but before the NAK in the capture came before
        // the progress: six retries are not seven.
        let (mut a, b) = seed_782();
        a.swap(3, 4);
        let err = judge(&a, &b, (A, B), 7).expect_err("6 sends after the NAK");
        assert!(err.contains("PSN 410 only 6 times"), "{err}");
    }

    #[test]
    fn a_silent_requester_is_caught() {
        // It got the ACK of 970, then sent nothing more, then gave up.
        let (mut a, b) = seed_200();
        a.retain(|s| !(s.sent && s.at > 100));
        let err = judge(&a, &b, (A, B), 7).expect_err("nothing was retried");
        assert!(
            err.contains("answer to PSN 970") && err.contains("ignored"),
            "{err}"
        );
        // It resent three times, then stopped; the late answers still came.
        let (mut a, b) = seed_200();
        a.retain(|s| !(s.sent && s.at > 350_000));
        let err = judge(&a, &b, (A, B), 7).expect_err("3 sends are not 7 retries");
        assert!(err.contains("PSN 971 only 3 times"), "{err}");
    }

    #[test]
    fn a_requester_that_ignores_the_answer_is_caught() {
        let (mut a, b) = seed_200();
        a.push(answered(400_004, false, A, 971, Some(Answer::Part)));
        a.sort_by_key(|s| s.at);
        let err = judge(&a, &b, (A, B), 7).expect_err("971 was answered");
        assert!(
            err.contains("at 400004 ns") && err.contains("ignored"),
            "{err}"
        );
    }

    #[test]
    fn every_answer_lost_is_the_links_doing() {
        let (a, b) = seed_22();
        let why = judge(&a, &b, (A, B), 7).expect("the link spent the budget");
        assert!(why.contains("PSN 1019 sent 7 times"), "{why}");
        assert!(why.contains("3 intact copies"), "{why}");
    }

    #[test]
    fn a_silent_responder_is_caught() {
        let (a, mut b) = seed_22();
        // Drop the responder's answer to the second copy.
        let answers: Vec<usize> = (0..b.len())
            .filter(|&i| b[i].sent && b[i].at > 100)
            .collect();
        b.remove(answers[1]);
        let err = judge(&a, &b, (A, B), 7).expect_err("a copy went unanswered");
        assert!(
            err.contains("copy 2 of 3") && err.contains("silent"),
            "{err}"
        );
    }

    #[test]
    fn a_requester_that_gives_up_early_is_caught() {
        let (mut a, b) = seed_22();
        a.truncate(a.len() - 2);
        let err = judge(&a, &b, (A, B), 7).expect_err("5 sends are not 7 retries");
        assert!(err.contains("only 5 times"), "{err}");
    }
}
