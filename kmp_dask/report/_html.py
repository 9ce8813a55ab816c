"""The report's HTML: parts (figure, table, note) rendered into one self-contained page.

Every piece of text goes through :func:`html.escape` here and nowhere else (callers pass plain
strings); images are ``data:image/png;base64`` URIs; the style sheet is inline. The page loads
nothing: no external URL, no script, no font.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from html import escape

__all__ = ["Figure", "Table", "Note", "Missing", "Block", "render_page"]


@dataclass(frozen=True)
class Figure:
    title: str
    png: bytes
    alt: str


@dataclass(frozen=True)
class Table:
    title: str
    header: list[str]
    rows: list[list]


@dataclass(frozen=True)
class Note:
    title: str
    text: str


@dataclass(frozen=True)
class Missing:
    """The figures a model has nothing for: (figure title, one-line reason) each."""

    items: list[tuple[str, str]]


@dataclass
class Block:
    """One section of the page (a model, or the evaluations) with its parts, in order."""

    anchor: str
    heading: str
    subtitle: str = ""
    parts: list = field(default_factory=list)


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0 auto;
       max-width: 60rem; padding: 1rem 1.5rem 3rem; color: #1d232a; line-height: 1.45; }
header { border-bottom: 2px solid #2b6cb0; margin-bottom: 1rem; }
h1 { margin: 0.3rem 0; font-size: 1.6rem; }
h2 { margin-top: 2.2rem; border-bottom: 1px solid #cbd5e0; padding-bottom: 0.2rem; font-size: 1.3rem; }
h3 { margin: 1.2rem 0 0.4rem; font-size: 1.05rem; color: #2d3748; }
.meta, .subtitle { color: #4a5568; font-size: 0.9rem; margin: 0.2rem 0 0.6rem; }
table { border-collapse: collapse; margin: 0.3rem 0 0.8rem; font-size: 0.9rem; }
th, td { border: 1px solid #cbd5e0; padding: 0.25rem 0.6rem; text-align: left; vertical-align: top; }
th { background: #edf2f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 0.4rem 0 1rem; }
figure img { max-width: 100%; height: auto; border: 1px solid #e2e8f0; }
p.note { color: #4a5568; font-style: italic; margin: 0.2rem 0 0.8rem; }
nav ul { margin: 0.3rem 0; padding-left: 1.2rem; }
ul.missing { color: #4a5568; font-size: 0.9rem; margin: 0.2rem 0 0.8rem; }
"""


def _cell(v) -> str:
    if isinstance(v, float):
        return f'<td class="num">{escape(f"{v:.4g}")}</td>'
    if isinstance(v, int) and not isinstance(v, bool):
        return f'<td class="num">{v}</td>'
    return f"<td>{escape(str(v))}</td>"


def _table(t: Table) -> str:
    head = "".join(f"<th>{escape(str(h))}</th>" for h in t.header)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in t.rows)
    title = f"<h3>{escape(t.title)}</h3>" if t.title else ""
    thead = f"<thead><tr>{head}</tr></thead>" if t.header else ""
    return f"{title}<table>{thead}<tbody>{body}</tbody></table>"


def _figure(f: Figure) -> str:
    data = base64.b64encode(f.png).decode("ascii")
    return (f"<h3>{escape(f.title)}</h3><figure><img src=\"data:image/png;base64,{data}\" "
            f"alt=\"{escape(f.alt)}\"></figure>")


def _note(n: Note) -> str:
    return f"<h3>{escape(n.title)}</h3><p class=\"note\">{escape(n.text)}</p>"


def _missing(m: Missing) -> str:
    items = "".join(f"<li><b>{escape(t)}</b>: {escape(r)}</li>" for t, r in m.items)
    return f"<h3>Not shown</h3><ul class=\"missing\">{items}</ul>"


def render_part(part) -> str:
    return {Figure: _figure, Table: _table, Note: _note, Missing: _missing}[type(part)](part)


def _block(b: Block) -> str:
    sub = f"<p class=\"subtitle\">{escape(b.subtitle)}</p>" if b.subtitle else ""
    return (f"<section id=\"{escape(b.anchor)}\"><h2>{escape(b.heading)}</h2>{sub}"
            + "".join(render_part(p) for p in b.parts) + "</section>")


def render_page(title: str, meta: str, overview: Table, blocks: list[Block]) -> str:
    """The whole document: header (title, version, time), contents, overview, the blocks."""
    nav = "".join(f"<li><a href=\"#{escape(b.anchor)}\">{escape(b.heading)}</a></li>" for b in blocks)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>{escape(title)}</h1><p class=\"meta\">{escape(meta)}</p></header>"
            f"<nav><ul>{nav}</ul></nav>{_table(overview)}"
            + "".join(_block(b) for b in blocks) + "</body></html>\n")
