"""Bad input for distributed load (--workers, --master-bind, worker --master): one line, exit 2, nothing written.

Through the real CLI, with the bad-input corpus's helpers: each case is refused before any
endpoint is probed, any worker started or anything written.
"""

from __future__ import annotations

import socket

import pytest

# As in the corpus: a good burst of 4 requests, an endpoint that answers nothing.
RUN = ["run", "--workload", "good.yaml", "--endpoint", "http://127.0.0.1:9"]
CASES = {
    "workers zero": ([*RUN, "--out", "o", "--workers", "0"], "--workers: Input should be greater than 0"),
    "workers negative": ([*RUN, "--out", "o", "--workers", "-2"], "--workers: Input should be greater than 0"),
    "workers absurd": ([*RUN, "--out", "o", "--workers", "100000"], "--workers: Input should be less than or equal"),
    "workers not a number": ([*RUN, "--out", "o", "--workers", "two"], "--workers: invalid int value"),
    # The corpus's workload is a burst of 4: 4 users at most.
    "more workers than users": ([*RUN, "--out", "o", "--workers", "5"], "--workers 5 is more than the 4 concurrent"),
    "master-bind unresolvable": (
        [*RUN, "--out", "o", "--master-bind", "no-such-host.invalid:5557"], "cannot resolve host 'no-such-host.invalid'"
    ),
    "master-bind bad port": ([*RUN, "--out", "o", "--master-bind", "127.0.0.1:70000"], "--master-bind: "),
    "worker master unresolvable": (["worker", "--master", "no-such-host.invalid"], "--master: "),
    "worker master no host": (["worker", "--master", ":5557"], "names no host"),
    "worker master bad port": (["worker", "--master", "127.0.0.1:port"], "the port must be a number"),
    "worker connect timeout zero": (
        ["worker", "--master", "127.0.0.1", "--connect-timeout-s", "0"], "--connect-timeout-s: Input should be greater"
    ),
    "client-static on workers": ([*RUN, "--out", "o", "--system", "client-static", "--workers", "2"],
                                 "client-static forms each wave from what has arrived, in one process: drop --workers"),
    "reproduce workers zero": (["reproduce", "--workers", "0"], "--workers: Input should be greater than 0"),
    "nightly workers zero": (["nightly", "--suite", "cpu-nightly", "--workers", "0"], "--workers: Input should be"),
}


@pytest.fixture
def place(tmp_path, bad_input_corpus):
    (tmp_path / "good.yaml").write_text(bad_input_corpus.WORKLOAD)
    return tmp_path


@pytest.mark.parametrize("name", CASES)
def test_bad_distributed_values(place, name, bad_input_corpus):
    corpus = bad_input_corpus
    args, fragment = CASES[name]
    before = corpus.files_under(place)
    corpus.assert_refused(corpus.batchbench(*args, cwd=place), fragment)
    assert corpus.files_under(place) == before


def test_a_worker_with_no_master_gives_up_with_one_line(tmp_path, bad_input_corpus):
    corpus = bad_input_corpus
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    # The flag reaches the wait (its retries on the clock: test_worker_connect); the corpus's timeout catches a hang.
    result = corpus.batchbench("worker", "--master", f"127.0.0.1:{port}", "--connect-timeout-s", "1", cwd=tmp_path)
    corpus.assert_refused(result, f"--master 127.0.0.1:{port}: no master answered within 1 s")
