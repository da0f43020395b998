"""Each of f01.txt..f20.txt must hold "file NN"; the score is the share that do."""

from pathlib import Path


def grade(transcript, workspace_path):
    ok = 0
    for n in range(1, 21):
        p = Path(workspace_path) / f"f{n:02d}.txt"
        ok += p.is_file() and p.read_text(encoding="utf-8").strip() == f"file {n:02d}"
    return {"files_correct": ok / 20}
