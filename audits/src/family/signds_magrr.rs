//! `signds-magrr`: MagRR's randomizer as the SignDS client holds it (`Client::magrr`,
//! fl-ldp's binary RR at ε = ε_RR): the law of the reported bit given the true bit.

use fl_ldp::{BinaryRandomizedResponse, Epsilon};
use fl_signds::{Client, Params as SignParams};

use super::{EPS, MechanismInfo, rr_binary::Variant};
use crate::error::Result;

/// MagRR at ε_RR (the suite's `eps`), as a binary RR family.
pub(crate) struct MagRr;

impl Variant for MagRr {
    const INFO: MechanismInfo = MechanismInfo {
        name: "signds-magrr",
        description: "SignDS MagRR randomizer as the client holds it (binary RR at eps = eps_RR)",
        params: &[EPS],
        tests: &["cells", "epsilon", "learned", "serial"],
    };

    fn mechanism(eps: Epsilon) -> Result<BinaryRandomizedResponse> {
        let p = SignParams::default().with_magrr_epsilon(eps.value())?;
        // d = 100 with the default k = 0.01: K = 1, the smallest valid client.
        Ok(*Client::new(p, 100)?.magrr())
    }
}
