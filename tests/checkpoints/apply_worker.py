"""A process that applies one restore and can be killed at any moment: it reads the
restore (``checkpoint/restoring``'s payload, as JSON) from a file, says ``ready`` once
everything is loaded, waits for a line on stdin, then applies it.

``python -m tests.checkpoints.apply_worker HOME ROOT RESTORE_JSON TREE``
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from dsh.checkpoints.restore import apply_writes
from dsh.checkpoints.store import CheckpointStore
from dsh.session import RestoreStarted


async def main(home: Path, root: Path, restore: Path, tree: str) -> None:
    started = RestoreStarted.model_validate_json(restore.read_text())
    store = await CheckpointStore.open(home, root)
    blobs = await store.read_blobs(w.blob for w in started.writes if w.blob is not None)
    folders = await store.folders(tree)
    print("ready", flush=True)
    sys.stdin.readline()
    apply_writes(store.root, started.restore_id, started.writes, blobs, folders)
    print("done", flush=True)


if __name__ == "__main__":
    home, root, restore, tree = sys.argv[1:5]
    asyncio.run(main(Path(home), Path(root), Path(restore), tree))
