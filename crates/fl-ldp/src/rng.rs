//! The convenience CSPRNG: ChaCha20 seeded from the operating system.
//!
//! Every sampler in this crate takes `&mut R` with `R: rand::CryptoRng`, so any CSPRNG can
//! be used (and a fixed-seed ChaCha in tests and audits). [`system_rng`] is the default for
//! production use: a fresh 256-bit seed from the OS generator, never a caller-chosen seed.

use rand::SeedableRng;
use rand::rngs::{ChaCha20Rng, SysRng};

use crate::error::{Error, Result};

/// A ChaCha20 CSPRNG seeded with 256 bits from the operating system's generator.
///
/// ```
/// use fl_ldp::{BinaryRandomizedResponse, Epsilon, system_rng};
///
/// let mut rng = system_rng()?;
/// let rr = BinaryRandomizedResponse::new(Epsilon::new(1.0)?);
/// let _report = rr.randomize(true, &mut rng);
/// # Ok::<(), fl_ldp::Error>(())
/// ```
///
/// # Errors
/// [`Error::Rng`] when the operating system's generator fails.
pub fn system_rng() -> Result<ChaCha20Rng> {
    ChaCha20Rng::try_from_rng(&mut SysRng).map_err(|e| Error::Rng {
        message: e.to_string(),
    })
}
