# membot: the two commands you need are `make run` and `make test`.
PYTHON ?= python3
# uv on PATH, else the one pip puts next to Python (`python3 -m uv` works wherever pip put it).
UV ?= $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")

.PHONY: install run check-config test lint format bench docs clean

install: ## install uv if missing, then the locked dependencies into .venv
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv \
		|| $(PYTHON) -m pip install --quiet --user uv \
		|| $(PYTHON) -m pip install --quiet --user --break-system-packages uv
	$(UV) sync --locked

run: install ## start the bot (reads .env)
	@# exec: Ctrl-C reaches membot once (`uv run` would forward a second SIGINT)
	exec .venv/bin/membot run

check-config: install ## validate .env and print the settings, secrets masked
	$(UV) run --locked membot check-config

# Most tests wait on I/O (fakes, processes, Redis), so more workers than cores pays off;
# `make test WORKERS=0` runs the suite serially in one process (docs/testing.md).
WORKERS ?= 4

test: install ## the whole test suite, offline, in WORKERS parallel processes
	$(UV) run --locked pytest -q -n $(WORKERS) --dist worksteal

lint: install ## ruff check + ruff format --check + mypy + import contracts (pyproject.toml)
	$(UV) run --locked ruff check src tests bench scripts
	$(UV) run --locked ruff format --check src tests bench scripts
	$(UV) run --locked mypy
	$(UV) run --locked lint-imports

format: install
	$(UV) run --locked ruff check --fix src tests bench scripts
	$(UV) run --locked ruff format src tests bench scripts

bench: install ## benchmarks: prints a table, writes bench/results.json, then docs/benchmarks.md
	$(UV) run --locked python -m bench
	$(UV) run --locked python -m bench.report

docs: install ## the generated pages: docs/benchmarks.md (bench/results.json), docs/openapi.json
	$(UV) run --locked python -m bench.report
	$(UV) run --locked python -m scripts.openapi

clean: ## caches and build output; never touches data/
	rm -rf .pytest_cache .ruff_cache .mypy_cache build dist src/*.egg-info
	find . -path ./data -prune -o -path ./.venv -prune -o -type d -name __pycache__ -print0 | xargs -0 rm -rf
