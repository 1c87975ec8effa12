//! The label-inference attacks on the host's view (H1 in `docs/THREAT_MODEL.md`), in one
//! place for the tests that measure them and the `privacy_table` example that tabulates
//! them. The norm and cosine attacks score every row of δ_A the host receives; the score's
//! ROC AUC against the labels ([`crate::data::roc_auc`]) is the attack's success. The
//! error-projection guess ([`error_projection_scores`], [`orient_by_prior`],
//! [`label_guesses`]) turns the rows of a recovered error D̂ (or of δ_A) into label
//! guesses.

/// Li et al.'s norm attack: the score of a row is its Euclidean norm (the rarer class has
/// larger gradients once the model has learned the base rate).
pub fn norm_scores(gradients: &[Vec<f64>]) -> Vec<f64> {
    gradients.iter().map(|g| norm(g)).collect()
}

/// The cosine attack, needing no label: the score of a row is −cos(row, the batch's majority
/// direction), the majority direction being the mean of the batch's unit rows (the rare
/// class's large rows would dominate a plain mean). `gradients` come in batches of `batch`
/// rows (the last may be shorter); a zero row scores 0.
pub fn cosine_scores(gradients: &[Vec<f64>], batch: usize) -> Vec<f64> {
    let mut scores = Vec::with_capacity(gradients.len());
    for chunk in gradients.chunks(batch.max(1)) {
        let dim = chunk.first().map_or(0, Vec::len);
        let mean: Vec<f64> = (0..dim)
            .map(|k| {
                chunk
                    .iter()
                    .filter(|g| norm(g) > 0.0)
                    .map(|g| g.get(k).copied().unwrap_or(0.0) / norm(g))
                    .sum::<f64>()
            })
            .collect();
        for g in chunk {
            let denom = norm(g) * norm(&mean);
            let cos = if denom > 0.0 {
                g.iter().zip(&mean).map(|(a, b)| a * b).sum::<f64>() / denom
            } else {
                0.0
            };
            scores.push(-cos);
        }
    }
    scores
}

/// The label scores of the host's guess from error rows: the rows of the error D̂_t it
/// recovered ([`crate::attacks::host_multi_step`]), or of δ_A,t where a step was not
/// recovered. Each row is projected on the rows' dominant direction (power iteration on
/// Σ rᵢ·rᵢᵀ from the all-ones vector) and negated, so that with the right orientation a
/// positive score means (p − y) < 0, i.e. y = 1.
///
/// The scores are **unoriented**: the dominant direction has no sign, so they are the
/// labels' scores up to one global sign, which [`orient_by_prior`] or
/// [`orient_by_known_labels`] fixes. A zero row (every interactive unit inactive, or an
/// error that rounded to zero) scores exactly 0: it says nothing about its label
/// ([`label_guesses`] guesses the prior's majority class there).
///
/// Why one global sign is all the view determines: for a sigmoid-BCE top, labelling
/// every row 1 − y and negating the top's last layer gives p ↦ 1 − p, so p − y ↦ −(p − y),
/// and the negated weights turn the error the interactive layer receives back into the
/// same δ; the host's whole view is the same (`tests/label_leakage.rs`,
/// `the_host_view_is_the_same_for_flipped_labels_and_a_mirrored_top`). Only outside
/// knowledge orients the guess: the public prior, or a known label.
pub fn error_projection_scores(rows: &[Vec<f64>]) -> Vec<f64> {
    let dim = rows.first().map_or(0, Vec::len);
    let mut u = vec![1.0; dim];
    for _ in 0..100 {
        let mut next = vec![0.0; dim];
        for r in rows {
            let p: f64 = r.iter().zip(&u).map(|(a, b)| a * b).sum();
            for (n, x) in next.iter_mut().zip(r) {
                *n += p * x;
            }
        }
        let norm = norm(&next);
        if norm == 0.0 || !norm.is_finite() {
            break;
        }
        u = next.iter().map(|x| x / norm).collect();
    }
    rows.iter()
        .map(|r| -r.iter().zip(&u).map(|(a, b)| a * b).sum::<f64>())
        .collect()
}

/// Counts of (positive, negative) scores; zero scores (undetermined rows) count in neither.
fn signs(scores: &[f64]) -> (usize, usize) {
    (
        scores.iter().filter(|&&s| s > 0.0).count(),
        scores.iter().filter(|&&s| s < 0.0).count(),
    )
}

/// Orients unoriented scores ([`error_projection_scores`]) by the public prior
/// P(y = 1) = `positive_rate` alone: the orientation that guesses the prior's majority
/// class on more of the **determined** rows (non-zero scores). With i.i.d. labels of that
/// prior and the determined rows' signs as the only evidence about the sign (the view
/// cannot tell the two orientations apart, see [`error_projection_scores`]), this is the
/// maximum-a-posteriori orientation: the posterior odds are
/// (π/(1 − π))^(positives − negatives). It is wrong whenever the determined rows happen to
/// be mostly of the prior's minority class (e.g. the majority class's rows all have
/// inactive units), and then every determined guess is inverted. Ties (as many positive
/// as negative scores, or π = ½) keep the scores as they are.
pub fn orient_by_prior(scores: &[f64], positive_rate: f64) -> Vec<f64> {
    let (positive, negative) = signs(scores);
    let flip = (positive > negative && positive_rate < 0.5)
        || (positive < negative && positive_rate > 0.5);
    scores.iter().map(|&s| if flip { -s } else { s }).collect()
}

/// Orients unoriented scores by labels the attacker knows: `known` gives (row, label) pairs
/// (label 1.0 or 0.0); the orientation that agrees with more of them on determined rows
/// wins (ties keep the scores). A DP audit's adversary knows every label but the canaries'
/// (the neighbouring data sets differ in one label only), so this is the orientation
/// against which a label-DP bound is checked.
pub fn orient_by_known_labels(scores: &[f64], known: &[(usize, f64)]) -> Vec<f64> {
    let (mut agree, mut disagree) = (0usize, 0usize);
    for &(row, label) in known {
        let Some(&s) = scores.get(row) else {
            continue;
        };
        if s == 0.0 {
            continue;
        }
        if (s > 0.0) == (label == 1.0) {
            agree += 1;
        } else {
            disagree += 1;
        }
    }
    let flip = disagree > agree;
    scores.iter().map(|&s| if flip { -s } else { s }).collect()
}

/// The label guesses from oriented scores: 1 where the score is positive, 0 where it is
/// negative, and the prior's majority class (1 when `positive_rate` ≥ ½) where it is 0
/// (an undetermined row).
pub fn label_guesses(scores: &[f64], positive_rate: f64) -> Vec<bool> {
    scores
        .iter()
        .map(|&s| {
            if s > 0.0 {
                true
            } else if s < 0.0 {
                false
            } else {
                positive_rate >= 0.5
            }
        })
        .collect()
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minority_row_scores_highest_under_both_attacks() {
        // Three majority rows along +x (small), one minority row along −x (large).
        let g = vec![
            vec![0.1, 0.0],
            vec![0.1, 0.01],
            vec![0.1, -0.01],
            vec![-2.0, 0.0],
        ];
        let norms = norm_scores(&g);
        let cosines = cosine_scores(&g, 4);
        for s in [&norms, &cosines] {
            let top = s
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map(|(i, _)| i);
            assert_eq!(top, Some(3), "{s:?}");
        }
        assert_eq!(cosine_scores(&[vec![0.0, 0.0]], 1), vec![0.0]);
    }

    /// Error rows of a sigmoid top with weights w = (1, −2): rᵢ = cᵢ·(w ⊙ maskᵢ) with
    /// cᵢ = p − y (< 0 for y = 1), some rows with one unit inactive, some all-zero.
    fn error_rows(labels: &[f64]) -> Vec<Vec<f64>> {
        labels
            .iter()
            .enumerate()
            .map(|(i, &y)| {
                let c = if y == 1.0 { -0.3 } else { 0.2 } * (1.0 + (i % 3) as f64 / 10.0);
                match i % 4 {
                    0 => vec![c, -2.0 * c],
                    1 => vec![c, 0.0],
                    2 => vec![0.0, -2.0 * c],
                    _ if i % 8 == 3 => vec![0.0, 0.0],
                    _ => vec![c, -2.0 * c],
                }
            })
            .collect()
    }

    #[test]
    fn error_scores_separate_the_labels_up_to_one_sign_and_the_orientations_fix_it() {
        let labels: Vec<f64> = (0..40).map(|i| f64::from(u8::from(i % 5 < 3))).collect();
        let rows = error_rows(&labels);
        let raw = error_projection_scores(&rows);
        // Every determined row's sign is its label, up to one global sign.
        let agree = raw
            .iter()
            .zip(&labels)
            .filter(|(s, _)| **s != 0.0)
            .map(|(s, y)| (*s > 0.0) == (*y == 1.0))
            .collect::<Vec<_>>();
        assert!(agree.iter().all(|&a| a) || agree.iter().all(|&a| !a));
        assert_eq!(raw.iter().filter(|s| **s == 0.0).count(), 5);
        // Both orientations give the right sign here (60 % positives among the determined
        // rows, prior 0.6), whichever sign the power iteration started with.
        let flipped: Vec<f64> = raw.iter().map(|s| -s).collect();
        for scores in [&raw, &flipped] {
            let by_prior = orient_by_prior(scores, 0.6);
            let known: Vec<(usize, f64)> = (0..5).map(|i| (i, labels[i])).collect();
            let by_labels = orient_by_known_labels(scores, &known);
            for oriented in [by_prior, by_labels] {
                let guesses = label_guesses(&oriented, 0.6);
                for (i, (g, y)) in guesses.iter().zip(&labels).enumerate() {
                    if oriented[i] != 0.0 {
                        assert_eq!(*g, *y == 1.0, "row {i}");
                    } else {
                        // Undetermined: the prior's majority class.
                        assert!(*g);
                    }
                }
            }
        }
        // Control: the same rows with a prior on the other side orient the guess wrongly
        // (the view alone cannot tell), and the undetermined rows get the other class.
        let wrong = label_guesses(&orient_by_prior(&raw, 0.3), 0.3);
        let correct = wrong
            .iter()
            .zip(&labels)
            .filter(|(g, y)| **g == (**y == 1.0))
            .count();
        assert!(correct < 10, "{correct} of 40");
        assert_eq!(label_guesses(&[0.0], 0.3), vec![false]);
        assert_eq!(error_projection_scores(&[vec![0.0, 0.0]]), vec![0.0]);
    }
}
