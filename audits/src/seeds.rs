//! Seed mixing shared by the sources, the schedule and the analyses (its own module, so
//! that none of them imports another for it).

/// SplitMix64 finaliser: mixes seeds so that nearby seeds give unrelated streams.
#[must_use]
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(0x6A09_E667_F3BC_C909);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::mix;

    #[test]
    fn mix_separates_streams() {
        assert_ne!(mix(1, 0), mix(0, 1));
        assert_ne!(mix(1, 2), mix(1, 3));
    }
}
