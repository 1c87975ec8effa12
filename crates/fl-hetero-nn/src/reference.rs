//! The plaintext fixed-point reference of the interactive layer's host part.
//!
//! It computes, without any cryptography or masks, exactly the integers the two-party
//! protocol computes: z_A = A·W + b_A·S at scale S³, δ_A = D·W_tᵀ at scale S³, and the SGD
//! update W ← W − Aᵀ·Dη, b_A ← b_A − S·Σ Dη at scale S², where A = round(a_A·S),
//! D = round(δ·S), Dη = round(η·δ·S). The secure runs must equal it bit for bit
//! (W̃_t + acc_t = W_t).

use num_bigint::BigInt;
use rand::SeedableRng;

use crate::config::ProtocolConfig;
use crate::error::{ApiMisuse, Error};
use crate::fixed::int_matmul;
use crate::matrix::Matrix;

/// δ_A (floats and exact, scale S³) and the released error (gradient perturbation).
pub type DefendedBackward = (Matrix<f64>, Matrix<BigInt>, Option<Matrix<f64>>);

/// What [`PlainInteractiveLayer::backward_dp_sgd`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct DpSgdBackward {
    /// δ_A as floats.
    pub input_gradient: Matrix<f64>,
    /// δ_A exactly (scale S³).
    pub input_gradient_exact: Matrix<BigInt>,
    /// The released error (D/S) the guest's own layers train on.
    pub released_error: Matrix<f64>,
    /// The released top-model gradient (mean loss).
    pub guest_gradient: Vec<f64>,
}

/// The host part of the interactive layer in exact plaintext fixed point.
#[derive(Clone)]
pub struct PlainInteractiveLayer {
    config: ProtocolConfig,
    weight: Matrix<BigInt>,
    bias: Matrix<BigInt>,
    cached_input: Option<Matrix<BigInt>>,
    training_steps: u64,
}

impl core::fmt::Debug for PlainInteractiveLayer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "PlainInteractiveLayer {{ steps: {}, .. }}",
            self.training_steps
        )
    }
}

impl PlainInteractiveLayer {
    /// A layer with W = `initial_weight` (d_A × m) and b_A = `initial_bias` (length m).
    pub fn new(
        config: ProtocolConfig,
        initial_weight: &Matrix<f64>,
        initial_bias: &[f64],
    ) -> Result<Self, Error> {
        config.validate()?;
        let fp = config.fixed_point;
        initial_weight.check_shape("initial_weight", (config.host_dim, config.out_dim))?;
        let b = Matrix::from_vec(1, initial_bias.len(), initial_bias.to_vec())?;
        b.check_shape("initial_bias", (1, config.out_dim))?;
        Ok(Self {
            weight: fp.encode_matrix(
                initial_weight,
                2,
                config.weight_bound_bits,
                "initial_weight",
            )?,
            bias: fp.encode_matrix(&b, 2, config.weight_bound_bits, "initial_bias")?,
            config,
            cached_input: None,
            training_steps: 0,
        })
    }

    /// W at scale S².
    pub fn weight(&self) -> &Matrix<BigInt> {
        &self.weight
    }

    /// b_A at scale S² (1 × m).
    pub fn bias(&self) -> &Matrix<BigInt> {
        &self.bias
    }

    /// The configuration.
    pub fn config(&self) -> &ProtocolConfig {
        &self.config
    }

    /// Completed training steps.
    pub fn training_steps(&self) -> u64 {
        self.training_steps
    }

    /// z_A for a batch a_A (n × d_A): floats and the exact integers at scale S³. The input
    /// is kept for the next [`Self::backward`].
    pub fn forward(
        &mut self,
        activations: &Matrix<f64>,
    ) -> Result<(Matrix<f64>, Matrix<BigInt>), Error> {
        let c = &self.config;
        activations.check_shape("activations", (activations.rows(), c.host_dim))?;
        let a =
            c.fixed_point
                .encode_matrix(activations, 1, c.activation_bound_bits, "activations")?;
        let f = c.fixed_point.frac_bits();
        let aw = int_matmul(&a, &self.weight);
        let exact = Matrix::from_fn(aw.rows(), aw.cols(), |i, j| {
            aw.get(i, j).cloned().unwrap_or_default()
                + (self.bias.get(0, j).cloned().unwrap_or_default() << f)
        });
        self.cached_input = Some(a);
        Ok((c.fixed_point.decode_matrix(&exact, 3), exact))
    }

    /// Backward with δ = ∂L/∂z_A (n × m): returns δ_A (floats and exact, scale S³) computed
    /// with the pre-update W, then applies the SGD update. Without a label defence in the
    /// configuration; see [`Self::backward_defended`].
    pub fn backward(
        &mut self,
        delta: &Matrix<f64>,
    ) -> Result<(Matrix<f64>, Matrix<BigInt>), Error> {
        let mut c = self.config;
        c.label_defence = None;
        let mut no_rng = rand::rngs::ChaCha20Rng::from_seed([0; 32]);
        let (d, d_eta, _) = crate::defences::guest_errors(&c, delta, &mut no_rng)?;
        self.backward_with(delta, d, d_eta)
    }

    /// [`Self::backward`] with the configuration's label defence applied as the guest
    /// applies it ([`crate::Guest::backward`], same function, randomness from `rng`):
    /// returns δ_A (floats and exact) and the released error the guest trains on
    /// (`None` without gradient perturbation).
    pub fn backward_defended<R: rand::CryptoRng + ?Sized>(
        &mut self,
        delta: &Matrix<f64>,
        rng: &mut R,
    ) -> Result<DefendedBackward, Error> {
        let (d, d_eta, released) = crate::defences::guest_errors(&self.config, delta, rng)?;
        let (g, e) = self.backward_with(delta, d, d_eta)?;
        Ok((g, e, released))
    }

    /// The DP-SGD step ([`crate::config::DpSgd`] in the configuration) as the guest takes
    /// it ([`crate::Guest::backward_dp_sgd`], same function, randomness from `rng`):
    /// returns δ_A (floats and exact), the released error the guest's layers train on and
    /// the released top-model gradient.
    ///
    /// # Errors
    /// No DP-SGD in the configuration; an invalid batch; no forward pass cached.
    pub fn backward_dp_sgd<R: rand::CryptoRng + ?Sized>(
        &mut self,
        batch: &crate::dp_sgd::DpSgdBatch,
        rng: &mut R,
    ) -> Result<DpSgdBackward, Error> {
        let Some(crate::config::LabelDefence::DpSgd(dp)) = self.config.label_defence else {
            return Err(ApiMisuse::WrongState {
                operation: "backward_dp_sgd",
                state: "no DP-SGD in the configuration",
            }
            .into());
        };
        let r = crate::dp_sgd::dp_sgd_release(&self.config, &dp, batch, rng)?;
        let (g, e) = self.backward_with(&r.error, r.d, r.d_eta)?;
        Ok(DpSgdBackward {
            input_gradient: g,
            input_gradient_exact: e,
            released_error: r.error,
            guest_gradient: r.guest_gradient,
        })
    }

    fn backward_with(
        &mut self,
        delta: &Matrix<f64>,
        d: Matrix<BigInt>,
        d_eta: Matrix<BigInt>,
    ) -> Result<(Matrix<f64>, Matrix<BigInt>), Error> {
        let Some(a) = self.cached_input.take() else {
            return Err(ApiMisuse::WrongState {
                operation: "backward",
                state: "no forward pass cached",
            }
            .into());
        };
        let c = &self.config;
        delta.check_shape("delta", (a.rows(), c.out_dim))?;
        let fp = c.fixed_point;
        let exact = int_matmul(&d, &self.weight.transpose());
        let grad = int_matmul(&a.transpose(), &d_eta);
        self.weight = Matrix::from_fn(self.weight.rows(), self.weight.cols(), |i, j| {
            self.weight.get(i, j).cloned().unwrap_or_default()
                - grad.get(i, j).cloned().unwrap_or_default()
        });
        let f = fp.frac_bits();
        self.bias = Matrix::from_fn(1, c.out_dim, |_, j| {
            let mut s = BigInt::from(0);
            for i in 0..d_eta.rows() {
                s += d_eta.get(i, j).cloned().unwrap_or_default();
            }
            self.bias.get(0, j).cloned().unwrap_or_default() - (s << f)
        });
        self.training_steps += 1;
        Ok((fp.decode_matrix(&exact, 3), exact))
    }
}
