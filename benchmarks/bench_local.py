"""The embedded model at the hardware's limit: the batching engine (exact, the default) against the instance
pool, llama-cpp-python one sequence at a time, and a minimal batched greedy decode (issues #27, #50).

The workload is the demo's evaluation: for each task of data/grounded_tasks.jsonl, `--candidates` candidate
prompts (the task's own prompt, then variants) x its 20 dev examples, 32-token replies, greedy, two
evaluations at once (`evaluate_prompt` with its defaults). Each side runs in a clean process of its own with
no other PROMPTLAB_* variable set (a notebook user's defaults), after a warm-up on another prompt:

- engine: promptlab's batching engine (`PROMPTLAB_LOCAL_ENGINE=batch`, the default: its replies are the
  pool's, alone or batched);
- pool: the instance pool (`PROMPTLAB_LOCAL_ENGINE=pool`, its defaults: one instance, all cores);
- llama-cpp: llama-cpp-python's `create_chat_completion`, one sequence after another, its default threads;
- minimal: a batched greedy decode written here (one context, one unified KV cache, llama.cpp's default
  attention; each candidate's shared prefix read once and copied to its examples' sequences with
  `llama_memory_seq_cp`; one `llama_decode` per step for all live sequences; argmax): the hardware's limit on
  this model, not exact (its replies depend on the batch).

CPU time is the side's own process plus, for the engine, its worker process. Printed: examples/s, CPU-s per
example (a grounded example: one reply) and per generated token, the ratios (targets: engine >= 0.9x the
minimal decode's examples per CPU-second (#50), >= 3x llama-cpp's; the pool's CPU-s per example over the
engine's), the replies identical to llama-cpp's and to the pool's, and each path's accuracy with its 95%
Wilson interval on each task.

Run: .venv/bin/python benchmarks/bench_local.py [--candidates 2] [--sides engine,pool,llama-cpp,minimal]
     [--threads 1,2  (the engine again with each worker thread count, for choosing the default)]
     [--save DIR  (each side's result kept there and reused: a run on a busy machine can be resumed)]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "data" / "grounded_tasks.jsonl"
MAX_TOKENS = 32
VARIANTS = [
    "{prompt}",
    "{goal}\n\n{prompt}",
    "Read carefully and answer briefly.\n\n{prompt}",
    "{goal} Answer with the result only.\n\n{prompt}",
]
WARMUP = "Reply with one word.\n\n{input}"


def workload(candidates: int) -> list[dict[str, Any]]:
    """Evaluations: each {task, prompt, examples (input text, target)}, in the order they are run."""
    from promptlab.eval.tasks import examples_of, read_tasks

    out = []
    for task in read_tasks(TASKS):
        dev = examples_of(task, "dev")
        for v in VARIANTS[:candidates]:
            prompt = v.format(prompt=task.prompt, goal=task.goal or "")
            out.append({"task": task.id, "prompt": prompt, "examples": dev})
    return out


def messages_of(prompt: str, example: Any) -> list[dict[str, Any]]:
    from promptlab.eval.tasks import format_prompt

    return [{"role": "user", "content": format_prompt(prompt, example.input)}]


def cpu_of(pid: int) -> float:
    """User + system CPU seconds of a process (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# sides (each in its own process) ----------------------------------------------------------------------------
def side_promptlab(evals: list[dict[str, Any]]) -> tuple[list[list[str]], list[int]]:
    """evaluate_prompt, two evaluations at once (engine or pool, as the environment says)."""
    import promptlab as pl

    async def one(e: dict[str, Any]) -> pl.EvalResult:
        return await pl.aevaluate_prompt(
            e["prompt"], e["examples"], model="local/smollm2", scorer="exact", max_tokens=MAX_TOKENS, cache=False
        )

    async def pairs() -> list[pl.EvalResult]:
        done: list[pl.EvalResult] = []
        for i in range(0, len(evals), 2):
            done += await asyncio.gather(*(one(e) for e in evals[i : i + 2]))
        return done

    results = asyncio.run(pairs())
    return [[r.output or "" for r in res.records] for res in results], [0]


def side_llama_cpp(evals: list[dict[str, Any]], llm: Any) -> tuple[list[list[str]], list[int]]:
    """llama-cpp-python's chat completion, one sequence after another."""
    outs, tokens = [], [0]
    for e in evals:
        got = []
        for ex in e["examples"]:
            r = llm.create_chat_completion(
                messages=messages_of(e["prompt"], ex), temperature=0.0, max_tokens=MAX_TOKENS, seed=0
            )
            got.append(r["choices"][0]["message"]["content"] or "")
            tokens[0] += r["usage"]["completion_tokens"]
        outs.append(got)
    return outs, tokens


class Minimal:
    """A minimal batched greedy decode: one context, shared prefixes copied, one decode per step."""

    def __init__(self, path: str, n_seq: int) -> None:
        import llama_cpp as lib
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.lib = lib
        self.vocab_llm = lib.Llama(model_path=path, vocab_only=True, verbose=False)
        v = self.vocab_llm
        eos = v.detokenize([v.token_eos()], special=True).decode()
        bos = v.detokenize([v.token_bos()], special=True).decode()
        self.fmt = Jinja2ChatFormatter(v.metadata["tokenizer.chat_template"], eos_token=eos, bos_token=bos)
        self.model = lib.llama_model_load_from_file(path.encode(), lib.llama_model_default_params())
        cp = lib.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = 16384, 512, 512, n_seq
        cp.n_threads = cp.n_threads_batch = 1
        cp.kv_unified = True
        self.ctx = lib.llama_init_from_model(self.model, cp)
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.n_vocab = lib.llama_vocab_n_tokens(self.vocab)
        self.batch = lib.llama_batch_init(512, 0, 1)
        self.mem = lib.llama_get_memory(self.ctx)

    def tokens(self, messages: list[dict[str, Any]]) -> list[int]:
        r = self.fmt(messages=messages)
        return list(self.vocab_llm.tokenize(r.prompt.encode(), add_bos=not r.added_special, special=True))

    def decode(self, rows: list[tuple[int, int, int, bool]]) -> None:
        """Decode (token, pos, seq, logits) rows, in batches of 512; logits rows must be in the last batch."""
        lib, b = self.lib, self.batch
        for start in range(0, len(rows), 512):
            chunk = rows[start : start + 512]
            for i, (tok, pos, seq, want) in enumerate(chunk):
                b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = tok, pos, 1, want
                b.seq_id[i][0] = seq
            b.n_tokens = len(chunk)
            assert lib.llama_decode(self.ctx, b) == 0

    def run(self, groups: list[list[list[int]]]) -> list[list[int]]:
        """Greedy replies for groups of prompts (each group shares a prefix), all decoded together."""
        import numpy as np

        lib = self.lib
        lib.llama_memory_clear(self.mem, True)
        prompts = [p for g in groups for p in g]
        seqs, start, rows = [], 0, []
        for g in groups:
            common = min(len(p) for p in g) - 1
            for k in range(common):
                if any(p[k] != g[0][k] for p in g):
                    common = k
                    break
            self.decode([(t, i, start, False) for i, t in enumerate(g[0][:common])])
            for j in range(1, len(g)):
                lib.llama_memory_seq_cp(self.mem, start, start + j, 0, common)
            seqs += list(range(start, start + len(g)))
            rows += [(t, common + i, start + j, False) for j, p in enumerate(g) for i, t in enumerate(p[common:])]
            start += len(g)
        # every prompt's last token is decoded in one final batch, which gives each sequence's first logits
        last = {s: r for r, (_, _, s, _) in enumerate(rows)}
        self.decode([row for r, row in enumerate(rows) if r not in set(last.values())])
        tail = [(rows[last[s]][0], rows[last[s]][1], s, True) for s in seqs]
        self.decode(tail)
        out: list[list[int]] = [[] for _ in prompts]
        pos = {s: len(prompts[s]) for s in seqs}
        live = [r[2] for r in tail]
        while live:
            nxt, still = [], []
            for i, s in enumerate(live):
                logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,))
                tok = int(logits.argmax())
                if lib.llama_vocab_is_eog(self.vocab, tok):
                    continue
                out[s].append(tok)
                if len(out[s]) >= MAX_TOKENS:
                    continue
                nxt.append((tok, pos[s], s, True))
                pos[s] += 1
                still.append(s)
            if nxt:
                self.decode(nxt)
            live = still
        return out

    def text(self, tokens: list[int]) -> str:
        return self.vocab_llm.detokenize(tokens).decode("utf-8", errors="ignore")


def side_minimal(evals: list[dict[str, Any]], m: Minimal) -> tuple[list[list[str]], list[int]]:
    outs, tokens = [], [0]
    for i in range(0, len(evals), 2):
        pair = evals[i : i + 2]
        groups = [[m.tokens(messages_of(e["prompt"], ex)) for ex in e["examples"]] for e in pair]
        replies = m.run(groups)
        tokens[0] += sum(len(r) for r in replies)
        k = 0
        for g in groups:
            outs.append([m.text(r) for r in replies[k : k + len(g)]])
            k += len(g)
    return outs, tokens


def run_side(name: str, candidates: int) -> dict[str, Any]:
    """Run one side in this process: warm up, then measure the workload (wall, CPU, outputs)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from promptlab.eval.tasks import examples_of, read_tasks
    from promptlab.llm.local import engine
    from promptlab.llm.local import pool as local

    evals = workload(candidates)
    warm = [{"task": "warm", "prompt": WARMUP, "examples": examples_of(read_tasks(TASKS)[0], "test")[:4]}] * 2
    path = str(local.resolve_model_path("smollm2"))
    if name == "llama-cpp":
        from llama_cpp import Llama

        llm = Llama(model_path=path, n_ctx=4096, verbose=False)  # its own defaults otherwise
        fn = lambda e: side_llama_cpp(e, llm)  # noqa: E731
    elif name == "minimal":
        m = Minimal(path, 48)
        fn = lambda e: side_minimal(e, m)  # noqa: E731
    else:
        fn = side_promptlab
    fn(warm)
    workers = [e.proc.pid for e in engine.running().values()]
    own0, work0, t0 = time.process_time(), sum(cpu_of(p) for p in workers), time.perf_counter()
    outs, tokens = fn(evals)
    wall = time.perf_counter() - t0
    caller, worker = time.process_time() - own0, sum(cpu_of(p) for p in workers) - work0
    cpu = caller + worker
    stats = {str(p): e.stats() for p, e in engine.running().items()}
    if name in ("engine", "pool"):
        tokens = [_count_tokens(outs)]
    return {
        "side": name,
        "wall": wall,
        "cpu": cpu,
        "cpu_caller": caller,
        "cpu_worker": worker,
        "engine_stats": stats,
        "tokens": tokens[0],
        "outputs": outs,
    }


def _count_tokens(outs: list[list[str]]) -> int:
    from llama_cpp import Llama

    from promptlab.llm.local import pool as local

    v = Llama(model_path=str(local.resolve_model_path("smollm2")), vocab_only=True, verbose=False)
    return sum(len(v.tokenize(t.encode(), add_bos=False, special=True)) for o in outs for t in o)


# the report -------------------------------------------------------------------------------------------------
def accuracy(evals: list[dict[str, Any]], outs: list[list[str]]) -> dict[str, tuple[float, float, float]]:
    """Per task: (accuracy, CI low, CI high) of the replies, by the task's own scorer."""
    from promptlab.eval.stats import mean_ci
    from promptlab.eval.tasks import read_tasks, task_scorer

    scorers = {t.id: task_scorer(t) for t in read_tasks(TASKS)}
    values: dict[str, list[float]] = {}
    for e, o in zip(evals, outs, strict=True):
        for ex, text in zip(e["examples"], o, strict=True):
            try:
                v = float(scorers[e["task"]].score_example(text, ex).value)
            except Exception:
                v = 0.0
            values.setdefault(e["task"], []).append(v)
    out = {}
    for task, vs in values.items():
        mean, _, low, high = mean_ci(vs)
        out[task] = (mean or 0.0, low or 0.0, high or 0.0)
    return out


def report(results: dict[str, dict[str, Any]], candidates: int) -> None:
    evals = workload(candidates)
    n = sum(len(e["examples"]) for e in evals)
    print(
        f"workload: {len(evals)} evaluations ({candidates} candidates x 3 tasks) x 20 dev examples = {n} replies, "
        f"max_tokens={MAX_TOKENS}, two evaluations at once; cores: {os.cpu_count()}; "
        f"load average: {os.getloadavg()[0]:.1f} (the machine is shared: figures are noisy; ratios are same-run)"
    )
    rate = {}
    for name, r in results.items():
        rate[name] = n / r["cpu"]
        print(
            f"  {name:10s} {n / r['wall']:6.2f} examples/s  {r['cpu'] / n:6.3f} CPU-s/example  "
            f"{1000 * r['cpu'] / max(r['tokens'], 1):6.1f} CPU-ms/token  ({r['tokens']} tokens, {r['wall']:.1f}s wall, "
            f"{r['cpu']:.1f} CPU-s)"
        )
        if r.get("engine_stats"):
            print(
                f"             caller {r['cpu_caller']:.1f} + worker {r['cpu_worker']:.1f} CPU-s; {r['engine_stats']}"
            )
    if "engine" in rate:
        for other, target in (("pool", 1.0), ("llama-cpp", 3.0), ("minimal", 0.9)):
            if other in rate:
                ratio = rate["engine"] / rate[other]
                verdict = "PASS" if ratio >= target else "FAIL"
                print(f"  engine / {other}: {ratio:.2f}x examples per CPU-second (target >= {target}) -> {verdict}")
    if "engine" in results and "pool" in results:
        e, p = results["engine"], results["pool"]
        same = sum(a == b for x, y in zip(e["outputs"], p["outputs"], strict=True) for a, b in zip(x, y, strict=True))
        print(
            f"  CPU-s per grounded example: pool {p['cpu'] / n:.3f}, engine {e['cpu'] / n:.3f} "
            f"(engine / pool {e['cpu'] / p['cpu']:.2f}x); engine replies identical to the pool's: {same}/{n}"
        )
    base = results.get("llama-cpp")
    if base is not None and "engine" in results:
        ref, got = accuracy(evals, base["outputs"]), accuracy(evals, results["engine"]["outputs"])
        inside = {t: ref[t][1] <= got[t][0] <= ref[t][2] for t in ref}
        print(
            "  engine accuracy inside llama-cpp's 95% interval: "
            + ", ".join(f"{t} {'yes' if ok else 'NO'}" for t, ok in inside.items())
            + f" -> {'PASS' if all(inside.values()) else 'FAIL'}"
        )
    for name, r in results.items():
        line = f"  accuracy {name:10s}"
        for task, (acc, low, high) in accuracy(evals, r["outputs"]).items():
            line += f"  {task} {acc:.2f} [{low:.2f}, {high:.2f}]"
        if base is not None and name != "llama-cpp":
            same = sum(
                a == b for x, y in zip(r["outputs"], base["outputs"], strict=True) for a, b in zip(x, y, strict=True)
            )
            line += f"  identical to llama-cpp: {same}/{n}"
        print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", type=int, default=2)
    ap.add_argument("--sides", default="engine,pool,llama-cpp,minimal")
    ap.add_argument(
        "--threads", default="", help="also run the engine with these worker threads, e.g. 1,2 (sides engine@1t, ...)"
    )
    ap.add_argument("--save", help="keep each side's result in this directory, and reuse the ones found there")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:
        print(json.dumps(run_side(args.side, args.candidates)))
        return
    results = {}
    sides = args.sides.split(",") + [f"engine@{t}t" for t in args.threads.split(",") if t]
    for name in sides:
        kept = Path(args.save) / f"{name}-{args.candidates}.json" if args.save else None
        if kept is not None and kept.is_file():
            results[name] = json.loads(kept.read_text())
            continue
        env = {k: v for k, v in os.environ.items() if not k.startswith("PROMPTLAB_")}
        env["PROMPTLAB_LOCAL_ENGINE"] = "pool" if name == "pool" else "batch"
        if name.startswith("engine@"):
            env["PROMPTLAB_LOCAL_THREADS"] = name.split("@")[1].rstrip("t")
        side = "engine" if name.startswith("engine@") else name
        cmd = [sys.executable, __file__, "--side", side, "--candidates", str(args.candidates)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"  {name}: failed\n{done.stderr[-2000:]}")
            continue
        results[name] = {**json.loads(done.stdout.strip().splitlines()[-1]), "side": name}
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(json.dumps(results[name]))
        print(f"  ({name} done: {results[name]['wall']:.1f}s wall)", flush=True)
    report(results, args.candidates)


if __name__ == "__main__":
    main()
