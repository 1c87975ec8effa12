//! ⚠️ Low-level hooks into the key and the values, for the crate's own harnesses: the
//! valgrind constant-time harness (which marks secret words undefined and declassifies
//! results), the zeroization tests, known-answer tests and the fuzz targets' oracles.
//! Compiled only with the `hazmat` feature (as RustCrypto's `rsa` keeps its raw
//! primitives behind one); nothing here is needed to use the crate, and misuse (a reused
//! α, a key built from wrong primes, a variable-time decryption of secret data) breaks its
//! security claims.

use crate::arith::{Engine, MontVal, Monty, limbs_from_big};
use crate::ciphertext::{Ciphertext, Plaintext};
use crate::djn::{DjnEncryptor, DjnOwnerEncryptor};
use crate::error::Result;
use crate::private_key::DecryptionKey;
use crate::public_key::EncryptionKey;
use num_bigint::BigUint;
use zeroize::Zeroizing;

/// The limbs of a plaintext's residue, in place (little-endian 64-bit words).
#[must_use]
pub fn plaintext_words(m: &Plaintext) -> &[u64] {
    &m.value
}

/// The limbs of a ciphertext's value, in place (little-endian 64-bit words).
#[must_use]
pub fn ciphertext_words(c: &Ciphertext) -> &[u64] {
    &c.value
}

/// DJN encryption of m with a caller-chosen exponent α (little-endian 64-bit words; bits
/// beyond ℓ are ignored). Reusing α links ciphertexts and reveals differences of
/// plaintexts.
///
/// # Errors
/// [`crate::Error::PlaintextOutOfRange`] if m ≥ n.
pub fn djn_encrypt_with_alpha(
    djn: &DjnEncryptor,
    m: &Plaintext,
    alpha: &[u64],
) -> Result<Ciphertext> {
    djn.encrypt_with_alpha(m, alpha)
}

/// [`djn_encrypt_with_alpha`] by the key owner's CRT encryptor (the same ciphertext).
///
/// # Errors
/// [`crate::Error::PlaintextOutOfRange`] if m ≥ n.
pub fn djn_owner_encrypt_with_alpha(
    djn: &DjnOwnerEncryptor<'_>,
    m: &Plaintext,
    alpha: &[u64],
) -> Result<Ciphertext> {
    djn.encrypt_with_alpha(m, alpha)
}

/// The decryption key for primes p < q of `bits` bits each (little-endian limbs), built in
/// constant time in p and q (the path [`crate::keygen`] and
/// [`DecryptionKey::from_primes`] end in). **Unchecked**: that p and q are distinct odd
/// primes, p < q and p·q is `public`'s n is the caller's promise; a broken promise gives a
/// key that decrypts wrongly, never a panic. Only the public shape is checked.
///
/// # Errors
/// [`crate::Error::InvalidPrimes`] unless 2·`bits` is the public key's bit length or one
/// less, and p and q have at most ⌈bits/64⌉ limbs.
pub fn decryption_key_from_prime_limbs_unchecked(
    public: EncryptionKey,
    p: &[u64],
    q: &[u64],
    bits: u32,
) -> Result<DecryptionKey> {
    DecryptionKey::from_prime_limbs_unchecked(public, p, q, bits)
}

/// Overwrites every secret limb the key holds with zeros, exactly as its `Drop` does; the
/// key is unusable afterwards.
pub fn wipe_secrets(key: &mut DecryptionKey) {
    key.wipe_secrets();
}

/// Every secret region the key holds, in place: p, q, p − 1, q − 1, hp, hq, s⁻¹ mod 2^k,
/// p⁻¹ mod q, p⁻² mod q², p², and the moduli and every constant of its Montgomery contexts
/// mod p, q, p², q² (the kernels' own forms included).
#[must_use]
pub fn secret_words(key: &DecryptionKey) -> Vec<&[u64]> {
    key.secret_words()
}

/// Textbook decryption L(c^λ mod n²)·μ mod n with num-bigint: **variable time** and its
/// temporaries are not wiped (a cross-check for tests and the valgrind harness's positive
/// control).
///
/// # Errors
/// [`crate::Error::KeyMismatch`] if `c` belongs to another key.
pub fn decrypt_textbook_vartime(key: &DecryptionKey, c: &Ciphertext) -> Result<BigUint> {
    key.decrypt_textbook_vartime(c)
}

/// One Montgomery context and two operands, for timing a kernel's multiplication and
/// squaring in isolation (the `kernel_sweep` criterion group of `benches/benches/paillier.rs`
/// chooses the Karatsuba thresholds from it).
pub struct KernelProbe {
    mont: Monty,
    a: MontVal,
    b: MontVal,
    work: crate::arith::monty::Work,
}

impl KernelProbe {
    /// A probe for the odd `modulus` (> 1) on `engine`, with its operands derived from
    /// `seed` (below the modulus); `karatsuba` forces the kernel's Karatsuba path on or
    /// off (`None`: the kernel's own threshold). `None` if the modulus is even or too
    /// small, or the CPU lacks `engine`.
    #[must_use]
    pub fn new(
        engine: Engine,
        modulus: &BigUint,
        seed: u64,
        karatsuba: Option<bool>,
    ) -> Option<Self> {
        let bits = u32::try_from(modulus.bits()).ok()?;
        if bits < 2 || !modulus.bit(0) {
            return None;
        }
        let limbs = bits.div_ceil(64) as usize;
        let words = limbs_from_big(modulus, limbs)?;
        let mut mont = Monty::new(&words, bits, engine)?;
        if let Some(on) = karatsuba {
            mont.set_karatsuba(on);
        }
        let operand = |k: u64| {
            let v: Vec<u64> = (0..limbs as u64)
                .map(|i| (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed.wrapping_mul(k))
                .collect();
            mont.reduce(&v)
        };
        let (a, b) = (operand(3), operand(5));
        let work = mont.work();
        Some(Self { mont, a, b, work })
    }

    /// The engine the probe runs on.
    #[must_use]
    pub fn engine(&self) -> Engine {
        self.mont.engine()
    }

    /// a ← a·b (one Montgomery multiplication).
    pub fn mul(&mut self) {
        self.mont.mul_assign(&mut self.a, &self.b, &mut self.work);
    }

    /// a ← a² (one Montgomery squaring).
    pub fn sqr(&mut self) {
        self.mont.sqr_assign(&mut self.a, &mut self.work);
    }
}

/// Makes the x86-64 BMI2/ADX kernel ([`Engine::X86Adx`]) available when the CPU reports
/// BMI2 but not ADX. **Only for running under valgrind**, whose JIT executes `adcx` and
/// `adox` on any host while its emulated CPU hides ADX from feature detection (the
/// constant-time harness calls it to check that kernel under memcheck). Process-wide and
/// permanent. Does nothing on other architectures.
///
/// # Safety
///
/// From this call on, engine detection ([`Engine::is_available`], [`Engine::available`])
/// and every key built on [`Engine::X86Adx`] or [`Engine::Avx2`] treat the CPU as having
/// ADX when it reports BMI2, and the kernel's inline assembly executes `mulx`, `adcx` and
/// `adox` without the run-time ADX check that otherwise guards it. The caller must guarantee that whatever
/// executes this process for the rest of its life executes those instructions: a CPU
/// with BMI2 and ADX, or valgrind's JIT (which executes them on any x86-64 host).
/// Executing them on a CPU without ADX is undefined behaviour (in practice an
/// illegal-instruction fault, but the compiler is entitled to assume it never happens).
// `unsafe fn`: the caller takes over the ADX check (see `# Safety`); the lint's only
// exception in this module.
#[allow(unsafe_code)]
pub unsafe fn assume_cpu_has_adx_under_valgrind() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: our caller guarantees, per this function's contract, that `adcx`, `adox`
    // and `mulx` execute in this process, which is `assume_adx`'s requirement.
    unsafe {
        crate::arith::adx::assume_adx();
    }
}

/// The n-th roots of [`DecryptionKey::prove_correct`] as n's limbs, before their conversion
/// to `BigUint` and the self-check (both read the then public roots): for the valgrind
/// harness, which runs it on a poisoned key.
///
/// # Errors
/// As [`DecryptionKey::prove_correct`]'s challenge derivation.
pub fn key_proof_root_words(
    key: &DecryptionKey,
    context: &[u8],
) -> Result<Vec<Zeroizing<Vec<u64>>>> {
    key.key_proof_root_limbs(context)
}

/// h_s of [`crate::DjnPublic::generate`] as n² limbs, before its conversion to `BigUint`
/// (which reads the then public value): for the valgrind harness, which runs it with a
/// poisoned generator.
pub fn djn_generate_hs_words<R: rand::CryptoRng + ?Sized>(
    key: &EncryptionKey,
    rng: &mut R,
) -> Zeroizing<Vec<u64>> {
    crate::DjnPublic::generate_hs_limbs(key, rng)
}
