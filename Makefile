# The checks CI runs before the tests (.ci/run), one target each; `make check` runs them all.
# Run them from the virtual environment the package is installed in.
PYTHON ?= python

.PHONY: check lint format types imports sizes rust-format clippy test fix

check: lint format types imports sizes rust-format clippy

lint:  ## ruff, with the ASYNC rules that catch blocking calls in async code
	ruff check python tests bench tools

format:  ## ruff format
	ruff format --check python tests bench tools

types:  ## mypy on the package (configured in pyproject.toml)
	mypy

imports:  ## the package layers (pyproject.toml [tool.importlinter]): no import goes upwards
	lint-imports --no-cache

sizes:  ## Python and Rust: no module over 600 lines, no function over 80, unless it says why
	$(PYTHON) tools/sizes.py python rust

rust-format:
	cargo fmt --all -- --check

# The lints are Cargo.toml's [workspace.lints] (pedantic; no unwrap/expect outside tests);
# clippy.toml's too-many-lines threshold (80) gates Rust function sizes beside `sizes`.
clippy:  ## every crate, tests and benches included; warnings are errors
	cargo clippy --workspace --all-targets -- -D warnings

test:  ## the README's test command, without the install
	cargo test && pytest

fix:  ## apply what the formatters and ruff can fix on their own
	ruff check --fix python tests bench tools
	ruff format python tests bench tools
	cargo fmt --all
