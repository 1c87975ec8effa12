//! `rr-with-prior`: RR-with-prior for label DP (Ghazi et al. 2021; fl-ldp RrWithPrior) on
//! every true label.

use fl_ldp::{FiniteInputs, FiniteOutputs, RrWithPrior as Mechanism};
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{EPS, Family, Law, MechanismInfo, Param, Reader, finite_law, rr_kary::class_space};
use crate::{
    analysis::learned::LearnedSpec, error::Result, protocol::OutputKind, report::Branch,
    source::ClassAccumulator, suite::Params,
};

/// RR-with-prior at ε with a public prior over the labels.
#[derive(Debug, Clone)]
pub(crate) struct RrWithPrior {
    m: Mechanism,
    labels: Vec<usize>,
}

impl Family for RrWithPrior {
    const INFO: MechanismInfo = MechanismInfo {
        name: "rr-with-prior",
        description: "RR-with-prior for label DP (Ghazi et al. 2021; fl-ldp RrWithPrior)",
        params: &[
            EPS,
            Param {
                key: "prior",
                option: "prior",
                required: true,
                what: "an array of at least 2 non-negative numbers (the public prior over the labels)",
            },
        ],
        tests: &["cells", "chi-square", "epsilon", "learned", "serial"],
    };
    type Output = usize;
    type Drawer = usize;
    type Observer = ClassAccumulator;

    fn parse(params: &Params) -> Result<Self> {
        let r = Reader::new(params, &Self::INFO);
        let m = Mechanism::new(r.epsilon()?, &r.f64_list("prior")?)?;
        let labels = m.inputs()?;
        Ok(Self { m, labels })
    }

    fn law(&self) -> Result<Law> {
        let refs: Vec<&usize> = self.labels.iter().collect();
        Ok(Law::Finite(finite_law(
            &self.m,
            &refs,
            self.labels.iter().map(|&c| json!(c)).collect(),
        )?))
    }

    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(Some(OutputKind::Class(self.labels.len())))
    }

    fn observer(&self, _: usize) -> Result<ClassAccumulator> {
        Ok(ClassAccumulator::new(self.labels.len()))
    }

    fn drawer(&self, input: usize) -> Result<usize> {
        Ok(input)
    }

    fn draw(&self, label: &mut usize, rng: &mut ChaCha20Rng) -> Result<usize> {
        Ok(self.m.randomize(*label, rng)?)
    }

    fn event_space(&self, law: &Law) -> Result<Option<LearnedSpec>> {
        Ok(class_space(law))
    }

    /// A true label inside the prior's top-k′ set is randomized among the set; one outside
    /// is replaced by a uniform label of the set.
    fn coverage(&self) -> Vec<Branch> {
        let outputs: Vec<Vec<f64>> = self
            .labels
            .iter()
            .filter_map(|y| self.m.output_probabilities(y).ok())
            .collect();
        let (inside, outside): (Vec<usize>, Vec<usize>) = self.labels.iter().partition(|&&y| {
            outputs
                .iter()
                .any(|law| law.get(y).is_some_and(|&p| p > 0.0))
        });
        vec![
            Branch::new(
                "true label inside the top-k' set (randomized response among the set)",
                inside.iter().map(ToString::to_string),
            ),
            Branch::new(
                "true label outside the top-k' set (a uniform label of the set)",
                outside.iter().map(ToString::to_string),
            ),
        ]
    }
}
