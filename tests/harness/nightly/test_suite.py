"""Suite files: the shipped ones load, and every bad one is one line naming the field."""

from __future__ import annotations

import pytest

from harness.errors import UsageError
from harness.nightly import list_builtin_suites, load_suite
from launchers import ServerSpec
from launchers.spec import Endpoints


def test_shipped_suites_load_with_their_workloads():
    assert list_builtin_suites() == ["cpu-latency-nightly", "cpu-nightly", "cpu-trace-nightly",
                                     "cpu-transformers-nightly", "h100-nightly"]
    cpu = load_suite("cpu-nightly")
    assert [spec.name for spec in cpu.specs] == list(cpu.suite.workloads)
    assert cpu.suite.systems == ("continuous", "static") and cpu.suite.server.model == "tiny"
    assert [spec.arrival.kind for spec in cpu.specs] == ["burst", "burst"]
    # The latency half has its own suite: one open-loop workload.
    latency = load_suite("cpu-latency-nightly")
    assert [spec.arrival.kind for spec in latency.specs] == ["poisson"]
    assert latency.suite.systems == ("continuous", "static") and latency.suite.server.max_num_seqs == 16
    h100 = load_suite("h100-nightly")
    assert h100.suite.server.model == "llama-3.1-8b" and len(h100.specs) == 4
    assert load_suite("cpu-transformers-nightly").suite.systems == ("hf-continuous", "hf-sequential")
    # The production-shaped night: a trace's own arrivals.
    assert [spec.arrival.kind for spec in load_suite("cpu-trace-nightly").specs] == ["trace"]


def test_a_workload_file_beside_the_suite_is_found(tmp_path):
    (tmp_path / "mine.yaml").write_text(
        "name: mine\nseed: 1\nnum_requests: 8\nprompt_tokens: {kind: fixed, value: 8}\n"
        "output_tokens: {kind: fixed, value: 8}\narrival: {kind: burst}\n"
    )
    suite = tmp_path / "s.yaml"
    suite.write_text("kind: suite\nname: s\nworkloads: [mine.yaml]\nsystems: [continuous]\n")
    loaded = load_suite(suite)
    assert loaded.specs[0].name == "mine" and loaded.suite.repetitions == 3 and loaded.suite.gate.threshold == 0.05


HEAD = "kind: suite\nname: s\nworkloads: [cpu-anyscale-cap128]\nsystems: [static]"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (HEAD.replace("suite", "workload", 1), r"kind: Input should be 'suite'"),
        ("kind: suite\nname: s\nworkloads: []\nsystems: [static]", r"workloads: .*at least 1"),
        ("kind: suite\nname: s\nworkloads: [cpu-anyscale-cap128]\nsystems: [fast]", r"systems\.0: Input should be"),
        ("kind: suite\nname: s\nworkloads: [cpu-anyscale-cap128]\nsystems: [static, static]", r"systems: names repeat"),
        (HEAD + "\nrepetitions: 0", r"repetitions: Input should be greater than or equal to 1"),
        (HEAD + "\nrepetitions: true", r"repetitions: "),
        (HEAD + "\ngate: {threshold: 1.5}",
         r"gate\.threshold: Input should be less than 1"),
        (HEAD + "\nnightly: 1",
         r"nightly: Extra inputs are not permitted"),
        (HEAD + "\nserver: {max_num_seqs: 0}", r"server\.max_num_seqs: Input should be greater than 0"),
        (HEAD + "\nserver: {max_num_seq: 8}", r"server\.max_num_seq: Extra inputs are not permitted"),
        ("kind: suite\nname: s\nworkloads: [no-such-workload]\nsystems: [static]", r"no-such-workload: no such file"),
        ("kind: suite\nname: s\nworkloads: [cpu-anyscale-cap128\nsystems", r"not a readable YAML suite"),
        (HEAD.replace("[static]", "[hf-continuous]") + "\nserver: {model: llama-3.1-8b}",
         r"transformers serve loads real weights, and llama-3.1-8b has none"),
    ],
    ids=["kind", "no-workloads", "system", "repeat", "zero-repetitions", "bool-repetitions", "threshold", "extra-key",
         "server-batch", "server-key", "unknown-workload", "bad-yaml", "weightless-transformers"],
)
def test_bad_suites_are_one_line_usage_errors(tmp_path, body, message):
    path = tmp_path / "suite.yaml"
    path.write_text(body)
    with pytest.raises(UsageError, match=message) as caught:
        load_suite(path)
    assert "\n" not in str(caught.value)


def test_the_old_keys_trials_and_extra_trials_load_the_same_suite(tmp_path):
    new, old = tmp_path / "new.yaml", tmp_path / "old.yaml"
    new.write_text(HEAD + "\nrepetitions: 5\ngate: {extra_repetitions: 1}\n")
    old.write_text(HEAD + "\ntrials: 5\ngate: {extra_trials: 1}\n")
    assert load_suite(old).suite == load_suite(new).suite
    assert (load_suite(old).suite.repetitions, load_suite(old).suite.gate.extra_repetitions) == (5, 1)


@pytest.mark.parametrize(("body", "message"), [
    (HEAD + "\nrepetitions: 5\ntrials: 4", r"trials: Extra inputs are not permitted"),
    (HEAD + "\ngate: {extra_repetitions: 1, extra_trials: 2}", r"gate\.extra_trials: Extra inputs are not permitted"),
])
def test_both_spellings_of_a_key_at_once_are_refused(tmp_path, body, message):
    path = tmp_path / "suite.yaml"
    path.write_text(body)
    with pytest.raises(UsageError, match=message):
        load_suite(path)


def test_an_unknown_suite_name_lists_the_shipped_ones():
    shipped = "shipped: cpu-latency-nightly, cpu-nightly, cpu-trace-nightly, cpu-transformers-nightly, h100-nightly"
    with pytest.raises(UsageError, match=rf"nope: no such suite file.*{shipped}"):
        load_suite("nope")


def test_a_suites_server_block_is_what_the_cli_launches(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(HEAD + "\nserver: {max_num_seqs: 8, vllm_args: [--enforce-eager]}\n")
    loaded = load_suite(suite)
    # Unset fields take the same defaults as the CLI's flags (launchers.ServerConfig).
    assert ServerSpec.of(loaded.suite.server, "static") == ServerSpec(
        mode="static", max_num_seqs=8, vllm_args=("--enforce-eager",)
    )


def test_a_suites_server_block_names_the_servers_environment_and_arguments(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(HEAD + "\nserver:\n  server_python: /opt/vllm/bin/python\n"
                     "  server_env: [VLLM_CPU_KVCACHE_SPACE=4, VLLM_CPU_OMP_THREADS_BIND=all]\n"
                     "  vllm_args: [--enable-prefix-caching]\n")
    server = load_suite(suite).suite.server
    assert server.server_python == "/opt/vllm/bin/python"
    assert server.environment() == {"VLLM_CPU_KVCACHE_SPACE": "4", "VLLM_CPU_OMP_THREADS_BIND": "all"}
    assert server.vllm_args == ("--enable-prefix-caching",)


def test_a_suite_may_name_running_endpoints(tmp_path):
    both = tmp_path / "both.yaml"
    both.write_text("kind: suite\nname: s\nworkloads: [cpu-anyscale-cap128]\nsystems: [continuous, static, naive]\n"
                    "endpoint: http://10.0.0.5:8000\nstatic_endpoint: http://10.0.0.5:8001\n")
    suite = load_suite(both).suite
    assert suite.endpoints() == Endpoints(continuous="http://10.0.0.5:8000", static="http://10.0.0.5:8001")
    # Without static among its systems, the continuous endpoint is enough; without either, servers are launched.
    continuous = tmp_path / "continuous.yaml"
    continuous.write_text("kind: suite\nname: s\nworkloads: [cpu-anyscale-cap128]\nsystems: [continuous, naive]\n"
                          "endpoint: http://10.0.0.5:8000\n")
    assert load_suite(continuous).suite.endpoints() == Endpoints(continuous="http://10.0.0.5:8000")
    assert load_suite("cpu-nightly").suite.endpoints() == Endpoints()


@pytest.mark.parametrize(("systems", "endpoints", "message"), [
    ("[continuous, static]", "endpoint: http://h:8000", r"static needs static_endpoint$"),
    ("[static, naive]", "static_endpoint: http://h:8001", r"naive needs endpoint$"),
    ("[continuous]", "static_endpoint: http://h:8001", r"continuous needs endpoint$"),
    ("[continuous]", "endpoint: ''", r"endpoint: String should have at least 1 character"),
])
def test_a_suite_naming_endpoints_without_one_a_system_needs_is_refused(tmp_path, systems, endpoints, message):
    path = tmp_path / "suite.yaml"
    path.write_text(f"kind: suite\nname: s\nworkloads: [cpu-anyscale-cap128]\nsystems: {systems}\n{endpoints}\n")
    with pytest.raises(UsageError, match=message) as caught:
        load_suite(path)
    assert "\n" not in str(caught.value)
