#![doc = include_str!("../README.md")]

pub mod binomial;
pub mod chisquare;
pub mod cluster;
pub mod epsilon;
pub mod error;
pub mod independence;
pub mod kolmogorov;
pub mod ks;
pub mod multiple;
pub mod normal;
pub mod power;
mod special;
pub mod subsets;
pub mod test;

pub use binomial::{
    BinomialTest, Interval, binomial_test, clopper_pearson, clopper_pearson_lower,
    clopper_pearson_upper,
};
pub use chisquare::{
    ChiSquareOptions, ChiSquareTest, Divergence, SparseCells, chi_square_cdf, chi_square_gof,
    chi_square_gof_samples, chi_square_gof_with, chi_square_sf, count_categories,
};
pub use cluster::{argmax_labels, calinski_harabasz, silhouette};
pub use epsilon::{
    Direction, EpsilonLowerBound, Witness, epsilon_lower_bound, epsilon_lower_bound_event,
    epsilon_lower_bound_samples, epsilon_lower_bound_thresholds,
};
pub use error::{Error, PROBABILITY_SUM_TOLERANCE, Result};
pub use independence::{IndependenceTest, chi_square_independence};
pub use kolmogorov::{
    kolmogorov_limit_sf, kolmogorov_smirnov_cdf, kolmogorov_smirnov_sf, smirnov_sf,
};
pub use ks::{
    KsTest, TwoSampleKsTest, TwoSampleMethod, ks_one_sample, ks_one_sample_with_atoms,
    ks_two_sample,
};
pub use multiple::{Adjusted, Correction, benjamini_hochberg, holm};
pub use normal::{ZTest, normal_cdf, normal_sf, z_test};
pub use power::{SampleSizePlan, binomial_test_power, sample_size_for_proportion};
pub use subsets::{SubsetInclusionTest, subset_inclusion_test};
pub use test::{Alpha, Alternative, Confidence, Decision, HypothesisTest, TestSummary};
