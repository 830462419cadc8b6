"""``read_regular`` reads by the file's size (not the 20 MB limit) and still sees a file that
holds more than its size said, up to the limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from astro_jupyter.agent.tools.filesystem.regular import FileTooLarge, read_regular


def test_reads_whole_files_and_refuses_those_over_the_limit(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_bytes(b"x" * 1000)
    assert read_regular(target, 20_000_000) == b"x" * 1000
    assert read_regular(target, 1000) == b"x" * 1000
    with pytest.raises(FileTooLarge):
        read_regular(target, 999)
    assert read_regular(target) == b"x" * 1000


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
def test_a_file_larger_than_its_stat_size_is_read_whole_or_refused() -> None:
    # /proc files are regular files whose stat size is 0 while they hold text: like a file growing
    data = read_regular("/proc/self/status", 1_000_000)
    assert data.startswith(b"Name:") and b"\nPid:" in data and len(data) > 200
    with pytest.raises(FileTooLarge):
        read_regular("/proc/self/status", 100)
