"""Output directories and files that appear complete or not at all.

- :func:`check_out_dir`: the checks every command makes on ``--out`` before any work (a file, an
  unwritable place, a name too long for a temporary sibling, a directory that is not ours to replace);
- :func:`staged_dir`: write a whole directory beside its destination (``.NAME.tmp-XXXX``) and move it into
  place at the end, replacing a previous run's directory (so its stale files, e.g. plots of classes that
  no longer exist, go with it); on any failure the temporary directory is removed and the destination is
  left as it was;
- :func:`staged_parent`: the same for code that writes ``PARENT/NAME/`` itself (an experiment writes
  ``opts.out_dir / id``): a temporary parent beside the destination, whose ``NAME`` is moved into place;
- :func:`staged_command`: a decorator giving a command's ``out`` parameter this treatment (the testbeds);
  :func:`shown_path` prints a path inside a staged directory as where it will be;
- :func:`write_text_atomic`: one file written to a temporary sibling and renamed over the destination.

Every temporary name carries the pid of the process that made it (``.NAME.tmp-PID-XXXX``, and
``.NAME.old-PID-XXXX`` for a replaced directory during the swap). A process killed with SIGKILL cannot
clean up, so the next command that stages beside the same place removes what dead processes left
(:func:`remove_stale`): their temporary directories and files are deleted, and a previous output that a
killed swap had moved aside (``.old-``) is put back when its destination is missing.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from paccp.errors import UserError

# A run directory we may replace holds one of these (what paccp run / reproduce / sweep / crosscheck write).
_MARKERS = ("summary.json", "crosscheck.json")
_NAME_MAX = 200  # bytes of a directory name: leaves room for the temporary prefix and suffix


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_out_dir(out: Path, option: str = "--out", *, replace: bool = False) -> None:
    """Raise UserError (one line) unless ``out`` can be written: checked before any work.

    ``replace``: the directory will be replaced as a whole, so an existing non-empty directory must look
    like one of our outputs (holds ``summary.json``), and must not be the current directory or above it.
    """
    try:
        if out.exists() and not out.is_dir():
            raise UserError(f"{option} {out}: exists and is not a directory")
        if len(out.resolve().name.encode("utf-8", "surrogateescape")) > _NAME_MAX:
            raise UserError(f"{option} {out}: directory name longer than {_NAME_MAX} bytes")
        base = _nearest_existing(out.resolve())
        if not base.is_dir():
            raise UserError(f"{option} {out}: {base} is not a directory")
        if not os.access(base, os.W_OK | os.X_OK):
            raise UserError(f"{option} {out}: {base} is not writable")
        if out.is_dir() and replace:
            here = Path.cwd().resolve()
            target = out.resolve()
            if target == here or target in here.parents:
                raise UserError(
                    f"{option} {out}: is the current directory or contains it; choose a new directory"
                )
            if any(out.iterdir()) and not any((out / m).is_file() for m in _MARKERS):
                raise UserError(
                    f"{option} {out}: exists, is not empty and holds no summary.json (not an output of "
                    "paccp); choose a new or empty directory"
                )
            if not os.access(out.resolve().parent, os.W_OK | os.X_OK):
                raise UserError(f"{option} {out}: its parent directory is not writable")
    except OSError as exc:
        raise UserError(f"{option} {out}: {exc.strerror or type(exc).__name__}") from None


@contextmanager
def staged_dir(out: Path, option: str = "--out") -> Iterator[Path]:
    """Yield an empty temporary directory beside ``out``; on success it replaces ``out``.

    The temporary directory is created before the caller's work starts (so an unwritable place fails
    first) and removed if the work raises.
    """
    check_out_dir(out, option, replace=True)
    try:
        out.resolve().parent.mkdir(parents=True, exist_ok=True)
        remove_stale(out.resolve().parent, out.resolve().name)
        tmp = Path(tempfile.mkdtemp(prefix=_prefix(out.resolve().name, "tmp"), dir=out.resolve().parent))
        os.chmod(tmp, 0o777 & ~_umask())
    except OSError as exc:
        raise UserError(f"{option} {out}: cannot create it ({exc.strerror or type(exc).__name__})") from None
    _TARGETS[tmp] = out.resolve()
    try:
        yield tmp
        _swap(tmp, out.resolve())
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        _TARGETS.pop(tmp, None)


_TARGETS: dict[Path, Path] = {}  # staged temporary directory -> its destination, while being built


def shown_path(path: Path) -> Path:
    """``path`` as it will be once the staged directory holding it is in place (for messages)."""
    for tmp, target in _TARGETS.items():
        if path == tmp or tmp in path.parents:
            return target / path.relative_to(tmp)
    return path


@contextmanager
def staged_parent(out: Path, option: str = "--out") -> Iterator[Path]:
    """Yield a temporary directory P beside ``out`` for code that writes ``P / out.name`` itself; on success
    ``P / out.name`` replaces ``out`` (as :func:`staged_dir`), on any failure P is removed."""
    with staged_dir(out, option) as tmp:
        parent = tmp / ".stage"
        built = parent / out.resolve().name
        parent.mkdir()
        _TARGETS[built] = out.resolve()
        try:
            yield parent
        finally:
            _TARGETS.pop(built, None)
        if built.is_dir():
            for item in built.iterdir():
                item.rename(tmp / item.name)
        shutil.rmtree(parent)


P = ParamSpec("P")
R = TypeVar("R")


def staged_command(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a command whose keyword ``out`` is its output directory: checked before any work, built
    beside its place and moved there when the command returns, or exits with ``typer.Exit`` (its outputs
    are complete: e.g. a testbed run that did not drive its links still writes its summary, exit 3);
    removed on any other failure."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        import click

        out = kwargs.get("out")
        if not isinstance(out, Path):
            return fn(*args, **kwargs)
        check_out_dir(out, replace=True)
        exit_exc: click.exceptions.Exit | None = None
        with staged_dir(out) as tmp:
            kwargs["out"] = tmp
            try:
                return_value = fn(*args, **kwargs)
            except click.exceptions.Exit as exc:
                exit_exc = exc
        if exit_exc is not None:
            raise exit_exc
        return return_value

    return wrapper


@contextmanager
def resumable_dir(out: Path, option: str = "--out") -> Iterator[Path]:
    """An output directory that is resumable by design (a per-point cache, each entry written atomically;
    its summary files written with :func:`write_text_atomic`): created in place, and on a failure removed
    again if this call created it and nothing was cached in it yet (a bad option or a plan error leaves
    no empty directory behind); a kill leaves only complete cache entries, which the next run reuses."""
    check_out_dir(out, option)
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        remove_stale(out)  # temporary files of a killed earlier run
    except OSError as exc:
        raise UserError(f"{option} {out}: cannot create it ({exc.strerror or type(exc).__name__})") from None
    try:
        yield out
    except BaseException:
        if created and not any(p.is_file() for p in out.rglob("*")):
            shutil.rmtree(out, ignore_errors=True)
        raise


def _prefix(name: str, kind: str) -> str:
    """The start of a temporary name beside ``name``: ``.NAME.tmp-PID-`` (``kind`` tmp or old)."""
    return f".{name}.{kind}-{os.getpid()}-"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists (another user's)
        return True
    return True


_STALE = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>[0-9]+)-[^/]*$")


def remove_stale(directory: Path, name: str | None = None) -> list[Path]:
    """Remove what killed processes left in ``directory`` (of ``name`` only, when given): temporary
    directories and files of dead pids; a moved-aside previous output (``.old-``) is renamed back when its
    destination is missing (a kill between the two renames of a swap), else removed. Entries of live
    processes (another command running beside us) are left alone. Returns what was removed or restored."""
    done: list[Path] = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return done
    for entry in sorted(entries, key=lambda e: e.name):
        m = _STALE.match(entry.name)
        if m is None or (name is not None and m["name"] != name) or _alive(int(m["pid"])):
            continue
        target = directory / m["name"]
        try:
            if m["kind"] == "old" and not target.exists():
                entry.rename(target)
            elif entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError:
            continue  # not ours to remove (permissions): left as it was
        done.append(entry)
    return done


def _swap(tmp: Path, out: Path) -> None:
    """Move ``tmp`` to ``out``, replacing an existing directory (renames only; the old one is deleted)."""
    if not out.exists():
        tmp.rename(out)
        return
    old = tmp.with_name(tmp.name.replace(".tmp-", ".old-", 1))  # same pid: remove_stale can restore it
    out.rename(old)
    try:
        tmp.rename(out)
    except BaseException:
        old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def check_out_file(path: Path, option: str = "--out") -> None:
    """Raise UserError (one line) unless a file can be written at ``path``: checked before any work."""
    try:
        if path.is_dir():
            raise UserError(f"{option} {path}: is a directory")
        parent = path.resolve().parent
        if not parent.is_dir():
            raise UserError(f"{option} {path}: {parent} is not a directory")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise UserError(f"{option} {path}: {parent} is not writable")
    except (OSError, ValueError) as exc:
        raise UserError(f"{option} {str(path)[:200]!r}: {getattr(exc, 'strerror', None) or exc}") from None


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to a temporary sibling of ``path`` and rename it over ``path``."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary sibling of ``path`` and rename it over ``path``."""
    # no remove_stale here (a directory scan per write): staged and resumable directories and the sweep
    # cache are cleaned once when a command starts
    fd, name = tempfile.mkstemp(prefix=_prefix(path.name[:100], "tmp"), dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(name, 0o666 & ~_umask())
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def save_figure_atomic(fig: Any, path: Path, **kw: Any) -> None:
    """``fig.savefig(path)`` through :func:`write_bytes_atomic` (for directories written in place, e.g. a
    comparison's: a kill mid-write leaves the previous image, not half of one)."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix.lstrip(".") or "png", **kw)
    write_bytes_atomic(path, buf.getvalue())
