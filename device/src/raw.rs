//! The in-process NIC on a real Linux link: whole Ethernet frames go out and come in
//! through an `AF_PACKET` socket bound to an interface (a bridge, a veth, a tap), so the
//! firmware runtime and the software datapath talk RoCEv2 to other machines (Linux
//! Soft-RoCE, a hardware RNIC).
//!
//! The NIC is a station of its own on that link: its own MAC and IPv4 address (not the
//! interface's), answering ARP for that address and resolving its peers' with ARP, as a
//! RoCE NIC's GID table entry `::ffff:a.b.c.d` asks for. The interface is put in
//! promiscuous mode so frames for the NIC's MAC reach the socket. The path MTU follows
//! the link MTU as rxe's does (`rxe_set_mtu`: the largest IB MTU that fits the link MTU
//! less rxe's 80 bytes of headers, so 1500 gives 1024 and 4200 gives 4096).

use crate::local::{Capacities, LocalNic};
use crate::model::NicModel;
use roce_core::engine::PortConfig;
use roce_core::transport::{ipv4_gid, Mtu};
use roce_firmware::datapath::RxCheck;
use roce_firmware::hal::Datapath;
use roce_host::{Device, HostMemory};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

const ETH_P_ALL: u16 = 0x0003;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
/// Headers rxe keeps out of the link MTU when it picks the path MTU (`RXE_MAX_HDR_LENGTH`).
const RXE_MAX_HDR_LENGTH: u32 = 80;
/// Bytes of the socket's receive buffer: room for a burst while the firmware is busy.
const RCVBUF: libc::c_int = 8 << 20;

/// What the raw port counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawCounters {
    /// Frames sent.
    pub tx_frames: u64,
    /// Frames the socket refused for good (not a full queue): lost.
    pub tx_errors: u64,
    /// RoCEv2 frames for this NIC handed to the datapath's checks.
    pub rx_frames: u64,
    /// ARP requests for this NIC's address that it answered.
    pub arp_replies: u64,
    /// RoCEv2 frames for this NIC that the datapath's receive checks dropped (malformed,
    /// bad ICRC).
    pub rx_dropped: u64,
}

/// An `AF_PACKET` socket on one interface.
struct PacketSocket {
    fd: OwnedFd,
}

fn last_error<T>(what: &str) -> io::Result<T> {
    let e = io::Error::last_os_error();
    Err(io::Error::new(e.kind(), format!("{what}: {e}")))
}

fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= req.ifr_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {name:?}"),
        ));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(req)
}

impl PacketSocket {
    fn open(iface: &str) -> io::Result<(Self, u32)> {
        // SAFETY: plain socket(2) call; the result is checked before use.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::c_int::from(ETH_P_ALL.to_be()),
            )
        };
        if raw < 0 {
            return last_error("socket(AF_PACKET) (needs CAP_NET_RAW)");
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = ifreq(iface)?;
        // SAFETY: SIOCGIFINDEX reads the name and writes the index into `req`.
        if unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFINDEX, &mut req) } < 0 {
            return last_error(&format!("interface {iface}"));
        }
        // SAFETY: the union member SIOCGIFINDEX filled in.
        let ifindex = unsafe { req.ifr_ifru.ifru_ifindex };
        let mut req = ifreq(iface)?;
        // SAFETY: SIOCGIFMTU reads the name and writes the MTU into `req`.
        if unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFMTU, &mut req) } < 0 {
            return last_error(&format!("MTU of {iface}"));
        }
        // SAFETY: the union member SIOCGIFMTU filled in.
        let mtu = unsafe { req.ifr_ifru.ifru_mtu }.max(0) as u32;
        // SAFETY: sockaddr_ll is plain data; all zeroes is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: `sll` is a valid sockaddr_ll of the length passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return last_error(&format!("bind to {iface}"));
        }
        let s = Self { fd };
        // The NIC's MAC is not the interface's: only promiscuous mode brings its frames.
        // SAFETY: packet_mreq is plain data.
        let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mreq.mr_ifindex = ifindex;
        mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
        s.setsockopt(libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)?;
        s.setsockopt(libc::SOL_SOCKET, libc::SO_RCVBUF, &RCVBUF)?;
        Ok((s, mtu))
    }

    fn setsockopt<T>(&self, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
        // SAFETY: `v` points at a live value of the size passed.
        let r = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                (v as *const T).cast(),
                size_of::<T>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return last_error("setsockopt");
        }
        Ok(())
    }

    /// Sends one frame; `Ok(false)` when the socket's queue is full for now.
    fn send(&self, frame: &[u8]) -> io::Result<bool> {
        // SAFETY: the buffer is valid for its length.
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) => Ok(false),
            _ => Err(e),
        }
    }

    /// Receives one frame that came in from the wire (not one this host sent) into `buf`:
    /// its length, or `None` when nothing is waiting. Frames longer than `buf` are
    /// skipped.
    fn recv(&self, buf: &mut [u8]) -> Option<usize> {
        loop {
            // SAFETY: sockaddr_ll is plain data.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: `buf` and `from` are valid for the lengths passed.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                )
            };
            if n < 0 {
                return None;
            }
            let n = n as usize;
            if from.sll_pkttype == libc::PACKET_OUTGOING || n > buf.len() {
                continue;
            }
            return Some(n);
        }
    }

    /// Waits until a frame may be waiting, or `timeout` passes.
    fn wait(&self, timeout: Duration) {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(1000) as libc::c_int;
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, ms) };
    }
}

/// The port's shared state: the socket, the NIC's addresses, its neighbour table.
struct Port {
    sock: PacketSocket,
    mac: [u8; 6],
    ip: [u8; 4],
    neighbours: HashMap<[u8; 4], [u8; 6]>,
    counters: RawCounters,
    /// The software datapath's receive checks.
    rx_check: RxCheck,
}

impl Port {
    /// Handles an ARP frame: learns the sender, answers a request for our address.
    fn arp(&mut self, f: &[u8]) {
        // Ethernet (14) + ARP for IPv4 over Ethernet (28).
        if f.len() < 42 || f[14..22] != [0, 1, 8, 0, 6, 4, 0, f[21]] {
            return;
        }
        let op = f[21];
        let sha: [u8; 6] = f[22..28].try_into().unwrap_or_default();
        let spa: [u8; 4] = f[28..32].try_into().unwrap_or_default();
        let tpa: [u8; 4] = f[38..42].try_into().unwrap_or_default();
        if spa != [0; 4] {
            self.neighbours.insert(spa, sha);
        }
        if op == 1 && tpa == self.ip {
            let reply = arp_frame(2, self.mac, self.ip, sha, spa);
            if matches!(self.sock.send(&reply), Ok(true)) {
                self.counters.arp_replies += 1;
            }
        }
    }

    fn send_arp_request(&self, ip: [u8; 4]) {
        let req = arp_frame(1, self.mac, self.ip, [0xFF; 6], ip);
        let _ = self.sock.send(&req);
    }
}

/// An ARP frame (`op` 1 request, 2 reply) from `sha`/`spa` to `tha`/`tpa`.
fn arp_frame(op: u8, sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4]) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&tha);
    f.extend_from_slice(&sha);
    f.extend_from_slice(&ETHERTYPE_ARP.to_be_bytes());
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, op]);
    f.extend_from_slice(&sha);
    f.extend_from_slice(&spa);
    f.extend_from_slice(if op == 1 { &[0; 6] } else { &tha });
    f.extend_from_slice(&tpa);
    f.resize(60, 0);
    f
}

/// The datapath over the socket: RoCEv2 frames for this NIC go through roce-core's
/// receive checks (structure and ICRC); ARP is answered here; everything else on the
/// link is ignored.
struct RawDatapath(Rc<RefCell<Port>>);

impl Datapath for RawDatapath {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        let mut p = self.0.borrow_mut();
        match p.sock.send(frame) {
            Ok(true) => {
                p.counters.tx_frames += 1;
                true
            }
            Ok(false) => false,
            Err(_) => {
                // Lost, as on a wire; the transport's retransmission recovers.
                p.counters.tx_errors += 1;
                true
            }
        }
    }

    fn can_transmit(&self) -> bool {
        true
    }

    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        let mut p = self.0.borrow_mut();
        while let Some(n) = p.sock.recv(buf) {
            let f = &buf[..n];
            if n < 14 {
                continue;
            }
            let ethertype = u16::from_be_bytes([f[12], f[13]]);
            if ethertype == ETHERTYPE_ARP {
                let frame = f.to_vec();
                p.arp(&frame);
                continue;
            }
            let to_us = f[..6] == p.mac;
            // IPv4, UDP, destination port 4791, for our address.
            let rocev2 = ethertype == ETHERTYPE_IPV4
                && n >= 14 + 20 + 8
                && f[23] == 17
                && f[30..34] == p.ip
                && {
                    let ihl = usize::from(f[14] & 0x0F) * 4;
                    f.get(14 + ihl + 2..14 + ihl + 4) == Some(&4791u16.to_be_bytes()[..])
                };
            if !(to_us && rocev2) {
                continue;
            }
            p.counters.rx_frames += 1;
            if p.rx_check.check(&buf[..n]) {
                return Some(n);
            }
            p.counters.rx_dropped += 1;
        }
        None
    }

    fn verifies_icrc(&self) -> bool {
        true
    }
}

/// An in-process NIC whose port is a Linux interface. It runs on the wall clock: each
/// time the driver lets it make progress it sets the firmware's time first, and when it
/// has nothing to do it sleeps on the socket (at most a millisecond) instead of spinning.
pub struct RawNic {
    nic: Rc<LocalNic>,
    port: Rc<RefCell<Port>>,
    start: Instant,
    link_mtu: u32,
}

impl RawNic {
    /// Opens `iface` and boots a NIC with address `ip` and Ethernet address `mac` on it,
    /// with the RC fast path's model in front of the socket when `fastpath`.
    pub fn open(
        iface: &str,
        ip: [u8; 4],
        mac: [u8; 6],
        caps: Capacities,
        fastpath: bool,
    ) -> io::Result<Rc<Self>> {
        let (sock, link_mtu) = PacketSocket::open(iface)?;
        let mut cfg = PortConfig::new(mac, ipv4_gid(ip));
        cfg.active_mtu = path_mtu(link_mtu).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("link MTU {link_mtu} of {iface} is too small for RoCE"),
            )
        })?;
        let port = Rc::new(RefCell::new(Port {
            sock,
            mac,
            ip,
            neighbours: HashMap::new(),
            counters: RawCounters::default(),
            rx_check: RxCheck::default(),
        }));
        // The socket is the port: the queues `with_datapath` offers stay unused.
        let dp = RawDatapath(port.clone());
        let nic = if fastpath {
            LocalNic::with_fastpath_over(cfg, caps, |_| Ok::<_, io::Error>(Box::new(dp)))?
        } else {
            LocalNic::with_datapath(cfg, caps, |_| Ok::<_, io::Error>(Box::new(dp)))?
        };
        let me = Rc::new(Self {
            nic,
            port,
            start: Instant::now(),
            link_mtu,
        });
        me.sync_clock();
        Ok(me)
    }

    /// The firmware runtime behind the socket.
    pub fn nic(&self) -> &Rc<LocalNic> {
        &self.nic
    }

    /// The interface's MTU.
    pub fn link_mtu(&self) -> u32 {
        self.link_mtu
    }

    /// What the raw port counted.
    pub fn raw_counters(&self) -> RawCounters {
        self.port.borrow().counters
    }

    /// The Ethernet address of `ip`, from the neighbour table or by ARP (a request every
    /// 200 ms until `timeout`).
    pub fn resolve(&self, ip: [u8; 4], timeout: Duration) -> io::Result<[u8; 6]> {
        let t0 = Instant::now();
        let mut last: Option<Instant> = None;
        loop {
            if let Some(mac) = self.port.borrow().neighbours.get(&ip) {
                return Ok(*mac);
            }
            if t0.elapsed() > timeout {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no ARP reply for {}", std::net::Ipv4Addr::from(ip)),
                ));
            }
            if last.is_none_or(|t| t.elapsed() > Duration::from_millis(200)) {
                self.port.borrow().send_arp_request(ip);
                last = Some(Instant::now());
            }
            self.progress();
        }
    }

    fn sync_clock(&self) {
        self.nic.set_time(self.start.elapsed().as_nanos() as u64);
    }
}

/// The path MTU for a link MTU, as rxe picks it.
pub fn path_mtu(link_mtu: u32) -> Option<Mtu> {
    Mtu::from_bytes_floor(link_mtu.saturating_sub(RXE_MAX_HDR_LENGTH))
}

impl Device for RawNic {
    fn read_reg(&self, offset: u32) -> u32 {
        self.nic.read_reg(offset)
    }
    fn write_reg(&self, offset: u32, value: u32) {
        self.nic.write_reg(offset, value)
    }
    fn memory(&self) -> &HostMemory {
        self.nic.memory()
    }
    fn progress(&self) {
        self.sync_clock();
        if self.nic.poll() {
            return;
        }
        // Idle: sleep until a frame arrives or the next timer is due (at most 1 ms).
        let now = self.nic.now();
        let wait = self
            .nic
            .poll_timeout()
            .map_or(1_000_000, |t| t.saturating_sub(now))
            .min(1_000_000);
        if wait > 0 {
            self.port
                .borrow()
                .sock
                .wait(Duration::from_nanos(wait).max(Duration::from_millis(1)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_mtu_follows_rxe() {
        // rxe on a 1500-byte link: active_mtu 1024 (ibv_devinfo in the rxe VM); 4200: 4096.
        assert_eq!(path_mtu(1500), Some(Mtu::Mtu1024));
        assert_eq!(path_mtu(4200), Some(Mtu::Mtu4096));
        assert_eq!(path_mtu(9000), Some(Mtu::Mtu4096));
        assert_eq!(path_mtu(4096), Some(Mtu::Mtu2048));
        assert_eq!(path_mtu(300), None);
    }

    #[test]
    fn arp_frames_are_rfc826() {
        let f = arp_frame(
            1,
            [2, 0, 0, 0, 0, 1],
            [10, 0, 0, 1],
            [0xFF; 6],
            [10, 0, 0, 2],
        );
        assert_eq!(f.len(), 60);
        assert_eq!(&f[..6], &[0xFF; 6]);
        assert_eq!(&f[12..14], &[0x08, 0x06]);
        // htype 1, ptype IPv4, hlen 6, plen 4, op 1.
        assert_eq!(&f[14..22], &[0, 1, 8, 0, 6, 4, 0, 1]);
        assert_eq!(&f[32..38], &[0; 6]);
        assert_eq!(&f[38..42], &[10, 0, 0, 2]);
    }
}
