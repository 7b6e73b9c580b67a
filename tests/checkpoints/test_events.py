"""The checkpoint events read back as written: a restore's step that removes a file
(``blob`` None, which the wire form leaves out) included."""

from __future__ import annotations

from dsh.session import FileWrite, RestoreStarted


def test_a_restore_that_removes_a_file_reads_back_as_written() -> None:
    started = RestoreStarted(
        restore_id="r1",
        purpose="rewind",
        turn=1,
        target="c1",
        writes=(
            FileWrite(path="made.txt", blob=None, expect="a" * 40),
            FileWrite(path="kept.txt", blob="b" * 40, mode=0o100644, expect="c" * 40),
        ),
    )
    written = started.to_dict()
    assert "blob" not in written["writes"][0]
    assert RestoreStarted.model_validate(written) == started
