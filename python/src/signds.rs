//! The native half of `fl_privacy.signds`: fl-signds' client encoder and server
//! aggregation, with the report bytes of its versioned wire format in between.

use fl_signds::{
    Broadcast, Client, Feedback, Params, Phase, Profile, Report, Round, Server, StepRule,
};
use numpy::{PyReadonlyArray1, PyReadwriteArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::ldp::{NativeSeededRng, master_rng};

/// An fl-signds error as a `ValueError` (its message names the parameter and its range).
fn err(e: fl_signds::Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// SignDS parameters from Python's keywords, one per upstream YAML key (None keeps
/// upstream's default): k, ε, thr_ratio, global_lr, dim_out, ε_RR, profile.
#[derive(FromPyObject)]
pub(crate) struct ParamArgs(
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<u32>,
    Option<f64>,
    String,
);

impl ParamArgs {
    /// The validated parameters.
    fn params(&self) -> PyResult<Params> {
        let Self(top_k_fraction, epsilon, threshold_ratio, global_lr, dim_out, magrr, profile) =
            self;
        let mut p = Params::default().with_profile(match profile.as_str() {
            "exact" => Profile::Exact,
            "mindspore" => Profile::MindSporeCompatible,
            other => {
                return Err(PyValueError::new_err(format!(
                    "profile must be \"exact\" or \"mindspore\", got {other:?}"
                )));
            }
        });
        if let Some(k) = top_k_fraction {
            p = p.with_top_k_fraction(*k).map_err(err)?;
        }
        if let Some(e) = epsilon {
            p = p.with_epsilon(*e).map_err(err)?;
        }
        if let Some(t) = threshold_ratio {
            p = p.with_threshold_ratio(*t).map_err(err)?;
        }
        if let Some(g) = global_lr {
            p = p.with_global_learning_rate(*g).map_err(err)?;
        }
        if let Some(h) = dim_out {
            p = p.with_output_dimension(*h).map_err(err)?;
        }
        if let Some(e) = magrr {
            p = p.with_magrr_epsilon(*e).map_err(err)?;
        }
        Ok(p)
    }
}

fn phase(name: &str) -> PyResult<Phase> {
    match name {
        "growth" => Ok(Phase::Growth),
        "shrink" => Ok(Phase::Shrink),
        other => Err(PyValueError::new_err(format!(
            "phase must be \"growth\" or \"shrink\", got {other:?}"
        ))),
    }
}

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Growth => "growth",
        Phase::Shrink => "shrink",
    }
}

/// A client report: (wire bytes, indices, sign, MagRR bit, selection ε, MagRR ε, warnings).
type Encoded<'py> = (
    Bound<'py, PyBytes>,
    Vec<u32>,
    i8,
    bool,
    f64,
    f64,
    Vec<String>,
);

/// A SignDS client for updates of one dimension.
#[pyclass(module = "fl_privacy._native", frozen)]
pub(crate) struct NativeSigndsClient {
    c: Client,
}

#[pymethods]
impl NativeSigndsClient {
    #[new]
    fn new(dimension: usize, params: ParamArgs) -> PyResult<Self> {
        Ok(Self {
            c: Client::new(params.params()?, dimension).map_err(err)?,
        })
    }

    /// (d, K, h, ν_th).
    fn law(&self) -> (usize, usize, usize, usize) {
        let l = self.c.law();
        (
            l.dimension(),
            l.top_k(),
            l.output_dimension(),
            l.threshold(),
        )
    }

    /// The (selection, MagRR) ε every report costs.
    fn privacy(&self) -> (f64, f64) {
        let p = self.c.privacy();
        (p.selection, p.magrr)
    }

    /// Encodes one update (float32) for the broadcast (r_est, phase); with `feedback` (a
    /// float32 array of length d, the error-feedback state, updated in place) through
    /// `Client::encode_with_feedback`.
    fn encode<'py>(
        &self,
        py: Python<'py>,
        update: PyReadonlyArray1<'py, f32>,
        r_est: f64,
        phase_: &str,
        rng: Option<&NativeSeededRng>,
        feedback: Option<PyReadwriteArray1<'py, f32>>,
    ) -> PyResult<Encoded<'py>> {
        let broadcast = Broadcast {
            r_est,
            phase: phase(phase_)?,
        };
        let x = update.as_slice()?;
        let mut rng = master_rng(rng)?;
        let out = match feedback {
            None => py
                .detach(|| self.c.encode(x, &broadcast, &mut rng))
                .map_err(err)?,
            Some(mut state) => {
                // The state lives with the caller between rounds (e.g. Flower's
                // Context.state on the client); the update rule is fl-signds'.
                let values = state.as_slice_mut()?;
                let mut fb = Feedback::from_values(values.to_vec()).map_err(err)?;
                let out = py
                    .detach(|| {
                        self.c
                            .encode_with_feedback(x, &broadcast, &mut fb, &mut rng)
                    })
                    .map_err(err)?;
                values.copy_from_slice(fb.values());
                out
            }
        };
        let r = &out.report;
        Ok((
            PyBytes::new(py, &r.encode()),
            r.indices().to_vec(),
            r.sign().value(),
            r.magrr_bit(),
            out.privacy.selection,
            out.privacy.magrr,
            out.warnings.iter().map(|w| format!("{w:?}")).collect(),
        ))
    }
}

/// The reports of one round.
#[pyclass(module = "fl_privacy._native")]
pub(crate) struct NativeRound {
    round: Option<Round>,
}

impl NativeRound {
    fn open(&mut self) -> PyResult<&mut Round> {
        self.round
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("this round is already finished"))
    }
}

#[pymethods]
impl NativeRound {
    /// Validates and adds one report's wire bytes with weight n_i.
    fn ingest(&mut self, report: &[u8], weight: u64) -> PyResult<()> {
        self.open()?.ingest_bytes(report, weight).map_err(err)
    }

    /// Reports accepted so far.
    fn accepted(&mut self) -> PyResult<usize> {
        Ok(self.open()?.accepted())
    }

    /// Σ n_i so far.
    fn total_weight(&mut self) -> PyResult<u64> {
        Ok(self.open()?.total_weight())
    }
}

/// The SignDS server of one model.
#[pyclass(module = "fl_privacy._native")]
pub(crate) struct NativeSigndsServer {
    s: Server,
}

#[pymethods]
impl NativeSigndsServer {
    #[new]
    fn new(
        dimension: usize,
        expected_clients: f64,
        step_rule: Option<&str>,
        server_learning_rate: Option<f64>,
        params: ParamArgs,
    ) -> PyResult<Self> {
        let p = params.params()?;
        let rule = match step_rule {
            None => StepRule::for_profile(p.profile()),
            Some("mean") => StepRule::Mean,
            Some("code") => StepRule::Code,
            Some("docs") => StepRule::Docs,
            Some(other) => {
                return Err(PyValueError::new_err(format!(
                    "step_rule must be \"mean\", \"code\" or \"docs\" (or None: the profile's), got {other:?}"
                )));
            }
        };
        let mut s = Server::new(p, dimension, expected_clients)
            .map_err(err)?
            .with_step_rule(rule);
        if let Some(eta) = server_learning_rate {
            s = s.with_server_learning_rate(eta).map_err(err)?;
        }
        Ok(Self { s })
    }

    /// The step rule's name.
    fn step_rule(&self) -> &'static str {
        match self.s.step_rule() {
            StepRule::Mean => "mean",
            StepRule::Code => "code",
            StepRule::Docs => "docs",
        }
    }

    /// (r_est, phase) for the next round's clients.
    fn broadcast(&self) -> (f64, &'static str) {
        let b = self.s.broadcast();
        (b.r_est, phase_name(b.phase))
    }

    /// The step g of the current round.
    fn step(&self) -> f64 {
        self.s.step()
    }

    /// Opens the current round.
    fn begin_round(&self) -> NativeRound {
        NativeRound {
            round: Some(self.s.begin_round()),
        }
    }

    /// Applies the round to `weights` (float32, in place) and advances the state machine:
    /// (accepted, Σ n_i, step, ones, zeros, transition, next r_est, next phase).
    #[allow(clippy::type_complexity)] // A plain tuple that Python turns into a NamedTuple.
    fn finish_round(
        &mut self,
        round: &mut NativeRound,
        mut weights: PyReadwriteArray1<'_, f32>,
    ) -> PyResult<(usize, u64, f64, u64, u64, String, f64, &'static str)> {
        let Some(r) = round.round.take() else {
            return Err(PyValueError::new_err("this round is already finished"));
        };
        let w = weights.as_slice_mut()?;
        let summary = match self.s.finish_round(r.clone(), w) {
            Ok(s) => s,
            Err(e) => {
                round.round = Some(r);
                return Err(err(e));
            }
        };
        Ok((
            summary.accepted,
            summary.total_weight,
            summary.step,
            summary.ones,
            summary.zeros,
            format!("{:?}", summary.transition).to_lowercase(),
            summary.next.r_est,
            phase_name(summary.next.phase),
        ))
    }
}

/// Decodes report bytes: (d, indices, sign, MagRR bit); ValueError when malformed.
#[pyfunction]
pub(crate) fn decode_signds_report(bytes: &[u8]) -> PyResult<(u32, Vec<u32>, i8, bool)> {
    let r = Report::decode(bytes).map_err(err)?;
    Ok((
        r.dimension(),
        r.indices().to_vec(),
        r.sign().value(),
        r.magrr_bit(),
    ))
}

/// Registers the SignDS classes.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeSigndsClient>()?;
    m.add_class::<NativeSigndsServer>()?;
    m.add_class::<NativeRound>()?;
    m.add_function(wrap_pyfunction!(decode_signds_report, m)?)?;
    Ok(())
}
