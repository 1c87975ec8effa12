//! `label-dp-binary` and `label-dp-onehot`: LabelDP through its batch API
//! (`LabelDp::privatize`), on binary labels (shape `[n]`) and on one-hot labels (shape
//! `[n, classes]`, each output row read back as the class of its single 1).

use super::{
    Buffered, EPS, Family, Law, MechanismInfo, Param, Reader,
    rr_binary::{binary_coverage, binary_law, binary_space},
    rr_kary::{class_space, kary_coverage, kary_law},
};
use crate::{
    analysis::learned::LearnedSpec,
    error::{AuditError, Result},
    protocol::OutputKind,
    report::Branch,
    source::ClassAccumulator,
    suite::Params,
};
use fl_ldp::LabelDp;
use rand::rngs::ChaCha20Rng;

/// Labels per privatize call (bounded memory).
const LABEL_BATCH: usize = 1 << 14;

/// LabelDP on binary labels.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LabelDpBinary {
    m: LabelDp,
}

/// The drawing state of one input: its label batch and the outputs not yet handed out.
pub(crate) struct LabelBatch {
    labels: Vec<u8>,
    out: Buffered<usize>,
}

impl Family for LabelDpBinary {
    const INFO: MechanismInfo = MechanismInfo {
        name: "label-dp-binary",
        description: "LabelDP on binary labels, through LabelDp::privatize (shape [n])",
        params: &[EPS],
        tests: &["cells", "epsilon", "learned", "serial"],
    };
    type Output = usize;
    type Drawer = LabelBatch;
    type Observer = ClassAccumulator;

    fn parse(params: &Params) -> Result<Self> {
        Ok(Self {
            m: LabelDp::new(Reader::new(params, &Self::INFO).epsilon()?),
        })
    }

    fn law(&self) -> Result<Law> {
        binary_law(self.m.binary())
    }

    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(Some(OutputKind::Class(2)))
    }

    fn observer(&self, _: usize) -> Result<ClassAccumulator> {
        Ok(ClassAccumulator::new(2))
    }

    fn drawer(&self, input: usize) -> Result<LabelBatch> {
        Ok(LabelBatch {
            labels: vec![u8::from(input == 1); LABEL_BATCH],
            out: Buffered::new(),
        })
    }

    fn draw(&self, b: &mut LabelBatch, rng: &mut ChaCha20Rng) -> Result<usize> {
        let m = self.m;
        let labels = &b.labels;
        b.out.next(|| {
            let out = m.privatize(labels, &[LABEL_BATCH], rng)?;
            Ok(out.into_iter().map(|y| usize::from(y == 1)).collect())
        })
    }

    fn event_space(&self, law: &Law) -> Result<Option<LearnedSpec>> {
        Ok(binary_space(law))
    }

    fn coverage(&self) -> Vec<Branch> {
        binary_coverage()
    }
}

/// The number of classes of `label-dp-onehot`.
const CLASSES: Param = Param {
    key: "classes",
    option: "classes",
    required: true,
    what: "the number of classes, an integer from 2 to 65536",
};

/// LabelDP on one-hot labels.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LabelDpOneHot {
    m: LabelDp,
    k: usize,
}

impl Family for LabelDpOneHot {
    const INFO: MechanismInfo = MechanismInfo {
        name: "label-dp-onehot",
        description: "LabelDP on one-hot labels, through LabelDp::privatize (shape [n, classes])",
        params: &[EPS, CLASSES],
        tests: &["cells", "chi-square", "epsilon", "learned", "serial"],
    };
    type Output = usize;
    type Drawer = LabelBatch;
    type Observer = ClassAccumulator;

    fn parse(params: &Params) -> Result<Self> {
        let r = Reader::new(params, &Self::INFO);
        let k = r.int("classes", 2, 1 << 16)?;
        Ok(Self {
            m: LabelDp::new(r.epsilon()?),
            k,
        })
    }

    fn law(&self) -> Result<Law> {
        kary_law(&self.m.one_hot(self.k)?, self.k)
    }

    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(Some(OutputKind::Class(self.k)))
    }

    fn observer(&self, _: usize) -> Result<ClassAccumulator> {
        Ok(ClassAccumulator::new(self.k))
    }

    fn drawer(&self, input: usize) -> Result<LabelBatch> {
        let k = self.k;
        let rows = (LABEL_BATCH / k).max(1);
        let mut labels = vec![0u8; rows * k];
        for r in 0..rows {
            if let Some(l) = labels.get_mut(r * k + input) {
                *l = 1;
            }
        }
        Ok(LabelBatch {
            labels,
            out: Buffered::new(),
        })
    }

    fn draw(&self, b: &mut LabelBatch, rng: &mut ChaCha20Rng) -> Result<usize> {
        let (m, k) = (self.m, self.k);
        let labels = &b.labels;
        b.out.next(|| {
            let rows = labels.len() / k;
            let out = m.privatize(labels, &[rows, k], rng)?;
            // The whole row is the output: exactly one 1, or the mechanism is broken.
            out.chunks_exact(k)
                .map(|row| match row.iter().filter(|&&v| v != 0).count() {
                    1 => Ok(row.iter().position(|&v| v == 1).unwrap_or(k)),
                    ones => Err(AuditError::Mechanism(format!(
                        "LabelDp::privatize returned a one-hot row with {ones} non-zero entries"
                    ))),
                })
                .collect()
        })
    }

    fn event_space(&self, law: &Law) -> Result<Option<LearnedSpec>> {
        Ok(class_space(law))
    }

    /// The output is the whole one-hot row: a row without exactly one 1 is an error, so
    /// the class law is the row's joint law.
    fn coverage(&self) -> Vec<Branch> {
        kary_coverage(self.k)
    }
}
