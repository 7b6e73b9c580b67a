"""Allowed programs that run code of their own (``sed e``, ``rg --pre``, ``awk
system()``...).
"""

from __future__ import annotations

from tests.security.corpus.model import Group, allow, ask

OTHER_PROGRAMS = Group(
    "programs-that-run-code",
    "default",
    allow=(
        "bash(sed:*)",
        "bash(rg:*)",
        "bash(sort:*)",
        "bash(man:*)",
        "bash(tar:*)",
        "bash(less:*)",
        "bash(awk:*)",
        "bash(printf:*)",
        "bash(test:*)",
        "bash(read:*)",
        "bash(ssh:*)",
        "bash(zip:*)",
        "bash(rsync:*)",
        "bash(vim:*)",
        "bash(find:*)",
    ),
    cases=(
        *ask(
            "sed -n '1e touch {P}' /dev/null",
            "sed 's/x/touch {P}/e' /dev/null",
            "sed -n 'w {P}' /dev/null",
            "sed -f script.sed /dev/null",
            "rg --pre 'touch {P}' x",
            "rg --pre='touch {P}' x",
            "sort --compress-program='touch {P}' /dev/null",
            "sort -o {P} /dev/null",
            "man -P 'touch {P}' ls",
            "man --html='touch {P}' ls",
            "tar --to-command='touch {P}' -xf a.tar",
            "tar -I 'touch {P}' -xf a.tar",
            "tar --checkpoint=1 --checkpoint-action=exec='touch {P}' -cf /dev/null .",
            "less '+!touch {P}' /dev/null",
            "awk 'BEGIN{system(\"touch {P}\")}'",
            "awk 'BEGIN{print 1 > \"{P}\"}'",
            "awk 'BEGIN{\"touch {P}\" | getline}'",
            "awk -f prog.awk",
            "printf -v 'a[$(touch {P})]' x",
            "test -v 'a[$(touch {P})]'",
            "[ -v 'a[$(touch {P})]' ]",
            "read 'a[$(touch {P})]' <<< x",
            "ssh -o ProxyCommand='touch {P}' host",
            "ssh -oProxyCommand='touch {P}' host",
            "vim -c ':!touch {P}' -c ':q!'",
            "zip -TT 'touch {P}' a.zip x",
            "rsync -e 'touch {P}' a b:",
            "find . -maxdepth 0 -exec touch {P} +",
        ),
        *allow(
            "sed -n '1,3p' /dev/null",
            "sed 's/a/b/g' /dev/null",
            "sed -e 's|a|b|' -e '/x/d' /dev/null",
            "rg --version",
            "sort /dev/null",
            "awk '{print $1}' /dev/null",
            "awk -F: '$1 > 3 {print}' /dev/null",
            "printf '%s\\n' x",
            "test -f x",
        ),
    ),
)
