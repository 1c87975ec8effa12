//! The label-inference attacks on the host's view (H1 in `docs/THREAT_MODEL.md`), in one
//! place for the tests that measure them and the `privacy_table` example that tabulates
//! them. Both score every row of δ_A the host receives; the score's ROC AUC against the
//! labels ([`crate::data::roc_auc`]) is the attack's success.

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
}
