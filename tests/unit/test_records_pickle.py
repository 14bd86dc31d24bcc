"""What crosses to a writer process (INFERENCE_WRITER=process) comes back equal: the records' own pickling."""

from __future__ import annotations

import datetime as dt
import pickle

from inference.predictor import ChunkOutcome
from inference.records import Failure, FailureKind, SkipReason, SourceVersion, StagedResult

AT = dt.datetime(2026, 11, 30, 23, 59, 59, 999_999, tzinfo=dt.UTC)


def test_a_chunk_outcome_and_its_read_versions_survive_pickling_field_for_field():
    staged = [
        StagedResult("run-1", "0007", "a" * 64, AT, "v1", True, 256, AT, {"embedding": b"\x00\x01", "category": "x"}),
        StagedResult("run-1", "T/8", "b" * 64, AT.replace(tzinfo=None), "v1", False, 3, AT),
    ]
    outcome = ChunkOutcome(
        staged=staged,
        failures=[Failure("9", "c" * 64, FailureKind.MODEL_ERROR)],
        skipped={SkipReason.DELETED: ["10"]},
        real_tokens=259,
        padded_tokens=512,
        seconds=0.25,
        batch_sizes=[2],
    )
    as_read = {"0007": ("(16384,(0,1),736)", SourceVersion("a" * 64, AT))}
    back_outcome, back_read = pickle.loads(pickle.dumps((outcome, as_read), protocol=pickle.HIGHEST_PROTOCOL))
    assert back_outcome == outcome and back_read == as_read
    for mine, theirs in zip(staged, back_outcome.staged, strict=True):
        assert [getattr(theirs, f) for f in mine.__slots__] == [getattr(mine, f) for f in mine.__slots__]
    assert back_outcome.staged[1].outputs == {} and back_outcome.staged[1].outputs is not staged[1].outputs
