"""The torch-free tokenizer answers as transformers does, on the tokenizers the prompt tests build.

Each tokenizer is saved the way a model directory holds it (transformers' save_pretrained),
then loaded both ways: the prompts built from either must be the same texts.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from transformers import AutoTokenizer

from harness.workload import BurstArrival, FixedLength, UniformLength, WorkloadSpec, build_plan, make_prompts
from harness.workload.tokenizer_file import FileTokenizer, file_tokenizer

TEXTS = ["", "bar ker", "  dal  min, pod!", "unknownword zzz <s> </s>", "bér kás 12 \u00e9\u00e8"]


@pytest.fixture(params=["wordlevel", "wordlevel+bos", "bpe", "bpe+bos"])
def saved(request, small_tokenizers, tmp_path_factory):
    """A small tokenizer saved as a model directory holds it (transformers' save_pretrained)."""
    directory = tmp_path_factory.mktemp(request.param)
    small_tokenizers[request.param]().save_pretrained(directory)
    return directory


def test_a_saved_fast_tokenizer_loads_without_transformers(saved):
    assert isinstance(file_tokenizer(saved), FileTokenizer)


def test_it_answers_every_question_prompts_ask_as_transformers_does(saved):
    ours, theirs = file_tokenizer(saved), AutoTokenizer.from_pretrained(str(saved), local_files_only=True)
    assert ours is not None
    assert ours.vocab_size == theirs.vocab_size
    assert ours.all_special_ids == sorted(theirs.all_special_ids)
    for text in TEXTS:
        for special in (True, False):
            assert ours.encode(text, add_special_tokens=special) == theirs.encode(text, add_special_tokens=special)
    ids = theirs.encode(" ".join(TEXTS), add_special_tokens=True)
    assert ours.decode(ids) == theirs.decode(ids)
    assert ours.batch_decode([ids[:3], ids[3:]]) == theirs.batch_decode([ids[:3], ids[3:]])


def test_the_prompts_built_either_way_are_the_same_texts(saved):
    spec = WorkloadSpec(name="t", seed=11, num_requests=40, prompt_tokens=UniformLength(mean=150, spread=0.95),
                        output_tokens=FixedLength(value=8), arrival=BurstArrival())
    plan = build_plan(spec)
    theirs = AutoTokenizer.from_pretrained(str(saved), local_files_only=True)
    assert make_prompts(plan, file_tokenizer(saved)) == make_prompts(plan, theirs)


def test_directories_transformers_would_answer_differently_are_left_to_it(saved, tmp_path):
    assert file_tokenizer(tmp_path) is None  # no tokenizer.json at all
    config = json.loads((saved / "tokenizer_config.json").read_text())
    for key in ("clean_up_tokenization_spaces", "add_bos_token"):
        edited = tmp_path / key
        edited.mkdir()
        (edited / "tokenizer.json").write_bytes((saved / "tokenizer.json").read_bytes())
        (edited / "tokenizer_config.json").write_text(json.dumps(config | {key: True}))
        assert file_tokenizer(edited) is None
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tokenizer.json").write_text("{not json")
    assert file_tokenizer(broken) is None


def test_loading_a_run_s_tokenizer_imports_no_torch(saved):
    script = (
        "import sys\n"
        "from harness.driver.endpoint import EndpointInfo, load_tokenizer\n"
        f"tokenizer = load_tokenizer({str(saved)!r}, EndpointInfo('http://127.0.0.1:1', 'm', None, None, None))\n"
        "print(type(tokenizer).__name__, 'torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["FileTokenizer", "False", "False"]
