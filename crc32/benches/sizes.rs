//! roce-crc32 against crc32fast, nanoseconds per call at the sizes the ICRC sees (hot
//! buffer, best of 5 rounds of 20,000 calls, the two alternated):
//! `cargo bench -p roce-crc32` (under `chrt -f 1` on a shared machine).

use std::hint::black_box;
use std::time::Instant;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let buf: Vec<u8> = (0..70_000u32).map(|i| (i * 7 + 3) as u8).collect();
    let fs: [fn(&[u8]) -> u32; 2] = [crc32fast::hash, roce_crc32::hash];
    for len in [1024usize, 2048, 4136, 4152, 8280, 65536] {
        let mut best = [f64::MAX; 2];
        for _ in 0..5 {
            for (b, f) in best.iter_mut().zip(fs) {
                let n = 20_000;
                let t = Instant::now();
                let mut x = 0;
                for i in 0..n {
                    // Shifted starts, so no call sees the same alignment twice in a row.
                    x ^= f(black_box(&buf[i % 64..i % 64 + len]));
                }
                black_box(x);
                *b = b.min(t.elapsed().as_nanos() as f64 / n as f64);
            }
        }
        println!(
            "{len:6} bytes: crc32fast {:7.1} ns, roce-crc32 {:7.1} ns",
            best[0], best[1]
        );
    }
}
