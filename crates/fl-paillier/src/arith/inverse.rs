//! Variable-time modular inversion, for public values only (negation of a ciphertext,
//! negative public scalars, the public corrections of the secret-scalar products).

use super::{boxed_from_limbs, limbs_from_boxed};

/// x⁻¹ mod m for public x and odd public m (limbs of m's length), or `None` if x is not
/// invertible. Variable time in x and m.
pub(crate) fn invert_vartime(x: &[u64], m: &[u64]) -> Option<Vec<u64>> {
    let l = m.len();
    let modulus = boxed_from_limbs(m, l).to_odd().into_option()?;
    let inv = boxed_from_limbs(x, l)
        .invert_odd_mod_vartime(&modulus)
        .into_option()?;
    Some(limbs_from_boxed(&inv).to_vec())
}
