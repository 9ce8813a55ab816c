"""The ``kmp-dask`` command group and its error handling (see the package docstring).

Expected errors (bad input, existing or missing paths, damaged stores, unreachable schedulers)
are printed as one ``Error: ...`` line with exit status 1; ``kmp-dask --traceback ...`` shows
the full Python traceback instead. Anything else (a bug) keeps its traceback.
"""

from __future__ import annotations

import errno
import os
import sys
import warnings

import click

__all__ = ["main"]

#: Built-in errors that are about the user's input or environment, not bugs.
_EXPECTED_BUILTINS = (FileExistsError, FileNotFoundError, IsADirectoryError, NotADirectoryError,
                      PermissionError, ConnectionError)


def _raised_in_kmp_dask(exc: BaseException) -> bool:
    """Whether the innermost frame of ``exc``'s traceback is kmp_dask code (our own checks)."""
    tb, last = exc.__traceback__, None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is not None and str(last.tb_frame.f_globals.get("__name__", "")).startswith("kmp_dask")


#: The environment's ``OSError`` errnos that are not bugs: what the user can do about each.
_ENVIRONMENT_ERRNOS = {
    errno.ENOSPC: "the disk is full: free space there or write to another directory, then run the command again",
    errno.EDQUOT: "the disk quota is exhausted: free space there or write to another directory, then run the "
                  "command again",
    errno.EROFS: "that file system is read-only: write to a writable directory (e.g. under your home or the "
                 "current directory), then run the command again",
    errno.EMFILE: "too many open files: raise the limit (`ulimit -n 4096`) or use fewer workers",
}


def _environment_oserror(exc: BaseException) -> OSError | None:
    """The disk-full / read-only / quota / open-files ``OSError`` behind ``exc`` (itself or a cause)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in _ENVIRONMENT_ERRNOS:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def is_expected_error(exc: BaseException) -> bool:
    """Errors reported in one line: kmp_dask's own exception classes, file-system and connection
    errors, the environment's failures (disk full, read-only file system, quota, out of memory,
    too many open files) and ``ValueError`` / ``TypeError`` raised by kmp_dask's input checks."""
    if type(exc).__module__.startswith("kmp_dask") or isinstance(exc, _EXPECTED_BUILTINS):
        return True
    if isinstance(exc, MemoryError) or _environment_oserror(exc) is not None:
        return True
    return type(exc) in (ValueError, TypeError) and _raised_in_kmp_dask(exc)


def one_line_message(exc: BaseException) -> str:
    """``exc``'s message on one line, Python argument names replaced by the CLI's options."""
    env = _environment_oserror(exc)
    if env is not None:
        where = f" writing in {os.path.dirname(os.path.abspath(env.filename))!r}" if env.filename else ""
        cause = env.strerror or errno.errorcode.get(env.errno, str(env.errno))
        text = f"{cause} ({errno.errorcode.get(env.errno, env.errno)}){where}: {_ENVIRONMENT_ERRNOS[env.errno]}"
        return " ".join(text.split())
    if isinstance(exc, MemoryError):
        detail = " ".join(str(exc).split())
        return ("out of memory" + (f" ({detail})" if detail else "") + ": this machine cannot hold what the command "
                "asked for. Use a smaller model (e.g. a smaller --n-basis), fewer or smaller chunks per worker, a "
                "larger --memory-limit on a machine with more memory, or a cluster (--scheduler).")
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, FileExistsError):
        text = text.replace("pass overwrite=True", "pass --overwrite")
    return text


class _Main(click.Group):
    """The command group: expected errors become one ``Error: ...`` line (exit status 1)."""

    def format_commands(self, ctx, formatter):
        """The commands and their short help, never cut ("..."): wrapped instead."""
        rows = [(name, cmd.get_short_help_str(limit=10**6)) for name in self.list_commands(ctx)
                if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:
            if ctx.meta.get("kmp_dask.traceback") or not is_expected_error(exc):
                raise
            raise click.ClickException(one_line_message(exc)) from None


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    """A warning as the CLI shows it: ``Warning (Category): message`` on one line of stderr — not the
    Python file and source line that raised it (``--traceback`` shows those)."""
    click.echo(f"Warning ({category.__name__}): {' '.join(str(message).split())}", err=True)


def _want_progress(flag) -> bool:
    """``--progress/--no-progress``; by default only when stderr is a terminal."""
    return sys.stderr.isatty() if flag is None else bool(flag)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kmp-dask")
@click.option("--traceback", "show_traceback", is_flag=True,
              help="Show the full Python traceback of errors instead of one line.")
@click.pass_context
def main(ctx, show_traceback):
    """Sparse kernel learning (kernel matching pursuit) on chunked zarr data with dask."""
    ctx.meta["kmp_dask.traceback"] = show_traceback
    if not show_traceback:
        shown = warnings.showwarning
        warnings.showwarning = _one_line_warning
        ctx.call_on_close(lambda: setattr(warnings, "showwarning", shown))
