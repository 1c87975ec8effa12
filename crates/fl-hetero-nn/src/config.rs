//! Protocol configuration, security profiles and the public bounds every mask, slot width
//! and range check is derived from.
//!
//! Both parties hold the same [`ProtocolConfig`]; the host announces it in its hello and the
//! guest refuses a session whose configuration differs in any field. All bounds are public
//! functions of the configuration, the batch size and the step counter, so slot widths and
//! message sizes reveal nothing about the values they carry.

use num_bigint::BigInt;
use num_traits::One;

use crate::error::{ApiMisuse, Error};
use crate::fixed::FixedPoint;

/// Security profile of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Profile {
    /// FATE 1.x's choices: acc₀ = 0 (so the guest knows W₀ = W̃₀), masks uniform in
    /// [−1024, 1024] (in the units of the masked value), no re-randomisation, no packing.
    /// For cross-checking against FATE and for demonstrating its leaks. **Not for
    /// production.**
    FateFaithful,
    /// The default: CSPRNG masks with `statistical_security_bits` (≥ 40) of slack above
    /// the public bound of the masked value, every guest→host ciphertext re-randomised,
    /// one fixed scale per message, the peer key validated, a jointly drawn initial weight
    /// W₀ = W̃₀ + acc₀ (each party draws its own share, neither is sent), and packing.
    #[default]
    Hardened,
}

impl Profile {
    pub(crate) fn code(self) -> u8 {
        match self {
            Self::FateFaithful => 1,
            Self::Hardened => 2,
        }
    }

    pub(crate) fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(Self::FateFaithful),
            2 => Some(Self::Hardened),
            _ => None,
        }
    }
}

/// How the host encrypts and how the guest re-randomises (both parties must agree: the
/// guest's fixed-base re-randomisation is sound only for a host that encrypts with the
/// same base).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Encryption {
    /// FATE's way: every host encryption and every guest re-randomisation draws r
    /// uniform in Z*_n and computes rⁿ with the public key (one |n|-bit exponentiation
    /// mod n² each).
    Textbook,
    /// The host, which owns the key, encrypts by CRT ([`fl_paillier::DecryptionKey::encrypt_crt`]:
    /// exactly the textbook distribution, constant time, about a third of the cost); the
    /// guest re-randomises with a textbook rⁿ. Standard assumptions only (DCR).
    KeyOwnerCrt,
    /// DJN fixed-base randomisers (opt-in; an extra assumption). The host publishes
    /// h_s = hⁿ mod n² in its hello and encrypts with h_s^α, α of 2κ bits (κ = 112 for
    /// 2048-bit keys): its ciphertexts hide a_A and acc from the guest under DCR **plus**
    /// DJN's short-exponent assumption (see `fl_paillier::djn`). The guest re-randomises
    /// with h_s^β (and a power of a base of its own, so that a host's choice of h_s cannot
    /// undo it; see the crate README), β uniform with `statistical_security_bits` of slack
    /// above the largest randomness exponent Σ kᵢ·αᵢ its products can carry: for a host
    /// that follows the protocol (semi-honest), the re-randomised ciphertext's randomness
    /// is then within 2^−κ (statistically) of being independent of the guest's scalars,
    /// even for the key owner, who can take n-th roots and discrete logarithms. No
    /// assumption is needed for that step; see the crate README.
    Djn,
}

impl Encryption {
    pub(crate) fn code(self) -> u8 {
        match self {
            Self::Textbook => 1,
            Self::KeyOwnerCrt => 2,
            Self::Djn => 3,
        }
    }

    pub(crate) fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(Self::Textbook),
            2 => Some(Self::KeyOwnerCrt),
            3 => Some(Self::Djn),
            _ => None,
        }
    }
}

/// The agreed parameters of a session. Construct with [`ProtocolConfig::new`] and adjust the
/// public fields; [`ProtocolConfig::validate`] runs when a party is created.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ProtocolConfig {
    /// Security profile.
    pub profile: Profile,
    /// Fixed-point format (scale 2^f; default f = 23 like FATE).
    pub fixed_point: FixedPoint,
    /// d_A: width of the host's bottom output.
    pub host_dim: usize,
    /// m: output width of the interactive layer.
    pub out_dim: usize,
    /// η: the interactive layer's SGD learning rate (FATE's `interactive_layer_lr`).
    pub learning_rate: f64,
    /// Public bound on the host's bottom output: |a_A| < 2^bits.
    pub activation_bound_bits: u32,
    /// Public bound on the error at the interactive layer: |δ| < 2^bits and |η·δ| < 2^bits.
    pub delta_bound_bits: u32,
    /// Public bound on the initial weight (each share of it in `Hardened`) and on b_A:
    /// |W₀|, |W̃₀|, |acc₀|, |b_A| < 2^bits.
    pub weight_bound_bits: u32,
    /// κ: statistical slack of the hardened masks in bits (≥ 40).
    pub statistical_security_bits: u32,
    /// Largest batch (rows per step) the session accepts.
    pub max_batch_rows: usize,
    /// Smallest peer key accepted, in bits of n.
    pub min_key_bits: u64,
    /// Pack several values per ciphertext (hardened profile only).
    pub packing: bool,
    /// How ciphertexts get their randomness (default: `Textbook` in `FateFaithful`,
    /// `KeyOwnerCrt` in `Hardened`).
    pub encryption: Encryption,
    /// EmbeddingDP (seed 000, fl-ldp's [`fl_ldp::EmbeddingDp`]) applied by the host to
    /// every row of its bottom output before encryption: each coordinate is quantised to
    /// its sign bit and kept with probability e^(ε/2)/(1 + e^(ε/2)). `None` (the default)
    /// sends a_A as it is.
    ///
    /// Privacy claim: each row the host sends is (d_A·ε/2)-LDP with respect to replacing
    /// that row's bottom output by any other (ε/2 per coordinate), from the guest's view
    /// and everything derived from it; fresh coins every round, so a row sent in T rounds
    /// composes to T·d_A·ε/2. Training then runs on the randomised bits (the bottom model
    /// receives δ_A as the gradient of its output: straight-through). The host chooses
    /// it; the hello carries it so the guest knows, but the guest does not require it.
    pub embedding_dp: Option<fl_ldp::Epsilon>,
}

impl ProtocolConfig {
    /// A configuration with the profile's defaults for the given layer widths.
    pub fn new(profile: Profile, host_dim: usize, out_dim: usize) -> Self {
        Self {
            profile,
            fixed_point: FixedPoint::FATE_DEFAULT,
            host_dim,
            out_dim,
            learning_rate: 0.9,
            activation_bound_bits: 8,
            delta_bound_bits: 4,
            weight_bound_bits: 8,
            statistical_security_bits: 40,
            max_batch_rows: 4096,
            min_key_bits: 2048,
            packing: matches!(profile, Profile::Hardened),
            encryption: match profile {
                Profile::FateFaithful => Encryption::Textbook,
                Profile::Hardened => Encryption::KeyOwnerCrt,
            },
            embedding_dp: None,
        }
    }

    /// Checks every field; the error says what is allowed.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |reason: String| Err(Error::ApiMisuse(ApiMisuse::InvalidConfig { reason }));
        let f = self.fixed_point.frac_bits();
        if self.host_dim == 0
            || self.out_dim == 0
            || self.host_dim > 1 << 16
            || self.out_dim > 1 << 16
        {
            return bad(format!(
                "host_dim = {}, out_dim = {}; both must be in 1..=65536",
                self.host_dim, self.out_dim
            ));
        }
        if !(self.learning_rate.is_finite()
            && self.learning_rate > 0.0
            && self.learning_rate <= 1e6)
        {
            return bad(format!(
                "learning_rate = {}; must be finite and in (0, 1e6]",
                self.learning_rate
            ));
        }
        for (name, b) in [
            ("activation_bound_bits", self.activation_bound_bits),
            ("delta_bound_bits", self.delta_bound_bits),
            ("weight_bound_bits", self.weight_bound_bits),
        ] {
            if b > 32 || b + 2 * f > 110 {
                return bad(format!(
                    "{name} = {b}; must be ≤ 32 and {name} + 2·frac_bits ≤ 110"
                ));
            }
        }
        // Below 40 bits only in builds with the explicitly insecure test scheme (the mask
        // indistinguishability tests' negative control shrinks the slack to 8 bits).
        let min_kappa = if cfg!(any(test, fuzzing, feature = "insecure-identity-scheme")) {
            1
        } else {
            40
        };
        if self.statistical_security_bits < min_kappa || self.statistical_security_bits > 256 {
            return bad(format!(
                "statistical_security_bits = {}; must be in 40..=256",
                self.statistical_security_bits
            ));
        }
        if self.max_batch_rows == 0 || self.max_batch_rows > 1 << 20 {
            return bad(format!(
                "max_batch_rows = {}; must be in 1..=2^20",
                self.max_batch_rows
            ));
        }
        if self.min_key_bits < 2048
            && !cfg!(any(test, fuzzing, feature = "insecure-identity-scheme"))
        {
            return bad(format!(
                "min_key_bits = {}; must be ≥ 2048",
                self.min_key_bits
            ));
        }
        if self.packing && self.profile == Profile::FateFaithful {
            return bad("packing is a hardened-profile feature; FateFaithful sends one value per ciphertext".into());
        }
        Ok(())
    }

    /// The profile.
    pub fn profile(&self) -> Profile {
        self.profile
    }
}

/// The number of training steps a session supports (the fixed-base re-randomisation
/// exponent is sized for it).
pub const MAX_STEPS: u64 = 1 << 40;

/// ceil(log2(x)) for x ≥ 1.
fn clog2(x: u64) -> u32 {
    if x <= 1 {
        0
    } else {
        64 - (x - 1).leading_zeros()
    }
}

/// Public magnitude bounds, all as bit counts b meaning |x| < 2^b.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    f: u32,
    kappa: u32,
    hardened: bool,
    d_a: u64,
    m: u64,
    n_max: u64,
    /// |A| (activations at scale S).
    pub(crate) a: u32,
    /// |D|, |Dη| (errors at scale S).
    pub(crate) d: u32,
    /// |W₀| (each share in `Hardened`), |W|'s nominal bound and |b_A|, at scale S².
    pub(crate) w: u32,
}

impl Bounds {
    pub(crate) fn new(c: &ProtocolConfig) -> Self {
        let f = c.fixed_point.frac_bits();
        Self {
            f,
            kappa: c.statistical_security_bits,
            hardened: c.profile == Profile::Hardened,
            d_a: c.host_dim as u64,
            m: c.out_dim as u64,
            n_max: c.max_batch_rows as u64,
            a: c.activation_bound_bits + f + 1,
            d: c.delta_bound_bits + f + 1,
            w: c.weight_bound_bits + 2 * f + 1,
        }
    }

    /// FATE's masks: uniform in [−1024, 1024] in real units at scale 2^(power·f).
    fn fate_mask(&self, power: u32) -> u32 {
        10 + power * self.f + 1
    }

    /// |Gη| = |Aᵀ·Dη| for batches of at most n_max rows (scale S²).
    pub(crate) fn gradient(&self) -> u32 {
        self.a + self.d + clog2(self.n_max)
    }

    /// |ε_A|: the host's weight noise (scale S²).
    pub(crate) fn eps_a(&self) -> u32 {
        if self.hardened {
            self.gradient() + self.kappa
        } else {
            self.fate_mask(2)
        }
    }

    /// |noise_w|: the guest's gradient mask (scale S²).
    pub(crate) fn noise_w(&self) -> u32 {
        if self.hardened {
            self.gradient() + self.kappa
        } else {
            self.fate_mask(2)
        }
    }

    /// |acc₀| (scale S²): the host's share of the jointly drawn W₀ in `Hardened` (bounded
    /// like a weight); 0 bits means acc₀ = 0 (`FateFaithful`).
    pub(crate) fn acc0(&self) -> u32 {
        if self.hardened { self.w } else { 0 }
    }

    /// |acc_t| after t training steps.
    pub(crate) fn acc(&self, t: u64) -> u32 {
        let base = self.acc0().max(self.eps_a());
        base + clog2(t.saturating_add(2)) + 1
    }

    /// The guest's check on its own W̃_t: |W̃_t| < 2^noisy_weight(t) (≥ |W| + |acc|).
    pub(crate) fn noisy_weight(&self, t: u64) -> u32 {
        self.w.max(self.acc(t)) + 1
    }

    /// |W_t| = |W̃_t + acc_t| given the two checks above.
    pub(crate) fn effective_weight(&self, t: u64) -> u32 {
        self.noisy_weight(t).max(self.acc(t)) + 1
    }

    /// |A·W̃ + b_A·S| (scale S³): the guest's unmasked forward partial.
    pub(crate) fn forward_partial(&self, t: u64) -> u32 {
        (self.a + self.noisy_weight(t) + clog2(self.d_a)).max(self.w + self.f) + 1
    }

    /// |ε_B| (scale S³).
    pub(crate) fn eps_b(&self, t: u64) -> u32 {
        if self.hardened {
            self.forward_partial(t) + self.kappa
        } else {
            self.fate_mask(3)
        }
    }

    /// |A·W̃ + b_A·S + ε_B|: what the host decrypts in step 3.
    pub(crate) fn masked_forward(&self, t: u64) -> u32 {
        self.forward_partial(t).max(self.eps_b(t)) + 1
    }

    /// |A·acc| (scale S³), computed by the host.
    pub(crate) fn host_forward_term(&self, t: u64) -> u32 {
        self.a + self.acc(t) + clog2(self.d_a)
    }

    /// |u + A·acc|: the plaintext reply in step 3.
    pub(crate) fn forward_reply(&self, t: u64) -> u32 {
        self.masked_forward(t).max(self.host_forward_term(t)) + 1
    }

    /// |Gη + noise_w|: what the host decrypts in step 5.
    pub(crate) fn masked_gradient(&self) -> u32 {
        self.gradient().max(self.noise_w()) + 1
    }

    /// |Gη + noise_w + ε_A|: the plaintext reply in step 5.
    pub(crate) fn gradient_reply(&self) -> u32 {
        self.masked_gradient().max(self.eps_a()) + 1
    }

    /// |δ_A| = |D·Wᵀ| (scale S³).
    pub(crate) fn input_gradient(&self, t: u64) -> u32 {
        self.d + self.effective_weight(t) + clog2(self.m)
    }

    /// The guest's fixed-base re-randomisation exponent length for a host whose
    /// randomness exponents have `alpha_bits` bits: κ bits of slack above the largest
    /// |Σ kᵢ·αᵢ| of the three products (scalars W̃ over d_A terms for steps below
    /// [`MAX_STEPS`], Dη over n_max terms, D over m terms).
    pub(crate) fn rerandomizer_bits(&self, alpha_bits: u32) -> u32 {
        let forward = self.noisy_weight(MAX_STEPS) + clog2(self.d_a);
        let gradient = self.d + clog2(self.n_max);
        let input = self.d + clog2(self.m);
        alpha_bits + forward.max(gradient).max(input) + self.kappa + 1
    }

    /// Slot bound for the packed ⟦acc⟧ + W̃ product (holds acc, W̃ and δ_A).
    pub(crate) fn backward_slot(&self, t: u64) -> u32 {
        self.input_gradient(t)
            .max(self.noisy_weight(t))
            .max(self.acc(t))
            + 1
    }
}

/// Uniform integer in [−(2^bits − 1), 2^bits − 1]; 0 when bits = 0.
pub(crate) fn uniform_mask<R: rand::CryptoRng + ?Sized>(bits: u32, rng: &mut R) -> BigInt {
    use num_bigint::BigRng010;
    if bits == 0 {
        return BigInt::from(0);
    }
    let b: BigInt = (BigInt::one() << bits) - 1;
    rng.random_bigint_range(&-b.clone(), &(b + 1))
}

/// FATE's mask: uniform over the integers of [−1024·2^(power·f), 1024·2^(power·f)].
pub(crate) fn fate_mask<R: rand::CryptoRng + ?Sized>(f: u32, power: u32, rng: &mut R) -> BigInt {
    use num_bigint::BigRng010;
    let b: BigInt = BigInt::from(1024) << (power * f);
    rng.random_bigint_range(&-b.clone(), &(b + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_field() {
        let mut c = ProtocolConfig::new(Profile::Hardened, 2, 2);
        assert!(c.validate().is_ok());
        // 0 is rejected in every build (1..40 only where the insecure test scheme is compiled in).
        c.statistical_security_bits = 0;
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("statistical_security_bits")
        );
        let mut c = ProtocolConfig::new(Profile::FateFaithful, 2, 2);
        c.packing = true;
        assert!(c.validate().is_err());
        let mut c = ProtocolConfig::new(Profile::Hardened, 0, 2);
        assert!(c.validate().is_err());
        c.host_dim = 2;
        c.learning_rate = f64::NAN;
        assert!(c.validate().is_err());
    }

    #[test]
    fn djn_rerandomizer_covers_every_product_with_slack() {
        let c = ProtocolConfig::new(Profile::Hardened, 64, 32);
        let b = Bounds::new(&c);
        let alpha = 224;
        let beta = b.rerandomizer_bits(alpha);
        // Σ kᵢ·αᵢ over each product, for every step a session supports.
        let forward = alpha + b.noisy_weight(MAX_STEPS) + clog2(64);
        let gradient = alpha + b.d + clog2(4096);
        let input = alpha + b.d + clog2(32);
        for exponent in [forward, gradient, input] {
            assert!(beta >= exponent + 40, "{beta} < {exponent} + 40");
        }
        // It fits a 2048-bit key with room to spare (the guest checks this).
        assert!(beta < 2048, "{beta}");
        assert!(b.noisy_weight(MAX_STEPS) >= b.noisy_weight(1 << 20));
    }

    #[test]
    fn hardened_masks_have_forty_bits_of_slack() {
        let c = ProtocolConfig::new(Profile::Hardened, 64, 32);
        let b = Bounds::new(&c);
        assert!(b.eps_a() >= b.gradient() + 40);
        assert!(b.noise_w() >= b.gradient() + 40);
        assert_eq!(b.acc0(), b.w);
        for t in [0, 1, 100] {
            assert!(b.eps_b(t) >= b.forward_partial(t) + 40);
        }
        let mut rng = <rand::rngs::ChaCha20Rng as rand::SeedableRng>::seed_from_u64(1);
        for _ in 0..100 {
            assert!(uniform_mask(10, &mut rng).magnitude().bits() <= 10);
            assert!(
                fate_mask(23, 1, &mut rng).magnitude()
                    <= &(num_bigint::BigUint::from(1024u32) << 23)
            );
        }
        assert_eq!(uniform_mask(0, &mut rng), BigInt::from(0));
    }
}
