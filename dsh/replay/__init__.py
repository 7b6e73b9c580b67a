"""``dsh replay``: a stored or exported session run again offline and compared, step by
step, with what it recorded (see docs/replay.md).

- :mod:`dsh.replay.recorded`: what a log says each request, answer, tool result and
  input was;
- :mod:`dsh.replay.serve`: the stand-in answering the replaying loop from the log;
- :mod:`dsh.replay.run`: the scratch runtime and agent the inputs are fed to;
- :mod:`dsh.replay.compare`: the structured diff;
- :mod:`dsh.replay.export`: the self-contained, redacted replay file;
- :mod:`dsh.replay.render`: the transcript as the TUI shows it, at a fixed size;
- :mod:`dsh.replay.cli`: the command line.
"""
