"""Per-iteration progress for long fits (tqdm, notebook-aware through ``tqdm.auto``)."""

from __future__ import annotations

__all__ = ["progress_callback"]


def progress_callback(verbose, total):
    """Return ``(callback, bar)``: a tqdm bar updated once per pursuit iteration, or no-ops."""
    if not verbose:
        return None, None
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc="kmp", unit="basis", leave=True)

    def callback(record):
        post = {"resid": f"{record['residual_norm']:.4g}"} if record.get("residual_norm") is not None else {}
        if record.get("val_score") is not None:
            post["val"] = f"{record['val_score']:.4g}"
        bar.set_postfix(post, refresh=False)
        bar.update(1)

    return callback, bar
