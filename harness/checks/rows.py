"""Each check's measurements turned into its verdict row: figure, threshold, pass or fail, and why."""

from __future__ import annotations

from collections.abc import Sequence

from harness.analysis.stats import Estimate
from harness.checks.call_order import BATCH_QUEUE_SHARE, CallOrder
from harness.checks.client import ClientBound
from harness.checks.counters import COMPARED, MAX_DIFFERENCE, CounterComparison, worst
from harness.checks.modes import CONTINUOUS_MAX_WAIT_STEPS, ModeResult
from harness.checks.recorder import MAX_COST
from harness.checks.reproduction import PREDICTED_SYSTEMS, PREDICTION_TOLERANCE, Deviation, Spread
from harness.checks.verdict import CheckRow

PERCENT = 100.0
CPU_NOISE = ("identical servers differ by up to ~9% over runs this short (docs/validation/recorder-cost.md);"
             " the recorder's own work per step is benchmarks/recorder_cost.py's figure")
MODE_RIGHT = {
    "static": "the four admitted in one step, the batch only drained, the fifth held until its last step",
    "continuous": f"the fifth admitted beside the long member, within {CONTINUOUS_MAX_WAIT_STEPS} steps of being sent",
}
COUNTER_NAMES = {
    "steps": ("steps", "steps that sampled a token", "vllm:iteration_tokens_total count"),
    "generated_tokens": ("generated tokens", "generated tokens", "vllm:generation_tokens_total"),
    "prompt_tokens": ("prompt tokens", "prompt tokens", "vllm:prompt_tokens_total"),
}


def mode_row(result: ModeResult) -> CheckRow:
    """All attempts right, none inconclusive, no retry."""
    fault = result.first_fault() if result.attempts else "no attempt was made"
    return CheckRow(
        name=f"{result.mode} mode (B+1)",
        status="pass" if result.passed else "fail",
        measured=result.right,
        rule=">=",
        threshold=result.attempts,
        unit="attempts right",
        explanation=fault or f"{result.right} of {result.attempts}: {MODE_RIGHT[result.mode]}",
    )


def counter_rows(comparisons: Sequence[CounterComparison]) -> list[CheckRow]:
    """One row per counter: the recorded run whose step log is furthest from vLLM's count."""
    rows = []
    for name in COMPARED:
        label, logged_as, counter = COUNTER_NAMES[name]
        far = worst(list(comparisons), name)
        difference = far.difference(name)
        rows.append(CheckRow(
            name=f"step log vs vLLM: {label}",
            status="pass" if difference <= MAX_DIFFERENCE else "fail",
            measured=difference * PERCENT,
            rule="<=",
            threshold=MAX_DIFFERENCE * PERCENT,
            unit="%",
            explanation=f"worst of {len(comparisons)} recorded runs ({far.run}): steps.parquet"
            f" {getattr(far.logged, name):,.0f} {logged_as}, {counter} grew by {getattr(far.counted, name):,.0f}",
        ))
    return rows


def recorder_row(ratio: Estimate, pairs: int, decides: bool = True) -> CheckRow:
    """The cost is 1 - recorded/plain; it fails only when the whole interval lies above MAX_COST.

    Where the A/B cannot resolve MAX_COST (`decides` False: the CPU), the row is reported and skipped.
    """
    cost, low, high = 1 - ratio.point, 1 - ratio.high, 1 - ratio.low
    measured = f"output tok/s recorded/plain {ratio.point:.3f} over {pairs} alternated pairs"
    if decides:
        status = "pass" if low <= MAX_COST else "fail"
        why = f"{measured}; fails only when the whole 95% interval lies above {MAX_COST:.0%}"
    else:
        status = "skip"
        why = f"{measured}; not judged on the CPU, {CPU_NOISE}"
    return CheckRow(
        name="step recorder cost",
        status=status,
        measured=cost * PERCENT,
        rule="low<=",
        threshold=MAX_COST * PERCENT,
        unit="%",
        interval=(low * PERCENT, high * PERCENT),
        explanation=why,
    )


def skipped_recorder_row() -> CheckRow:
    """The recorder A/B was not run (`CheckSizes.recorder_ab` False): the row says why and where its cost is."""
    return CheckRow(
        name="step recorder cost",
        status="skip",
        measured=None,
        rule="low<=",
        threshold=MAX_COST * PERCENT,
        unit="%",
        explanation=f"A/B not run (--recorder-ab runs it): on the CPU {CPU_NOISE}",
    )


def call_order_row(found: CallOrder, async_scheduling: bool) -> CheckRow:
    """The engine ran the call order it was started for: a batch queue with async scheduling, else none."""
    wanted = "a batch queue (async scheduling)" if async_scheduling else "synchronous steps"
    ran = "a batch queue" if found.batch_queue else "mostly synchronous" if found.overlapping else "synchronous steps"
    right = found.batch_queue if async_scheduling else found.overlapping == 0
    return CheckRow(
        name="engine call order",
        status="pass" if right and found.pairs else "fail",
        measured=found.share * PERCENT,
        rule=">=" if async_scheduling else "<=",
        threshold=BATCH_QUEUE_SHARE * PERCENT if async_scheduling else 0.0,
        unit="%",
        explanation=f"started for {wanted}; the step log shows {ran}: {found.overlapping:,} of {found.pairs:,}"
        " consecutive steps began before the previous one ended",
    )


def client_row(found: ClientBound) -> CheckRow:
    return CheckRow(
        name="client not bound",
        status="pass" if not found.bound else "fail",
        measured=len(found.bound),
        rule="<=",
        threshold=0,
        unit="runs",
        explanation=found.summary(),
    )


# Why a CPU's tok/s cannot judge the ordering: its steps are not nearly free to widen.
CPU_STEP_COST = (
    "on two CPU cores a step's cost grows nearly with the sequences in it, so the schedule's"
    " gain need not show in tok/s in 32 requests (docs/validation/gpu-check-cpu.md)"
)


def ordering_row(spread: Spread, decides: bool = True) -> CheckRow:
    """continuous > static > naive: the smaller of the two steps down must exceed 1.

    Where steps are not nearly free to widen (`decides` False: the CPU), the row is reported and skipped.
    """
    margin = min(spread.ratio("static"), spread.tok_s["static"] / spread.tok_s["naive"])
    why = (f"{spread.summary()} (continuous/static {spread.ratio('static'):.2f}x,"
           f" continuous/naive {spread.ratio('naive'):.2f}x); measured: the smaller step down")
    if decides:
        status = "pass" if spread.ordered else "fail"
    else:
        status = "skip"
        why += f"; not judged without a GPU: {CPU_STEP_COST}"
    return CheckRow(
        name=f"continuous > static > naive: {spread.workload}",
        status=status,
        measured=margin,
        rule=">",
        threshold=1.0,
        unit="x",
        explanation=why,
    )


def prediction_rows(found: Sequence[Deviation], gpu: str) -> list[CheckRow]:
    """Per predicted system, the workload furthest from its on-paper prediction."""
    rows = []
    for system in PREDICTED_SYSTEMS:
        mine = [deviation for deviation in found if deviation.system == system]
        far = max(mine, key=lambda deviation: abs(deviation.relative))
        listed = ", ".join(f"{d.workload} {d.measured:,.0f} vs {d.predicted:,.0f}" for d in mine)
        rows.append(CheckRow(
            name=f"{system} vs paper ({gpu})",
            status="pass" if abs(far.relative) <= PREDICTION_TOLERANCE else "fail",
            measured=far.relative * PERCENT,
            rule="|x|<=",
            threshold=PREDICTION_TOLERANCE * PERCENT,
            unit="%",
            explanation=f"measured vs predicted tok/s: {listed} (harness.paper.gpu_predict)",
        ))
    return rows


def skipped_prediction_row(reason: str) -> CheckRow:
    return CheckRow(name="measured vs paper", status="skip", measured=None, rule="|x|<=",
                    threshold=PREDICTION_TOLERANCE * PERCENT, unit="%", explanation=reason)
