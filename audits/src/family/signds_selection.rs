//! `signds-selection`: SignDS's dimension selection (fl-signds `SelectionLaw`, Exact
//! profile) on three top-k sets: the first K indices, the last K (disjoint from the first
//! when 2K ≤ d: the pair that reaches ε) and K indices spread over 0..d (crossing the
//! sampler's 64-bit bitset words).

use fl_ldp::{FiniteOutputs, Mechanism};
use fl_signds::{Profile, SelectionLaw};
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{EPS, Family, Law, MechanismInfo, Param, Reader};
use crate::{
    analysis::signds::SelectionAudit,
    error::{AuditError, Result},
    protocol::{OutputKind, Outputs},
    source::{Accumulate, Feed},
    suite::Params,
    tally::{Data, Draws, SERIAL_ALPHABET, SerialPairs},
};

/// The largest number of output sets C(d, h) whose histogram (and explicit law) an audit
/// keeps: the `sets` and `epsilon` tests of `signds-selection` need C(d, h) ≤ this.
pub(crate) const MAX_SET_CELLS: usize = 1 << 16;

/// The selection at ε with its audit's top-k sets.
#[derive(Debug, Clone)]
pub(crate) struct Selection {
    law: SelectionLaw,
    /// The labelled top-k sets.
    sets: Vec<(String, Vec<u32>)>,
    /// What an external mechanism is sent: the set (`top-k`) or an update (`update`).
    input_form: &'static str,
}

impl Family for Selection {
    const INFO: MechanismInfo = MechanismInfo {
        name: "signds-selection",
        description: "SignDS dimension selection on chosen top-k sets (fl-signds SelectionLaw, exact profile)",
        params: &[
            EPS,
            Param {
                key: "dim",
                option: "dim",
                required: true,
                what: "the dimension d, an integer from 2 to 1048576",
            },
            Param {
                key: "top_k",
                option: "top-k",
                required: true,
                what: "K, the size of the top-k set, an integer from 1 to d",
            },
            Param {
                key: "output_dim",
                option: "output-dim",
                required: true,
                what: "h, the indices selected, an integer from 1 to min(d, 100)",
            },
            Param {
                key: "selection_input",
                option: "selection-input",
                required: false,
                what: "\"top-k\" (send the top-k set, the default) or \"update\" (send an update vector whose K largest values are the set)",
            },
        ],
        tests: &["nu", "boost", "inclusion", "sets", "epsilon", "serial"],
    };
    type Output = Vec<u32>;
    type Drawer = Vec<u32>;
    type Observer = SelectionAccumulator;

    fn parse(params: &Params) -> Result<Self> {
        let r = Reader::new(params, &Self::INFO);
        let eps = r.epsilon()?.value();
        let d = r.int("dim", 2, 1 << 20)?;
        let k = r.int("top_k", 1, d as u64)?;
        let h = r.int("output_dim", 1, d.min(100) as u64)?;
        let t = fl_signds::law::threshold(k, d, h, eps, Profile::Exact)?;
        let law = SelectionLaw::new(k, d, h, t, eps, Profile::Exact)?;
        let first: Vec<u32> = (0..k as u32).collect();
        let last: Vec<u32> = ((d - k) as u32..d as u32).collect();
        let spread: Vec<u32> = (0..k).map(|i| (i * d / k) as u32).collect();
        Ok(Self {
            law,
            sets: vec![
                ("first".into(), first),
                ("last".into(), last),
                ("spread".into(), spread),
            ],
            input_form: r.choice("selection_input", &["top-k", "update"])?,
        })
    }

    fn law(&self) -> Result<Law> {
        let law = &self.law;
        let sets = if self.keeps_sets() {
            Some(
                self.sets
                    .iter()
                    .map(|(_, s)| law.output_probabilities(s))
                    .collect::<fl_ldp::Result<Vec<_>>>()?,
            )
        } else {
            None
        };
        Ok(Law::Selection(SelectionAudit {
            dim: law.dimension(),
            output_dim: law.output_dimension(),
            threshold: law.threshold(),
            nu: law.probabilities().to_vec(),
            inputs: self
                .sets
                .iter()
                .map(|(l, s)| (l.clone(), self.request(s), s.clone()))
                .collect(),
            sets,
            epsilon: Some(law.privacy().epsilon),
        }))
    }

    /// h distinct indices in 0..d.
    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(Some(OutputKind::IndexSet {
            dim: self.law.dimension(),
            size: self.law.output_dimension(),
        }))
    }

    fn observer(&self, input: usize) -> Result<SelectionAccumulator> {
        let (_, set) = self
            .sets
            .get(input)
            .ok_or_else(|| AuditError::Mechanism(format!("no input number {input}")))?;
        SelectionAccumulator::new(&self.law, set, self.keeps_sets())
    }

    fn drawer(&self, input: usize) -> Result<Vec<u32>> {
        Ok(self
            .sets
            .get(input)
            .map(|(_, s)| s.clone())
            .unwrap_or_default())
    }

    fn draw(&self, set: &mut Vec<u32>, rng: &mut ChaCha20Rng) -> Result<Vec<u32>> {
        Ok(self.law.sample(set, rng)?)
    }
}

impl Selection {
    /// Whether the audit keeps the histogram of whole output sets (C(d, h) ≤
    /// [`MAX_SET_CELLS`]).
    fn keeps_sets(&self) -> bool {
        self.sets
            .first()
            .is_some_and(|(_, s)| self.law.output_count(s).is_ok_and(|c| c <= MAX_SET_CELLS))
    }

    /// What an external selection is sent for the top-k set `set`: the set itself (the
    /// default, `selection_input` = `"top-k"`), or (`"update"`) `{"update": u}` with an
    /// update of `dim` distinct values whose K largest are exactly the set's indices
    /// (u_j = 1 + j/d inside, −(1 + j/d) outside).
    fn request(&self, set: &[u32]) -> serde_json::Value {
        if self.input_form == "update" {
            let dim = self.law.dimension();
            let mut u: Vec<f64> = (0..dim).map(|j| -(1.0 + j as f64 / dim as f64)).collect();
            for &j in set {
                if let Some(x) = u.get_mut(j as usize) {
                    *x = -*x;
                }
            }
            json!({ "update": u })
        } else {
            json!(set)
        }
    }
}

/// Counts one selection output after another in [`SelectionAudit`]'s layout (ν histogram,
/// index hits, whole output sets when kept), with ν as the serial symbol.
#[derive(Clone)]
pub(crate) struct SelectionAccumulator {
    law: SelectionLaw,
    in_set: Vec<bool>,
    keeps_sets: bool,
    counts: Vec<u64>,
    serial: SerialPairs,
}

impl SelectionAccumulator {
    /// For the top-k set `set` under `law`.
    pub(crate) fn new(law: &SelectionLaw, set: &[u32], keeps_sets: bool) -> Result<Self> {
        let (d, h) = (law.dimension(), law.output_dimension());
        let set_cells = if keeps_sets {
            law.output_count(&set.to_vec())?
        } else {
            0
        };
        let mut in_set = vec![false; d];
        for &j in set {
            if let Some(b) = in_set.get_mut(j as usize) {
                *b = true;
            }
        }
        Ok(Self {
            law: law.clone(),
            in_set,
            keeps_sets,
            counts: vec![0; h + 1 + d + set_cells],
            serial: SerialPairs::new(1, (h + 1).min(SERIAL_ALPHABET)),
        })
    }

    /// Adds one output set; an index outside 0..d, a repeated index or a set of the wrong
    /// size is an error (a malformed output, not a sample of the law).
    pub(crate) fn add_set(&mut self, out: &[u32]) -> Result<()> {
        let (d, h) = (self.law.dimension(), self.law.output_dimension());
        if out.len() != h {
            return Err(AuditError::Mechanism(format!(
                "a selection output has {} indices, the law draws {h}",
                out.len()
            )));
        }
        let mut nu = 0;
        for &j in out {
            let j = j as usize;
            if j >= d {
                return Err(AuditError::Mechanism(format!(
                    "a selection output holds index {j}, the dimension is {d}"
                )));
            }
            nu += usize::from(self.in_set[j]);
            self.counts[h + 1 + j] += 1;
        }
        self.counts[nu] += 1;
        if self.keeps_sets {
            // fl-signds draws sorted sets; an external mechanism may answer in any order.
            let index = if out.windows(2).all(|w| w[0] < w[1]) {
                self.law.output_index(&out.to_vec())?
            } else {
                let mut sorted = out.to_vec();
                sorted.sort_unstable();
                if sorted.windows(2).any(|w| w[0] == w[1]) {
                    return Err(AuditError::Mechanism(
                        "a selection output repeats an index".into(),
                    ));
                }
                self.law.output_index(&sorted)?
            };
            self.counts[h + 1 + d + index] += 1;
        }
        self.serial.push(0, nu);
        Ok(())
    }
}

impl Accumulate<Vec<u32>> for SelectionAccumulator {
    fn add(&mut self, out: &Vec<u32>) -> Result<()> {
        self.add_set(out)
    }

    fn finish(self) -> Draws {
        Draws {
            data: Data::Counts(self.counts),
            serial: self.serial,
        }
    }
}

impl Feed for SelectionAccumulator {
    fn feed(&mut self, outputs: &Outputs) -> Result<()> {
        let Outputs::Sets(sets) = outputs else {
            return Err(AuditError::Mechanism(
                "the external outputs are not index sets".into(),
            ));
        };
        for s in sets {
            self.add_set(s)?;
        }
        Ok(())
    }

    fn finish_boxed(self: Box<Self>) -> Draws {
        self.finish()
    }
}

/// Tests of `signds-selection` that need the explicit law over output sets.
pub(crate) fn check_tests(law: &Law, tests: &[String]) -> Result<()> {
    if let Law::Selection(l) = law
        && l.sets.is_none()
        && let Some(t) = tests.iter().find(|t| *t == "sets" || *t == "epsilon")
    {
        return Err(AuditError::usage(format!(
            "test `{t}` of signds-selection needs at most {MAX_SET_CELLS} output sets C(dim, output_dim)"
        )));
    }
    Ok(())
}
