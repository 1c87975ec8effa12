//! The protocol's messages and their stable binary codec.
//!
//! A frame is `b"FLHN" ‖ version (1) ‖ kind (1) ‖ body`; all integers are big-endian. The
//! decoder is total: any byte string yields a [`Message`] or a [`DecodeError`], never a panic,
//! and no length field can make it allocate more than the frame's own size. Ciphertexts stay
//! opaque bytes here; the state machine validates them against the session key.
//!
//! | # | kind | direction | body |
//! |---|---|---|---|
//! | 0 | [`Message::Hello`] | H→G | configuration, public key, W̃₀ (hardened) |
//! | 1 | [`Message::Activations`] | H→G | ⟦a_A⟧ (batch-packed, plus feature-packed when packing) |
//! | 2 | [`Message::MaskedForward`] | G→H | ⟦a_A·W̃ + b_A + ε_B⟧ |
//! | 3 | [`Message::ForwardReply`] | H→G | a_A·W̃ + b_A + ε_B + a_A·acc (plaintext) |
//! | 4 | [`Message::MaskedGradient`] | G→H | ⟦a_Aᵀ·ηδ + noise_w⟧ |
//! | 5 | [`Message::GradientReply`] | H→G | a_Aᵀ·ηδ + noise_w + ε_A (plaintext) |
//! | 6 | [`Message::EncryptedAcc`] | H→G | ⟦acc_t⟧ |
//! | 7 | [`Message::InputGradient`] | G→H | ⟦δ·(W̃_t + acc_t)ᵀ⟧ |
//! | – | [`Message::Abort`] | either | abort code |

use num_bigint::{BigInt, Sign};

use crate::config::{
    AcceptedLeaks, DpSgd, Encryption, GradientPerturbation, LabelDefence, Profile, ProtocolConfig,
    RandomizedLabels,
};
use crate::error::{ApiMisuse, DecodeError, Error, PeerMisbehaved};
use crate::fixed::FixedPoint;
use crate::matrix::Matrix;
use crate::packing::{Axis, Layout};

/// Magic bytes at the start of every frame.
pub const MAGIC: &[u8; 4] = b"FLHN";
/// Codec version.
pub const VERSION: u8 = 4;

/// Largest number of entries in one matrix the decoder accepts.
const MAX_ENTRIES: u64 = 1 << 26;
/// Largest byte width of one entry (ciphertext or integer).
const MAX_ENTRY_BYTES: u64 = 8192;

/// Why a forward pass runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A training step: backward messages follow.
    Train,
    /// Prediction: the round ends after the forward reply.
    Predict,
}

/// A matrix of serialised ciphertexts laid out by a [`Layout`].
#[derive(Clone, PartialEq, Eq)]
pub struct CiphertextMatrix {
    /// Logical rows of the (unpacked) matrix.
    pub rows: usize,
    /// Logical columns.
    pub cols: usize,
    /// How the entries are packed.
    pub layout: Layout,
    /// Bytes per ciphertext.
    pub width: usize,
    /// Row-major ciphertexts of shape `layout.ciphertext_shape(rows, cols)`.
    pub bytes: Vec<u8>,
}

impl core::fmt::Debug for CiphertextMatrix {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "CiphertextMatrix({}×{}, {:?}, {} B)",
            self.rows,
            self.cols,
            self.layout,
            self.bytes.len()
        )
    }
}

impl CiphertextMatrix {
    /// Number of ciphertexts.
    pub fn count(&self) -> usize {
        let (r, c) = self.layout.ciphertext_shape(self.rows, self.cols);
        r * c
    }

    /// The serialised ciphertext at position `i` of the row-major ciphertext matrix.
    pub fn ciphertext(&self, i: usize) -> Option<&[u8]> {
        self.bytes.get(i * self.width..(i + 1) * self.width)
    }
}

/// A matrix of signed integers serialised in fixed-width two's complement.
///
/// It holds the wire bytes, not the integers: a received frame is parsed into integers only
/// by [`IntegerMatrix::values`], after its shape has been checked against the shape the
/// receiver expects, so a hostile peer cannot make the decoder allocate one big integer per
/// byte of a large frame (the bytes are kept as they came: one copy of the frame).
#[derive(Clone, PartialEq, Eq)]
pub struct IntegerMatrix {
    rows: usize,
    cols: usize,
    width: usize,
    bytes: Vec<u8>,
}

impl core::fmt::Debug for IntegerMatrix {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "IntegerMatrix({}×{}, {} B/entry)",
            self.rows, self.cols, self.width
        )
    }
}

impl IntegerMatrix {
    /// Byte width for values with |v| < 2^bits.
    pub fn width_for_bits(bits: u32) -> usize {
        (bits as usize + 1).div_ceil(8)
    }

    /// Serialises `values` with `width` bytes per entry (the width a public bound gives,
    /// [`Self::width_for_bits`], so it reveals no magnitude).
    ///
    /// # Errors
    /// [`ApiMisuse::ValueOutOfRange`] when a value does not fit in `width` bytes of two's
    /// complement (it is never truncated), [`ApiMisuse::InvalidData`] for a width of 0 or
    /// above the decoder's limit.
    pub fn new(values: &Matrix<BigInt>, width: usize) -> Result<Self, Error> {
        if width == 0 || width as u64 > MAX_ENTRY_BYTES {
            return Err(ApiMisuse::InvalidData {
                reason: format!("integer width {width}; must be in 1..={MAX_ENTRY_BYTES}"),
            }
            .into());
        }
        let mut bytes = Vec::with_capacity(values.as_slice().len() * width);
        for v in values.as_slice() {
            let b = v.to_signed_bytes_be();
            if b.len() > width {
                return Err(ApiMisuse::ValueOutOfRange {
                    what: "integer matrix entry",
                    bound_bits: u32::try_from(8 * width - 1).unwrap_or(u32::MAX),
                }
                .into());
            }
            let pad = if v.sign() == Sign::Minus { 0xff } else { 0x00 };
            bytes.extend(core::iter::repeat_n(pad, width - b.len()));
            bytes.extend_from_slice(&b);
        }
        Ok(Self {
            rows: values.rows(),
            cols: values.cols(),
            width,
            bytes,
        })
    }

    /// The (rows, cols) the sender announced.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// Bytes per entry.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Parses the integers, after checking that the announced shape is `expected` (the
    /// receiver's own expectation, so the integers allocated are bounded by the session's
    /// configuration, not by the frame).
    ///
    /// # Errors
    /// [`PeerMisbehaved::WrongShape`] naming `what` when the shape differs.
    pub fn values(
        &self,
        what: &'static str,
        expected: (usize, usize),
    ) -> Result<Matrix<BigInt>, Error> {
        if self.shape() != expected {
            return Err(PeerMisbehaved::WrongShape {
                what,
                expected,
                got: self.shape(),
            }
            .into());
        }
        let data = self
            .bytes
            .chunks_exact(self.width)
            .map(BigInt::from_signed_bytes_be)
            .collect();
        Matrix::from_vec(self.rows, self.cols, data)
    }
}

/// The host's opening message.
#[derive(Debug, Clone, PartialEq)]
pub struct Hello {
    /// The host's configuration (the guest requires equality with its own).
    pub config: ProtocolConfig,
    /// The host's serialised public key.
    pub public_key: Vec<u8>,
    /// The host's serialised proof that its key is well formed (Paillier:
    /// [`fl_paillier::KeyCorrectnessProof`], gcd(n, φ(n)) = 1), bound to
    /// [`key_proof_context`] of `config`. The guest verifies it before any use of the key.
    pub key_proof: Vec<u8>,
}

/// Domain tag of the key-correctness proof's context.
const KEY_PROOF_TAG: &[u8] = b"fl-hetero-nn/hello/key-proof";

/// The context a host's key-correctness proof is bound to: a protocol tag, the codec
/// [`VERSION`] and the encoded configuration both parties must share. A proof made for
/// another protocol, codec version or configuration does not verify. (The proof states a
/// property of n alone, so replaying an honest proof for the same n in another session
/// gains nothing; the binding keeps proofs from being reused across protocols.)
pub fn key_proof_context(config: &ProtocolConfig) -> Vec<u8> {
    let mut w = Vec::new();
    put_bytes(&mut w, KEY_PROOF_TAG);
    w.push(VERSION);
    put_config(&mut w, config);
    w
}

/// Message 1: the host's encrypted bottom output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activations {
    /// Round number (one per forward pass, training or prediction).
    pub round: u64,
    /// Training or prediction.
    pub purpose: Purpose,
    /// ⟦A⟧ packed along the batch (used for the forward product).
    pub by_rows: CiphertextMatrix,
    /// ⟦A⟧ packed along the features (used for the weight gradient); absent when
    /// unpacked, where `by_rows` serves both products.
    pub by_cols: Option<CiphertextMatrix>,
}

/// A round-tagged ciphertext matrix (messages 2, 4, 6, 7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundCiphertexts {
    /// Round number.
    pub round: u64,
    /// The ciphertexts.
    pub data: CiphertextMatrix,
}

/// A round-tagged plaintext integer matrix (messages 3, 5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundIntegers {
    /// Round number.
    pub round: u64,
    /// The integers.
    pub data: IntegerMatrix,
}

/// Why a party aborted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AbortCode {
    /// The peer's message broke the protocol.
    ProtocolViolation = 1,
    /// A local error ended the session.
    LocalError = 2,
    /// The application ended the session.
    Closed = 3,
}

/// A protocol message.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Message {
    /// 0 (H→G): configuration and public key.
    Hello(Hello),
    /// 1 (H→G): ⟦a_A⟧.
    Activations(Activations),
    /// 2 (G→H): ⟦a_A·W̃ + b_A + ε_B⟧.
    MaskedForward(RoundCiphertexts),
    /// 3 (H→G): the decrypted forward plus a_A·acc.
    ForwardReply(RoundIntegers),
    /// 4 (G→H): ⟦a_Aᵀ·ηδ + noise_w⟧.
    MaskedGradient(RoundCiphertexts),
    /// 5 (H→G): the decrypted gradient plus ε_A.
    GradientReply(RoundIntegers),
    /// 6 (H→G): ⟦acc_t⟧ (before this step's update).
    EncryptedAcc(RoundCiphertexts),
    /// 7 (G→H): ⟦δ·(W̃_t + acc_t)ᵀ⟧.
    InputGradient(RoundCiphertexts),
    /// Either direction: the sender aborted the session.
    Abort(u8),
}

impl Message {
    /// A short name of the message kind (used in errors).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::Hello(_) => "Hello",
            Self::Activations(_) => "Activations (1)",
            Self::MaskedForward(_) => "MaskedForward (2)",
            Self::ForwardReply(_) => "ForwardReply (3)",
            Self::MaskedGradient(_) => "MaskedGradient (4)",
            Self::GradientReply(_) => "GradientReply (5)",
            Self::EncryptedAcc(_) => "EncryptedAcc (6)",
            Self::InputGradient(_) => "InputGradient (7)",
            Self::Abort(_) => "Abort",
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Self::Hello(_) => 0,
            Self::Activations(_) => 1,
            Self::MaskedForward(_) => 2,
            Self::ForwardReply(_) => 3,
            Self::MaskedGradient(_) => 4,
            Self::GradientReply(_) => 5,
            Self::EncryptedAcc(_) => 6,
            Self::InputGradient(_) => 7,
            Self::Abort(_) => 255,
        }
    }

    /// Serialises the message into a frame body.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Vec::new();
        w.extend_from_slice(MAGIC);
        w.push(VERSION);
        w.push(self.kind());
        match self {
            Self::Hello(h) => {
                put_config(&mut w, &h.config);
                put_bytes(&mut w, &h.public_key);
                put_bytes(&mut w, &h.key_proof);
            }
            Self::Activations(a) => {
                w.extend_from_slice(&a.round.to_be_bytes());
                w.push(match a.purpose {
                    Purpose::Train => 0,
                    Purpose::Predict => 1,
                });
                put_ciphertexts(&mut w, &a.by_rows);
                match &a.by_cols {
                    None => w.push(0),
                    Some(c) => {
                        w.push(1);
                        put_ciphertexts(&mut w, c);
                    }
                }
            }
            Self::MaskedForward(c)
            | Self::MaskedGradient(c)
            | Self::EncryptedAcc(c)
            | Self::InputGradient(c) => {
                w.extend_from_slice(&c.round.to_be_bytes());
                put_ciphertexts(&mut w, &c.data);
            }
            Self::ForwardReply(i) | Self::GradientReply(i) => {
                w.extend_from_slice(&i.round.to_be_bytes());
                put_integers(&mut w, &i.data);
            }
            Self::Abort(code) => w.push(*code),
        }
        w
    }

    /// Parses a frame body. Total: every input gives a message or an error.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader { buf: bytes };
        if r.take(4)? != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let version = r.u8()?;
        if version != VERSION {
            return Err(DecodeError::UnsupportedVersion(version));
        }
        let kind = r.u8()?;
        let msg = match kind {
            0 => {
                let config = get_config(&mut r)?;
                let public_key = r.bytes(1 << 16, "public_key")?.to_vec();
                let key_proof = r.bytes(1 << 16, "key_proof")?.to_vec();
                Self::Hello(Hello {
                    config,
                    public_key,
                    key_proof,
                })
            }
            1 => {
                let round = r.u64()?;
                let purpose = match r.u8()? {
                    0 => Purpose::Train,
                    1 => Purpose::Predict,
                    _ => return Err(DecodeError::InvalidField("purpose")),
                };
                let by_rows = get_ciphertexts(&mut r)?;
                let by_cols = match r.u8()? {
                    0 => None,
                    1 => Some(get_ciphertexts(&mut r)?),
                    _ => return Err(DecodeError::InvalidField("by_cols")),
                };
                Self::Activations(Activations {
                    round,
                    purpose,
                    by_rows,
                    by_cols,
                })
            }
            2 | 4 | 6 | 7 => {
                let round = r.u64()?;
                let data = get_ciphertexts(&mut r)?;
                let c = RoundCiphertexts { round, data };
                match kind {
                    2 => Self::MaskedForward(c),
                    4 => Self::MaskedGradient(c),
                    6 => Self::EncryptedAcc(c),
                    _ => Self::InputGradient(c),
                }
            }
            3 | 5 => {
                let round = r.u64()?;
                let data = get_integers(&mut r)?;
                let i = RoundIntegers { round, data };
                if kind == 3 {
                    Self::ForwardReply(i)
                } else {
                    Self::GradientReply(i)
                }
            }
            255 => Self::Abort(r.u8()?),
            k => return Err(DecodeError::UnknownKind(k)),
        };
        if !r.buf.is_empty() {
            return Err(DecodeError::TrailingBytes);
        }
        Ok(msg)
    }
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }
    fn bytes(&mut self, max: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(DecodeError::TooLarge(what));
        }
        self.take(len)
    }
}

fn put_u32(w: &mut Vec<u8>, x: usize) {
    w.extend_from_slice(&(x.min(u32::MAX as usize) as u32).to_be_bytes());
}

fn put_bytes(w: &mut Vec<u8>, b: &[u8]) {
    put_u32(w, b.len());
    w.extend_from_slice(b);
}

fn put_config(w: &mut Vec<u8>, c: &ProtocolConfig) {
    w.push(c.profile.code());
    put_u32(w, c.fixed_point.frac_bits() as usize);
    put_u32(w, c.host_dim);
    put_u32(w, c.out_dim);
    w.extend_from_slice(&c.learning_rate.to_bits().to_be_bytes());
    put_u32(w, c.activation_bound_bits as usize);
    put_u32(w, c.delta_bound_bits as usize);
    put_u32(w, c.weight_bound_bits as usize);
    put_u32(w, c.statistical_security_bits as usize);
    put_u32(w, c.max_batch_rows);
    w.extend_from_slice(&c.min_key_bits.to_be_bytes());
    w.push(u8::from(c.packing));
    w.push(c.encryption.code());
    match c.embedding_dp {
        None => w.push(0),
        Some(e) => {
            w.push(1);
            w.extend_from_slice(&e.value().to_bits().to_be_bytes());
        }
    }
    match c.label_defence {
        None => w.push(0),
        Some(LabelDefence::GradientPerturbation(g)) => {
            w.push(1);
            w.extend_from_slice(&g.clip_norm.to_bits().to_be_bytes());
            w.extend_from_slice(&g.noise_multiplier.to_bits().to_be_bytes());
            w.extend_from_slice(&g.releases_per_row.to_be_bytes());
        }
        Some(LabelDefence::RandomizedLabels(r)) => {
            w.push(2);
            w.extend_from_slice(&r.epsilon().value().to_bits().to_be_bytes());
        }
        Some(LabelDefence::DpSgd(d)) => {
            // 3: error rows in the Gaussian release; 4: randomised error labels (their ε
            // follows).
            w.push(if d.error_labels.is_some() { 4 } else { 3 });
            w.extend_from_slice(&d.clip_norm.to_bits().to_be_bytes());
            w.extend_from_slice(&d.noise_multiplier.to_bits().to_be_bytes());
            w.extend_from_slice(&d.sampling_rate.to_bits().to_be_bytes());
            w.extend_from_slice(&d.releases_per_row.to_be_bytes());
            w.extend_from_slice(&d.error_weight.to_bits().to_be_bytes());
            if let Some(r) = d.error_labels {
                w.extend_from_slice(&r.epsilon().value().to_bits().to_be_bytes());
                w.extend_from_slice(&d.gaussian_share.to_bits().to_be_bytes());
            }
        }
    }
    w.push(
        u8::from(c.accepted_leaks.host_recovers_exact_error_and_labels)
            | u8::from(c.accepted_leaks.guest_recovers_exact_activations) << 1,
    );
}

fn get_config(r: &mut Reader<'_>) -> Result<ProtocolConfig, DecodeError> {
    let profile = Profile::from_code(r.u8()?).ok_or(DecodeError::InvalidField("profile"))?;
    let fixed_point =
        FixedPoint::new(r.u32()?).map_err(|_| DecodeError::InvalidField("frac_bits"))?;
    let mut c = ProtocolConfig::new(profile, r.u32()? as usize, r.u32()? as usize);
    c.fixed_point = fixed_point;
    c.learning_rate = f64::from_bits(r.u64()?);
    c.activation_bound_bits = r.u32()?;
    c.delta_bound_bits = r.u32()?;
    c.weight_bound_bits = r.u32()?;
    c.statistical_security_bits = r.u32()?;
    c.max_batch_rows = r.u32()? as usize;
    c.min_key_bits = r.u64()?;
    c.packing = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(DecodeError::InvalidField("packing")),
    };
    c.encryption = Encryption::from_code(r.u8()?).ok_or(DecodeError::InvalidField("encryption"))?;
    c.embedding_dp = match r.u8()? {
        0 => None,
        1 => Some(
            fl_ldp::Epsilon::new(f64::from_bits(r.u64()?))
                .map_err(|_| DecodeError::InvalidField("embedding_dp"))?,
        ),
        _ => return Err(DecodeError::InvalidField("embedding_dp")),
    };
    c.label_defence = match r.u8()? {
        0 => None,
        1 => {
            let clip = f64::from_bits(r.u64()?);
            let z = f64::from_bits(r.u64()?);
            let releases = r.u64()?;
            Some(LabelDefence::GradientPerturbation(
                GradientPerturbation::new(clip, z, releases)
                    .map_err(|_| DecodeError::InvalidField("label_defence"))?,
            ))
        }
        // The peer's statement, never evidence (`RandomizedLabels`).
        2 => Some(LabelDefence::RandomizedLabels(
            RandomizedLabels::announced_by_guest(
                fl_ldp::Epsilon::new(f64::from_bits(r.u64()?))
                    .map_err(|_| DecodeError::InvalidField("label_defence"))?,
            ),
        )),
        tag @ (3 | 4) => {
            let clip = f64::from_bits(r.u64()?);
            let z = f64::from_bits(r.u64()?);
            let q = f64::from_bits(r.u64()?);
            let releases = r.u64()?;
            let weight = f64::from_bits(r.u64()?);
            let d = DpSgd::new(clip, z, q, releases)
                .and_then(|d| d.with_error_weight(weight))
                .map_err(|_| DecodeError::InvalidField("label_defence"))?;
            Some(LabelDefence::DpSgd(if tag == 4 {
                let epsilon = fl_ldp::Epsilon::new(f64::from_bits(r.u64()?))
                    .map_err(|_| DecodeError::InvalidField("label_defence"))?;
                let share = f64::from_bits(r.u64()?);
                // The peer's statement, never evidence (`RandomizedLabels`).
                d.with_randomized_error_labels(RandomizedLabels::announced_by_guest(epsilon), share)
                    .map_err(|_| DecodeError::InvalidField("label_defence"))?
            } else {
                d
            }))
        }
        _ => return Err(DecodeError::InvalidField("label_defence")),
    };
    let leaks = r.u8()?;
    if leaks > 3 {
        return Err(DecodeError::InvalidField("accepted_leaks"));
    }
    c.accepted_leaks = AcceptedLeaks {
        host_recovers_exact_error_and_labels: leaks & 1 == 1,
        guest_recovers_exact_activations: leaks & 2 == 2,
    };
    Ok(c)
}

fn put_layout(w: &mut Vec<u8>, l: &Layout) {
    w.push(match l.axis {
        Axis::Rows => 0,
        Axis::Cols => 1,
    });
    put_u32(w, l.slots);
    put_u32(w, l.slot_bits as usize);
}

fn get_layout(r: &mut Reader<'_>) -> Result<Layout, DecodeError> {
    let axis = match r.u8()? {
        0 => Axis::Rows,
        1 => Axis::Cols,
        _ => return Err(DecodeError::InvalidField("layout.axis")),
    };
    let slots = r.u32()? as usize;
    let slot_bits = r.u32()?;
    if slots == 0 || slots > 1 << 16 || slot_bits > 1 << 16 {
        return Err(DecodeError::InvalidField("layout"));
    }
    Ok(Layout {
        axis,
        slots,
        slot_bits,
    })
}

fn put_ciphertexts(w: &mut Vec<u8>, c: &CiphertextMatrix) {
    put_u32(w, c.rows);
    put_u32(w, c.cols);
    put_layout(w, &c.layout);
    put_u32(w, c.width);
    w.extend_from_slice(&c.bytes);
}

fn get_ciphertexts(r: &mut Reader<'_>) -> Result<CiphertextMatrix, DecodeError> {
    let rows = r.u32()? as usize;
    let cols = r.u32()? as usize;
    let layout = get_layout(r)?;
    let width = r.u32()? as usize;
    let (pr, pc) = layout.ciphertext_shape(rows, cols);
    let count = (pr as u64).saturating_mul(pc as u64);
    if (rows as u64).saturating_mul(cols as u64) > MAX_ENTRIES || count > MAX_ENTRIES {
        return Err(DecodeError::TooLarge("ciphertext matrix"));
    }
    if width == 0 || width as u64 > MAX_ENTRY_BYTES {
        return Err(DecodeError::InvalidField("ciphertext width"));
    }
    let total = count.saturating_mul(width as u64);
    if total > r.buf.len() as u64 {
        return Err(DecodeError::Truncated);
    }
    let bytes = r.take(total as usize)?.to_vec();
    Ok(CiphertextMatrix {
        rows,
        cols,
        layout,
        width,
        bytes,
    })
}

fn put_integers(w: &mut Vec<u8>, m: &IntegerMatrix) {
    put_u32(w, m.rows);
    put_u32(w, m.cols);
    put_u32(w, m.width);
    w.extend_from_slice(&m.bytes);
}

fn get_integers(r: &mut Reader<'_>) -> Result<IntegerMatrix, DecodeError> {
    let rows = r.u32()? as usize;
    let cols = r.u32()? as usize;
    let width = r.u32()? as usize;
    let count = (rows as u64).saturating_mul(cols as u64);
    if count > MAX_ENTRIES {
        return Err(DecodeError::TooLarge("integer matrix"));
    }
    if width == 0 || width as u64 > MAX_ENTRY_BYTES {
        return Err(DecodeError::InvalidField("integer width"));
    }
    let total = count.saturating_mul(width as u64);
    if total > r.buf.len() as u64 {
        return Err(DecodeError::Truncated);
    }
    // The bytes only: integers are parsed by `IntegerMatrix::values` after the receiver
    // has checked the shape.
    let bytes = r.take(total as usize)?.to_vec();
    Ok(IntegerMatrix {
        rows,
        cols,
        width,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_messages() -> Vec<Message> {
        let layout = Layout {
            axis: Axis::Rows,
            slots: 2,
            slot_bits: 70,
        };
        let cts = CiphertextMatrix {
            rows: 3,
            cols: 2,
            layout,
            width: 4,
            bytes: (0..16).collect(),
        };
        let ints = IntegerMatrix::new(
            &Matrix::from_vec(
                1,
                3,
                vec![BigInt::from(-1), BigInt::from(0), BigInt::from(70000)],
            )
            .unwrap(),
            3,
        )
        .unwrap();
        vec![
            Message::Hello(Hello {
                config: ProtocolConfig::new(Profile::Hardened, 2, 3),
                public_key: vec![1, 2, 3],
                key_proof: vec![4, 5],
            }),
            Message::Hello(Hello {
                config: {
                    let mut c = ProtocolConfig::new(Profile::Hardened, 2, 3);
                    c.encryption = Encryption::Djn;
                    c.embedding_dp = Some(fl_ldp::Epsilon::new(0.75).unwrap());
                    c
                },
                public_key: vec![1, 2, 3],
                key_proof: vec![4, 5],
            }),
            // DP-SGD, and DP-SGD with randomised error labels (tag 4: their ε and share).
            Message::Hello(Hello {
                config: {
                    let mut c = ProtocolConfig::new(Profile::Hardened, 2, 3);
                    c.label_defence = Some(LabelDefence::DpSgd(
                        DpSgd::new(0.5, 3.0, 1.0, 150)
                            .unwrap()
                            .with_error_weight(4.0)
                            .unwrap(),
                    ));
                    c
                },
                public_key: vec![1, 2, 3],
                key_proof: vec![4, 5],
            }),
            Message::Hello(Hello {
                config: {
                    let mut c = ProtocolConfig::new(Profile::Hardened, 2, 3);
                    c.label_defence = Some(LabelDefence::DpSgd(
                        DpSgd::new(0.1, 30.0, 1.0, 150)
                            .unwrap()
                            .with_randomized_error_labels(
                                RandomizedLabels::announced_by_guest(
                                    fl_ldp::Epsilon::new(3.5).unwrap(),
                                ),
                                0.25,
                            )
                            .unwrap(),
                    ));
                    c
                },
                public_key: vec![1, 2, 3],
                key_proof: vec![4, 5],
            }),
            Message::Activations(Activations {
                round: 7,
                purpose: Purpose::Predict,
                by_rows: cts.clone(),
                by_cols: Some(cts.clone()),
            }),
            Message::MaskedForward(RoundCiphertexts {
                round: 1,
                data: cts.clone(),
            }),
            Message::ForwardReply(RoundIntegers {
                round: 2,
                data: ints.clone(),
            }),
            Message::MaskedGradient(RoundCiphertexts {
                round: 3,
                data: cts.clone(),
            }),
            Message::GradientReply(RoundIntegers {
                round: 4,
                data: ints,
            }),
            Message::EncryptedAcc(RoundCiphertexts {
                round: 5,
                data: cts.clone(),
            }),
            Message::InputGradient(RoundCiphertexts {
                round: 6,
                data: cts,
            }),
            Message::Abort(3),
        ]
    }

    #[test]
    fn round_trip_and_every_truncation_fails() {
        for m in sample_messages() {
            let b = m.encode();
            assert_eq!(Message::decode(&b).unwrap(), m);
            for cut in 0..b.len() {
                assert!(
                    Message::decode(&b[..cut]).is_err(),
                    "{} cut at {cut}",
                    m.kind_name()
                );
            }
            let mut long = b.clone();
            long.push(0);
            assert_eq!(Message::decode(&long), Err(DecodeError::TrailingBytes));
        }
    }

    #[test]
    fn integers_are_never_truncated_and_parse_only_at_the_expected_shape() {
        let v = Matrix::from_vec(
            1,
            3,
            vec![BigInt::from(-128), BigInt::from(127), BigInt::from(5)],
        )
        .unwrap();
        let m = IntegerMatrix::new(&v, 1).unwrap();
        assert_eq!(m.values("x", (1, 3)).unwrap(), v);
        assert!(matches!(
            m.values("x", (3, 1)),
            Err(Error::PeerMisbehaved(PeerMisbehaved::WrongShape { .. }))
        ));
        // 128 and −129 need two bytes: an error, not their low byte.
        for wide in [128, -129, 70_000] {
            let w = Matrix::from_vec(1, 1, vec![BigInt::from(wide)]).unwrap();
            assert!(IntegerMatrix::new(&w, 1).is_err(), "{wide}");
            assert!(IntegerMatrix::new(&w, 3).is_ok(), "{wide}");
        }
        assert!(IntegerMatrix::new(&v, 0).is_err());
    }

    #[test]
    fn bad_headers_are_rejected() {
        assert_eq!(Message::decode(b"XXXX\x01\x00"), Err(DecodeError::BadMagic));
        assert_eq!(
            Message::decode(b"FLHN\x09\x00"),
            Err(DecodeError::UnsupportedVersion(9))
        );
        assert_eq!(
            Message::decode(b"FLHN\x04\x09"),
            Err(DecodeError::UnknownKind(9))
        );
        // A huge announced matrix in a tiny frame is refused before allocating.
        let mut b = b"FLHN\x04\x03".to_vec();
        b.extend_from_slice(&0u64.to_be_bytes());
        b.extend_from_slice(&u32::MAX.to_be_bytes());
        b.extend_from_slice(&u32::MAX.to_be_bytes());
        b.extend_from_slice(&8u32.to_be_bytes());
        assert!(Message::decode(&b).is_err());
    }
}
