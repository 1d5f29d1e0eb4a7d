//! Whether a difference between two sets of repetitions is more than noise: the
//! Mann–Whitney U (Wilcoxon rank-sum) test, two-sided, and the median and range of
//! each side.
//!
//! A rank test because a regression gate sees few repetitions (5 a side is typical)
//! of figures that are not normal (tail latencies, error counts that are mostly 0):
//! ranks make no assumption about the shape, and one wild repetition moves its rank
//! by at most the sample size, not by its size. Pure functions of the values, so they
//! are tested on textbook numbers.
//!
//! The p-value is exact for small samples (both sides at most [`EXACT_MAX`]): the
//! permutation distribution of the rank sum, over every way of splitting the pooled
//! values into the two sides, counted by dynamic programming. With ties the ranks are
//! mid-ranks and the distribution is that of the mid-rank sums (what a permutation
//! test of the tied data gives), not the untied table. Above that, the normal
//! approximation with the tie correction of the variance and a continuity correction
//! of 0.5, as scipy's `mannwhitneyu(method="asymptotic")` computes it.

/// The largest side the exact p-value is computed for. Beyond it the counts grow past
/// what is worth enumerating and the normal approximation is within a few thousandths.
pub const EXACT_MAX: usize = 20;

/// The outcome of a rank test.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankTest {
    /// U of the first sample: how many (first, second) pairs have the first one
    /// larger, a tie counting one half. `n1 * n2 / 2` when the samples interleave.
    pub u: f64,
    /// Two-sided p-value: how likely a difference at least this large in either
    /// direction is when both samples come from the same distribution.
    pub p: f64,
    /// Whether `p` is exact (the permutation distribution) or the normal approximation.
    pub exact: bool,
}

/// The median and range of one side's values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// The median and range of `values` (non-finite ones left out); `None` when none is
/// left. The median of an even count is the mean of the middle two.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = match n {
        0 => return None,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    };
    Some(Summary {
        n,
        median,
        min: v[0],
        max: v[n - 1],
    })
}

/// The two-sided Mann–Whitney U test of `a` against `b` (non-finite values left out);
/// `None` when either side is left empty.
///
/// Identical values on both sides (every value tied) give `p = 1`: there is nothing
/// to tell apart.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<RankTest> {
    let a: Vec<f64> = a.iter().copied().filter(|x| x.is_finite()).collect();
    let b: Vec<f64> = b.iter().copied().filter(|x| x.is_finite()).collect();
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let ranked = doubled_midranks(&a, &b);
    // The first sample's rank sum, doubled so mid-ranks stay integers.
    let r1: u64 = ranked
        .ranks
        .iter()
        .zip(&ranked.first)
        .filter(|(_, f)| **f)
        .map(|(r, _)| *r)
        .sum();
    let u = r1 as f64 / 2.0 - (n1 * (n1 + 1)) as f64 / 2.0;
    if n1 <= EXACT_MAX && n2 <= EXACT_MAX {
        return Some(RankTest {
            u,
            p: exact_p(&ranked.ranks, n1, r1),
            exact: true,
        });
    }
    let p = normal_p(n1, n2, u, &ranked.ties);
    Some(RankTest { u, p, exact: false })
}

/// The two-sided p-value of U = `u` by the normal approximation: the variance
/// corrected for the tied groups of sizes `ties`, and 0.5 of continuity correction.
fn normal_p(n1: usize, n2: usize, u: f64, ties: &[u64]) -> f64 {
    let (n1, n2) = (n1 as f64, n2 as f64);
    let n = n1 + n2;
    let ties: f64 = ties.iter().map(|&t| (t * t * t - t) as f64).sum();
    let var = n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - n1 * n2 / 2.0).abs() - 0.5).max(0.0) / var.sqrt();
    erfc(z / std::f64::consts::SQRT_2).min(1.0)
}

/// The smallest two-sided p-value `n1` against `n2` values can give: both sides wholly
/// apart, one split of the `C(n1 + n2, n1)` in each direction. Ties only raise it.
/// 3 against 3 gives 0.1, so at α = 0.05 no difference can be shown with 3 a side.
pub fn smallest_p(n1: usize, n2: usize) -> f64 {
    (2.0 / binomial(n1 + n2, n1)).min(1.0)
}

/// The fewest repetitions a side needs (with as many on the other) for a difference
/// to be significant at `alpha`: 4 at 0.05, 5 at 0.01.
pub fn repetitions_needed(alpha: f64) -> usize {
    (1..=64).find(|&n| smallest_p(n, n) < alpha).unwrap_or(64)
}

fn binomial(n: usize, k: usize) -> f64 {
    let k = k.min(n - k);
    (0..k).fold(1.0, |c, i| c * (n - i) as f64 / (i + 1) as f64)
}

/// The pooled values' mid-ranks, doubled (so ranks stay integers), in pooled order.
struct Ranked {
    ranks: Vec<u64>,
    /// Whether each value is of the first sample.
    first: Vec<bool>,
    /// The size of each group of tied values (1 for an untied one).
    ties: Vec<u64>,
}

fn doubled_midranks(a: &[f64], b: &[f64]) -> Ranked {
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut ranks = vec![0; pooled.len()];
    let mut ties = Vec::new();
    let mut i = 0;
    while i < pooled.len() {
        let mut j = i;
        while j < pooled.len() && pooled[j].0 == pooled[i].0 {
            j += 1;
        }
        // Ranks i+1..=j (1-based) share their mean, (i + 1 + j) / 2; doubled.
        for r in &mut ranks[i..j] {
            *r = (i + 1 + j) as u64;
        }
        ties.push((j - i) as u64);
        i = j;
    }
    Ranked {
        ranks,
        first: pooled.iter().map(|p| p.1).collect(),
        ties,
    }
}

/// The exact two-sided p-value of the (doubled) rank sum `r1` of `n1` values drawn
/// from `ranks`: twice the smaller tail of the permutation distribution, at most 1.
/// The distribution is symmetric about its mean even with ties (mid-ranks are
/// symmetric), so doubling one tail is the two-sided test.
fn exact_p(ranks: &[u64], n1: usize, r1: u64) -> f64 {
    let max_sum: u64 = ranks.iter().sum();
    let width = max_sum as usize + 1;
    // ways[k][s]: how many k-subsets of the ranks seen so far sum to s. At most
    // C(40, 20) ≈ 1.4e11, well within u64.
    let mut ways = vec![vec![0u64; width]; n1 + 1];
    ways[0][0] = 1;
    for &r in ranks {
        let r = r as usize;
        for k in (1..=n1).rev() {
            let (lower, upper) = ways.split_at_mut(k);
            for s in (r..width).rev() {
                upper[0][s] += lower[k - 1][s - r];
            }
        }
    }
    let dist = &ways[n1];
    let total: u64 = dist.iter().sum();
    let at = r1 as usize;
    let below: u64 = dist[..=at].iter().sum();
    let above: u64 = dist[at..].iter().sum();
    (2.0 * below.min(above) as f64 / total as f64).min(1.0)
}

/// The complementary error function, to a relative error below 1.2e-7 (Numerical
/// Recipes' Chebyshev fit `erfcc`): the normal tail without a maths dependency.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * (-z * z + poly).exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64, tol: f64) {
        assert!((got - want).abs() <= tol, "got {got}, want {want}");
    }

    /// scipy's own documentation example (`scipy.stats.mannwhitneyu`, the males and
    /// females of Conover's table): U = 17, exact p = 0.1111111111111111, and with
    /// `method="asymptotic"` p = 0.11134688653314041.
    #[test]
    fn scipy_documentation_example() {
        let males = [19.0, 22.0, 16.0, 29.0, 24.0];
        let females = [20.0, 11.0, 17.0, 12.0];
        let t = mann_whitney(&males, &females).unwrap();
        assert_eq!(t.u, 17.0);
        assert!(t.exact);
        close(t.p, 1.0 / 9.0, 1e-12);
        // The normal branch on the same numbers (as if the samples were large).
        close(
            normal_p(5, 4, 17.0, &[1; 9]),
            0.111_346_886_533_140_41,
            1e-6,
        );
    }

    #[test]
    fn a_2x_shift_with_5_against_5_is_significant() {
        let base = [10.2, 9.8, 10.5, 9.9, 10.1];
        let slow: Vec<f64> = base.iter().map(|x| x * 2.0).collect();
        let t = mann_whitney(&base, &slow).unwrap();
        // Wholly apart: 2 of the C(10, 5) = 252 splits are at least this extreme.
        assert_eq!(t.u, 0.0);
        close(t.p, 2.0 / 252.0, 1e-15);
        assert!(t.p < 0.05);
        // The test is two-sided: the other way round is just as unlikely.
        assert_eq!(mann_whitney(&slow, &base).unwrap().p, t.p);
        assert_eq!(mann_whitney(&slow, &base).unwrap().u, 25.0);
    }

    #[test]
    fn repetitions_of_the_same_server_are_not_significant() {
        // Brute force over all 252 splits (python3, itertools.combinations): U = 10,
        // p = 0.6904761904761905 (174 of 252 splits as extreme).
        let a = [10.2, 9.8, 10.5, 9.9, 10.1];
        let b = [10.0, 10.4, 9.7, 10.3, 10.6];
        let t = mann_whitney(&a, &b).unwrap();
        assert_eq!(t.u, 10.0);
        close(t.p, 0.690_476_190_476_190_5, 1e-12);
        // The same values: every rank tied across the sides.
        let same = mann_whitney(&a, &a).unwrap();
        assert_eq!((same.u, same.p), (12.5, 1.0));
        let zeros = mann_whitney(&[0.0; 5], &[0.0; 5]).unwrap();
        assert_eq!(zeros.p, 1.0);
    }

    #[test]
    fn three_against_three_cannot_reach_005() {
        let t = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        close(t.p, 0.1, 1e-15);
        close(smallest_p(3, 3), 0.1, 1e-15);
        close(smallest_p(4, 4), 2.0 / 70.0, 1e-15);
        close(smallest_p(5, 5), 2.0 / 252.0, 1e-15);
        close(smallest_p(3, 5), 2.0 / 56.0, 1e-15);
        assert_eq!(smallest_p(1, 1), 1.0);
        assert_eq!(repetitions_needed(0.05), 4);
        assert_eq!(repetitions_needed(0.01), 5);
        assert_eq!(repetitions_needed(0.2), 3);
    }

    /// Ties: the exact permutation distribution of the mid-rank sums. The expected
    /// values are a brute force over every split (python3: the mid-ranks, then
    /// `itertools.combinations` of the pooled indices, counting rank sums at least as
    /// far out), written independently of this module.
    #[test]
    fn ties_use_the_permutation_distribution_of_midranks() {
        let t = mann_whitney(&[0.0, 0.0, 1.0, 2.0, 2.0], &[1.0, 2.0, 3.0, 3.0, 4.0]).unwrap();
        assert_eq!(t.u, 3.5);
        close(t.p, 0.087_301_587_301_587_3, 1e-12);
        let t = mann_whitney(&[1.0, 1.0, 1.0, 2.0], &[1.0, 2.0, 2.0, 3.0, 3.0]).unwrap();
        assert_eq!(t.u, 3.5);
        close(t.p, 0.206_349_206_349_206_34, 1e-12);
    }

    /// Above [`EXACT_MAX`] a side, the normal approximation; expected values from the
    /// same formula in python3 (`math.erfc`), which gives scipy's documented
    /// asymptotic p above.
    #[test]
    fn large_samples_use_the_normal_approximation() {
        let a: Vec<f64> = (0..25).map(f64::from).collect();
        let b: Vec<f64> = (0..25).map(|i| f64::from(i) + 5.5).collect();
        let t = mann_whitney(&a, &b).unwrap();
        assert!(!t.exact);
        assert_eq!(t.u, 190.0);
        close(t.p, 0.017_925_777_357_406_487, 1e-6);
        let a: Vec<f64> = (0..22).map(|i| f64::from(i % 7)).collect();
        let b: Vec<f64> = (0..23).map(|i| f64::from(i % 5 + 1)).collect();
        let t = mann_whitney(&a, &b).unwrap();
        assert_eq!(t.u, 250.5);
        close(t.p, 0.963_320_016_322_710_5, 1e-6);
        // Just at the limit, still exact, and it agrees with the approximation roughly.
        let a: Vec<f64> = (0..20).map(f64::from).collect();
        let b: Vec<f64> = (0..20).map(|i| f64::from(i) + 4.5).collect();
        let t = mann_whitney(&a, &b).unwrap();
        assert!(t.exact);
        close(t.p, normal_p(20, 20, t.u, &[1; 40]), 0.01);
    }

    #[test]
    fn empty_and_non_finite_values() {
        assert_eq!(mann_whitney(&[], &[1.0]), None);
        assert_eq!(mann_whitney(&[f64::NAN], &[1.0]), None);
        let s = summarize(&[3.0, f64::NAN, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((s.n, s.median, s.min, s.max), (4, 2.5, 1.0, 10.0));
        assert_eq!(summarize(&[5.0]).unwrap().median, 5.0);
        assert_eq!(summarize(&[]), None);
    }

    #[test]
    fn erfc_matches_known_values() {
        // Abramowitz and Stegun, table 7.1: erfc(0.5) = 0.4795001222, erfc(1) =
        // 0.1572992070, erfc(2) = 0.0046777350.
        close(erfc(0.0), 1.0, 1e-7);
        close(erfc(0.5), 0.479_500_122_2, 1e-7);
        close(erfc(1.0), 0.157_299_207_0, 1e-7);
        close(erfc(2.0), 0.004_677_735_0, 1e-8);
        close(erfc(-1.0), 2.0 - 0.157_299_207_0, 1e-7);
    }
}
