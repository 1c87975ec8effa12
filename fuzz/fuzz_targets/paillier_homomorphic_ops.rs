//! fl-paillier homomorphic operations driven by arbitrary op sequences, checked against an
//! i128 model: every decryption equals the model, or the model overflowed i128 and the op
//! was skipped. Ops: encrypt, add, sub, add_plain, negate, mul_i64, mul_secret_i64, dot,
//! dot_secret, rerandomize, and the DJN / pool / key-owner encryption modes.
#![no_main]

use fl_paillier::{Ciphertext, DecryptionKey, DjnEncryptor, DjnPublic, RandomizerPool, keygen};
use libfuzzer_sys::fuzz_target;
use rand::{SeedableRng, rngs::ChaCha8Rng};
use std::sync::OnceLock;

struct Fixture {
    dk: DecryptionKey,
    djn: DjnEncryptor,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let dk = match keygen(512, &mut rng) {
            Ok(k) => k,
            Err(e) => panic!("fixture key: {e}"),
        };
        let public = DjnPublic::generate(dk.encryption_key(), &mut rng);
        let djn = match DjnEncryptor::new(dk.encryption_key(), &public, 256, 4) {
            Ok(d) => d,
            Err(e) => panic!("fixture djn: {e}"),
        };
        Fixture { dk, djn }
    })
}

fuzz_target!(|data: &[u8]| {
    let Fixture { dk, djn } = fixture();
    let ek = dk.encryption_key();
    let mut rng = ChaCha8Rng::seed_from_u64(data.len() as u64);
    let mut pool = RandomizerPool::new(ek);
    let mut stack: Vec<(Ciphertext, i128)> = Vec::new();
    for chunk in data.chunks_exact(9).take(24) {
        let op = chunk[0] % 13;
        let mut arg = [0u8; 8];
        arg.copy_from_slice(&chunk[1..9]);
        let k = i64::from_le_bytes(arg);
        let small = i64::from(k as i16);
        let pick = |i: usize, len: usize| if len == 0 { 0 } else { i % len };
        let len = stack.len();
        let i = pick(k as usize, len);
        let j = pick((k >> 16) as usize, len);
        let next: Option<(Ciphertext, i128)> = match op {
            0 => Some((ek.encrypt_i64(k, &mut rng).unwrap(), i128::from(k))),
            1 => Some((djn.encrypt_i64(k, &mut rng).unwrap(), i128::from(k))),
            2 => Some((
                dk.encrypt_crt(&ek.encode_i64(k).unwrap(), &mut rng)
                    .unwrap(),
                i128::from(k),
            )),
            3 => Some((
                pool.encrypt(&ek.encode_i64(k).unwrap(), &mut rng).unwrap(),
                i128::from(k),
            )),
            _ if len == 0 => None,
            4 => stack[i]
                .1
                .checked_add(stack[j].1)
                .map(|v| (ek.add(&stack[i].0, &stack[j].0).unwrap(), v)),
            5 => stack[i]
                .1
                .checked_sub(stack[j].1)
                .map(|v| (ek.sub(&stack[i].0, &stack[j].0).unwrap(), v)),
            6 => stack[i].1.checked_add(i128::from(k)).map(|v| {
                (
                    ek.add_plain(&stack[i].0, &ek.encode_i64(k).unwrap())
                        .unwrap(),
                    v,
                )
            }),
            7 => stack[i]
                .1
                .checked_neg()
                .map(|v| (ek.negate(&stack[i].0).unwrap(), v)),
            8 => stack[i]
                .1
                .checked_mul(i128::from(small))
                .map(|v| (ek.mul_i64(&stack[i].0, small).unwrap(), v)),
            9 => stack[i]
                .1
                .checked_mul(i128::from(small))
                .map(|v| (ek.mul_secret_i64(&stack[i].0, small).unwrap(), v)),
            10 => {
                let w = [small, -(k >> 48)];
                let v = stack[i].1.checked_mul(i128::from(w[0])).and_then(|a| {
                    stack[j]
                        .1
                        .checked_mul(i128::from(w[1]))
                        .and_then(|b| a.checked_add(b))
                });
                let cs = [stack[i].0.clone(), stack[j].0.clone()];
                v.map(|v| {
                    let c = if k & 1 == 0 {
                        ek.dot_i64(&cs, &w)
                    } else {
                        ek.dot_secret_i64(&cs, &w)
                    };
                    (c.unwrap(), v)
                })
            }
            11 => Some((ek.rerandomize(&stack[i].0, &mut rng).unwrap(), stack[i].1)),
            _ => Some((djn.rerandomize(&stack[i].0, &mut rng).unwrap(), stack[i].1)),
        };
        if let Some(entry) = next {
            stack.push(entry);
        }
    }
    for (c, v) in &stack {
        let got = ek.decode_i128(&dk.decrypt(c).unwrap()).unwrap();
        assert_eq!(got, *v);
    }
});
