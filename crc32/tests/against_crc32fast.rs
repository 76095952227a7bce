//! The kernel against crc32fast (an independent implementation) on random inputs, at
//! every length around the kernel's boundaries and from random starting states, and the
//! RoCE ICRC vectors are checked through roce-core (its icrc tests).

use proptest::prelude::*;

fn reference(crc: u32, buf: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(crc);
    h.update(buf);
    h.finalize()
}

fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn every_length_up_to_three_kib() {
    let buf = bytes(3 * 1024 + 300, 0x9E37_79B9_7F4A_7C15);
    for len in 0..buf.len() {
        for crc in [0, !0, 0x2144_DF1C] {
            assert_eq!(
                roce_crc32::update(crc, &buf[..len]),
                reference(crc, &buf[..len]),
                "len {len} crc {crc:#x}"
            );
        }
    }
}

#[test]
fn copy_update_copies_and_hashes_every_length_up_to_three_kib() {
    // From both sides of the kernel's threshold, at every offset of a round: the copy is
    // the source byte for byte (nothing before or after it touched) and the CRC is
    // crc32fast's.
    let buf = bytes(3 * 1024 + 300, 0x2545_F491_4F6C_DD1D);
    for len in 0..buf.len() {
        let mut dst = vec![0xA5u8; len + 2];
        let crc = roce_crc32::copy_update(0x2144_DF1C, &buf[..len], &mut dst[1..=len]);
        assert_eq!(crc, reference(0x2144_DF1C, &buf[..len]), "len {len}");
        assert_eq!(&dst[1..=len], &buf[..len], "len {len}");
        assert_eq!((dst[0], dst[len + 1]), (0xA5, 0xA5), "len {len}");
    }
    // Lengths that differ: the common part only.
    let mut short = [0u8; 1500];
    let crc = roce_crc32::copy_update(0, &buf[..2000], &mut short);
    assert_eq!(
        (crc, &short[..]),
        (reference(0, &buf[..1500]), &buf[..1500])
    );
}

#[test]
fn known_values() {
    // The CRC-32 check value, and a 4 KiB frame's worth of one byte.
    assert_eq!(roce_crc32::hash(b"123456789"), 0xCBF4_3926);
    let ones = [0xFFu8; 4136];
    assert_eq!(roce_crc32::hash(&ones), crc32fast::hash(&ones));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn equals_crc32fast(
        data in proptest::collection::vec(any::<u8>(), 0..9000),
        crc in any::<u32>(),
        split in any::<prop::sample::Index>(),
    ) {
        prop_assert_eq!(roce_crc32::update(crc, &data), reference(crc, &data));
        // In two pieces, as a datapath feeds it.
        let at = split.index(data.len() + 1);
        let mut h = roce_crc32::Hasher::new_with_initial(crc);
        h.update(&data[..at]);
        h.update(&data[at..]);
        prop_assert_eq!(h.finalize(), reference(crc, &data));
    }
}
