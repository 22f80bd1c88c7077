"""The peer of `store/*` in `cargo xtask bench`: LangGraph's checkpointers saving one
checkpoint per step (`put`), the durability cost a LangGraph run pays per step.

Usage: langgraph_put.py sqlite PATH N | langgraph_put.py postgres URL N
Prints one JSON object: {"ns_per_put", "puts", "get_p50_ns", "get_p99_ns"}: the mean time of
one `put`, and the median and 99th percentile of `get_tuple` (loading the latest checkpoint,
what a resume does first).
"""

import json
import sys
import time

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6


def run(saver, n):
    config = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    # Warm up: tables, prepared statements, the connection.
    for _ in range(20):
        cp = empty_checkpoint()
        cp["id"] = str(uuid6())
        config = saver.put(config, cp, {"source": "loop", "step": -1, "parents": {}}, {})
    start = time.perf_counter_ns()
    for step in range(n):
        cp = empty_checkpoint()
        cp["id"] = str(uuid6())
        cp["channel_values"] = {"messages": [f"step {step}"]}
        cp["channel_versions"] = {"messages": step + 1}
        config = saver.put(
            config,
            cp,
            {"source": "loop", "step": step, "parents": {}},
            {"messages": step + 1},
        )
    per_put = (time.perf_counter_ns() - start) / n
    gets = []
    for _ in range(200):
        t = time.perf_counter_ns()
        saver.get_tuple({"configurable": {"thread_id": "bench", "checkpoint_ns": ""}})
        gets.append(time.perf_counter_ns() - t)
    gets.sort()
    return {
        "ns_per_put": per_put,
        "puts": n,
        "get_p50_ns": gets[len(gets) // 2],
        "get_p99_ns": gets[int(len(gets) * 0.99)],
    }


def main():
    kind, where, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if kind == "sqlite":
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(where, check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()
        out = run(saver, n)
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(where) as saver:
            saver.setup()
            out = run(saver, n)
    print(json.dumps(out))


main()
