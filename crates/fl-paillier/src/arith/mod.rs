//! fl-paillier's arithmetic core: Montgomery contexts ([`monty`]) over interchangeable
//! kernels ([`kernel`]: the seam; [`portable`] and the AVX-512 IFMA kernel [`ifma`],
//! chosen per context by [`engine`]), the multi-exponentiations built on them
//! ([`multi_pow`]), constant-time helpers on little-endian 64-bit limbs ([`limbs`]: the
//! canonical form of every value outside a Montgomery domain), the optimisation barrier of
//! every masked select ([`barrier`]) and a variable-time inverse for public values
//! ([`inverse`]).
//!
//! num-bigint is used only for public values (parsing, printing, validation); crypto-bigint
//! only for the variable-time gcd that validates a public ciphertext.

#[cfg(target_arch = "x86_64")]
pub(crate) mod adx;
#[cfg(target_arch = "x86_64")]
mod avx2;
pub(crate) mod barrier;
pub(crate) mod engine;
#[cfg(feature = "insecure-free-hook")]
pub(crate) mod free_hook;
#[cfg(target_arch = "x86_64")]
pub(crate) mod ifma;
pub(crate) mod inverse;
pub(crate) mod kernel;
pub(crate) mod limbs;
pub(crate) mod monty;
pub(crate) mod multi_pow;
mod portable;

pub(crate) use barrier::mask;
pub use engine::{Engine, default_engine};
pub(crate) use kernel::{MontVal, window_digit};
pub(crate) use limbs::{
    Limbs, add_assign, big_from_limbs, boxed_from_limbs, byte_len, cmp_vartime, ct_is_zero_mask,
    ct_lt_mask, fit, limbs_for, limbs_from_big, mul_low, mul_wide, sub_assign,
};
pub(crate) use monty::{Monty, Table};
