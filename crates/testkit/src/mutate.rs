//! Seeded byte mutations for the robustness (fuzz) tests of every crate: a valid file in, a
//! deterministic stream of damaged variants out (flipped bits, boundary values, truncation,
//! inserted, deleted and duplicated runs, length fields set huge). Stable Rust, no coverage
//! feedback; a failure is reproduced from its seed and iteration.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A seeded source of mutated inputs.
#[derive(Debug, Clone)]
pub struct Mutator {
    rng: ChaCha8Rng,
}

/// Byte values that sit on boundaries parsers get wrong.
const SPECIAL_BYTES: [u8; 8] = [0x00, 0x01, 0x7f, 0x80, 0xff, b'"', b',', b'\n'];
/// Little-endian 32-bit values that make length and count fields absurd.
const SPECIAL_U32: [u32; 6] = [0, 1, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 0x0100_0000];

impl Mutator {
    /// A mutator whose outputs are fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self { rng: ChaCha8Rng::seed_from_u64(seed) }
    }

    /// One to four stacked mutations of `input`.
    pub fn mutate(&mut self, input: &[u8]) -> Vec<u8> {
        let mut out = input.to_vec();
        let n = self.rng.random_range(1..=4);
        for _ in 0..n {
            self.once(&mut out);
        }
        out
    }

    fn pos(&mut self, len: usize) -> usize {
        if len == 0 {
            0
        } else {
            self.rng.random_range(0..len)
        }
    }

    fn once(&mut self, b: &mut Vec<u8>) {
        let len = b.len();
        match self.rng.random_range(0..8) {
            0 if len > 0 => {
                let i = self.pos(len);
                b[i] ^= 1 << self.rng.random_range(0..8);
            }
            1 if len > 0 => {
                let i = self.pos(len);
                b[i] = SPECIAL_BYTES[self.rng.random_range(0..SPECIAL_BYTES.len())];
            }
            2 => {
                let i = self.pos(len + 1);
                b.truncate(i);
            }
            3 => {
                let i = self.pos(len + 1);
                let n = self.rng.random_range(1..=16);
                let bytes: Vec<u8> = (0..n).map(|_| self.rng.random()).collect();
                b.splice(i..i, bytes);
            }
            4 if len > 1 => {
                let i = self.pos(len);
                let n = self.rng.random_range(1..=(len - i).min(64));
                b.drain(i..i + n);
            }
            5 if len > 1 => {
                let i = self.pos(len);
                let n = self.rng.random_range(1..=(len - i).min(64));
                let run: Vec<u8> = b[i..i + n].to_vec();
                let at = self.pos(len + 1);
                b.splice(at..at, run);
            }
            6 if len >= 4 => {
                let i = self.pos(len - 3);
                let v = SPECIAL_U32[self.rng.random_range(0..SPECIAL_U32.len())];
                b[i..i + 4].copy_from_slice(&v.to_le_bytes());
            }
            _ if len > 0 => {
                // A digit in text formats: a number grows, shrinks or turns into a sign.
                let i = self.pos(len);
                b[i] = b"0123456789-.eE+"[self.rng.random_range(0..15)];
            }
            _ => b.push(self.rng.random()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_mutations_and_they_differ_from_the_input() {
        let input: Vec<u8> = (0..200u8).collect();
        let (mut a, mut b) = (Mutator::new(7), Mutator::new(7));
        let mut changed = 0;
        for _ in 0..100 {
            let (x, y) = (a.mutate(&input), b.mutate(&input));
            assert_eq!(x, y);
            changed += usize::from(x != input);
        }
        assert!(changed > 90, "{changed} of 100 mutations changed the input");
    }
}
