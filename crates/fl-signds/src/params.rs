//! Parameters with upstream domains, and the two arithmetic profiles.

use fl_ldp::Epsilon;

use crate::error::{Error, Result};

/// The server's hard limit on the number of indices in one report (upstream rejects larger
/// uploads); also the cap of the `Exact` profile's output-dimension search.
pub const MAX_OUTPUT_DIMENSION: usize = 100;

/// Upstream's fixed MagRR budget ε_RR, our default.
pub const DEFAULT_MAGRR_EPSILON: f64 = 5.0;

/// Below or at this value of k·d the returned report carries [`Warning::SmallTopK`]
/// (upstream's docs promise such a device-side warning; its code has none).
pub const SMALL_TOP_K_WARNING: f64 = 50.0;

/// Largest update dimension: indices travel as `u32`.
pub const MAX_DIMENSION: u64 = u32::MAX as u64;

/// How the selection's numbers are computed.
///
/// Both profiles sample exactly from the law they compute, sort correctly with the
/// documented tie rule and reject NaN; neither reproduces the upstream merge-sort bug that
/// drops the last index and duplicates index 0 for odd d (see the crate README).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// The default. K = ⌊k ⊗ d⌋ with the f64 product; binomials, the threshold rule and the
    /// output-dimension search in log space with the exact comparison rules (no decision is
    /// left to rounding or overflow); h capped at [`MAX_OUTPUT_DIMENSION`]; r_est kept in
    /// full f64 precision; an invalid r_est is an error.
    #[default]
    Exact,
    /// Reproduces MindSpore Federated's numbers: k and ε as f32, K = trunc(f32(k)·f32(d)),
    /// binomials, PMF and expectations in upstream's f64 operation order (the output
    /// dimension search ends where upstream's does, including on f64 overflow), the
    /// inverse-CDF table of upstream's sampler, f32 MagRR comparisons, the client's clamp of
    /// r_est to 1, and r_est stored with six decimals on the server.
    MindSporeCompatible,
}

/// SignDS parameters, validated on construction.
///
/// Start from [`Params::default`] (upstream's code defaults) and change what you need; each
/// `with_*` method checks its domain and names the parameter and its range in the error:
///
/// ```
/// use fl_signds::{Params, Profile};
/// let params = Params::default()
///     .with_top_k_fraction(0.2)?
///     .with_epsilon(10.0)?
///     .with_profile(Profile::Exact);
/// assert!(Params::default().with_top_k_fraction(0.3).is_err());
/// # Ok::<(), fl_signds::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    top_k_fraction: f64,
    epsilon: Epsilon,
    threshold_ratio: f64,
    global_learning_rate: f64,
    output_dimension: u32,
    magrr_epsilon: Epsilon,
    profile: Profile,
}

impl Default for Params {
    /// Upstream's code defaults: k = 0.01, ε = 100, thr_ratio = 0.6, global_lr = 0.1,
    /// dim_out = 0 (search h), ε_RR = 5, [`Profile::Exact`].
    fn default() -> Self {
        Self {
            top_k_fraction: 0.01,
            epsilon: Epsilon::new(100.0).unwrap_or(Epsilon::ZERO),
            threshold_ratio: 0.6,
            global_learning_rate: 0.1,
            output_dimension: 0,
            magrr_epsilon: Epsilon::new(DEFAULT_MAGRR_EPSILON).unwrap_or(Epsilon::ZERO),
            profile: Profile::Exact,
        }
    }
}

fn check(name: &'static str, value: f64, allowed: &'static str, ok: bool) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidParameter {
            name,
            value,
            allowed,
        })
    }
}

impl Params {
    /// Sets the top-k fraction k (`sign_k`). Domain (0, 0.25].
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] outside the domain (NaN included).
    pub fn with_top_k_fraction(mut self, k: f64) -> Result<Self> {
        check(
            "top_k_fraction (sign_k)",
            k,
            "(0, 0.25]",
            k > 0.0 && k <= 0.25,
        )?;
        self.top_k_fraction = k;
        Ok(self)
    }

    /// Sets the selection budget ε (`sign_eps`). Domain (0, 100].
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] outside the domain (NaN included).
    pub fn with_epsilon(mut self, epsilon: f64) -> Result<Self> {
        check(
            "epsilon (sign_eps)",
            epsilon,
            "(0, 100]",
            epsilon > 0.0 && epsilon <= 100.0,
        )?;
        self.epsilon = Epsilon::new(epsilon)?;
        Ok(self)
    }

    /// Sets the ratio used by the output-dimension search (`sign_thr_ratio`). Domain
    /// [0.5, 1].
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] outside the domain (NaN included).
    pub fn with_threshold_ratio(mut self, ratio: f64) -> Result<Self> {
        check(
            "threshold_ratio (sign_thr_ratio)",
            ratio,
            "[0.5, 1]",
            (0.5..=1.0).contains(&ratio),
        )?;
        self.threshold_ratio = ratio;
        Ok(self)
    }

    /// Sets the fallback global learning rate (`sign_global_lr`), used by the server when
    /// fewer than 5 % of the expected clients sent a MagRR bit. Domain: finite, > 0.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] outside the domain (NaN and +∞ included).
    pub fn with_global_learning_rate(mut self, lr: f64) -> Result<Self> {
        check(
            "global_learning_rate (sign_global_lr)",
            lr,
            "finite and > 0",
            lr.is_finite() && lr > 0.0,
        )?;
        self.global_learning_rate = lr;
        Ok(self)
    }

    /// Sets the output dimension h (`sign_dim_out`); 0 means "search h". Domain [0, 50].
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] above 50.
    pub fn with_output_dimension(mut self, h: u32) -> Result<Self> {
        check(
            "output_dimension (sign_dim_out)",
            f64::from(h),
            "[0, 50]",
            h <= 50,
        )?;
        self.output_dimension = h;
        Ok(self)
    }

    /// Sets the MagRR budget ε_RR (upstream hard-codes 5). Domain: finite, > 0.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] outside the domain.
    pub fn with_magrr_epsilon(mut self, epsilon: f64) -> Result<Self> {
        check(
            "magrr_epsilon",
            epsilon,
            "finite and > 0",
            epsilon.is_finite() && epsilon > 0.0,
        )?;
        self.magrr_epsilon = Epsilon::new(epsilon)?;
        Ok(self)
    }

    /// Sets the arithmetic profile.
    #[must_use]
    pub fn with_profile(mut self, profile: Profile) -> Self {
        self.profile = profile;
        self
    }

    /// The top-k fraction k.
    #[must_use]
    pub fn top_k_fraction(&self) -> f64 {
        self.top_k_fraction
    }

    /// The selection budget ε as given.
    #[must_use]
    pub fn epsilon(&self) -> Epsilon {
        self.epsilon
    }

    /// The ε the selection actually uses: as given for [`Profile::Exact`], rounded to f32
    /// for [`Profile::MindSporeCompatible`] (upstream sends it as a float).
    #[must_use]
    pub fn effective_epsilon(&self) -> f64 {
        match self.profile {
            Profile::Exact => self.epsilon.value(),
            Profile::MindSporeCompatible => f64::from(self.epsilon.value() as f32),
        }
    }

    /// The threshold ratio.
    #[must_use]
    pub fn threshold_ratio(&self) -> f64 {
        self.threshold_ratio
    }

    /// The fallback global learning rate.
    #[must_use]
    pub fn global_learning_rate(&self) -> f64 {
        self.global_learning_rate
    }

    /// The configured output dimension (0 = search).
    #[must_use]
    pub fn output_dimension(&self) -> u32 {
        self.output_dimension
    }

    /// The MagRR budget ε_RR.
    #[must_use]
    pub fn magrr_epsilon(&self) -> Epsilon {
        self.magrr_epsilon
    }

    /// The arithmetic profile.
    #[must_use]
    pub fn profile(&self) -> Profile {
        self.profile
    }
}

/// Something the caller should know that is not an error.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Warning {
    /// k·d ≤ 50: the top-k set is small, so the selection carries little about the update
    /// (upstream's docs ask for k·d > 50).
    SmallTopK {
        /// k·d.
        k_times_d: f64,
    },
    /// MindSpore-compatible client: the received r_est was not in [0, 1) and was replaced
    /// by 1, as upstream's client does (the server keeps its own value).
    EstimateClamped {
        /// The received value.
        received: f64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_upstream_code_defaults() {
        let p = Params::default();
        assert_eq!(p.top_k_fraction(), 0.01);
        assert_eq!(p.epsilon().value(), 100.0);
        assert_eq!(p.threshold_ratio(), 0.6);
        assert_eq!(p.global_learning_rate(), 0.1);
        assert_eq!(p.output_dimension(), 0);
        assert_eq!(p.magrr_epsilon().value(), 5.0);
        assert_eq!(p.profile(), Profile::Exact);
    }

    #[test]
    fn domains_are_upstream_domains() {
        let p = Params::default();
        for k in [0.0, -0.1, 0.2500001, f64::NAN, f64::INFINITY] {
            let e = p.with_top_k_fraction(k).unwrap_err();
            assert!(e.to_string().contains("sign_k"), "{e}");
            assert!(e.to_string().contains("(0, 0.25]"), "{e}");
        }
        assert!(p.with_top_k_fraction(0.25).is_ok());
        assert!(p.with_top_k_fraction(1e-9).is_ok());
        for eps in [0.0, 100.0001, f64::NAN, -1.0] {
            let e = p.with_epsilon(eps).unwrap_err();
            assert!(e.to_string().contains("(0, 100]"), "{e}");
        }
        assert!(p.with_epsilon(100.0).is_ok());
        for r in [0.4999, 1.0001, f64::NAN] {
            assert!(p.with_threshold_ratio(r).is_err());
        }
        assert!(p.with_threshold_ratio(0.5).is_ok() && p.with_threshold_ratio(1.0).is_ok());
        for lr in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(p.with_global_learning_rate(lr).is_err());
        }
        assert!(p.with_output_dimension(50).is_ok());
        let e = p.with_output_dimension(51).unwrap_err();
        assert!(e.to_string().contains("[0, 50]"), "{e}");
        for e in [0.0, f64::NAN, f64::INFINITY, -5.0] {
            assert!(p.with_magrr_epsilon(e).is_err());
        }
    }

    #[test]
    fn compatible_profile_rounds_epsilon_to_f32() {
        let p = Params::default()
            .with_epsilon(0.1)
            .unwrap()
            .with_profile(Profile::MindSporeCompatible);
        assert_eq!(p.effective_epsilon(), f64::from(0.1f32));
        assert_eq!(p.with_profile(Profile::Exact).effective_epsilon(), 0.1);
    }
}
