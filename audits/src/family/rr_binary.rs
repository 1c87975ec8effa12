//! `rr-binary`: fl-ldp's binary randomized response on the true bits 0 and 1 — and, as a
//! [`Variant`], every family whose mechanism is a binary RR (`signds-magrr`).

use std::marker::PhantomData;

use fl_ldp::{BinaryRandomizedResponse, Epsilon};
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{EPS, Family, Law, MechanismInfo, Reader, each_input, finite_law, finite_space};
use crate::{
    analysis::learned::LearnedSpec, error::Result, protocol::OutputKind, report::Branch,
    source::ClassAccumulator, suite::Params,
};

/// The law of binary RR `m` on the true bits 0 and 1.
pub(crate) fn binary_law(m: &BinaryRandomizedResponse) -> Result<Law> {
    Ok(Law::Finite(finite_law(
        m,
        &[&false, &true],
        vec![json!(0), json!(1)],
    )?))
}

/// A family whose mechanism is a binary randomized response built from ε.
pub(crate) trait Variant: 'static {
    /// The family.
    const INFO: MechanismInfo;
    /// The mechanism at the claimed ε.
    ///
    /// # Errors
    /// An ε the mechanism rejects.
    fn mechanism(eps: Epsilon) -> Result<BinaryRandomizedResponse>;
}

/// fl-ldp's binary RR itself.
pub(crate) struct Plain;

impl Variant for Plain {
    const INFO: MechanismInfo = MechanismInfo {
        name: "rr-binary",
        description: "binary randomized response (fl-ldp BinaryRandomizedResponse)",
        params: &[EPS],
        tests: &["cells", "epsilon", "learned", "serial"],
    };
    fn mechanism(eps: Epsilon) -> Result<BinaryRandomizedResponse> {
        Ok(BinaryRandomizedResponse::new(eps))
    }
}

/// Binary randomized response at ε.
pub(crate) struct RrBinary<V = Plain> {
    m: BinaryRandomizedResponse,
    variant: PhantomData<fn() -> V>,
}

impl<V: Variant> Family for RrBinary<V> {
    const INFO: MechanismInfo = V::INFO;
    type Output = usize;
    type Drawer = bool;
    type Observer = ClassAccumulator;

    fn parse(params: &Params) -> Result<Self> {
        Ok(Self {
            m: V::mechanism(Reader::new(params, &Self::INFO).epsilon()?)?,
            variant: PhantomData,
        })
    }

    fn law(&self) -> Result<Law> {
        binary_law(&self.m)
    }

    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(Some(OutputKind::Class(2)))
    }

    fn observer(&self, _: usize) -> Result<ClassAccumulator> {
        Ok(ClassAccumulator::new(2))
    }

    fn drawer(&self, input: usize) -> Result<bool> {
        Ok(input == 1)
    }

    fn draw(&self, bit: &mut bool, rng: &mut ChaCha20Rng) -> Result<usize> {
        Ok(usize::from(self.m.randomize(*bit, rng)))
    }

    fn event_space(&self, law: &Law) -> Result<Option<LearnedSpec>> {
        Ok(binary_space(law))
    }

    fn coverage(&self) -> Vec<Branch> {
        binary_coverage()
    }
}

/// The learned event of a binary output: the reported bit.
pub(crate) fn binary_space(law: &Law) -> Option<LearnedSpec> {
    match law {
        Law::Finite(l) => finite_space(l, "the reported bit"),
        _ => None,
    }
}

/// The branches of binary randomized response: the true bit 0 and 1.
pub(crate) fn binary_coverage() -> Vec<Branch> {
    each_input("true bit", &["0".into(), "1".into()])
}
