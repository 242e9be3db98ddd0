"""Writing a whole answer to stdout (memory_router/output/outwrite.py): a non-blocking pipe with a slow
reader gets everything; a reader that takes nothing, or is gone, is an error, never a silent cut."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memory_router.output.outwrite import WriteStalled, write_all

DATA = bytes(range(256)) * 1200  # 300 KB: several times a pipe's 64 KiB


def test_a_slow_reader_of_a_nonblocking_pipe_gets_every_byte() -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    got = bytearray()

    def reader() -> None:
        time.sleep(0.3)  # idle first: the pipe fills and write() says EAGAIN
        while chunk := os.read(read_end, 4096):
            got.extend(chunk)
            time.sleep(0.001)

    thread = threading.Thread(target=reader)
    thread.start()
    calls = []
    write_all(write_end, DATA, stall_s=5, progress=lambda: calls.append(1))
    os.close(write_end)
    thread.join(10)
    os.close(read_end)
    assert bytes(got) == DATA and len(calls) >= 5


def test_a_reader_that_takes_nothing_is_given_up_after_the_stall_timeout() -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    started = time.monotonic()
    with pytest.raises(WriteStalled, match=r"took no data for 0.3 s \(65536 of 307200 bytes written\)"):
        write_all(write_end, DATA, stall_s=0.3)
    assert 0.3 <= time.monotonic() - started < 2
    os.close(read_end)
    os.close(write_end)


def test_a_reader_that_is_gone_is_a_broken_pipe_at_once() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    with pytest.raises(BrokenPipeError):
        write_all(write_end, DATA, stall_s=30)
    os.close(write_end)


@pytest.mark.slow
def test_query_exits_1_with_the_reason_when_its_reader_takes_nothing(tmp_path: Path) -> None:
    """The one-shot CLI's answer path, with the 30 s write timeout shortened to 0.5 s."""
    code = (
        "import sys, memory_router.output.outwrite as o; o.WRITE_TIMEOUT_S = 0.5\n"
        "from memory_router.cli.oneshot import write_json\n"
        "write_json(b'x' * 300_000)\n"
        "print('not reached', file=sys.stderr)\n"
    )
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    proc = subprocess.run([sys.executable, "-c", code], stdout=write_end, stderr=subprocess.PIPE, timeout=30)
    os.close(write_end)
    os.close(read_end)
    assert proc.returncode == 1
    assert proc.stderr.decode().strip() == (
        "memory-router: cannot write the answer to standard output: "
        "its reader took no data for 0.5 s (65536 of 300001 bytes written)"
    )
