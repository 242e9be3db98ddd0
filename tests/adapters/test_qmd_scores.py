"""qmd JSON -> contract results, and the documented per-mode relevance mapping."""

from __future__ import annotations

from collections.abc import Sequence

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_router.backends.qmd.parse import (
    QmdOutputError,
    clean_snippet,
    parse_hits,
    search_relevance,
    split_uri,
    to_results,
    vsearch_relevance,
)

SEARCH_OUTPUT = orjson.dumps(
    [
        {
            "docid": "#b8b489",
            "score": 0.39,
            "file": "qmd://notes/raft-consensus.md",
            "line": 1,
            "title": "Raft Consensus",
            "snippet": "@@ -1,3 @@ (0 before, 2 after)\n# Raft Consensus\n\nRaft is a consensus algorithm",
        },
        {
            "docid": "#3d1ab4",
            "score": 0.25,
            "file": "qmd://notes/meeting-2024-03-01.md",
            "line": 4,
            "title": "Meeting",
            "snippet": "@@ -3,3 @@ (2 before, 0 after)\nBob will\nbenchmark the new consensus layer.\n",
        },
    ]
)


def test_search_hits_become_contract_results() -> None:
    results = to_results(parse_hits(SEARCH_OUTPUT), "search", "qmd")
    top = results[0]
    assert top.content == "# Raft Consensus\n\nRaft is a consensus algorithm"
    assert (top.path, top.collection, top.line, top.title, top.docid) == (
        "raft-consensus.md",
        "notes",
        1,
        "Raft Consensus",
        "#b8b489",
    )
    assert top.source == "qmd" and top.relevance == 1.0 and top.qmd_score == 0.39
    # every hit holds all terms: 0.6 floor, +0.4 scaled by bm25 relative to the best hit
    assert results[1].relevance == pytest.approx(0.6 + 0.4 * 0.25 / 0.39, abs=1e-3)


def test_search_relevance_scales_with_coverage_of_a_relaxed_query() -> None:
    assert search_relevance(0.5, 0.5, coverage=1.0) == 1.0
    assert search_relevance(0.5, 0.5, coverage=0.5) == 0.5  # half the keywords: threshold region
    assert search_relevance(0.5, 0.5, coverage=1 / 3) < 0.4  # a third: weak
    assert search_relevance(0.0, 0.0) == 1.0  # big corpus: every score rounds to 0.00


def test_vsearch_relevance_maps_cosine_with_0_5_at_the_threshold() -> None:
    assert vsearch_relevance(0.3) == 0.0 and vsearch_relevance(0.5) == pytest.approx(0.4)
    assert vsearch_relevance(0.8) == 1.0 and vsearch_relevance(0.95) == 1.0


def _query_hit(
    score: float, rerank: float, weight: float, vec: Sequence[float] = (), fts: Sequence[float] = ()
) -> dict:
    return {
        "docid": "#a",
        "score": score,
        "file": "qmd://c/a.md",
        "line": 2,
        "title": "A",
        "snippet": "@@ -1,1 @@\nx",
        "explain": {
            "ftsScores": list(fts),
            "vectorScores": list(vec),
            "rerankScore": rerank,
            "rrf": {"rank": 1, "weight": weight},
            "blendedScore": score,
        },
    }


def test_query_uses_the_reranker_score_not_the_rank_blend() -> None:
    # top hit: 0.75 * 1/1 + 0.25 * 0.2 = 0.8 rank-blended, but the reranker says 0.2: weak
    [r] = to_results([_query_hit(0.8, 0.2, 0.75)], "query", "qmd", reranked=True)
    assert r.relevance == pytest.approx(0.2)


def test_query_without_reranking_uses_retrieval_evidence() -> None:
    hits = [_query_hit(1.0, 0.0, 1.0, vec=[0.62]), _query_hit(0.5, 0.0, 1.0, vec=[0.31])]
    strong, weak = to_results(hits, "query", "qmd", reranked=False)
    assert strong.relevance == pytest.approx(vsearch_relevance(0.62))
    assert weak.relevance < 0.4  # 1/rank said 0.5; its best evidence is cosine 0.31
    [fts_only] = to_results([_query_hit(1.0, 0.0, 1.0, fts=[0.4])], "query", "qmd")
    assert fts_only.relevance == 1.0


def test_query_without_explain_is_reported_weak() -> None:
    [r] = to_results([{"docid": "#a", "score": 1.0, "file": "qmd://c/a.md", "snippet": "x"}], "query", "qmd")
    assert r.relevance < 0.4


def test_http_mode_line_numbered_snippets_are_cleaned() -> None:
    assert clean_snippet("1: @@ -1,3 @@ (0 before, 2 after)\n2: # Raft\n3: text") == "# Raft\ntext"
    assert split_uri("qmd://notes/a/b.md") == ("notes", "a/b.md")
    assert split_uri("/abs/path.md") == (None, "/abs/path.md")


@pytest.mark.parametrize(
    "stdout, message",
    [
        (b"", "printed nothing"),
        (b"No results found.", "not JSON"),
        (b'{"a": 1}', "expected an array"),
        (b"[1, 2]", "other than hit objects"),
    ],
)
def test_unexpected_output_is_a_precise_error(stdout: bytes, message: str) -> None:
    with pytest.raises(QmdOutputError, match=message):
        parse_hits(stdout)


hit = st.fixed_dictionaries(
    {
        "score": st.one_of(
            st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5), st.none(), st.text(max_size=3)
        ),
        "file": st.one_of(st.text(max_size=30), st.just("qmd://c/x.md")),
        "snippet": st.text(max_size=200),
    },
    optional={
        "line": st.integers(0, 10**6),
        "title": st.text(max_size=20),
        "docid": st.text(max_size=8),
        "explain": st.fixed_dictionaries(
            {
                "rerankScore": st.floats(-2, 2),
                "vectorScores": st.lists(st.floats(-1, 2), max_size=3),
                "ftsScores": st.lists(st.floats(0, 1), max_size=3),
            }
        ),
    },
)


@given(st.lists(hit, max_size=8), st.sampled_from(["search", "vsearch", "query"]), st.floats(0.01, 1.0), st.booleans())
def test_relevance_is_always_within_0_and_1(hits: list[dict], mode: str, coverage: float, reranked: bool) -> None:
    for r in to_results(hits, mode, "qmd", coverage=coverage, reranked=reranked):
        assert 0.0 <= r.relevance <= 1.0 and "\n@@ " not in "\n" + r.content[:3]


def test_reranker_fallback_scores_are_not_taken_as_relevance() -> None:
    from memory_router.backends.qmd.parse import really_reranked

    real = [_query_hit(0.9, 0.83, 0.75), _query_hit(0.4, 0.2, 0.75)]
    fallback = [_query_hit(0.88, 0.5, 0.75), _query_hit(0.5, 0.5, 0.75)]  # qmd's "fallback" reranker
    skipped = [_query_hit(1.0, 0.0, 1.0)]  # --no-rerank: 1/rank only
    assert really_reranked(real, "")
    assert not really_reranked(real, "Reranker unavailable — skipping reranking (...)")
    assert not really_reranked(fallback, "") and not really_reranked(skipped, "")
