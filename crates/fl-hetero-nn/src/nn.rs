//! Small dense MLP pieces for the bottom and top models: [`Linear`], [`Activation`]
//! (ReLU, tanh, sigmoid), [`bce_loss`], and the [`Optimizer`]s SGD and Adam (torch's update
//! rules). Plain `f64`, sequential and deterministic: the same calls give the same bits, so
//! a secure run and its plaintext twin stay identical.

use rand::{CryptoRng, RngExt};

use crate::error::{ApiMisuse, Error};
use crate::matrix::Matrix;

/// An elementwise activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// x.
    Identity,
    /// max(x, 0).
    Relu,
    /// tanh(x).
    Tanh,
    /// 1 / (1 + e^(−x)).
    Sigmoid,
}

impl Activation {
    /// Applies the activation.
    pub fn forward(self, z: &Matrix<f64>) -> Matrix<f64> {
        z.map(|&x| match self {
            Self::Identity => x,
            Self::Relu => x.max(0.0),
            Self::Tanh => x.tanh(),
            Self::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        })
    }

    /// ∂L/∂z from ∂L/∂out, given the pre-activation `z` (torch's ReLU'(0) = 0).
    pub fn backward(self, z: &Matrix<f64>, grad_out: &Matrix<f64>) -> Result<Matrix<f64>, Error> {
        grad_out.check_shape("activation gradient", z.shape())?;
        Ok(Matrix::from_fn(z.rows(), z.cols(), |i, j| {
            let x = z.as_slice()[i * z.cols() + j];
            let g = grad_out.as_slice()[i * z.cols() + j];
            match self {
                Self::Identity => g,
                Self::Relu => {
                    if x > 0.0 {
                        g
                    } else {
                        0.0
                    }
                }
                Self::Tanh => g * (1.0 - x.tanh() * x.tanh()),
                Self::Sigmoid => {
                    let s = 1.0 / (1.0 + (-x).exp());
                    g * s * (1.0 - s)
                }
            }
        }))
    }
}

/// An optimizer configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Optimizer {
    /// p ← p − lr·g.
    Sgd {
        /// Learning rate.
        lr: f64,
    },
    /// torch.optim.Adam without weight decay.
    Adam {
        /// Learning rate.
        lr: f64,
        /// β₁.
        beta1: f64,
        /// β₂.
        beta2: f64,
        /// ε.
        eps: f64,
    },
}

impl Optimizer {
    /// Adam with torch's defaults (β = (0.9, 0.999), ε = 1e−8).
    pub fn adam(lr: f64) -> Self {
        Self::Adam {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        }
    }
}

/// Optimizer state for one parameter tensor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OptimizerState {
    m: Vec<f64>,
    v: Vec<f64>,
    t: i32,
}

impl OptimizerState {
    /// Applies one update of `opt` to `params` with gradient `grads`.
    pub fn step(&mut self, opt: Optimizer, params: &mut [f64], grads: &[f64]) {
        match opt {
            Optimizer::Sgd { lr } => {
                for (p, g) in params.iter_mut().zip(grads) {
                    *p -= lr * g;
                }
            }
            Optimizer::Adam {
                lr,
                beta1,
                beta2,
                eps,
            } => {
                if self.m.len() != params.len() {
                    self.m = vec![0.0; params.len()];
                    self.v = vec![0.0; params.len()];
                    self.t = 0;
                }
                self.t += 1;
                let bc1 = 1.0 - beta1.powi(self.t);
                let bc2 = 1.0 - beta2.powi(self.t);
                for i in 0..params.len() {
                    let g = grads[i];
                    self.m[i] = beta1 * self.m[i] + (1.0 - beta1) * g;
                    self.v[i] = beta2 * self.v[i] + (1.0 - beta2) * g * g;
                    let denom = (self.v[i] / bc2).sqrt() + eps;
                    params[i] -= lr * (self.m[i] / bc1) / denom;
                }
            }
        }
    }
}

/// A dense layer y = x·W + b with W stored in × out.
#[derive(Debug, Clone)]
pub struct Linear {
    /// W (in × out).
    pub weight: Matrix<f64>,
    /// b (out).
    pub bias: Vec<f64>,
    grad_w: Matrix<f64>,
    grad_b: Vec<f64>,
    input: Option<Matrix<f64>>,
    state_w: OptimizerState,
    state_b: OptimizerState,
}

/// A weight or bias drawn like torch's default `nn.Linear` init: U(−1/√fan_in, 1/√fan_in).
pub fn torch_default_init<R: CryptoRng + ?Sized>(
    rng: &mut R,
    fan_in: usize,
    rows: usize,
    cols: usize,
) -> Matrix<f64> {
    let b = 1.0 / (fan_in.max(1) as f64).sqrt();
    Matrix::from_fn(rows, cols, |_, _| rng.random_range(-b..b))
}

/// One party's share of a jointly drawn weight whose law has torch's default variance:
/// U(−b/√2, b/√2) with b = 1/√fan_in, i.e. half the variance b²/3 of
/// [`torch_default_init`], so the sum of two independent shares has the initialiser's
/// variance. The hardened interactive layer starts from W₀ = W̃₀ + acc₀ with the guest
/// drawing W̃₀ and the host acc₀ this way. One share does not give W₀, but it is not
/// hidden either: at step 0 each party's view narrows W₀ to a subspace, and the estimate
/// from its share fails only at d_A = m (`tests/view_attacks.rs`); from the second step on
/// the host recovers W_t exactly ([`crate::attacks::host_multi_step`]).
pub fn weight_share<R: CryptoRng + ?Sized>(
    rng: &mut R,
    fan_in: usize,
    rows: usize,
    cols: usize,
) -> Matrix<f64> {
    let b = 1.0 / (2.0 * fan_in.max(1) as f64).sqrt();
    Matrix::from_fn(rows, cols, |_, _| rng.random_range(-b..b))
}

impl Linear {
    /// A layer from explicit parameters.
    pub fn from_parameters(weight: Matrix<f64>, bias: Vec<f64>) -> Result<Self, Error> {
        if bias.len() != weight.cols() {
            return Err(ApiMisuse::ShapeMismatch {
                what: "bias",
                expected: (1, weight.cols()),
                got: (1, bias.len()),
            }
            .into());
        }
        weight.check_finite("weight")?;
        Ok(Self {
            grad_w: Matrix::zeros(weight.rows(), weight.cols()),
            grad_b: vec![0.0; bias.len()],
            weight,
            bias,
            input: None,
            state_w: OptimizerState::default(),
            state_b: OptimizerState::default(),
        })
    }

    /// A layer with torch's default initialisation.
    pub fn new<R: CryptoRng + ?Sized>(rng: &mut R, fan_in: usize, fan_out: usize) -> Self {
        let weight = torch_default_init(rng, fan_in, fan_in, fan_out);
        let bias = torch_default_init(rng, fan_in, 1, fan_out).into_vec();
        Self {
            grad_w: Matrix::zeros(fan_in, fan_out),
            grad_b: vec![0.0; fan_out],
            weight,
            bias,
            input: None,
            state_w: OptimizerState::default(),
            state_b: OptimizerState::default(),
        }
    }

    /// y = x·W + b; caches x for [`Self::backward`].
    pub fn forward(&mut self, x: &Matrix<f64>) -> Result<Matrix<f64>, Error> {
        let y = x.matmul(&self.weight)?.add_row_vector(&self.bias)?;
        self.input = Some(x.clone());
        Ok(y)
    }

    /// Accumulates ∂L/∂W, ∂L/∂b and returns ∂L/∂x (with the current, pre-update W).
    pub fn backward(&mut self, grad_y: &Matrix<f64>) -> Result<Matrix<f64>, Error> {
        let Some(x) = self.input.take() else {
            return Err(ApiMisuse::WrongState {
                operation: "Linear::backward",
                state: "no cached input",
            }
            .into());
        };
        grad_y.check_shape("Linear output gradient", (x.rows(), self.weight.cols()))?;
        let gw = x.transpose().matmul(grad_y)?;
        self.grad_w = self.grad_w.add(&gw)?;
        for (b, g) in self.grad_b.iter_mut().zip(grad_y.column_sums()) {
            *b += g;
        }
        grad_y.matmul(&self.weight.transpose())
    }

    /// Replaces the accumulated gradients by `grad_w` (in × out) and `grad_b` (out), e.g.
    /// a released, noisy gradient; [`Self::step`] then applies them.
    ///
    /// # Errors
    /// Wrong shapes or non-finite values.
    pub fn set_gradients(&mut self, grad_w: Matrix<f64>, grad_b: Vec<f64>) -> Result<(), Error> {
        grad_w.check_shape("layer gradient", self.weight.shape())?;
        grad_w.check_finite("layer gradient")?;
        if grad_b.len() != self.bias.len() {
            return Err(ApiMisuse::ShapeMismatch {
                what: "bias gradient",
                expected: (1, self.bias.len()),
                got: (1, grad_b.len()),
            }
            .into());
        }
        if grad_b.iter().any(|x| !x.is_finite()) {
            return Err(ApiMisuse::NonFinite {
                what: "bias gradient",
            }
            .into());
        }
        self.grad_w = grad_w;
        self.grad_b = grad_b;
        self.input = None;
        Ok(())
    }

    /// Applies the optimizer and clears the gradients.
    pub fn step(&mut self, opt: Optimizer) {
        self.state_w
            .step(opt, self.weight.as_mut_slice(), self.grad_w.as_slice());
        self.state_b.step(opt, &mut self.bias, &self.grad_b);
        self.grad_w = Matrix::zeros(self.weight.rows(), self.weight.cols());
        self.grad_b = vec![0.0; self.bias.len()];
    }
}

/// A stack of [`Linear`] layers, each followed by an activation, trained by one optimizer.
#[derive(Debug, Clone)]
pub struct Mlp {
    layers: Vec<(Linear, Activation, Option<Matrix<f64>>)>,
    optimizer: Optimizer,
}

impl Mlp {
    /// An MLP with torch-default-initialised layers of the given widths and activations
    /// (`widths.len() == activations.len() + 1`).
    pub fn new<R: CryptoRng + ?Sized>(
        rng: &mut R,
        widths: &[usize],
        activations: &[Activation],
        optimizer: Optimizer,
    ) -> Result<Self, Error> {
        if widths.len() != activations.len() + 1 || widths.contains(&0) {
            return Err(ApiMisuse::InvalidConfig {
                reason: "an MLP needs one more width than activations, all widths ≥ 1".into(),
            }
            .into());
        }
        let layers = widths
            .windows(2)
            .zip(activations)
            .map(|(w, &a)| (Linear::new(rng, w[0], w[1]), a, None))
            .collect();
        Ok(Self { layers, optimizer })
    }

    /// An MLP from explicit layers, input first (each [`Linear`] followed by its
    /// activation), trained by `optimizer` (fresh optimizer state, no cached pass).
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] for no layer, or a layer whose input width is not the
    /// previous layer's output width; [`ApiMisuse::NonFinite`] for a NaN or infinite
    /// parameter; [`ApiMisuse::ShapeMismatch`] for a bias whose length is not the layer's
    /// output width.
    pub fn from_layers(
        layers: Vec<(Linear, Activation)>,
        optimizer: Optimizer,
    ) -> Result<Self, Error> {
        if layers.is_empty() {
            return Err(ApiMisuse::InvalidConfig {
                reason: "an MLP needs at least one layer".into(),
            }
            .into());
        }
        for pair in layers.windows(2) {
            if pair[0].0.weight.cols() != pair[1].0.weight.rows() {
                return Err(ApiMisuse::InvalidConfig {
                    reason: format!(
                        "a layer of input width {} follows a layer of output width {}; consecutive widths must match",
                        pair[1].0.weight.rows(),
                        pair[0].0.weight.cols()
                    ),
                }
                .into());
            }
        }
        let layers = layers
            .into_iter()
            .map(|(lin, act)| {
                Linear::from_parameters(lin.weight, lin.bias).map(|lin| (lin, act, None))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { layers, optimizer })
    }

    /// The layers, input first: each linear part and its activation.
    pub fn layers(&self) -> impl Iterator<Item = (&Linear, Activation)> {
        self.layers.iter().map(|(lin, act, _)| (lin, *act))
    }

    /// Forward pass (caches what backward needs).
    pub fn forward(&mut self, x: &Matrix<f64>) -> Result<Matrix<f64>, Error> {
        x.check_finite("MLP input")?;
        let mut h = x.clone();
        for (lin, act, cache) in &mut self.layers {
            let z = lin.forward(&h)?;
            h = act.forward(&z);
            *cache = Some(z);
        }
        Ok(h)
    }

    /// Backward pass from ∂L/∂output; returns ∂L/∂input and accumulates gradients.
    pub fn backward(&mut self, grad: &Matrix<f64>) -> Result<Matrix<f64>, Error> {
        let mut g = grad.clone();
        for (lin, act, cache) in self.layers.iter_mut().rev() {
            let Some(z) = cache.take() else {
                return Err(ApiMisuse::WrongState {
                    operation: "Mlp::backward",
                    state: "no forward pass cached",
                }
                .into());
            };
            g = lin.backward(&act.backward(&z, &g)?)?;
        }
        Ok(g)
    }

    /// Replaces layer `layer`'s accumulated gradients ([`Linear::set_gradients`]);
    /// [`Self::step`] then applies them.
    ///
    /// # Errors
    /// No such layer, wrong shapes or non-finite values.
    pub fn set_gradients(
        &mut self,
        layer: usize,
        grad_w: Matrix<f64>,
        grad_b: Vec<f64>,
    ) -> Result<(), Error> {
        let Some((lin, _, cache)) = self.layers.get_mut(layer) else {
            return Err(ApiMisuse::InvalidConfig {
                reason: format!("no layer {layer} in the MLP"),
            }
            .into());
        };
        lin.set_gradients(grad_w, grad_b)?;
        *cache = None;
        Ok(())
    }

    /// Drops the accumulated gradients without an update (a frozen model).
    pub fn discard_gradients(&mut self) {
        for (lin, _, _) in &mut self.layers {
            lin.grad_w = Matrix::zeros(lin.weight.rows(), lin.weight.cols());
            lin.grad_b = vec![0.0; lin.bias.len()];
        }
    }

    /// Applies `opt` (instead of the model's own optimizer) to every layer.
    pub fn step_with(&mut self, opt: Optimizer) {
        for (lin, _, _) in &mut self.layers {
            lin.step(opt);
        }
    }

    /// Applies the optimizer to every layer.
    pub fn step(&mut self) {
        let opt = self.optimizer;
        for (lin, _, _) in &mut self.layers {
            lin.step(opt);
        }
    }
}

/// Mean binary cross-entropy of probabilities `p` (n × 1) against labels `y` ∈ {0, 1},
/// with torch's clamp of each log at −100. Returns (loss, ∂L/∂p).
pub fn bce_loss(p: &Matrix<f64>, y: &[f64]) -> Result<(f64, Matrix<f64>), Error> {
    p.check_shape("predictions", (y.len(), 1))?;
    if y.is_empty() {
        return Err(ApiMisuse::InvalidData {
            reason: "empty batch".into(),
        }
        .into());
    }
    let n = y.len() as f64;
    let mut loss = 0.0;
    let mut grad = Vec::with_capacity(y.len());
    for (&pi, &yi) in p.as_slice().iter().zip(y) {
        let lp = pi.ln().max(-100.0);
        let lq = (1.0 - pi).ln().max(-100.0);
        loss -= yi * lp + (1.0 - yi) * lq;
        let eps = 1e-12;
        grad.push((-(yi / pi.max(eps)) + (1.0 - yi) / (1.0 - pi).max(eps)) / n);
    }
    Ok((loss / n, Matrix::from_vec(y.len(), 1, grad)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::ChaCha20Rng;

    fn numeric_grad(f: impl Fn(f64) -> f64, x: f64) -> f64 {
        (f(x + 1e-6) - f(x - 1e-6)) / 2e-6
    }

    #[test]
    fn gradients_match_finite_differences() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let x = torch_default_init(&mut rng, 1, 4, 3);
        let y = [1.0, 0.0, 1.0, 0.0];
        let mut mlp = Mlp::new(
            &mut rng,
            &[3, 4, 1],
            &[Activation::Tanh, Activation::Sigmoid],
            Optimizer::Sgd { lr: 0.1 },
        )
        .unwrap();
        let p = mlp.forward(&x).unwrap();
        let (_, g) = bce_loss(&p, &y).unwrap();
        let gx = mlp.backward(&g).unwrap();
        for k in 0..3 {
            let loss_at = |v: f64| {
                let mut x2 = x.clone();
                *x2.get_mut(0, k).unwrap() = v;
                let mut m = mlp.clone();
                bce_loss(&m.forward(&x2).unwrap(), &y).unwrap().0
            };
            let num = numeric_grad(loss_at, *x.get(0, k).unwrap());
            assert!(
                (num - gx.get(0, k).unwrap()).abs() < 1e-6,
                "{num} vs {}",
                gx.get(0, k).unwrap()
            );
        }
        // A training loop decreases the loss; Adam and SGD both.
        for opt in [Optimizer::Sgd { lr: 0.5 }, Optimizer::adam(0.05)] {
            let mut m = Mlp::new(
                &mut rng,
                &[3, 4, 1],
                &[Activation::Relu, Activation::Sigmoid],
                opt,
            )
            .unwrap();
            let first = bce_loss(&m.forward(&x).unwrap(), &y).unwrap().0;
            for _ in 0..200 {
                let p = m.forward(&x).unwrap();
                let (_, g) = bce_loss(&p, &y).unwrap();
                m.backward(&g).unwrap();
                m.step();
            }
            let last = bce_loss(&m.forward(&x).unwrap(), &y).unwrap().0;
            assert!(last < first * 0.5, "{opt:?}: {first} → {last}");
        }
        assert!(Mlp::new(&mut rng, &[3], &[Activation::Relu], Optimizer::adam(0.1)).is_err());
        // from_layers rebuilds the same function from the layers; it refuses no layer and
        // widths that do not chain.
        let mut rebuilt = Mlp::from_layers(
            mlp.layers().map(|(l, a)| (l.clone(), a)).collect(),
            Optimizer::Sgd { lr: 0.1 },
        )
        .unwrap();
        assert_eq!(
            rebuilt.forward(&x).unwrap().as_slice(),
            mlp.clone().forward(&x).unwrap().as_slice()
        );
        assert!(Mlp::from_layers(Vec::new(), Optimizer::adam(0.1)).is_err());
        let layers: Vec<_> = mlp.layers().map(|(l, a)| (l.clone(), a)).collect();
        let swapped = vec![layers[1].clone(), layers[0].clone()];
        assert!(Mlp::from_layers(swapped, Optimizer::adam(0.1)).is_err());
        let mut nan = layers[0].0.clone();
        nan.weight = nan.weight.map(|_| f64::NAN);
        assert!(Mlp::from_layers(vec![(nan, Activation::Relu)], Optimizer::adam(0.1)).is_err());
        assert!(bce_loss(&Matrix::zeros(2, 1), &[1.0]).is_err());
    }
}
