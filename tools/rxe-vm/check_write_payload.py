#!/usr/bin/env python3
"""Checks the RDMA WRITE data our side put on the wire in a capture of
`roce perf write_bw --client`: every WRITE packet from SRC_IP (first sends and Go-Back-N
resends alike) must carry the bytes of the source buffer at its offset in the message.
The source buffer is `roce perf`'s write pattern (cli/src/interop/perftest.rs,
`write_pattern`): byte i = (i * 31 + 7) ^ (i >> 8), mod 256. Each message writes SIZE
bytes from offset 0 of it; a packet's offset is its PSN's distance from the message's
first PSN times the path MTU. perftest's server registers its buffer without remote read,
so what rxe stored cannot be read back; this and rxe's acknowledgements (every WRITE
completed successfully, so rxe accepted each PSN in order with a good ICRC) are the check.

usage: check_write_payload.py CAPTURE SRC_IP SIZE MTU     exit 0 when all match
"""
import socket, struct, sys
sys.path.insert(0, __file__.rsplit('/', 1)[0])
from roce_pcap import packets

WRITE = {0x06: 'first', 0x07: 'middle', 0x08: 'last', 0x0a: 'only'}


def pattern(i):
    return ((i * 31 + 7) ^ (i >> 8)) & 0xff


def main(fn, src, size, mtu):
    src = socket.inet_aton(src)
    per_msg = max(1, -(-size // mtu))
    psn0 = None
    n = bad = 0
    for f in packets(fn):
        if len(f) < 14 + 20 + 8 + 12 or f[12:14] != b'\x08\x00':
            continue
        ip = f[14:]
        ihl = (ip[0] & 15) * 4
        if ip[9] != 17 or ip[12:16] != src:
            continue
        tot = struct.unpack('>H', ip[2:4])[0]
        udp = ip[ihl:tot]
        bth = udp[8:20]
        op = bth[0]
        if op not in WRITE:
            continue
        pad = (bth[1] >> 4) & 3
        psn = int.from_bytes(bth[9:12], 'big')
        hdr = 12 + (16 if WRITE[op] in ('first', 'only') else 0)
        payload = udp[8 + hdr:len(udp) - 4 - pad]
        if psn0 is None:
            if WRITE[op] not in ('first', 'only'):
                print(f'{fn}: the capture does not start at a message')
                return 1
            psn0 = psn
        k = (psn - psn0) % (1 << 24) % per_msg
        off = k * mtu
        want = bytes(pattern(off + i) for i in range(len(payload)))
        n += 1
        if payload != want or (k == 0) != (WRITE[op] in ('first', 'only')):
            bad += 1
            if bad <= 5:
                print(f'{fn}: PSN {psn:#x} ({WRITE[op]}, offset {off}) carries other bytes')
    print(f'{fn}: {n} WRITE packets from us, {bad} with wrong data')
    return 0 if n > 0 and bad == 0 else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
