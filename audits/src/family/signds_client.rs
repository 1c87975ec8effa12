//! `signds-client`: the whole SignDS client (`Client::encode`: random sign, top-k set,
//! selection, MagRR bit) on fixed updates — the symmetric one, whose two tails have the
//! same magnitude, and asymmetric ones (every value positive; mostly negative with a few
//! large positives at scattered indices; a scattered permutation with its positive values
//! tripled), whose tails do not — the true MagRR bit of each sign chosen through the
//! broadcast's r_est.

use fl_ldp::Mechanism;
use fl_signds::{Broadcast, Client, Params as SignParams, Phase, Profile, Sign, client::magrr_bit};
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{EPS, Family, Law, MechanismInfo, Param, Reader, neighbour_pairs};
use crate::{
    analysis::{learned::LearnedSpec, signds::ClientAudit},
    error::{AuditError, Result},
    protocol::{OutputKind, Outputs},
    report::Branch,
    source::{Accumulate, Feed, Observer, wrong_outputs},
    suite::Params,
    tally::{Data, Draws, SERIAL_ALPHABET, Streams},
};

/// The whole client at its parameters, with the audit's fixed update and broadcasts.
#[derive(Debug, Clone)]
pub(crate) struct SignDsClient {
    client: Client,
    dim: usize,
    update: Vec<f32>,
    /// The top-k sets of the update for the negative and the positive sign.
    sets: [Vec<u32>; 2],
    /// Per input: its label, the broadcast and the true MagRR bit.
    inputs: Vec<(String, Broadcast, bool)>,
    /// The asymmetric updates: label, update, top-k sets (negative, positive sign).
    asymmetric: Vec<(String, Vec<f32>, [Vec<u32>; 2])>,
    /// Per asymmetric input: its label, its update (index into `asymmetric`), the
    /// broadcast and the true MagRR bit under the negative and the positive sign.
    asymmetric_inputs: Vec<(String, usize, Broadcast, [bool; 2])>,
    /// The sampler defect `"wrong_tail": true`: the MagRR bit is computed from the
    /// magnitude of the other sign's top-k mean (a client that takes r from the wrong
    /// tail; invisible on a symmetric update).
    wrong_tail: bool,
}

/// An input's drawing state: its update, the broadcast and, for the `wrong_tail` defect,
/// the true bit under each sign.
#[derive(Debug, Clone)]
pub(crate) struct ClientInput {
    update: Vec<f32>,
    broadcast: Broadcast,
    truths: [bool; 2],
}

impl Family for SignDsClient {
    const INFO: MechanismInfo = MechanismInfo {
        name: "signds-client",
        description: "the whole SignDS client (Client::encode) in both phases: sign, MagRR bit, nu and their joint law",
        params: &[
            EPS,
            Param {
                key: "eps_rr",
                option: "eps-rr",
                required: true,
                what: "MagRR's epsilon, a number > 0",
            },
            Param {
                key: "dim",
                option: "dim",
                required: true,
                what: "the dimension d, an integer from 2 to 1048576",
            },
            Param {
                key: "top_k_fraction",
                option: "top-k-fraction",
                required: true,
                what: "the top-k fraction k in (0, 0.25]",
            },
            Param {
                key: "output_dim",
                option: "output-dim",
                required: false,
                what: "h, the indices selected, an integer from 0 to 50 (0 or absent: fl-signds' search)",
            },
        ],
        tests: &[
            "sign", "magrr", "nu", "joint", "epsilon", "learned", "serial",
        ],
    };
    type Output = (bool, bool, Vec<u32>);
    type Drawer = ClientInput;
    type Observer = ClientAccumulator;

    /// `eps` (the selection's ε), `eps_rr` (MagRR), `dim`, `top_k_fraction` and
    /// `output_dim`.
    fn parse(params: &Params) -> Result<Self> {
        let r = Reader::new(params, &Self::INFO);
        let d = r.int("dim", 2, 1 << 20)?;
        let k = r.number("top_k_fraction")?;
        let eps_rr = r.number("eps_rr")?;
        let h = match r.optional("output_dim") {
            None => 0,
            Some(_) => r.int("output_dim", 0, 50)? as u32,
        };
        let p = SignParams::default()
            .with_top_k_fraction(k)?
            .with_epsilon(r.epsilon()?.value())?
            .with_magrr_epsilon(eps_rr)?
            .with_output_dimension(h)?;
        let client = Client::new(p, d)?;
        let update = update(d);
        let k = client.law().top_k();
        let sets = [
            fl_signds::topk::top_k(&update, Sign::Negative, k)?,
            fl_signds::topk::top_k(&update, Sign::Positive, k)?,
        ];
        let inputs = broadcasts(magnitude(&update, &sets[1]), p.profile());
        let mut asymmetric = Vec::new();
        let mut asymmetric_inputs = Vec::new();
        for (label, u) in asymmetric_updates(d) {
            let sets = [
                fl_signds::topk::top_k(&u, Sign::Negative, k)?,
                fl_signds::topk::top_k(&u, Sign::Positive, k)?,
            ];
            let r = [magnitude(&u, &sets[0]), magnitude(&u, &sets[1])];
            let (name, b) = split_broadcast(r, asymmetric.len() % 2 == 1);
            let truths = r.map(|m| magrr_bit(m, b.r_est, b.phase, p.profile()));
            asymmetric_inputs.push((format!("{name}: {label}"), asymmetric.len(), b, truths));
            asymmetric.push((label, u, sets));
        }
        let wrong_tail = match params.get("wrong_tail") {
            None => false,
            Some(v) => v.as_bool().ok_or_else(|| {
                AuditError::usage(format!(
                    "sampler parameter `wrong_tail` must be true or false, got {v}"
                ))
            })?,
        };
        Ok(Self {
            client,
            dim: d,
            update,
            sets,
            inputs,
            asymmetric,
            asymmetric_inputs,
            wrong_tail,
        })
    }

    /// ν from the client's selection law, MagRR's keep probability, the true bit of each
    /// broadcast.
    fn law(&self) -> Result<Law> {
        let c = &self.client;
        let request = |update: &[f32], b: &Broadcast| {
            json!({
                "update": update,
                "r_est": b.r_est,
                "phase": match b.phase {
                    Phase::Growth => "growth",
                    Phase::Shrink => "shrink",
                },
            })
        };
        let mut inputs: Vec<(String, serde_json::Value, bool)> = self
            .inputs
            .iter()
            .map(|(label, b, truth)| (label.clone(), request(&self.update, b), *truth))
            .collect();
        let mut input_sets = vec![self.sets.clone(); inputs.len()];
        let mut sign_truths: Vec<[bool; 2]> = self.inputs.iter().map(|x| [x.2, x.2]).collect();
        for (label, u, b, truths) in &self.asymmetric_inputs {
            let (_, update, sets) = &self.asymmetric[*u];
            inputs.push((label.clone(), request(update, b), truths[1]));
            input_sets.push(sets.clone());
            sign_truths.push(*truths);
        }
        Ok(Law::Client(ClientAudit {
            nu: c.law().probabilities().to_vec(),
            keep: c.magrr().keep_probability(),
            dim: self.dim,
            sets: self.sets.clone(),
            inputs,
            magrr_epsilon: Some(c.magrr().privacy().epsilon),
            input_sets,
            sign_truths,
        }))
    }

    /// A report with h indices in 0..d.
    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(Some(OutputKind::ClientReport {
            dim: self.dim,
            size: self.client.law().output_dimension(),
        }))
    }

    fn observer(&self, input: usize) -> Result<ClientAccumulator> {
        let sets = match input.checked_sub(self.inputs.len()) {
            None => &self.sets,
            Some(a) => self
                .asymmetric_inputs
                .get(a)
                .and_then(|(_, u, _, _)| self.asymmetric.get(*u))
                .map(|(_, _, s)| s)
                .ok_or_else(|| AuditError::Mechanism(format!("no input number {input}")))?,
        };
        Ok(ClientAccumulator::new(
            sets,
            self.dim,
            self.client.law().output_dimension(),
        ))
    }

    fn drawer(&self, input: usize) -> Result<ClientInput> {
        let missing = || AuditError::Mechanism(format!("no input number {input}"));
        match input.checked_sub(self.inputs.len()) {
            None => {
                let (_, b, t) = self.inputs.get(input).ok_or_else(missing)?;
                Ok(ClientInput {
                    update: self.update.clone(),
                    broadcast: *b,
                    truths: [*t, *t],
                })
            }
            Some(a) => {
                let (_, u, b, truths) = self.asymmetric_inputs.get(a).ok_or_else(missing)?;
                let (_, update, _) = self.asymmetric.get(*u).ok_or_else(missing)?;
                Ok(ClientInput {
                    update: update.clone(),
                    broadcast: *b,
                    truths: *truths,
                })
            }
        }
    }

    fn draw(&self, x: &mut ClientInput, rng: &mut ChaCha20Rng) -> Result<(bool, bool, Vec<u32>)> {
        let out = self.client.encode(&x.update, &x.broadcast, rng)?;
        let positive = out.report.sign() == Sign::Positive;
        let mut bit = out.report.magrr_bit();
        if self.wrong_tail {
            // The other tail's true bit through the same MagRR coin.
            let [negative, positive_truth] = x.truths;
            if negative != positive_truth {
                bit = !bit;
            }
        }
        Ok((positive, bit, out.report.indices().to_vec()))
    }

    /// (sign, MagRR bit, ν): the sign is fair, the bit is the true one with MagRR's keep
    /// probability and ν follows the selection, all independent. Two broadcasts of the
    /// same update select from the same law, so the whole report's privacy loss between
    /// them is MagRR's ε_RR.
    fn event_space(&self, law: &Law) -> Result<Option<LearnedSpec>> {
        let Law::Client(l) = law else {
            return Ok(None);
        };
        let Some(claimed) = l.magrr_epsilon else {
            return Ok(None);
        };
        let h1 = l.nu.len();
        let cells = 4 * h1;
        Ok(Some(LearnedSpec {
            cells,
            cell_meaning: "(sign, MagRR bit, nu) of the report".into(),
            features: (0..cells)
                .map(|c| {
                    let combo = c / h1;
                    vec![
                        f64::from((combo >> 1) as u8),
                        f64::from((combo & 1) as u8),
                        (c % h1) as f64 / (h1 - 1).max(1) as f64,
                    ]
                })
                .collect(),
            claimed,
            pairs: neighbour_pairs(l.inputs.len()),
            laws: Some(
                (0..l.inputs.len())
                    .map(|i| l.joint_law_by_sign(l.truths(i)))
                    .collect(),
            ),
        }))
    }

    /// Both phases, each with r_est putting the threshold below, at and above the true
    /// top-k magnitude r.
    fn coverage(&self) -> Vec<Branch> {
        let with = |what: &str, keep: &dyn Fn(&str, &Broadcast, bool) -> bool| {
            Branch::new(
                what,
                self.inputs
                    .iter()
                    .filter(|(l, b, t)| keep(l, b, *t))
                    .map(|(l, _, _)| l.clone()),
            )
        };
        let growth = |b: &Broadcast| b.phase == Phase::Growth;
        vec![
            with("growth phase, bit 1 (r < 2 r_est)", &|_, b, t| {
                growth(b) && t
            }),
            with("growth phase, bit 0 (r >= 2 r_est)", &|_, b, t| {
                growth(b) && !t
            }),
            with("shrink phase, bit 1 (r < r_est / 2)", &|_, b, t| {
                !growth(b) && t
            }),
            with("shrink phase, bit 0 (r >= r_est / 2)", &|_, b, t| {
                !growth(b) && !t
            }),
            with(
                "threshold exactly r (the strict inequality decides: bit 0)",
                &|l, _, _| l.contains(" = "),
            ),
            Branch::new(
                "symmetric update (both tails' magnitudes equal, top-k sets contiguous)",
                self.inputs.iter().map(|(l, _, _)| l.clone()),
            ),
            Branch::new(
                "asymmetric update, the tails' true bits differ (growth and shrink)",
                self.asymmetric_inputs
                    .iter()
                    .filter(|x| x.3[0] != x.3[1])
                    .map(|x| x.0.clone()),
            ),
            Branch::new(
                "every value positive",
                self.asymmetric_inputs
                    .iter()
                    .filter(|x| x.0.ends_with(": all-positive"))
                    .map(|x| x.0.clone()),
            ),
            Branch::new(
                "top-k set not contiguous (scattered indices)",
                self.asymmetric_inputs
                    .iter()
                    .filter(|x| !x.0.ends_with(": all-positive"))
                    .map(|x| x.0.clone()),
            ),
        ]
    }

    fn stream_names(&self) -> &'static [&'static str] {
        &["(sign, MagRR bit)", "index sum mod 16"]
    }
}

/// r = |mean of the top-k values| of `update` over `top`, as the Exact profile computes it
/// (an f64 sum).
fn magnitude(update: &[f32], top: &[u32]) -> f64 {
    let sum: f64 = top
        .iter()
        .filter_map(|&i| update.get(i as usize))
        .map(|&v| f64::from(v))
        .sum();
    (sum / top.len().max(1) as f64).abs()
}

/// The audit's broadcasts for a true top-k magnitude r: both phases, each with r_est
/// putting the threshold (2·r_est in growth, r_est/2 in shrink) 1/16 below r, exactly at r
/// (scaling by 2 is exact, and the strict inequality then gives bit 0) and 1/16 above, with
/// the true MagRR bit fl-signds' rule gives each.
fn broadcasts(r: f64, profile: Profile) -> Vec<(String, Broadcast, bool)> {
    let mut out = Vec::new();
    for (phase, threshold, at) in [
        (Phase::Growth, "growth 2·r_est", r / 2.0),
        (Phase::Shrink, "shrink r_est/2", 2.0 * r),
    ] {
        for (position, factor) in [("<", 15.0 / 16.0), ("=", 1.0), (">", 17.0 / 16.0)] {
            let b = Broadcast {
                r_est: at * factor,
                phase,
            };
            let truth = magrr_bit(r, b.r_est, phase, profile);
            out.push((format!("{threshold} {position} r"), b, truth));
        }
    }
    out
}

/// The asymmetric updates of dimension `d` (distinct values, no ties, both tails'
/// magnitudes different): every value positive (0.5 + i); mostly negative (−1 − i/64)
/// with three large positives at scattered indices; and a scattered permutation of the
/// symmetric update (index i holds the value of 7i mod d, d odd-coprime permutations
/// falling back to 3i or i) with its positive values tripled.
fn asymmetric_updates(d: usize) -> Vec<(String, Vec<f32>)> {
    let all_positive: Vec<f32> = (0..d).map(|i| 0.5 + i as f32).collect();
    let mut few_large: Vec<f32> = (0..d).map(|i| -1.0 - i as f32 / 64.0).collect();
    for (n, j) in [d / 7, d / 2, d - 2].into_iter().enumerate() {
        if let Some(v) = few_large.get_mut(j) {
            *v = 50.0 + 10.0 * n as f32;
        }
    }
    let symmetric = update(d);
    let step = [7usize, 3, 1]
        .into_iter()
        .find(|&s| gcd(s, d) == 1)
        .unwrap_or(1);
    let scattered: Vec<f32> = (0..d)
        .map(|i| {
            let v = symmetric[(step * i) % d];
            if v > 0.0 { 3.0 * v } else { v }
        })
        .collect();
    vec![
        ("all-positive".into(), all_positive),
        ("few-large-positives".into(), few_large),
        ("scattered-skewed".into(), scattered),
    ]
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The broadcast that splits the tails of an asymmetric update, whose negative and
/// positive top-k magnitudes are `r`, in the growth phase or (`shrink`) the shrink phase:
/// the threshold (2·r_est in growth, r_est/2 in shrink) at their geometric mean, so the
/// smaller magnitude's bit is 1 and the larger's 0 — a client that takes r from the wrong
/// tail reports the other bit. (One broadcast per update: each input costs the suite's
/// sample size; the phases alternate over the updates.)
fn split_broadcast(r: [f64; 2], shrink: bool) -> (String, Broadcast) {
    let between = (r[0] * r[1]).sqrt();
    if shrink {
        (
            "shrink, threshold between the tails".into(),
            Broadcast {
                r_est: 2.0 * between,
                phase: Phase::Shrink,
            },
        )
    } else {
        (
            "growth, threshold between the tails".into(),
            Broadcast {
                r_est: between / 2.0,
                phase: Phase::Growth,
            },
        )
    }
}

/// The client's fixed update: distinct values −d/2 + 1/2, …, d/2 − 1/2 (the top-k set of
/// the positive sign is the last K indices, of the negative sign the first K), whose
/// top-k magnitude is far from 0, so that r_est chooses the MagRR bit.
fn update(d: usize) -> Vec<f32> {
    (0..d).map(|i| i as f32 - d as f32 / 2.0 + 0.5).collect()
}

/// Counts one client report after another in [`ClientAudit`]'s layout (ν against the
/// drawn sign's top-k set and the index hits, per (sign, reported bit)); serial streams:
/// (sign, MagRR bit) and the index sum modulo 16; event cell: (sign, bit, ν).
pub(crate) struct ClientAccumulator {
    /// Membership in the top-k set of the negative and of the positive sign.
    sets: [Vec<bool>; 2],
    /// h.
    h: usize,
    counts: Vec<u64>,
    streams: Streams,
}

impl ClientAccumulator {
    fn new(sets: &[Vec<u32>; 2], d: usize, h: usize) -> Self {
        let member = |set: &[u32]| {
            let mut in_set = vec![false; d];
            for &j in set {
                if let Some(b) = in_set.get_mut(j as usize) {
                    *b = true;
                }
            }
            in_set
        };
        Self {
            sets: [member(&sets[0]), member(&sets[1])],
            h,
            counts: vec![0; 4 * (h + 1 + d)],
            streams: Streams::new(2, SERIAL_ALPHABET, 4, 4 * (h + 1)),
        }
    }

    /// Adds one report: its sign, its MagRR bit and its h indices.
    pub(crate) fn add_report(&mut self, positive: bool, bit: bool, indices: &[u32]) -> Result<()> {
        let h = self.h;
        if indices.len() != h {
            return Err(AuditError::Mechanism(format!(
                "a client report has {} indices, the client selects {h}",
                indices.len()
            )));
        }
        let combo = 2 * usize::from(positive) + usize::from(bit);
        let set = &self.sets[usize::from(positive)];
        let d = set.len();
        let mut nu = 0;
        let mut sum = 0usize;
        for &j in indices {
            match set.get(j as usize) {
                Some(&b) => nu += usize::from(b),
                None => {
                    return Err(AuditError::Mechanism(format!(
                        "a client report holds index {j}, the dimension is {d}"
                    )));
                }
            }
            sum += j as usize;
        }
        let hits = 4 * (h + 1) + combo * d;
        for &j in indices {
            self.counts[hits + j as usize] += 1;
        }
        let cell = combo * (h + 1) + nu;
        self.counts[cell] += 1;
        self.streams.symbol(0, combo);
        self.streams.symbol(1, sum % SERIAL_ALPHABET);
        self.streams.end_output(combo, cell);
        Ok(())
    }
}

impl Observer for ClientAccumulator {
    fn streams(&mut self) -> &mut Streams {
        &mut self.streams
    }
}

impl Accumulate<(bool, bool, Vec<u32>)> for ClientAccumulator {
    fn add(&mut self, (positive, bit, indices): &(bool, bool, Vec<u32>)) -> Result<()> {
        self.add_report(*positive, *bit, indices)
    }

    fn finish(self) -> Draws {
        Draws {
            data: Data::Counts(self.counts),
            streams: self.streams,
        }
    }
}

impl Feed for ClientAccumulator {
    fn feed(&mut self, outputs: &Outputs) -> Result<()> {
        let Outputs::Reports(reports) = outputs else {
            return Err(wrong_outputs());
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
