"""Sphinx configuration of the kmp_dask site.

Build (offline, warnings as errors, as CI does)::

    python -m pip install -e ".[docs]"
    python -m sphinx -W --keep-going -b html docs docs/_build/html

Why Sphinx: the API reference is generated from the numpydoc docstrings the package already has
(autodoc + autosummary + numpydoc, as scikit-learn, dask-ml and xarray do), the existing pages are
Markdown and stay Markdown (myst-parser), and the build needs no network. MkDocs with
mkdocstrings would render the Markdown as well, but its numpydoc support is a
"docstring style" option of mkdocstrings-python that does not render scikit-learn-style
parameter tables and "See Also" sections as numpydoc does.

The guide's code blocks run in the tests (``tests/test_docs.py``), not here, so a build stays
quick; the troubleshooting table is generated here from the failure catalogue in docs/store.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS))  # _catalogue_page

from _catalogue_page import write_catalogue_page  # noqa: E402

import kmp_dask  # noqa: E402

project = "kmp_dask"
author = "kmp_dask contributors"
copyright = "kmp_dask contributors"
release = version = kmp_dask.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**/_templates", "**/_generated"]
templates_path = ["_templates"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": True, "inherited-members": True, "show-inheritance": False}
autodoc_typehints = "none"  # the numpydoc "Parameters" sections say the types
numpydoc_show_class_members = False  # one page per class, its methods documented on it
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()
nitpicky = False

html_theme = "pydata_sphinx_theme"
html_title = f"kmp_dask {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_prev_next": True,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path: list[str] = []
html_show_sourcelink = False


def _write_generated(app):
    write_catalogue_page(DOCS / "store.md", DOCS / "guide" / "_generated" / "catalogue.md")


def _skip_inherited(app, what, name, obj, skip, options):
    """Members inherited from kmp_dask's own mixins are shown (``staged_predict``, ``prefix``,
    ``expansion_at`` ...); what scikit-learn or Python define (``set_params``, ``set_fit_request``,
    ...) is left out: its docstrings cross-reference scikit-learn's own site, which an offline
    build cannot reach, and it is documented there."""
    module = getattr(obj, "__module__", None) or ""
    if not module.startswith("kmp_dask"):
        return True
    if module.startswith("sklearn") or (name.startswith("set_") and name.endswith("_request")):
        return True
    return skip


def setup(app):
    app.connect("builder-inited", _write_generated)
    app.connect("autodoc-skip-member", _skip_inherited)
