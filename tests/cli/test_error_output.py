"""``kmp-dask``'s error output: one ``Error:`` line by default, the full traceback with
``--traceback``, a bug keeps its traceback, and ``info`` without ``--verify`` says the chunks were
not read (a damaged store is found by ``--verify``, never silently passed as checked)."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from kmp_dask.cli import main
from kmp_dask.cli._main import is_expected_error, one_line_message
from kmp_dask.store import StoreCorruptError, create_store


@pytest.fixture
def corrupt(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    store = create_store(tmp_path / "s.zarr", X, (X[:, 0] > 0).astype(int), chunk_rows=50)
    (tmp_path / "s.zarr" / "X" / "c" / "1" / "0").write_bytes(b"garbage " * 8)
    return store.url


def test_one_line_by_default_and_the_traceback_when_asked(tmp_path):
    args = ["info", str(tmp_path / "missing.zarr")]
    short = CliRunner().invoke(main, args)
    assert short.exit_code == 1 and isinstance(short.exception, SystemExit)
    assert short.output.startswith("Error: no store at") and len(short.output.strip().splitlines()) == 1
    assert "Traceback" not in short.output
    full = CliRunner().invoke(main, ["--traceback", *args])
    assert full.exit_code == 1
    assert isinstance(full.exception, FileNotFoundError)  # propagated: Python prints its traceback
    assert "no store at" in str(full.exception)


def test_info_without_verify_says_the_chunks_were_not_read(corrupt):
    plain = CliRunner().invoke(main, ["info", corrupt])
    assert plain.exit_code == 0, plain.output  # only metadata is read
    assert "chunks not read" in plain.output and "--verify" in plain.output
    checked = CliRunner().invoke(main, ["info", corrupt, "--verify", "--no-progress"])
    assert checked.exit_code == 1 and "chunk 1 (rows 50..99) of array 'X'" in checked.output


def test_which_errors_are_one_line():
    assert is_expected_error(StoreCorruptError("chunk 0 is corrupt", url="u", array="X"))  # kmp_dask's own
    assert is_expected_error(FileExistsError("exists"))
    assert is_expected_error(ConnectionError("scheduler gone"))
    assert not is_expected_error(KeyError("a bug"))
    assert not is_expected_error(ValueError("raised outside kmp_dask"))  # e.g. a library's bug: keeps its traceback
    assert one_line_message(FileExistsError("it exists; pass overwrite=True\n to replace")) == \
        "it exists; pass --overwrite to replace"
