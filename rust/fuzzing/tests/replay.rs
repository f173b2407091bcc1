//! Replays the committed fuzz corpus and every regression (an input that once made a target
//! fail) through the targets, so `cargo test` keeps them fixed without cargo-fuzz.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::path::PathBuf;

fn replay(target: &str, run: fn(&[u8])) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut count = 0;
    for kind in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(kind).join(target)) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("directory entry").path();
            let data = std::fs::read(&path).expect("read input");
            eprintln!("{}", path.display());
            run(&data);
            count += 1;
        }
    }
    assert!(count > 0, "no inputs for {target} under {}", root.display());
}

#[test]
fn journal_recovery() {
    replay("journal_recovery", fuzzing::journal_recovery);
}

#[test]
fn page_store_recovery() {
    replay("page_store_recovery", fuzzing::page_store_recovery);
}

#[test]
fn page_file() {
    replay("page_file", fuzzing::page_file);
}

#[test]
fn stomp_server() {
    replay("stomp_server", fuzzing::stomp_server);
}

#[test]
fn stomp_client() {
    replay("stomp_client", fuzzing::stomp_client);
}

/// The data plane's target reads what the STOMP server target reads (a client's bytes).
#[test]
fn data_plane() {
    replay("stomp_server", fuzzing::data_plane);
}

/// Every single-byte mutation of the STOMP inputs (a byte replaced by one that steers a
/// decoder elsewhere, or dropped), through both STOMP targets: what a short fuzzing run would
/// try first, under plain `cargo test`.
#[test]
fn stomp_mutations() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut count = 0;
    for target in ["stomp_server", "stomp_client"] {
        for entry in std::fs::read_dir(root.join(target)).expect("corpus directory") {
            let data = std::fs::read(entry.expect("directory entry").path()).expect("read input");
            for at in 1..data.len() {
                for special in [&b"\0"[..], b"\n", b"\r", b":", b"\\", b"\xff", b"\xc3", b""] {
                    let mutated = [&data[..at], special, &data[at + 1..]].concat();
                    fuzzing::stomp_server(&mutated);
                    fuzzing::stomp_client(&mutated);
                    count += 1;
                }
            }
        }
    }
    assert!(count > 1000, "only {count} mutations");
}

/// Single-byte mutations of the STOMP server inputs through the data plane's target: a
/// sample of those `stomp_mutations` tries (every seventh position; each input is a real
/// conversation over loopback, about a millisecond).
#[test]
fn data_plane_mutations() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/stomp_server");
    let mut count = 0;
    for entry in std::fs::read_dir(root).expect("corpus directory") {
        let data = std::fs::read(entry.expect("directory entry").path()).expect("read input");
        for at in (1..data.len()).step_by(7) {
            for special in [&b"\0"[..], b"\n", b":", b"\xff", b""] {
                fuzzing::data_plane(&[&data[..at], special, &data[at + 1..]].concat());
                count += 1;
            }
        }
    }
    assert!(count > 1000, "only {count} mutations");
}

/// Writes the seed page files (`cargo test -p fuzzing -- --ignored page_file_seeds`): page
/// images in both formats, made by the page writer's own encoder.
#[test]
#[ignore = "writes the seed corpus: run by hand"]
fn page_file_seeds() {
    use paging::format;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/page_file");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (n, (version, count)) in [(2, 3), (1, 2), (2, 0), (2, 1)].into_iter().enumerate() {
        let page = 7;
        let mut buf = format::header_of_version(page, version).to_vec();
        for i in 0..count {
            let fields = format::Fields {
                message_id: i + 1,
                tx_id: i % 2,
                queue_offset: i,
                queue_ids: &[1, 2][..(i as usize % 3).min(2)],
                message: b"a paged message",
            };
            let offset = buf.len() as u64;
            format::encode_version(&mut buf, page, offset, &fields, version);
        }
        std::fs::write(dir.join(format!("seed-{n:02}")), buf).expect("write seed");
    }
}
