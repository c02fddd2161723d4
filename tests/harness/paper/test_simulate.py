"""Hand-checked schedules for continuous, static and naive batching."""

from __future__ import annotations

import time

import numpy as np
import pytest

from harness.paper.simulate import InterpolatedStepCost, SlotSpan, simulate, slot_diagram
from harness.paper.step_cost import LinearStepCost
from harness.systems import SYSTEMS

SEED = [100, 200, 300, 1000]
ONE_MS = InterpolatedStepCost.from_points({1: 0.001})
# t(b) = 1 ms + 0.5 ms * b, given by two points and extended linearly.
AFFINE = InterpolatedStepCost.from_points({1: 0.0015, 2: 0.002})


# --- InterpolatedStepCost ----------------------------------------------------------------


def test_interpolated_step_cost_interpolates_and_extrapolates_linearly():
    cost = InterpolatedStepCost.from_points({4: 0.016, 1: 0.010})
    # Slope (16 - 10) / (4 - 1) = 2 ms per sequence.
    assert cost.decode_step_s(1) == pytest.approx(0.010)
    assert cost.decode_step_s(2) == pytest.approx(0.012)
    assert cost.decode_step_s(4) == pytest.approx(0.016)
    assert cost.decode_step_s(8) == pytest.approx(0.016 + 4 * 0.002)


def test_interpolated_step_cost_uses_the_segment_around_the_point():
    cost = InterpolatedStepCost.from_points({1: 0.010, 2: 0.011, 10: 0.019, 20: 0.039})
    # Between 2 and 10: 1 ms per sequence; beyond 20 the last segment's 2 ms per sequence.
    assert cost.decode_step_s(6) == pytest.approx(0.015)
    assert cost.decode_step_s(15) == pytest.approx(0.029)
    assert cost.decode_step_s(30) == pytest.approx(0.059)


def test_interpolated_step_cost_single_point_is_constant():
    assert ONE_MS.decode_step_s(1) == ONE_MS.decode_step_s(500) == 0.001


def test_interpolated_step_cost_clamps_downward_extrapolation_to_stay_positive():
    cost = InterpolatedStepCost.from_points({2: 0.001, 4: 0.010})
    # Slope 4.5 ms per sequence would give 1 - 4.5 < 0 ms at b=1; the floor is 1% of 1 ms.
    assert cost.decode_step_s(1) == pytest.approx(1e-5)


@pytest.mark.parametrize(
    ("points", "prefill", "argument"),
    [
        ({}, 0.0, "points"),
        ({0: 0.001}, 0.0, "batch sizes"),
        ({1: 0.0}, 0.0, "seconds"),
        ({1: -0.001}, 0.0, "seconds"),
        ({1: float("nan")}, 0.0, "seconds"),
        ({1: 0.001}, -1e-6, "prefill_s_per_token"),
    ],
)
def test_interpolated_step_cost_rejects_bad_points(points, prefill, argument):
    with pytest.raises(ValueError, match=argument):
        InterpolatedStepCost.from_points(points, prefill_s_per_token=prefill)


def test_interpolated_step_cost_rejects_empty_step():
    with pytest.raises(ValueError, match="active"):
        ONE_MS.decode_step_s(0)


# --- The seed example: [100, 200, 300, 1000] in one batch of 4 -----------------------


@pytest.mark.parametrize("system", SYSTEMS)
def test_seed_example_takes_1000_steps_at_40_percent_useful(system):
    result = simulate(system, SEED, 4, ONE_MS)
    # The longest request needs 1000 steps; 4 rows x 1000 steps = 4000 slots, of which
    # 100 + 200 + 300 + 1000 = 1600 hold wanted tokens. Continuous batching does no
    # better here: there is nobody waiting to fill the rows that free up.
    assert result.num_steps == 1000
    assert result.total_token_slots == 4000
    assert result.useful_token_slots == 1600
    assert result.useful_fraction == 0.4
    assert result.makespan_s == pytest.approx(1.0)
    assert result.output_tokens_per_s == pytest.approx(1600.0)


@pytest.mark.parametrize("system", ["static", "continuous"])
def test_seed_example_rows_stop_computing_as_they_finish(system):
    result = simulate(system, SEED, 4, ONE_MS)
    # 4 rows compute for steps 0-99, 3 for 100-199, 2 for 200-299, 1 for 300-999.
    expected = np.repeat([4, 3, 2, 1], [100, 100, 100, 700])
    np.testing.assert_array_equal(result.step_active, expected)
    assert result.generated_tokens == 1600
    np.testing.assert_allclose(result.finish_s, [0.1, 0.2, 0.3, 1.0])
    # Unweighted: 1600 / 4000; weighted by duration too, as every step costs 1 ms.
    assert result.mean_occupancy_per_step == pytest.approx(0.4)
    assert result.mean_occupancy == pytest.approx(0.4)


def test_seed_example_naive_pads_every_row_to_1000():
    result = simulate("naive", SEED, 4, ONE_MS)
    # All 4 rows compute all 1000 steps: 4000 tokens generated, 2400 of them padding,
    # and every request comes back when the padded batch does.
    np.testing.assert_array_equal(result.step_active, np.full(1000, 4))
    assert result.generated_tokens == 4000
    np.testing.assert_allclose(result.finish_s, [1.0] * 4)
    assert result.mean_occupancy == pytest.approx(1.0)


def test_first_token_comes_from_the_admission_step():
    result = simulate("continuous", SEED, 4, ONE_MS)
    # All admitted at step 0; its end (1 ms) is when each first token exists.
    np.testing.assert_allclose(result.first_token_s, [0.001] * 4)
    np.testing.assert_array_equal(result.admit_step, [0, 0, 0, 0])
    np.testing.assert_array_equal(result.end_step, SEED)


# --- Eight requests: the seed twice, B=4, 1 ms steps -----------------------------------


def test_static_runs_two_full_batches():
    result = simulate("static", SEED * 2, 4, ONE_MS)
    # Batch 1 holds requests 0-3 for 1000 steps; batch 2 (4-7) starts only then.
    assert result.num_steps == 2000
    assert result.makespan_s == pytest.approx(2.0)
    np.testing.assert_array_equal(result.admit_step, [0, 0, 0, 0, 1000, 1000, 1000, 1000])
    np.testing.assert_allclose(result.finish_s, [0.1, 0.2, 0.3, 1.0, 1.1, 1.2, 1.3, 2.0])
    # 3200 useful of 4 x 2000 = 8000 slots.
    assert result.useful_fraction == pytest.approx(0.4)


def test_continuous_refills_rows_as_they_free():
    result = simulate("continuous", SEED * 2, 4, ONE_MS)
    # Step 100: row 0 (the first 100) frees; request 4 (100) joins, runs 100-200.
    # Step 200: rows 0 (request 4) and 1 (the first 200) free; requests 5 (200) and
    #           6 (300) join, running 200-400 and 200-500.
    # Step 300: row 2 (the first 300) frees; request 7 (1000) joins, runs 300-1300.
    # Request 3 ends at 1000, so the makespan is 1300 steps = 1.3 s.
    assert result.num_steps == 1300
    assert result.makespan_s == pytest.approx(1.3)
    np.testing.assert_array_equal(result.admit_step, [0, 0, 0, 0, 100, 200, 200, 300])
    np.testing.assert_array_equal(result.end_step, [100, 200, 300, 1000, 200, 400, 500, 1300])
    np.testing.assert_array_equal(result.slot, [0, 1, 2, 3, 0, 0, 1, 2])
    np.testing.assert_allclose(result.first_token_s, [0.001] * 4 + [0.101, 0.201, 0.201, 0.301])
    np.testing.assert_allclose(result.finish_s, [0.1, 0.2, 0.3, 1.0, 0.2, 0.4, 0.5, 1.3])
    # Rows busy: 4 until step 500 (the 300 ends), 2 until 1000, then 1 until 1300.
    expected = np.repeat([4, 3, 2, 1], [400, 100, 500, 300])
    np.testing.assert_array_equal(result.step_active, expected)
    # 3200 useful tokens in 4 x 1300 = 5200 slots.
    assert result.useful_token_slots == 3200
    assert result.total_token_slots == 5200
    assert result.useful_fraction == pytest.approx(3200 / 5200)
    assert result.output_tokens_per_s == pytest.approx(3200 / 1.3)


# --- Static versus naive ---------------------------------------------------------------


def test_constant_step_cost_makes_static_and_naive_equally_fast():
    static = simulate("static", SEED * 2, 4, ONE_MS)
    naive = simulate("naive", SEED * 2, 4, ONE_MS)
    assert static.num_steps == naive.num_steps == 2000
    assert static.makespan_s == pytest.approx(naive.makespan_s)


def test_growing_step_cost_makes_static_faster_than_naive():
    static = simulate("static", SEED, 4, AFFINE)
    naive = simulate("naive", SEED, 4, AFFINE)
    # Static: 1000 steps x 1 ms + 0.5 ms x 1600 sequence-steps = 1.8 s.
    # Naive: every step has all 4 rows: 1000 x (1 + 0.5 x 4) ms = 3.0 s.
    assert static.makespan_s == pytest.approx(1.8)
    assert naive.makespan_s == pytest.approx(3.0)
    # Static's steps cost 3, 2.5, 2 and 1.5 ms for 100, 100, 100 and 700 steps:
    # sum(active x duration) = 1.2 + 0.75 + 0.4 + 1.05 = 3.4, over 4 x 1.8 s = 0.4722.
    assert static.mean_occupancy == pytest.approx(3.4 / 7.2)
    assert static.mean_occupancy_per_step == pytest.approx(0.4)


# --- Throughput ordering -----------------------------------------------------------------


def test_spread_lengths_order_continuous_over_static_over_naive():
    lengths = np.random.default_rng(7).integers(1, 1537, size=64)
    results = {system: simulate(system, lengths, 8, AFFINE, prompt_tokens=[128] * 64) for system in SYSTEMS}
    rates = {system: r.output_tokens_per_s for system, r in results.items()}
    assert rates["continuous"] > rates["static"] > rates["naive"]
    totals = {system: r.total_tokens_per_s for system, r in results.items()}
    assert totals["continuous"] > totals["static"] > totals["naive"]


@pytest.mark.parametrize("cost", [ONE_MS, AFFINE])
def test_equal_lengths_in_full_batches_make_all_systems_equal(cost):
    # 12 requests of 50 tokens, B=4: three full batches of 50 steps each, every system.
    results = [simulate(system, [50] * 12, 4, cost) for system in SYSTEMS]
    for result in results:
        assert result.num_steps == 150
        assert result.useful_fraction == 1.0
        assert result.makespan_s == pytest.approx(results[0].makespan_s)
        assert result.output_tokens_per_s == pytest.approx(results[0].output_tokens_per_s)


def test_total_tokens_per_s_counts_prompts():
    result = simulate("static", SEED, 4, ONE_MS, prompt_tokens=[100, 100, 100, 100])
    # (400 prompt + 1600 output) tokens in 1.0 s.
    assert result.total_tokens_per_s == pytest.approx(2000.0)
    assert result.output_tokens_per_s == pytest.approx(1600.0)
    assert result.prompt_tokens == 400


# --- Prefill ------------------------------------------------------------------------------


def test_prefill_is_charged_to_the_admission_step():
    cost = InterpolatedStepCost.from_points({1: 0.001}, prefill_s_per_token=1e-5)
    result = simulate("continuous", [10, 10], 2, cost, prompt_tokens=[1000, 1000])
    # Step 0: 1 ms + 2000 prompt tokens x 10 us = 21 ms; then 9 plain steps of 1 ms.
    np.testing.assert_allclose(result.first_token_s, [0.021, 0.021])
    assert result.makespan_s == pytest.approx(0.030)
    assert result.num_steps == 10
    assert result.step_duration_s[0] == pytest.approx(0.021)


def test_naive_prefills_padded_prompts():
    cost = InterpolatedStepCost.from_points({1: 0.001}, prefill_s_per_token=1e-5)
    static = simulate("static", [5, 5], 2, cost, prompt_tokens=[100, 300])
    naive = simulate("naive", [5, 5], 2, cost, prompt_tokens=[100, 300])
    # Static prefills 400 real tokens (4 ms); naive pads both prompts to 300 (6 ms).
    assert static.makespan_s == pytest.approx(0.005 + 0.004)
    assert naive.makespan_s == pytest.approx(0.005 + 0.006)


# --- Cost by context and prefill ------------------------------------------------------------

# 1 ms per step + 1 us per context token: a step's cost grows as its sequences grow.
BY_CONTEXT = LinearStepCost(overhead_s=0.001, per_sequence_s=0.0, per_prefill_token_s=0.0, per_context_token_s=1e-6)


def test_step_cost_grows_with_the_context_of_its_sequences():
    result = simulate("continuous", [3, 2], 2, BY_CONTEXT, prompt_tokens=[100, 200])
    # Step 0 (prefill): contexts 100 + 200; step 1: 101 + 201; step 2: request 0 alone at 102.
    np.testing.assert_allclose(result.step_duration_s, [0.001 + 300e-6, 0.001 + 302e-6, 0.001 + 102e-6])
    np.testing.assert_allclose(result.finish_s, [0.003704, 0.002602])
    np.testing.assert_allclose(result.first_token_s, [0.0013, 0.0013])


def test_a_naive_row_attends_to_the_padded_context():
    static = simulate("static", [4, 1], 2, BY_CONTEXT, prompt_tokens=[10, 10])
    naive = simulate("naive", [4, 1], 2, BY_CONTEXT, prompt_tokens=[10, 10])
    # Static: 20, 11, 12, 13 context tokens; naive keeps both rows: 20, 22, 24, 26.
    assert static.makespan_s == pytest.approx(0.004 + 56e-6)
    assert naive.makespan_s == pytest.approx(0.004 + 92e-6)


def test_linear_cost_charges_sequences_and_prefill_tokens():
    cost = LinearStepCost(overhead_s=0.002, per_sequence_s=0.0005, per_prefill_token_s=1e-5, per_context_token_s=0.0)
    result = simulate("static", [2, 2], 2, cost, prompt_tokens=[50, 50])
    # Step 0: 2 ms + 2 x 0.5 ms + 100 x 10 us = 4 ms; step 1: 3 ms.
    np.testing.assert_allclose(result.step_duration_s, [0.004, 0.003])


def test_continuous_context_cost_stops_at_the_step_boundary_after_an_arrival():
    # Request 0 alone: step k costs 1 ms + (10 + k) us. Request 1 arrives at 5 ms, which
    # falls inside step 4 (4.046-5.060 ms), so it joins step 5.
    result = simulate("continuous", [20, 3], 2, BY_CONTEXT, prompt_tokens=[10, 10], arrivals=[0.0, 0.005])
    assert result.admit_step[1] == 5
    assert result.first_token_s[1] == pytest.approx(0.00506 + 0.001 + 25e-6)


def test_naive_waves_start_a_gap_after_the_previous_wave_ends():
    plain = simulate("naive", [10, 10, 10], 2, ONE_MS)
    gapped = simulate("naive", [10, 10, 10], 2, ONE_MS, wave_gap_s=0.05)
    # Two waves: the second starts 50 ms late; nothing follows the last one.
    np.testing.assert_allclose(plain.finish_s, [0.010, 0.010, 0.020])
    np.testing.assert_allclose(gapped.finish_s, [0.010, 0.010, 0.070])


@pytest.mark.parametrize("system", ["continuous", "static"])
def test_wave_gap_leaves_server_batching_alone(system):
    plain = simulate(system, [10, 10, 10], 2, ONE_MS)
    gapped = simulate(system, [10, 10, 10], 2, ONE_MS, wave_gap_s=0.05)
    np.testing.assert_allclose(gapped.finish_s, plain.finish_s)


# --- Arrivals -------------------------------------------------------------------------------


@pytest.mark.parametrize("system", SYSTEMS)
def test_request_is_not_admitted_before_it_arrives(system):
    result = simulate(system, [10, 10], 4, ONE_MS, arrivals=[0.0, 5.0])
    # Request 0 runs 0-10 ms; the GPU idles until 5 s; request 1 runs 5.000-5.010 s.
    np.testing.assert_allclose(result.first_token_s, [0.001, 5.001])
    np.testing.assert_allclose(result.finish_s, [0.010, 5.010])
    assert result.makespan_s == pytest.approx(5.010)
    assert result.num_steps == 20
    assert result.total_token_slots == 80


def test_continuous_admits_a_late_arrival_at_the_next_step_boundary():
    result = simulate("continuous", [1000, 10, 10], 4, ONE_MS, arrivals=[0.0, 0.25, 0.2505])
    # Request 1 arrives exactly at the start of step 250 and joins it; request 2
    # arrives mid-step 250 and joins step 251.
    np.testing.assert_array_equal(result.admit_step, [0, 250, 251])
    np.testing.assert_allclose(result.first_token_s, [0.001, 0.251, 0.252])
    np.testing.assert_allclose(result.finish_s, [1.0, 0.260, 0.261])
    assert result.num_steps == 1000


def test_static_holds_a_late_arrival_until_the_batch_ends():
    result = simulate("static", [1000, 10], 4, ONE_MS, arrivals=[0.0, 0.25])
    # The batch formed at 0 holds request 0 alone until 1.0 s; request 1 starts then.
    np.testing.assert_array_equal(result.admit_step, [0, 1000])
    np.testing.assert_allclose(result.finish_s, [1.0, 1.010])


@pytest.mark.parametrize("system", SYSTEMS)
def test_random_arrivals_never_start_early(system):
    rng = np.random.default_rng(3)
    arrivals = rng.uniform(0, 2.0, size=200)
    result = simulate(system, rng.integers(1, 300, size=200), 16, AFFINE, arrivals=arrivals)
    # A request's admission step ends at its first token, so it started one step earlier.
    step_start = result.first_token_s - result.step_duration_s[result.admit_step]
    assert np.all(step_start >= arrivals - 1e-9)
    assert np.all(result.finish_s >= result.first_token_s)


# --- Slot diagram ---------------------------------------------------------------------------


def test_slot_diagram_of_the_seed_example():
    static = slot_diagram(SEED, 4, "static")
    assert static == [
        SlotSpan(row=0, request=0, start_step=0, end_step=100, useful_end_step=100),
        SlotSpan(row=1, request=1, start_step=0, end_step=200, useful_end_step=200),
        SlotSpan(row=2, request=2, start_step=0, end_step=300, useful_end_step=300),
        SlotSpan(row=3, request=3, start_step=0, end_step=1000, useful_end_step=1000),
    ]
    naive = slot_diagram(SEED, 4, "naive")
    # Padding: every row runs to 1000, wanted tokens stop at the request's own length.
    assert [(s.end_step, s.useful_end_step) for s in naive] == [(1000, 100), (1000, 200), (1000, 300), (1000, 1000)]


def test_slot_diagram_shows_continuous_refills():
    spans = slot_diagram(SEED * 2, 4, "continuous")
    # Same schedule as test_continuous_refills_rows_as_they_free, as (row, start, end).
    assert [(s.row, s.start_step, s.end_step) for s in spans[4:]] == [
        (0, 100, 200),
        (0, 200, 400),
        (1, 200, 500),
        (2, 300, 1300),
    ]


# --- Validation and speed -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"system": "dynamic"}, "system"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"output_tokens": []}, "output_tokens"),
        ({"output_tokens": [10, 0]}, "output_tokens"),
        ({"output_tokens": [10.5, 3.0]}, "output_tokens"),
        ({"prompt_tokens": [10]}, "prompt_tokens"),
        ({"prompt_tokens": [10, -1]}, "prompt_tokens"),
        ({"arrivals": [0.0]}, "arrivals"),
        ({"arrivals": [0.0, -1.0]}, "arrivals"),
        ({"arrivals": [0.0, float("inf")]}, "arrivals"),
        ({"wave_gap_s": -0.1}, "wave_gap_s"),
    ],
)
def test_simulate_rejects_bad_arguments_naming_them(kwargs, argument):
    arguments = {"system": "static", "output_tokens": [10, 20], "batch_size": 2, "step_cost": ONE_MS, **kwargs}
    with pytest.raises((TypeError, ValueError), match=f"^{argument}:") as caught:
        simulate(**arguments)
    assert "\n" not in str(caught.value)


@pytest.mark.timing
@pytest.mark.parametrize("system", SYSTEMS)
def test_thousand_requests_simulate_well_under_a_second(system):
    """Real time: the simulator's speed on this machine, in CPU seconds, with several times the headroom it needs."""
    rng = np.random.default_rng(11)
    outputs = rng.integers(1, 1537, size=1000)
    cost = InterpolatedStepCost.from_points({1: 0.0015, 2: 0.002}, prefill_s_per_token=1e-6)
    # CPU time, not wall time: another process on the machine must not fail the test.
    started = time.process_time()
    result = simulate(system, outputs, 32, cost, prompt_tokens=rng.integers(1, 1024, size=1000))
    assert time.process_time() - started < 1.0
    assert result.useful_token_slots == int(outputs.sum())


@pytest.mark.timing
@pytest.mark.parametrize("system", SYSTEMS)
def test_thousand_requests_with_context_cost_simulate_well_under_a_second(system):
    """Real time: the simulator's speed on this machine, in CPU seconds, with several times the headroom it needs."""
    rng = np.random.default_rng(12)
    outputs = rng.integers(1, 1537, size=1000)
    # CPU time, not wall time: another process on the machine must not fail the test.
    started = time.process_time()
    result = simulate(system, outputs, 16, BY_CONTEXT, prompt_tokens=np.full(1000, 64))
    assert time.process_time() - started < 1.0
    assert result.useful_token_slots == int(outputs.sum())


def test_static_max_batch_delay_waits_for_a_full_batch_or_the_oldest_request():
    outputs = [1, 1, 1, 1]
    # The oldest waits 0.5 s; the fourth request comes later: three form the batch at 0.5 s.
    late = simulate("static", outputs, 4, ONE_MS, arrivals=[0.0, 0.1, 0.2, 5.0], static_batch_wait_s=0.5)
    assert late.first_token_s[:3] == pytest.approx([0.501] * 3) and late.first_token_s[3] == pytest.approx(5.501)
    # Four within the delay: the batch forms when the fourth arrives, full.
    full = simulate("static", outputs, 4, ONE_MS, arrivals=[0.0, 0.1, 0.2, 0.3], static_batch_wait_s=0.5)
    assert full.first_token_s == pytest.approx([0.301] * 4)
    # No delay: the first arrival starts a batch of one.
    impatient = simulate("static", outputs, 4, ONE_MS, arrivals=[0.0, 0.1, 0.2, 0.3])
    assert impatient.first_token_s[0] == pytest.approx(0.001)
    # Only static waits.
    continuous = simulate("continuous", outputs, 4, ONE_MS, arrivals=[0.0, 0.1, 0.2, 5.0], static_batch_wait_s=0.5)
    assert continuous.first_token_s[0] == pytest.approx(0.001)
    with pytest.raises(ValueError, match="static_batch_wait_s"):
        simulate("static", outputs, 4, ONE_MS, static_batch_wait_s=-1)


def test_client_static_runs_statics_schedule_plus_the_clients_turnaround_between_waves():
    outputs = [10, 40, 20, 30, 5, 15]
    cost = InterpolatedStepCost.from_points({1: 0.01, 2: 0.01})
    static = simulate("static", outputs, 2, cost)
    client = simulate("client-static", outputs, 2, cost, wave_gap_s=0.05)
    np.testing.assert_array_equal(client.admit_step, static.admit_step)
    np.testing.assert_array_equal(client.end_step, static.end_step)
    # Three waves: two turnarounds of the client between them.
    assert client.makespan_s == pytest.approx(static.makespan_s + 2 * 0.05)
