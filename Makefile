# CPU install and the two Quick-start jobs. GPU users: see README "GPU install".
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo test test-all bench

$(VENV)/.installed: setup.py
	$(PY) -m venv $(VENV)
	# torch pinned: the CPU build; an unpinned torch pulls several GB of CUDA wheels
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/python tools/demo.py

# pytest exits 5 when it collects no test: report it, do not fail on it
test: install
	$(BIN)/python -m pytest -q; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; rc=0; fi; exit $$rc

test-all: install
	$(BIN)/python -m pytest -q -m ""; rc=$$?; if [ $$rc -eq 5 ]; then rc=0; fi; exit $$rc

bench: install
	for b in serialization scan scan_backends data model predict; do $(BIN)/python bench/$$b.py || exit 1; done
