//! SignDS mechanisms: the selection (`signds-selection`), MagRR's randomizer
//! (`signds-magrr`) and the whole client (`signds-client`). Laws and samplers come from
//! fl-signds (which draws its randomness through fl-ldp).

use fl_ldp::{FiniteOutputs, Mechanism};
use fl_signds::{Broadcast, Client, Params as SignParams, Phase, Profile, SelectionLaw, Sign};
use serde_json::json;

use super::{Law, eps_param, finite_law, int_param};
use crate::{
    analysis::signds::{ClientAudit, SelectionAudit},
    error::{AuditError, Result},
    source::{Draws, Internal},
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
        inputs: inputs.into_iter().map(|(l, s)| (l, json!(s), s)).collect(),
        sets,
        epsilon: Some(law.privacy().epsilon),
    }))
}

/// `signds-selection`'s sampler: [`SelectionLaw::sample`] on each top-k set, counted in the
/// layout of [`SelectionAudit`].
pub(crate) fn selection_sampler(params: &Params) -> Result<Internal> {
    let (law, inputs) = selection(params)?;
    let sets = inputs.first().is_some_and(|(_, s)| keeps_sets(&law, s));
    Ok(Internal::new(move |i, n, rng| {
        let (d, h) = (law.dimension(), law.output_dimension());
        let set = inputs.get(i).map(|(_, s)| s.clone()).unwrap_or_default();
        let set_cells = if sets { law.output_count(&set)? } else { 0 };
        let mut in_set = vec![false; d];
        for &j in &set {
            if let Some(b) = in_set.get_mut(j as usize) {
                *b = true;
            }
        }
        let mut counts = vec![0u64; h + 1 + d + set_cells];
        for _ in 0..n {
            let out = law.sample(&set, rng)?;
            let nu = out.iter().filter(|&&j| in_set[j as usize]).count();
            counts[nu] += 1;
            for &j in &out {
                counts[h + 1 + j as usize] += 1;
            }
            if sets {
                counts[h + 1 + d + law.output_index(&out)?] += 1;
            }
        }
        Ok(Draws::Counts(counts))
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
    let (c, _) = client(params)?;
    Ok(Law::Client(ClientAudit {
        nu: c.law().probabilities().to_vec(),
        keep: c.magrr().keep_probability(),
        inputs: vec![("0".into(), json!(0), false), ("1".into(), json!(1), true)],
        magrr_epsilon: Some(c.magrr().privacy().epsilon),
    }))
}

/// `signds-client`'s sampler: [`Client::encode`] on the fixed update, counted in the
/// layout of [`ClientAudit`].
pub(crate) fn client_sampler(params: &Params) -> Result<Internal> {
    let (c, d) = client(params)?;
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
    let sets = [top(Sign::Positive)?, top(Sign::Negative)?];
    let h = c.law().output_dimension();
    Ok(Internal::new(move |i, n, rng| {
        let b = broadcasts()[usize::from(i == 1)];
        let mut counts = vec![0u64; 3 + h];
        for _ in 0..n {
            let out = c.encode(&u, &b, rng)?;
            let positive = out.report.sign() == Sign::Positive;
            counts[0] += u64::from(positive);
            counts[1] += u64::from(out.report.magrr_bit());
            let set = &sets[usize::from(!positive)];
            let nu = out
                .report
                .indices()
                .iter()
                .filter(|&&j| set.get(j as usize).copied().unwrap_or(false))
                .count();
            counts[2 + nu] += 1;
        }
        Ok(Draws::Counts(counts))
    }))
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

/// `signds-magrr`'s sampler (fl-ldp's batch path of the client's randomizer).
pub(crate) fn magrr_sampler(params: &Params) -> Result<Internal> {
    let m = magrr(params)?;
    Ok(Internal::new(move |i, n, rng| {
        Ok(Draws::Counts(m.sample_counts(&(i == 1), n, rng)?))
    }))
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
