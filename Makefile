# `make test` and `make demo` work on a fresh machine: they build .venv first.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench lint venv clean kafka-jars kernels

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

# The replay's scan kernels compiled ahead of time (storage/kernels.py says why); a no-op when current.
kernels: $(STAMP)
	$(BIN)/python -m groupcoord.actors.tools.build_kernels

# mypy reads protocol/ and storage/ as groupcoord.protocol and groupcoord.storage through links (see [tool.mypy]).
MYPY_SRC := $(VENV)/mypy-src/groupcoord

test: kernels
	$(BIN)/ruff check .
	mkdir -p $(MYPY_SRC) && ln -sfn ../../../protocol $(MYPY_SRC)/protocol && ln -sfn ../../../storage $(MYPY_SRC)/storage
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n 2 --durations=25

demo: kernels
	$(BIN)/groupcoord demo

# Every load benchmark at full size (40-50 minutes on 2 cores); tables on stdout, JSON in benchmarks/results/.
bench: kernels
	$(BIN)/python -m benchmarks all

# Apache Kafka 4.4's broker and tools from Maven Central into ~/.cache/groupcoord (once; tests fetch them too).
kafka-jars: $(STAMP)
	$(BIN)/python -m benchmarks.kafka.dist

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache storage/_kernels_aot.*
