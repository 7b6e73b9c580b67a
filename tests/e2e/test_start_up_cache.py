"""A front end keeps the code it compiled at start-up for the next launch
(dsh.code_cache): ``dsh -p`` leaves the cache in ``$DSH_HOME/cache/``, and a
second launch finds in it all it needs (it compiles nothing new, so writes nothing)."""

from __future__ import annotations

from dsh.code_cache import cache_file
from dsh.testing import FakeLLM, Reply
from tests.e2e.harness import Dsh


async def test_a_second_launch_finds_all_the_code_it_compiled_in_the_cache(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="First."), Reply(text="Second."))
    path = cache_file(dsh.home)

    first = await dsh.run("-p", "hello")
    assert first.code == 0, first.stderr
    assert first.stdout == "First.\n"
    written = path.stat()

    second = await dsh.run("-p", "hello again")
    assert second.code == 0, second.stderr
    assert second.stdout == "Second.\n"
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
