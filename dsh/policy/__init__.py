"""The permission policy: facts about a call in, a verdict out.

A call's facts are its :class:`~dsh.policy.action.Action` (what its tool says it
would do) and the names of its tool; the policy reads the settings' rules, the
session's grants and the mode, and says allow, ask or deny, with the reason and the
grant it may offer (:mod:`dsh.policy.permissions`). Beneath it: the command analysis
that fails closed (``shell``, ``shell_lexer``, ``shell_words``, ``programs``,
``readers``, ``read_only_commands``), the protected paths and secret files
(``protected``, ``globs``), which repositories name programs of their own
(``git_config``), the smallest rule a grant offers (``grant_policy``), signed grants
(``grants``) and what a sandboxed call needs of the person (``escalation``).

Nothing here asks anyone, logs an event or runs a tool: that is the pipeline's
(:mod:`dsh.tools`). Plugins import these names from ``dsh.tools`` (and
``dsh.tools.protected``, ``dsh.tools.shell``), as before the policy had a package.
"""
