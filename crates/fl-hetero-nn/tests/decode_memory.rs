//! A hostile peer cannot make frame decoding amplify memory (issue 11, item 5).
//!
//! A `ForwardReply` frame may announce up to 2²⁶ integers of width 1. Decoding it used to
//! turn every byte into a big integer (≈ 40–60 bytes each, before any shape check), so a
//! 64 MiB frame cost gigabytes. Decoding now keeps the bytes; the integers are parsed only by
//! `IntegerMatrix::values` after the receiver's shape check. This binary counts every heap
//! allocation (a peak-tracking global allocator) and holds one test, so no other test's
//! allocations mix in.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fl_hetero_nn::Message;
use fl_hetero_nn::message::{MAGIC, VERSION};
use peak_alloc::PeakAlloc;

#[global_allocator]
static PEAK: PeakAlloc = PeakAlloc;

/// Bytes allocated at the peak of `f`, above what was live before it.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    PEAK.reset_peak_usage();
    let before = PEAK.current_usage();
    let out = f();
    (out, PEAK.peak_usage().saturating_sub(before))
}

#[test]
fn decoding_a_hostile_frame_allocates_at_most_four_times_its_size() {
    // ForwardReply (kind 3), round 0, announcing 2^11 × 2^11 integers of one byte each.
    let (rows, cols) = (1u32 << 11, 1u32 << 11);
    let mut frame = MAGIC.to_vec();
    frame.push(VERSION);
    frame.push(3);
    frame.extend_from_slice(&0u64.to_be_bytes());
    frame.extend_from_slice(&rows.to_be_bytes());
    frame.extend_from_slice(&cols.to_be_bytes());
    frame.extend_from_slice(&1u32.to_be_bytes());
    frame.extend(std::iter::repeat_n(0x7fu8, (rows * cols) as usize));

    let (msg, decode_peak) = peak_of(|| Message::decode(&frame).unwrap());
    println!(
        "frame {} B, decode peak {} B ({:.2}x)",
        frame.len(),
        decode_peak,
        decode_peak as f64 / frame.len() as f64
    );
    assert!(
        decode_peak <= 4 * frame.len(),
        "decode peak {decode_peak} B"
    );

    let Message::ForwardReply(reply) = msg else {
        panic!("expected a ForwardReply")
    };
    // The receiver expects, say, an 8 × 2 reply: the announced shape is refused before a
    // single integer is parsed.
    let (refused, refuse_peak) = peak_of(|| reply.data.values("ForwardReply", (8, 2)));
    assert!(refused.is_err());
    assert!(refuse_peak <= 4096, "refusal allocated {refuse_peak} B");

    // Control: parsing the integers at the announced shape (what decoding did before the
    // fix) allocates far beyond 4x the frame, so the bound above is a real check.
    let (parsed, parse_peak) = peak_of(|| {
        reply
            .data
            .values("ForwardReply", (rows as usize, cols as usize))
    });
    assert_eq!(parsed.unwrap().shape(), (rows as usize, cols as usize));
    println!(
        "control: parsing every integer peaks at {parse_peak} B ({:.1}x the frame)",
        parse_peak as f64 / frame.len() as f64
    );
    assert!(parse_peak > 8 * frame.len(), "control peak {parse_peak} B");
}
