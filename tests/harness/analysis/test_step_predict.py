"""Held-out predictions: one step cost per server, each cell predicted without its own steps."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from harness.analysis.step_predict import predict_held_out, server_step_costs
from harness.paper.simulate import simulate
from harness.paper.step_cost import LinearStepCost

COST = LinearStepCost(overhead_s=0.003, per_sequence_s=0.0002, per_prefill_token_s=5e-5, per_context_token_s=4e-7)
B = 4


def engine_steps(cost, outputs, prompt=64, slow=1.0, system="continuous", idle_after=(), idle_s=0.03):
    """A steps table of `system` on `outputs` as an engine with `cost` x `slow` would log it,
    idle for `idle_s` after the steps in `idle_after`."""
    result = simulate(system, outputs, B, cost, prompt_tokens=[prompt] * len(outputs))
    rows, clock = [], 1000.0
    for step, active in enumerate(result.step_active):
        running = (result.admit_step <= step) & (step < result.end_step)
        admitted = result.admit_step == step
        context = int(np.sum(np.where(admitted, prompt, prompt + step - result.admit_step)[running]))
        finished = list(np.flatnonzero(result.end_step == step + 1))
        seconds = slow * float(cost.step_seconds(int(active), np.array([context]), int(admitted.sum()) * prompt)[0])
        rows.append({"t_s": clock, "end_s": clock + seconds, "running": int(active), "waiting": 0,
                     "prefill_tokens": int(admitted.sum()) * prompt, "decode_tokens": int(active - admitted.sum()),
                     "context_tokens": context, "generated_tokens": int(active),
                     "admitted": list(np.flatnonzero(admitted)), "finished": finished})
        clock += seconds + (idle_s if step in idle_after else 0.0)
    return pd.DataFrame(rows)


def run(system, cap, steps, server="continuous server 1", rep=1, outputs=(8, 3, 5, 2, 7, 4)):
    plan = {"requests": [{"arrival_s": 0.0, "output_tokens": n, "prompt_tokens": 64} for n in outputs]}
    manifest = SimpleNamespace(
        run_id=f"{system}-cap{cap}-r{rep}", system=system, batch_size=B,
        workload=SimpleNamespace(name=f"cap{cap}", output_tokens=SimpleNamespace(cap=cap)),
        server=SimpleNamespace(mode=server.split()[0], pid=server.split()[-1], started_at="t0"),
    )
    return SimpleNamespace(manifest=manifest, steps=steps, plan=plan)


def test_a_cell_is_predicted_without_its_own_steps():
    honest = [run("continuous", cap, engine_steps(COST, [8, 3, 5, 2, 7, 4])) for cap in (32, 128, 512)]
    # The cap-32 cell's own steps say the engine was 3x slower: a held-out fit never sees that.
    skewed = [run("continuous", 32, engine_steps(COST, [8, 3, 5, 2, 7, 4], slow=3.0)), *honest[1:]]
    clean = predict_held_out(honest)
    held = predict_held_out(skewed)
    assert held["continuous-cap32-r1"].held_out
    assert held["continuous-cap32-r1"].prediction.total_tok_s == pytest.approx(
        clean["continuous-cap32-r1"].prediction.total_tok_s, rel=1e-9)
    assert held["continuous-cap32-r1"].step_cost.fitted_on == ("continuous-cap128-r1", "continuous-cap512-r1")
    # The other cells' fits do include the slow steps, so their predictions slow down.
    assert held["continuous-cap128-r1"].prediction.total_tok_s < clean["continuous-cap128-r1"].prediction.total_tok_s


def test_the_held_out_fit_recovers_the_engine_and_predicts_its_makespan():
    runs = [run("continuous", cap, engine_steps(COST, [8, 3, 5, 2, 7, 4])) for cap in (32, 128)]
    fitted = predict_held_out(runs)["continuous-cap32-r1"]
    for name, value in COST.coefficients().items():
        assert fitted.step_cost.fit.cost.coefficients()[name] == pytest.approx(value, rel=1e-6, abs=1e-12)
    truth = simulate("continuous", [8, 3, 5, 2, 7, 4], B, COST, prompt_tokens=[64] * 6)
    assert fitted.prediction.makespan_s == pytest.approx(truth.makespan_s)


def test_one_step_cost_per_server_and_a_lone_cell_predicted_in_sample():
    continuous = [run("continuous", cap, engine_steps(COST, [8, 3, 5, 2, 7, 4])) for cap in (32, 128)]
    static = [run("static", 32, engine_steps(COST, [8, 3, 5, 2, 7, 4], slow=2.0), server="static server 2", rep=r)
              for r in (1, 2)]
    step_costs = {m.server: m for m in server_step_costs([*continuous, *static])}
    assert len(step_costs) == 2
    assert len(next(m for m in step_costs.values() if m.server.startswith("static")).fitted_on) == 2
    predictions = predict_held_out([*continuous, *static])
    assert not predictions["static-cap32-r1"].held_out
    assert predictions["static-cap32-r1"].step_cost.fitted_on == ("static-cap32-r1", "static-cap32-r2")


def test_naive_waves_take_the_turnaround_seen_in_other_naive_cells():
    outputs = [8, 3, 5, 2, 7, 4, 6, 1]
    # Two padded waves, of 8 and 7 steps: the engine idles 30 ms between them (the client's turnaround).
    steps = engine_steps(COST, outputs, system="naive", idle_after=(7,))
    naive = [run("naive", cap, steps, outputs=outputs) for cap in (32, 128)]
    fitted = predict_held_out(naive)["naive-cap32-r1"]
    assert fitted.step_cost.wave_gap_s == pytest.approx(0.03)
    no_gap = simulate("naive", outputs, B, fitted.step_cost.fit.cost, prompt_tokens=[64] * 8)
    assert fitted.prediction.makespan_s == pytest.approx(no_gap.makespan_s + 0.03)


def test_runs_without_engine_steps_or_plan_get_no_prediction():
    runs = [run("continuous", 32, engine_steps(COST, [8, 3, 5, 2, 7, 4])),
            run("continuous", 128, None)]
    assert set(predict_held_out(runs)) == {"continuous-cap32-r1"}
