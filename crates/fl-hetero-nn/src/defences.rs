//! The seeds' vertical-FL defences as the crate applies them: EmbeddingDP on the host's
//! bottom output ([`crate::ProtocolConfig::embedding_dp`], applied in
//! [`crate::Host::start_round`]) and LabelDP on the guest's training labels
//! ([`crate::split::SplitConfig::privatize_labels`]).

use rand::CryptoRng;

use crate::error::{ApiMisuse, Error};
use crate::matrix::Matrix;

/// `mechanism` (fl-ldp's EmbeddingDP) on every row of `a`: each coordinate's sign bit, kept
/// with the mechanism's keep probability, as 0.0 / 1.0.
///
/// # Errors
/// [`ApiMisuse::InvalidData`] when the mechanism rejects a row (a NaN coordinate).
pub fn embedding_dp_rows<R: CryptoRng + ?Sized>(
    mechanism: &fl_ldp::EmbeddingDp,
    a: &Matrix<f64>,
    rng: &mut R,
) -> Result<Matrix<f64>, Error> {
    let mut out = Vec::with_capacity(a.as_slice().len());
    for i in 0..a.rows() {
        let bits = mechanism
            .privatize(a.row(i), rng)
            .map_err(|e| ApiMisuse::InvalidData {
                reason: format!("EmbeddingDP on the activations: {e}"),
            })?;
        out.extend(bits.into_iter().map(f64::from));
    }
    Matrix::from_vec(a.rows(), a.cols(), out)
}
