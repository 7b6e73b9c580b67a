"""The code compiled at start-up kept across launches (dsh.code_cache): a launch with
the cache makes the same dataclasses, resolves the same string annotations and matches
the same regular expressions as one without, from what the earlier launch compiled, and a damaged or foreign cache is
compiling as Python would.

Each launch is a new ``python`` (the cache is read once a process, before the imports
that use it); what is compared is behaviour and what was compiled, never a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from dsh.code_cache import cache_file

# No ``from __future__ import annotations`` here: the methods' annotations are the
# types themselves, as the dataclasses module's own exec leaves them.
PROBE = textwrap.dedent(
    r"""
    import collections, dataclasses, json, re, sys, typing
    from pathlib import Path

    from dsh import code_cache

    if sys.argv[1] == "cache":
        code_cache.install(Path(sys.argv[2]))
    compiled = []  # every text compiled from here on (exec of a str included)
    sys.addaudithook(lambda event, args: event == "compile" and compiled.append(args[1]))
    real_compile = re._compiler.compile if sys.argv[1] == "plain" else code_cache._compile_regex
    parsed = []  # every regular expression parsed from here on
    real_parse = re._parser.parse
    re._parser.parse = lambda *args: parsed.append(args[0]) or real_parse(*args)

    @dataclasses.dataclass(frozen=True, order=True, kw_only=True)
    class Point:
        x: int
        y: int = 2
        tags: tuple[str, ...] = dataclasses.field(default_factory=tuple)

    @dataclasses.dataclass(slots=True)
    class Box:
        content: Point | None = None

    p = Point(x=1, tags=("a",))
    try:
        p.x = 3
        frozen = False
    except dataclasses.FrozenInstanceError:
        frozen = True
    def where(point: "Point", boxes: "dict[str, list[Box]]") -> "Point | None": ...

    hints = {k: repr(v) for k, v in typing.get_type_hints(where).items()}
    word = re.compile(r"(?P<key>[a-z_]+)\s*=\s*(?P<value>\d+)", re.IGNORECASE)
    verbose = re.compile("(?x) ^ (\\w+)  # a name\n (?:\\.(\\w+))? $")
    data = re.compile(rb"[\x00-\x1f]+")
    made = {
        "match": word.match("Depth = 42").groupdict(),
        "flags": [int(word.flags), int(verbose.flags), int(data.flags)],
        "groups": [word.groups, verbose.groups, sorted(word.groupindex.items())],
        "verbose": verbose.match("dsh.run").groups(),
        "none": verbose.match("a b") is None,
        "bytes": data.sub(b"", b"a\x01b").decode(),
    }
    Pair = collections.namedtuple("Pair", "left right")
    pair = Pair(1, right=2)
    made["pair"] = [repr(pair), pair._asdict(), Pair._make([3, 4]).right]
    compiled_ok = len(compiled) + len(parsed)  # a text that does not compile is never kept
    try:
        typing.ForwardRef("1 +")
        bad = "accepted"
    except SyntaxError as error:
        bad = str(error)
    writer = code_cache.save()
    if writer is not None:
        writer.join()
    print(json.dumps({
        "repr": repr(Box(p)),
        "eq": Point(x=1, tags=("a",)) == p,
        "lt": Point(x=0) < p,
        "hash": hash(p) == hash(Point(x=1, tags=("a",))),
        "frozen": frozen,
        "annotations": {k: repr(v) for k, v in Point.__init__.__annotations__.items()},
        "slots": Box.__slots__,
        "compiled": compiled_ok,
        "hints": hints,
        "made": made,
        "bad": bad,
        "left": "exec" in vars(dataclasses)
        or "compile" in vars(typing)
        or "eval" in vars(collections)
        or re._compiler.compile is not real_compile,
    }))
    """
)


def launch(tmp_path: Path, *args: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_second_launch_makes_the_same_classes_and_hints_from_the_first_ones_code(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    plain = launch(tmp_path, "plain")
    first = launch(tmp_path, "cache", str(home))
    assert cache_file(home).is_file()
    assert cache_file(home).stat().st_mode & 0o777 == 0o600
    second = launch(tmp_path, "cache", str(home))
    assert first["compiled"]
    assert second["compiled"] == 0
    for run in (first, second):
        assert {k: v for k, v in run.items() if k != "compiled"} == {
            k: v for k, v in plain.items() if k != "compiled"
        }
    assert plain["annotations"] == {
        "x": "<class 'int'>",
        "y": "<class 'int'>",
        "tags": "tuple[str, ...]",
        "return": "None",
    }
    assert plain["frozen"]
    assert plain["eq"]
    assert plain["lt"]
    assert plain["hash"]
    assert plain["hints"] == {
        "point": "<class '__main__.Point'>",
        "boxes": "dict[str, list[__main__.Box]]",
        "return": "__main__.Point | None",
    }
    assert plain["made"] == {
        "match": {"key": "Depth", "value": "42"},
        "flags": [34, 96, 0],
        "groups": [2, 2, [["key", 1], ["value", 2]]],
        "verbose": ["dsh", "run"],
        "none": True,
        "bytes": "ab",
        "pair": ["Pair(left=1, right=2)", {"left": 1, "right": 2}, 4],
    }
    assert plain["bad"] == "Forward reference must be an expression -- got '1 +'"
    assert not first["left"]  # save() gave dataclasses and typing their own back


def test_a_damaged_or_foreign_cache_is_compiling_anew_then_written_whole(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    launch(tmp_path, "cache", str(home))
    path = cache_file(home)
    whole = path.read_bytes()
    for damaged in (whole[: len(whole) // 2], b"not a cache", whole[:10] + b"\0" * 50):
        path.write_bytes(damaged)
        again = launch(tmp_path, "cache", str(home))
        assert again["compiled"]
        assert again["frozen"]
        assert again["eq"]
        assert launch(tmp_path, "cache", str(home))["compiled"] == 0  # written whole again
    path.chmod(0o666)  # writable by others: not run
    assert launch(tmp_path, "cache", str(home))["compiled"]


def test_an_unknown_python_is_left_to_compile_as_usual(tmp_path: Path) -> None:
    """The cache stands in for internals of known versions only: on another, nothing
    of the standard library is replaced and nothing is written."""
    probe = textwrap.dedent(
        """
        import dataclasses, re, sys
        from pathlib import Path
        from dsh import code_cache

        sys.version_info = (3, 99, 0, "final", 0)
        before = re._compiler.compile
        code_cache.install(Path(sys.argv[1]))
        print(re._compiler.compile is before, "exec" in vars(dataclasses), code_cache.save())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert done.stdout.split() == ["True", "False", "None"]
    assert not cache_file(tmp_path).exists()
