//! [`Generator`]: a CPU random number generator like PyTorch's `CPUGeneratorImpl`: an MT19937
//! engine ([`Mt19937`], bit-identical to `at::mt19937`) plus the cached second sample of the
//! Box-Muller transform, behind a cheap-to-clone, thread-safe handle.
//!
//! ```
//! use switchboard_tensor::Generator;
//! let g = Generator::new(0);
//! let first = g.lock().random();
//! assert_eq!(first, 2357136044); // std::mt19937(0)'s first output, as in PyTorch
//! g.manual_seed(0);
//! assert_eq!(g.lock().random(), first);
//! assert_eq!(g.initial_seed(), 0);
//! ```

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::device::Device;

/// The seed of the default CPU generator at start-up (PyTorch's `default_rng_seed_val`).
pub const DEFAULT_RNG_SEED: u64 = 67280421310721;

const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// The 32-bit Mersenne Twister, as PyTorch's `at::mt19937` (itself the standard
/// `std::mt19937`): seeded with the low 32 bits of a 64-bit seed, which it remembers.
#[derive(Clone)]
pub struct Mt19937 {
    seed: u64,
    left: u32,
    next: u32,
    state: [u32; N],
}

impl Mt19937 {
    /// An engine seeded with `seed` (`init_with_uint32(seed)`: only the low 32 bits count).
    pub fn new(seed: u64) -> Mt19937 {
        let mut state = [0u32; N];
        state[0] = seed as u32;
        for j in 1..N {
            let prev = state[j - 1];
            state[j] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(j as u32);
        }
        Mt19937 {
            seed,
            left: 1,
            next: 0,
            state,
        }
    }

    /// The seed the engine was made with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The next 32 random bits.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        self.left -= 1;
        if self.left == 0 {
            self.next_state();
        }
        let mut y = self.state[self.next as usize];
        self.next += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// Regenerates the whole state (the "twist"), in place as the reference code does: the
    /// first `N - M` words read words not yet regenerated, the rest read regenerated ones.
    #[inline(never)]
    fn next_state(&mut self) {
        #[inline(always)]
        fn twist(u: u32, v: u32) -> u32 {
            let y = (u & UPPER_MASK) | (v & LOWER_MASK);
            (y >> 1) ^ if v & 1 != 0 { MATRIX_A } else { 0 }
        }
        self.left = N as u32;
        self.next = 0;
        let s = &mut self.state;
        for i in 0..N - M {
            s[i] = s[i + M] ^ twist(s[i], s[i + 1]);
        }
        for i in N - M..N - 1 {
            s[i] = s[i + M - N] ^ twist(s[i], s[i + 1]);
        }
        s[N - 1] = s[M - 1] ^ twist(s[N - 1], s[0]);
    }
}

impl fmt::Debug for Mt19937 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mt19937")
            .field("seed", &self.seed)
            .field("left", &self.left)
            .finish_non_exhaustive()
    }
}

/// The state behind a [`Generator`]: the engine and the Box-Muller caches
/// (`next_float_normal_sample_`, `next_double_normal_sample_`). Kernels hold it locked for
/// the whole op (PyTorch's "acquire lock when using random generators").
#[derive(Clone, Debug)]
pub struct GeneratorState {
    engine: Mt19937,
    next_float_normal: Option<f32>,
    next_double_normal: Option<f64>,
}

impl GeneratorState {
    fn new(seed: u64) -> GeneratorState {
        GeneratorState {
            engine: Mt19937::new(seed),
            next_float_normal: None,
            next_double_normal: None,
        }
    }

    /// 32 random bits (`CPUGeneratorImpl::random`).
    #[inline]
    pub fn random(&mut self) -> u32 {
        self.engine.next_u32()
    }

    /// 64 random bits from two draws, the first one high (`CPUGeneratorImpl::random64`).
    #[inline]
    pub fn random64(&mut self) -> u64 {
        let hi = self.engine.next_u32() as u64;
        let lo = self.engine.next_u32() as u64;
        (hi << 32) | lo
    }

    /// Takes the cached second normal sample of a double Box-Muller pair, if any.
    pub fn take_next_double_normal_sample(&mut self) -> Option<f64> {
        self.next_double_normal.take()
    }

    /// Caches (or clears) the second normal sample of a double Box-Muller pair.
    pub fn set_next_double_normal_sample(&mut self, v: Option<f64>) {
        self.next_double_normal = v;
    }

    /// Takes the cached second normal sample of a float Box-Muller pair, if any.
    pub fn take_next_float_normal_sample(&mut self) -> Option<f32> {
        self.next_float_normal.take()
    }

    /// Caches (or clears) the second normal sample of a float Box-Muller pair.
    pub fn set_next_float_normal_sample(&mut self, v: Option<f32>) {
        self.next_float_normal = v;
    }

    /// The seed of the current engine.
    pub fn initial_seed(&self) -> u64 {
        self.engine.seed()
    }
}

/// A CPU random number generator (`torch.Generator()`): a cheap-to-clone handle; clones share
/// one state. Random kernels take `Option<&Generator>` and use [`Generator::default_cpu`]
/// for `None`. Same seed, same stream, on any number of threads (kernels draw serially).
#[derive(Clone)]
pub struct Generator(Arc<Mutex<GeneratorState>>);

impl Generator {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Generator {
        Generator(Arc::new(Mutex::new(GeneratorState::new(seed))))
    }

    /// The process-wide default CPU generator (`at::detail::getDefaultCPUGenerator()`),
    /// seeded with [`DEFAULT_RNG_SEED`] on first use.
    pub fn default_cpu() -> Generator {
        static DEFAULT: OnceLock<Generator> = OnceLock::new();
        DEFAULT
            .get_or_init(|| Generator::new(DEFAULT_RNG_SEED))
            .clone()
    }

    /// Re-seeds the generator and drops the cached normal samples (`manual_seed`).
    pub fn manual_seed(&self, seed: u64) -> &Generator {
        *self.lock() = GeneratorState::new(seed);
        self
    }

    /// The seed last set (`initial_seed`).
    pub fn initial_seed(&self) -> u64 {
        self.lock().initial_seed()
    }

    /// The generator's device (always the CPU).
    pub fn device(&self) -> Device {
        Device::CPU
    }

    /// Locks the state for drawing. A kernel keeps the guard for its whole loop so that its
    /// draws are consecutive in the stream.
    pub fn lock(&self) -> MutexGuard<'_, GeneratorState> {
        // A panic while drawing leaves a valid (if advanced) state: keep using it.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the current state (`get_state`).
    pub fn state(&self) -> GeneratorState {
        self.lock().clone()
    }

    /// Restores a state taken with [`state`](Self::state) (`set_state`).
    pub fn set_state(&self, state: GeneratorState) {
        *self.lock() = state;
    }

    /// An independent generator starting from this one's current state (`clone_state`).
    pub fn fork(&self) -> Generator {
        Generator(Arc::new(Mutex::new(self.state())))
    }

    /// Whether two handles share one generator.
    pub fn ptr_eq(a: &Generator, b: &Generator) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl PartialEq for Generator {
    /// Handles are equal when they share one generator.
    fn eq(&self, other: &Generator) -> bool {
        Generator::ptr_eq(self, other)
    }
}

impl fmt::Debug for Generator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Generator(device=cpu, initial_seed={})",
            self.initial_seed()
        )
    }
}

/// Seeds the default CPU generator (`torch.manual_seed`) and returns it.
pub fn manual_seed(seed: u64) -> Generator {
    let g = Generator::default_cpu();
    g.manual_seed(seed);
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt19937_reference_values() {
        // The C++ standard's check: the 10000th output of a default-seeded (5489) mt19937.
        let mut e = Mt19937::new(5489);
        assert_eq!(e.next_u32(), 3_499_211_612);
        for _ in 1..9999 {
            e.next_u32();
        }
        assert_eq!(e.next_u32(), 4_123_659_995);
        // Only the low 32 bits of the seed count, but the seed is remembered in full.
        let mut a = Mt19937::new(1 << 32 | 7);
        let mut b = Mt19937::new(7);
        assert_eq!(a.next_u32(), b.next_u32());
        assert_eq!(a.seed(), 1 << 32 | 7);
    }

    #[test]
    fn random64_and_handles() {
        let g = Generator::new(0);
        let h = g.clone();
        assert!(Generator::ptr_eq(&g, &h));
        let r = g.lock().random64();
        assert_eq!(r, (2_357_136_044u64 << 32) | 2_546_248_239);
        let f = g.fork();
        assert_eq!(f.lock().random(), h.lock().random());
        assert!(f != g);
        g.lock().set_next_double_normal_sample(Some(1.5));
        let s = g.state();
        g.manual_seed(3);
        assert_eq!(g.lock().take_next_double_normal_sample(), None);
        g.set_state(s);
        assert_eq!(g.lock().take_next_double_normal_sample(), Some(1.5));
        assert_eq!(format!("{g:?}"), "Generator(device=cpu, initial_seed=0)");
        assert_eq!(g.device(), Device::CPU);
    }

    #[test]
    fn default_generator_is_shared() {
        let a = Generator::default_cpu();
        assert!(Generator::ptr_eq(&a, &Generator::default_cpu()));
    }
}
