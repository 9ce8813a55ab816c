"""An in-process fit with ``client=None`` does not import ``distributed`` (1.3 s on first use)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = """
import sys
import numpy as np
from kmp_dask import KMPClassifier
X = np.random.RandomState(0).randn(200, 3)
y = (X[:, 0] > 0).astype(int)
KMPClassifier(n_basis=5, random_state=0).fit(X, y)
print("distributed" in sys.modules)
"""


def test_in_process_fit_does_not_import_distributed():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", CODE], check=False, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"
