//! `signds-client`: the whole SignDS client (`Client::encode`: random sign, top-k set,
//! selection, MagRR bit) on a fixed update, the true MagRR bit chosen through the
//! broadcast's r_est.

use fl_ldp::Mechanism;
use fl_signds::{Broadcast, Client, Params as SignParams, Phase, Sign};
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{EPS, Family, Law, MechanismInfo, Param, Reader};
use crate::{
    analysis::signds::ClientAudit,
    error::{AuditError, Result},
    protocol::{OutputKind, Outputs},
    source::{Accumulate, Feed},
    suite::Params,
    tally::{Data, Draws, SerialPairs},
};

/// The whole client at its parameters, with the audit's fixed update.
#[derive(Debug, Clone)]
pub(crate) struct SignDsClient {
    client: Client,
    dim: usize,
    update: Vec<f32>,
}

impl Family for SignDsClient {
    const INFO: MechanismInfo = MechanismInfo {
        name: "signds-client",
        description: "the whole SignDS client (Client::encode): sign, MagRR bit, nu",
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
        tests: &["sign", "magrr", "nu", "epsilon", "serial"],
    };
    type Output = (bool, bool, Vec<u32>);
    type Drawer = Broadcast;
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
        Ok(Self {
            client: Client::new(p, d)?,
            dim: d,
            update: update(d),
        })
    }

    /// ν from the client's selection law, MagRR's keep probability.
    fn law(&self) -> Result<Law> {
        let c = &self.client;
        Ok(Law::Client(ClientAudit {
            nu: c.law().probabilities().to_vec(),
            keep: c.magrr().keep_probability(),
            inputs: [false, true]
                .into_iter()
                .map(|bit| {
                    let b = broadcasts()[usize::from(bit)];
                    let request = json!({
                        "update": self.update,
                        "r_est": b.r_est,
                        "phase": "growth",
                    });
                    (u8::from(bit).to_string(), request, bit)
                })
                .collect(),
            magrr_epsilon: Some(c.magrr().privacy().epsilon),
        }))
    }

    /// A report with h indices in 0..d.
    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(Some(OutputKind::ClientReport {
            dim: self.dim,
            size: self.client.law().output_dimension(),
        }))
    }

    fn observer(&self, _: usize) -> Result<ClientAccumulator> {
        Ok(ClientAccumulator::new(
            client_sets(&self.client, &self.update)?,
            self.client.law().output_dimension(),
        ))
    }

    fn drawer(&self, input: usize) -> Result<Broadcast> {
        Ok(broadcasts()[usize::from(input == 1)])
    }

    fn draw(&self, b: &mut Broadcast, rng: &mut ChaCha20Rng) -> Result<(bool, bool, Vec<u32>)> {
        let out = self.client.encode(&self.update, b, rng)?;
        Ok((
            out.report.sign() == Sign::Positive,
            out.report.magrr_bit(),
            out.report.indices().to_vec(),
        ))
    }
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
    fn add(&mut self, (positive, bit, indices): &(bool, bool, Vec<u32>)) -> Result<()> {
        self.add_report(*positive, *bit, indices)
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
fn client_sets(c: &Client, u: &[f32]) -> Result<[Vec<bool>; 2]> {
    let d = u.len();
    let k = c.law().top_k();
    let top = |sign| -> Result<Vec<bool>> {
        let mut in_set = vec![false; d];
        for j in fl_signds::topk::top_k(u, sign, k)? {
            if let Some(b) = in_set.get_mut(j as usize) {
                *b = true;
            }
        }
        Ok(in_set)
    };
    Ok([top(Sign::Positive)?, top(Sign::Negative)?])
}
