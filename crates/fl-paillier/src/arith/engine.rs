//! Which kernel a Montgomery context runs on: the public [`Engine`] names, run-time
//! detection, and [`AnyKernel`], the per-context kernel state that the contexts dispatch
//! on (statically: one `match` per operation, no function pointers).
//!
//! The kernel is chosen per context when the context is made, never by a process-wide
//! switch: a key made with [`Engine::Portable`] and one made with [`Engine::Ifma`] live
//! side by side in one process (the tests build every key on every engine the CPU has).

#[cfg(target_arch = "x86_64")]
use super::adx::{self, AdxKernel};
#[cfg(target_arch = "x86_64")]
use super::avx2::{self, Avx2Kernel};
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
    /// Radix 2^64 with `mulx`, `adcx` and `adox` (x86-64 CPUs with BMI2 and ADX: Intel
    /// since Broadwell, AMD since Zen): four-row passes with two carry chains in inline
    /// assembly, a dedicated squaring and a separate Montgomery reduction.
    X86Adx,
    /// [`Engine::X86Adx`] for single values and an eight-lane multi-buffer kernel with
    /// AVX2 `vpmuludq` (radix 2^28 or 2^27, a dedicated squaring) for batches (x86-64 CPUs
    /// with AVX2, BMI2 and ADX: Intel since Broadwell, AMD since Zen). Opt-in: on the CPU
    /// it was measured on, eight single ADX exponentiations beat one eight-lane AVX2
    /// one (docs/PERFORMANCE.md), so keys get [`Engine::X86Adx`] unless this is named.
    Avx2,
    /// Radix 2^52 almost-Montgomery multiplication with AVX-512 IFMA (x86-64 CPUs with
    /// `avx512f` and `avx512ifma`: Intel since Ice Lake, AMD since Zen 4), with an
    /// eight-lane multi-buffer kernel for batches.
    Ifma,
}

impl Engine {
    /// Every engine this build knows, whether or not the running CPU has it, in the order
    /// of preference measured (docs/PERFORMANCE.md), least preferred first: portable, AVX2
    /// (whose batches lost to single [`Engine::X86Adx`] streams on the one CPU it was
    /// measured on, so it is never picked by default), x86-64-adx, IFMA.
    pub const ALL: &'static [Self] = &[Self::Portable, Self::Avx2, Self::X86Adx, Self::Ifma];

    /// Whether the running CPU can run this engine.
    #[must_use]
    pub fn is_available(self) -> bool {
        match self {
            Self::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Self::X86Adx => adx::available(),
            #[cfg(target_arch = "x86_64")]
            Self::Avx2 => avx2::available(),
            #[cfg(target_arch = "x86_64")]
            Self::Ifma => ifma::available(),
            #[cfg(not(target_arch = "x86_64"))]
            Self::X86Adx | Self::Avx2 | Self::Ifma => false,
        }
    }

    /// The engines the running CPU can run, least preferred (portable) first, the default
    /// last.
    #[must_use]
    pub fn available() -> Vec<Self> {
        Self::ALL
            .iter()
            .copied()
            .filter(|e| e.is_available())
            .collect()
    }

    /// The engine named `name` ([`Engine::name`]'s spelling), if this build knows it.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|e| e.name() == name)
    }

    /// A short lower-case name (`"portable"`, `"x86-64-adx"`, `"avx2"`, `"ifma"`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Portable => "portable",
            Self::X86Adx => "x86-64-adx",
            Self::Avx2 => "avx2",
            Self::Ifma => "ifma",
        }
    }
}

impl core::fmt::Display for Engine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// The engine keys get when none is named: the fastest the running CPU has, as measured
/// ([`Engine::Ifma`], else [`Engine::X86Adx`], else [`Engine::Portable`]; [`Engine::Avx2`]
/// only when named) — unless the environment variable `FL_PAILLIER_ENGINE` names an
/// engine the CPU has (`portable`, `x86-64-adx`, `avx2`, `ifma`), which is then the
/// default of every key made afterwards without one (to measure or pin a CPU class, e.g.
/// the Python package's benchmark on the kernels of a CPU without IFMA; a name the CPU
/// lacks, or no name, is ignored). Read once per process.
#[must_use]
pub fn default_engine() -> Engine {
    static CHOSEN: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(|| {
        std::env::var("FL_PAILLIER_ENGINE")
            .ok()
            .and_then(|name| Engine::from_name(&name))
            .filter(|e| e.is_available())
            .unwrap_or_else(|| {
                Engine::available()
                    .last()
                    .copied()
                    .unwrap_or(Engine::Portable)
            })
    })
}

/// The kernel state of one context.
///
/// Each kernel's state is boxed and the tag is a full word (`repr(u64)`), so an
/// `AnyKernel` is two initialised words whatever the variant. With the kernels inline, a
/// small variant left the rest of the enum's bytes uninitialised, and moving a context
/// from the stack into a heap block (`Arc::new` of a public key) copied whatever the stack
/// held there, secrets of an earlier computation included, into memory that is later freed
/// unwiped (the scanning-allocator test found a prime's Montgomery constant that way).
/// The kernel structs themselves have no padding.
#[repr(u64)]
pub(crate) enum AnyKernel {
    Portable(Box<PortableKernel>),
    #[cfg(target_arch = "x86_64")]
    Adx(Box<AdxKernel>),
    #[cfg(target_arch = "x86_64")]
    Avx2(Box<Avx2Kernel>),
    #[cfg(target_arch = "x86_64")]
    Ifma(Box<IfmaKernel>),
}

/// Runs `$body` with `$k` bound to the context's kernel (static dispatch).
macro_rules! with_kernel {
    ($kernel:expr, $k:ident => $body:expr) => {
        match $kernel {
            $crate::arith::engine::AnyKernel::Portable($k) => $body,
            #[cfg(target_arch = "x86_64")]
            $crate::arith::engine::AnyKernel::Adx($k) => $body,
            #[cfg(target_arch = "x86_64")]
            $crate::arith::engine::AnyKernel::Avx2($k) => $body,
            #[cfg(target_arch = "x86_64")]
            $crate::arith::engine::AnyKernel::Ifma($k) => $body,
        }
    };
}
pub(crate) use with_kernel;

impl AnyKernel {
    /// The kernel of `engine` for the odd modulus `m` of at least `min_bits` bits (a public
    /// bound), or a simpler kernel when `engine` has none for m's size (IFMA's stop at
    /// 8318-bit moduli: portable; AVX2's batch kernel at its radix limit: the ADX kernel);
    /// `None` if the running CPU lacks `engine`. Constant time in m (only its limb count
    /// steers the choice).
    pub(crate) fn new(engine: Engine, m: &[u64], min_bits: u32) -> Option<Self> {
        if !engine.is_available() {
            return None;
        }
        match engine {
            Engine::Portable => Some(Self::Portable(Box::new(PortableKernel::new(m)))),
            #[cfg(target_arch = "x86_64")]
            Engine::X86Adx => AdxKernel::new(m).map(|k| Self::Adx(Box::new(k))),
            #[cfg(target_arch = "x86_64")]
            Engine::Avx2 => Avx2Kernel::new(m, min_bits).map_or_else(
                || AdxKernel::new(m).map(|k| Self::Adx(Box::new(k))),
                |k| Some(Self::Avx2(Box::new(k))),
            ),
            #[cfg(target_arch = "x86_64")]
            Engine::Ifma => Some(IfmaKernel::new(m).map_or_else(
                || Self::Portable(Box::new(PortableKernel::new(m))),
                |k| Self::Ifma(Box::new(k)),
            )),
            #[cfg(not(target_arch = "x86_64"))]
            Engine::X86Adx | Engine::Avx2 | Engine::Ifma => None,
        }
    }

    /// The engine this kernel belongs to.
    pub(crate) fn engine(&self) -> Engine {
        match self {
            Self::Portable(_) => Engine::Portable,
            #[cfg(target_arch = "x86_64")]
            Self::Adx(_) => Engine::X86Adx,
            #[cfg(target_arch = "x86_64")]
            Self::Avx2(_) => Engine::Avx2,
            #[cfg(target_arch = "x86_64")]
            Self::Ifma(_) => Engine::Ifma,
        }
    }

    /// The kernel as a trait object (for the rare, non-hot-path uses).
    pub(crate) fn as_dyn(&self) -> &dyn Kernel {
        with_kernel!(self, k => &**k)
    }
}
