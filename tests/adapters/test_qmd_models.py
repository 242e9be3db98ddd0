"""Real vector search with a real sentence-embedding model: all-MiniLM-L6-v2 converted to GGUF by
.ci/setup.d/30-qmd-models.sh, loaded by the real qmd CLI (`qmd embed`) and queried through qmd's
own SDK (`createStore(...).searchVector(...)`, tests/support/qmd_models/vector_search.mjs).

The CLI's `qmd vsearch` is not used: it always expands the query with qmd's generate model first
(1.7 B, not installable here), so it cannot run with only an embedding model. searchVector is the
same vector path without the expansion; the CLI's typed `query -- 'vec: …' --no-rerank` also runs
with the embed model alone and is checked too.

qmd refuses model work when CI is set, so CI is removed from the qmd subprocesses' environment.
Skips only when the model file, qmd or Node 22 is absent (CI installs all three)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import zipfile
from pathlib import Path

import pytest

from ..support.qmd import QMD, needs_qmd

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / ".tools" / "models" / "all-MiniLM-L6-v2-f16.gguf"
MARKER = MODEL.with_name(MODEL.name + ".sha256")
MODELS_PYTHON = REPO / ".tools" / "models-venv" / "bin" / "python"
CONVERTER = REPO / ".ci" / "models" / "convert_minilm_gguf.py"
VECTOR_SEARCH = Path(__file__).resolve().parents[1] / "support" / "qmd_models" / "vector_search.mjs"

needs_model = pytest.mark.skipif(
    not MODEL.is_file(), reason=f"{MODEL} is absent: run `bash .ci/setup.d/30-qmd-models.sh` to build it"
)
needs_converter = pytest.mark.skipif(
    not MODELS_PYTHON.is_file(), reason=f"{MODELS_PYTHON} is absent: run `bash .ci/setup.d/30-qmd-models.sh`"
)

NOTES = {
    "api-errors.md": "# API error handling\n\nEvery endpoint of the API layer returns errors as a JSON body with a "
    "machine-readable code and a message. Exceptions raised in handlers are caught by the error middleware and "
    "mapped to HTTP status codes: validation failures become 400, missing resources 404, and unexpected failures "
    "500 with a request id for the logs.\n",
    "gardening.md": "# Gardening schedule\n\nWater the tomatoes every morning in summer. Prune the roses in March, "
    "plant garlic in October, and mulch the beds before the first frost.\n",
    "recipes.md": "# Sourdough recipe\n\nFeed the starter the night before. Mix flour, water and salt, fold four "
    "times, proof overnight in the fridge and bake at 250 degrees in a dutch oven.\n",
    "raft.md": "# Raft consensus\n\nRaft is a consensus algorithm for managing a replicated log. A leader is "
    "elected with randomized timeouts and followers replicate its entries.\n",
    "travel.md": "# Trip to Lisbon\n\nFlights booked for May. Hotel near Alfama, day trip to Sintra, try the "
    "pasteis de nata in Belem.\n",
    "meeting.md": "# Meeting 2024-03-01\n\nDiscussed the quarterly roadmap. Alice owns the database migration; Bob "
    "will benchmark the new storage layer. Deadline is April 15.\n",
    "fitness.md": "# Running plan\n\nThree easy runs a week, one long run on Sunday, and a rest day after every "
    "hard session. Increase weekly distance by ten percent at most.\n",
    "deploy.md": "# Deployment checklist\n\nTag the release, build the container image, run the migrations, then "
    "roll out to staging before production. Keep the previous image for rollback.\n",
    "books.md": "# Reading list\n\nFinish the history of Rome, then start the novel about the lighthouse keeper. "
    "Return the library books by Friday.\n",
    "music.md": "# Guitar practice\n\nPractice scales for ten minutes, then work on the fingerpicking pattern for "
    "the new song. Restring the guitar this weekend.\n",
}
CONCEPT_QUERY = "how does error handling work in the API layer"
# Queries that name a note's subject in other words (few or no shared keywords).
PARAPHRASES = {
    "how do exceptions become HTTP status codes": "api-errors.md",
    "leader election in distributed systems": "raft.md",
    "getting ready for a marathon": "fitness.md",
    "what music am I learning": "music.md",
}


def run_group(argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run argv in its own process group; on timeout kill the whole group and fail the test."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{argv[:3]} did not finish in {timeout} s")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A qmd index of NOTES in a scratch qmd home, embedded with the MiniLM GGUF."""
    assert QMD is not None
    base = tmp_path_factory.mktemp("qmdmodels")
    notes = base / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text)
    env = {key: value for key, value in os.environ.items() if key != "CI" and not key.startswith("QMD_")}
    env.update(
        INDEX_PATH=str(base / "index.sqlite"),
        QMD_CONFIG_DIR=str(base / "cfg"),
        XDG_CACHE_HOME=str(base / "cache"),
        HOME=str(base / "home"),
        QMD_EMBED_MODEL=str(MODEL),
    )
    qmd = list(QMD.argv_prefix)
    added = run_group([*qmd, "collection", "add", str(notes), "--name", "notes"], env=env, cwd=base, timeout=60)
    assert added.returncode == 0, added.stderr
    embedded = run_group([*qmd, "embed"], env=env, cwd=base, timeout=300)
    return {"base": base, "env": env, "embedded": embedded, "config": base / "cfg" / "index.yml"}


def vector_search(index: dict, *queries: str, limit: int = 10) -> list[list[dict]]:
    assert QMD is not None and QMD.node is not None
    package = QMD.qmd.parent.parent.parent  # .../@tobilu/qmd/dist/cli/qmd.js -> .../@tobilu/qmd
    argv = [str(QMD.node), str(VECTOR_SEARCH), str(package), index["env"]["INDEX_PATH"], str(index["config"])]
    done = run_group([*argv, str(limit), *queries], env=index["env"], cwd=index["base"], timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def names(rows: list[dict]) -> list[str]:
    return [row["file"].rsplit("/", 1)[-1] for row in rows]


@needs_model
@needs_qmd
def test_qmd_embed_uses_the_minilm_model_for_every_note(index: dict) -> None:
    embedded = index["embedded"]
    assert embedded.returncode == 0, embedded.stderr
    # qmd shows the model once, shortened with "..." when the path is long (it depends on where the
    # checkout lives); index.yml, below, holds it whole.
    shown = re.search(r"^Model: (.+?)\s*$", embedded.stdout, re.MULTILINE)
    assert shown, embedded.stdout
    model = shown.group(1)
    assert model == str(MODEL) or (model.endswith("...") and str(MODEL).startswith(model[:-3])), model
    assert f"Embedded {len(NOTES)} chunks from {len(NOTES)} documents" in embedded.stdout
    # The first CLI run writes the resolved models into index.yml; from then on that block wins.
    assert re.search(rf"^\s+embed: {re.escape(str(MODEL))}$", index["config"].read_text(), re.MULTILINE)


@needs_model
@needs_qmd
def test_concept_query_finds_the_error_handling_note(index: dict) -> None:
    [rows] = vector_search(index, CONCEPT_QUERY)
    ranked = names(rows)
    assert ranked[0] == "api-errors.md", rows
    scores = {name: row["score"] for name, row in zip(ranked, rows, strict=True)}
    assert scores["api-errors.md"] >= 0.4  # cosine: "usable" in the router's relevance scale
    assert scores["api-errors.md"] - rows[1]["score"] >= 0.2, rows  # a clear winner, not a near tie
    assert scores.get("gardening.md", 0.0) < 0.3, rows  # below qmd vsearch's default --min-score


@needs_model
@needs_qmd
def test_cli_typed_vec_query_without_rerank_needs_only_the_embed_model(index: dict) -> None:
    """The one CLI form that runs with just an embedding model: a typed `vec:` query skips the
    expansion (generate) model, `--no-rerank` the reranker; `--explain` carries the cosine."""
    assert QMD is not None
    argv = [*QMD.argv_prefix, "query", "--json", "-n", "3", "--no-rerank", "--explain", "--", f"vec: {CONCEPT_QUERY}"]
    done = run_group(argv, env=index["env"], cwd=index["base"], timeout=300)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert names(rows)[0] == "api-errors.md", rows
    cosines = [row["explain"]["vectorScores"][0] for row in rows]
    assert cosines[0] >= 0.4 and cosines[0] - cosines[1] >= 0.2, cosines
    assert [row["score"] for row in rows] == [1, 0.5, 0.33]  # without the reranker qmd's score is 1/rank


@needs_model
@needs_qmd
def test_paraphrased_queries_find_their_notes(index: dict) -> None:
    answers = vector_search(index, *PARAPHRASES, limit=3)
    found = {query: names(rows)[:1] for query, rows in zip(PARAPHRASES, answers, strict=True)}
    assert found == {query: [note] for query, note in PARAPHRASES.items()}, answers


@needs_model
@needs_converter
def test_converter_rebuilds_the_installed_model_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "again.gguf"
    done = run_group(
        [str(MODELS_PYTHON), str(CONVERTER), "--out", str(out)], env=dict(os.environ), cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    assert MARKER.read_text().split()[0] == digest == hashlib.sha256(MODEL.read_bytes()).hexdigest()


MINILM_CONFIG = {
    "model_type": "bert",
    "num_hidden_layers": 6,
    "max_position_embeddings": 512,
    "hidden_size": 384,
    "intermediate_size": 1536,
    "num_attention_heads": 12,
    "type_vocab_size": 2,
    "vocab_size": 30522,
    "layer_norm_eps": 1e-12,
}


@needs_converter
@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"model_type": "bert"}, ":config.json: field 'num_hidden_layers' is None, expected a number"),
        ({**MINILM_CONFIG, "hidden_size": "384"}, ":config.json: field 'hidden_size' is '384', expected a number"),
        ({**MINILM_CONFIG, "model_type": "gpt2"}, ":config.json: model_type is 'gpt2', expected 'bert'"),
        (MINILM_CONFIG, ": missing 'tokenizer.json' (is this the all-MiniLM-L6-v2 checkpoint?)"),
    ],
)
def test_converter_names_the_bad_input_and_writes_nothing(tmp_path: Path, config: dict, expected: str) -> None:
    source = tmp_path / "model.zip"
    with zipfile.ZipFile(source, "w") as archive:
        archive.writestr("config.json", json.dumps(config))
        archive.writestr("1_Pooling/config.json", json.dumps({"pooling_mode_mean_tokens": True}))
    out = tmp_path / "out.gguf"
    done = run_group(
        [str(MODELS_PYTHON), str(CONVERTER), "--source", str(source), "--out", str(out)],
        env=dict(os.environ),
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"convert_minilm_gguf: {source}{expected}\n"
    assert list(tmp_path.iterdir()) == [source]
