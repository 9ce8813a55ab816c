"""``kmp-dask run --log-json FILE``: every fit of a pipeline appends its iterations, as ``train``'s does."""

from __future__ import annotations

import json

from click.testing import CliRunner

from kmp_dask.cli import main

PIPELINE = """name = "tiny"
[data.train]
source = "synthetic:classification"
n_rows = 300
[model]
params = {n_basis = 6, random_state = 0}
[compress]
n_vectors = 3
params = {random_state = 0}
"""


def test_compress_without_n_vectors_is_a_spec_error(tmp_path):
    from kmp_dask.pipeline import SpecError, load_spec

    (tmp_path / "p.toml").write_text(PIPELINE.replace("n_vectors = 3\n", ""))
    try:
        load_spec(tmp_path / "p.toml")
    except SpecError as e:
        assert "[compress] needs n_vectors" in str(e)
    else:
        raise AssertionError("a [compress] table without n_vectors was accepted")


def test_run_log_json_has_a_line_per_iteration_of_every_fit(tmp_path, no_cluster):
    (tmp_path / "p.toml").write_text(PIPELINE)
    log = tmp_path / "fit.jsonl"
    r = CliRunner().invoke(main, ["run", str(tmp_path / "p.toml"), "--output", str(tmp_path / "run"),
                                  "--scheduler", "sync", "--quiet", "--log-json", str(log)])
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    stages = {x["stage"] for x in lines}
    assert all(x["algorithm"] == "kmp" and "time" in x for x in lines)
    model = [x for x in lines if x["iteration"] is not None and "reduced" not in x["stage"]]
    assert len(model) >= 6, stages  # one line per atom of the 6-atom model (the bias atom counts)
    assert any("reduced" in s for s in stages), stages  # and the compressor's vectors
