"""Read by a type checker in test_hook_typing, never run: each line marked ``# refused``
must be an error, and nothing else may be."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from dsh.kernel import Chain, Context, First, Gather, Next, Notify

N: Notify[[int, str]] = Notify("typing-sample/n")
C: Chain[int, str] = Chain("typing-sample/c")
F: First[[int], str] = First("typing-sample/f")
G: Gather[[int], str] = Gather("typing-sample/g")


async def fitting(ctx: Context) -> None:
    def two(number: int, text: str) -> None: ...

    async def chain(number: int, next: Next[int, str]) -> str:
        return await next(number + 1)

    async def loose(number: int, next: Callable[[], Awaitable[str]]) -> str:
        return await next()

    async def untyped(number: Any, next: Callable[[], Awaitable[Any]]) -> Any:
        return await next()

    async def first(number: int) -> str | None:
        return None

    ctx.on(N, two)
    ctx.on(N, lambda number, text: None)
    ctx.on(N, print)
    ctx.on(C, chain)
    ctx.on(C, loose)
    ctx.on(C, untyped)
    ctx.on(F, first)
    ctx.on(G, lambda number: "x")
    ctx.emit(N, 1, "one")
    text: str = await ctx.waterfall(C, 1, default=str)
    answer: str | None = await ctx.serial(F, 1)
    answers: list[str] = await ctx.parallel(G, 1)
    print(text, answer, answers)


async def refused(ctx: Context) -> None:
    def takes_text(text: str) -> None: ...

    async def chain(number: int, next: Next[int, str]) -> int:
        return number

    ctx.on(N, takes_text)  # refused
    ctx.on(N, lambda number: None)  # refused
    ctx.on(C, chain)  # refused
    ctx.on("typing-sample/n", takes_text)  # refused
    ctx.emit(N, "one", 1)  # refused
    ctx.emit(C, 1)  # refused
    await ctx.serial(G, 1)  # refused
    await ctx.waterfall(C, "one", default=str)  # refused
