"""Static checks of the cluster/ recipes (no cluster, no SLURM, no Kubernetes, no container build):
the constraints file against pyproject.toml, the Dockerfile, the Kubernetes manifest against the
README, the SLURM launcher's job script rendered offline, check_versions' comparison and errors,
the shell scripts' syntax."""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
import tomllib
from importlib import metadata

import pytest
from _cluster_helpers import CLUSTER, ROOT, load_module, script_env
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

SUPPORTED_PYTHONS = {"3.11", "3.12"}
yaml = pytest.importorskip("yaml")


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _constraints(path=CLUSTER / "constraints.txt"):
    text = path.read_text()
    py = re.search(r"^# python (\d+\.\d+) ", text, re.M)
    assert py, "constraints.txt has no '# python X.Y' header line"
    pins = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            specs = list(req.specifier)
            assert len(specs) == 1 and specs[0].operator == "==", f"not an exact pin: {line}"
            assert canonicalize_name(req.name) not in pins, f"pinned twice: {req.name}"
            pins[canonicalize_name(req.name)] = specs[0].version
    return py.group(1), pins


def _dockerfile_instructions():
    """The Dockerfile's instructions (comments dropped, continuation lines joined)."""
    text = (CLUSTER / "Dockerfile").read_text()
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    return re.sub(r"\\\n\s*", " ", "\n".join(lines))


# --- container file + constraints -------------------------------------------------------------

def test_every_pin_satisfies_pyproject_requirements():
    py, pins = _constraints()
    project = _pyproject()
    env = {"python_version": py, "python_full_version": py + ".0", "extra": ""}
    checked = 0
    for spec in project["dependencies"]:
        req = Requirement(spec)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} (a dependency in pyproject.toml) is not pinned in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"constraints.txt pins {req.name}=={pins[name]}, pyproject.toml requires {req}"
        checked += 1
    assert checked == len(project["dependencies"])
    assert canonicalize_name(project["name"]) not in pins  # installed from the repository, not pinned
    # distributed must be exactly dask's version
    assert pins["dask"] == pins["distributed"]


def test_constraints_python_is_supported_and_matches_the_dockerfile():
    py, _ = _constraints()
    assert py in SUPPORTED_PYTHONS
    assert SpecifierSet(_pyproject()["requires-python"]).contains(py + ".0")
    instr = _dockerfile_instructions()
    arg = re.search(r"^ARG PYTHON_VERSION=(\S+)$", instr, re.M)
    assert arg, "the Dockerfile has no ARG PYTHON_VERSION=X.Y"
    assert arg.group(1) == py, f"Dockerfile python {arg.group(1)} != constraints.txt python {py}"
    assert re.search(r"^FROM python:\$\{PYTHON_VERSION\}-slim\b", instr, re.M)


def test_dockerfile_installs_kmp_dask_with_the_constraints_file():
    instr = _dockerfile_instructions()
    copy_at = instr.index("COPY cluster/constraints.txt cluster/constraints.txt")
    install = re.search(r"^RUN python -m pip install (?:--constraint|-c) cluster/constraints\.txt \.(?:\s|$)",
                        instr, re.M)
    assert install, "the Dockerfile does not pip install . with --constraint cluster/constraints.txt"
    assert copy_at < install.start()
    for needed in ("pyproject.toml", "README.md", "kmp_dask"):  # what `pip install .` needs
        assert re.search(rf"^COPY .*\b{re.escape(needed)}\b", instr, re.M), needed
    assert "pip check" in instr
    assert "dask-worker" not in instr and "dask-scheduler" not in instr
    ignore = (CLUSTER / "Dockerfile.dockerignore").read_text().splitlines()
    for needed in ("!pyproject.toml", "!README.md", "!kmp_dask/**", "!cluster/constraints.txt"):
        assert needed in ignore


def test_freeze_constraints_writes_this_environment(tmp_path):
    freeze = load_module("freeze_constraints")
    out = tmp_path / "c.txt"
    assert freeze.main(["-o", str(out)]) == 0
    py, pins = _constraints(out)
    assert py == f"{sys.version_info.major}.{sys.version_info.minor}"
    for dist in ("dask", "distributed", "numpy", "zarr", "scikit-learn", "numcodecs", "cloudpickle", "msgpack"):
        assert pins[canonicalize_name(dist)] == metadata.version(dist), dist  # transitive ones too
    assert "kmp-dask" not in pins
    # and it refuses an environment that does not satisfy a requirement
    bad = tmp_path / "pyproject.toml"
    bad.write_text('[project]\nname = "x"\ndependencies = ["numpy<1"]\n')
    with pytest.raises(SystemExit, match="numpy"):
        freeze.main(["-o", str(tmp_path / "d.txt"), "--pyproject", str(bad)])


# --- Kubernetes ---------------------------------------------------------------------------------

def _resolve(doc, dotted):
    cur = doc
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", dotted):
        cur = cur[int(part[1:-1])] if part.startswith("[") else cur[part]
    return cur


def _k8s_bytes(q):
    from dask.utils import parse_bytes

    return parse_bytes(q + "B" if q.endswith("i") else q)


def test_kubernetes_manifest_has_the_fields_the_readme_names():
    doc = yaml.safe_load((CLUSTER / "kubernetes" / "daskcluster.yaml").read_text())
    readme = (CLUSTER / "README.md").read_text()
    section = readme[readme.index("## Kubernetes"):]
    section = section[:section.index("\n## ", 5)] if "\n## " in section[5:] else section
    named = sorted(set(re.findall(r"`((?:spec|kind|apiVersion|metadata)[\w.\[\]]*)`", section)))
    assert len(named) >= 8, named
    for path in named:
        _resolve(doc, path)  # KeyError / IndexError: the README names a field the manifest lacks

    assert doc["apiVersion"] == "kubernetes.dask.org/v1" and doc["kind"] == "DaskCluster"
    worker = doc["spec"]["worker"]
    assert isinstance(worker["replicas"], int) and worker["replicas"] >= 1
    wc = worker["spec"]["containers"][0]
    sc = doc["spec"]["scheduler"]["spec"]["containers"][0]
    # the worker-command pitfall (cluster/README.md): `dask worker` / `dask scheduler`, never dask-worker /
    # dask-scheduler
    assert wc["args"][:2] == ["dask", "worker"] and sc["args"][:2] == ["dask", "scheduler"]
    for c in (wc, sc):
        words = [*c.get("command", []), *c.get("args", [])]
        assert not {"dask-worker", "dask-scheduler"} & set(words)
    # one image for both, tagged with kmp_dask's version and the constraints' python
    import kmp_dask

    py, _ = _constraints()
    assert wc["image"] == sc["image"]
    assert wc["image"].rsplit(":", 1)[1] == f"{kmp_dask.__version__}-py{py}"
    # resources: requests = limits (guaranteed QoS); the worker's --memory-limit below the container
    # limit (dask's nanny restarts the worker before the kernel OOM-kills it); threads = CPUs
    for c in (wc, sc):
        assert c["resources"]["requests"] == c["resources"]["limits"]
        assert {"cpu", "memory"} <= set(c["resources"]["limits"])
    args = wc["args"]
    mem_limit = args[args.index("--memory-limit") + 1]
    assert _k8s_bytes(mem_limit.replace("GiB", "Gi")) < _k8s_bytes(wc["resources"]["limits"]["memory"])
    assert args[args.index("--nthreads") + 1] == str(wc["resources"]["limits"]["cpu"])
    assert "--local-directory" in args
    local = args[args.index("--local-directory") + 1]
    assert any(m["mountPath"] == local for m in wc["volumeMounts"])
    assert {p["name"] for p in sc["ports"]} >= {"tcp-comm", "http-dashboard"}
    assert sc["readinessProbe"]["httpGet"]["path"] == "/health"


# --- SLURM (dask-jobqueue), rendered offline ------------------------------------------------------

@pytest.fixture
def fake_slurm(tmp_path):
    """sbatch/squeue/scancel that only record being called: proves nothing is submitted."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    marker = tmp_path / "slurm-called"
    for cmd in ("sbatch", "squeue", "scancel"):
        f = bindir / cmd
        f.write_text(f"#!/bin/sh\necho {cmd} >> {marker}\nexit 1\n")
        f.chmod(f.stat().st_mode | stat.S_IEXEC)
    env = script_env()
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    return env, marker


def _render(env, *args):
    out = subprocess.run([sys.executable, str(CLUSTER / "slurm_launcher.py"), "--render",
                          "--scheduler-host", "127.0.0.1", *args],
                         capture_output=True, text=True, timeout=120, env=env, cwd=str(ROOT))
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_slurm_job_script_from_jobqueue_yaml(fake_slurm):
    env, marker = fake_slurm
    script = _render(env)
    assert script.startswith("#!/usr/bin/env bash")
    for directive in ("#SBATCH -J kmp-dask-worker", "#SBATCH --cpus-per-task=8", "#SBATCH --mem=32G",
                      "#SBATCH -t 02:00:00"):
        assert directive in script, directive
    worker = [ln for ln in script.splitlines() if "distributed.cli.dask_worker" in ln]
    assert len(worker) == 1
    cmd = worker[0].split()
    assert cmd[1:3] == ["-m", "distributed.cli.dask_worker"] and cmd[3].startswith("tcp://127.0.0.1:")
    flags = dict(zip(cmd[4::1], cmd[5::1], strict=False))
    assert flags["--nworkers"] == "8" and flags["--nthreads"] == "1"
    assert flags["--memory-limit"] == "4.00GiB" and flags["--local-directory"] == "$TMPDIR"
    assert flags["--lifetime"] == "115m" and flags["--lifetime-stagger"] == "4m"
    assert "export OMP_NUM_THREADS=1" in script
    assert not marker.exists(), "rendering called a SLURM command"


def test_slurm_job_script_options_override_the_yaml(fake_slurm):
    env, marker = fake_slurm
    script = _render(env, "--cores", "4", "--processes", "4", "--memory", "8GiB", "--walltime", "00:30:00",
                     "--queue", "short", "--account", "proj", "--local-directory", "/scratch/kmp",
                     "--job-name", "kmp-test", "--worker-extra-args")
    for directive in ("#SBATCH -J kmp-test", "#SBATCH -p short", "#SBATCH -A proj", "#SBATCH --cpus-per-task=4",
                      "#SBATCH --mem=8G", "#SBATCH -t 00:30:00"):
        assert directive in script, directive
    worker = next(ln for ln in script.splitlines() if "distributed.cli.dask_worker" in ln)
    assert "--nworkers 4 " in worker and "--nthreads 1 " in worker and "--memory-limit 2.00GiB" in worker
    assert "--local-directory /scratch/kmp" in worker and "--lifetime" not in worker
    assert not marker.exists()


def test_slurm_launcher_without_sbatch_fails_in_one_line(tmp_path):
    env = script_env()
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not (p and os.path.exists(os.path.join(p, "sbatch"))))
    out = subprocess.run([sys.executable, str(CLUSTER / "slurm_launcher.py"), "--scheduler-host", "127.0.0.1",
                          "--", "kmp-dask", "info", "x"], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 2 and "sbatch not found" in out.stderr and "Traceback" not in out.stderr


# --- check_versions -------------------------------------------------------------------------------

def test_check_versions_compare_reports_one_line_per_mismatch():
    cv = load_module("check_versions")
    client = {"python": "3.11.7", "dask": "2026.8.0", "distributed": "2026.8.0", "cloudpickle": "3.1.2",
              "msgpack": "1.2.4", "numpy": "2.4.6", "zarr": "3.1.6", "scikit-learn": "1.9.1", "kmp_dask": "0.1.0"}
    same = dict(client)
    assert cv.compare(client, same, {"tcp://a": same, "tcp://b": same}) == []
    # python: major.minor unless strict; the scheduler only in what it runs
    assert cv.compare(client, {**same, "python": "3.11.9", "numpy": "1.0", "kmp_dask": "MISSING"},
                      {"tcp://a": {**same, "python": "3.11.2"}}) == []
    assert cv.compare(client, same, {"tcp://a": {**same, "python": "3.11.2"}}, strict_python=True) == \
        ["MISMATCH python: client 3.11.7, worker tcp://a 3.11.2"]
    lines = cv.compare(client, {**same, "distributed": "2026.6.0", "kmp_dask": "MISSING"},
                       {"tcp://a": same, "tcp://b": {**same, "python": "3.12.1", "kmp_dask": "MISSING"}})
    assert lines == ["MISMATCH python: client 3.11.7, worker tcp://b 3.12.1",
                     "MISMATCH distributed: client 2026.8.0, scheduler 2026.6.0",
                     "MISMATCH kmp_dask: client 0.1.0, worker tcp://b MISSING"]
    assert cv.compare(client, {**same, "kmp_dask": "MISSING"}, {}, scheduler_all=True) == \
        ["MISMATCH kmp_dask: client 0.1.0, scheduler MISSING"]


def test_check_versions_unreachable_scheduler_is_one_line_exit_2(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    cmd = [sys.executable, str(CLUSTER / "check_versions.py")]
    out = subprocess.run(cmd + [f"tcp://127.0.0.1:{port}", "--timeout", "2"], capture_output=True, text=True,
                         timeout=60, env=script_env())
    assert out.returncode == 2 and "cannot use the cluster" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    out = subprocess.run(cmd + ["--scheduler-file", str(tmp_path / "none.json")], capture_output=True, text=True,
                         timeout=60, env=script_env())
    assert out.returncode == 2 and "scheduler file" in out.stderr
    out = subprocess.run(cmd + ["tls://127.0.0.1:1"], capture_output=True, text=True, timeout=60, env=script_env())
    assert out.returncode == 2 and "TLS scheduler" in out.stderr


# --- shell scripts ----------------------------------------------------------------------------------

@pytest.mark.parametrize("script", sorted(p.name for p in CLUSTER.glob("*.sh")))
def test_shell_script_syntax_and_modes(script):
    path = CLUSTER / script
    out = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    text = path.read_text()
    if not script.startswith("_"):
        assert text.startswith("#!/usr/bin/env bash") and os.access(path, os.X_OK)
        assert "set -euo pipefail" in text
    # the executables removed in distributed 2026.6 appear in no command
    code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    assert "dask-worker " not in code and "dask-scheduler " not in code


def test_start_scripts_refuse_incomplete_tls(tmp_path):
    out = subprocess.run(["bash", str(CLUSTER / "start-scheduler.sh")], capture_output=True, text=True, timeout=30,
                         env=script_env(KMP_TLS_CA_FILE=tmp_path / "ca.pem", KMP_SCHEDULER_FILE=tmp_path / "s.json"))
    assert out.returncode == 1 and "KMP_TLS_CERT" in out.stderr
    out = subprocess.run(["bash", str(CLUSTER / "start-worker-tls.sh")], capture_output=True, text=True, timeout=30,
                         env=script_env(KMP_TLS_DIR=tmp_path, KMP_SCHEDULER_FILE=tmp_path / "s.json"))
    assert out.returncode == 1 and "make-certs.sh" in out.stderr
    assert not (tmp_path / "s.json").exists()
