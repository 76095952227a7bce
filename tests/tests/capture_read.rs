//! The capture reader against Wireshark: a pcapng with several interfaces, link types and
//! timestamp resolutions (read by tshark for the expectations), captures cut short at
//! every kind of place (tshark keeps the same complete frames), other byte orders and
//! resolutions of pcap, several sections, and files that are not captures.

use roce_capture::{LinkType, Reader};
use roce_tests::{frames_of, have, scratch, vectors};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn captures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/captures")
}

/// Every frame as (index, interface, link type, timestamp, bytes, original length).
type Row = (u64, u32, LinkType, Duration, Vec<u8>, u32);

fn read_all(bytes: &[u8]) -> (Vec<Row>, Option<roce_capture::Truncation>) {
    let mut r = Reader::new(bytes).expect("a capture");
    let mut rows = Vec::new();
    while let Some(f) = r.next_frame().expect("no corrupt record") {
        rows.push((
            f.index,
            f.interface,
            f.link,
            f.timestamp,
            f.data.to_vec(),
            f.original_len,
        ));
    }
    (rows, r.truncated())
}

#[test]
fn pcapng_interfaces_link_types_and_resolutions_as_tshark_reads_them() {
    let bytes = std::fs::read(captures().join("mixed.pcapng")).unwrap();
    let (rows, truncated) = read_all(&bytes);
    assert_eq!(truncated, None);
    let tsv = std::fs::read_to_string(captures().join("mixed.tshark.tsv")).unwrap();
    let expected: Vec<Vec<&str>> = tsv
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect())
        .collect();
    assert_eq!(rows.len(), expected.len());
    for (row, e) in rows.iter().zip(&expected) {
        let (index, iface, link, ts, data, orig) = row;
        assert_eq!(index.to_string(), e[0]);
        assert_eq!(iface.to_string(), e[1]);
        // Wireshark's encapsulation 1 is Ethernet, 25 Linux cooked capture.
        let want = match e[2] {
            "1" => LinkType::ETHERNET,
            "25" => LinkType(113),
            other => panic!("encapsulation {other}"),
        };
        assert_eq!(*link, want, "frame {index}");
        assert_eq!(
            format!("{}.{:09}", ts.as_secs(), ts.subsec_nanos()),
            e[3],
            "frame {index}"
        );
        assert_eq!(orig.to_string(), e[4]);
        assert_eq!(data.len().to_string(), e[5]);
    }
    // Interface 1 is Linux cooked capture: decode reports each of its frames and goes on.
    let mut out = Vec::new();
    let mut reader = Reader::new(&bytes[..]).unwrap();
    let outcome = roce_capture::decode(
        &mut reader,
        &mut roce_capture::Software,
        roce_capture::Format::Json,
        &roce_capture::Filter::default(),
        &mut out,
    )
    .unwrap();
    assert_eq!(outcome.frames, 26);
    let lines: Vec<serde_json::Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (row, line) in rows.iter().zip(&lines) {
        assert_eq!(line["index"], row.0);
        if row.2 == LinkType(113) {
            assert_eq!(line["ok"], false);
            assert_eq!(line["error"], "unsupported_ethertype");
            let detail = line["detail"].as_str().unwrap();
            assert!(detail.contains("link type 113 (LINUX_SLL)"), "{detail}");
        }
    }
    // The Ethernet frames of interface 0 are the first twelve of valid.pcap and decode
    // as they do there.
    let valid = frames_of(&vectors().join("valid.pcap"));
    let ours: Vec<_> = rows
        .iter()
        .filter(|r| r.1 == 0)
        .map(|r| r.4.clone())
        .collect();
    assert_eq!(ours, valid[..12]);
}

#[test]
fn a_second_section_forgets_the_first_ones_interfaces() {
    let one = std::fs::read(captures().join("mixed.pcapng")).unwrap();
    let two = [one.clone(), one].concat();
    let (rows, truncated) = read_all(&two);
    assert_eq!(truncated, None);
    assert_eq!(rows.len(), 52);
    for (a, b) in rows[..26].iter().zip(&rows[26..]) {
        assert_eq!(b.0, a.0 + 26);
        assert_eq!((a.1, a.2, a.3, &a.4), (b.1, b.2, b.3, &b.4));
    }
    if have("tshark") {
        let path = scratch("sections").join("two.pcapng");
        std::fs::write(&path, &two).unwrap();
        assert_eq!(tshark_frames(&path), 52);
    }
}

/// The frames tshark reads from a capture (it warns about a cut-short one and keeps
/// its complete frames).
fn tshark_frames(path: &Path) -> usize {
    let out = std::process::Command::new("tshark")
        .args([
            "-r",
            path.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            "frame.number",
        ])
        .output()
        .expect("run tshark");
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// Offsets where each record of a pcap starts, and the end.
fn pcap_boundaries(bytes: &[u8]) -> Vec<usize> {
    let mut at = 24;
    let mut v = vec![at];
    while at + 16 <= bytes.len() {
        let caplen = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + caplen;
        v.push(at);
    }
    assert_eq!(at, bytes.len());
    v
}

#[test]
fn a_capture_cut_anywhere_gives_its_complete_frames_then_says_where() {
    let whole = std::fs::read(vectors().join("valid.pcap")).unwrap();
    let bounds = pcap_boundaries(&whole);
    let frames = frames_of(&vectors().join("valid.pcap"));
    let mut cuts: Vec<usize> = bounds
        .iter()
        .take(40)
        .flat_map(|&b| [b, b + 1, b + 15, b + 16, b + 17])
        .collect();
    cuts.extend((0..whole.len()).step_by(997));
    cuts.retain(|&c| c <= whole.len());
    for cut in cuts {
        let bytes = &whole[..cut];
        if cut < 24 {
            let err = Reader::new(bytes)
                .err()
                .expect("no capture without its header");
            let text = err.to_string();
            if cut < 4 {
                assert!(text.contains("not a pcap or pcapng capture"), "{text}");
            } else {
                assert!(text.contains("file header"), "{text}");
            }
            continue;
        }
        let (rows, truncated) = read_all(bytes);
        let complete = bounds.iter().filter(|&&b| b <= cut).count() - 1;
        assert_eq!(rows.len(), complete, "cut at {cut}");
        for (r, f) in rows.iter().zip(&frames) {
            assert_eq!(&r.4, f);
        }
        match truncated {
            None => assert!(bounds.contains(&cut), "cut at {cut}"),
            Some(t) => {
                assert!(!bounds.contains(&cut));
                assert_eq!(t.index, complete as u64 + 1);
                assert_eq!(t.have, cut - bounds[complete]);
            }
        }
    }
    // tshark agrees on the frames of a capture cut in the middle of one.
    if have("tshark") {
        let path = scratch("cut").join("cut.pcap");
        let cut = bounds[100] + 40;
        std::fs::write(&path, &whole[..cut]).unwrap();
        assert_eq!(tshark_frames(&path), 100);
        assert_eq!(read_all(&whole[..cut]).0.len(), 100);
    }
}

#[test]
fn a_pcapng_cut_anywhere_gives_its_complete_frames() {
    let whole = std::fs::read(captures().join("mixed.pcapng")).unwrap();
    let (all, _) = read_all(&whole);
    // Block boundaries (the file is little-endian): the second word is the length.
    let mut bounds = vec![0];
    while let Some(&at) = bounds.last().filter(|&&at| at < whole.len()) {
        bounds.push(at + u32::from_le_bytes(whole[at + 4..at + 8].try_into().unwrap()) as usize);
    }
    let section_header = bounds[1];
    let mut last = 0;
    for cut in (0..whole.len()).step_by(7).chain(bounds.iter().copied()) {
        if cut < section_header {
            assert!(Reader::new(&whole[..cut]).is_err(), "cut at {cut}");
            continue;
        }
        let (rows, truncated) = read_all(&whole[..cut]);
        assert_eq!(rows[..], all[..rows.len()], "cut at {cut}");
        assert_eq!(truncated.is_none(), bounds.contains(&cut), "cut at {cut}");
        last = last.max(rows.len());
    }
    assert_eq!(last, 26);
}

/// Rewrites a little-endian microsecond pcap as big-endian, or as nanosecond.
fn rewrite(le: &[u8], big: bool, nanos: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let word = |v: u32| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let get = |at: usize| u32::from_le_bytes(le[at..at + 4].try_into().unwrap());
    out.extend(word(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
    let half = |at: usize| u16::from_le_bytes(le[at..at + 2].try_into().unwrap());
    for at in [4, 6] {
        out.extend(if big {
            half(at).to_be_bytes()
        } else {
            half(at).to_le_bytes()
        });
    }
    for at in [8, 12, 16, 20] {
        out.extend(word(get(at)));
    }
    let mut at = 24;
    while at < le.len() {
        let caplen = get(at + 8) as usize;
        out.extend(word(get(at)));
        out.extend(word(if nanos {
            get(at + 4) * 1000 + 7
        } else {
            get(at + 4)
        }));
        out.extend(word(get(at + 8)));
        out.extend(word(get(at + 12)));
        out.extend_from_slice(&le[at + 16..at + 16 + caplen]);
        at += 16 + caplen;
    }
    out
}

#[test]
fn pcap_in_either_byte_order_and_resolution() {
    let le = std::fs::read(vectors().join("valid.pcap")).unwrap();
    assert_eq!(
        &le[..4],
        &[0xd4, 0xc3, 0xb2, 0xa1],
        "the vectors are little-endian microsecond"
    );
    let (base, _) = read_all(&le);
    assert_eq!(base.len(), 366);
    let dir = scratch("byte-order");
    for (big, nanos) in [(true, false), (false, true), (true, true)] {
        let bytes = rewrite(&le, big, nanos);
        let (rows, truncated) = read_all(&bytes);
        assert_eq!(truncated, None);
        assert_eq!(rows.len(), base.len());
        for (r, b) in rows.iter().zip(&base) {
            let ts = if nanos {
                b.3 + Duration::from_nanos(7)
            } else {
                b.3
            };
            assert_eq!((r.0, r.2, r.3, &r.4, r.5), (b.0, b.2, ts, &b.4, b.5));
        }
        if have("tshark") {
            let path = dir.join(format!("{big}-{nanos}.pcap"));
            std::fs::write(&path, &bytes).unwrap();
            assert_eq!(tshark_frames(&path), 366);
        }
    }
}

#[test]
fn a_file_that_is_not_a_capture_says_so_and_shows_its_start() {
    let cases: [(&[u8], &str); 4] = [
        (b"{\"index\":1,\"ok\":true}\n", "it starts with 7b 22 69 6e 64 65 78 22 3a 31 2c 22 6f 6b 22 3a (\"{\\\"index\\\":1,\\\"ok\\\":\")"),
        (b"", "it is empty"),
        (&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3], "gzip"),
        (b"ab", "it starts with 61 62 (\"ab\")"),
    ];
    for (bytes, want) in cases {
        let err = Reader::new(bytes).err().expect("not a capture");
        let text = err.to_string();
        assert!(text.starts_with("not a pcap or pcapng capture"), "{text}");
        assert!(text.contains(want), "{text}");
    }
}
