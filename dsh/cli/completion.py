"""``dsh completion bash|zsh|fish``: shell completion made from the real parsers.

The scripts are generated from :func:`dsh.cli.build_parser` (the flags of a run),
:func:`dsh.cli.build_command_parser` (the core's commands) and the command line
parsers of the plugins found, by walking their actions, so a flag or command added
there is completed with no edit here. Each script is static data and a small walker:
a Tab costs no Python start. It completes commands and their actions, flags, the
choices of a flag that has them, and files for everything else (a prompt, a path).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field

SHELLS = ("bash", "zsh", "fish")
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:=+-]*$|^--?[A-Za-z0-9][A-Za-z0-9_-]*$")


@dataclass
class Node:
    """What may follow a command path: its flags (with their choices, if a flag takes
    a value) and its subcommands."""

    options: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    """Flag -> None (takes no value), () (a free value), or its choices."""
    commands: dict[str, Node] = field(default_factory=dict)
    choices: list[str] = field(default_factory=list)
    """The choices of its positional arguments (``dsh completion SHELL``)."""

    @property
    def words(self) -> list[str]:
        """What a word that is no flag may be here."""
        return [*self.commands, *self.choices]


def walk(parser: argparse.ArgumentParser) -> Node:
    node = Node()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                node.commands[name] = walk(sub)
            continue
        if not action.option_strings and action.choices:
            node.choices.extend(str(c) for c in action.choices)
        for option in action.option_strings:
            if action.nargs == 0:
                node.options[option] = None
            else:
                node.options[option] = tuple(str(c) for c in action.choices or ())
    return node


def command_tree(
    main: argparse.ArgumentParser,
    commands: argparse.ArgumentParser,
    plugin_parsers: dict[str, argparse.ArgumentParser] | None = None,
) -> Node:
    """Every command line dsh takes: the run's flags (``main``) at the top, the core's
    commands and the plugins' commands under it."""
    root = walk(main)
    root.commands.update(walk(commands).commands)
    for name, parser in (plugin_parsers or {}).items():
        root.commands.setdefault(name, walk(parser))
    return root


def plugin_parsers() -> dict[str, argparse.ArgumentParser]:
    """The parsers of the commands the plugins found add (``dsh mcp ...``)."""
    from dsh.kernel import discover

    parsers: dict[str, argparse.ArgumentParser] = {}
    for candidate in discover():
        for command in candidate.plugin.cli if candidate.plugin is not None else ():
            parser = argparse.ArgumentParser(prog=f"dsh {command.name}")
            command.configure(parser)
            parsers.setdefault(command.name, parser)
    return parsers


def _paths(node: Node, path: str = "") -> list[tuple[str, Node]]:
    """Each command path ("" for the top, "/sessions/list" below it) and its node."""
    found = [(path, node)]
    for name, sub in node.commands.items():
        found.extend(_paths(sub, f"{path}/{name}"))
    return found


def _words(words: list[str] | tuple[str, ...]) -> str:
    for word in words:
        # Everything a parser names is a plain word; anything else would need quoting
        # in three shells' syntaxes, and is a parser to fix rather than a script to bend.
        if not _WORD.match(word):
            raise ValueError(f"cannot complete the word {word!r}: not a plain word")
    return " ".join(words)


def script(shell: str, tree: Node) -> str:
    paths = _paths(tree)
    if shell == "bash":
        return _bash(paths)
    if shell == "zsh":
        return _zsh(paths)
    if shell == "fish":
        return _fish(paths)
    raise ValueError(f"no completion for the shell {shell!r}; shells: {', '.join(SHELLS)}")


def _value_cases(paths: list[tuple[str, Node]]) -> list[tuple[str, str]]:
    """("path flag", choices) for every flag that takes a value; "" choices: a free value."""
    cases = []
    for path, node in paths:
        for option, choices in node.options.items():
            if choices is not None:
                cases.append((f"{path} {option}", _words(choices)))
    return cases


def _bash(paths: list[tuple[str, Node]]) -> str:
    lines = [
        '# dsh completion for bash: eval "$(dsh completion bash)" (made by dsh completion)',
        "_dsh() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
        '    local path="" word i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        word="${COMP_WORDS[i]}"',
        '        case "$path/$word" in',
    ]
    below = [path for path, _ in paths if path]
    if below:
        lines.append("            " + "|".join(f'"{p}"' for p in below) + ') path="$path/$word" ;;')
    lines += ["        esac", "    done", '    case "$path $prev" in']
    for key, choices in _value_cases(paths):
        # A free value (a model id, a path): nothing offered, so -o default offers files.
        reply = f'COMPREPLY=($(compgen -W "{choices}" -- "$cur")); ' if choices else ""
        lines.append(f'        "{key}") {reply}return ;;')
    lines += ["    esac", '    local options="" commands=""', '    case "$path" in']
    for path, node in paths:
        lines.append(
            f'        "{path}") options="{_words(list(node.options))}"; '
            f'commands="{_words(node.words)}" ;;'
        )
    lines += [
        "    esac",
        "    if [[ $cur == -* ]]; then",
        '        COMPREPLY=($(compgen -W "$options" -- "$cur"))',
        "    elif [[ -n $commands ]]; then",
        '        COMPREPLY=($(compgen -W "$commands" -- "$cur"))',
        "    fi",
        "}",
        "complete -o default -F _dsh dsh",
        "",
    ]
    return "\n".join(lines)


def _zsh(paths: list[tuple[str, Node]]) -> str:
    lines = [
        "#compdef dsh",
        "# dsh completion for zsh: source <(dsh completion zsh), or save it as _dsh in",
        "# a folder of $fpath (made by dsh completion)",
        "_dsh() {",
        '    local where="" word i',
        "    for (( i = 2; i < CURRENT; i++ )); do",
        "        word=${words[i]}",
        '        case "$where/$word" in',
    ]
    below = [path for path, _ in paths if path]
    if below:
        lines.append(
            "            (" + "|".join(f'"{p}"' for p in below) + ') where="$where/$word" ;;'
        )
    lines += ["        esac", "    done", '    case "$where ${words[CURRENT-1]}" in']
    for key, choices in _value_cases(paths):
        action = f"compadd -- {choices}" if choices else "_files"
        lines.append(f'        ("{key}") {action}; return ;;')
    lines += ["    esac", "    local -a options commands", '    case "$where" in']
    for path, node in paths:
        lines.append(
            f'        ("{path}") options=({_words(list(node.options))}); '
            f"commands=({_words(node.words)}) ;;"
        )
    lines += [
        "    esac",
        "    if [[ ${words[CURRENT]} == -* ]]; then",
        "        compadd -- $options",
        "    elif (( ${#commands} )); then",
        "        compadd -- $commands",
        "    else",
        "        _files",
        "    fi",
        "}",
        "if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then",
        '    _dsh "$@"',
        "else",
        "    compdef _dsh dsh",
        "fi",
        "",
    ]
    return "\n".join(lines)


def _fish(paths: list[tuple[str, Node]]) -> str:
    lines = [
        "# dsh completion for fish: dsh completion fish | source, or save it as",
        "# ~/.config/fish/completions/dsh.fish (made by dsh completion)",
        "function __dsh_complete",
        "    set -l words (commandline -opc)",
        "    set -l cur (commandline -ct)",
        '    set -l where ""',
        "    for word in $words[2..-1]",
        '        switch "$where/$word"',
    ]
    below = [path for path, _ in paths if path]
    if below:
        lines.append("            case " + " ".join(f'"{p}"' for p in below))
        lines.append('                set where "$where/$word"')
    lines += ["        end", "    end", '    switch "$where $words[-1]"']
    for key, choices in _value_cases(paths):
        lines.append(f'        case "{key}"')
        if choices:
            lines.append(f"            printf '%s\\n' {choices}")
        else:
            lines.append('            __fish_complete_path "$cur"')
        lines.append("            return")
    lines += ["    end", "    set -l options", "    set -l commands", '    switch "$where"']
    for path, node in paths:
        lines.append(f'        case "{path}"')
        lines.append(f"            set options {_words(list(node.options))}")
        lines.append(f"            set commands {_words(node.words)}")
    lines += [
        "    end",
        "    if string match -q -- '-*' \"$cur\"",
        "        printf '%s\\n' $options",
        "    else if set -q commands[1]",
        "        printf '%s\\n' $commands",
        "    else",
        '        __fish_complete_path "$cur"',
        "    end",
        "end",
        "complete -c dsh -f -a '(__dsh_complete)'",
        "",
    ]
    return "\n".join(lines)


def run_completion(
    shell: str, main: argparse.ArgumentParser, commands: argparse.ArgumentParser
) -> int:
    print(script(shell, command_tree(main, commands, plugin_parsers())), end="")
    return 0
