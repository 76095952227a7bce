//! perftest's `-R` address message against a real exchange: `ib_write_bw -R -n 5 -s
//! 4096` between two perftest 4.5 over rxe (`data/captures/rxe_perftest_R.pcap`, see its
//! `SOURCE.md`). Over RDMA CM the address goes as the binary `struct pingpong_dest`
//! (56 bytes, network order), not the 108-byte text of the TCP exchange; what it says
//! is checked against what perftest printed for the same run and against the RETH of
//! the WRITEs that followed it.

use roce_cli::interop::perftest::Dest;
use roce_core::num::Qpn;
use roce_core::transport::ipv4_gid;
use roce_core::wire::{self, opcode::Opcode};
use std::path::Path;

/// A SEND on the control connection: the sender's IPv4 address and the payload.
type Message = ([u8; 4], Vec<u8>);

/// The RC SENDs on perftest's control connection (QP 0x11 at both ends), in order, and
/// the RETHs of the capture.
fn control_messages() -> (Vec<Message>, Vec<wire::reth::RethRepr>) {
    let pcap = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/captures/rxe_perftest_R.pcap");
    let mut r = roce_capture::open(&pcap).expect("open capture");
    let (mut msgs, mut reths) = (Vec::new(), Vec::new());
    while let Some(f) = r.next_frame().expect("read frame") {
        let frame = f.data.to_vec();
        let pkt = wire::parse(&frame).expect("a valid RoCE frame");
        let src = [frame[26], frame[27], frame[28], frame[29]];
        if pkt.opcode() == Opcode::RC_SEND_ONLY && pkt.dest_qp() == Qpn::new(0x11) {
            msgs.push((src, pkt.payload().to_vec()));
        }
        if let Some(reth) = pkt.reth() {
            reths.push(reth);
        }
    }
    (msgs, reths)
}

#[test]
fn perftest_rdma_cm_address_messages_decode_as_perftest_printed_them() {
    let (msgs, reths) = control_messages();
    let dests: Vec<([u8; 4], Dest)> = msgs
        .iter()
        .filter(|(_, m)| m.len() == 56 && m.iter().any(|&b| b != 0))
        .map(|(src, m)| (*src, Dest::parse_struct(m).expect("a pingpong_dest")))
        .collect();
    // Three before the test and two after it, from each side.
    assert_eq!(dests.len(), 10);
    // What the two perftests printed ("local address: ... QPN 0x0012 PSN 0x1988f1").
    let client = [10, 77, 0, 3];
    for (src, d) in &dests {
        let (psn, gid) = if *src == client {
            (0x1988f1, ipv4_gid(client))
        } else {
            (0xd6024a, ipv4_gid([10, 77, 0, 2]))
        };
        assert_eq!((d.qpn, d.psn, d.gid, d.out_reads), (0x12, psn, gid, 1));
    }
    // The server's buffer is where the client's WRITEs went.
    let server = dests.iter().find(|(s, _)| *s != client).unwrap().1;
    assert!(!reths.is_empty());
    for reth in &reths {
        assert_eq!((reth.va, reth.rkey.0), (server.vaddr, server.rkey));
    }
    // Our encoding is perftest's, byte for byte, but for the 4 bytes of padding after
    // the R_Key that perftest leaves uninitialised.
    for (_, m) in msgs.iter().filter(|(_, m)| m.len() == 56) {
        if m.iter().all(|&b| b == 0) {
            continue;
        }
        let ours = Dest::parse_struct(m).unwrap().to_struct();
        assert_eq!(ours[..20], m[..20]);
        assert_eq!(ours[24..48], m[24..48]);
        // SRQ number 0, GID index as perftest's -x 1 (ours: 0, a field the peer ignores).
        assert_eq!(m[48..52], [0; 4]);
    }
}
