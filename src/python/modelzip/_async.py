"""modelzip.save_async: background saves returning a concurrent.futures.Future.

The snapshot (a copy of every array into staging memory, with the GIL
released) happens before save_async returns; the write, CRCs, fsync and
commit run in a C++ thread. A non-daemon Python thread per save waits for
it and completes the future; interpreter exit waits for saves in flight
(_wait_at_exit, which runs before Python joins its threads): there a Ctrl-C
stops them (each is cancelled or rolls back, unless past its commit point;
one waiting for another writer's lock is cancelled at once) and exit waits
only for that; a further Ctrl-C leaves without waiting. A save is
registered (_in_flight) before it starts, and the C++ call hands it its
handle, so that a KeyboardInterrupt raised as that call returns cannot
leave it unknown to exit (save_async then stops it: _abandon).
"""
from __future__ import annotations

import concurrent.futures
import os
import sys
import threading
from typing import Any, Iterable, Mapping, Optional, Union

from . import _modelzip
from ._arguments import check_count, check_save_path
from ._modelzip import Metadata, WriteStats

_METADATA_FIELDS = ("model_name", "model_version", "quantization", "description")

# Per archive (real path): the newest failed save whose error nobody has
# retrieved yet; the next save_async of that archive raises it.
_unretrieved: dict[str, "SaveFuture"] = {}
_unretrieved_lock = threading.Lock()

# Per archive (real path): its saves in flight, oldest first (guarded by
# _unretrieved_lock); and whether _wait_at_exit is registered.
_in_flight: dict[str, list["SaveFuture"]] = {}
_exit_wait_registered = False


class SaveFuture(concurrent.futures.Future):
    """The result of modelzip.save_async: a concurrent.futures.Future of WriteStats.

    ``result()`` waits and returns the WriteStats (or raises the save's
    error), ``done()`` says whether the save has ended, ``exception()``
    waits and returns the error or None, and ``cancel()`` succeeds only while
    the save has not started writing (it is waiting for an earlier save of
    the same archive); a cancelled save never touches the archive. Callbacks
    added with ``add_done_callback`` run in the thread that completes the
    future. ``path`` and ``tag`` say what is saved.
    """

    def __init__(self, path: str, tag: str, key: str) -> None:
        super().__init__()
        self._handle: Any = None  # set by start_background_save as it returns
        self._key = key
        self._completion = threading.Lock()  # cancel() against completion
        self._claim = threading.Lock()  # held by whoever completes the future
        self._retrieved = False
        self.path = path
        self.tag = tag

    def cancel(self) -> bool:
        with self._completion:
            if self.done():
                return self.cancelled()
            if self._handle is None or not self._handle.cancel():
                return False
            return super().cancel()

    def started(self) -> bool:
        """True once the save has started writing (or ended)."""
        return self._handle.started()

    def result(self, timeout: Optional[float] = None) -> WriteStats:
        self._retrieved = True
        return super().result(timeout)

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        self._retrieved = True
        return super().exception(timeout)

    def _start_completion(self) -> None:
        """Starts a non-daemon thread running _complete (which only one runs)."""
        threading.Thread(target=self._complete, name=f"modelzip save {self.tag}",
                         daemon=False).start()

    def _complete(self) -> None:
        """Waits for the save (GIL released) and completes the future,
        unless another thread has claimed that."""
        if not self._claim.acquire(blocking=False):
            return
        key = self._key
        try:
            stats = self._handle.wait()
        except BaseException as error:  # noqa: B902 (handed to the future)
            _ended(key, self)
            with self._completion:
                if self.cancelled():
                    return
                with _unretrieved_lock:
                    _unretrieved[key] = self
                self.set_exception(error)
            return
        _ended(key, self)
        with self._completion:
            self.set_result(stats)

    def __repr__(self) -> str:
        return f"<modelzip.SaveFuture {self.path!r} tag {self.tag!r} {self._state.lower()}>"


def _metadata_fields(metadata: Any) -> Optional[dict[str, Optional[str]]]:
    """The metadata fields save_async sets at commit (see modelzip.save)."""
    if metadata is None:
        return None
    if isinstance(metadata, Metadata):
        return {f: getattr(metadata, f) for f in _METADATA_FIELDS}
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a mapping or modelzip.Metadata, not {type(metadata).__name__}")
    fields = dict(metadata)
    for name, value in fields.items():
        if name not in _METADATA_FIELDS:
            raise ValueError(f"unknown metadata field {name!r} (fields: {', '.join(_METADATA_FIELDS)})")
        if value is not None and not isinstance(value, str):
            raise TypeError(f"metadata field {name!r} must be str or None (None clears it), "
                            f"not {type(value).__name__}")
    return fields


def _ended(key: str, future: SaveFuture) -> None:
    with _unretrieved_lock:
        saves = _in_flight.get(key, [])
        if future in saves:
            saves.remove(future)
        if not saves:
            _in_flight.pop(key, None)


def _wait_for_a_slot(key: str) -> None:
    """Waits while two saves of the archive are in flight (the third call's
    wait), in Python, so that Ctrl-C interrupts it: the C++ start() would wait
    with the GIL released, where the KeyboardInterrupt would come only once
    the first save has ended."""
    while True:
        with _unretrieved_lock:
            saves = list(_in_flight.get(key, []))
        if len(saves) < 2:
            return
        concurrent.futures.wait(saves[:1])


def _wait_at_exit() -> None:
    """Interpreter exit waits for the saves in flight. A Ctrl-C during that
    wait stops them: a save not started is cancelled, one writing rolls back
    (the archive as it was, byte for byte) unless it is past its commit
    point, and exit waits only for that; another Ctrl-C then leaves at once
    (an interrupted append is rolled back by the archive's next writer)."""
    with _unretrieved_lock:
        saves = [f for each in _in_flight.values() for f in each]
    saves = [f for f in saves if f._handle is not None]
    if not saves:
        return
    for f in saves:
        if not f._claim.locked():  # a Ctrl-C in save_async came before its thread started
            f._start_completion()
    if isinstance(getattr(sys, "last_value", None), KeyboardInterrupt):
        for f in saves:
            _say(f"waiting for the background save of tag {f.tag!r} to {f.path} "
                 f"(Ctrl-C again cancels it: the archive stays as it was)")
    try:
        concurrent.futures.wait(saves)
        return
    except KeyboardInterrupt:
        pass
    for f in saves:
        f._handle.stop()  # also ends a wait for another writer's lock
    try:
        concurrent.futures.wait(saves)
    except KeyboardInterrupt:
        _say("leaving without waiting for the background saves: the next writer of an archive "
             "rolls an interrupted save back")
        return
    for f in saves:
        f._retrieved = True  # told here
        error = f.exception() if not f.cancelled() else None
        if "waiting for the archive's lock" in str(error):
            _say(f"the background save of tag {f.tag!r} to {f.path} was cancelled "
                 f"(Ctrl-C) while it waited for another writer's lock: the archive is as it was")
        elif f.cancelled() or getattr(error, "code", None) == "cancelled":
            _say(f"the background save of tag {f.tag!r} to {f.path} was cancelled "
                 f"(Ctrl-C): the archive is as it was")
        elif error is None:
            _say(f"the background save of tag {f.tag!r} to {f.path} completed before "
                 f"Ctrl-C could stop it")
        else:
            _say(f"the background save of tag {f.tag!r} to {f.path} failed: {error}")


def _say(line: str) -> None:
    try:
        print(f"modelzip: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # no stderr left
        pass


def _register_exit_wait() -> None:
    """Registers _wait_at_exit once: with threading's exit hooks (they run
    before Python joins the non-daemon threads, where a Ctrl-C would end
    the wait and leave the saves running into the process's end), else
    with atexit."""
    global _exit_wait_registered
    if _exit_wait_registered:
        return
    _exit_wait_registered = True
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        try:
            register(_wait_at_exit)
            return
        except RuntimeError:  # interpreter shutting down: its threads are being joined
            return
    import atexit
    atexit.register(_wait_at_exit)


def _raise_unretrieved(key: str) -> None:
    with _unretrieved_lock:
        failed = _unretrieved.pop(key, None)
    if failed is not None and not failed._retrieved:
        failed._retrieved = True
        error = failed.exception()
        assert error is not None
        error.add_note(f"raised by an earlier background save (tag {failed.tag!r}) whose "
                       f"result nobody retrieved; this save did not start")
        raise error


def save_async(path: Union[str, "os.PathLike[str]"], tag: str, arrays: Mapping[str, Any], *,
               share: Optional[Mapping[str, tuple[str, str]]] = None,
               compress: Union[bool, Iterable[Union[str, tuple[str, str]]]] = False,
               bfloat16: Iterable[Union[str, tuple[str, str]]] = (),
               dtypes: Optional[Mapping[Union[str, tuple[str, str]], str]] = None,
               updater: Optional[Mapping[tuple[str, str], Any]] = None,
               training: Optional[Mapping[str, Any]] = None,
               metadata: Any = None, tag_metadata: Optional[Mapping[str, str]] = None,
               dedup: bool = True, durable: bool = True,
               append: bool = True, replace: bool = False, keep_last: Optional[int] = None,
               keep_staging: bool = True) -> SaveFuture:
    """Adds tag ``tag`` holding ``arrays`` to the archive at ``path`` in the background.

    Returns once every array has been copied into staging memory (host
    memory, reused by the next save when large enough; ``keep_staging=False``
    frees it, and the idle staging memory of earlier saves, after the save): changing the arrays afterwards never reaches
    the archive. The write and commit then run in a background thread with
    the guarantees of modelzip.save (the old archive or the new one, also
    after a crash). Arguments as for modelzip.save; ``training`` as for
    Writer.add_tag; no ``progress``. ``replace`` replaces an existing tag of
    that name and ``keep_last=N`` then keeps only the newest N tags, both in
    the save's one commit (a rolling set of checkpoints saved in the
    background); keep_last=0 raises here, before anything is copied.

    One save per archive at a time: a save started while another save of
    the same archive is in flight is queued behind it (its snapshot taken
    now); a third call waits until the first save has ended. Errors are
    raised by the future's result(), and, if nobody retrieved them, by the
    next save_async of the same archive (which then saves nothing).
    Interpreter exit waits for saves in flight; Ctrl-C during that wait
    stops them (a queued save is cancelled, a writing one rolls back unless
    it is past its commit point: the archive as it was) and exit waits only
    for that (docs/saving.md).
    """
    check_save_path("modelzip.save_async", path)
    check_count("modelzip.save_async", "keep_last", keep_last)
    key = os.path.realpath(os.fspath(path))
    _raise_unretrieved(key)
    _wait_for_a_slot(key)
    _register_exit_wait()
    fields = _metadata_fields(metadata)
    # Registered before the save starts, and given its handle by the C++ call
    # itself: a KeyboardInterrupt raised as the call returns (or anywhere up
    # to the return below) finds the save in _in_flight (_abandon).
    future = SaveFuture(os.fspath(path), tag, key)
    with _unretrieved_lock:
        _in_flight.setdefault(key, []).append(future)
    try:
        _modelzip.start_background_save(
            path, tag, arrays, share=share, compress=compress, bfloat16=bfloat16, dtypes=dtypes,
            updater=updater, training=training, metadata=fields, dedup=dedup,
            durable=durable, append=append, replace=replace, keep_last=keep_last,
            keep_staging=keep_staging, tag_metadata=tag_metadata, future=future)
        future._start_completion()
    except TypeError as error:  # an argument of the wrong type: named as the caller wrote it
        _abandon(future, error)
        internal = "modelzip.start_background_save()"
        if not str(error).startswith(internal):
            raise
        raise TypeError("modelzip.save_async()" + str(error)[len(internal):]) from None
    except BaseException as error:  # noqa: B902 (a KeyboardInterrupt too)
        _abandon(future, error)
        raise
    return future


def _abandon(future: SaveFuture, error: BaseException) -> None:
    """save_async raises `error` after registering `future`: a save that
    did not start is forgotten (a KeyboardInterrupt, as the arrays were
    converted, gets a note saying so unless the copy's interrupt added one);
    one that started (a Ctrl-C as the C++ call
    returned) is stopped as a Ctrl-C during its snapshot stops it, rolled
    back unless past its commit point, and a note on `error` says which."""
    if future._handle is None:
        _ended(future._key, future)
        concurrent.futures.Future.cancel(future)  # wakes _wait_for_a_slot's waits on it
        told = any("the save did not happen" in note or "the save completed" in note
                   for note in getattr(error, "__notes__", ()))
        if isinstance(error, KeyboardInterrupt) and not told:  # before the save started
            error.add_note(f"{future.path}: the save did not happen: interrupted before its "
                           "snapshot was taken (the archive is as it was)")
        return
    future._handle.stop()
    future._complete()  # unless its thread has claimed it
    concurrent.futures.wait([future])
    future._retrieved = True  # told by the note
    failure = future.exception()
    note = ("the save completed before the interrupt could stop it" if failure is None
            else f"the save did not happen: {failure}")
    error.add_note(f"{future.path}: {note}")
