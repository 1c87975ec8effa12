//! Ciphertext matrices: encryption, decryption, (de)serialisation with validation, and the
//! three homomorphic matrix products of the protocol, parallel over output entries.

use num_bigint::BigInt;
use rand::{CryptoRng, SeedableRng, rngs::ChaCha20Rng};
use zeroize::{Zeroize, Zeroizing};

use crate::error::{ApiMisuse, Error, PeerMisbehaved, SchemeError};
use crate::matrix::Matrix;
use crate::message::CiphertextMatrix;
use crate::packing::{Axis, Layout};
use crate::scheme::HomomorphicScheme;

/// A matrix of ciphertexts holding a logical `rows × cols` integer matrix in `layout`.
pub(crate) struct CtMatrix<S: HomomorphicScheme> {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) layout: Layout,
    pub(crate) cts: Matrix<S::Ciphertext>,
}

impl<S: HomomorphicScheme> Clone for CtMatrix<S> {
    fn clone(&self) -> Self {
        Self {
            rows: self.rows,
            cols: self.cols,
            layout: self.layout,
            cts: self.cts.clone(),
        }
    }
}

/// Items per independently seeded RNG in parallel randomised operations; fixed so that a
/// run is reproducible whatever the number of threads.
const RNG_CHUNK: usize = 8;

/// Maps `f` over `0..count`, in parallel when the `parallel` feature is on.
fn par_map<T: Send>(
    count: usize,
    f: impl Fn(usize) -> Result<T, Error> + Sync + Send,
) -> Result<Vec<T>, Error> {
    #[cfg(feature = "parallel")]
    {
        use rayon::prelude::*;
        (0..count).into_par_iter().map(f).collect()
    }
    #[cfg(not(feature = "parallel"))]
    {
        (0..count).map(f).collect()
    }
}

/// Maps a randomised `f` over `0..count`; each chunk of [`RNG_CHUNK`] items gets its own
/// ChaCha20 generator seeded from `rng`. The seeds determine every mask and nonce drawn from
/// them, so they are wiped once the map is done (on the error path too).
fn par_map_rng<T: Send, R: CryptoRng + ?Sized>(
    count: usize,
    rng: &mut R,
    f: impl Fn(usize, &mut ChaCha20Rng) -> Result<T, Error> + Sync + Send,
) -> Result<Vec<T>, Error> {
    let chunks = count.div_ceil(RNG_CHUNK);
    let mut seeds: Zeroizing<Vec<[u8; 32]>> = Zeroizing::new(Vec::with_capacity(chunks));
    for _ in 0..chunks {
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        seeds.push(seed);
        seed.zeroize();
    }
    let per_chunk = par_map(chunks, |c| {
        let mut r = ChaCha20Rng::from_seed(seeds[c]);
        let end = ((c + 1) * RNG_CHUNK).min(count);
        (c * RNG_CHUNK..end)
            .map(|i| f(i, &mut r))
            .collect::<Result<Vec<T>, Error>>()
    })?;
    Ok(per_chunk.into_iter().flatten().collect())
}

fn scheme_err(e: SchemeError) -> Error {
    Error::Scheme(e)
}

/// Where the host's ciphertexts get their randomness ([`crate::Encryption`]).
pub(crate) enum Encryptor<'a, S: HomomorphicScheme> {
    /// Textbook rⁿ with the public key.
    Public(&'a S::EncryptionKey),
    /// The key owner's CRT encryption.
    Owner(&'a S::DecryptionKey),
    /// DJN fixed-base h_s^α.
    FixedBase(&'a S::FixedBase),
}

impl<S: HomomorphicScheme> Encryptor<'_, S> {
    fn encrypt<R: CryptoRng + ?Sized>(
        &self,
        m: &BigInt,
        rng: &mut R,
    ) -> Result<S::Ciphertext, SchemeError> {
        match self {
            Self::Public(ek) => S::encrypt(ek, m, rng),
            Self::Owner(dk) => S::encrypt_as_owner(dk, m, rng),
            Self::FixedBase(fb) => S::fixed_base_encrypt(fb, m, rng),
        }
    }
}

impl<S: HomomorphicScheme> CtMatrix<S> {
    /// Packs and encrypts a logical matrix.
    pub(crate) fn encrypt<R: CryptoRng + ?Sized>(
        encryptor: &Encryptor<'_, S>,
        x: &Matrix<BigInt>,
        layout: Layout,
        rng: &mut R,
    ) -> Result<Self, Error> {
        let packed = layout.pack(x)?;
        let (pr, pc) = packed.shape();
        let v = par_map_rng(pr * pc, rng, |i, r| {
            encryptor
                .encrypt(&packed.as_slice()[i], r)
                .map_err(scheme_err)
        })?;
        Ok(Self {
            rows: x.rows(),
            cols: x.cols(),
            layout,
            cts: Matrix::from_vec(pr, pc, v)?,
        })
    }

    /// Decrypts and unpacks, checking every value against `bound_bits`.
    pub(crate) fn decrypt(
        &self,
        dk: &S::DecryptionKey,
        bound_bits: u32,
        what: &'static str,
    ) -> Result<Matrix<BigInt>, Error> {
        let (pr, pc) = self.cts.shape();
        let v = S::decrypt_many(dk, self.cts.as_slice())
            .into_iter()
            .map(|r| r.map_err(|_| Error::PeerMisbehaved(PeerMisbehaved::ValueOutOfRange { what })))
            .collect::<Result<Vec<_>, Error>>()?;
        let packed = Matrix::from_vec(pr, pc, v)?;
        self.layout
            .unpack(&packed, self.rows, self.cols, bound_bits, what)
    }

    /// Serialises for the wire.
    pub(crate) fn to_wire(&self, ek: &S::EncryptionKey) -> CiphertextMatrix {
        let width = S::ciphertext_len(ek);
        let mut bytes = Vec::with_capacity(width * self.cts.as_slice().len());
        for c in self.cts.as_slice() {
            bytes.extend_from_slice(&S::ciphertext_to_bytes(ek, c));
        }
        CiphertextMatrix {
            rows: self.rows,
            cols: self.cols,
            layout: self.layout,
            width,
            bytes,
        }
    }

    /// Parses and validates a wire matrix that must hold a logical `rows × cols` matrix in
    /// `layout`.
    pub(crate) fn from_wire(
        ek: &S::EncryptionKey,
        wire: &CiphertextMatrix,
        rows: usize,
        cols: usize,
        layout: Layout,
        what: &'static str,
    ) -> Result<Self, Error> {
        if (wire.rows, wire.cols) != (rows, cols) {
            return Err(PeerMisbehaved::WrongShape {
                what,
                expected: (rows, cols),
                got: (wire.rows, wire.cols),
            }
            .into());
        }
        if wire.layout != layout {
            return Err(PeerMisbehaved::LayoutMismatch { what }.into());
        }
        let width = S::ciphertext_len(ek);
        let (pr, pc) = layout.ciphertext_shape(rows, cols);
        if wire.width != width || wire.bytes.len() != pr * pc * width {
            return Err(PeerMisbehaved::InvalidCiphertext { what, index: 0 }.into());
        }
        let v = par_map(pr * pc, |i| {
            let b = wire
                .bytes
                .get(i * width..(i + 1) * width)
                .unwrap_or_default();
            S::ciphertext_from_bytes(ek, b)
                .map_err(|_| PeerMisbehaved::InvalidCiphertext { what, index: i }.into())
        })?;
        Ok(Self {
            rows,
            cols,
            layout,
            cts: Matrix::from_vec(pr, pc, v)?,
        })
    }

    /// Re-randomises every ciphertext with a fresh textbook encryption of zero from the
    /// guest's pool ([`HomomorphicScheme::rerandomize_pooled`]: sⁿ, s uniform in Z*_n, one
    /// multiplication each once the pool is filled).
    pub(crate) fn rerandomize<R: CryptoRng + ?Sized>(
        &mut self,
        pool: &mut S::RandomizerPool,
        rng: &mut R,
    ) -> Result<(), Error> {
        let v = S::rerandomize_pooled(pool, self.cts.as_slice(), rng).map_err(scheme_err)?;
        self.cts = Matrix::from_vec(self.cts.rows(), self.cts.cols(), v)?;
        Ok(())
    }

    /// Adds a logical plaintext matrix (packed with the same layout).
    pub(crate) fn add_plain(
        &mut self,
        ek: &S::EncryptionKey,
        x: &Matrix<BigInt>,
    ) -> Result<(), Error> {
        let packed = self.layout.pack(x)?;
        let cts = &self.cts;
        let v = par_map(cts.as_slice().len(), |i| {
            S::add_plaintext(ek, &cts.as_slice()[i], &packed.as_slice()[i]).map_err(scheme_err)
        })?;
        self.cts = Matrix::from_vec(cts.rows(), cts.cols(), v)?;
        Ok(())
    }

    /// Reinterprets an unpacked matrix along the other axis (same ciphertexts).
    pub(crate) fn unpacked_as(mut self, axis: Axis) -> Self {
        if self.layout.slots <= 1 {
            self.layout = Layout::unpacked(axis);
        }
        self
    }
}

/// One [`HomomorphicScheme::dot_many`] per row of `blocks` (the ciphertexts sharing
/// their window tables), in parallel; the outputs form a `blocks.rows() × rows.len()`
/// matrix.
fn dot_blocks<S: HomomorphicScheme>(
    ek: &S::EncryptionKey,
    blocks: &Matrix<S::Ciphertext>,
    rows: &[&[BigInt]],
    bound_bits: u32,
    secret: bool,
) -> Result<Matrix<S::Ciphertext>, Error> {
    let out = par_map(blocks.rows(), |b| {
        let cts: Vec<&S::Ciphertext> = blocks.row(b).iter().collect();
        S::dot_many(ek, &cts, rows, bound_bits, secret).map_err(scheme_err)
    })?;
    Matrix::from_vec(
        blocks.rows(),
        rows.len(),
        out.into_iter().flatten().collect(),
    )
}

/// Checks that a plaintext operand has the shape `rows × cols` its ciphertext partner
/// requires, so that the products below never index out of range.
fn inner_dimension(
    what: &'static str,
    operand: &Matrix<BigInt>,
    rows: usize,
    cols: usize,
) -> Result<(), Error> {
    if (operand.rows(), operand.cols()) == (rows, cols) {
        Ok(())
    } else {
        Err(Error::ApiMisuse(ApiMisuse::ShapeMismatch {
            what,
            expected: (rows, cols),
            got: (operand.rows(), operand.cols()),
        }))
    }
}

/// Forward product: ⟦A⟧ (n×d_A, packed along rows) · W (d_A×m) → n×m packed along rows.
/// Per block of rows, the d_A ciphertexts' tables are shared by the m output columns.
pub(crate) fn forward_product<S: HomomorphicScheme>(
    ek: &S::EncryptionKey,
    a_rows: &CtMatrix<S>,
    w: &Matrix<BigInt>,
    bound_bits: u32,
    secret: bool,
) -> Result<CtMatrix<S>, Error> {
    inner_dimension("forward product weights", w, a_rows.cts.cols(), w.cols())?;
    let m = w.cols();
    let wt = w.transpose(); // m × d_A: row j holds the scalars of output column j
    let rows: Vec<&[BigInt]> = (0..m).map(|j| wt.row(j)).collect();
    Ok(CtMatrix {
        rows: a_rows.rows,
        cols: m,
        layout: a_rows.layout,
        cts: dot_blocks::<S>(ek, &a_rows.cts, &rows, bound_bits, secret)?,
    })
}

/// Weight gradient: ⟦A⟧ᵀ (A packed along columns, n × ⌈d_A/s⌉) · D (n×m) → d_A×m packed
/// along rows. Per column block, the n ciphertexts' tables are shared by the m outputs.
pub(crate) fn gradient_product<S: HomomorphicScheme>(
    ek: &S::EncryptionKey,
    a_cols: &CtMatrix<S>,
    d: &Matrix<BigInt>,
    bound_bits: u32,
    secret: bool,
) -> Result<CtMatrix<S>, Error> {
    inner_dimension("weight gradient delta", d, a_cols.cts.rows(), d.cols())?;
    let m = d.cols();
    let dt = d.transpose(); // m × n
    let rows: Vec<&[BigInt]> = (0..m).map(|j| dt.row(j)).collect();
    let cols_t = a_cols.cts.transpose(); // blocks × n
    let cts = dot_blocks::<S>(ek, &cols_t, &rows, bound_bits, secret)?;
    let layout = Layout {
        axis: Axis::Rows,
        ..a_cols.layout
    };
    Ok(CtMatrix {
        rows: a_cols.cols,
        cols: m,
        layout,
        cts,
    })
}

/// Input gradient: D (n×m) · ⟦W⟧ᵀ where ⟦W⟧ is d_A×m packed along rows →
/// n×d_A packed along columns. Per block of ⟦W⟧, the m ciphertexts' tables are shared by
/// the n outputs.
pub(crate) fn input_gradient_product<S: HomomorphicScheme>(
    ek: &S::EncryptionKey,
    w_rows: &CtMatrix<S>,
    d: &Matrix<BigInt>,
    bound_bits: u32,
    secret: bool,
) -> Result<CtMatrix<S>, Error> {
    let n = d.rows();
    inner_dimension("input gradient delta", d, n, w_rows.cts.cols())?;
    let rows: Vec<&[BigInt]> = (0..n).map(|i| d.row(i)).collect();
    // One dot_many per block of ⟦W⟧ gives the blocks × n transpose of the result.
    let v = dot_blocks::<S>(ek, &w_rows.cts, &rows, bound_bits, secret)?.transpose();
    let layout = Layout {
        axis: Axis::Cols,
        ..w_rows.layout
    };
    Ok(CtMatrix {
        rows: n,
        cols: w_rows.rows,
        layout,
        cts: v,
    })
}
