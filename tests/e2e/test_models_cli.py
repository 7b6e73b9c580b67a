"""``dsh models`` and the default model, through the real binary against FakeLLM
(issue 21): the provider's ``/models`` merged with the DeepSeek plugin's facts."""

from __future__ import annotations

import json

from dsh.testing import FakeLLM, Reply
from tests.e2e.harness import Dsh


async def test_a_run_with_no_model_configured_sends_deepseek_flash(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="Hello."))

    done = await dsh.run("-p", "hi")

    assert done.code == 0, done.stderr
    assert [request.body["model"] for request in fake_llm.requests] == ["deepseek-flash"]


async def test_dsh_models_lists_the_served_models_with_their_facts(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.script.models.append("deepseek-experimental")  # served, not known

    done = await dsh.run("models", "--json")

    assert done.code == 0, done.stderr
    listed = {entry["id"]: entry for entry in json.loads(done.stdout)}
    flash = listed["deepseek-flash"]
    assert flash["name"] == "DeepSeek V4.1 Flash"
    assert (flash["contextWindow"], flash["maxOutputTokens"], flash["vision"]) == (
        1_000_000,
        384_000,
        True,
    )
    assert flash["price"] == {
        "cacheHit": 0.006,
        "cacheMiss": 0.30,
        "output": 1.20,
        "offPeakFactor": 0.5,
    }
    assert (flash["defaultEffort"], flash["sentAs"]) == ("high", None)
    assert listed["deepseek-v4-pro"]["vision"] is False
    # Published per-account limits (DeepSeek's rate-limit page).
    assert (flash["concurrency"], listed["deepseek-v4-pro"]["concurrency"]) == (2500, 500)
    # Served but not known: listed, with no facts.
    unknown = listed["deepseek-experimental"]
    assert (unknown["contextWindow"], unknown["price"], unknown["vision"]) == (None, None, False)
    assert unknown["concurrency"] is None
    # Known legacy ids are listed with what they are sent as.
    assert listed["deepseek-v4-flash"]["sentAs"] == "deepseek-flash"

    table = await dsh.run("models")

    assert table.code == 0, table.stderr
    rows = {line.split()[0]: line for line in table.stdout.splitlines()[1:]}
    assert rows["deepseek-flash"].split()[1:4] == ["1M", "384K", "yes"]
    assert "0.006/0.3/1.2, x0.5 off peak" in rows["deepseek-flash"]
    assert rows["deepseek-v4-pro"].split()[3] == "no"
    assert rows["deepseek-v4-flash"].endswith("(legacy: sent as deepseek-flash)")
    assert rows["deepseek-experimental"].split()[1:] == ["?", "?", "no", "?"]


async def test_a_legacy_id_is_sent_as_deepseek_flash_and_noted_once_per_session(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="One."), Reply(text="Two."))

    first = await dsh.run("-p", "--model", "deepseek-v4-flash", "hi")
    second = await dsh.run("-p", "--continue", "--model", "deepseek-v4-flash", "again")

    notice = "deepseek/deepseek-v4-flash is a legacy id: requests are sent as deepseek-flash"
    assert first.stderr.count(notice) == 1, first.stderr
    assert notice not in second.stderr  # the resumed session was told already
    assert first.stdout == "One.\n"
    events = await dsh.checked_events()
    assert [e.type for e in events].count("model/renamed") == 1
    assert [request.body["model"] for request in fake_llm.requests] == ["deepseek-flash"] * 2


async def test_dsh_models_says_which_models_the_server_does_not_offer(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.script.models[:] = ["deepseek-flash"]  # this server has no pro

    listed = {e["id"]: e for e in json.loads((await dsh.run("models", "--json")).stdout)}

    assert listed["deepseek-flash"]["offered"] is True
    assert listed["deepseek-v4-pro"]["offered"] is False
    assert listed["deepseek-v4-flash"]["offered"] is True  # sent as deepseek-flash
    table = await dsh.run("models")
    rows = {line.split()[0]: line for line in table.stdout.splitlines()[1:]}
    assert rows["deepseek-v4-pro"].endswith("(not offered by deepseek: known to dsh only)")
    assert "not offered" not in rows["deepseek-flash"]


async def test_dsh_models_says_when_the_listing_cannot_be_read(dsh: Dsh) -> None:
    dsh.environment["DEEPSEEK_BASE_URL"] = "http://127.0.0.1:9"  # nobody listens there

    table = await dsh.run("models")

    assert table.code == 0, table.stderr
    first = table.stdout.splitlines()[0]
    assert first == "deepseek's model listing could not be read: these are the models dsh knows."
    assert "deepseek-flash" in table.stdout
    assert "not offered" not in table.stdout
