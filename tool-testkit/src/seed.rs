//! The random stream of each generated property: from a seed, a tool's name and the property, the same on every
//! machine and Rust version.

use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// FNV-1a: a hash of a tool's name that stays the same across Rust versions, so a seed re-runs the same values.
fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The runner of one property of one tool: its own random stream, from the seed, the tool and the property.
pub(crate) fn runner(seed: u64, tool: &str, property: u64, cases: u32) -> TestRunner {
    let mut state = seed ^ stable_hash(tool).rotate_left(17) ^ property.wrapping_mul(0xa076_1d64_78bd_642f);
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&splitmix(&mut state).to_le_bytes());
    }
    let config = Config {
        cases,
        // Each step of shrinking is one call: small arguments are worth a few hundred more.
        max_shrink_iters: cases.saturating_mul(4).max(1024),
        failure_persistence: None,
        source_file: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}
