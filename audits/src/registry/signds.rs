//! SignDS mechanisms: the selection (`signds-selection`), MagRR's randomizer
//! (`signds-magrr`) and the whole client (`signds-client`). Laws and samplers come from
//! fl-signds (which draws its randomness through fl-ldp).

use fl_ldp::{FiniteOutputs, Mechanism};
use fl_signds::{Broadcast, Client, Params as SignParams, Phase, Profile, SelectionLaw, Sign};
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{Law, eps_param, finite_law, int_param};
use crate::{
    analysis::signds::{ClientAudit, SelectionAudit},
    error::{AuditError, Result},
    protocol::{OutputKind, Outputs},
    source::{
        Accumulate, ClassAccumulator, Data, Defects, Draws, Feed, FeedFactory, Internal, NoInput,
        SERIAL_ALPHABET, SerialPairs,
    },
    suite::Params,
};

/// The largest number of output sets C(d, h) whose histogram (and explicit law) an audit
/// keeps: the `sets` and `epsilon` tests of `signds-selection` need C(d, h) ≤ this.
pub(crate) const MAX_SET_CELLS: usize = 1 << 16;

fn number(params: &Params, name: &str, what: &str) -> Result<f64> {
    let v = params
        .get(name)
        .ok_or_else(|| AuditError::usage(format!("missing parameter `{name}` ({what})")))?;
    v.as_f64()
        .ok_or_else(|| AuditError::usage(format!("parameter `{name}` must be {what}, got {v}")))
}

/// A labelled top-k set.
pub(crate) type TopKSet = (String, Vec<u32>);

/// The selection law at `params` (Exact profile) and the audit's top-k sets: the first K
/// indices, the last K (disjoint from the first when 2K ≤ d: the pair that reaches ε) and K
/// indices spread over 0..d (crossing the sampler's 64-bit bitset words).
pub(crate) fn selection(params: &Params) -> Result<(SelectionLaw, Vec<TopKSet>)> {
    let eps = eps_param(params)?.value();
    let d = int_param(params, "dim", 2, 1 << 20)?;
    let k = int_param(params, "top_k", 1, d as u64)?;
    let h = int_param(params, "output_dim", 1, d.min(100) as u64)?;
    let t = fl_signds::law::threshold(k, d, h, eps, Profile::Exact)?;
    let law = SelectionLaw::new(k, d, h, t, eps, Profile::Exact)?;
    let first: Vec<u32> = (0..k as u32).collect();
    let last: Vec<u32> = ((d - k) as u32..d as u32).collect();
    let spread: Vec<u32> = (0..k).map(|i| (i * d / k) as u32).collect();
    Ok((
        law,
        vec![
            ("first".into(), first),
            ("last".into(), last),
            ("spread".into(), spread),
        ],
    ))
}

/// Whether the audit keeps the histogram of whole output sets (C(d, h) ≤ [`MAX_SET_CELLS`]).
fn keeps_sets(law: &SelectionLaw, set: &Vec<u32>) -> bool {
    law.output_count(set).is_ok_and(|c| c <= MAX_SET_CELLS)
}

/// `signds-selection`'s law.
pub(crate) fn selection_law(params: &Params) -> Result<Law> {
    let (law, inputs) = selection(params)?;
    let sets = match inputs.first() {
        Some((_, s)) if keeps_sets(&law, s) => Some(
            inputs
                .iter()
                .map(|(_, s)| law.output_probabilities(s))
                .collect::<fl_ldp::Result<Vec<_>>>()?,
        ),
        _ => None,
    };
    Ok(Law::Selection(SelectionAudit {
        dim: law.dimension(),
        output_dim: law.output_dimension(),
        threshold: law.threshold(),
        nu: law.probabilities().to_vec(),
        inputs: inputs
            .into_iter()
            .map(|(l, s)| {
                let request = selection_request(params, &s, law.dimension())?;
                Ok((l, request, s))
            })
            .collect::<Result<_>>()?,
        sets,
        epsilon: Some(law.privacy().epsilon),
    }))
}

/// What an external selection is sent for the top-k set `set`: the set itself (the
/// default, `selection_input` = `"top-k"`), or (`"update"`) `{"update": u}` with an
/// update of `dim` distinct values whose K largest are exactly the set's indices
/// (u_j = 1 + j/d inside, −(1 + j/d) outside).
fn selection_request(params: &Params, set: &[u32], dim: usize) -> Result<serde_json::Value> {
    match params.get("selection_input").map(|v| v.as_str()) {
        None | Some(Some("top-k")) => Ok(json!(set)),
        Some(Some("update")) => {
            let mut u: Vec<f64> = (0..dim).map(|j| -(1.0 + j as f64 / dim as f64)).collect();
            for &j in set {
                if let Some(x) = u.get_mut(j as usize) {
                    *x = -*x;
                }
            }
            Ok(json!({ "update": u }))
        }
        Some(_) => Err(AuditError::usage(format!(
            "parameter `selection_input` must be \"top-k\" or \"update\", got {}",
            params
                .get("selection_input")
                .map_or_else(String::new, ToString::to_string)
        ))),
    }
}

/// `signds-selection`'s protocol output: h distinct indices in 0..d.
pub(crate) fn selection_output(params: &Params) -> Result<OutputKind> {
    let (law, _) = selection(params)?;
    Ok(OutputKind::IndexSet {
        dim: law.dimension(),
        size: law.output_dimension(),
    })
}

/// `signds-client`'s protocol output: a report with h indices in 0..d.
pub(crate) fn client_output(params: &Params) -> Result<OutputKind> {
    let (c, d) = client(params)?;
    Ok(OutputKind::ClientReport {
        dim: d,
        size: c.law().output_dimension(),
    })
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
    fn add(&mut self, out: &Vec<u32>) {
        // The project's sampler only draws valid sets.
        let _ = self.add_set(out);
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

/// `signds-selection`'s sampler: [`SelectionLaw::sample`] on each top-k set, counted in the
/// layout of [`SelectionAudit`].
pub(crate) fn selection_sampler(params: &Params, defects: Defects) -> Result<Internal> {
    let (law, inputs) = selection(params)?;
    let sets = inputs.first().is_some_and(|(_, s)| keeps_sets(&law, s));
    let law_acc = law.clone();
    let inputs_acc = inputs.clone();
    Ok(Internal::try_per_output(
        move |i| {
            let set = inputs.get(i).map(|(_, s)| s.clone()).unwrap_or_default();
            let law = law.clone();
            Ok(move |rng: &mut ChaCha20Rng| Ok(law.sample(&set, rng)?))
        },
        move |i| {
            let set = inputs_acc
                .get(i)
                .map(|(_, s)| s.clone())
                .unwrap_or_default();
            SelectionAccumulator::new(&law_acc, &set, sets)
        },
        defects,
    ))
}

/// The collectors of an external selection's outputs (the sampler's layout).
pub(crate) fn selection_feeder(params: &Params) -> Result<Box<FeedFactory>> {
    let (law, inputs) = selection(params)?;
    let sets = inputs.first().is_some_and(|(_, s)| keeps_sets(&law, s));
    let accumulators = inputs
        .iter()
        .map(|(_, set)| SelectionAccumulator::new(&law, set, sets))
        .collect::<Result<Vec<_>>>()?;
    Ok(Box::new(move |i| match accumulators.get(i) {
        Some(a) => Box::new(a.clone()) as Box<dyn Feed>,
        None => Box::new(NoInput),
    }))
}

/// The collectors of an external client's reports (the sampler's layout).
pub(crate) fn client_feeder(params: &Params) -> Result<Box<FeedFactory>> {
    let (c, d) = client(params)?;
    let sets = client_sets(&c, d)?;
    let h = c.law().output_dimension();
    Ok(Box::new(move |_| {
        Box::new(ClientAccumulator::new(sets.clone(), h)) as Box<dyn Feed>
    }))
}

/// The client at `params`: `eps` (the selection's ε), `eps_rr` (MagRR), `dim`,
/// `top_k_fraction` and `output_dim` (0 or absent: fl-signds' search).
fn client(params: &Params) -> Result<(Client, usize)> {
    let d = int_param(params, "dim", 2, 1 << 20)?;
    let k = number(
        params,
        "top_k_fraction",
        "the top-k fraction k in (0, 0.25]",
    )?;
    let eps_rr = number(params, "eps_rr", "MagRR's epsilon, a number > 0")?;
    let h = match params.get("output_dim") {
        None => 0,
        Some(_) => int_param(params, "output_dim", 0, 50)? as u32,
    };
    let p = SignParams::default()
        .with_top_k_fraction(k)?
        .with_epsilon(eps_param(params)?.value())?
        .with_magrr_epsilon(eps_rr)?
        .with_output_dimension(h)?;
    Ok((Client::new(p, d)?, d))
}

/// The client's fixed update: distinct values −d/2 + 1/2, …, d/2 − 1/2 (the top-k set of
/// the positive sign is the last K indices, of the negative sign the first K), whose
/// top-k magnitude is far from 0, so that r_est chooses the MagRR bit.
fn update(d: usize) -> Vec<f32> {
    (0..d).map(|i| i as f32 - d as f32 / 2.0 + 0.5).collect()
}

/// The broadcasts that make the true MagRR bit 0 (r ≥ 2·r_est) and 1 (r < 2·r_est).
fn broadcasts() -> [Broadcast; 2] {
    [
        Broadcast {
            r_est: 1e-9,
            phase: Phase::Growth,
        },
        Broadcast {
            r_est: 1e9,
            phase: Phase::Growth,
        },
    ]
}

/// `signds-client`'s law: ν from the client's selection law, MagRR's keep probability.
pub(crate) fn client_law(params: &Params) -> Result<Law> {
    let (c, d) = client(params)?;
    Ok(Law::Client(ClientAudit {
        nu: c.law().probabilities().to_vec(),
        keep: c.magrr().keep_probability(),
        inputs: [false, true]
            .into_iter()
            .map(|bit| {
                let b = broadcasts()[usize::from(bit)];
                let request = json!({
                    "update": update(d),
                    "r_est": b.r_est,
                    "phase": "growth",
                });
                (u8::from(bit).to_string(), request, bit)
            })
            .collect(),
        magrr_epsilon: Some(c.magrr().privacy().epsilon),
    }))
}

/// Counts one client report after another in [`ClientAudit`]'s layout (positive signs,
/// reported MagRR ones, ν against the drawn sign's top-k set), with (sign, MagRR bit) as
/// the serial symbol.
pub(crate) struct ClientAccumulator {
    /// Membership in the top-k set of the positive and of the negative sign.
    sets: [Vec<bool>; 2],
    counts: Vec<u64>,
    serial: SerialPairs,
}

impl ClientAccumulator {
    fn new(sets: [Vec<bool>; 2], h: usize) -> Self {
        Self {
            sets,
            counts: vec![0; 3 + h],
            serial: SerialPairs::new(1, 4),
        }
    }

    /// Adds one report: its sign, its MagRR bit and its h indices.
    pub(crate) fn add_report(&mut self, positive: bool, bit: bool, indices: &[u32]) -> Result<()> {
        let h = self.counts.len() - 3;
        if indices.len() != h {
            return Err(AuditError::Mechanism(format!(
                "a client report has {} indices, the client selects {h}",
                indices.len()
            )));
        }
        let set = &self.sets[usize::from(!positive)];
        let mut nu = 0;
        for &j in indices {
            match set.get(j as usize) {
                Some(&b) => nu += usize::from(b),
                None => {
                    return Err(AuditError::Mechanism(format!(
                        "a client report holds index {j}, the dimension is {}",
                        set.len()
                    )));
                }
            }
        }
        self.counts[0] += u64::from(positive);
        self.counts[1] += u64::from(bit);
        self.counts[2 + nu] += 1;
        self.serial
            .push(0, 2 * usize::from(positive) + usize::from(bit));
        Ok(())
    }
}

impl Accumulate<(bool, bool, Vec<u32>)> for ClientAccumulator {
    fn add(&mut self, (positive, bit, indices): &(bool, bool, Vec<u32>)) {
        // The project's client only produces valid reports.
        let _ = self.add_report(*positive, *bit, indices);
    }

    fn finish(self) -> Draws {
        Draws {
            data: Data::Counts(self.counts),
            serial: self.serial,
        }
    }
}

impl Feed for ClientAccumulator {
    fn feed(&mut self, outputs: &Outputs) -> Result<()> {
        let Outputs::Reports(reports) = outputs else {
            return Err(AuditError::Mechanism(
                "the external outputs are not client reports".into(),
            ));
        };
        for r in reports {
            self.add_report(r.positive, r.magrr_bit, &r.indices)?;
        }
        Ok(())
    }

    fn finish_boxed(self: Box<Self>) -> Draws {
        self.finish()
    }
}

/// The top-k sets of the client audit's fixed update, for the positive and the negative
/// sign, as membership vectors.
fn client_sets(c: &Client, d: usize) -> Result<[Vec<bool>; 2]> {
    let u = update(d);
    let k = c.law().top_k();
    let top = |sign| -> Result<Vec<bool>> {
        let mut in_set = vec![false; d];
        for j in fl_signds::topk::top_k(&u, sign, k)? {
            if let Some(b) = in_set.get_mut(j as usize) {
                *b = true;
            }
        }
        Ok(in_set)
    };
    Ok([top(Sign::Positive)?, top(Sign::Negative)?])
}

/// `signds-client`'s sampler: [`Client::encode`] on the fixed update, counted in the
/// layout of [`ClientAudit`].
pub(crate) fn client_sampler(params: &Params, defects: Defects) -> Result<Internal> {
    let (c, d) = client(params)?;
    let sets = client_sets(&c, d)?;
    let h = c.law().output_dimension();
    let u = update(d);
    Ok(Internal::per_output(
        move |i| {
            let b = broadcasts()[usize::from(i == 1)];
            let (c, u) = (c.clone(), u.clone());
            Ok(move |rng: &mut ChaCha20Rng| {
                let out = c.encode(&u, &b, rng)?;
                Ok((
                    out.report.sign() == Sign::Positive,
                    out.report.magrr_bit(),
                    out.report.indices().to_vec(),
                ))
            })
        },
        move |_| ClientAccumulator::new(sets.clone(), h),
        defects,
    ))
}

/// MagRR's randomizer as the client holds it (`Client::magrr`, fl-ldp's binary RR at
/// `eps` = ε_RR): the law of the reported bit given the true bit.
fn magrr(params: &Params) -> Result<fl_ldp::BinaryRandomizedResponse> {
    let p = SignParams::default().with_magrr_epsilon(eps_param(params)?.value())?;
    // d = 100 with the default k = 0.01: K = 1, the smallest valid client.
    Ok(*Client::new(p, 100)?.magrr())
}

/// `signds-magrr`'s law.
pub(crate) fn magrr_law(params: &Params) -> Result<Law> {
    let m = magrr(params)?;
    Ok(Law::Finite(finite_law(
        &m,
        &[&false, &true],
        vec![json!(0), json!(1)],
    )?))
}

/// `signds-magrr`'s sampler (the client's randomizer, one bit at a time).
pub(crate) fn magrr_sampler(params: &Params, defects: Defects) -> Result<Internal> {
    let m = magrr(params)?;
    Ok(Internal::per_output(
        move |i| Ok(move |rng: &mut ChaCha20Rng| Ok(usize::from(m.randomize(i == 1, rng)))),
        |_| ClassAccumulator::new(2),
        defects,
    ))
}

/// Tests of `signds-selection` that need the explicit law over output sets.
pub(crate) fn check_selection_tests(law: &Law, tests: &[String]) -> Result<()> {
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
