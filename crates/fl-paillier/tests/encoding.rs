//! Fixed-point and python-paillier encodings, and packing: round trips and homomorphic
//! sums/products as property tests; overflow detection (threats.md P5).

mod common;

use common::{keys512, rng};
use fl_paillier::{
    BigInt, Error, FixedPointScale, PackingLayout, PheEncodedNumber, PheEncryptedNumber,
};
use proptest::prelude::*;

#[test]
fn fixed_point_rejects_non_finite_and_out_of_range() {
    for dk in keys512() {
        let ek = dk.encryption_key();
        let fp = FixedPointScale::new(16).unwrap();
        for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(matches!(fp.encode(ek, x), Err(Error::NonFinite { .. })));
        }
        assert!(matches!(
            fp.encode(ek, 1e300),
            Err(Error::PlaintextOutOfRange { .. })
        ));
        assert!(FixedPointScale::new(1001).is_err());
        assert_eq!(fp.product(&fp).unwrap().frac_bits(), 32);
        assert!(
            FixedPointScale::new(600)
                .unwrap()
                .product(&FixedPointScale::new(600).unwrap())
                .is_err()
        );
        assert_eq!(fp.to_i64(1e300), Err(Error::Overflow));
    }
}

#[test]
fn fixed_point_product_has_the_product_scale() {
    for dk in keys512() {
        let ek = dk.encryption_key();
        let f = FixedPointScale::new(20).unwrap();
        let x = 3.25f64;
        let w = -0.5f64;
        let c = ek.encrypt(&f.encode(ek, x).unwrap(), &mut rng(30)).unwrap();
        let prod = ek.mul_i64(&c, f.to_i64(w).unwrap()).unwrap();
        let out = f
            .product(&f)
            .unwrap()
            .decode(ek, &dk.decrypt(&prod).unwrap())
            .unwrap();
        assert_eq!(out, x * w);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn fixed_point_round_trip(x in -1e9f64..1e9, f in 0u32..40) {
        for dk in keys512() {
        let ek = dk.encryption_key();
        let fp = FixedPointScale::new(f).unwrap();
        let m = fp.encode(ek, x).unwrap();
        let back = fp.decode(ek, &m).unwrap();
        let want = (x * 2f64.powi(f as i32)).round_ties_even() / 2f64.powi(f as i32);
        prop_assert_eq!(back, want);
        prop_assert!((back - x).abs() <= 0.5 / 2f64.powi(f as i32) + x.abs() * f64::EPSILON);
        }
    }

    #[test]
    fn fixed_point_homomorphic_sum_and_scalar(xs in proptest::collection::vec(-1e6f64..1e6, 1..6), k in -1000i64..1000, seed in any::<u64>()) {
        for dk in keys512() {
        let ek = dk.encryption_key();
        let fp = FixedPointScale::new(24).unwrap();
        let cs = fp.encrypt_slice(ek, &xs, &mut rng(seed)).unwrap();
        let mut acc = cs[0].clone();
        for c in &cs[1..] { acc = ek.add(&acc, c).unwrap(); }
        let ints: i128 = xs.iter().map(|&x| i128::from(fp.to_i64(x).unwrap())).sum();
        let got = fp.decode(ek, &dk.decrypt(&acc).unwrap()).unwrap();
        prop_assert_eq!(got, fp.from_integer(&BigInt::from(ints)).unwrap());
        let scaled = ek.mul_i64(&acc, k).unwrap();
        let got = fp.decode(ek, &dk.decrypt(&scaled).unwrap()).unwrap();
        prop_assert_eq!(got, fp.from_integer(&BigInt::from(ints * i128::from(k))).unwrap());
        prop_assert_eq!(fp.decrypt_slice(dk, &cs).unwrap().len(), xs.len());
        }
    }

    #[test]
    fn sums_are_exact_or_overflow_never_wrong(a in any::<[u8; 63]>(), b in any::<[u8; 63]>(), na in any::<bool>(), nb in any::<bool>(), seed in any::<u64>()) {
        // threats.md P5: two in-range values; the sum decodes exactly or is Overflow.
        for dk in keys512() {
        let ek = dk.encryption_key();
        let max = BigInt::from(ek.max_int().clone());
        let v = |bytes: &[u8], neg: bool| {
            let m: BigInt = BigInt::from_bytes_be(num_bigint::Sign::Plus, bytes) % (&max + BigInt::from(1));
            if neg { -m } else { m }
        };
        let (x, y) = (v(&a, na), v(&b, nb));
        let mut r = rng(seed);
        let s = ek.add(&ek.encrypt_signed(&x, &mut r).unwrap(), &ek.encrypt_signed(&y, &mut r).unwrap()).unwrap();
        let want = &x + &y;
        match ek.decode_signed(&dk.decrypt(&s).unwrap()) {
            Ok(got) => prop_assert_eq!(got, want),
            Err(e) => {
                prop_assert_eq!(e, Error::Overflow);
                prop_assert!(want.magnitude() > ek.max_int());
            }
        }
        }
    }

    #[test]
    fn long_i64_sums_are_exact(xs in proptest::collection::vec(any::<i64>(), 1..1000), seed in any::<u64>()) {
        for dk in keys512() {
        let ek = dk.encryption_key();
        let mut r = rng(seed);
        let c0 = ek.encrypt_i64(xs[0], &mut r).unwrap();
        let mut acc = c0;
        for &x in &xs[1..] {
            acc = ek.add_plain(&acc, &ek.encode_i64(x).unwrap()).unwrap();
        }
        let want: i128 = xs.iter().map(|&x| i128::from(x)).sum();
        prop_assert_eq!(ek.decode_i128(&dk.decrypt(&acc).unwrap()).unwrap(), want);
        }
    }

    #[test]
    fn phe_encoding_round_trips(x in prop_oneof![any::<f64>(), -1e6f64..1e6, -1e-6f64..1e-6]) {
        prop_assume!(x.is_finite());
        for dk in keys512() {
        let ek = dk.encryption_key();
        // max_int of a 512-bit key is ~2^510; floats up to ~2^290 fit phe's encoding.
        prop_assume!(x.abs() < 1e80);
        let e = PheEncodedNumber::encode_f64(ek, x, None, None).unwrap();
        prop_assert_eq!(e.decode_f64(ek).unwrap(), x);
        let lower = e.decrease_exponent_to(ek, e.exponent - 3).unwrap();
        prop_assert_eq!(lower.decode_f64(ek).unwrap(), x);
        }
    }

    #[test]
    fn phe_encrypted_arithmetic(a in -1e6f64..1e6, b in -1e3f64..1e3, seed in any::<u64>()) {
        for dk in keys512() {
        let ek = dk.encryption_key();
        let mut r = rng(seed);
        let ca = PheEncryptedNumber::encrypt_f64(ek, a, &mut r).unwrap();
        let cb = PheEncryptedNumber::encrypt_f64(ek, b, &mut r).unwrap();
        prop_assert_eq!(ca.decrypt_f64(dk).unwrap(), a);
        let s = ca.add(ek, &cb).unwrap().decrypt_f64(dk).unwrap();
        prop_assert!((s - (a + b)).abs() <= 1e-9 * (a.abs() + b.abs() + 1.0));
        let s2 = ca.add_f64(ek, b).unwrap().decrypt_f64(dk).unwrap();
        prop_assert!((s2 - (a + b)).abs() <= 1e-9 * (a.abs() + b.abs() + 1.0));
        let p = ca.mul_f64(ek, b).unwrap().decrypt_f64(dk).unwrap();
        prop_assert!((p - a * b).abs() <= 1e-9 * (a * b).abs() + 1e-12);
        }
    }

    #[test]
    fn packing_round_trips_and_adds(vals in proptest::collection::vec(-(1i64 << 30)..(1i64 << 30), 1..12), other in proptest::collection::vec(-(1i64 << 30)..(1i64 << 30), 12), k in -100i64..100, seed in any::<u64>()) {
        for dk in keys512() {
        let ek = dk.encryption_key();
        let layout = PackingLayout::new(ek, 40, 12).unwrap();
        let mut r = rng(seed);
        let a = layout.encrypt(ek, &vals, &mut r).unwrap();
        let b = layout.encrypt(ek, &other[..vals.len()], &mut r).unwrap();
        let want: Vec<i128> = vals.iter().map(|&v| i128::from(v)).collect();
        prop_assert_eq!(a.decrypt(dk).unwrap(), want);
        let s = a.add(ek, &b).unwrap();
        let want: Vec<i128> = vals.iter().zip(&other).map(|(&x, &y)| i128::from(x) + i128::from(y)).collect();
        prop_assert_eq!(&s.decrypt(dk).unwrap(), &want);
        let p = s.mul_i64(ek, k).unwrap();
        prop_assert_eq!(p.decrypt(dk).unwrap(), want.iter().map(|v| v * i128::from(k)).collect::<Vec<_>>());
        let p2 = s.mul_secret_i64(ek, k, 100).unwrap();
        prop_assert_eq!(p2.decrypt(dk).unwrap(), p.decrypt(dk).unwrap());
        }
    }
}

#[test]
fn packing_capacity_is_checked() {
    for dk in keys512() {
        let ek = dk.encryption_key();
        let max = PackingLayout::max_slots(ek, 32);
        assert!(max >= 14);
        assert!(PackingLayout::new(ek, 32, max).is_ok());
        assert!(matches!(
            PackingLayout::new(ek, 32, max + 1),
            Err(Error::Packing { .. })
        ));
        assert!(PackingLayout::new(ek, 1, 4).is_err());
        assert!(PackingLayout::new(ek, 128, 1).is_err());
        assert!(PackingLayout::new(ek, 32, 0).is_err());
        let layout = PackingLayout::new(ek, 8, 4).unwrap();
        assert_eq!(layout.slot_limit(), 127);
        let mut r = rng(31);
        assert!(matches!(
            layout.encrypt(ek, &[128], &mut r),
            Err(Error::Packing { .. })
        ));
        assert!(matches!(
            layout.encrypt(ek, &[1, 2, 3, 4, 5], &mut r),
            Err(Error::Packing { .. })
        ));
        let a = layout.encrypt(ek, &[100, -100, 5, 0], &mut r).unwrap();
        assert_eq!(a.bound(), 100);
        assert_eq!(a.additions_left(10), 2);
        // 100 + 100 ≥ 128: refused before anything is computed.
        assert!(matches!(a.add(ek, &a), Err(Error::Packing { .. })));
        assert!(matches!(a.mul_i64(ek, 2), Err(Error::Packing { .. })));
        assert!(matches!(
            a.mul_secret_i64(ek, 1, 2),
            Err(Error::Packing { .. })
        ));
        let small = layout.encrypt(ek, &[10, -10, 1, -1], &mut r).unwrap();
        let s = a.add(ek, &small).unwrap();
        assert_eq!(s.decrypt(dk).unwrap(), vec![110, -110, 6, -1]);
        // A foreign layout is refused.
        let other = PackingLayout::new(ek, 9, 4)
            .unwrap()
            .encrypt(ek, &[1], &mut r)
            .unwrap();
        assert!(matches!(a.add(ek, &other), Err(Error::Packing { .. })));
        // A spilled plaintext does not decode silently.
        let spilled = ek.encode_i64(1 << 40).unwrap();
        assert_eq!(layout.unpack(ek, &spilled, 4), Err(Error::Overflow));
    }
}

#[test]
fn packed_fixed_point_vectors() {
    for dk in keys512() {
        let ek = dk.encryption_key();
        let fp = FixedPointScale::new(16).unwrap();
        let layout = PackingLayout::new(ek, 48, 8).unwrap();
        let xs = [0.5, -1.25, 3.0, 1e-3, -7.75];
        let c = layout.encrypt_f64(ek, &fp, &xs, &mut rng(32)).unwrap();
        let back = c.decrypt_f64(dk, &fp).unwrap();
        for (b, x) in back.iter().zip(xs) {
            assert!((b - x).abs() <= 0.5 / 65536.0);
        }
        let ints: Vec<i64> = (0..20).collect();
        let v = layout.encrypt_vec(ek, &ints, &mut rng(33)).unwrap();
        assert_eq!(v.len(), 3);
        let all: Vec<i128> = v.iter().flat_map(|p| p.decrypt(dk).unwrap()).collect();
        assert_eq!(all, (0..20).map(i128::from).collect::<Vec<_>>());
    }
}

#[test]
fn extreme_phe_exponents_are_errors_not_panics() {
    // Found by fuzzing (paillier_encoding_decode): |i32::MIN| overflowed in the exponent
    // bound check.
    for dk in keys512() {
        let ek = dk.encryption_key();
        for exponent in [i32::MIN, i32::MIN + 1, -10_001, 10_001, i32::MAX] {
            let e = PheEncodedNumber {
                encoding: fl_paillier::BigUint::from(5u8),
                exponent,
            };
            assert!(e.decode_f64(ek).is_err());
            assert!(
                e.decrease_exponent_to(ek, exponent.saturating_sub(1))
                    .is_err()
            );
            let c = PheEncryptedNumber {
                ciphertext: ek.encrypt_i64(5, &mut rng(34)).unwrap(),
                exponent,
            };
            assert!(
                c.decrease_exponent_to(ek, exponent.saturating_sub(1))
                    .is_err()
            );
            assert!(fl_paillier::phe::decrypt_to_pheutil_output(dk, &c).is_err());
        }
    }
}

proptest! {
    /// Wide slots (beyond PackingLayout's 127 bits) with big signed values round-trip, and
    /// slotwise sums decode slotwise.
    #[test]
    fn wide_signed_slots_round_trip_and_add(
        a in proptest::collection::vec(any::<i64>(), 1..6),
        b in proptest::collection::vec(any::<i64>(), 1..6),
        shift in 0u32..100,
    ) {
        let w = 64 + shift + 3; // room for a sum of two values of 63 + shift bits
        let scale = BigInt::from(1u8) << shift;
        let len = a.len().min(b.len());
        let va: Vec<BigInt> = a[..len].iter().map(|&x| x * &scale).collect();
        let vb: Vec<BigInt> = b[..len].iter().map(|&x| x * &scale).collect();
        let pa = fl_paillier::pack_signed_slots(&va, w).unwrap();
        let pb = fl_paillier::pack_signed_slots(&vb, w).unwrap();
        let sum: Vec<BigInt> = va.iter().zip(&vb).map(|(x, y)| x + y).collect();
        prop_assert_eq!(fl_paillier::unpack_signed_slots(&pa, w, len).unwrap(), va);
        prop_assert_eq!(fl_paillier::unpack_signed_slots(&(pa + pb), w, len).unwrap(), sum);
    }
}

#[test]
fn wide_slot_errors() {
    use fl_paillier::{pack_signed_slots, unpack_signed_slots};
    // |v| must be below 2^(w-1); w ≥ 2.
    assert!(pack_signed_slots(&[BigInt::from(127)], 8).is_ok());
    assert!(matches!(
        pack_signed_slots(&[BigInt::from(-128)], 8),
        Err(Error::Packing { .. })
    ));
    assert!(matches!(
        pack_signed_slots(&[BigInt::from(0)], 1),
        Err(Error::Packing { .. })
    ));
    assert!(matches!(
        unpack_signed_slots(&BigInt::from(0), 1, 1),
        Err(Error::Packing { .. })
    ));
    // Something left above the requested slots is an overflow, not silently dropped.
    let p = pack_signed_slots(&[BigInt::from(1), BigInt::from(2)], 8).unwrap();
    assert_eq!(unpack_signed_slots(&p, 8, 1), Err(Error::Overflow));
    assert_eq!(
        unpack_signed_slots(&p, 8, 2).unwrap(),
        vec![BigInt::from(1), BigInt::from(2)]
    );
    // Empty: packs to 0.
    assert_eq!(pack_signed_slots(&[], 8).unwrap(), BigInt::from(0));
    // Layouts wider than any key are refused before allocating or looping.
    let max = fl_paillier::MAX_KEY_BITS;
    assert!(unpack_signed_slots(&BigInt::from(0), max / 8, 8).is_ok());
    for (bits, count) in [(u32::MAX, 1), (8, usize::MAX), (max / 8, 9)] {
        assert!(matches!(
            unpack_signed_slots(&BigInt::from(0), bits, count),
            Err(Error::Packing { .. })
        ));
    }
    assert!(matches!(
        pack_signed_slots(&[BigInt::from(0)], u32::MAX),
        Err(Error::Packing { .. })
    ));
}
