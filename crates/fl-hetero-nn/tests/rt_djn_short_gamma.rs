//! Regression for a red-team probe (branch `rt-paillier`): a DJN re-randomisation's
//! own-base term h_g^γ, with γ of only 2κ bits, does not protect against a key owner who
//! chose p with p − 1 = 2·r·S, S smooth (a key that passes every public check), and
//! publishes an order-r base h_s (which `DjnPublic::from_hs` accepts).
//!
//! In the order-S subgroup of Z*_p (reached by raising to 2r) the host's base vanishes and
//! discrete logarithms are easy (Pohlig–Hellman), so a guest output c' = c^k·h_s^β·h_g^γ
//! gives D = dlog(c'^{2r}) = k·dlog(c^{2r}) + γ·b (mod S) with b = dlog(h_g^{2r}) unknown
//! but fixed per session, and γ < 2^224 where S has ≈ 490 bits. Two outputs for inputs
//! encrypted with the published base (dlog 0) give γ₁/γ₂ by rational reconstruction, hence
//! b; then one input with a randomizer of the host's choice (dlog 1) gives
//! D = 2r·k + γ·b, a 2-dimensional closest-vector problem with the unique short solution
//! (k, γ): the guest's secret scalar, exactly. The short-exponent assumption does not hold
//! against the party that chose the group order.
//!
//! The fix: fl-hetero-nn's guest re-randomises every ciphertext it returns with
//! `HomomorphicScheme::rerandomize_pooled` — a pooled textbook sⁿ, s uniform in Z*_n —
//! whose logarithm in the order-S subgroup is uniform and independent of k, so D is
//! uniform mod S and the CVP output equals k only by chance (probability ≤ 2^−39 per trial
//! for |k| < 2^39). The test runs the same attack (fixed seeds) against that re-randomiser
//! (it must recover 0 of 6 scalars; a false failure has probability < 6·2^−39) and against
//! the control, the old DJN re-randomisation on the host's base with a 420-bit β times the
//! guest's own base with a 224-bit γ, computed in the test (it must recover 6 of 6).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fl_hetero_nn::Paillier;
use fl_hetero_nn::scheme::HomomorphicScheme;
use fl_paillier::{
    BigUint, Ciphertext, DecryptionKey, DjnEncryptor, DjnPublic, EncryptionKey, RandomizerPool,
};
use num_bigint::{BigInt, Sign};
use num_integer::Integer;
use num_traits::{One, Signed, Zero};
use rand::rngs::ChaCha20Rng;
use rand::{RngExt, SeedableRng};

/// p = 2·R·S + 1 with S the product of `FACTORS` (generated offline: random 16-bit primes,
/// a last factor chosen so that p has 512 bits, Miller–Rabin); q a random 512-bit prime.
const P_HEX: &str = "946cba7708c5462011c1879eea8ab0f950ddb4b2b7e035c00f66b75c63eb3bd1a2f43e6fff59d0e8150305d0cdf8f75e8358d5a87234a8390d0907bdff69df67";
const Q_HEX: &str = "a9e5b6fdbb3d50e32045ea1552f3289afbe2437a65a8fb92e6e2eff2ea58d0d082332de48d1438d8032c53895e6a8e14f3a45fbecbe890633c64f5566e455a35";
const R: u64 = 524_309;
const FACTORS: [u64; 32] = [
    167, 34303, 34457, 36749, 37483, 37663, 40927, 41017, 41887, 42391, 44753, 46489, 50131, 51229,
    51421, 51613, 51871, 53201, 53309, 53507, 54493, 56597, 56921, 57251, 57601, 58549, 60127,
    62903, 63247, 63761, 64303, 65449,
];

fn big(x: u64) -> BigUint {
    BigUint::from(x)
}

fn modinv(a: &BigUint, m: &BigUint) -> Option<BigUint> {
    let e = BigInt::from(a.clone()).extended_gcd(&BigInt::from(m.clone()));
    if !e.gcd.is_one() {
        return None;
    }
    let m_i = BigInt::from(m.clone());
    Some(((e.x % &m_i + &m_i) % &m_i).to_biguint().unwrap())
}

/// The order-S subgroup of Z*_p with a generator and Pohlig–Hellman logarithms.
struct Smooth {
    p: BigUint,
    s: BigUint,
    g: BigUint,
}

impl Smooth {
    fn new(p: &BigUint) -> Self {
        let s: BigUint = FACTORS.iter().map(|&f| big(f)).product();
        assert_eq!(p - 1u8, &s * (2 * R), "p − 1 = 2·R·S");
        let g = (3u32..)
            .map(|a| big(u64::from(a)).modpow(&big(2 * R), p))
            .find(|g| FACTORS.iter().all(|&f| !g.modpow(&(&s / f), p).is_one()))
            .unwrap();
        Self { p: p.clone(), s, g }
    }

    /// The projection y^(2R) into the order-S subgroup.
    fn project(&self, y: &BigUint) -> BigUint {
        (y % &self.p).modpow(&big(2 * R), &self.p)
    }

    /// log_g(y) mod S for y in the subgroup.
    fn dlog(&self, y: &BigUint) -> BigUint {
        let mut x = BigUint::zero();
        let mut modulus = BigUint::one();
        for &f in &FACTORS {
            let e = &self.s / f;
            let gf = self.g.modpow(&e, &self.p);
            let yf = y.modpow(&e, &self.p);
            let m = (f as f64).sqrt() as u64 + 1;
            let mut baby = std::collections::HashMap::new();
            let mut cur = BigUint::one();
            for j in 0..m {
                baby.insert(cur.clone(), j);
                cur = (cur * &gf) % &self.p;
            }
            let giant = modinv(&cur, &self.p).unwrap(); // gf^(−m)
            let mut t = yf;
            let mut xf = None;
            for i in 0..=m {
                if let Some(&j) = baby.get(&t) {
                    xf = Some((i * m + j) % f);
                    break;
                }
                t = (t * &giant) % &self.p;
            }
            let xf = big(xf.expect("a logarithm mod f"));
            // CRT: x ≡ current mod `modulus`, x ≡ xf mod f.
            let fb = big(f);
            let inv = modinv(&(&modulus % &fb), &fb).unwrap();
            let delta = ((&xf + &fb - (&x % &fb)) % &fb * inv) % &fb;
            x += &modulus * delta;
            modulus *= fb;
        }
        x
    }

    fn log_of(&self, c: &BigUint) -> BigUint {
        self.dlog(&self.project(c))
    }
}

/// (num, den) with num ≡ den·t (mod m), |num|, den < 2^bound (Euclid), if any.
fn rational_reconstruction(t: &BigUint, m: &BigUint, bound: u64) -> Option<(BigInt, BigInt)> {
    let (mut r0, mut r1) = (BigInt::from(m.clone()), BigInt::from(t.clone()));
    let (mut t0, mut t1) = (BigInt::zero(), BigInt::one());
    let lim = BigInt::one() << bound;
    while r1 >= lim {
        let qt = &r0 / &r1;
        let r2 = &r0 - &qt * &r1;
        let t2 = &t0 - &qt * &t1;
        (r0, r1, t0, t1) = (r1, r2, t1, t2);
    }
    (t1.abs() < lim).then_some((r1, t1))
}

/// The short (k, γ) with k·y + γ ≡ x (mod m), |k| < 2^40, 0 ≤ γ < 2^225: Babai rounding on
/// the Lagrange-reduced basis of {(k·W, k·y − j·m)} with weight W = 2^185.
fn short_solution(x: &BigUint, y: &BigUint, m: &BigUint) -> (BigInt, BigInt) {
    let w = BigInt::one() << 185u32;
    let (m, x, y) = (
        BigInt::from(m.clone()),
        BigInt::from(x.clone()),
        BigInt::from(y.clone()),
    );
    // Lattice vectors (a·W, a·y + b·m); basis rows in (k, j) coordinates.
    let vec_of = |k: &BigInt, j: &BigInt| (k * &w, k * &y + j * &m);
    let norm = |v: &(BigInt, BigInt)| &v.0 * &v.0 + &v.1 * &v.1;
    let dot = |a: &(BigInt, BigInt), b: &(BigInt, BigInt)| &a.0 * &b.0 + &a.1 * &b.1;
    let mut b1 = (BigInt::one(), BigInt::zero());
    let mut b2 = (BigInt::zero(), BigInt::one());
    loop {
        let (v1, v2) = (vec_of(&b1.0, &b1.1), vec_of(&b2.0, &b2.1));
        if norm(&v1) > norm(&v2) {
            core::mem::swap(&mut b1, &mut b2);
            continue;
        }
        let mu = round_div(&dot(&v1, &v2), &norm(&v1));
        if mu.is_zero() {
            break;
        }
        b2 = (&b2.0 - &mu * &b1.0, &b2.1 - &mu * &b1.1);
    }
    // Target (0, x): coordinates c = t·B⁻¹, rounded.
    let (v1, v2) = (vec_of(&b1.0, &b1.1), vec_of(&b2.0, &b2.1));
    let det = &v1.0 * &v2.1 - &v1.1 * &v2.0;
    let t = (BigInt::zero(), x);
    let c1 = round_div(&(&t.0 * &v2.1 - &t.1 * &v2.0), &det);
    let c2 = round_div(&(&t.1 * &v1.0 - &t.0 * &v1.1), &det);
    let k = &c1 * &b1.0 + &c2 * &b2.0;
    let j = &c1 * &b1.1 + &c2 * &b2.1;
    // γ = x − (k·y + j·m)
    let gamma = &t.1 - (&k * &y + &j * &m);
    (k, gamma)
}

fn round_div(a: &BigInt, b: &BigInt) -> BigInt {
    let (a, b) = if b.sign() == Sign::Minus {
        (-a, -b)
    } else {
        (a.clone(), b.clone())
    };
    let num: BigInt = &a * 2 + &b;
    let den: BigInt = &b * 2;
    num.div_floor(&den)
}

/// n-th residue U mod n² with U ≡ t (mod p) and U ≡ 1 (mod q): u ≡ t^(n⁻¹ mod (p−1)) mod p.
fn chosen_randomizer(t: &BigUint, p: &BigUint, q: &BigUint) -> BigUint {
    let n = p * q;
    let n2 = &n * &n;
    let e = modinv(&(&n % (p - 1u8)), &(p - 1u8)).unwrap();
    let up = t.modpow(&e, p);
    let d = ((BigUint::one() + q) - (&up % q)) % q;
    let u = &up + p * ((d * modinv(&(p % q), q).unwrap()) % q);
    u.modpow(&n, &n2)
}

/// The hostile order-R base (as tests/djn_hostile_host.rs builds it).
fn hostile_base(p: &BigUint, q: &BigUint) -> BigUint {
    let n = p * q;
    let n2 = &n * &n;
    let y_p = (2u32..)
        .map(|g| big(u64::from(g)).modpow(&((p - 1u8) / R), p))
        .find(|y| !y.is_one())
        .unwrap();
    let y_q = big(0x1234_5678_9abc_def1) % q;
    let d = ((&y_q + q) - (&y_p % q)) % q;
    let y = &y_p + p * ((d * modinv(&(p % q), q).unwrap()) % q);
    y.modpow(&n, &n2)
}

enum Guest {
    /// The control: the old DJN re-randomisation (host base, then the guest's own base).
    OldDjn {
        host: DjnEncryptor,
        own: DjnEncryptor,
    },
    /// fl-hetero-nn's guest: a pooled textbook sⁿ per returned ciphertext.
    Fixed(RandomizerPool),
}

impl Guest {
    fn rerandomize(
        &mut self,
        _ek: &EncryptionKey,
        c: &Ciphertext,
        rng: &mut ChaCha20Rng,
    ) -> Ciphertext {
        match self {
            Self::OldDjn { host, own } => own
                .rerandomize(&host.rerandomize(c, rng).unwrap(), rng)
                .unwrap(),
            Self::Fixed(pool) => <Paillier as HomomorphicScheme>::rerandomize_pooled(
                pool,
                std::slice::from_ref(c),
                rng,
            )
            .unwrap()
            .remove(0),
        }
    }
}

/// Runs the attack against `guest`; returns how many of `trials` secret scalars it
/// recovered exactly.
fn attack(
    guest: &mut Guest,
    dk: &DecryptionKey,
    p: &BigUint,
    q: &BigUint,
    hs_fb: &DjnEncryptor,
    rng: &mut ChaCha20Rng,
) -> usize {
    let ek = dk.encryption_key();
    let sm = Smooth::new(p);
    let n = ek.n().clone();
    let n2 = &n * &n;
    // Calibration: three inputs encrypted with the published base (honest-looking), scaled
    // by secret scalars and re-randomised by the guest.
    let outs: Vec<BigUint> = (0..3)
        .map(|i| {
            let c = hs_fb.encrypt_i64(100 + i, rng).unwrap();
            let k: i64 = rng.random_range(-(1 << 30)..(1 << 30));
            guest
                .rerandomize(ek, &ek.mul_secret_i64(&c, k).unwrap(), rng)
                .to_biguint()
        })
        .collect();
    let d: Vec<BigUint> = outs.iter().map(|o| sm.log_of(o)).collect();
    let Some(inv0) = modinv(&d[0], &sm.s) else {
        return 0;
    };
    let t = (&d[1] * inv0) % &sm.s;
    let Some((num, den)) = rational_reconstruction(&t, &sm.s, 230) else {
        return 0;
    };
    // γ₁/γ₀ = num/den up to a common factor g; find b with every γ small.
    let mut b = None;
    for g in 1u64..4096 {
        let g0 = (den.clone() * g)
            .mod_floor(&BigInt::from(sm.s.clone()))
            .to_biguint()
            .unwrap();
        let Some(ginv) = modinv(&g0, &sm.s) else {
            continue;
        };
        let cand = (&d[0] * ginv) % &sm.s; // b = D₀/γ₀
        let Some(binv) = modinv(&cand, &sm.s) else {
            continue;
        };
        let ok = d.iter().all(|di| {
            let gi = (di * &binv) % &sm.s;
            gi.bits() <= 226 || (&sm.s - gi).bits() <= 226
        });
        if ok {
            b = Some(cand);
            break;
        }
    }
    let _ = num;
    let Some(b) = b else { return 0 };
    let binv = modinv(&b, &sm.s).unwrap();
    // The attack: one input whose randomizer has logarithm 1 in the order-S subgroup.
    let mut exact = 0;
    let trials = 6;
    for _ in 0..trials {
        let k: i64 = rng.random_range(-(1i64 << 39)..(1i64 << 39));
        let u = chosen_randomizer(&sm.g, p, q);
        let c = (((BigUint::from(777u32) * &n) + 1u8) * u) % &n2;
        let c = ek.ciphertext_from_biguint(&c).unwrap();
        assert_eq!(
            dk.decrypt_i64(&c).unwrap(),
            777,
            "the chosen-randomizer input decrypts"
        );
        let out = guest.rerandomize(ek, &ek.mul_secret_i64(&c, k).unwrap(), rng);
        // D = 2R·k + γ·b (mod S): γ = D·b⁻¹ − k·(2R·b⁻¹).
        let dd = sm.log_of(&out.to_biguint());
        let x = (&dd * &binv) % &sm.s;
        let y = (big(2 * R) * &binv) % &sm.s;
        let (k_rec, gamma) = short_solution(&x, &y, &sm.s);
        if k_rec == BigInt::from(k) && gamma.bits() <= 225 {
            exact += 1;
        }
    }
    exact
}

#[test]
fn a_smooth_key_owner_recovers_the_scalar_through_djn_but_not_through_the_guests_rerandomiser() {
    let p = BigUint::parse_bytes(P_HEX.as_bytes(), 16).unwrap();
    let q = BigUint::parse_bytes(Q_HEX.as_bytes(), 16).unwrap();
    let dk = DecryptionKey::from_primes(&p, &q).expect("the smooth key passes from_primes");
    let ek = dk.encryption_key().clone();
    EncryptionKey::from_n(ek.n()).expect("and public-key validation");
    let hs = hostile_base(&p, &q);
    let public = DjnPublic::from_hs(&ek, &hs).expect("the order-R base passes from_hs");
    let hs_fb = DjnEncryptor::with_defaults(&ek, &public).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(5);

    // Control: the old guest, the host's base with a long β (≥ 2κ + bounds + κ_stat; 420
    // bits here), times its own base h_g with γ of the default 2κ bits.
    let mut old = Guest::OldDjn {
        host: DjnEncryptor::new(&ek, &public, 420, 6).unwrap(),
        own: DjnEncryptor::with_defaults(&ek, &DjnPublic::generate(&ek, &mut rng)).unwrap(),
    };
    let control = attack(&mut old, &dk, &p, &q, &hs_fb, &mut rng);
    // The fixed guest's re-randomiser, with a pool precomputed ahead (as the guest does)
    // and topped up on demand.
    let mut pool = <Paillier as HomomorphicScheme>::randomizer_pool_new(&ek);
    <Paillier as HomomorphicScheme>::randomizer_pool_fill(&mut pool, 4, &mut rng);
    let fixed = attack(&mut Guest::Fixed(pool), &dk, &p, &q, &hs_fb, &mut rng);
    eprintln!(
        "secret scalar recovered exactly: old DJN control {control}/6, fixed guest {fixed}/6"
    );
    assert_eq!(
        control, 6,
        "control: the attack must work on DJN re-randomisation"
    );
    assert_eq!(
        fixed, 0,
        "the fixed guest's re-randomisation leaks its scalar"
    );
}
