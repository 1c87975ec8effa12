//! Which kernel a Montgomery context runs on: the public [`Engine`] names, run-time
//! detection, and [`AnyKernel`], the per-context kernel state that the contexts dispatch
//! on (statically: one `match` per operation, no function pointers).
//!
//! The kernel is chosen per context when the context is made, never by a process-wide
//! switch: a key made with [`Engine::Portable`] and one made with [`Engine::Ifma`] live
//! side by side in one process (the tests build every key on every engine the CPU has).

#[cfg(target_arch = "x86_64")]
use super::ifma::{self, IfmaKernel};
use super::kernel::Kernel;
use super::portable::PortableKernel;

/// A Montgomery kernel (for tests, benchmarks and diagnostics; every engine gives
/// bit-identical results).
///
/// New engines may be added in minor releases (the enum is non-exhaustive).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Engine {
    /// Radix 2^64 CIOS multiplication and a dedicated squaring, safe Rust; every CPU.
    Portable,
    /// Radix 2^52 almost-Montgomery multiplication with AVX-512 IFMA (x86-64 CPUs with
    /// `avx512f` and `avx512ifma`: Intel since Ice Lake, AMD since Zen 4), with an
    /// eight-lane multi-buffer kernel for batches.
    Ifma,
}

impl Engine {
    /// Every engine this build knows, whether or not the running CPU has it.
    pub const ALL: &'static [Self] = &[Self::Portable, Self::Ifma];

    /// Whether the running CPU can run this engine.
    #[must_use]
    pub fn is_available(self) -> bool {
        match self {
            Self::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Self::Ifma => ifma::available(),
            #[cfg(not(target_arch = "x86_64"))]
            Self::Ifma => false,
        }
    }

    /// The engines the running CPU can run, portable first.
    #[must_use]
    pub fn available() -> Vec<Self> {
        Self::ALL
            .iter()
            .copied()
            .filter(|e| e.is_available())
            .collect()
    }

    /// A short lower-case name (`"portable"`, `"ifma"`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Portable => "portable",
            Self::Ifma => "ifma",
        }
    }
}

impl core::fmt::Display for Engine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// The engine keys get when none is named: the fastest the running CPU has
/// ([`Engine::Ifma`] where available, [`Engine::Portable`] otherwise).
#[must_use]
pub fn default_engine() -> Engine {
    if Engine::Ifma.is_available() {
        Engine::Ifma
    } else {
        Engine::Portable
    }
}

/// The kernel state of one context.
pub(crate) enum AnyKernel {
    Portable(PortableKernel),
    #[cfg(target_arch = "x86_64")]
    Ifma(IfmaKernel),
}

/// Runs `$body` with `$k` bound to the context's kernel (static dispatch).
macro_rules! with_kernel {
    ($kernel:expr, $k:ident => $body:expr) => {
        match $kernel {
            $crate::arith::engine::AnyKernel::Portable($k) => $body,
            #[cfg(target_arch = "x86_64")]
            $crate::arith::engine::AnyKernel::Ifma($k) => $body,
        }
    };
}
pub(crate) use with_kernel;

impl AnyKernel {
    /// The kernel of `engine` for the odd modulus `m`, or the portable kernel when `engine`
    /// has no kernel for m's size (IFMA's stop at 8318-bit moduli); `None` if the running
    /// CPU lacks `engine`. Constant time in m (only its limb count steers the choice).
    pub(crate) fn new(engine: Engine, m: &[u64]) -> Option<Self> {
        if !engine.is_available() {
            return None;
        }
        match engine {
            Engine::Portable => Some(Self::Portable(PortableKernel::new(m))),
            #[cfg(target_arch = "x86_64")]
            Engine::Ifma => Some(
                IfmaKernel::new(m)
                    .map_or_else(|| Self::Portable(PortableKernel::new(m)), Self::Ifma),
            ),
            #[cfg(not(target_arch = "x86_64"))]
            Engine::Ifma => None,
        }
    }

    /// The engine this kernel belongs to.
    pub(crate) fn engine(&self) -> Engine {
        match self {
            Self::Portable(_) => Engine::Portable,
            #[cfg(target_arch = "x86_64")]
            Self::Ifma(_) => Engine::Ifma,
        }
    }

    /// The kernel as a trait object (for the rare, non-hot-path uses).
    pub(crate) fn as_dyn(&self) -> &dyn Kernel {
        with_kernel!(self, k => k)
    }
}
