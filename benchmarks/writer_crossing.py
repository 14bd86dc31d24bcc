"""What the writer process (INFERENCE_WRITER=process) costs beside the chunk transactions themselves: its start
(a fresh interpreter importing the library, building its Runtime against the database, then exiting; CPU time of
the child, in a scratch database with the schema) and handing a chunk over (pickling an instant-engine chunk of
INFERENCE_CHUNK_SIZE results with 384-dim embeddings in the shard process, unpickling it in the writer; best of
five, µs per row). Prints one JSON line.

    python benchmarks/writer_crossing.py --pg-url postgresql://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import pickle
import time

from inference.bench.instant import instant_predictor
from inference.bench.rss import children_cpu_seconds
from inference.bench.scratchdb import scratch_database
from inference.config import settings_from_env
from inference.modelinfo import model_version
from inference.pipeline.infer_step import read_as
from inference.pipeline.writer_process import WriteProcess, WriterJob
from inference.records import TicketInput
from inference.store.db import make_engine
from inference.store.schema import create_schema
from inference.textprep import content_hash


def start_cost(pg_url: str, starts: int) -> dict:
    with scratch_database(pg_url, "inference_bench_writer") as url:
        engine = make_engine(url)
        create_schema(engine)
        engine.dispose()
        settings = settings_from_env(db_url=url)
        walls, cpus = [], []
        for _ in range(starts):
            cpu0, t0 = children_cpu_seconds(), time.perf_counter()
            job = WriterJob(settings, "bench", "v", "infer_shard", 0, dt.datetime.now(dt.UTC), True)
            WriteProcess(job, lambda written: None).close()
            walls.append(time.perf_counter() - t0)
            cpus.append(children_cpu_seconds() - cpu0)
    return {"starts": starts, "start_wall_s": round(min(walls), 3), "start_cpu_s": round(min(cpus), 3)}


def crossing_cost(rows: int) -> dict:
    settings = settings_from_env()
    predictor = instant_predictor(settings, model_version(settings))
    now = dt.datetime.now(dt.UTC)
    current = {}
    for i in range(rows):  # distinct outputs per row, as a real chunk has (no pickle memo sharing)
        current[str(i)] = TicketInput(str(i), now, content_hash(f"s{i}", f"b{i}"), f"text {i}", False, f"(1,{i})")
    prepared = predictor.prepare(list(current), current)
    outcome = predictor.run("bench", prepared)
    for k, result in enumerate(outcome.staged):
        result.outputs = {
            **result.outputs,
            "embedding": os.urandom(len(result.outputs["embedding"])),
            "summary": f"s{k}",
        }
    item = (1, outcome, read_as(prepared.tickets))
    dumps, loads = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
        t1 = time.perf_counter()
        pickle.loads(data)
        dumps.append(t1 - t0)
        loads.append(time.perf_counter() - t1)
    return {
        "rows": len(outcome.staged),
        "bytes_per_row": round(len(data) / len(outcome.staged)),
        "pickle_us_per_row": round(1e6 * min(dumps) / len(outcome.staged), 2),
        "unpickle_us_per_row": round(1e6 * min(loads) / len(outcome.staged), 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pg-url", required=True, help="admin URL of a PostgreSQL server (a scratch database is made)")
    p.add_argument("--starts", type=int, default=3)
    args = p.parse_args()
    rows = settings_from_env().chunk_size
    print(json.dumps({**start_cost(args.pg_url, args.starts), **crossing_cost(rows)}))


if __name__ == "__main__":
    main()
