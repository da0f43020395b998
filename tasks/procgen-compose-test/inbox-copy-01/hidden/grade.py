"""Generated grader (clawgym_env.task.procgen): 1.0 only if every check holds, else 0.0."""
import json
from pathlib import Path

CHECKS = json.loads('[{"op": "text", "path": "copy.txt", "text": "note 479\\nnote 997\\nnote 577\\n"}, {"op": "text", "path": "drop/item_384.txt", "text": "note 479\\nnote 997\\nnote 577\\n"}]')


def _ok(root, c):
    path = root / c["path"]
    if c["op"] == "absent":
        return not path.exists() and not path.is_symlink()
    if c["op"] == "dir":
        return path.is_dir() and not path.is_symlink()
    if not path.is_file() or path.is_symlink():
        return False
    text = path.read_text(encoding="utf-8")
    if c["op"] == "number":
        return text.strip() == str(c["value"])
    return text == c["text"] or text == c["text"].rstrip("\n")


def grade(transcript, workspace_path):
    root = Path(workspace_path)
    try:
        ok = all(_ok(root, c) for c in CHECKS)
    except Exception:
        ok = False
    return {"correct": 1.0 if ok else 0.0}
