"""ZarrStore: the DataStore protocol over a zarr v3 group (the only module importing zarr).

Layout (docs/store.md): arrays ``X`` (n_rows, n_features) with chunks
``(r, n_features)`` and optional ``y`` with the same row chunks; schema in the
group attributes. No consolidated metadata is written: arrays are always
opened directly, so their metadata cannot go stale after an append.
"""
from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import fsspec
import numpy as np
import zarr

from ..exceptions import StoreExistsError, StoreSchemaError
from ._base import StoreCorruptError, check_range, dask_row_chunk, gather_rows, regular_chunks
from ._remote import S3_PROTOCOLS, bound_fs, bounded_options, endpoint, explain, explained
from ._schema import RunningStats, check_attrs
from ._validation import (
    ContentCheck,
    as_numpy_X,
    as_numpy_y,
    check_append_shapes,
    content_check_enabled,
    first_nonfinite,
    raise_nonfinite,
    read_dtype,
)

#: Group attribute written by ingest (``ZarrSink.finish``): every chunk of ``X`` and ``y`` has a
#: file (zarr's ``write_empty_chunks``), so a missing chunk file means lost data, not zeros.
COMPLETE_KEY = "all_chunks_written"

#: What an fsspec listing may report that changes whenever an object is rewritten, in order of
#: preference (S3: ETag; GCS: md5Hash / generation; local and memory: mtime / created).
_VERSION_KEYS = ("ETag", "etag", "generation", "md5Hash", "LastModified", "last_modified", "mtime", "created")

#: zarr array config of every array kmp_dask writes: all-zero chunks are written too.
WRITE_CONFIG = {"write_empty_chunks": True}

__all__ = ["Location", "MissingFilesystemError", "StorePublishError", "ZarrRowReader", "ZarrSink", "ZarrStore",
           "atomic_target", "check_target_free", "publish_remote"]


def default_compressors() -> tuple:
    """Blosc/zstd level 3 with bit-shuffle: the default codec for ``X`` and ``y``."""
    return (zarr.codecs.BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle"),)


@dataclass(frozen=True)
class Location:
    """Where a store lives: a local path or an fsspec URL plus its storage options."""

    url: str
    storage_options: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, target: str | os.PathLike, storage_options: dict | None = None) -> Location:
        """Normalise a path, ``file://`` URL or other fsspec URL."""
        text = os.fspath(target)
        if not isinstance(text, str):
            raise TypeError(f"target must be a str path/URL or os.PathLike; got {type(target).__name__}.")
        options = _check_storage_options(storage_options)
        if "://" in text and not text.startswith("file://"):
            return cls(text.rstrip("/"), options)
        if options:
            raise ValueError(
                f"storage_options={_shown(options)} apply to URLs such as s3://bucket/data.zarr; {text!r} is a "
                "local path. Drop storage_options, or give the store's URL."
            )
        local = text[len("file://"):] if text.startswith("file://") else text
        return cls(os.path.abspath(os.path.expanduser(local)), options)

    @property
    def is_local(self) -> bool:
        """True for paths on the local file system."""
        return "://" not in self.url

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The fsspec file system holding the store."""
        return _url_to_fs(self.url, self.storage_options)[0]

    @property
    def path(self) -> str:
        """Path of the store inside :attr:`fs`."""
        return _url_to_fs(self.url, self.storage_options)[1]

    def exists(self) -> bool:
        """Whether anything exists at this location (object stores: asked afresh, not from the
        file system's listing cache, which another writer may have made stale)."""
        if self.is_local:
            return os.path.exists(self.url)
        with explained(self.url, self.storage_options):  # the first contact: a clear error (store/_remote.py)
            fs = self.fs
            fs.invalidate_cache(self.path)
            return fs.exists(self.path)

    def sibling(self, suffix: str) -> Location:
        """A location next to this one whose name ends with ``suffix`` (a local name that would pass the
        file system's length limit: ``.<hash of the name>`` + ``suffix``, kmp_dask/_temporaries.py)."""
        if self.is_local:
            from .._temporaries import sibling_name

            return Location(sibling_name(self.url, suffix), self.storage_options)
        return Location(self.url + suffix, self.storage_options)

    def remove(self) -> None:
        """Delete the location recursively if it exists."""
        if self.exists():
            self.fs.rm(self.path, recursive=True)

    def rename_to(self, other: Location) -> None:
        """Move the local path to ``other`` (atomic ``os.replace``); URLs are published with
        :func:`publish_remote` instead (object stores have no rename)."""
        if not self.is_local:
            raise ValueError(f"rename_to is for local paths; {self.url!r} is a URL (use publish_remote).")
        os.replace(self.url, other.url)

    def zarr_store(self, read_only: bool) -> Any:
        """A zarr ``LocalStore`` or ``FsspecStore`` for this location."""
        if self.is_local:
            return zarr.storage.LocalStore(self.url, read_only=read_only)
        store = zarr.storage.FsspecStore.from_url(
            self.url, storage_options=bounded_options(self.url, self.storage_options) or None, read_only=read_only
        )
        bound_fs(store.fs)
        return store


#: fsspec protocols whose first path component is a bucket that must exist before a write.
BUCKET_PROTOCOLS = ("s3", "s3a", "gs", "gcs")


def _shown(options: dict) -> str:
    """``storage_options`` for a message, secrets masked."""
    secret = ("secret", "token", "password", "key")
    return "{" + ", ".join(f"{k!r}: " + ("'***'" if any(w in k.lower() for w in secret) else repr(v))
                           for k, v in options.items()) + "}"


def _check_storage_options(storage_options: Any) -> dict:
    """``storage_options`` as a dict: None or a mapping with str keys (fsspec keyword arguments)."""
    from collections.abc import Mapping

    if storage_options is None:
        return {}
    if not isinstance(storage_options, Mapping) or not all(isinstance(k, str) for k in storage_options):
        raise TypeError(
            f"storage_options must be a dict of fsspec options such as {{'endpoint_url': 'http://host:9000', "
            f"'key': ..., 'secret': ...}}; got {type(storage_options).__name__}"
            + (f" with keys {[type(k).__name__ for k in storage_options]}"
               if isinstance(storage_options, Mapping) else "")
            + " (the value is not shown: it may hold a secret)."
        )
    return dict(storage_options)


class MissingFilesystemError(ImportError):
    """The fsspec implementation of a store URL's protocol (s3fs for ``s3://``) is not installed."""


def _url_to_fs(url: str, storage_options: dict) -> tuple[fsspec.AbstractFileSystem, str]:
    """``fsspec.core.url_to_fs`` with errors that name the URL and the fix."""
    protocol = url.split("://", 1)[0]
    try:
        fs, path = fsspec.core.url_to_fs(url, **bounded_options(url, storage_options))
        return bound_fs(fs), path
    except ImportError as exc:
        extra = " (pip install 'kmp_dask[s3]')" if protocol in ("s3", "s3a") else ""
        raise MissingFilesystemError(f"the store {url!r} needs the fsspec implementation of {protocol}://, which "
                                     f"is not installed{extra}: {exc}") from exc
    except ValueError as exc:
        if "protocol" not in str(exc).lower():
            raise
        raise ValueError(f"the store {url!r} has the protocol {protocol!r}, which fsspec does not know; use a "
                         f"local path or a URL such as s3://bucket/data.zarr ({exc}).") from exc


def _check_bucket(final: Location) -> None:
    """Raise ``FileNotFoundError`` before any work if the bucket of an object-store target is missing."""
    protocol = final.url.split("://", 1)[0]
    if protocol not in BUCKET_PROTOCOLS:
        return
    bucket = final.path.split("/", 1)[0]
    with explained(final.url, final.storage_options):  # no credentials, no answer, denied: one clear error
        fs = final.fs
        fs.invalidate_cache(bucket)
        exists = _bucket_exists(fs, bucket)
    if not exists:
        where = endpoint(final.storage_options)
        raise FileNotFoundError(
            f"target {final.url!r}: the bucket {bucket!r} does not exist at {where}, or these credentials "
            f"cannot see it. Create the bucket first (aws s3 mb {protocol}://{bucket}), or check storage_options "
            "(endpoint_url, key, secret) / the AWS_* environment variables."
        )


def _bucket_exists(fs, bucket: str) -> bool:
    """Whether ``bucket`` exists: one ``HeadBucket`` request on S3 (s3fs's ``exists`` of a bucket
    answers False for any error — no credentials, a silent endpoint — after two probes), else
    ``fs.exists``."""
    if not hasattr(fs, "call_s3"):
        return fs.exists(bucket)
    try:
        fs.call_s3("head_bucket", Bucket=bucket)
    except FileNotFoundError:
        return False
    return True


def check_target_free(target: str | os.PathLike, *, overwrite: bool,
                      storage_options: dict | None = None) -> None:
    """Raise :class:`StoreExistsError` if something is at ``target`` and ``overwrite`` is False.

    Ingest functions call this before reading their source, so that an existing target
    is reported before any work (:func:`atomic_target` checks again before writing).
    """
    final = Location.parse(target, storage_options)
    if not final.is_local:
        _check_bucket(final)
    else:
        from .._temporaries import check_output_path

        check_output_path(final.url, "target", file=False)
    if final.exists() and not overwrite:
        raise StoreExistsError(
            f"a store already exists at {final.url!r}; pass overwrite=True to replace it."
        )
    if final.exists():  # overwrite: only a kmp_dask store (kmp_dask/_overwrite.py)
        from .._overwrite import check_replaceable

        check_replaceable(target, ("store",), option="target", storage_options=storage_options)


@contextmanager
def atomic_target(
    target: str | os.PathLike, *, overwrite: bool, storage_options: dict | None = None
) -> Iterator[Location]:
    """Yield a temporary sibling location that replaces ``target`` on success.

    On any exception the temporary location is removed and ``target`` is left
    as it was. With ``overwrite=True`` an existing target is moved aside, the
    new store moved in, and only then the old one deleted.
    """
    check_target_free(target, overwrite=overwrite, storage_options=storage_options)
    final = Location.parse(target, storage_options)
    tmp = final.sibling(f".tmp-{uuid.uuid4().hex}")
    try:
        yield tmp
        _swap_in(tmp, final)
    except StorePublishError as exc:
        if exc.temporary != tmp.url:  # another target's publish failed (nested atomic_target)
            tmp.remove()
        raise  # this complete new store stays at the temporary location the message names
    except BaseException:
        tmp.remove()
        raise


class StorePublishError(OSError):
    """Copying a complete temporary store into place on an object store failed part way.

    The complete new store is kept at :attr:`temporary` (the message names it); the target holds
    no readable store (its root ``zarr.json``, written last, is absent).
    """

    def __init__(self, message: str, *, temporary: str, target: str):
        super().__init__(message)
        self.temporary, self.target = temporary, target


def publish_remote(tmp: Location, final: Location) -> None:
    """Publish the complete store at URL ``tmp`` at URL ``final`` (object stores: no rename).

    Object stores (S3, GCS, ...) have no atomic rename of a prefix, so the commit point is the
    store's root ``zarr.json``: zarr cannot open a group without it, and :class:`ZarrStore` and
    ``check_replaceable`` recognise a store by it. The steps:

    1. the objects of ``tmp`` are listed (a fresh listing, not the cache);
    2. an old store at ``final`` (``overwrite=True``, already checked to be a kmp_dask store) loses
       its root ``zarr.json`` first — from then on no reader opens it, so none can see a mix of old
       and new chunks — and then the rest of its objects;
    3. every object but the root ``zarr.json`` is copied to ``final`` (server-side copies: no chunk
       passes through this process), then the root ``zarr.json`` last;
    4. ``tmp`` is deleted.

    A failure in step 3 removes what was copied and raises :class:`StorePublishError` naming the
    complete store kept at ``tmp`` (the old store, if any, is gone by then: unlike a local rename,
    replacing a store on an object store has a window in which the target holds no store).
    """
    fs = tmp.fs
    src, dst = tmp.path.rstrip("/"), final.path.rstrip("/")
    fs.invalidate_cache(src)
    keys = sorted(p[len(src) + 1:] for p in fs.find(src))
    if "zarr.json" not in keys:
        raise StoreSchemaError(f"the temporary store {tmp.url!r} has no root zarr.json; nothing was published.")
    if final.exists():
        if fs.exists(f"{dst}/zarr.json"):
            fs.rm(f"{dst}/zarr.json")
        fs.invalidate_cache(dst)
        if fs.exists(dst):
            fs.rm(dst, recursive=True)
        fs.invalidate_cache(dst)
    body = [k for k in keys if k != "zarr.json"]
    try:
        if body:
            fs.copy([f"{src}/{k}" for k in body], [f"{dst}/{k}" for k in body])
        fs.copy(f"{src}/zarr.json", f"{dst}/zarr.json")
    except Exception as exc:
        try:
            final.remove()
        except Exception:  # pragma: no cover - the store is unreadable without its zarr.json anyway
            # silence is right here: zarr.json is copied last, so what is left is never opened as a
            # store, and the StorePublishError below names the failure that matters and the kept copy
            pass
        raise StorePublishError(
            f"publishing the new store at {final.url!r} failed ({type(exc).__name__}: {exc}); the complete new "
            f"store is kept at {tmp.url!r}: run the ingest again, or copy it there yourself (its zarr.json last).",
            temporary=tmp.url, target=final.url,
        ) from exc
    fs.invalidate_cache(dst)
    tmp.remove()


def _swap_in(tmp: Location, final: Location) -> None:
    """Move ``tmp`` to ``final``, replacing (and finally deleting) any old store."""
    if not final.is_local:
        publish_remote(tmp, final)
        return
    if not final.exists():
        tmp.rename_to(final)
        return
    old = final.sibling(f".old-{uuid.uuid4().hex}")
    final.rename_to(old)
    try:
        tmp.rename_to(final)
    except BaseException:
        old.rename_to(final)
        raise
    old.remove()


@dataclass(frozen=True)
class BlockWriter:
    """Picklable writer of whole-chunk row blocks into existing arrays (parallel-safe)."""

    X: Any
    y: Any
    chunk_rows: int

    def __call__(self, start: int, X: np.ndarray, y: np.ndarray | None) -> None:
        """Write rows ``[start, start + len(X))``; ``start`` must be chunk-aligned."""
        if start % self.chunk_rows:
            raise ValueError(
                f"parallel block writes must start on a chunk boundary (multiple of "
                f"{self.chunk_rows}); got start={start}."
            )
        stop = start + X.shape[0]
        self.X[start:stop] = X
        if self.y is not None:
            self.y[start:stop] = y


class ZarrSink:
    """Create the arrays of a new store and write row blocks into them.

    Parameters
    ----------
    location : Location
        Where to create the group (normally a temporary sibling).
    n_rows, n_features : int
        Initial shape of ``X``; rows grow automatically in :meth:`write`.
    dtype : numpy dtype
        dtype of ``X``.
    chunk_rows : int
        Rows per storage chunk.
    y_trailing : tuple or None
        Shape of one row of ``y`` (``()`` or ``(m,)``), or None without targets.
    y_dtype : numpy dtype, optional
        dtype of ``y``.
    """

    def __init__(self, location, *, n_rows, n_features, dtype, chunk_rows, y_trailing=None,
                 y_dtype=None):
        self.chunk_rows = int(chunk_rows)
        # a local temporary already made by its writer (holding only the in-use marker, store/_ingest.py)
        # is opened without clearing it; anything else is created afresh
        fresh = location.is_local and os.path.isdir(location.url)
        self._group = zarr.open_group(store=location.zarr_store(read_only=False), mode="a" if fresh else "w")
        self._X = self._create("X", (n_rows, n_features), dtype)
        self._y = None if y_trailing is None else self._create("y", (n_rows, *y_trailing), y_dtype)

    def _create(self, name: str, shape: tuple, dtype: Any) -> Any:
        chunks = (self.chunk_rows, *shape[1:])
        return self._group.create_array(
            name, shape=shape, chunks=chunks, dtype=dtype, compressors=default_compressors(),
            config=WRITE_CONFIG,
        )

    def write(self, start: int, X: np.ndarray, y: np.ndarray | None) -> None:
        """Write rows ``[start, start + len(X))`` from this (single) writer, growing arrays."""
        stop = start + X.shape[0]
        if stop > self._X.shape[0]:
            self._X.resize((stop, self._X.shape[1]))
            if self._y is not None:
                self._y.resize((stop, *self._y.shape[1:]))
        self._X[start:stop] = X
        if self._y is not None:
            self._y[start:stop] = y

    def block_writer(self) -> BlockWriter:
        """A picklable writer for tasks that each own whole chunks."""
        return BlockWriter(self._X, self._y, self.chunk_rows)

    def finish(self, attrs: dict) -> None:
        """Write the group attributes (last step before the rename), with the marker saying
        that every chunk has a file (:data:`COMPLETE_KEY`).

        With ``classes``, ``y`` is first read back chunk by chunk (a pass over ``y`` only) and
        every value must be an integer code into ``classes``: a
        :class:`~kmp_dask.exceptions.StoreContentError` otherwise, and, raised inside
        :func:`atomic_target`, nothing is left at the target.
        """
        classes = attrs.get("classes")
        if classes is not None and self._y is not None:
            n = int(attrs["n_rows"])
            check = ContentCheck(None, regular_chunks(n, self.chunk_rows), classes, source="the y given to ingest")
            for a in range(0, n, self.chunk_rows):
                check.y(self._y[a:min(a + self.chunk_rows, n)], a)
        self._group.update_attributes({**attrs, COMPLETE_KEY: True})


class ZarrRowReader:
    """Picklable reader that opens ``X``/``y`` directly (not via consolidated metadata).

    Only the location and chunk layout are pickled; arrays are reopened lazily
    in the receiving process.
    """

    def __init__(self, location: Location, row_chunks: tuple[int, ...], has_y: bool,
                 check: ContentCheck | None = None, complete: bool = False):
        self.location = location
        self.row_chunks = tuple(row_chunks)
        self.has_y = has_y
        self.check = check
        self.complete = complete
        self._arrays = None

    def __getstate__(self) -> dict:
        return {"location": self.location, "row_chunks": self.row_chunks, "has_y": self.has_y,
                "check": self.check, "complete": self.complete}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["location"], state["row_chunks"], state["has_y"], state.get("check"),
                      state.get("complete", False))

    def _open(self) -> tuple[Any, Any]:
        """The arrays, opened here once: an object store's failure is its one clear error
        (store/_remote.py), and a store removed since it was opened (or its bucket) says so."""
        if self._arrays is None:
            loc = self.location
            with explained(loc.url, loc.storage_options):
                try:
                    store = loc.zarr_store(read_only=True)
                    X = zarr.open_array(store=store, path="X", mode="r")
                    y = zarr.open_array(store=store, path="y", mode="r") if self.has_y else None
                except FileNotFoundError as exc:  # zarr's ArrayNotFoundError too
                    gone = _store_gone_error(loc)
                    if gone is None:
                        raise
                    raise gone from exc
            self._arrays = (X, y)
        return self._arrays

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Return ``(X[start:stop], y[start:stop] or None)``."""
        start, stop = check_range(start, stop, sum(self.row_chunks))
        X, y = self._open()
        files = self.location if self.complete else None
        return (read_checked(X, "X", self.location.url, start, stop, self.check, files),
                None if y is None else read_checked(y, "y", self.location.url, start, stop, self.check, files))

    def read_rows(self, idx: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Return the rows ``idx`` (any order, repeats allowed), one read per touched chunk."""
        return gather_rows(self.read_range, idx, self.row_chunks)


class ZarrStore:
    """A :class:`~kmp_dask.store.DataStore` backed by a zarr v3 group.

    Parameters
    ----------
    target : str or os.PathLike
        Local path or fsspec URL (``file://``, ``memory://``, ...).
    storage_options : dict, optional
        Passed to fsspec for URLs.

    Raises
    ------
    FileNotFoundError
        Nothing exists at ``target``.
    StoreSchemaError
        The group is not a kmp_dask store; the message names what is missing.
    """

    def __init__(self, target: str | os.PathLike, *, storage_options: dict | None = None):
        self._loc = Location.parse(target, storage_options)
        if not self._loc.exists():
            hint = "" if self._loc.is_local else (
                " (looked up with storage_options " + _shown(self._loc.storage_options) + " and the AWS_* / FSSPEC_* "
                "environment variables; check the bucket, the path and endpoint_url)")
            raise FileNotFoundError(f"no store at {self._loc.url!r}{hint}.")
        self._refresh()

    def _refresh(self) -> None:
        """(Re)open the group and arrays and check the schema."""
        where = self._loc.url
        try:
            group = zarr.open_group(store=self._loc.zarr_store(read_only=True), mode="r",
                                    use_consolidated=False)
        except Exception as exc:
            raise StoreSchemaError(f"store at {where!r} is not a readable zarr group: {exc}") from exc
        self._attrs = dict(group.attrs)
        check_attrs(self._attrs, where)
        arrays = set(group.array_keys())
        if "X" not in arrays:
            raise StoreSchemaError(f"store at {where!r} has no array 'X'.")
        self._X = group["X"]
        self._y = group["y"] if "y" in arrays else None
        _check_layout(self._X, self._y, self._attrs, where)
        _check_dtypes(self._X, self._y, where)

    def __repr__(self) -> str:
        return f"ZarrStore({self.url!r}, n_rows={self.n_rows}, n_features={self.n_features})"

    @property
    def url(self) -> str:
        """Normalised location (absolute local path or URL)."""
        return self._loc.url

    @property
    def location(self) -> Location:
        """Location and storage options of the store."""
        return self._loc

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return int(self._X.shape[0])

    @property
    def n_features(self) -> int:
        """Number of columns of ``X``."""
        return int(self._X.shape[1])

    @property
    def dtype(self) -> np.dtype:
        """dtype ``X`` is read as: float32 or float64 (an int / bool ``X`` is read as float64)."""
        return read_dtype(self._X.dtype)

    @property
    def complete(self) -> bool:
        """Whether ingest wrote a file for every chunk (then a missing chunk file means lost data)."""
        return bool(self._attrs.get(COMPLETE_KEY, False))

    def content_check(self, finite: bool | None = None) -> ContentCheck:
        """The checks applied to each chunk as it is read (docs/store.md "Content checks");
        ``finite`` defaults to dask config ``kmp_dask.check-finite`` (True)."""
        return ContentCheck(self.url, self.row_chunks, self._attrs.get("classes"),
                            finite=content_check_enabled() if finite is None else finite, x_dtype=self.dtype)

    @property
    def chunk_rows(self) -> int:
        """Rows per storage chunk."""
        return int(self._X.chunks[0])

    @property
    def row_chunks(self) -> tuple[int, ...]:
        """Storage chunk sizes along rows."""
        return regular_chunks(self.n_rows, self.chunk_rows)

    @property
    def attrs(self) -> dict[str, Any]:
        """A copy of the group attributes."""
        return dict(self._attrs)

    @property
    def has_y(self) -> bool:
        """Whether targets are present."""
        return self._y is not None

    @property
    def y_shape(self) -> tuple[int, ...] | None:
        """Shape of ``y`` or None."""
        return None if self._y is None else tuple(self._y.shape)

    def to_dask(self, name: str = "X", chunks: int | None = None):
        """``X`` or ``y`` as a dask array; ``chunks`` rows must be a multiple of chunk_rows."""
        import dask.array as da

        arr = {"X": self._X, "y": self._y}.get(name)
        if arr is None:
            raise KeyError(f"store has no array {name!r}; available: "
                           f"{['X'] + (['y'] if self.has_y else [])}.")
        from dask.base import tokenize

        rows = dask_row_chunk(chunks, self.chunk_rows)
        check = self.content_check()
        wrapped = _CheckedArray(arr, name, self.url, check, self._loc if self.complete else None)
        return da.from_array(
            wrapped, chunks=(rows, *arr.shape[1:]),
            name=f"from-zarr-{tokenize(arr, name, rows, check.finite)}",
            meta=np.empty((0,) * arr.ndim, wrapped.dtype), asarray=False, fancy=False,
        )

    def verify(self, callback=None) -> int:
        """Check that every chunk of ``X`` and ``y`` is there and read it back; return the number
        of chunks read.

        First the chunk files are listed and compared with the chunk grid (stores written by
        ingest have a file for every chunk; for other stores, whose all-zero chunks zarr may have
        skipped, this step is left out). Then each chunk is read, one at a time, and checked as
        a fit reads it, NaN/inf always included (:meth:`content_check` with ``finite=True``).

        Parameters
        ----------
        callback : callable, optional
            Called as ``callback(n_done, n_total)`` after each chunk.

        Raises
        ------
        StoreCorruptError
            For the first chunk whose file is missing or that cannot be decoded, or that holds a
            non-finite value (ingest refuses them, so the file was changed afterwards); the
            message names the store, the array, the chunk (index, rows) and its file.
        StoreContentError
            For the first label code that is not an integer index into ``classes``.
        """
        arrays = [("X", self._X)] + ([("y", self._y)] if self._y is not None else [])
        bounds = [(a, a + n) for a, n in zip(np.cumsum((0,) + self.row_chunks[:-1]), self.row_chunks, strict=True)]
        if self.complete:
            for name, arr in arrays:
                listed = _listed_chunk_keys(self._loc, name)
                for i in range(len(bounds)):
                    if chunk_key(arr, name, i) not in listed:
                        raise missing_chunk_error(arr, name, self.url, i)
        check = self.content_check(finite=True)
        total, done = len(arrays) * len(bounds), 0
        for name, arr in arrays:
            for i, (a, b) in enumerate(bounds):
                try:
                    block = arr[int(a):int(b)]
                except OSError:
                    raise
                except Exception as exc:
                    raise corrupt_chunk_error(arr, name, self.url, i, int(a), int(b), exc) from exc
                found = first_nonfinite(name, block, int(a))
                if found:
                    raise corrupt_chunk_error(
                        arr, name, self.url, i, int(a), int(b),
                        f"non-finite value ({found[3]}) at row {found[1]}, column {found[2]}, "
                        "which ingest never writes",
                    )
                check(name, block, int(a))  # label codes within classes
                done += 1
                if callback is not None:
                    callback(done, total)
        return done

    def file_manifest(self) -> list[tuple[str, int, str]] | None:
        """Every file of the store (chunks and metadata) as ``(key, size, version)``, sorted: what
        changes when any byte of the data is rewritten in place, read without reading the data.

        ``version`` is the modification time in ns for a local store; for an object store the
        object's ETag (or its checksum / modification time, whichever the file system reports).
        None when the file system reports none of them for some file: then a change that keeps a
        file's size cannot be seen from its listing (resuming a fit on such a store is refused).
        """
        loc = self._loc
        if loc.is_local:
            out = []
            for dirpath, _, files in os.walk(loc.url):
                for f in files:
                    full = os.path.join(dirpath, f)
                    st = os.stat(full)
                    out.append((os.path.relpath(full, loc.url).replace(os.sep, "/"), int(st.st_size),
                                str(st.st_mtime_ns)))
            return sorted(out)
        root, fs = loc.path.rstrip("/"), loc.fs
        fs.invalidate_cache(root)
        out = []
        for p, info in sorted(fs.find(root, detail=True).items()):
            version = next((info[k] for k in _VERSION_KEYS if info.get(k) not in (None, "")), None)
            if version is None:
                return None
            out.append((p[len(root) + 1:], int(info.get("size") or 0), str(version)))
        return out

    def reader(self) -> ZarrRowReader:
        """A picklable reader for worker processes (``memory://`` works in-process only); it
        checks each chunk it reads as :meth:`read_range` does (the setting of
        ``kmp_dask.check-finite`` when the reader is made travels with it)."""
        return ZarrRowReader(self._loc, self.row_chunks, self.has_y, self.content_check(), self.complete)

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Return ``(X[start:stop], y[start:stop] or None)``, each chunk checked as it is read.

        Raises
        ------
        StoreContentError
            NaN / inf in ``X`` or ``y``, or a label code outside the store's ``classes``.
        StoreCorruptError
            A chunk that does not decode, or whose file is missing (stores written by ingest).
        """
        start, stop = check_range(start, stop, self.n_rows)
        check, files = self.content_check(), self._loc if self.complete else None
        return (read_checked(self._X, "X", self.url, start, stop, check, files),
                None if self._y is None else read_checked(self._y, "y", self.url, start, stop, check, files))

    def read_rows(self, idx: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Return the rows ``idx`` (any order, repeats allowed), one read per touched chunk."""
        return gather_rows(self.read_range, idx, self.row_chunks)

    def append(self, X, y=None) -> None:
        """Append rows from this single writer and update ``n_rows``, ``mean``, ``std``.

        The arrays are resized, then one region write fills the partially-filled
        last chunk and the new chunks. Do not append from two processes at once.
        """
        X = as_numpy_X(X)
        y = as_numpy_y(y, X.shape[0])
        y_trailing = () if self._y is None else self._y.shape[1:]
        check_append_shapes(self.n_features, self.has_y, y_trailing, X, y)
        found = first_nonfinite("X", X, self.n_rows) or first_nonfinite("y", y, self.n_rows)
        if found:
            raise_nonfinite(found)
        X = X.astype(np.dtype(self._X.dtype), copy=False)
        stats = RunningStats.from_attrs(self.n_rows, self._attrs["mean"], self._attrs["std"])
        stats = stats.merge(RunningStats.of_block(X))
        self._write_appended(X, y)
        group = zarr.open_group(store=self._loc.zarr_store(read_only=False), mode="r+",
                                use_consolidated=False)
        group.update_attributes({"n_rows": int(stats.n), "mean": [float(v) for v in stats.mean],
                                 "std": [float(v) for v in stats.std]})
        self._refresh()

    def _write_appended(self, X: np.ndarray, y: np.ndarray | None) -> None:
        store = self._loc.zarr_store(read_only=False)
        start, stop = self.n_rows, self.n_rows + X.shape[0]
        Xa = zarr.open_array(store=store, path="X", mode="r+").with_config(WRITE_CONFIG)
        Xa.resize((stop, self.n_features))
        Xa[start:stop] = X
        if y is not None:
            ya = zarr.open_array(store=store, path="y", mode="r+").with_config(WRITE_CONFIG)
            ya.resize((stop, *ya.shape[1:]))
            ya[start:stop] = y.astype(ya.dtype, copy=False)


def chunk_key(arr: Any, name: str, chunk: int) -> str:
    """Path of row chunk ``chunk`` of array ``name`` inside the store (``"X/c/3/0"``)."""
    coords = (int(chunk),) + (0,) * (arr.ndim - 1)
    try:
        return f"{name}/{arr.metadata.encode_chunk_key(coords)}"
    except Exception:  # pragma: no cover - other key encodings
        return f"{name}/c/" + "/".join(map(str, coords))


def corrupt_chunk_error(arr: Any, name: str, url: str, chunk: int, start: int, stop: int,
                        cause: BaseException | str) -> StoreCorruptError:
    """The :class:`StoreCorruptError` for row chunk ``chunk`` (rows ``[start, stop)``)."""
    key = chunk_key(arr, name, chunk)
    why = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
    return StoreCorruptError(
        f"chunk {chunk} (rows {start}..{stop - 1}) of array {name!r} in store {url!r} is corrupt "
        f"({why}); its file is {url}/{key}. The store is damaged: restore it from a copy or "
        f"re-create it (kmp-dask ingest SOURCE {url} --overwrite); `kmp-dask info --verify "
        f"{url}` checks every chunk.",
        url=url, array=name, chunk=int(chunk), rows=(int(start), int(stop)), key=key,
    )


def read_checked(arr: Any, name: str, url: str, start: int, stop: int,
                 check: ContentCheck | None = None, files: Location | None = None) -> np.ndarray:
    """``arr[start:stop]``, each chunk it touches checked; a chunk that fails to decode raises
    :class:`StoreCorruptError`.

    I/O errors (permissions, network) are raised unchanged, but those of an object store
    (store/_remote.py: no credentials, the endpoint refused or silent, access denied) as its one
    clear error — this is where a worker reads its chunks, so credentials that expire, a bucket
    deleted or an endpoint that dies mid-fit reach the user as one line, not a botocore traceback.
    On a decoding error the touched
    chunks are re-read one by one to name the first bad one. With ``files`` (the location of a
    store whose every chunk has a file), a touched chunk that reads as nothing but zarr's fill
    value is looked up, and a missing file raises :class:`StoreCorruptError` (zarr itself
    returns the fill value) — or, on an object store whose bucket is gone, ``FileNotFoundError``
    saying so. ``check`` then casts and checks the values
    (:class:`~kmp_dask.store._validation.ContentCheck`).
    """
    try:
        block = arr[start:stop]
    except Exception as exc:
        _raise_storage_error(exc, arr, url)
        if isinstance(exc, OSError):
            raise
        rows = int(arr.chunks[0])
        for i in range(start // rows, -(-stop // rows)):
            a, b = i * rows, min((i + 1) * rows, int(arr.shape[0]))
            try:
                arr[a:b]
            except Exception as chunk_exc:
                _raise_storage_error(chunk_exc, arr, url)
                if isinstance(chunk_exc, OSError):
                    raise
                raise corrupt_chunk_error(arr, name, url, i, a, b, chunk_exc) from exc
        raise StoreCorruptError(
            f"rows {start}..{stop - 1} of array {name!r} in store {url!r} could not be read "
            f"({type(exc).__name__}: {exc}), although each chunk reads alone; run "
            f"`kmp-dask info --verify {url}`.", url=url, array=name, rows=(start, stop),
        ) from exc
    if files is not None:
        with explained(url, _storage_options_of(arr)):
            _check_chunk_files(arr, name, files, start, stop, block)
    return block if check is None else check(name, block, start)


def _storage_options_of(arr: Any) -> dict:
    """The fsspec options of the file system behind the zarr array ``arr`` (for messages)."""
    fs = getattr(getattr(arr, "store", None), "fs", None)
    return dict(getattr(fs, "storage_options", None) or {})


def _raise_storage_error(exc: BaseException, arr: Any, url: str) -> None:
    """Raise the object store's clear error for ``exc`` (store/_remote.py), if it is one."""
    if not isinstance(url, str) or url.split("://", 1)[0] not in S3_PROTOCOLS:
        return
    clear = explain(exc, url, _storage_options_of(arr))
    if clear is not None:
        raise clear from exc


def _all_fill(block: np.ndarray, fill: Any) -> bool:
    """Whether every value of ``block`` is zarr's fill value (first row first: O(d) when not)."""
    if not block.size:
        return False
    fill = np.asarray(fill if fill is not None else 0)
    if block.dtype.kind == "f" and np.isnan(fill):
        return bool(np.isnan(block[0]).all() and np.isnan(block).all())
    return bool((block[0] == fill).all() and (block == fill).all())


def _check_chunk_files(arr: Any, name: str, loc: Location, start: int, stop: int,
                       block: np.ndarray) -> None:
    """Raise :class:`StoreCorruptError` for a touched chunk that reads as the fill value because
    its file is missing (only called for stores whose every chunk has a file)."""
    rows = int(arr.chunks[0])
    for i in range(start // rows, -(-stop // rows)):
        a, b = max(i * rows, start), min((i + 1) * rows, stop)
        if _all_fill(block[a - start:b - start], arr.fill_value) and not _chunk_exists(loc, chunk_key(arr, name, i)):
            raise _store_gone_error(loc) or missing_chunk_error(arr, name, loc.url, i)


def _store_gone_error(loc: Location) -> FileNotFoundError | None:
    """``FileNotFoundError`` when the whole store (its root ``zarr.json``), or on an object store its
    bucket, is gone — removed while it was read — rather than one chunk missing; else None."""
    if loc.is_local:
        if os.path.exists(os.path.join(loc.url, "zarr.json")):
            return None
        return FileNotFoundError(f"the store {loc.url!r} was removed while it was read (its zarr.json is gone): "
                                 "re-create it (kmp-dask ingest) or point to another copy, and run the command again.")
    fs = loc.fs
    bucket = loc.path.split("/", 1)[0]
    if loc.url.split("://", 1)[0] in BUCKET_PROTOCOLS:
        fs.invalidate_cache(bucket)
        if not _bucket_exists(fs, bucket):
            return FileNotFoundError(
                f"the bucket {bucket!r} of the store {loc.url!r} no longer exists at {endpoint(loc.storage_options)} "
                "(deleted while the store was read, or these credentials can no longer see it): restore the store "
                "there or point to another copy, and run the command again.")
    fs.invalidate_cache(loc.path)
    if fs.exists(f"{loc.path}/zarr.json"):
        return None
    return FileNotFoundError(f"the store {loc.url!r} was removed while it was read (its zarr.json is gone): "
                             "re-create it (kmp-dask ingest) or point to another copy, and run the command again.")


def _chunk_exists(loc: Location, key: str) -> bool:
    if loc.is_local:
        return os.path.exists(os.path.join(loc.url, *key.split("/")))
    fs, path = loc.fs, f"{loc.path}/{key}"
    fs.invalidate_cache(path)
    return fs.exists(path)


def missing_chunk_error(arr: Any, name: str, url: str, chunk: int) -> StoreCorruptError:
    """The :class:`StoreCorruptError` for row chunk ``chunk`` whose file does not exist."""
    rows = int(arr.chunks[0])
    start, stop = chunk * rows, min((chunk + 1) * rows, int(arr.shape[0]))
    key = chunk_key(arr, name, chunk)
    return StoreCorruptError(
        f"chunk {chunk} (rows {start}..{stop - 1}) of array {name!r} in store {url!r} is missing: its file "
        f"{url}/{key} does not exist, although ingest wrote a file for every chunk (zarr would read the "
        f"rows as {arr.fill_value}). The store is damaged: restore it from a copy or re-create it "
        f"(kmp-dask ingest SOURCE {url} --overwrite); `kmp-dask info --verify {url}` checks every chunk.",
        url=url, array=name, chunk=int(chunk), rows=(int(start), int(stop)), key=key,
    )


def _listed_chunk_keys(loc: Location, name: str) -> set[str]:
    """The chunk files of array ``name`` present in the store (keys relative to the store)."""
    if loc.is_local:
        base = os.path.join(loc.url, name)
        out = set()
        for dirpath, _, filenames in os.walk(base):
            for f in filenames:
                rel = os.path.relpath(os.path.join(dirpath, f), loc.url).replace(os.sep, "/")
                out.add(rel)
        return out
    root, fs = loc.path.rstrip("/"), loc.fs
    fs.invalidate_cache(f"{root}/{name}")
    return {p[len(root) + 1:] for p in fs.find(f"{root}/{name}")}


class _CheckedArray:
    """Array-like over a zarr array for :func:`dask.array.from_array`: chunk reads go
    through :func:`read_checked`, so a corrupt or missing chunk is named in the error and the
    values are cast and checked (picklable)."""

    def __init__(self, arr: Any, name: str, url: str, check: ContentCheck | None = None,
                 files: Location | None = None):
        self.arr, self.name, self.url, self.check, self.files = arr, name, url, check, files
        self.shape, self.ndim = tuple(arr.shape), arr.ndim
        self.dtype = check.x_dtype if (check is not None and name == "X") else np.dtype(arr.dtype)

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        rows, rest = key[0], key[1:]
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            return self.arr[key]
        start, stop, _ = rows.indices(self.shape[0])
        block = read_checked(self.arr, self.name, self.url, start, stop, self.check, self.files)
        return block[(slice(None), *rest)] if rest else block


def _check_dtypes(X: Any, y: Any, where: str) -> None:
    """``X`` and ``y`` must hold numbers (int / bool ``X`` is read as float64)."""
    if read_dtype(X.dtype) is None:
        raise StoreSchemaError(
            f"array 'X' at {where!r} has dtype {X.dtype}, not numbers; kmp_dask reads float32/float64 "
            "(int and bool are cast to float64). Encode the features as numbers and ingest them again."
        )
    if y is not None and np.dtype(y.dtype).kind not in "biuf":
        raise StoreSchemaError(
            f"array 'y' at {where!r} has dtype {y.dtype}, not numbers; a store keeps class labels as integer "
            "codes into its 'classes' attribute (classes, y = np.unique(labels, return_inverse=True)), or "
            "numeric targets. Ingest it again with classes=classes."
        )


def _check_layout(X: Any, y: Any, attrs: dict, where: str) -> None:
    """Check shapes, row-only chunking and ``n_rows`` consistency."""
    if X.ndim != 2:
        raise StoreSchemaError(f"array 'X' at {where!r} must be 2-D; it has shape {X.shape}.")
    if X.chunks[1] != X.shape[1]:
        raise StoreSchemaError(
            f"array 'X' at {where!r} is chunked along features (chunks {X.chunks}); "
            "kmp_dask stores chunk by rows only. Re-ingest the data."
        )
    if y is not None and (y.shape[0] != X.shape[0] or y.chunks[0] != X.chunks[0]):
        raise StoreSchemaError(
            f"array 'y' at {where!r} must have X's rows and row chunks; got shape "
            f"{y.shape}, chunks {y.chunks} for X shape {X.shape}, chunks {X.chunks}."
        )
    if int(attrs["n_rows"]) != X.shape[0]:
        raise StoreSchemaError(
            f"store at {where!r} says n_rows={attrs['n_rows']} but 'X' has {X.shape[0]} rows "
            "(interrupted append?)."
        )
