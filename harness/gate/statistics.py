"""The regression gate's decision: is a candidate's throughput a regression? Pure, no I/O.

Inputs are throughputs (tok/s, higher is better), one per repetition: the baseline's (the
last accepted nights, pooled) and the candidate's. The answer has three outcomes, as
Chromium's Pinpoint does: **regression**, **pass**, or **inconclusive** (measure again).

The rule: a regression only when the median ratio candidate/baseline is below
1 - threshold AND a statistical test agrees.

- The ratio is median(candidate) / median(baseline), with the two-sample bootstrap
  percentile interval of `harness.analysis.stats.unpaired_ratio_ci` (a percentile
  interval of the ratio is the exponentiated interval of the log ratio). Medians,
  because one disturbed repetition on a shared VM must not move the figure.
- The test is a one-sided Mann-Whitney U (`scipy.stats.mannwhitneyu`,
  alternative="less": the candidate's repetitions tend to be lower than the baseline's).
  It is rank-based, so it assumes no distribution (throughput noise on a shared VM is
  skewed, with slow outliers) and is exact at small n (scipy's "auto": exact for fewer
  than 9 repetitions a side without ties). A bootstrap interval is not a test at n = 5: a
  percentile interval of 5 values hugs their range and its coverage is well below
  its nominal 95%, so it sizes the effect here but never decides alone.
- The margin: a second one-sided Mann-Whitney U must also find the candidate slower
  than the baseline lowered by `margin` (3%), at `margin_alpha` (0.05): not merely
  "slower" but "slower by more than 3%", the size of drop the gate must never call.
  The first test alone lets 5 repetitions a side at 3% noise put a true 3% drop beyond a 5%
  line too often; the margin test cuts those calls by more than half, in simulation and
  on replayed real-server repetitions, at a small cost in detecting a true 10% drop
  (docs/validation/gate.md). The margin test confirms what the first test found, hence
  the conventional 0.05 rather than 0.02. What it withholds becomes
  inconclusive, not a pass: the nightly then adds repetitions (its extra-repetitions budget).
- The threshold is what matters (the ratio's size), the test is what makes it real (not
  noise). The effective threshold is max(threshold, 3 x between-night noise): on a
  machine whose nightly medians wander by 3%, a 5% line would be crossed by noise.

Why alpha = 0.02. The exact one-sided MWU p-value can only take the values k / C(n+m, n).
With 5 repetitions a side they are 1/252 = 0.004, 2/252 = 0.008, 4/252 = 0.016, 7/252 = 0.028,
12/252 = 0.048 (at most 0, 1, 2, 3, 4 of the 25 candidate/baseline pairs with the
candidate ahead). Any alpha in [0.016, 0.028) means "at most 2 of 25"; 0.02 is chosen:
- detection: at 3% noise, alpha = 0.01 (at most 1 of 25) would leave the rule's
  detection of a true 10% drop on the 95% it is held to; 0.02 clears it
  (docs/validation/gate.md);
- false alarms: a false alarm needs both conditions. With no change the test alone
  passes alpha = 0.02 now and then, but the ratio is rarely beyond a 5% line at the same
  time (docs/validation/gate.md). The ratio condition, not the test, is what holds the
  false-alarm rate down, which is also why the line widens with the between-night noise.
With fewer repetitions alpha is out of reach (3 a side: smallest p = 1/20; 3 against 4:
1/35 = 0.029; 4 a side, 1/70 = 0.014, is enough), so a comparison whose smallest attainable
p exceeds alpha is inconclusive rather than a sure pass. Ties (rare in tok/s) switch
scipy to its normal approximation. benchmarks/gate_statistics.py measures the rates.

Inconclusive, with the reasons in words, when:
- the caller flags a problem (failed requests, an UNSTABLE health verdict);
- a side has fewer than MIN_REPETITIONS (3) repetitions, or too few in all for the test to reach
  alpha (see above);
- a side's repetition CV exceeds MAX_REPETITION_CV (10%): with such spread 5 repetitions cannot
  resolve a 5% change, and the machine, not the code, is what moved;
- it could be a regression but the evidence is short: the ratio is below the line but
  the test does not agree, or shows it slower but not by more than the margin; or the
  test finds the candidate slower, the ratio sits above the line, and its interval
  reaches below it. A straddling interval without a significant test is what noise
  looks like at n = 5 and counts as a pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

from harness.analysis.stats import Estimate, coefficient_of_variation, unpaired_ratio_ci
from harness.gate.rule import GateRule

Outcome = Literal["pass", "regression", "inconclusive"]

# The line sits at least this many between-night standard deviations below 1.
NOISE_MULTIPLE = 3.0


@dataclass(frozen=True)
class Verdict:
    """The gate's answer for one configuration, and every figure behind it."""

    outcome: Outcome
    # median(candidate) / median(baseline) with its bootstrap interval (no coverage claimed).
    ratio: Estimate
    # One-sided Mann-Whitney U p-value for "candidate lower than baseline".
    p_value: float
    # The same test against the baseline lowered by `margin`: "slower by more than the margin".
    margin_p_value: float
    margin: float
    alpha: float
    # The threshold asked for, and the one applied: max(threshold, 3 x noise).
    threshold: float
    effective_threshold: float
    # The baseline's between-night noise given by the caller; None if not given.
    noise: float | None
    n_baseline: int
    n_candidate: int
    baseline_cv: float
    candidate_cv: float
    # Why this outcome, in plain words; the first says what decided it.
    reasons: tuple[str, ...]

    @property
    def line(self) -> float:
        """The ratio below which a drop counts: 1 - effective threshold."""
        return 1.0 - self.effective_threshold


def decide(
    baseline: Sequence[float],
    candidate: Sequence[float],
    rule: GateRule | None = None,
    noise: float | None = None,
    problems: Sequence[str] = (),
) -> Verdict:
    """Judge `candidate` repetitions against `baseline` repetitions (tok/s, higher is better).

    `noise` is the baseline's between-night noise as a fraction (see
    `between_night_noise`); `problems` are the caller's reasons to distrust the
    repetitions (failed requests, UNSTABLE health): any makes the verdict inconclusive.
    ValueError if a side is empty or holds a value that is not finite and > 0, or if
    `noise` is negative or not finite.
    """
    rule = rule or GateRule()
    if noise is not None and not (math.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite fraction >= 0, got {noise}")
    # unpaired_ratio_ci also validates both samples (non-empty, finite, > 0).
    ratio = unpaired_ratio_ci(candidate, baseline)
    base, cand = np.asarray(baseline, dtype=np.float64), np.asarray(candidate, dtype=np.float64)
    p_value = float(sps.mannwhitneyu(cand, base, alternative="less").pvalue)
    margin_p_value = float(sps.mannwhitneyu(cand, base * (1.0 - rule.margin), alternative="less").pvalue)
    effective = max(rule.threshold, NOISE_MULTIPLE * noise) if noise is not None else rule.threshold
    base_cv, cand_cv = coefficient_of_variation(base), coefficient_of_variation(cand)

    def verdict(outcome: Outcome, reasons: Sequence[str]) -> Verdict:
        return Verdict(
            outcome=outcome, ratio=ratio, p_value=p_value, margin_p_value=margin_p_value, margin=rule.margin,
            alpha=rule.alpha, threshold=rule.threshold,
            effective_threshold=effective, noise=noise, n_baseline=int(base.size), n_candidate=int(cand.size),
            baseline_cv=base_cv, candidate_cv=cand_cv, reasons=(*reasons, _evidence(ratio, p_value, 1 - effective)),
        )

    untrusted = [*problems, *_sample_problems(base.size, cand.size, base_cv, cand_cv, rule)]
    if untrusted:
        return verdict("inconclusive", untrusted)
    line = 1.0 - effective
    below, significant = ratio.point < line, p_value <= rule.alpha
    if below and significant and margin_p_value <= rule.margin_alpha:
        return verdict("regression", [f"candidate is {1 - ratio.point:.1%} slower, beyond the {effective:.1%} "
                                      f"threshold, and the test agrees it is slower by more than the "
                                      f"{rule.margin:.0%} margin (p = {margin_p_value:.3g} <= {rule.margin_alpha:g})"])
    if below and significant:
        return verdict("inconclusive", [f"candidate is {1 - ratio.point:.1%} slower (p = {p_value:.3g}), but the test "
                                        f"does not yet show it slower by more than the {rule.margin:.0%} margin "
                                        f"(p = {margin_p_value:.3g} > {rule.margin_alpha:g}): add repetitions"])
    if below:
        return verdict("inconclusive", [f"ratio {ratio.point:.3f} is below the line {line:.3f} but the test does "
                                        f"not agree (p = {p_value:.3g} > {rule.alpha:g}): add repetitions"])
    if significant and ratio.low < line:
        return verdict("inconclusive", [f"candidate is significantly slower (p = {p_value:.3g}) and its ratio's "
                                        f"interval reaches {ratio.low:.3f}, below the line {line:.3f}:"
                                        " add repetitions"])
    if significant:
        return verdict("pass", [f"candidate is {1 - ratio.point:.1%} slower (p = {p_value:.3g}), within the "
                                f"{effective:.1%} threshold"])
    return verdict("pass", [f"no drop beyond the {effective:.1%} threshold"])


def between_night_noise(nights: Sequence[Sequence[float]]) -> float | None:
    """CV of the per-night medians of the baseline's repetitions; None with fewer than two nights.

    One median per night (one invocation's repetitions), so repetition-to-repetition noise within a night,
    which the test already weighs, is not counted twice.
    """
    if len(nights) < 2:
        return None
    return coefficient_of_variation([float(np.median(np.asarray(night, dtype=np.float64))) for night in nights])


def smallest_p_value(n_baseline: int, n_candidate: int) -> float:
    """The smallest one-sided exact Mann-Whitney p-value these sample sizes allow: 1 / C(n+m, n)."""
    return 1.0 / math.comb(n_baseline + n_candidate, n_candidate)


def repetitions_needed(alpha: float) -> int:
    """The fewest repetitions a side (the same on both) at which the one-sided exact test can reach `alpha`."""
    n = 1
    while smallest_p_value(n, n) > alpha:
        n += 1
    return n


def _sample_problems(n_base: int, n_cand: int, base_cv: float, cand_cv: float, rule: GateRule) -> list[str]:
    problems = []
    if min(n_base, n_cand) < rule.min_repetitions:
        problems.append(f"too few repetitions: {n_base} baseline, {n_cand} candidate"
                        f" (at least {rule.min_repetitions} a side)")
    elif smallest_p_value(n_base, n_cand) > rule.alpha:
        needed = repetitions_needed(rule.alpha)
        problems.append(
            f"too few repetitions for the test to reach alpha {rule.alpha:g}: with {n_base} baseline and {n_cand} "
            f"candidate repetitions its smallest p is {smallest_p_value(n_base, n_cand):.3g}; it needs {needed} a"
            f" side to decide (e.g. `reproduce --repetitions {needed}` for both)"
        )
    for side, cv in (("baseline", base_cv), ("candidate", cand_cv)):
        if cv > rule.max_repetition_cv:
            problems.append(f"{side} repetitions vary too much: CV {cv:.1%} > {rule.max_repetition_cv:.0%}")
    return problems


def _evidence(ratio: Estimate, p_value: float, line: float) -> str:
    return (f"median ratio {ratio.point:.3f} (bootstrap interval {ratio.low:.3f}-{ratio.high:.3f}, coverage not"
            f" known), line {line:.3f}, "
            f"one-sided Mann-Whitney p = {p_value:.3g}")
