//! `signds-selection`: SignDS's dimension selection (fl-signds `SelectionLaw`, Exact
//! profile) on four top-k sets: the first K indices, the last K (disjoint from the first
//! when 2K ≤ d: the pair that reaches ε), K indices spread over 0..d (crossing the
//! sampler's 64-bit bitset words) and, for K ≥ 3, K indices at irregular positions (drawn
//! once from a fixed seed: uneven gaps, no arithmetic pattern).

use fl_ldp::{FiniteOutputs, Mechanism};
use fl_signds::{Profile, SelectionLaw};
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{EPS, Family, Law, MechanismInfo, Param, Reader, neighbour_pairs};
use crate::{
    analysis::{learned::LearnedSpec, signds::SelectionAudit},
    error::{AuditError, Result},
    protocol::{OutputKind, Outputs},
    report::Branch,
    source::{Accumulate, Feed, Observer, wrong_outputs},
    suite::Params,
    tally::{Data, Draws, MAX_EVENT_CELLS, SERIAL_ALPHABET, Streams},
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
        tests: &[
            "nu",
            "boost",
            "inclusion",
            "sets",
            "epsilon",
            "learned",
            "serial",
        ],
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
            ]
            .into_iter()
            // Uneven gaps need three indices at least.
            .chain((k >= 3).then(|| ("irregular".into(), irregular(k, d))))
            .collect(),
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
        let sets: Vec<Vec<u32>> = self.sets.iter().map(|(_, s)| s.clone()).collect();
        SelectionAccumulator::new(&self.law, &sets, input, self.keeps_sets())
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

    /// The output set (when C(d, h) ≤ 2¹⁶, with its exact law), else ν against each of
    /// the audit's top-k sets (features ν/h); every pair of top-k sets are neighbours.
    fn event_space(&self, law: &Law) -> Result<Option<LearnedSpec>> {
        let Law::Selection(l) = law else {
            return Ok(None);
        };
        let Some(claimed) = l.epsilon else {
            return Ok(None);
        };
        let h = l.output_dim;
        let pairs = neighbour_pairs(l.inputs.len());
        Ok(Some(match &l.sets {
            Some(laws) => LearnedSpec {
                cells: laws.first().map_or(0, Vec::len),
                cell_meaning: "the output set".into(),
                features: Vec::new(),
                claimed,
                pairs,
                laws: Some(laws.clone()),
            },
            None => {
                let m = nu_sets(h, l.inputs.len());
                let cells = nu_cells(h, l.inputs.len());
                LearnedSpec {
                    cells,
                    cell_meaning: format!(
                        "nu = |J ∩ S| against each of the first {m} audited top-k sets"
                    ),
                    features: (0..cells)
                        .map(|c| {
                            let mut rest = c;
                            (0..m)
                                .map(|_| {
                                    let nu = rest % (h + 1);
                                    rest /= h + 1;
                                    nu as f64 / h.max(1) as f64
                                })
                                .collect()
                        })
                        .collect(),
                    claimed,
                    pairs,
                    laws: None,
                }
            }
        }))
    }

    fn coverage(&self) -> Vec<Branch> {
        let form = if self.input_form == "update" {
            "sent as an update vector whose K largest values are the set"
        } else {
            "sent as the top-k set itself"
        };
        let mut b: Vec<Branch> = [
            ("top-k set: the first K indices", "first"),
            (
                "top-k set: the last K indices (disjoint from the first when 2K <= d)",
                "last",
            ),
            (
                "top-k set: K indices spread over 0..d (across 64-bit words)",
                "spread",
            ),
            (
                "top-k set: K indices at irregular positions (uneven gaps)",
                "irregular",
            ),
        ]
        .into_iter()
        .map(|(what, l)| Branch::new(what, [l.to_string()]))
        .collect();
        b.push(Branch::new(form, self.sets.iter().map(|(l, _)| l.clone())));
        b
    }

    fn stream_names(&self) -> &'static [&'static str] {
        &["index sum mod 16"]
    }
}

/// K distinct indices of 0..d at irregular positions, sorted: Floyd's sampling with a
/// SplitMix64 stream from a fixed seed (the same set in every run, chunk and shard).
fn irregular(k: usize, d: usize) -> Vec<u32> {
    let mut state = 0x1AE6_0BA5_u64;
    let mut next = |bound: usize| {
        state = crate::seeds::mix(state, 0x005E_1EC7);
        (state % bound.max(1) as u64) as usize
    };
    let mut chosen = std::collections::BTreeSet::new();
    for j in d.saturating_sub(k)..d {
        let t = next(j + 1);
        if !chosen.insert(t) {
            chosen.insert(j);
        }
    }
    chosen.into_iter().map(|j| j as u32).collect()
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

/// The serial and batch symbol of a selection output: the sum of its indices modulo 16
/// (any fixed function of the output gives a valid test; a near-uniform one gives it
/// power against a repeated output).
fn index_sum_symbol(out: &[u32]) -> usize {
    out.iter().map(|&j| j as usize).sum::<usize>() % SERIAL_ALPHABET
}

/// Counts one selection output after another in [`SelectionAudit`]'s layout (ν histogram,
/// index hits, whole output sets when kept); the serial and batch symbol is the index sum
/// modulo 16, the event cell the output set (when the sets are kept) or ν against each of
/// the audit's top-k sets.
#[derive(Clone)]
pub(crate) struct SelectionAccumulator {
    law: SelectionLaw,
    /// Membership in the top-k set of this input.
    in_set: Vec<bool>,
    /// Membership in each of the audit's top-k sets (for the event cell).
    audit_sets: Vec<Vec<bool>>,
    keeps_sets: bool,
    counts: Vec<u64>,
    streams: Streams,
}

fn membership(set: &[u32], d: usize) -> Vec<bool> {
    let mut in_set = vec![false; d];
    for &j in set {
        if let Some(b) = in_set.get_mut(j as usize) {
            *b = true;
        }
    }
    in_set
}

impl SelectionAccumulator {
    /// For the top-k set number `input` of `sets` under `law`.
    fn new(law: &SelectionLaw, sets: &[Vec<u32>], input: usize, keeps_sets: bool) -> Result<Self> {
        let (d, h) = (law.dimension(), law.output_dimension());
        let set = sets
            .get(input)
            .ok_or_else(|| AuditError::Mechanism(format!("no input number {input}")))?;
        let set_cells = if keeps_sets {
            law.output_count(set)?
        } else {
            0
        };
        let audit_sets: Vec<Vec<bool>> = sets.iter().map(|s| membership(s, d)).collect();
        let cells = if keeps_sets {
            set_cells
        } else {
            nu_cells(h, audit_sets.len())
        };
        Ok(Self {
            law: law.clone(),
            in_set: membership(set, d),
            audit_sets,
            keeps_sets,
            counts: vec![0; h + 1 + d + set_cells],
            streams: Streams::new(1, SERIAL_ALPHABET, SERIAL_ALPHABET, cells),
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
        let cell = if self.keeps_sets {
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
            index
        } else {
            nu_cell(out, &self.audit_sets, h)
        };
        let symbol = index_sum_symbol(out);
        self.streams.symbol(0, symbol);
        self.streams.end_output(symbol, cell);
        Ok(())
    }
}

/// The sets whose ν the event cell of a selection combines: as many of the audit's sets as
/// keep (h + 1)^m within 2¹⁶ cells.
fn nu_sets(h: usize, sets: usize) -> usize {
    let mut m = 0;
    while m < sets && (h + 1).pow(m as u32 + 1) <= MAX_EVENT_CELLS {
        m += 1;
    }
    m
}

fn nu_cells(h: usize, sets: usize) -> usize {
    (h + 1).pow(nu_sets(h, sets) as u32)
}

/// The cell (ν against each of the first audit sets) of output `out`.
fn nu_cell(out: &[u32], sets: &[Vec<bool>], h: usize) -> usize {
    sets.iter()
        .take(nu_sets(h, sets.len()))
        .rev()
        .fold(0, |acc, s| {
            let nu = out
                .iter()
                .filter(|&&j| s.get(j as usize).copied().unwrap_or(false))
                .count();
            acc * (h + 1) + nu
        })
}

impl Observer for SelectionAccumulator {
    fn streams(&mut self) -> &mut Streams {
        &mut self.streams
    }
}

impl Accumulate<Vec<u32>> for SelectionAccumulator {
    fn add(&mut self, out: &Vec<u32>) -> Result<()> {
        self.add_set(out)
    }

    fn finish(self) -> Draws {
        Draws {
            data: Data::Counts(self.counts),
            streams: self.streams,
        }
    }
}

impl Feed for SelectionAccumulator {
    fn feed(&mut self, outputs: &Outputs) -> Result<()> {
        let Outputs::Sets(sets) = outputs else {
            return Err(wrong_outputs());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_irregular_set_has_k_distinct_indices_with_uneven_gaps() {
        for (k, d) in [(1, 2), (2, 8), (15, 150), (8, 8), (100, 1 << 20)] {
            let s = irregular(k, d);
            assert_eq!(s, irregular(k, d));
            assert_eq!(s.len(), k, "k = {k}, d = {d}");
            assert!(s.windows(2).all(|w| w[0] < w[1]));
            assert!(s.iter().all(|&j| (j as usize) < d));
        }
        let s = irregular(15, 150);
        let gaps: Vec<u32> = s.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().any(|&g| g != gaps[0]), "{s:?}");
    }
}
