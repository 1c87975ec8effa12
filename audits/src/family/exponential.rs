//! `exponential`: fl-ldp's exponential mechanism on a utility vector u and its worst-case
//! neighbour u′ for the claimed neighbouring relation.

use fl_ldp::{Categorical, ExponentialForm, ExponentialMechanism};
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{EPS, Family, Law, MechanismInfo, Param, Reader, finite_law, rr_kary::class_space};
use crate::{
    analysis::learned::LearnedSpec, error::Result, protocol::OutputKind, report::Branch,
    source::ClassAccumulator, suite::Params,
};

/// The exponential mechanism at ε and its two neighbouring utility vectors.
#[derive(Debug, Clone)]
pub(crate) struct Exponential {
    m: ExponentialMechanism,
    /// u and u′.
    inputs: Vec<Vec<f64>>,
}

/// The exponential mechanism's parameters after ε.
const PARAMS: &[Param] = &[
    EPS,
    Param {
        key: "utilities",
        option: "utilities",
        required: true,
        what: "a non-empty array of finite numbers (the candidates' utilities)",
    },
    Param {
        key: "sensitivity",
        option: "sensitivity",
        required: false,
        what: "the utility sensitivity, a number > 0 (default 1)",
    },
    Param {
        key: "form",
        option: "form",
        required: false,
        what: "\"standard\" (P proportional to exp(eps u / (2 du)), the default) or \"monotone\" (exp(eps u / du))",
    },
];

impl Family for Exponential {
    const INFO: MechanismInfo = MechanismInfo {
        name: "exponential",
        description: "exponential mechanism over a utility vector and its worst-case neighbour (fl-ldp ExponentialMechanism)",
        params: PARAMS,
        tests: &["cells", "chi-square", "epsilon", "learned", "serial"],
    };
    type Output = usize;
    type Drawer = Categorical;
    type Observer = ClassAccumulator;

    /// u and its worst-case neighbour u′ for the claimed relation (‖u − u′‖∞ ≤ Δ), built
    /// around the lowest-utility candidate j (the first one when several tie):
    ///
    /// - standard form, P(o) ∝ exp(ε·u(o)/(2Δ)): u′(j) = u(j) + Δ and u′(o) = u(o) − Δ for
    ///   every other o, so P[j|u′]/P[j|u] = e^(ε/2)·Z(u)/Z(u′) with Z(u′) ≥ e^(−ε/2)·Z(u):
    ///   the ratio approaches e^ε as j's share of Z(u) shrinks;
    /// - monotone form (utilities move in one direction between neighbours), P(o) ∝
    ///   exp(ε·u(o)/Δ): u′(j) = u(j) + Δ, the rest unchanged, with the same limit e^ε.
    ///
    /// The realised ε at (u, u′) — what the report shows beside the claim — is below ε by
    /// j's share of the normaliser; no pair of neighbours reaches ε exactly at finite
    /// utilities.
    fn parse(params: &Params) -> Result<Self> {
        let r = Reader::new(params, &Self::INFO);
        let eps = r.epsilon()?;
        let u = r.f64_list("utilities")?;
        let sensitivity = match r.optional("sensitivity") {
            None => 1.0,
            Some(_) => r.number("sensitivity")?,
        };
        let form = match r.choice("form", &["standard", "monotone"])? {
            "monotone" => ExponentialForm::Monotone,
            _ => ExponentialForm::Standard,
        };
        let m = ExponentialMechanism::new(eps, sensitivity, form)?;
        let low = u
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .map_or(0, |(j, _)| j);
        let v: Vec<f64> = u
            .iter()
            .enumerate()
            .map(|(o, &x)| match form {
                _ if o == low => x + sensitivity,
                ExponentialForm::Standard => x - sensitivity,
                _ => x,
            })
            .collect();
        Ok(Self {
            m,
            inputs: vec![u, v],
        })
    }

    fn law(&self) -> Result<Law> {
        let refs: Vec<&[f64]> = self.inputs.iter().map(Vec::as_slice).collect();
        Ok(Law::Finite(finite_law(
            &self.m,
            &refs,
            self.inputs.iter().map(|u| json!(u)).collect(),
        )?))
    }

    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(Some(OutputKind::Class(self.candidates())))
    }

    fn observer(&self, _: usize) -> Result<ClassAccumulator> {
        Ok(ClassAccumulator::new(self.candidates()))
    }

    fn drawer(&self, input: usize) -> Result<Categorical> {
        Ok(self
            .m
            .categorical(self.inputs.get(input).map_or(&[][..], Vec::as_slice))?)
    }

    fn draw(&self, c: &mut Categorical, rng: &mut ChaCha20Rng) -> Result<usize> {
        Ok(c.sample(rng))
    }

    fn event_space(&self, law: &Law) -> Result<Option<LearnedSpec>> {
        Ok(class_space(law))
    }

    fn coverage(&self) -> Vec<Branch> {
        let labels: Vec<String> = self
            .inputs
            .iter()
            .map(|u| serde_json::Value::from(u.clone()).to_string())
            .collect();
        vec![
            Branch::new("the utility vector u", labels.first().cloned()),
            Branch::new(
                "its worst-case neighbour u' (the lowest-utility candidate moved up by the sensitivity, the rest as the form allows)",
                labels.get(1).cloned(),
            ),
        ]
    }
}

impl Exponential {
    fn candidates(&self) -> usize {
        self.inputs.first().map_or(0, Vec::len)
    }
}
