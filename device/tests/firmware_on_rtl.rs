//! The firmware runtime, unchanged, on the Verilated datapath: two NICs whose frames pass
//! through the RTL RX parser and TX ICRC inserter carry RC WRITE, SEND, READ and both
//! atomics between verbs applications; the RTL's ICRCs equal the engine's.

use roce_core::engine::PortConfig;
use roce_core::memory::AccessFlags;
use roce_core::num::Psn;
use roce_core::transport::{ipv4_gid, QpType, RecvWr, SendFlags, SendWr, WcStatus, WrOp};
use roce_device::rtl::{rtl_available, rtl_nic};
use roce_device::{Capacities, LocalNic, NicModel};
use roce_hdl_sim::DataWidth;
use roce_host::{ConnectOptions, Context, QpEndpoint};
use std::rc::Rc;

fn run(nics: &[Rc<LocalNic>; 2]) {
    let mut buf = vec![0u8; 8192];
    loop {
        let mut busy = nics[0].poll() | nics[1].poll();
        for (from, to) in [(0, 1), (1, 0)] {
            while let Some(n) = nics[from].transmit_frame(&mut buf) {
                nics[to].receive_frame(&buf[..n]);
                busy = true;
            }
        }
        if !busy {
            break;
        }
    }
}

#[test]
fn verbs_traffic_through_the_rtl_datapath() {
    if !rtl_available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the RTL model is required under CI"
        );
        eprintln!("SKIPPED: the Verilated model was not built");
        return;
    }
    for width in [DataWidth::W64, DataWidth::W512] {
        let (nics, counters): (Vec<_>, Vec<_>) = [1u8, 2]
            .map(|l| {
                let cfg = PortConfig::new([2, 0, 0, 0, 0, l], ipv4_gid([10, 0, 0, l]));
                rtl_nic(cfg, Capacities::Firmware, width).unwrap()
            })
            .into_iter()
            .unzip();
        let nics: [Rc<LocalNic>; 2] = [nics[0].clone(), nics[1].clone()];
        let ctx = nics.clone().map(|n| Context::open(n).unwrap());
        let all = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        let pd = ctx.each_ref().map(|c| c.alloc_pd().unwrap());
        let cq = ctx.each_ref().map(|c| c.create_cq(32).unwrap());
        let qp = [0, 1].map(|i| pd[i].create_qp(QpType::Rc, &cq[i], &cq[i]).build().unwrap());
        let mr = pd.each_ref().map(|p| p.reg_mr(65536, all).unwrap());
        for (i, j) in [(0, 1), (1, 0)] {
            let (gid, mac) = ctx[j].port_addr();
            let ep = QpEndpoint {
                qpn: qp[j].qpn(),
                psn: Psn::new(0xFF_FFF8),
                gid,
                mac,
            };
            qp[i]
                .connect(&ep, Psn::new(0xFF_FFF8), &ConnectOptions::default())
                .unwrap();
        }
        let data: Vec<u8> = (0..9000u32).map(|i| (i * 13 + 5) as u8).collect();
        mr[0].write(0, &data).unwrap();
        mr[1].write(40_000, &77u64.to_ne_bytes()).unwrap();
        qp[1]
            .post_recv(&RecvWr::new(50).sge(mr[1].addr() + 20_000, 4096, mr[1].lkey()))
            .unwrap();
        let sig = SendFlags::SIGNALED;
        let (a, b) = (&mr[0], &mr[1]);
        let wrs = [
            SendWr::new(
                1,
                WrOp::RdmaWrite {
                    remote_addr: b.addr(),
                    rkey: b.rkey(),
                },
            )
            .sge(a.addr(), 9000, a.lkey())
            .flags(sig),
            SendWr::new(2, WrOp::Send)
                .sge(a.addr(), 3001, a.lkey())
                .flags(sig),
            SendWr::new(
                3,
                WrOp::RdmaRead {
                    remote_addr: b.addr(),
                    rkey: b.rkey(),
                },
            )
            .sge(a.addr() + 10_000, 9000, a.lkey())
            .flags(sig),
            SendWr::new(
                4,
                WrOp::AtomicFetchAndAdd {
                    remote_addr: b.addr() + 40_000,
                    rkey: b.rkey(),
                    add: 3,
                },
            )
            .sge(a.addr() + 30_000, 8, a.lkey())
            .flags(sig),
            SendWr::new(
                5,
                WrOp::AtomicCmpAndSwp {
                    remote_addr: b.addr() + 40_000,
                    rkey: b.rkey(),
                    compare: 80,
                    swap: 1,
                },
            )
            .sge(a.addr() + 30_008, 8, a.lkey())
            .flags(sig),
        ];
        qp[0].post_send_list(&wrs).unwrap();
        run(&nics);
        let wcs = cq[0].wait(5, 5).unwrap();
        let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(
            got,
            (1..=5).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>(),
            "{width:?}"
        );
        let rx = cq[1].wait(1, 5).unwrap();
        assert_eq!((rx[0].wr_id, rx[0].byte_len), (50, 3001));
        let mut buf = vec![0u8; 9000];
        b.read(0, &mut buf).unwrap();
        assert!(buf == data, "{width:?}: WRITE data");
        a.read(10_000, &mut buf).unwrap();
        assert!(buf == data, "{width:?}: READ data");
        let mut w = [0u8; 8];
        b.read(40_000, &mut w).unwrap();
        assert_eq!(
            u64::from_ne_bytes(w),
            1,
            "80 after the add, then swapped for 1"
        );
        for c in &counters {
            let c = c.borrow();
            assert!(c.rx_ok > 0 && c.rx_dropped.is_empty(), "{width:?}: {c:?}");
            assert_eq!(
                c.tx_icrc_mismatch, 0,
                "{width:?}: the RTL's ICRC differs from the engine's"
            );
        }
    }
}
