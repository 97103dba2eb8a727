"""A spending cap for a sweep: a ledger of what paid requests cost, shared by every process of the sweep.

More in docs/calls.md, section "promptlab.llm.spending.cap".
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...errors import ConfigError, SpendingCapExceeded
from ...reading import RefusedFile, read_bounded
from ..providers.aliases import MAX_PRICE_PER_MILLION
from ..providers.litellm_lazy import litellm
from ..providers.resolved import ResolvedModel
from .ledger import keep_room, write_whole

log = logging.getLogger("promptlab.llm.spending")
ENV_MAX_COST = "PROMPTLAB_MAX_COST"
"""Environment variable holding the cap in USD, for processes a sweep starts."""
ENV_LEDGER_FILE = "PROMPTLAB_SPENDING_LEDGER"
"""Environment variable holding the ledger's path, for processes a sweep starts."""


MAX_LEDGER_BYTES = 16 * 2**20
"""Largest spending.json read (it holds a total per model: kilobytes); a bigger one, or one that is not a regular
file, is refused by name."""


class Ledger(BaseModel):
    """What the paid requests of one results dir cost, as `spending.json` holds it."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    """Format version."""
    spent_usd: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    """USD paid by requests that reached a provider (cache hits and replays add nothing)."""
    requests: int = Field(default=0, ge=0)
    """Paid requests counted."""
    by_model: dict[str, Annotated[float, Field(ge=0.0, allow_inf_nan=False)]] = Field(default_factory=dict)
    """USD paid per model name."""
    estimated_usd: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    """The part of `spent_usd` that was estimated: replies whose cost was unknown (`SpendingCap.charge`)."""
    estimated_requests: int = Field(default=0, ge=0)
    """Paid requests whose cost was estimated."""


@dataclass(frozen=True)
class TokenPrice:
    """A model's price in USD per token."""

    input: float
    output: float


FREE = TokenPrice(0.0, 0.0)
_prices: dict[tuple[str, int], TokenPrice | None] = {}


def price_of(resolved: ResolvedModel) -> TokenPrice | None:
    """A resolved model's price per token: a model alias's own `price` (`promptlab.llm.providers.aliases`), else
    litellm's price map for the model (or the alias's target); FREE for in-process models; None if unknown.

    A price registered with litellm later grows its map and so is found (the lookup is cached per map size)."""
    if resolved.price is not None:
        return TokenPrice(resolved.price.input_per_million / 1e6, resolved.price.output_per_million / 1e6)
    if resolved.in_process:
        return FREE
    model = resolved.target
    lm = litellm()
    seen = (model, len(lm.model_cost))
    if seen not in _prices:
        try:
            info = lm.get_model_info(model=model)
            low, high = info.get("input_cost_per_token"), info.get("output_cost_per_token")
            _prices[seen] = None if low is None and high is None else table_price(resolved, low, high)
        except Exception:
            _prices[seen] = None
    return _prices[seen]


def table_price(resolved: ResolvedModel, low: Any, high: Any) -> TokenPrice | None:
    """A price map's entry for `resolved`'s target as a TokenPrice, bounded where it is read: a price that is not a
    number from 0 to `MAX_PRICE_PER_MILLION` per million tokens is not a price (None, unknown; logged, naming the
    model)."""
    try:
        price = TokenPrice(float(low or 0.0), float(high or 0.0))
    except (TypeError, ValueError):
        price = TokenPrice(math.nan, math.nan)
    bound = MAX_PRICE_PER_MILLION / 1e6
    if all(math.isfinite(p) and 0 <= p <= bound for p in (price.input, price.output)):
        return price
    log.warning(
        "promptlab: litellm's price map gives %s a price out of range (%.3g, %.3g USD a token); read as unknown",
        resolved.target, price.input, price.output,
    )  # fmt: skip
    return None


def check_prices(models: Iterable[ResolvedModel]) -> None:
    """Refuse, before any call, models whose cost a spending cap cannot track (their price is unknown).

    Raises:
        ConfigError: naming every such model (as it was called) and how to fix it.
    """
    unknown = list(dict.fromkeys(m.name for m in models if price_of(m) is None))
    if unknown:
        raise ConfigError(
            f"max_cost: the price of {', '.join(repr(m) for m in unknown)} is unknown, so spending on it cannot be "
            "capped; give it a price as a model alias (`models: {name: {model: ..., price: {input_per_million: ..., "
            "output_per_million: ...}}}` in the experiment file, or pl.register_model(name, model=..., "
            "price={...})) or run without max_cost"
        )


def _cap(value: Any, where: str) -> float:
    try:
        cap = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {value!r} is not a number of USD") from None
    if not math.isfinite(cap) or cap <= 0:
        raise ConfigError(f"{where}: {value!r} must be a positive number of USD")
    return cap


@dataclass
class Charges:
    """What the paid requests made in one context (a sweep cell, see `charges`) cost, as `SpendingCap.charge`
    counted them: runs that the cap stopped included, which no run record holds."""

    cost_usd: float = 0.0
    """USD charged."""
    requests: int = 0
    """Paid requests charged."""
    tokens: int = 0
    """Input plus output tokens of those requests."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(self, cost_usd: float, input_tokens: int | None, output_tokens: int | None) -> None:
        """Count one paid request."""
        with self._lock:
            self.cost_usd = round(self.cost_usd + cost_usd, 10)
            self.requests += 1
            self.tokens += (input_tokens or 0) + (output_tokens or 0)


@contextlib.contextmanager
def charges() -> Iterator[Charges]:
    """Count what every request charged to a spending cap in this context costs (tasks and threads started in it
    included); yields the running `Charges`."""
    counted = Charges()
    token = _CHARGES.set(counted)
    try:
        yield counted
    finally:
        _CHARGES.reset(token)


_ACTIVE: ContextVar[SpendingCap | None] = ContextVar("promptlab_spending_cap", default=None)
_REFUSED: ContextVar[list[SpendingCapExceeded] | None] = ContextVar("promptlab_spending_cap_refused", default=None)
_CHARGES: ContextVar[Charges | None] = ContextVar("promptlab_spending_cap_charges", default=None)
_thread_locks: dict[str, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


class SpendingCap:
    """A cap in USD on the ledger at `path`; `scope()` makes it the one the call path checks."""

    def __init__(self, path: str | os.PathLike[str], cap: float) -> None:
        self.path = Path(os.path.abspath(path))  # absolute, a link not resolved: it is refused, never followed
        self.cap = _cap(cap, "max_cost")
        with _thread_locks_guard:  # fcntl locks are per process: threads of one process take this one too
            self._thread_lock = _thread_locks.setdefault(str(self.path), threading.Lock())
        self._known: tuple[tuple[int, int, int], float] | None = None
        """(the ledger file's inode, size and mtime, its total) as last read."""
        self._dir_made = False
        self._room_kept = False

    def __repr__(self) -> str:
        return f"SpendingCap({str(self.path)!r}, cap={self.cap:g})"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SpendingCap | None:
        """The spending cap a sweep handed to this process (PROMPTLAB_MAX_COST, PROMPTLAB_SPENDING_LEDGER), or None."""
        env = os.environ if environ is None else environ
        raw, path = env.get(ENV_MAX_COST, "").strip(), env.get(ENV_LEDGER_FILE, "").strip()
        if not raw and not path:
            return None
        if not raw or not path:
            raise ConfigError(f"{ENV_MAX_COST} and {ENV_LEDGER_FILE} go together: set both or neither")
        return cls(path, _cap(raw, ENV_MAX_COST))

    def env(self) -> dict[str, str]:
        """The environment variables that hand this spending cap to another process (`from_env`)."""
        return {ENV_MAX_COST: repr(self.cap), ENV_LEDGER_FILE: str(self.path)}

    # the ledger --------------------------------------------------------------------------------------
    def ledger(self) -> Ledger:
        """The ledger as it is now (empty when none was written yet)."""
        try:
            text = read_bounded(self.path, MAX_LEDGER_BYTES, "spending ledger").decode("utf-8", errors="replace")
        except FileNotFoundError:
            return Ledger()
        except RefusedFile as e:
            raise ConfigError(f"{e}; delete it to count spending from zero") from None
        try:
            return Ledger.model_validate_json(text)
        except ValidationError as e:
            raise ConfigError(
                f"spending ledger {self.path} is unreadable ({e.error_count()} error(s)); "
                "delete it to count spending from zero"
            ) from None

    def spent(self) -> float:
        """USD paid so far: the ledger's total, re-read only when the file changed (every write replaces it
        with a new file, so its inode, size and mtime tell; a stat costs far less than a read)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return 0.0
        seen = (st.st_ino, st.st_size, st.st_mtime_ns)
        known = self._known  # one tuple, so a thread never pairs one file's identity with another's total
        if known is not None and known[0] == seen:
            return known[1]
        try:
            total = float(json.loads(read_bounded(self.path, MAX_LEDGER_BYTES, "spending ledger"))["spent_usd"])
            if not math.isfinite(total) or total < 0:  # a ledger that would switch the cap off: refused
                raise ValueError(total)
        except FileNotFoundError:  # replaced between the stat and the read: read the new one
            return self.spent()
        except (ValueError, KeyError, TypeError):  # RefusedFile is a ValueError too
            total = self.ledger().spent_usd  # raises the clear error
        self._known = (seen, total)
        return total

    def charge(
        self,
        model: ResolvedModel,
        cost_usd: float | None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        *,
        request: Mapping[str, Any] | None = None,
        reply_text: str = "",
    ) -> None:
        """Add one paid request for `model` to the ledger (under the lock), counted under the name it was called by.

        A cost that is unknown (no usage, usage that is not usage, an unknown price), negative or not finite is
        never counted as 0: it is estimated (`estimate`) from the request's input tokens and the reply's text,
        counted by litellm's tokenizer, at the model's price, and the ledger counts it as estimated."""
        estimated = cost_usd is None or not math.isfinite(cost_usd) or cost_usd < 0
        if estimated:
            cost_usd, input_tokens, output_tokens = estimate(model, request or {}, reply_text)
        assert cost_usd is not None
        if cost_usd <= 0 and price_of(model) == FREE:  # an in-process model (or an alias of one)
            return
        import fcntl

        if not self._dir_made:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._dir_made = True
        with self._thread_lock, open(self.path.with_name(f".{self.path.name}.lock"), "a") as lock:
            fcntl.lockf(lock, fcntl.LOCK_EX)
            try:
                led = self.ledger()
                led.spent_usd = round(led.spent_usd + cost_usd, 10)
                led.requests += 1
                led.by_model[model.name] = round(led.by_model.get(model.name, 0.0) + cost_usd, 10)
                if estimated:
                    led.estimated_usd = round(led.estimated_usd + cost_usd, 10)
                    led.estimated_requests += 1
                write_whole(self.path, led.model_dump_json(indent=1).encode())  # full disk: `ledger_file`
                if not self._room_kept:
                    keep_room(self.path)
                    self._room_kept = True
            finally:
                fcntl.lockf(lock, fcntl.LOCK_UN)
        counted = _CHARGES.get()
        if counted is not None:
            counted.add(cost_usd, input_tokens, output_tokens)

    # the check ---------------------------------------------------------------------------------------
    def check(self, model: ResolvedModel, request: Mapping[str, Any]) -> None:
        """Refuse a request for `model` (litellm keyword arguments) whose cost would pass the cap.

        Raises:
            SpendingCapExceeded: spent plus this request's estimated cost would pass the cap (recorded in the
                refusals of the current `scope`).
            ConfigError: the model's price is unknown.
        """
        price = price_of(model)
        if price is None:
            check_prices([model])
        assert price is not None
        if price == FREE:
            return
        spent = self.spent()
        out = float(request.get("max_tokens") or 0) * price.output
        if spent + out + _input_bound(request) * price.input <= self.cap:
            return
        estimate = out + _input_tokens(model, request) * price.input
        if spent < self.cap and spent + estimate <= self.cap:
            return
        refusal = SpendingCapExceeded(model.name, spent=spent, cap=self.cap, estimate=estimate)
        refused = _REFUSED.get()
        if refused is not None:
            refused.append(refusal)
        raise refusal

    @contextlib.contextmanager
    def scope(self) -> Iterator[list[SpendingCapExceeded]]:
        """Make this the spending cap of every call in this context (tasks started in it inherit it); yields the
        list of refusals made in the context, so the caller knows whether its work was cut."""
        refused: list[SpendingCapExceeded] = []
        tokens = _ACTIVE.set(self), _REFUSED.set(refused)
        try:
            yield refused
        finally:
            _REFUSED.reset(tokens[1])
            _ACTIVE.reset(tokens[0])


def _input_bound(request: Mapping[str, Any]) -> int:
    """An upper bound on the request's input tokens: the bytes of its JSON (a token is at least one byte)."""
    parts = [request.get("messages"), request.get("response_format"), request.get("tools")]
    return len(json.dumps(parts, default=str).encode("utf-8"))


def _input_tokens(model: ResolvedModel, request: Mapping[str, Any]) -> int:
    """The request's input tokens by litellm's tokenizer for the model it goes to (the upper bound when it
    cannot count)."""
    try:
        name = str(request.get("model") or model.target)
        return int(litellm().token_counter(model=name, messages=request.get("messages") or []))
    except Exception:
        return _input_bound(request)


def estimate(model: ResolvedModel, request: Mapping[str, Any], reply_text: str) -> tuple[float, int, int]:
    """The cost of a paid request whose cost is unknown: (USD, input tokens, output tokens), the tokens of the
    request and of the reply's text counted by litellm's tokenizer, at the model's price (0 when it has none:
    `check` refuses such a model under a cap before any call)."""
    price = price_of(model) or FREE
    name = str(request.get("model") or model.target)
    tokens_in = _input_tokens(model, request)
    try:
        tokens_out = int(litellm().token_counter(model=name, text=reply_text)) if reply_text else 0
    except Exception:
        tokens_out = len(reply_text.encode("utf-8"))  # a token is at least one byte: an upper bound
    return tokens_in * price.input + tokens_out * price.output, tokens_in, tokens_out


def gate(model: ResolvedModel, request: Mapping[str, Any]) -> SpendingCap | None:
    """Check a provider request for `model` against the active spending cap (None when none is active: no cost)."""
    current = _ACTIVE.get()
    if current is not None:
        current.check(model, request)
    return current


def active() -> SpendingCap | None:
    """The spending cap active in this context, if any."""
    return _ACTIVE.get()


__all__ = [
    "table_price",
    "ENV_LEDGER_FILE",
    "ENV_MAX_COST",
    "FREE",
    "SpendingCap",
    "Charges",
    "Ledger",
    "TokenPrice",
    "active",
    "charges",
    "check_prices",
    "estimate",
    "gate",
    "price_of",
]
