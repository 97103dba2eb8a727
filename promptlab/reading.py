"""Reading the files and values a user hands promptlab (experiment YAML, task and example JSONL, `--set`
values): text that is not UTF-8 and YAML that would blow up are refused with an error naming the file.

- `read_text(path)`: UTF-8 text (a byte-order mark is dropped); other bytes raise ConfigError naming the file,
  the line and column of the first bad byte; a file over `MAX_FILE_BYTES`, or one that is not a regular file
  (a FIFO, a device, a directory), is refused by name before it is read.
- `load_yaml(text, source)`: `yaml.safe_load` with a bound on what the document would hold once its
  aliases are expanded. A YAML alias is a reference, so a "billion laughs" file of a few hundred bytes
  composes to a small graph that explodes only when a program walks it (pydantic validating a field, an
  error message printing the value, JSON hashing a config). The graph is measured while it is still nodes:
  past `MAX_YAML_NODES` nodes (counting every alias as the nodes it stands for) the document is refused,
  naming the field and line where it grows, before any Python object is built. A mapping that gives one key
  twice, an alias that refers to a node holding it (a circular reference) and nesting past what Python's
  parser can follow are refused too, each naming the line.
- `excerpt(text)`, `bounded(message)`: what a message quotes of bad input, and the most it says about it.
- `jsonl_lines(text)`: the lines of a JSONL text, split on "\n" only: U+2028, U+0085 and the other
  characters `str.splitlines` also breaks on are valid inside a JSON string.
- `read_bounded(path, limit)`: the one way promptlab reads a file it did not just write (a cache's value file, a
  results directory's status.json, runs.jsonl, experiment.yaml, spending.json, sweep.lock): only a regular file, of at most `limit` bytes, never through a
  symbolic link; a FIFO, a device or a link (to /dev/zero, say) is refused by name without blocking
  (`RefusedFile`), and a file past the limit (a sparse 3 GiB one) is refused before it is read.
- `open_regular(path, flags)`: the one way promptlab opens a file of its own directories to write (sweep.lock,
  the cache's heal lock): never through a link, never blocking on a FIFO; anything but a regular file is
  refused by name.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from .errors import ConfigError

MAX_FILE_BYTES = 64 * 2**20
"""Largest experiment, task or examples file read (a bigger one is refused, not read)."""
MAX_YAML_NODES = 200_000
"""Most YAML nodes a document may stand for once its aliases are expanded (a real experiment file has hundreds)."""
EXCERPT_CHARS = 60
"""Most characters of bad input a message quotes (`excerpt`)."""
MAX_MESSAGE_CHARS = 900
"""Most characters of a message about bad input (`bounded`): under 1 KiB once encoded, whatever the input was."""


class RefusedFile(ValueError):
    """A file promptlab will not read: not a regular file (a FIFO, a device, a symbolic link), or too large."""


def read_bounded(path: str | os.PathLike[str], limit: int, what: str = "file", *, follow_links: bool = False) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, opened without following a symbolic link (unless
    `follow_links`: a file the user names may be a link) and without blocking (a FIFO never holds the reader up).

    Raises:
        RefusedFile: the path is a symbolic link (without `follow_links`), a FIFO, a device, a socket or a
            directory, or holds more than `limit` bytes.
        FileNotFoundError: there is nothing there.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:  # O_NOFOLLOW met a link
            raise RefusedFile(f"{path}: the {what} is a symbolic link; refused, not followed") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RefusedFile(f"{path}: the {what} is not a regular file ({_kind(st.st_mode)}); refused, not read")
        if st.st_size > limit:
            raise RefusedFile(f"{path}: the {what} is {st.st_size} bytes, over the {limit}-byte limit; refused")
        chunks, got = [], 0
        while got <= limit and (chunk := os.read(fd, min(1 << 20, limit + 1 - got))):
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:  # grew while being read
            raise RefusedFile(f"{path}: the {what} is over the {limit}-byte limit; refused")
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_regular(path: str | os.PathLike[str], flags: int, what: str = "file") -> int:
    """A file descriptor on a regular file promptlab keeps in its own directory (a lock file, a counter), opened
    with `flags` (os.O_WRONLY | os.O_CREAT...) without following a symbolic link and without blocking: so nothing
    is written through a link out of the directory and a FIFO put there never holds a process up.

    Raises:
        RefusedFile: the path is a symbolic link, a FIFO, a device, a socket or a directory (naming it).
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise RefusedFile(f"{path}: the {what} is a symbolic link; refused, not followed") from None
        if e.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO without a reader (write-only), a directory
            raise RefusedFile(f"{path}: the {what} is not a regular file; refused") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise RefusedFile(f"{path}: the {what} is not a regular file ({_kind(mode)}); refused")
    return fd


def write_regular(path: str | os.PathLike[str], text: str, what: str = "file") -> None:
    """Write `text` over a file of promptlab's own directory through `open_regular` (never through a link).

    Raises:
        RefusedFile: the path is a symbolic link or not a regular file.
    """
    with os.fdopen(open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, what), "w", encoding="utf-8") as f:
        f.write(text)


def _kind(mode: int) -> str:
    kinds = [(stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")]
    kinds += [(stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")]
    return next((name for test, name in kinds if test(mode)), "a special file")


class NotYamlError(ConfigError):
    """A text that is not valid YAML; the message names where it came from."""


def read_text(path: str | os.PathLike[str], what: str = "file") -> str:
    """The UTF-8 text of a file the user names (a symbolic link to a regular file is followed).

    Raises:
        ConfigError: the file is not a regular file (a FIFO, a device, /dev/zero through a link, a directory),
            is over `MAX_FILE_BYTES`, or holds bytes that are not UTF-8 (naming the file, line and column of
            the first one).
        FileNotFoundError: there is nothing there.
    """
    p = Path(path)
    try:
        data = read_bounded(p, MAX_FILE_BYTES, what, follow_links=True)
    except RefusedFile as e:
        raise ConfigError(str(e)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        start = e.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)  # utf-8-sig counts after the mark
        line = data.count(b"\n", 0, start) + 1
        column = start - (data.rfind(b"\n", 0, start) + 1) + 1
        raise ConfigError(
            f"{p}:{line}:{column}: the {what} is not UTF-8 text (byte 0x{data[start]:02x} at "
            f"line {line}, column {column}); save it as UTF-8"
        ) from None


def load_yaml(text: str, source: str) -> Any:
    """`yaml.safe_load(text)`, refusing a document that stands for more than `MAX_YAML_NODES` nodes.

    Raises:
        ConfigError: the document is too big once its aliases are expanded (naming `source`, the field and
            its line).
        NotYamlError: the text is not valid YAML (naming `source`).
    """
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node, source)
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        raise NotYamlError(f"{source}: not valid YAML: {e}") from None
    except RecursionError:
        raise ConfigError(f"{source}: nested too deep to read (past Python's recursion limit); refused") from None
    finally:
        loader.dispose()


def excerpt(text: str | bytes, limit: int = EXCERPT_CHARS) -> str:
    """A short quote of bad input for a message: its first `limit` characters as a Python literal (control
    characters escaped), then its length when it is longer."""
    if isinstance(text, bytes):
        size, text = len(text), text[: 4 * limit].decode("utf-8", errors="replace")
        unit = "bytes"
    else:
        size, unit = len(text), "characters"
    if size <= limit and len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({size:,} {unit})"


def bounded(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`message` cut to `limit` characters, saying how much was left out: what promptlab prints or logs about
    bad input stays short whatever the input holds."""
    if len(message) <= limit:
        return message
    return f"{message[: limit - 40]}... [{len(message) - limit + 40:,} more characters]"


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSONL text: split on "\n" only (a trailing "\r" dropped), never on U+2028, U+0085 or the
    other line breaks `str.splitlines` knows, which are valid inside a JSON string."""
    return [line.removesuffix("\r") for line in text.split("\n")]


class _Cycle(Exception):
    """An alias that refers to a node holding it."""

    def __init__(self, node: Any) -> None:
        self.node = node


def _check_size(root: Any, source: str) -> None:
    sizes: dict[int, int] = {}
    try:
        total = _size(root, sizes)
    except _Cycle as e:
        raise ConfigError(
            f"{source}:{e.node.start_mark.line + 1}: a YAML alias refers to a node that holds it (a circular "
            "reference); refused"
        ) from None
    except _Duplicate as e:
        raise ConfigError(f"{source}:{e.line}: the key {e.key!r} is given twice in one mapping") from None
    if total <= MAX_YAML_NODES:
        return
    path, node = _where(root, sizes)
    raise ConfigError(
        f"{source}:{node.start_mark.line + 1}: {path or 'the document'} stands for "
        f"{_size(node, sizes):,} YAML nodes once its aliases are expanded, over the limit of "
        f"{MAX_YAML_NODES:,} (a YAML alias bomb?); refused before it was built"
    )


def _size(node: Any, sizes: dict[int, int]) -> int:
    """Nodes under `node`, every alias counted as what it stands for (memoised: linear in the graph's size)."""
    known = sizes.get(id(node))
    if known is not None:
        if known < 0:  # still being measured: this node holds itself
            raise _Cycle(node)
        return known
    sizes[id(node)] = -1
    total = 1
    if isinstance(node.value, list) and node.value and isinstance(node.value[0], tuple):
        _no_duplicates(node.value)
    if isinstance(node.value, list):
        for item in node.value:
            if isinstance(item, tuple):  # a mapping's (key, value)
                total += _size(item[0], sizes) + _size(item[1], sizes)
            else:
                total += _size(item, sizes)
    sizes[id(node)] = total
    return total


class _Duplicate(Exception):
    def __init__(self, key: str, line: int) -> None:
        self.key, self.line = key, line


def _no_duplicates(pairs: list[tuple[Any, Any]]) -> None:
    """Refuse a mapping that gives one scalar key twice (YAML forbids it; PyYAML would keep the last)."""
    seen: set[str] = set()
    for key, _ in pairs:
        value = getattr(key, "value", None)
        if not isinstance(value, str) or value == "<<":  # merge keys may repeat
            continue
        if value in seen:
            raise _Duplicate(value, key.start_mark.line + 1)
        seen.add(value)


def _where(node: Any, sizes: dict[int, int]) -> tuple[str, Any]:
    """The path ('models.judge.params') and node of the first entry that passes the limit on its own, going
    down through the biggest child while it does."""
    import yaml

    path = ""
    while isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        children = (
            [(f"{path}.{k.value}" if path else str(k.value), v) for k, v in node.value]
            if isinstance(node, yaml.MappingNode)
            else [(f"{path}[{i}]", v) for i, v in enumerate(node.value)]
        )
        big = [(p, v) for p, v in children if _size(v, sizes) > MAX_YAML_NODES]
        if not big:
            break
        path, node = big[0]
    return path, node


__all__ = [
    "MAX_FILE_BYTES",
    "MAX_YAML_NODES",
    "NotYamlError",
    "EXCERPT_CHARS",
    "MAX_MESSAGE_CHARS",
    "RefusedFile",
    "bounded",
    "excerpt",
    "jsonl_lines",
    "load_yaml",
    "open_regular",
    "read_bounded",
    "read_text",
    "write_regular",
]
