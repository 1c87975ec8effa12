//! `rr-kary`: fl-ldp's k-ary randomized response (GRR) on every true class.

use fl_ldp::KaryRandomizedResponse;
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{EPS, Family, Law, MechanismInfo, Param, Reader, finite_law, finite_space};
use crate::{
    analysis::learned::LearnedSpec, error::Result, protocol::OutputKind, report::Branch,
    source::ClassAccumulator, suite::Params,
};

/// The number of classes k of `rr-kary` and the frequency oracles.
pub(crate) const K: Param = Param {
    key: "k",
    option: "classes",
    required: true,
    what: "the number of classes k, an integer from 2 to 65536",
};

/// The law of k-ary RR `m` on every true class 0..k.
pub(crate) fn kary_law(m: &KaryRandomizedResponse, k: usize) -> Result<Law> {
    let xs: Vec<usize> = (0..k).collect();
    let refs: Vec<&usize> = xs.iter().collect();
    Ok(Law::Finite(finite_law(
        m,
        &refs,
        xs.iter().map(|&c| json!(c)).collect(),
    )?))
}

/// k-ary randomized response at ε over k classes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RrKary {
    m: KaryRandomizedResponse,
    k: usize,
}

impl Family for RrKary {
    const INFO: MechanismInfo = MechanismInfo {
        name: "rr-kary",
        description: "k-ary randomized response / GRR (fl-ldp KaryRandomizedResponse)",
        params: &[EPS, K],
        tests: &["cells", "chi-square", "epsilon", "learned", "serial"],
    };
    type Output = usize;
    type Drawer = usize;
    type Observer = ClassAccumulator;

    fn parse(params: &Params) -> Result<Self> {
        let r = Reader::new(params, &Self::INFO);
        let k = r.int("k", 2, 1 << 16)?;
        Ok(Self {
            m: KaryRandomizedResponse::new(r.epsilon()?, k)?,
            k,
        })
    }

    fn law(&self) -> Result<Law> {
        kary_law(&self.m, self.k)
    }

    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(Some(OutputKind::Class(self.k)))
    }

    fn observer(&self, _: usize) -> Result<ClassAccumulator> {
        Ok(ClassAccumulator::new(self.k))
    }

    fn drawer(&self, input: usize) -> Result<usize> {
        Ok(input)
    }

    fn draw(&self, class: &mut usize, rng: &mut ChaCha20Rng) -> Result<usize> {
        Ok(self.m.randomize(*class, rng)?)
    }

    fn event_space(&self, law: &Law) -> Result<Option<LearnedSpec>> {
        Ok(class_space(law))
    }

    fn coverage(&self) -> Vec<Branch> {
        kary_coverage(self.k)
    }
}

/// The learned event of a class output: the reported class.
pub(crate) fn class_space(law: &Law) -> Option<LearnedSpec> {
    match law {
        Law::Finite(l) => finite_space(l, "the reported class"),
        _ => None,
    }
}

/// The branches of k-ary randomized response: every class as the true class (the kept
/// output and each lie of a class are the other classes' branches).
pub(crate) fn kary_coverage(k: usize) -> Vec<Branch> {
    vec![Branch::new(
        format!("true class c, for every c in 0..{k}"),
        (0..k).map(|c| c.to_string()),
    )]
}
